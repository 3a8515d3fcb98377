"""Slurm's accounts as sacctmgr prints them (captured on the dev cluster), parsed as data."""

from pathlib import Path

from schedulers.slurm import accounts

CAPTURED = Path(__file__).parents[1] / "schedulers/slurm/slurm_output/sacctmgr_accounts.txt"


def test_accounts_users_coordinators_and_defaults_from_captured_output():
    read = accounts.parse(CAPTURED.read_text())
    by_name = {a.name: a for a in read.accounts}
    assert sorted(by_name) == ["nlp", "portal", "vision"]  # root is the administrators'
    assert by_name["vision"].users == {"hpcuser", "hpcuser2"}
    assert by_name["vision"].coordinators == {"hpcuser"}
    assert by_name["nlp"].users == {"hpcuser"} and not by_name["nlp"].coordinators
    assert "loaduser009" in by_name["portal"].users
    assert read.defaults["hpcuser2"] == "portal"


def test_names_that_are_not_names_are_skipped_and_output_is_bounded(monkeypatch):
    text = "\n".join(
        [
            "#assoc",
            "vision|hpcuser",
            "vision|Robert'); DROP TABLE",
            "$(reboot)|hpcuser",
            "a" * 65 + "|hpcuser",  # longer than Slurm allows
            "#coord",
            "vision|hpcuser, bad user ,hpcuser2",
            "#default",
            "hpcuser|../etc",
            "#assoc",  # a section again is the same section
            "nlp|hpcuser",
        ]
    )
    read = accounts.parse(text)
    assert [(a.name, sorted(a.users), sorted(a.coordinators)) for a in read.accounts] == [
        ("nlp", ["hpcuser"], []),
        ("vision", ["hpcuser"], ["hpcuser", "hpcuser2"]),
    ]
    assert read.defaults == {}
    monkeypatch.setattr(accounts, "MAX_LINES", 2)
    assert [a.name for a in accounts.parse(text).accounts] == ["vision"]
