"""Launch knows the calendar, on the real dev cluster: a maintenance reservation made with
scontrol (MAINT, every node, starting in three hours) is read for the launch form with its
times, a six-hour job is told it would run into it, waits for it on Slurm ("Reserved for
maintenance"), and its page's one click lowers its time limit (scontrol update, as its
owner) so that it starts."""

import re
import subprocess
from datetime import datetime, timedelta

import pytest
from django.core.cache import cache
from django.utils import timezone

from jobs import tasks
from tests import factories
from tests.devcluster.helpers import run_until, sync_until

# The file makes reservations on the nodes: it runs while no other Slurm test does (tests/conftest.py).
pytestmark = [pytest.mark.devcluster, pytest.mark.django_db, pytest.mark.alone]

NAME = "portal_test_maint"


@pytest.fixture
def maintenance(devcluster_info):
    subprocess.run(["scontrol", "delete", f"ReservationName={NAME}"], capture_output=True)
    made = subprocess.run(
        [
            "scontrol",
            "create",
            "reservation",
            f"ReservationName={NAME}",
            "StartTime=now+3hours",
            "Duration=02:00:00",
            "Nodes=ALL",
            "Flags=MAINT,IGNORE_JOBS",
            "Users=root",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert made.returncode == 0, made.stderr
    cache.delete_many([f"reservations:{pk}" for pk in range(1, 50)])
    yield timezone.now() + timedelta(hours=3)
    subprocess.run(["scontrol", "delete", f"ReservationName={NAME}"], capture_output=True)


def test_the_form_warns_and_the_shortened_job_starts(
    devcluster,
    owner,
    client,
    maintenance,
    monkeypatch,
    settings,
    django_capture_on_commit_callbacks,
):
    settings.PORTAL_RESERVATIONS_CACHE = 0
    monkeypatch.setattr(
        tasks.lower_time_limit, "delay", lambda *a: tasks.lower_time_limit.apply(args=a)
    )
    client.force_login(owner)
    (found,) = client.get(f"/launch/calendar/?cluster={devcluster.name}").json()["maintenance"]
    assert found["name"] == NAME and {"gpu", "cpu"} <= set(found["partitions"])
    starts = datetime.fromisoformat(found["start"])
    assert abs((starts - maintenance).total_seconds()) < 120  # the right time
    assert datetime.fromisoformat(found["end"]) - starts == timedelta(hours=2)

    api = factories.api_client(owner)
    image = factories.image()
    created = api.post(
        "/api/v1/jobs/",
        {
            "image": image.slug,
            "command": "sleep 30",
            "partition": "gpu",
            "gpus": 0,
            "time_limit": 6 * 60,
            "cluster": devcluster.name,
        },
        format="json",
    )
    assert created.status_code == 201, created.content
    (warning,) = created.json()["warnings"]
    assert f"A 6 h run would run into the maintenance {NAME} (" in warning
    assert re.search(r"2 h 4\d min or less starts before it", warning), warning

    job = factories.job(owner, devcluster, "sleep 30", partition="gpu", time_limit_minutes=360)
    tasks.submit_job.apply(args=[job.pk])
    job = sync_until(
        job,
        lambda j: j if j.state == "pending" and "maintenance" in j.pending_reason else None,
        60,
        "to wait for the maintenance",
    )
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    offered = re.search(r'name="minutes" value="(\d+)"', page)
    assert offered, (job.pending_reason, page[page.find("data-maintenance") - 200 :][:800])
    fits = int(offered[1])
    assert 160 <= fits < 170 and "data-shorten" in page
    with django_capture_on_commit_callbacks(execute=True):  # the queued task runs here
        assert client.post(f"/jobs/{job.pk}/shorten/", {"minutes": fits}).status_code == 302
    job.refresh_from_db()
    assert job.time_limit_minutes == fits
    assert run_until(job, {"running", "completed"}, timeout=90).state in ("running", "completed")
    assert job.events.filter(message=f"Time limit lowered to {fits} minutes.").exists()
