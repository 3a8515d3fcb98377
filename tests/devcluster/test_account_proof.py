"""A cluster user is proven, never typed (#39), on the real path: the dev cluster in
certificate mode, hpcuser2 signed in through the real provider (glewlwyd, `make idp`).

Before #39 hpcuser2 could add `hpcuser` on the Account page and the portal signed
certificates for it: a job printed WHOAMI=hpcuser and sshd logged
`Accepted publickey for hpcuser ... ID portal:hpcuser2:hpcuser@...`."""

import pytest
from django.test import Client
from django.urls import reverse

from clusters.models import ClusterAccount
from jobs import tasks
from jobs.models import Job
from tests import factories, idp
from tests.devcluster.helpers import SshdLog, run_until

pytestmark = [pytest.mark.devcluster, pytest.mark.idp, pytest.mark.django_db]


@pytest.fixture
def cert_cluster(provider_mapped_devcluster):
    return provider_mapped_devcluster[0]  # (hpcuser is nobody's there)


@pytest.fixture
def hpcuser2(idp_provider, cert_cluster, settings):
    """hpcuser2's browser, signed in through the provider."""
    idp.portal_settings(idp_provider, settings, PORTAL_OIDC_ALLOWED_GROUPS=["portal-users"])
    client = Client()
    with idp.redirect_uris(idp_provider, idp.TEST_CLIENT_BASE):
        answer = idp.sign_in_to_portal(idp_provider, client, "hpcuser2")
    assert answer.status_code == 302, answer.content[:500]
    return client


def whoami_job(owner, cluster) -> Job:
    job = factories.job(owner, cluster, "echo WHOAMI=$(id -un)")
    tasks.submit_job.apply(args=[job.pk])
    job.refresh_from_db()
    return job


def test_a_signed_in_person_cannot_become_another_cluster_user(
    hpcuser2, cert_cluster, devcluster_info
):
    sshd = SshdLog(devcluster_info["sshd_log"])
    account = ClusterAccount.objects.get(cluster=cert_cluster, user__username="hpcuser2")
    assert account.username == "hpcuser2" and account.mapped_by == "user_map"
    person = account.user

    # The Account page: the cluster is not offered, a forged post is refused.
    page = hpcuser2.get("/account/").content.decode()
    assert 'name="username"' not in page
    forged = hpcuser2.post("/account/", {"cluster": cert_cluster.pk, "username": "hpcuser"})
    assert "Select a valid choice" in forged.content.decode()
    # The admin is not theirs; the API has no way to write an account at all.
    assert hpcuser2.get(reverse("admin:jobs_clusteraccount_add")).status_code == 302
    schema = hpcuser2.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    writes = {
        path
        for path, operations in schema["paths"].items()
        if "account" in path and {"post", "put", "patch"} & set(operations)
    }
    assert writes == set()
    assert list(ClusterAccount.objects.filter(user=person).values_list("username", flat=True)) == [
        "hpcuser2"
    ]

    # Their own jobs run as themselves, over certificates.
    mine = run_until(whoami_job(person, cert_cluster), {"completed", "failed"}, timeout=120)
    assert mine.state == Job.State.COMPLETED, mine.message

    # hpcuser written straight into the database: the signer refuses, nothing logs in.
    ClusterAccount.objects.filter(pk=account.pk).update(username="hpcuser")
    hijack = whoami_job(person, cert_cluster)
    assert hijack.state == Job.State.SUBMIT_FAILED
    assert "changed outside the portal" in hijack.message
    # A row typed as hpcuser (the pre-#39 Account page's) is refused as well.
    ClusterAccount.objects.filter(pk=account.pk).update(mapped_by="")
    typed = whoami_job(person, cert_cluster)
    assert typed.state == Job.State.SUBMIT_FAILED and "typed, not proven" in typed.message

    log = sshd.text()
    assert "Accepted publickey for hpcuser2 " in log  # the first job's login
    assert "portal:hpcuser2:hpcuser2@" in log
    # (Other tests' processes may log in as hpcuser meanwhile: none of it for hpcuser2.)
    as_hpcuser = [line for line in log.splitlines() if "Accepted publickey for hpcuser " in line]
    assert not [line for line in as_hpcuser if "portal:hpcuser2:" in line]
    assert "portal:hpcuser2:hpcuser@" not in log
