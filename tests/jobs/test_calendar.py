"""The cluster's calendar at launch: Slurm's reservations as scontrol prints them (captured
on the dev cluster), and what a time limit that runs into a maintenance is told."""

from datetime import datetime, timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from jobs.launch import calendar
from schedulers.seam import Reservation
from schedulers.slurm import reservations
from tests import factories

CAPTURED = Path(__file__).parents[1] / "schedulers/slurm/slurm_output/reservations.txt"


def test_captured_reservation_and_the_partitions_whose_nodes_it_takes():
    (found,) = reservations.parse(CAPTURED.read_text())
    assert found.name == "capture_maint" and found.maintenance
    assert found.partitions == {"gpu", "cpu"}
    assert found.end - found.start == timedelta(hours=4)
    assert timezone.is_aware(found.start)


def test_unreadable_reservations_are_skipped_and_nodes_matter():
    text = "\n".join(
        [
            "ReservationName=$(reboot) StartTime=2026-11-29T12:00:00 EndTime=2026-11-29T13:00:00",
            "ReservationName=backwards StartTime=2026-11-29T12:00:00 EndTime=2026-11-29T11:00:00",
            "ReservationName=never StartTime=Unknown EndTime=2026-11-29T11:00:00",
            "ReservationName=gpuonly StartTime=2026-11-29T12:00:00 EndTime=2026-11-29T13:00:00 "
            "Nodes=g[01-02] PartitionName=(null) Flags=MAINT",
            "ReservationName=course StartTime=2026-11-29T12:00:00 EndTime=2026-11-29T13:00:00 "
            "Nodes=c01 Flags=SPEC_NODES",
            "#partitions",
            "gpu|g[01-04]",
            "cpu|c[01-08]",
            "bad name|c01",
        ]
    )
    found = {r.name: r for r in reservations.parse(text)}
    assert sorted(found) == ["course", "gpuonly"]
    assert found["gpuonly"].partitions == {"gpu"} and found["gpuonly"].maintenance
    assert found["course"].partitions == {"cpu"} and not found["course"].maintenance


NOW = datetime(2026, 11, 24, 9, 0, tzinfo=timezone.get_current_timezone())
MAINT = Reservation(
    "maint",
    NOW + timedelta(hours=32),
    NOW + timedelta(hours=40),
    True,
    frozenset({"gpu"}),
)


def test_a_limit_that_runs_into_maintenance_is_told_how_long_starts_before_it():
    clash = calendar.clash([MAINT], "gpu", 48 * 60, NOW)
    assert clash is not None
    assert clash.fits == 32 * 60 - 10
    assert clash.text.startswith("A 48 h run would run into the maintenance maint (")
    assert "31 h 50 min or less starts before it" in clash.text
    assert calendar.clash([MAINT], "gpu", 31 * 60, NOW) is None
    assert calendar.clash([MAINT], "cpu", 48 * 60, NOW) is None  # not its nodes
    course = Reservation("course", MAINT.start, MAINT.end, False, frozenset({"gpu"}))
    assert calendar.clash([course], "gpu", 48 * 60, NOW) is None  # not maintenance
    begun = calendar.clash([MAINT], "gpu", 60, NOW + timedelta(hours=33))
    assert begun is not None and begun.fits == 0 and "has begun" in begun.text


def in_two_hours() -> Reservation:
    """A maintenance of the gpu partition from two hours from now, for four hours."""
    now = timezone.now()
    return Reservation(
        "maint", now + timedelta(hours=2), now + timedelta(hours=6), True, frozenset({"gpu"})
    )


@pytest.mark.django_db
def test_the_api_says_it_when_it_launches_such_a_job(owner, cluster, monkeypatch, settings):
    settings.PORTAL_RESERVATIONS_CACHE = 0
    factories.account(cluster, owner, "hpcowner")
    soon = in_two_hours()
    monkeypatch.setattr(calendar, "upcoming", lambda cluster, user: [soon])
    api = factories.api_client(owner)
    image = factories.image()
    body = {"image": image.slug, "command": "python train.py", "partition": "gpu", "gpus": 1}
    long = api.post("/api/v1/jobs/", {**body, "time_limit": 240}, format="json")
    assert long.status_code == 201, long.content
    (warning,) = long.json()["warnings"]
    assert "A 4 h run would run into the maintenance maint" in warning
    short = api.post("/api/v1/jobs/", {**body, "time_limit": 60}, format="json")
    assert short.json()["warnings"] == []


@pytest.mark.django_db
def test_a_job_waiting_for_maintenance_offers_its_owner_a_lower_limit(
    owner, outsider, cluster, client, monkeypatch, django_capture_on_commit_callbacks
):
    from jobs import tasks

    soon = in_two_hours()
    monkeypatch.setattr(calendar, "upcoming", lambda cluster, user: [soon])
    queued = []
    monkeypatch.setattr(tasks.lower_time_limit, "delay", lambda *a: queued.append(a))
    job = factories.job(
        owner,
        cluster,
        partition="gpu",
        state="pending",
        scheduler_job_id="7",
        time_limit_minutes=360,
        pending_reason="the requested nodes are not available (maintenance?)",
    )
    client.force_login(owner)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "A 6 h run would run into the maintenance maint" in page
    assert 'name="minutes" value="1' in page  # 1 h 49/50 min: 109 or 110
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post(f"/jobs/{job.pk}/shorten/", {"minutes": "110"}).status_code == 302
        client.post(f"/jobs/{job.pk}/shorten/", {"minutes": "400"})  # not lower: refused
        client.post(f"/jobs/{job.pk}/shorten/", {"minutes": "1e9"})
    assert queued == [(job.pk, 110, owner.pk)]
    assert len(queued) == 1
    client.force_login(outsider)
    assert client.post(f"/jobs/{job.pk}/shorten/", {"minutes": "100"}).status_code == 404
