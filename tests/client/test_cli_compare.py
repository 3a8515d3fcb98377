"""`portal compare` against a real portal (pytest-django's live server: real HTTP, the
real API and database): the table of what differs, CSV, a refused query, access."""

import csv
import io

import pytest

from identity.tokens import ApiToken
from portal_client import cli
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def portal_env(live_server, owner, monkeypatch, tmp_path):
    _, token = ApiToken.issue(owner, "cli", scopes="read")
    monkeypatch.setenv("PORTAL_URL", live_server.url)
    monkeypatch.setenv("PORTAL_TOKEN", token)
    monkeypatch.setenv("PORTAL_CONFIG", str(tmp_path / "absent.toml"))
    monkeypatch.delenv("PORTAL_CA_BUNDLE", raising=False)


@pytest.fixture
def runs(owner, outsider, cluster):
    made = [
        factories.compared_run(
            owner,
            cluster,
            tags=("sweep",),
            params={"lr": lr},
            curves={"loss": [1.0, lr / 2, lr]},
        )
        for lr in (0.1, 0.01)
    ]
    factories.compared_run(outsider, cluster, tags=("sweep",), params={"lr": 9.0})
    return made


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_compare_prints_what_differs_and_each_metrics_last_and_best(portal_env, runs, capsys):
    code, out, _ = run(capsys, "compare", "tag:sweep", "--sort", "param.lr")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == [
        "ID",
        "NAME",
        "PARAM.LR",
        "loss",
        "last",
        "loss",
        "min",
        "at",
        "step",
    ]
    assert lines[1].split()[-4:] == ["0.01", "0.01", "0.005", "1"]  # sorted: lr 0.01 first
    assert lines[2].split()[-4:] == ["0.1", "0.1", "0.05", "1"]
    assert len(lines) == 4 and lines[3].startswith("same for all 2: image=host-batch")
    assert "9.0" not in out  # the other user's run


def test_compare_csv_and_a_refused_query(portal_env, runs, capsys):
    code, out, _ = run(capsys, "compare", "param.lr<0.05", "--csv")
    assert code == 0
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0][:2] == ["ID", "NAME"] and len(rows) == 2 and rows[1][0] == str(runs[1].pk)
    code, out, err = run(capsys, "compare", "state:asleep")
    assert code != 0 and "'asleep' is not one of" in err


def test_compare_says_the_limit_on_runs(portal_env, runs, capsys, settings):
    settings.PORTAL_COMPARE_MAX_RUNS = 1
    code, _, err = run(capsys, "compare", "tag:sweep")
    assert code != 0 and "at most 1 can be compared at once" in err
