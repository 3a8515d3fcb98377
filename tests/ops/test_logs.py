"""Log lines and the request id (ops/logs.py, common/context.py)."""

import logging

import pytest

from clusters import certs
from common import context
from ops import logs
from ops.signals import REQUEST, stamp, task_ends, task_starts
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("line", "secret"),
    [
        ("token pp_AbCdEf0123456789xyz refused", "AbCdEf0123456789xyz"),
        ("upload with pm_Zz9_-yy8xx7ww6vv5", "Zz9_-yy8xx7ww6vv5"),
        ("broker redis://:s3cretpass@10.0.0.5:6379/0 down", "s3cretpass"),
        ("postgres://portal:dbpw1234@db/portal", "dbpw1234"),
        ("headers {'Authorization': 'Bearer eyJhbGciOi.abc'}", "eyJhbGciOi.abc"),
        ('{"password": "hunter22", "user": "x"}', "hunter22"),
        ("client_secret=abcd1234efgh", "abcd1234efgh"),
        # A read link's token in the access line's path (before: written as it was).
        ("GET /links/Qx3_vR8kLm2-Zp9TtYw4Ue1oNb7cJd5H/ 302", "Qx3_vR8kLm2-Zp9TtYw4Ue1oNb7cJd5H"),
        (
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----",
            "b3BlbnNzaC1rZXk",
        ),
    ],
)
def test_secrets_are_masked_in_every_line(line, secret):
    masked = logs.mask(line)
    assert secret not in masked and "***" in masked or "[private key]" in masked


def test_a_line_carries_the_request_id_and_a_json_line_is_one_object():
    record = logging.LogRecord(
        "x", logging.INFO, __file__, 1, "hello %s", ("pp_secret123456",), None
    )
    token = context.request_id.set("abcdef0123456789")
    try:
        logs.Context().filter(record)
    finally:
        context.request_id.reset(token)
    line = logs.Json("%(levelname)s %(request_id)s %(message)s").format(record)
    import json

    parsed = json.loads(line)
    assert parsed["request_id"] == "abcdef0123456789"
    assert parsed["message"] == "hello pp_***"


def test_each_request_gets_an_id_or_keeps_a_well_formed_one(client):
    made = client.get("/healthz")
    assert context.well_formed(made["X-Request-ID"])
    kept = client.get("/healthz", HTTP_X_REQUEST_ID="haproxy-0123456789abcdef")
    assert kept["X-Request-ID"] == "haproxy-0123456789abcdef"
    for hostile in ("short", "a b c d e f g h", "x" * 65, "id\nInjected: yes", "ok;rm -rf /"):
        answer = client.get("/healthz", HTTP_X_REQUEST_ID=hostile)
        assert answer["X-Request-ID"] != hostile and context.well_formed(answer["X-Request-ID"])
    assert context.current() == ""  # (reset after each request)


def test_the_request_id_is_in_the_audit_row_and_the_certificates_key_id(client, signing_ca):
    from identity.audit.models import AuditEvent

    person = factories.user("alice", "pw")
    client.force_login(person)
    answer = client.post("/account/tokens/", {"name": "laptop", "days": "7", "scopes": ["read"]})
    assert answer.status_code in (200, 302), answer.content[:500]
    row = AuditEvent.objects.filter(action=AuditEvent.Action.TOKEN_CREATE).latest("at")
    assert row.request_id == answer["X-Request-ID"]
    key = certs.issue(
        "hpcuser", "alice", "submit job 1", cluster="c", request_id="abcdef0123456789"
    )
    key_id = certs.certificate_of(key).key_id.decode()
    assert ":req=abcdef0123456789:" in key_id and key_id.startswith("portal:alice:hpcuser@c:")
    hostile = certs.certificate_of(certs.issue("hpcuser", "alice", request_id="x:y\nz"))
    assert "req=" not in hostile.key_id.decode()


def test_a_task_runs_under_the_id_of_the_request_that_queued_it():
    class Request:
        headers: dict = {}

    class Task:
        request = Request()

    token = context.request_id.set("fromtherequest01")
    try:
        headers: dict = {}
        stamp(headers=headers)
    finally:
        context.request_id.reset(token)
    assert headers[REQUEST] == "fromtherequest01"
    task = Task()
    task.request.headers = headers
    task_starts(task_id="t1", task=task)
    assert context.current() == "fromtherequest01"
    task_ends(task_id="t1")
    assert context.current() == ""
    task.request.headers = {REQUEST: "bad id with spaces"}
    task_starts(task_id="t2", task=task)  # (a periodic task, or a forged header: a new id)
    assert context.well_formed(context.current()) and context.current() != "bad id with spaces"
    task_ends(task_id="t2")


def test_a_json_line_names_the_user_job_and_cluster_it_was_written_for():
    import json

    record = logging.LogRecord("x", logging.INFO, __file__, 1, "read", (), None)
    with context.bind(user="alice", cluster="dev"), context.bind(job=42, nobody="x"):
        logs.Context().filter(record)
    parsed = json.loads(logs.Json("%(message)s").format(record))
    assert (parsed["user"], parsed["job"], parsed["cluster"]) == ("alice", "42", "dev")
    assert "nobody" not in parsed and context.bound() == {}


def test_a_job_task_binds_its_job():
    def submit_job(job_id, attempt=0):
        return job_id

    class Task:
        run = staticmethod(submit_job)

        class request:  # noqa: N801
            headers: dict = {}

    task_starts(task_id="t3", task=Task(), args=(17,), kwargs={})
    assert context.bound() == {"job": "17"}
    task_ends(task_id="t3")
    assert context.bound() == {} and context.current() == ""


def record(name: str, level: int, msg: str, args=()) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, args, None)


@pytest.mark.parametrize(
    ("name", "msg", "args"),
    [
        ("celery.beat", "Scheduler: Sending due task %s (%s)", ("sync", "jobs.tasks.sync")),
        ("celery.worker.strategy", "Task %(name)s[%(id)s] received", ({"name": "t", "id": "1"},)),
        ("celery.app.trace", "Task %(name)s[%(id)s] succeeded", ({"name": "t", "id": "1"},)),
    ],
)
def test_what_repeats_by_itself_is_a_debug_line(name, msg, args):
    root = logging.getLogger()
    before = root.level
    try:
        root.setLevel(logging.INFO)
        chatter = record(name, logging.INFO, msg, args)
        assert logs.Chatter().filter(chatter) is False and chatter.levelname == "DEBUG"
        root.setLevel(logging.DEBUG)  # LOG_LEVEL=DEBUG shows it
        assert logs.Chatter().filter(record(name, logging.INFO, msg, args)) is True
    finally:
        root.setLevel(before)


def test_failures_and_the_portals_own_lines_keep_their_level():
    chatter = logs.Chatter()
    failed = record("celery.app.trace", logging.ERROR, "Task t[1] raised: boom")
    assert chatter.filter(failed) and failed.levelname == "ERROR"
    started = record("celery.beat", logging.INFO, "beat: Starting...")
    assert chatter.filter(started) and started.levelname == "INFO"
    moved = record("jobs.models.run", logging.INFO, "job %s: %s -> %s", (1, "pending", "running"))
    assert chatter.filter(moved) and moved.levelname == "INFO"


def test_health_checks_answered_well_are_debug_lines_and_pages_info(client, caplog):
    with caplog.at_level(logging.DEBUG, logger="portal.requests"):
        client.get("/healthz")
        client.get("/accounts/login/")
    levels = {r.getMessage().split()[1]: r.levelno for r in caplog.records}
    assert levels == {"/healthz": logging.DEBUG, "/accounts/login/": logging.INFO}


def test_a_job_changing_state_is_an_info_line(caplog):
    cluster = factories.cluster()
    factories.partition(cluster, "cpu")
    job = factories.job(factories.user("owner"), cluster)
    with caplog.at_level(logging.INFO, logger="jobs.models.run"):
        assert job.transition("pending")
    assert f"job {job.pk}: queued -> pending" in caplog.text
