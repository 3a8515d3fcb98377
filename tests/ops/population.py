"""A small portal's population for the backup tests, and what its pages say, both run in a
subprocess on the database under test (``manage.py shell -c``): the same code reads the
original and the restored database."""

from __future__ import annotations

import json
from importlib import import_module


def either(*names: str):
    """The first of ``names`` that imports: the script runs on this checkout's code and on
    the previous release's, whose apps were laid out otherwise (``jobs.metrics`` before
    ``metrics``)."""
    for name in names[:-1]:
        try:
            return import_module(name)
        except ModuleNotFoundError:
            continue
    return import_module(names[-1])


def populate() -> None:
    from jobs.models import Job

    ingest = either("metrics.ingest", "jobs.metrics.ingest")
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
    from django.test.utils import override_settings

    from jobs.models import Job

    client = Client()
    owner = Job.objects.first().owner
    client.force_login(owner)
    # The rows as stored, not a listing cached by an earlier snapshot (jobs/listing.py): a
    # release before the cache (the previous one, in the upgrade test) writes without
    # ending it, and a listing may then lag by up to PORTAL_LISTING_CACHE_SECONDS.
    with override_settings(PORTAL_LISTING_CACHE_SECONDS=0):
        seen = {"jobs": client.get("/api/v1/jobs/").json()["results"]}
    for job in seen["jobs"]:
        seen[f"metrics {job['name']}"] = client.get(f"/api/v1/jobs/{job['id']}/metrics/").json()
    seen["experiments"] = client.get("/api/v1/experiments/").json()
    # The points as stored, whatever the API of the release reading them can answer.
    models = either("metrics.models", "jobs.metrics.models")
    seen["stored"] = sorted(
        [
            job.name,
            series.key,
            sorted(models.MetricPoint.objects.filter(series=series).values_list("step", flat=True)),
        ]
        for job in Job.objects.all()
        for series in models.MetricSeries.objects.filter(job=job)
    )
    print(json.dumps(seen, sort_keys=True))


def smoke() -> None:
    """The owner's pages answer (each a 200): what a person opens first after an upgrade."""
    from django.test import Client

    Experiment = either("experiments.models", "jobs.experiments.models").Experiment
    from jobs.models import Job

    client = Client()
    job = Job.objects.order_by("pk").first()
    client.force_login(job.owner)
    ids = ",".join(str(pk) for pk in Job.objects.values_list("pk", flat=True))
    pages = ["/", f"/jobs/{job.pk}/", "/experiments/", f"/compare/?jobs={ids}", "/usage/"]
    pages.append(f"/experiments/{Experiment.objects.first().pk}/")
    pages.append(f"/api/v1/jobs/{job.pk}/")
    answers = {page: client.get(page).status_code for page in pages}
    print(json.dumps(answers))
    assert set(answers.values()) == {200}, answers


def write_after_upgrade() -> None:
    """What an instance of the previous release writes while the next one's schema is in
    place (a rolling upgrade): a job, its points, an audit row, a token."""
    AuditEvent = either("identity.audit.models", "jobs.models.audit").AuditEvent
    from jobs.models import Job

    ingest = either("metrics.ingest", "jobs.metrics.ingest")
    from tests import factories

    job = Job.objects.order_by("pk").first()
    made = factories.training_job(job.owner, job.cluster, "running")
    ingest.ingest(made, [ingest.parse_record(r) for r in factories.metric_records(5)])
    AuditEvent.objects.create(action="submit", outcome="ok", target=f"job {made.pk}")
    factories.api_client(job.owner, "during the upgrade")
    print(made.pk)
