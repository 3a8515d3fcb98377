import pytest
from django.core.exceptions import ImproperlyConfigured

from portal.env import env_bool, env_float, env_int, env_list, env_secret


def test_env_bool_reads_common_spellings(monkeypatch):
    for value, expected in [
        ("1", True),
        ("yes", True),
        ("On", True),
        ("0", False),
        ("false", False),
        ("", False),
    ]:
        monkeypatch.setenv("FLAG", value)
        assert env_bool("FLAG") is expected
    monkeypatch.delenv("FLAG")
    assert env_bool("FLAG", True) is True


def test_bad_values_fail_loudly_naming_the_variable(monkeypatch):
    monkeypatch.setenv("FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="FLAG='maybe' is not a boolean"):
        env_bool("FLAG")
    monkeypatch.setenv("COUNT", "ten")
    with pytest.raises(ImproperlyConfigured, match="COUNT='ten' is not an integer"):
        env_int("COUNT", 1)
    monkeypatch.setenv("COUNT", "-1")
    with pytest.raises(ImproperlyConfigured, match="COUNT=-1 must be at least 0"):
        env_int("COUNT", 1, minimum=0)
    monkeypatch.setenv("RATE", "fast")
    with pytest.raises(ImproperlyConfigured, match="RATE='fast' is not a number"):
        env_float("RATE", 1.0)


def test_env_list_splits_on_commas(monkeypatch):
    monkeypatch.setenv("HOSTS", " a.example.org, ,b.example.org ")
    assert env_list("HOSTS") == ["a.example.org", "b.example.org"]
    assert env_list("UNSET_LIST", ["x"]) == ["x"]


def test_env_secret_reads_a_file(monkeypatch, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("s3cret\n")
    monkeypatch.setenv("TOKEN_FILE", str(secret))
    assert env_secret("TOKEN") == "s3cret"
    monkeypatch.setenv("TOKEN", "also")
    with pytest.raises(ImproperlyConfigured, match="either TOKEN or TOKEN_FILE"):
        env_secret("TOKEN")
    monkeypatch.delenv("TOKEN")
    monkeypatch.setenv("TOKEN_FILE", str(tmp_path / "missing"))
    with pytest.raises(ImproperlyConfigured, match="TOKEN_FILE=.* cannot be read"):
        env_secret("TOKEN")


def test_env_networks_reads_cidrs_and_refuses_typos(monkeypatch):
    from portal.env import env_networks

    monkeypatch.setenv("NETS", " 10.1.0.0/16, fd00::/8 ,192.168.7.7")
    assert env_networks("NETS", []) == ["10.1.0.0/16", "fd00::/8", "192.168.7.7/32"]
    assert env_networks("UNSET_NETS", ["127.0.0.0/8"]) == ["127.0.0.0/8"]
    for bad in ("10.0.0.1/8", "node7", "10.0.0.0/33"):
        monkeypatch.setenv("NETS", bad)
        with pytest.raises(ImproperlyConfigured, match=f"NETS: '{bad}' is not a network"):
            env_networks("NETS", [])
