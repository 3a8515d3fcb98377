"""A small portal's population for the backup tests, and what its pages say, both run in a
subprocess on the database under test (``manage.py shell -c``): the same code reads the
original and the restored database."""

from __future__ import annotations

import json


def populate() -> None:
    from jobs.metrics import ingest
    from jobs.models import Job
    from tests import factories

    owner = factories.user("owner", "pw")
    cluster = factories.cluster()
    factories.partition(cluster, "cpu")
    factories.account(cluster, owner, "hpcuser")
    for n, state in enumerate(["completed", "failed", "running", "pending", "completed"]):
        job = factories.training_job(owner, cluster, state)
        job.name = f"run {n} ✓"
        job.save()
        if state != "pending":
            records = [ingest.parse_record(r) for r in factories.metric_records(40 + n, rank=0)]
            ingest.ingest(job, records)
    factories.experiment_record(owner, cluster, name="lr sweep")
    factories.api_client(owner)  # (a token: tokens are restored too)
    assert Job.objects.count() == 5


def snapshot() -> None:
    """What the owner's API answers: the jobs, each one's metrics, the experiments."""
    from django.test import Client

    from jobs.models import Job

    client = Client()
    owner = Job.objects.first().owner
    client.force_login(owner)
    seen = {"jobs": client.get("/api/v1/jobs/").json()["results"]}
    for job in seen["jobs"]:
        seen[f"metrics {job['name']}"] = client.get(f"/api/v1/jobs/{job['id']}/metrics/").json()
    seen["experiments"] = client.get("/api/v1/experiments/").json()
    print(json.dumps(seen, sort_keys=True))
