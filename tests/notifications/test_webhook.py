"""The webhook channel: its signature, its body, the URLs it refuses (SSRF), and real
deliveries to an HTTP receiver in a thread of the test that checks the signature; one that
answers 500 is retried, then turned off, and its owner told in the portal and by email
(locmem backend: the email's content is the email channel's, tested on the real server in
tests/devcluster/test_notifications_mail.py)."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core import mail as outbox

from notifications import tasks, webhook
from notifications.events import Event, Message
from notifications.models import Notification, Preference, Webhook
from tests import factories
from tests.mailbox import address

SECRET = "whsec_test"


# --- units ----------------------------------------------------------------------------------


def test_signature_is_hmac_sha256_of_timestamp_dot_body():
    body = b'{"text":"x"}'
    expected = hmac.new(SECRET.encode(), b"1700000000." + body, hashlib.sha256).hexdigest()
    assert webhook.signature(SECRET, 1700000000, body) == "v1=" + expected
    sent = webhook.headers(SECRET, body, now=1700000000)
    assert sent["X-Portal-Timestamp"] == "1700000000"
    assert webhook.verify(SECRET, "1700000000", sent["X-Portal-Signature"], body, now=1700000100)


def test_verify_refuses_old_timestamps_other_secrets_and_other_bodies():
    body = b'{"text":"x"}'
    sig = webhook.signature(SECRET, 1700000000, body)
    assert not webhook.verify(SECRET, "1700000000", sig, body, now=1700000000 + 301)
    assert not webhook.verify("other", "1700000000", sig, body, now=1700000000)
    assert not webhook.verify(SECRET, "1700000000", sig, body + b" ", now=1700000000)
    assert not webhook.verify(SECRET, "1700000001", sig, body, now=1700000000)
    assert not webhook.verify(SECRET, "-5", sig, body, now=1700000000)


def test_payload_is_slack_text_with_link_and_fields(owner, cluster, settings):
    settings.PORTAL_URL = "https://portal.example.org"
    job = factories.job(owner, cluster, state="failed")
    note = factories.notification(owner, text="Your job failed.", url=f"/jobs/{job.pk}/", job=job)
    body = json.loads(webhook.payload(note))
    assert body["text"] == f"Your job failed. https://portal.example.org/jobs/{job.pk}/"
    assert body["event"] == "job_failed"
    assert body["job_id"] == job.pk and body["experiment_id"] is None
    assert body["state"] == "failed"
    assert body["url"] == f"https://portal.example.org/jobs/{job.pk}/"


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://example.org/hook", "must start with https://"),
        ("ftp://example.org/hook", "must start with https://"),
        ("https://user:pw@example.org/hook", "user name or password"),
        ("https://user@example.org/hook", "user name or password"),
        ("https:///hook", "no host"),
        ("https://example.org/" + "a" * 2000, "longer than"),
        ("https://example.org/a b", "spaces"),
        ("https://example.org:99999/", "not valid"),
    ],
)
def test_split_url_refuses(url, why):
    with pytest.raises(webhook.Refused, match=why):
        webhook.split_url(url, allow_http=False)


def test_split_url_accepts_https_and_http_when_allowed():
    assert webhook.split_url("https://hooks.example.org/a?b=1", allow_http=False) == (
        "https",
        "hooks.example.org",
        443,
        "/a?b=1",
    )
    assert webhook.split_url("http://h.example.org:8080", allow_http=True)[2:] == (8080, "/")


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",  # cloud metadata
        "100.64.0.1",  # carrier-grade NAT
        "0.0.0.0",
        "224.0.0.1",
        "::1",
        "fe80::1",
        "fd00::1",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        "fe80::1%eth0",
        "not-an-address",
    ],
)
def test_non_global_addresses_are_refused(address):
    assert not webhook.address_allowed(address, [])


def test_global_addresses_and_allowlisted_networks_pass():
    assert webhook.address_allowed("93.184.216.34", [])
    assert webhook.address_allowed("2606:4700::1111", [])
    assert webhook.address_allowed("127.0.0.1", ["127.0.0.1/32"])
    assert not webhook.address_allowed("127.0.0.2", ["127.0.0.1/32"])


def test_resolve_refuses_a_name_that_points_inside(settings):
    settings.PORTAL_WEBHOOK_ALLOW_HTTP = True
    settings.PORTAL_WEBHOOK_ALLOWED_NETWORKS = []
    with pytest.raises(webhook.Refused, match="may not reach"):
        webhook.resolve("http://localhost:8000/hook")
    settings.PORTAL_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8", "::1/128"]
    target = webhook.resolve("http://localhost:8000/hook")
    assert target.address in ("127.0.0.1", "::1") and target.host == "localhost"


def test_backoff_doubles_and_is_capped():
    assert [webhook.backoff_seconds(n) for n in range(4)] == [10, 20, 40, 80]
    assert webhook.backoff_seconds(20) == 600


def test_outcome_retries_network_errors_5xx_and_429_only():
    assert webhook.Outcome(None, "timeout").retryable
    assert webhook.Outcome(500).retryable and webhook.Outcome(429).retryable
    assert not webhook.Outcome(404).retryable and not webhook.Outcome(302).retryable
    assert webhook.Outcome(204).ok and not webhook.Outcome(302).ok


def test_failures_in_a_row_turn_it_off_and_a_success_resets(owner, settings):
    settings.PORTAL_WEBHOOK_MAX_FAILURES = 3
    hook, secret = Webhook.configure(owner, "https://hooks.example.org/x")
    assert secret.startswith("whsec_") and hook.secret == secret
    assert secret not in hook.secret_encrypted  # kept encrypted
    assert not hook.failed("500") and not hook.failed("500")
    hook.succeeded()
    hook.refresh_from_db()
    assert hook.failures == 0
    assert [hook.failed("500") for _ in range(3)] == [False, False, True]
    assert not hook.enabled and hook.disabled_at is not None
    assert not hook.failed("500")  # already off: told once
    again, secret2 = Webhook.configure(owner, "https://hooks.example.org/x")
    assert again.enabled and again.failures == 0 and secret2 == ""  # the secret stays


def test_record_posts_only_when_chosen_and_a_webhook_is_on(owner, cluster):
    job = factories.job(owner, cluster)
    Preference.set(owner, Event.JOB_FAILED, webhook=True)
    first = Notification.record(owner, Event.JOB_FAILED, Message("x."), "/", job=job)
    assert first is not None and first.webhook == "none"  # no webhook set up
    Webhook.configure(owner, "https://hooks.example.org/x")
    other = factories.job(owner, cluster)
    second = Notification.record(owner, Event.JOB_FAILED, Message("x."), "/", job=other)
    assert second is not None and second.webhook == "pending"
    third = Notification.record(
        owner, Event.JOB_STARTED, Message("x."), "/", job=factories.job(owner, cluster)
    )
    assert third is None  # webhook off for that event by default, and the rest too


# --- a real receiver ------------------------------------------------------------------------


class Receiver:
    """An HTTP server in a thread: answers ``status`` and keeps each request, checking its
    signature with ``secret`` as a receiver would."""

    def __init__(self, status: int = 200, location: str = "", delay: float = 0):
        self.status = status
        self.location = location
        self.delay = delay  # seconds before it answers
        self.secret = ""
        self.requests: list[dict] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                timestamp = self.headers.get("X-Portal-Timestamp", "")
                signed = self.headers.get("X-Portal-Signature", "")
                receiver.requests.append(
                    {
                        "path": self.path,
                        "host": self.headers.get("Host"),
                        "body": body,
                        "valid": receiver.verify(timestamp, signed, body),
                        "age": abs(time.time() - int(timestamp or 0)),
                    }
                )
                time.sleep(receiver.delay)
                self.send_response(receiver.status)
                if receiver.location:
                    self.send_header("Location", receiver.location)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/portal"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def verify(self, timestamp: str, signed: str, body: bytes) -> bool:
        """What a receiver does, written out here (not the portal's code): the HMAC-SHA256
        of "<timestamp>.<body>" with the secret, and a timestamp within 5 minutes."""
        if not timestamp.isdigit() or abs(time.time() - int(timestamp)) > 300:
            return False
        mac = hmac.new(self.secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
        return hmac.compare_digest("v1=" + mac.hexdigest(), signed)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def local_hooks(settings):
    settings.PORTAL_WEBHOOK_ALLOW_HTTP = True
    settings.PORTAL_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    settings.PORTAL_WEBHOOK_TIMEOUT = 5.0
    settings.PORTAL_URL = "https://portal.example.org"
    return settings


def pending(owner, cluster, receiver: Receiver) -> Notification:
    hook, secret = Webhook.configure(owner, receiver.url)
    receiver.secret = secret
    Preference.set(owner, Event.JOB_FAILED, webhook=True, email=False)
    job = factories.job(owner, cluster, state="failed", name="train")
    note = Notification.record(
        owner, Event.JOB_FAILED, Message("Your job failed."), f"/jobs/{job.pk}/", job=job
    )
    assert note is not None and note.webhook == "pending"
    return note


def test_a_receiver_gets_a_signed_fresh_delivery(owner, cluster, local_hooks):
    with Receiver(200) as receiver:
        note = pending(owner, cluster, receiver)
        assert tasks.deliver_webhook.apply(args=[note.pk]).get() == "sent"
    [got] = receiver.requests
    assert got["valid"] and got["age"] < 30
    assert got["path"] == "/hooks/portal"
    body = json.loads(got["body"])
    assert body["text"] == f"Your job failed. https://portal.example.org/jobs/{note.job_id}/"
    assert body["job_id"] == note.job_id and body["state"] == "failed"
    note.refresh_from_db()
    assert note.webhook == "sent"
    # Signed with another secret, the receiver would refuse it.
    receiver.secret = "whsec_other"
    assert not webhook.verify("whsec_other", "1", "v1=00", got["body"])


def test_a_receiver_answering_500_is_retried_then_turned_off_and_the_owner_told(
    owner, cluster, local_hooks
):
    owner.email = "owner@example.org"
    owner.save()
    local_hooks.PORTAL_WEBHOOK_MAX_FAILURES = 3
    local_hooks.PORTAL_WEBHOOK_RETRIES = 5
    with Receiver(500) as receiver:
        note = pending(owner, cluster, receiver)
        # Eager: Celery runs each retry at once (the countdowns are backoff_seconds).
        assert tasks.deliver_webhook.apply(args=[note.pk]).get() == "failed"
    assert len(receiver.requests) == 3
    assert all(r["valid"] for r in receiver.requests)
    hook = Webhook.objects.get(user=owner)
    assert not hook.enabled and hook.failures == 3 and "500" in hook.last_error
    note.refresh_from_db()
    assert note.webhook == "failed"
    notice = Notification.objects.get(recipient=owner, event=Event.WEBHOOK_DISABLED)
    assert notice.in_portal and not notice.read
    assert "turned off after 3 failed deliveries" in notice.text
    assert notice.url == "/account/notifications/"
    assert tasks.deliver_email.apply(args=[owner.pk]).get() == 1
    [email] = outbox.outbox
    assert "webhook was turned off" in email.body
    assert "https://portal.example.org/account/notifications/" in email.body
    assert "unsubscribe" not in email.body and "List-Unsubscribe" not in email.extra_headers
    # Off: the next notification is not posted.
    Preference.set(owner, Event.JOB_TIMEOUT, webhook=True)
    later = Notification.record(
        owner, Event.JOB_TIMEOUT, Message("x."), "/", job=factories.job(owner, cluster)
    )
    assert later is not None and later.webhook == "none"


@pytest.mark.mail
def test_the_turned_off_notice_reaches_the_real_mail_server(owner, cluster, local_hooks, mailbox):
    """The same notice through `make mail`'s exim into its Maildir (the owner's email)."""
    owner.email = address("hookowner")
    owner.save()
    local_hooks.PORTAL_WEBHOOK_MAX_FAILURES = 2
    with Receiver(500) as receiver:
        note = pending(owner, cluster, receiver)
        assert tasks.deliver_webhook.apply(args=[note.pk]).get() == "failed"
    assert len(receiver.requests) == 2
    assert tasks.deliver_email.apply(args=[owner.pk]).get() == 1
    (message,) = mailbox.wait_for(owner.email, timeout=30)
    assert "webhook was turned off" in str(message["Subject"])
    text = message.get_content()
    assert "https://portal.example.org/account/notifications/" in text
    assert "unsubscribe" not in text  # not a choice: no link to stop it


def test_a_success_after_failures_resets_the_count(owner, cluster, local_hooks):
    local_hooks.PORTAL_WEBHOOK_MAX_FAILURES = 5
    local_hooks.PORTAL_WEBHOOK_RETRIES = 0
    with Receiver(503) as receiver:
        note = pending(owner, cluster, receiver)
        assert tasks.deliver_webhook.apply(args=[note.pk]).get() == "failed"
        assert Webhook.objects.get(user=owner).failures == 1
        receiver.status = 200
        Notification.objects.filter(pk=note.pk).update(webhook="pending")
        assert tasks.deliver_webhook.apply(args=[note.pk]).get() == "sent"
    assert Webhook.objects.get(user=owner).failures == 0


def test_a_redirect_is_not_followed_nor_retried(owner, cluster, local_hooks):
    with Receiver(302, location="http://127.0.0.1:1/elsewhere") as receiver:
        note = pending(owner, cluster, receiver)
        assert tasks.deliver_webhook.apply(args=[note.pk]).get() == "failed"
    assert len(receiver.requests) == 1
    assert Webhook.objects.get(user=owner).failures == 1


def test_an_address_not_allowlisted_is_never_contacted(owner, cluster, local_hooks):
    local_hooks.PORTAL_WEBHOOK_RETRIES = 0
    with Receiver(200) as receiver:
        note = pending(owner, cluster, receiver)
        local_hooks.PORTAL_WEBHOOK_ALLOWED_NETWORKS = []
        assert tasks.deliver_webhook.apply(args=[note.pk]).get() == "failed"
    assert receiver.requests == []
    assert "may not reach" in Webhook.objects.get(user=owner).last_error


def test_a_slow_receiver_is_cut_at_the_timeout(owner, cluster, local_hooks):
    import socket

    local_hooks.PORTAL_WEBHOOK_TIMEOUT = 1.0
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)  # accepts, never answers
    try:
        port = listener.getsockname()[1]
        started = time.monotonic()
        outcome = webhook.post(f"http://127.0.0.1:{port}/", b"{}", SECRET)
        assert time.monotonic() - started < 3
        assert outcome.status is None and outcome.retryable
    finally:
        listener.close()


def test_a_slow_but_200_receiver_counts_as_failing_and_is_turned_off(owner, cluster, local_hooks):
    """Answering 200 after PORTAL_WEBHOOK_SLOW_SECONDS is a failed attempt (not posted
    again: it has the notification); enough of them turn the webhook off."""
    local_hooks.PORTAL_WEBHOOK_SLOW_SECONDS = 0.3
    local_hooks.PORTAL_WEBHOOK_MAX_FAILURES = 2
    with Receiver(200, delay=0.6) as receiver:
        note = pending(owner, cluster, receiver)
        assert tasks.deliver_webhook.apply(args=[note.pk]).get() == "slow"
        hook = Webhook.objects.get(user=owner)
        assert hook.enabled and hook.failures == 1 and "after 0." in hook.last_error
        Preference.set(owner, Event.JOB_TIMEOUT, webhook=True)
        job = factories.job(owner, cluster, state="timeout")
        later = Notification.record(owner, Event.JOB_TIMEOUT, Message("x."), "/", job=job)
        assert later is not None
        assert tasks.deliver_webhook.apply(args=[later.pk]).get() == "slow"
    assert len(receiver.requests) == 2  # each once
    hook = Webhook.objects.get(user=owner)
    assert not hook.enabled and hook.failures == 2
    note.refresh_from_db()
    assert note.webhook == "sent"
    assert Notification.objects.filter(recipient=owner, event=Event.WEBHOOK_DISABLED).exists()


def test_the_name_is_resolved_within_the_attempts_time(owner, local_hooks, monkeypatch):
    """A name server that takes 5 s: the attempt ends after the connect timeout, not 5 s."""
    import socket

    local_hooks.PORTAL_WEBHOOK_CONNECT_TIMEOUT = 0.5
    local_hooks.PORTAL_WEBHOOK_TIMEOUT = 10.0

    def slow_lookup(*args, **kwargs):
        time.sleep(5)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", 9))]

    monkeypatch.setattr(webhook.socket, "getaddrinfo", slow_lookup)
    started = time.monotonic()
    outcome = webhook.post("http://hooks.example.org/x", b"{}", SECRET)
    assert time.monotonic() - started < 2
    assert outcome.status is None and "not resolved within 0.5 s" in outcome.error
    assert outcome.retryable


def test_connecting_has_the_short_connect_timeout(owner, cluster, local_hooks, monkeypatch):
    import socket

    local_hooks.PORTAL_WEBHOOK_CONNECT_TIMEOUT = 1.5
    local_hooks.PORTAL_WEBHOOK_TIMEOUT = 9.0
    asked = []
    connect = socket.create_connection

    def recording(address, timeout=None, *args, **kwargs):
        asked.append(timeout)
        return connect(address, timeout, *args, **kwargs)

    monkeypatch.setattr(webhook.socket, "create_connection", recording)
    with Receiver(200) as receiver:
        note = pending(owner, cluster, receiver)
        assert tasks.deliver_webhook.apply(args=[note.pk]).get() == "sent"
    assert asked == [1.5]


def test_past_the_persons_rate_notifications_gather_into_one_digest(
    owner, cluster, local_hooks, monkeypatch
):
    """At most PORTAL_WEBHOOK_RATE_MAX posts per window per person; what comes meanwhile is
    held and then posted as one digest (as email's rate limit does)."""
    local_hooks.PORTAL_WEBHOOK_RATE_MAX = 2
    local_hooks.PORTAL_WEBHOOK_RATE_WINDOW = 1.0
    later: list[tuple] = []
    monkeypatch.setattr(
        tasks.deliver_webhook,
        "apply_async",
        lambda args, countdown: later.append((args, countdown)),
    )
    Preference.set(owner, Event.JOB_TIMEOUT, webhook=True)

    def another():
        job = factories.job(owner, cluster, state="timeout")
        note = Notification.record(
            owner, Event.JOB_TIMEOUT, Message(f"Job {job.pk}."), "/", job=job
        )
        assert note is not None
        return note

    with Receiver(200) as receiver:
        first = pending(owner, cluster, receiver)
        assert tasks.deliver_webhook.apply(args=[first.pk]).get() == "sent"
        second = another()
        assert tasks.deliver_webhook.apply(args=[second.pk]).get() == "sent"
        third, fourth = another(), another()
        assert tasks.deliver_webhook.apply(args=[third.pk]).get() == "held"
        assert later and later[0][0] == (third.pk,) and 0 < later[0][1] <= 2.1
        assert len(receiver.requests) == 2
        time.sleep(1.1)  # the window has passed: the held task runs
        assert tasks.deliver_webhook.apply(args=[third.pk]).get() == "sent"
        assert tasks.deliver_webhook.apply(args=[fourth.pk]).get() == "gone"  # in the digest
    assert len(receiver.requests) == 3
    body = json.loads(receiver.requests[2]["body"])
    assert body["event"] == "digest" and receiver.requests[2]["valid"]
    assert [n["job_id"] for n in body["notifications"]] == [third.job_id, fourth.job_id]
    assert body["text"].startswith("2 notifications:")
    assert set(
        Notification.objects.filter(pk__in=[third.pk, fourth.pk]).values_list("webhook", flat=True)
    ) == {"sent"}


def test_deliveries_run_on_their_own_queue(settings):
    """Routed to PORTAL_WEBHOOK_QUEUE, which every worker started without -Q consumes."""
    from portal.celery import app

    route = app.amqp.router.route({}, tasks.deliver_webhook.name)
    assert route["queue"].name == settings.PORTAL_WEBHOOK_QUEUE
    assert settings.PORTAL_WEBHOOK_QUEUE != settings.CELERY_TASK_DEFAULT_QUEUE
    assert settings.PORTAL_WEBHOOK_QUEUE in {q.name for q in settings.CELERY_TASK_QUEUES}


# --- the settings page ----------------------------------------------------------------------


def test_settings_page_saves_the_url_and_shows_the_secret_once(client, owner, local_hooks):
    client.force_login(owner)
    url = "http://127.0.0.1:9/hook"
    page = client.post("/account/notifications/webhook/", {"url": url})
    assert page.status_code == 200
    hook = Webhook.objects.get(user=owner)
    assert hook.url == url and hook.enabled
    assert hook.secret.encode() in page.content
    again = client.get("/account/notifications/")
    assert hook.secret.encode() not in again.content
    assert url.encode() in again.content
    # Saving again keeps the secret (and turns it back on), without showing it.
    resaved = client.post("/account/notifications/webhook/", {"url": url}, follow=True)
    assert hook.secret.encode() not in resaved.content
    assert Webhook.objects.get(user=owner).secret == hook.secret
    # A new secret is shown once.
    rotated = client.post("/account/notifications/webhook/", {"action": "rotate"})
    new = Webhook.objects.get(user=owner).secret
    assert new != hook.secret and new.encode() in rotated.content
    # Per-event choice.
    client.post("/account/notifications/", {"job_failed:webhook": "on"})
    assert Preference.choices_for(owner)[Event.JOB_FAILED]["webhook"] is True
    assert b'name="job_failed:webhook"' in client.get("/account/notifications/").content
    assert b"webhook_disabled" not in client.get("/account/notifications/").content


def test_settings_page_refuses_an_inside_url(client, owner, settings):
    settings.PORTAL_WEBHOOK_ALLOW_HTTP = False
    settings.PORTAL_WEBHOOK_ALLOWED_NETWORKS = []
    client.force_login(owner)
    for url in ("https://127.0.0.1/hook", "http://hooks.example.org/", "https://a:b@x.org/"):
        page = client.post("/account/notifications/webhook/", {"url": url})
        assert page.status_code == 400
    assert not Webhook.objects.filter(user=owner).exists()


def test_a_new_changed_or_removed_url_is_in_the_audit_log(client, owner, local_hooks):
    from identity.audit.models import AuditEvent

    client.force_login(owner)
    first, second = "http://127.0.0.1:9/hook", "http://127.0.0.1:9/other"
    client.post("/account/notifications/webhook/", {"url": first})
    client.post("/account/notifications/webhook/", {"url": first})  # unchanged: no row
    client.post("/account/notifications/webhook/", {"action": "rotate"})
    client.post("/account/notifications/webhook/", {"url": second})
    client.post("/account/notifications/webhook/", {"action": "delete"})
    rows = AuditEvent.objects.filter(action=AuditEvent.Action.WEBHOOK_CHANGE).order_by("at", "id")
    assert [(r.username, r.outcome, r.message) for r in rows] == [
        ("owner", "ok", f"(none) -> {first}"),
        ("owner", "ok", f"{first} -> {second}"),
        ("owner", "ok", f"{second} -> (removed)"),
    ]
