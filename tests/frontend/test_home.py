import pytest

from jobs.models import ContainerImage

pytestmark = pytest.mark.django_db


def test_home_requires_sign_in(client):
    response = client.get("/")
    assert response.status_code == 302 and "login" in response["Location"]


def test_home_lists_only_offered_images(client, owner):
    ContainerImage.objects.create(name="Offered one", slug="a", runtime="none")
    ContainerImage.objects.create(name="Old one", slug="b", runtime="none", deprecated=True)
    ContainerImage.objects.create(name="Hidden one", slug="c", runtime="none", enabled=False)
    client.force_login(owner)
    body = client.get("/").content.decode()
    assert "Offered one" in body
    assert "Old one" not in body and "Hidden one" not in body
    assert "You have no jobs yet." in body
