"""The shipped alert rules and Grafana dashboard: valid for Prometheus' own checker, and
naming only metrics the portal exports."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}

pytestmark = pytest.mark.django_db


def _exported(client) -> set[str]:
    text = client.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode()
    names = set()
    for family in text_string_to_metric_families(text):
        if family.name.startswith("portal_"):
            names |= {family.name + suffix for suffix in SUFFIXES.get(family.type, ("",))}
    return names


def _used(text: str) -> set[str]:
    return set(re.findall(r"\bportal_[a-z_]+\b", text))


def test_promtool_accepts_the_alert_rules():
    promtool = shutil.which("promtool")
    assert promtool, "promtool missing: `make monitoring` installs Debian's prometheus"
    done = subprocess.run(
        [promtool, "check", "rules", str(ROOT / "alerts.yml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 10 rules found" in done.stdout


def test_the_rules_and_the_dashboard_name_only_exported_metrics(client):
    exported = _exported(client)
    assert "portal_sync_last_success_timestamp_seconds" in exported
    rules = _used((ROOT / "alerts.yml").read_text())
    dashboard = json.loads((ROOT / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    used = rules | _used("\n".join(exprs))
    assert used and used <= exported, sorted(used - exported)
    assert len({panel["id"] for panel in dashboard["panels"]}) == len(dashboard["panels"])
