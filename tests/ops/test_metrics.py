"""/metrics: who may read it, what it counts (ops/)."""

import json

import pytest
from prometheus_client import REGISTRY

from common import prometheus as metrics
from ops.queues import published_at
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("command", "name"),
    [
        ("sbatch --parsable /home/u/job.sh", "sbatch"),
        ("/usr/bin/squeue -h -o '%i'", "squeue"),
        ("env SLURM_TIME_FORMAT=standard sacct -X -j 12", "sacct"),
        ("LC_ALL=C condor_q -json 12.0", "condor_q"),
        # A read in a clean environment (clusters.ssh.run_scheduler_command).
        ("/usr/bin/env -i PATH=/usr/bin LANG=C squeue -h --json", "squeue"),
        ("env -i -- sacct -X", "sacct"),
        ("sbatch -i job.sh", "sbatch"),
        ("rm -rf -- '/home/u/x'", "other"),
        ("alice-job-name-1234 --flag", "other"),  # never a name from the job as a label
        ("sbatch 'unclosed", "other"),
        ("bash -c 'set -e; sbatch job.sh' portal-submit /home/u/w name", "sbatch"),
        ("bash -c 'echo' portal-tag /home/u/w", "portal-tag"),
        ("bash -c 'echo' alice-script /home/u/w", "other"),  # not one of the portal's names
        ("", "other"),
    ],
)
def test_a_command_is_counted_under_its_program_or_other(command, name):
    assert metrics.command_name(command) == name


def test_the_oldest_task_age_reads_only_a_bounded_envelope():
    assert published_at(json.dumps({"headers": {"portal_published_at": 1700000000.5}})) == (
        1700000000.5
    )
    for raw in (None, b"{", json.dumps([1]), json.dumps({"headers": {"portal_published_at": "x"}})):
        assert published_at(raw) is None
    huge = json.dumps({"headers": {"portal_published_at": 1.0}, "body": "x" * 300_000})
    assert published_at(huge) is None


def _value(name, labels):
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_metrics_answer_the_configured_networks_only(client, settings):
    answer = client.get("/metrics", REMOTE_ADDR="127.0.0.1")
    assert answer.status_code == 200
    assert answer["Content-Type"].startswith("text/plain; version=")
    assert b"portal_celery_queue_length{queue=" in answer.content
    refused = client.get("/metrics", REMOTE_ADDR="192.0.2.7")
    assert refused.status_code == 403 and b"PORTAL_METRICS_NETWORKS" in refused.content
    settings.PORTAL_METRICS_NETWORKS = ["192.0.2.0/24"]
    assert client.get("/metrics", REMOTE_ADDR="192.0.2.7").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 403


def test_a_staff_token_with_the_metrics_scope_reads_them_from_anywhere(client):
    from django.core.exceptions import ValidationError

    from identity.tokens import ApiToken

    staff, person = factories.staff_user("ops", "pw"), factories.user("alice")
    with pytest.raises(ValidationError, match="metrics scope"):
        ApiToken.issue(person, "scrape", scopes="metrics")
    _, scoped = ApiToken.issue(staff, "scrape", scopes="metrics")
    _, unscoped = ApiToken.issue(staff, "api", scopes="read")
    far = {"REMOTE_ADDR": "192.0.2.7"}
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {scoped}", **far).status_code == 200
    for token in (unscoped, "pp_unknown", scoped + "x"):
        assert (
            client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}", **far).status_code == 403
        )


def test_a_metrics_token_follows_the_identity_providers_word(client, settings):
    """Before: /metrics checked the token's scope and staff flag, not the confirmation
    rule every other API call applies: a staff member withdrawn at the provider kept
    reading the metrics."""
    from identity.tokens import ApiToken

    settings.PORTAL_OIDC_ISSUER = "https://idp.example.org"
    settings.PORTAL_OIDC_CLIENT_ID = "portal"
    staff = factories.staff_user("ops2", "pw")
    _, scoped = ApiToken.issue(staff, "scrape", scopes="metrics")
    far = {"REMOTE_ADDR": "192.0.2.7", "HTTP_AUTHORIZATION": f"Bearer {scoped}"}
    factories.identity(staff, settings.PORTAL_OIDC_ISSUER, "ops2")
    assert client.get("/metrics", **far).status_code == 200
    factories.identity(staff, settings.PORTAL_OIDC_ISSUER, "ops2", confirmed_ago=None)
    assert client.get("/metrics", **far).status_code == 403


def test_requests_are_counted_by_route_name_never_by_path(client):
    labels = {"view": "healthz", "method": "GET", "status": "200"}
    before = _value("portal_http_request_duration_seconds_count", labels)
    client.get("/healthz")
    assert _value("portal_http_request_duration_seconds_count", labels) == before + 1
    client.get("/no/such/page/alice-secret")
    exposition = client.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode()
    assert "alice-secret" not in exposition
    assert 'view="unmatched"' in exposition
