"""A project's spending: accounting's lines summed per user and month, its limits and its
fair-share in words, and the page that shows them to the project's members only."""

from datetime import date
from pathlib import Path

import pytest

from projects import usage
from schedulers import registry as schedulers
from schedulers.seam import AccountUsage, UsageLine
from schedulers.slurm import accounts
from tests import factories

CAPTURED = Path(__file__).parents[1] / "schedulers/slurm/slurm_output/account_usage_vision.txt"


def test_captured_usage_limits_and_share():
    read = accounts.parse_usage(CAPTURED.read_text(), "vision")
    assert read.limits == {"GrpTRESMins": {"gres/gpu": 6000}, "GrpTRES": {"gres/gpu": 4}}
    (line,) = read.lines  # one user, one month; the job that never started left out
    assert (line.user, line.month, line.jobs) == ("hpcuser", "2026-11", 7)
    assert line.gpu_seconds == 3 and line.cpu_seconds == 26
    assert (read.norm_shares, read.effective_usage) == (0.25, 0.0)


def test_gpu_seconds_per_user_and_month_and_hostile_lines_skipped():
    text = "\n".join(
        [
            "#usage",
            "alice|2026-10-31T23:00:00|3600|billing=2,cpu=2,gres/gpu=2,mem=4G,node=1",
            "alice|2026-11-01T01:00:00|1800|cpu=4,gres/gpu=1",
            "alice|2026-11-02T01:00:00|60|cpu=1",
            "bob|Unknown|100|gres/gpu=1",  # never started
            "Robert'); --|2026-11-02T01:00:00|100|gres/gpu=1",
            "bob|2026-11-02T01:00:00|99999999999999999|gres/gpu=1",  # not a real run
            "bob|2026-11-02T01:00:00|-5|gres/gpu=1",
            "#limits",
            "|cpu=100000|",
            "alice||gres/gpu=99",  # a user's own limit is not the account's
            "#share",
            "vision|alice|0.125000|0.400000",  # a user's line is not the account's
        ]
    )
    read = accounts.parse_usage(text, "vision")
    assert read.lines == (
        UsageLine("alice", "2026-10", 1, 7200, 7200),
        UsageLine("alice", "2026-11", 2, 1800, 7260),
    )
    assert read.limits == {"GrpTRESMins": {"cpu": 100000}}
    assert (read.norm_shares, read.effective_usage) == (None, None)
    share = accounts.parse_usage("#share\nvision||0.250000|0.500000\n", "vision")
    assert (share.norm_shares, share.effective_usage) == (0.25, 0.5)


def test_read_usage_refuses_what_is_not_an_account_or_a_day():
    for account, since in (("vi sion", "2026-11-01"), ("vision", "2026-11-01; reboot")):
        with pytest.raises(ValueError):
            accounts.read_usage(None, account, since)


@pytest.mark.parametrize(
    "norm, effective, words",
    [
        (0.25, 0.45, "used 1.8× its share"),
        (0.25, 0.1, "used 0.4× its share"),
        (0.25, 0.26, "about its share"),
        (None, 0.1, "keeps no fair-share"),
        (0.0, 0.1, "keeps no fair-share"),
    ],
)
def test_fair_share_in_words(norm, effective, words):
    assert words in usage.fair_share_text(norm, effective)


def test_months_shown_cross_a_year():
    since = usage.first_month(date(2027, 1, 15))
    assert since == date(2026, 11, 1)
    assert usage.month_names(since, date(2027, 1, 15)) == ["2026-11", "2026-12", "2027-01"]


@pytest.fixture
def page_setup(cluster, monkeypatch, settings):
    settings.PORTAL_PROJECT_USAGE_CACHE = 0
    pi = factories.user("pi", "pi-pass-123")
    student = factories.user("student", "student-pass-123")
    outsider = factories.user("outsider", "outsider-pass-123")
    factories.account(cluster, None, "svc")  # the reader
    vision = factories.project(cluster, "vision", [student], coordinators=[pi])
    today = usage.first_month(date.today(), 1).strftime("%Y-%m")
    read = AccountUsage(
        lines=(
            UsageLine("pi", today, 2, 7200, 0),
            UsageLine("student", today, 1, 1800, 0),
            UsageLine("stranger", today, 1, 3600, 0),  # on the account, not in the portal
        ),
        limits={"GrpTRESMins": {"gres/gpu": 6000}},
        norm_shares=0.25,
        effective_usage=0.45,
    )
    asked = []

    def account_usage(conn, account, since):
        asked.append((account, since))
        return read

    monkeypatch.setattr(schedulers.adapter("slurm"), "account_usage", account_usage)
    monkeypatch.setattr("clusters.pool.with_connection", lambda login, op: op(None))
    return vision, pi, student, outsider, asked


@pytest.mark.django_db
def test_the_project_page_shows_members_spending_allocation_and_fair_share(page_setup, client):
    vision, pi, student, outsider, asked = page_setup
    client.force_login(student)
    page = client.get(f"/projects/{vision.pk}/").content.decode()
    assert asked and asked[0][0] == "vision"
    assert "used 1.8× its share" in page
    assert "Allocation: 100 GPU-hours" in page and "2.00 GPU-hours" not in page
    assert 'data-member="pi"' in page and 'data-member="stranger"' in page
    assert page.index('data-member="pi"') < page.index('data-member="student"')  # most first
    assert "<td>manager</td>" in page and "<td>viewer</td>" in page
    assert "spent since" in page and "3.50 GPU-hours" in page
    client.force_login(outsider)
    assert client.get(f"/projects/{vision.pk}/").status_code == 404
    assert "vision" not in client.get("/projects/").content.decode()


def test_a_reading_survives_the_json_cache():
    read = accounts.parse_usage(CAPTURED.read_text(), "vision")
    assert usage.from_cache(usage.to_cache(read)) == read
    assert usage.from_cache({"lines": [{"nope": 1}]}) is None


@pytest.mark.django_db
def test_the_project_page_shows_its_members_storage(page_setup, client, monkeypatch, cluster):
    from clusters import quotas as quota_files

    vision, pi, student, outsider, asked = page_setup
    cluster.quota_files = "/etc/portal/quota.json"
    cluster.save()
    monkeypatch.setattr(
        quota_files,
        "read",
        lambda conn, paths: [
            quota_files.Quota("student", "/home/student", "user", 1572864, 1572864, 3145728, 9, 0),
            quota_files.Quota("stranger", "/home/stranger", "user", 1, 1, 2, 0, 0),
        ],
    )
    client.force_login(student)
    page = client.get(f"/projects/{vision.pk}/").content.decode()
    assert 'data-quota="student"' in page and "1.5 GB" in page and "50%" in page
    assert 'data-quota="stranger"' not in page  # not a member
