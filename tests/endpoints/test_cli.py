"""`portal endpoints` against a live portal (client/portal_client/commands/endpoints.py):
serve a version by the model's name (started), list and show it, make a key (the secret
alone on stdout), list keys, revoke, stop; a name nobody has is a clear error."""

from __future__ import annotations

import json

import pytest

from endpoints import tasks
from endpoints.models import Endpoint, EndpointKey, digest_of
from tests.endpoints.test_api import version_of

pytestmark = pytest.mark.django_db(transaction=True)


def test_serve_show_key_revoke_and_stop(owner, cluster, live_server, tmp_path, monkeypatch, capsys):
    from identity.tokens import ApiToken
    from portal_client import cli

    started: list[int] = []
    monkeypatch.setattr(tasks.start_endpoint, "delay", lambda pk: started.append(pk))
    _, token = ApiToken.issue(owner, "cli")
    monkeypatch.setenv("PORTAL_URL", live_server.url)
    monkeypatch.setenv("PORTAL_TOKEN", token)
    monkeypatch.setenv("PORTAL_CONFIG", str(tmp_path / "absent.toml"))
    version_of(owner, cluster)

    def portal(*argv):
        code = cli.main(list(argv))
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    assert portal("endpoints")[:2] == (0, "no endpoints yet\n")
    code, out, _ = portal(
        "endpoints",
        "serve",
        "digits",
        "1",
        "--name",
        "dg",
        "--memory-gb",
        "1",
        "--idle-minutes",
        "5",
    )
    endpoint = Endpoint.objects.get()
    assert code == 0 and out.startswith("dg (digits version 1): starting at https://ep-")
    assert started == [endpoint.pk] and (endpoint.memory_gb, endpoint.idle_minutes) == (1, 5)
    code, out, _ = portal("endpoints")
    assert code == 0 and "digits/v1" in out and "starting" in out
    code, out, _ = portal("endpoints", "show", "dg")
    assert code == 0 and "stops after 5 idle minutes" in out and "requests 0 (0 5xx)" in out
    code, out, err = portal("endpoints", "key", "prog", "--endpoint", "dg", "--rate", "3")
    secret = out.strip()
    key = EndpointKey.objects.get()
    assert code == 0 and key.digest == digest_of(secret) and "shown this once" in err
    assert [e.pk for e in key.endpoints.all()] == [endpoint.pk] and key.rate == 3
    code, out, _ = portal("--json", "endpoints", "keys")
    assert code == 0 and json.loads(out)[0]["prefix"] == secret[:10] and secret not in out
    assert portal("endpoints", "revoke", str(key.pk))[:2] == (0, f"key {secret[:10]}… revoked\n")
    assert not EndpointKey.objects.live().exists()
    code, out, _ = portal("endpoints", "stop", "dg")
    assert code == 0 and ": stopped at" in out
    code, _, err = portal("endpoints", "show", "nothing")
    assert code != 0 and "no endpoints named 'nothing'" in err
