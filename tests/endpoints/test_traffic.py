"""Traffic and idle stop (endpoints/traffic.py, routes.parse_activity): HAProxy's per-server
counters read as data and recorded, and which running endpoints are stopped: only those
whose last request (or start) is older than their idle minutes, never one with a request
in flight, and none at all when an instance cannot be read. The real path (a Slurm job gone after the idle
time, the next request answered) is tests/devcluster/test_endpoints.py."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from endpoints import routes, service, traffic
from endpoints.models import Endpoint
from endpoints.routes import Activity, parse_activity
from tests.endpoints.test_api import version_of

pytestmark = pytest.mark.django_db

# `show stat be_endpoints 4 -1` as HAProxy 2.6 (Debian 12) prints it, its columns cut after
# lastsess's; two endpoints' servers (one never used), a line that is not one, and a
# server named by a user's job that is not an endpoint id.
EID, OTHER = "ab" * 16, "cd" * 16
CAPTURED = (
    "# pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,dreq,dresp,ereq,econ,eresp,"
    "wretr,wredis,status,weight,act,bck,chkfail,chkdown,lastchg,downtime,qlimit,pid,iid,"
    "sid,throttle,lbtot,tracked,type,rate,rate_lim,rate_max,check_status,check_code,"
    "check_duration,hrsp_1xx,hrsp_2xx,hrsp_3xx,hrsp_4xx,hrsp_5xx,hrsp_other,hanafail,"
    "req_rate,req_rate_max,req_tot,cli_abrt,srv_abrt,comp_in,comp_out,comp_byp,comp_rsp,"
    "lastsess,\n"
    f"be_endpoints,{EID},0,0,1,1,256,3,900,1200,,0,,0,0,0,0,UP,0,1,0,,0,12,0,,1,7,1,,3,,2,"
    "0,,1,,,,0,3,0,0,0,0,,,,3,0,0,0,0,0,0,41,\n"
    f"be_endpoints,{OTHER},0,0,0,0,256,0,0,0,,0,,0,0,0,0,UP,0,1,0,,0,12,0,,1,7,2,,0,,2,"
    "0,,0,,,,0,0,0,0,0,0,,,,0,0,0,0,0,0,0,-1,\n"
    "be_endpoints,BACKEND,0,0,1,1,400,3,900,1200,0,0,,0,0,0,0,UP,0,0,0,,0,12,,,1,7,0,,3,,"
    "1,0,,1,,,,0,3,0,0,0,0,,,,3,0,0,0,0,0,0,41,\n"
    "be_endpoints,evil;rm,0,0,9,9,256,0,0,0,,0,,0,0,0,0,UP,0,1,0,,0,12,0,,1,7,3,,0,,2,"
    "0,,0,,,,0,0,0,0,0,0,,,,0,0,0,0,0,0,0,0,\n"
)


def test_haproxy_counters_are_read_as_data():
    assert parse_activity(CAPTURED) == {
        EID: Activity(1, 41, requests=3, errors=0),
        OTHER: Activity(0, None),
    }
    assert parse_activity("") == {} and parse_activity("Unknown command") == {}
    merged = Activity(0, 41, 3, 1, 100, 300).merged(Activity(2, 5, 1, 0, 20, 40))
    assert merged == Activity(2, 5, 4, 1, 80, 235)
    assert Activity(0, None).merged(Activity(0, 30)) == Activity(0, 30)


@pytest.fixture
def endpoints(owner, cluster, monkeypatch):
    """Four running endpoints of 5 idle minutes, started 10 minutes ago."""
    version = version_of(owner, cluster)
    started = timezone.now() - timedelta(minutes=10)
    made = {
        name: Endpoint.objects.create(
            name=name,
            owner=owner,
            version=version,
            state="running",
            idle_minutes=5,
            running_since=started,
        )
        for name in ("busy", "recent", "quiet", "unseen")
    }
    stopped = []
    monkeypatch.setattr(service, "stop", lambda e, why: stopped.append((e.name, why)))
    return made, stopped


def test_only_endpoints_idle_for_their_minutes_are_stopped(endpoints, monkeypatch):
    made, stopped = endpoints
    seen = {
        made["busy"].public_id: Activity(1, 900),  # a stream still flowing
        made["recent"].public_id: Activity(0, 60, requests=7, errors=1, response_ms=12),
        made["quiet"].public_id: Activity(0, 400),
    }
    monkeypatch.setattr(routes, "activity", lambda: seen)
    now = timezone.now()
    traffic.judge(now)
    assert sorted(name for name, _ in stopped) == ["quiet", "unseen"]
    assert "5 minutes without a request" in stopped[0][1]
    recent = Endpoint.objects.get(name="recent")
    assert abs((recent.last_request_at - (now - timedelta(seconds=60))).total_seconds()) < 1
    assert (recent.requests, recent.errors, recent.response_ms) == (7, 1, 12)


def test_nothing_is_stopped_when_an_instance_cannot_be_read(endpoints, monkeypatch):
    _, stopped = endpoints
    monkeypatch.setattr(routes, "activity", lambda: None)
    assert traffic.judge(timezone.now()) == [] and stopped == []


def test_metrics_show_each_endpoints_traffic(owner, cluster, client, endpoints):
    made, _ = endpoints
    Endpoint.objects.filter(pk=made["recent"].pk).update(
        requests=7, errors=1, response_ms=12, total_ms=340, last_request_at=timezone.now()
    )
    Endpoint.objects.filter(pk=made["quiet"].pk).update(state="stopped")
    text = client.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode()
    labels = 'endpoint="recent",kind="mlflow",owner="owner"'
    for line in (
        f"portal_endpoint_running{{{labels}}} 1.0",
        f"portal_endpoint_requests{{{labels}}} 7.0",
        f"portal_endpoint_server_errors{{{labels}}} 1.0",
        f"portal_endpoint_response_seconds{{{labels}}} 0.012",
        f"portal_endpoint_total_seconds{{{labels}}} 0.34",
        'portal_endpoint_running{endpoint="quiet",kind="mlflow",owner="owner"} 0.0',
    ):
        assert line in text, line
    assert f"portal_endpoint_idle_seconds{{{labels}}}" in text
    assert 'portal_endpoint_idle_seconds{endpoint="quiet"' not in text


def test_a_language_models_meter_figures_reach_the_api_page_and_metrics(owner, cluster, client):
    from metrics.models import MetricSeries
    from tests import factories
    from tests.endpoints.test_api import api_of

    version = version_of(owner, cluster)
    job = factories.training_job(owner, cluster, state="running")
    endpoint = Endpoint.objects.create(
        name="lm",
        owner=owner,
        version=version,
        kind="openai",
        state="running",
        job=job,
        running_since=timezone.now(),
    )
    for key, value in (
        ("endpoint/ttft_ms", 42.0),
        ("endpoint/ttft_p95_ms", 90.0),
        ("endpoint/tokens_per_second", 37.5),
    ):
        MetricSeries.objects.create(job=job, key=key, last_value=value, last_step=3, points=4)
    traffic = api_of(owner).get(f"/api/v1/endpoints/{endpoint.pk}/").json()["traffic"]
    assert (traffic["ttft_ms"], traffic["ttft_p95_ms"], traffic["tokens_per_second"]) == (
        42.0,
        90.0,
        37.5,
    )
    listed = api_of(owner).get("/api/v1/endpoints/").json()["results"]
    assert [e["traffic"]["tokens_per_second"] for e in listed] == [37.5]
    client.force_login(owner)
    page = client.get(f"/endpoints/{endpoint.pk}/").content.decode()
    assert "42 ms / 90 ms" in page and ">37.5<" in page
    text = client.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode()
    labels = 'endpoint="lm",kind="openai",owner="owner"'
    assert f"portal_endpoint_time_to_first_token_seconds{{{labels}}} 0.042" in text
    assert f"portal_endpoint_tokens_per_second{{{labels}}} 37.5" in text
