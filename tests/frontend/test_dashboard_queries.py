"""The dashboard's queries do not grow with its rows (found by make bench-load, #35)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs.models import Job
from proxy.models import SessionLink
from tests import factories

pytestmark = pytest.mark.django_db


def notebooks(owner, cluster, n: int) -> None:
    for _ in range(n):
        job = factories.job(owner, cluster, kind=Job.Kind.NOTEBOOK, state=Job.State.RUNNING)
        SessionLink.objects.create(job=job, state=SessionLink.State.READY)


def dashboard_queries(client) -> tuple[int, bytes]:
    with CaptureQueriesContext(connection) as queries:
        response = client.get("/")
    assert response.status_code == 200
    return len(queries), response.content


def test_dashboard_queries_stay_flat_as_notebook_rows_grow(
    client, owner, cluster, django_capture_on_commit_callbacks
):
    factories.partition(cluster, "cpu")
    client.force_login(owner)
    notebooks(owner, cluster, 1)
    one, page = dashboard_queries(client)
    assert page.count(b"data-open-session") == 1
    with django_capture_on_commit_callbacks(execute=True):  # listings renew on commit
        notebooks(owner, cluster, 14)
    fifteen, page = dashboard_queries(client)
    assert page.count(b"data-open-session") == 15  # every row's link is drawn
    assert fifteen == one
