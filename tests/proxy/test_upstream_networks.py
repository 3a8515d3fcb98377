"""PORTAL_UPSTREAM_NETWORKS bounds every route, whatever scheduler reported the node
(security review, #30): the one check is where routes are made (proxy.routes.route_of)."""

import pytest

from proxy import routes
from proxy.models import SessionLink

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "address, allowed",
    [
        ("10.3.4.5", True),
        ("172.20.0.9", True),
        ("192.168.1.1", True),
        ("fd12::7", True),
        ("::ffff:10.3.4.5", True),  # IPv4-mapped: the IPv4 address decides
        ("127.0.0.1", False),  # the portal's own host
        ("::1", False),
        ("::ffff:127.0.0.1", False),
        ("169.254.169.254", False),  # a cloud's metadata service
        ("8.8.8.8", False),
        ("0.0.0.0", False),
        ("node7", False),  # not an address at all
    ],
)
def test_only_addresses_in_the_allowed_networks_are_upstreams(settings, address, allowed):
    settings.PORTAL_UPSTREAM_NETWORKS = [
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "fc00::/7",
    ]
    assert routes.upstream_allowed(address) is allowed


def test_a_session_outside_them_gets_no_route_and_its_timeline_says_so_once(
    settings, running_notebook, monkeypatch
):
    session = SessionLink.for_job(running_notebook)
    assert session.mark_ready("127.0.0.1", 8888, "jupyter-token-" + "x" * 20)
    assert routes.route_of(session) is not None  # the tests' settings allow loopback
    settings.PORTAL_UPSTREAM_NETWORKS = ["10.0.0.0/8"]
    for _ in range(3):
        assert routes.route_of(session) is None
    notes = [e.message for e in running_notebook.events.all()]
    assert notes == [
        "Session ready on 127.0.0.1.",
        "Its session is not routed: its node 127.0.0.1 (127.0.0.1) is outside the networks "
        "the portal's proxy may connect to (PORTAL_UPSTREAM_NETWORKS).",
    ]
    # A name is checked by the address it resolves to, not by its text.
    monkeypatch.setattr(routes, "resolve", lambda host: "10.9.9.9")
    route = routes.route_of(session)
    assert route is not None and route.address == "10.9.9.9"
