"""manage.py seed_load (devtools/loadseed.py) at a tiny scale: the counts asked for, rows
consistent as the app's own writes leave them, a second run a no-op, SQLite refused."""

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.models import Count, F

from clusters.models import ClusterAccount
from devtools import loadseed
from experiments.models import Experiment, Trial
from jobs.models import Job
from metrics.models import MetricPoint, MetricSeries
from metrics.summary import Summary, rebuild

pytestmark = pytest.mark.django_db

SCALE = 0.001


@pytest.fixture
def postgres():
    if connection.vendor != "postgresql":
        pytest.skip("seed_load generates its rows with PostgreSQL's generate_series")


@pytest.fixture
def seeded(postgres, capsys):
    call_command("seed_load", "--scale", str(SCALE))
    return capsys.readouterr().out


def test_seeds_the_sizes_of_its_scale(seeded):
    sizes = loadseed.Sizes.at(SCALE)
    jobs = Job.objects.filter(cluster__name=loadseed.CLUSTER)
    assert jobs.filter(state__in=Job.FINAL_STATES).count() == sizes.finished
    assert jobs.filter(state__in=["pending", "running"]).count() == sizes.active
    assert Experiment.objects.filter(cluster__name=loadseed.CLUSTER).count() == sizes.experiments
    # A running experiment's waiting trials have no job yet, and take none from the counts.
    assert Experiment.objects.filter(state="running").exists()
    big = Experiment.objects.filter(cluster__name=loadseed.CLUSTER).order_by("uid").first()
    assert big.trials.count() == sizes.big_trials
    points = MetricPoint.objects.filter(series__job__cluster__name=loadseed.CLUSTER).count()
    assert points == sizes.points
    assert f"metric points: {sizes.points:,}" in seeded


def test_every_job_has_an_owner_with_an_account_on_the_cluster(seeded):
    jobs = Job.objects.filter(cluster__name=loadseed.CLUSTER)
    assert jobs.exists()
    assert not jobs.filter(cluster_account__isnull=True).exists()
    assert not jobs.exclude(cluster_account__user=F("owner")).exists()
    owners = set(jobs.values_list("owner", flat=True))
    with_accounts = set(
        ClusterAccount.objects.filter(cluster__name=loadseed.CLUSTER).values_list("user", flat=True)
    )
    assert owners <= with_accounts
    # Trials' jobs belong to their experiment's owner.
    trial_jobs = jobs.filter(trial__isnull=False)
    with_jobs = Trial.objects.filter(experiment__cluster__name="load").exclude(state="waiting")
    assert trial_jobs.count() == with_jobs.count()
    assert not trial_jobs.exclude(owner=F("trial__experiment__owner")).exists()


def test_series_counts_last_values_and_summaries_match_their_points(seeded):
    series = MetricSeries.objects.filter(job__cluster__name=loadseed.CLUSTER)
    assert series.exists()
    counted = dict(
        MetricPoint.objects.filter(series__in=series)
        .values_list("series")
        .annotate(n=Count("seq"))
        .values_list("series", "n")
    )
    for s in series:
        assert s.points == counted[s.pk] == loadseed.POINTS
        last = MetricPoint.objects.filter(series=s).order_by("-step").first()
        assert (s.last_step, s.last_value) == (last.step, last.value)
        kept = Summary.from_bytes(s.summary)
        assert kept.count == s.points
    # What the app's own rebuild makes from the points (checked on a few: one query each).
    for s in series[:5]:
        kept, built = Summary.from_bytes(s.summary), Summary.from_bytes(rebuild(s.pk))
        kept.raw = built.raw = b""
        assert kept == built


def test_a_second_run_at_the_same_scale_does_nothing(seeded, capsys):
    before = Job.objects.count()
    call_command("seed_load", "--scale", str(SCALE))
    assert "already seeded" in capsys.readouterr().out
    assert Job.objects.count() == before
    with pytest.raises(CommandError, match="--reset"):
        call_command("seed_load", "--scale", "0.002")


def test_reset_removes_and_redoes_it(seeded, capsys):
    call_command("seed_load", "--scale", str(SCALE), "--reset")
    assert "removed the earlier seeding" in capsys.readouterr().out
    assert Job.objects.filter(cluster__name="load").count() == loadseed.Sizes.at(SCALE).finished + (
        loadseed.Sizes.at(SCALE).active
    )


def test_refuses_sqlite(settings, monkeypatch):
    monkeypatch.setattr(connection, "vendor", "sqlite")
    with pytest.raises(CommandError, match="PostgreSQL"):
        call_command("seed_load", "--scale", str(SCALE))
