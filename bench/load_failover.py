"""Failover under load: the portal on two web instances and two Celery workers behind
HAProxy (tests/livestack.MultiStack, as deploy/ runs it on two hosts), on PostgreSQL and
the dev cluster. wrk (C, with a Lua script) uploads training metrics through HAProxy with
per-job metrics tokens while jobs are submitted and cancelled through the API; halfway,
one web instance and one worker are killed (SIGKILL). Reported:

- requests sent and failed: failures must be at most the requests in flight at the kill
  (wrk here keeps one request per connection in flight, so at most the connections);
- metric points acknowledged (a 200 naming them inserted or duplicate) against points
  stored: every acknowledged point must be in the database;
- every job submitted or cancelled reaching its true final state.

Each wrk connection is its own thread with its own series (a job and a rank), so the
Lua script knows exactly which batch each answer acknowledges.

    .venv/bin/python bench/load_failover.py [--seconds 20] [--connections 8] [--batch 50]

Uses the PostgreSQL database multi_bench (dropped and made again) and Redis database 13.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DB_NAME = "multi_bench"
PG = "postgres://postgres@127.0.0.1:5432"
FINAL = {"completed", "failed", "cancelled", "timeout"}


def redis_url(db: int = 13) -> str:
    """The repo's Redis (var/redis.url, password-protected), database ``db``."""
    url = os.environ.get("REDIS_URL") or (ROOT / "var" / "redis.url").read_text().strip()
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{db}"))


def setup_environment() -> None:
    subprocess.run(
        ["psql", PG + "/postgres", "-qc", f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)"],
        check=True,
    )
    subprocess.run(["psql", PG + "/postgres", "-qc", f"CREATE DATABASE {DB_NAME}"], check=True)
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "portal.settings",
            "PORTAL_DEMO": "1",
            "DATABASE_URL": f"{PG}/{DB_NAME}",
            "REDIS_URL": redis_url(),
            "PORTAL_CACHE_PREFIX": "multi-bench",
            # Load, not the per-job upload limit, is what is measured here.
            "PORTAL_METRICS_INGEST_RATE": "1000000/min",
            "PORTAL_API_RATE": "100000/min",
        }
    )


LUA = r"""
-- One connection per thread; each thread uploads to its own series (job, rank).
local targets = TARGETS
local count = 0
local threads = {}

function setup(thread)
  count = count + 1
  local t = targets[count]
  thread:set("job", t[1])
  thread:set("token", t[2])
  thread:set("rank", t[3])
  thread:set("index", count)
  table.insert(threads, thread)
end

function init(args)
  path = "/api/v1/jobs/" .. job .. "/metrics/ingest/"
  hdrs = {["Authorization"] = "Bearer " .. token, ["Content-Type"] = "application/json"}
  seq, sent, ok, failed, acked, mismatched = 0, 0, 0, 0, 0, 0
  pending = nil
  failed_starts = ""
  reasons = ""
end

local function fail(why)
  failed = failed + 1
  failed_starts = failed_starts .. pending .. ","
  reasons = reasons .. why .. "@" .. os.time() .. ","
end

function request()
  if pending ~= nil then
    if index == 1 and sent == 1 and pending == 0 and ok == 0 then
      -- wrk calls the first thread's request() once to check it, and never sends that
      -- one (script_verify_request): its batch is sent again, by this call.
      sent, seq = 0, 0
    else
      -- A request whose answer never came (the connection broke) is not acknowledged.
      fail("broken")
    end
  end
  pending = seq
  local parts = {}
  for i = 0, BATCH - 1 do
    local s = seq + i
    parts[#parts + 1] = string.format(
      '{"seq":%d,"step":%d,"time":%.3f,"rank":%d,"metrics":{"loss":%.6f,"acc":%.4f}}',
      s, s, 1.7e9 + s * 0.01, rank, 1 / (s + 1), (s % 100) / 100)
  end
  seq = seq + BATCH
  sent = sent + 1
  return wrk.format("POST", path, hdrs, "[" .. table.concat(parts, ",") .. "]")
end

function response(status, headers, body)
  if pending == nil then return end
  if status == 200 then
    local inserted = tonumber(body:match('"inserted":(%d+)')) or -1
    local duplicates = tonumber(body:match('"duplicates":(%d+)')) or -1
    -- Counted in points: BATCH records of two metrics each.
    if inserted + duplicates ~= 2 * BATCH then mismatched = mismatched + 1 end
    ok = ok + 1
    acked = acked + BATCH
  else
    fail(tostring(status))
  end
  pending = nil
end

function done(summary, latency, requests)
  for _, t in ipairs(threads) do
    io.write("THREAD ", string.format(
      '{"job":%d,"rank":%d,"sent":%d,"ok":%d,"failed":%d,"acked":%d,"next":%d,' ..
      '"pending":%s,"mismatched":%d,"failed_starts":"%s","reasons":"%s"}',
      t:get("job"), t:get("rank"), t:get("sent"), t:get("ok"), t:get("failed"),
      t:get("acked"), t:get("seq"), tostring(t:get("pending") or "null"),
      t:get("mismatched"), t:get("failed_starts"), t:get("reasons")), "\n")
  end
  io.write("SUMMARY ", string.format(
    '{"requests":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,' ..
    '"p50_ms":%.1f,"p99_ms":%.1f}',
    summary.requests, summary.errors.connect, summary.errors.read, summary.errors.write,
    summary.errors.status, summary.errors.timeout,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000), "\n")
end
"""


def haproxy_counters(csv: str) -> dict[str, dict[str, str]]:
    """HAProxy's per-server counters of the portal's backend (``show stat``)."""
    lines = csv.lstrip("# ").splitlines()
    names = lines[0].split(",")
    found = {}
    for line in lines[1:]:
        row = dict(zip(names, line.split(","), strict=False))
        if row.get("pxname") == "be_portal" and row.get("svname", "").startswith("portal"):
            keys = ("stot", "econ", "eresp", "wretr", "wredis", "srv_abrt", "cli_abrt")
            found[row["svname"]] = {k: row.get(k, "") for k in keys}
    return found


def lua_script(targets: list[tuple[int, str, int]], batch: int) -> str:
    rows = ",".join(f'{{{job}, "{token}", {rank}}}' for job, token, rank in targets)
    return LUA.replace("TARGETS", "{" + rows + "}").replace("BATCH", str(batch))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=20, help="length of the load")
    parser.add_argument("--connections", type=int, default=8, help="wrk connections")
    parser.add_argument("--batch", type=int, default=50, help="records per upload (2 points each)")
    parser.add_argument("--jobs", type=int, default=4, help="jobs submitted before the kill")
    args = parser.parse_args()
    wrk = shutil.which("wrk")
    if not wrk:
        sys.exit("wrk is missing: apt-get install -y wrk")

    setup_environment()
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)

    from django.conf import settings

    from devtools import devcluster as devcluster_mod
    from identity.tokens import ApiToken
    from jobs.models import Job
    from metrics import ingest
    from metrics.models import MetricPoint, MetricSeries
    from tests import factories
    from tests.livestack import MultiStack

    info = devcluster_mod.read_info(Path(settings.DEVCLUSTER_DIR))
    user = factories.user("bench", "bench-pass-123")
    cluster = devcluster_mod.register(info, {"bench": info["default_user"]})
    factories.image("shell-host", "Shell (host)")
    _, api_token = ApiToken.issue(user, "bench", 1, "read,submit")
    # Jobs whose training uploads metrics: running, not on the cluster (no scheduler id,
    # so the sync leaves them alone), each with its own upload token.
    targets = []
    for n in range(args.connections):
        job = factories.job(user, cluster, "train", state="running", name=f"load-{n}")
        targets.append((job.pk, ingest.issue_token(job), n))

    tmp = Path(tempfile.mkdtemp(prefix="bench-failover-"))
    script = tmp / "ingest.lua"
    script.write_text(lua_script(targets, args.batch))
    started = time.monotonic()
    stack = MultiStack(tmp).start()
    print(f"stack up in {time.monotonic() - started:.1f} s: {stack.url} -> {stack.web_urls}")
    import httpx

    api = httpx.Client(
        base_url=stack.url, headers={"Authorization": f"Bearer {api_token}"}, timeout=30
    )

    def submit(command: str) -> int:
        body = {
            "container": "shell-host",
            "kind": "batch",
            "partition": "cpu",
            "cpus": 1,
            "memory_gb": 1,
            "time_limit": 5,
            "command": command,
        }
        for _ in range(10):  # a submission that failed with the instance is sent again
            try:
                answer = api.post("/api/v1/jobs/", json=body)
            except httpx.TransportError:
                continue
            if answer.status_code == 201:
                return answer.json()["id"]
        raise RuntimeError(f"could not submit: {answer.status_code} {answer.text[:200]}")

    expected: dict[int, str] = {}
    killed_at: list[float] = []
    try:
        load = subprocess.Popen(
            [
                wrk,
                f"-t{args.connections}",
                f"-c{args.connections}",
                f"-d{args.seconds}s",
                "--timeout",
                "10s",
                "-s",
                str(script),
                stack.url,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        load_started = time.monotonic()
        for _ in range(args.jobs):
            expected[submit("sleep 4; echo done")] = "completed"
        to_cancel = submit("sleep 300")
        expected[to_cancel] = "cancelled"
        time.sleep(max(0.0, load_started + args.seconds / 2 - time.monotonic()))

        def kill() -> None:
            stack.kill("web-a")
            stack.kill("worker-a")
            killed_at.append(time.time())

        threading.Thread(target=kill).start()
        # After the kill, through the survivors: more jobs, and a cancellation.
        time.sleep(0.5)
        for _ in range(2):
            expected[submit("sleep 2; echo done")] = "completed"
        for _ in range(10):
            try:
                if api.post(f"/api/v1/jobs/{to_cancel}/cancel/").status_code in (200, 202):
                    break
            except httpx.TransportError:
                pass
        output, _ = load.communicate(timeout=args.seconds + 60)

        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            states = dict(Job.objects.filter(pk__in=expected).values_list("pk", "state"))
            if all(state in FINAL for state in states.values()):
                break
            time.sleep(1)
        servers = stack.portal_servers()
        counters = haproxy_counters(stack._haproxy("show stat"))
    finally:
        stack.stop()

    threads = [json.loads(line[7:]) for line in output.splitlines() if line.startswith("THREAD ")]
    summaries = [
        json.loads(line[8:]) for line in output.splitlines() if line.startswith("SUMMARY ")
    ]
    if not threads or not summaries:
        print(output)
        return 1
    summary = summaries[0]
    lost = 0
    acked_points = stored_points = 0
    for t in threads:
        unacked = {int(s) for s in t["failed_starts"].split(",") if s}
        if t["pending"] != "null":
            unacked.add(int(t["pending"]))  # in flight when wrk stopped
        acked_seqs = {
            seq
            for start in range(0, t["next"], args.batch)
            if start not in unacked
            for seq in range(start, start + args.batch)
        }
        for key in ("loss", "acc"):
            series = MetricSeries.objects.filter(job_id=t["job"], key=key, rank=t["rank"]).first()
            stored = set(
                MetricPoint.objects.filter(series=series).values_list("seq", flat=True)
                if series
                else []
            )
            lost += len(acked_seqs - stored)
            acked_points += len(acked_seqs)
            stored_points += len(stored)
    sent = sum(t["sent"] for t in threads)
    failed = sum(t["failed"] for t in threads)
    states = dict(Job.objects.filter(pk__in=expected).values_list("pk", "state"))
    wrong = {pk: (states.get(pk), want) for pk, want in expected.items() if states.get(pk) != want}
    mismatched = sum(t["mismatched"] for t in threads)
    reasons: dict[str, int] = {}
    at_kill = elsewhere = 0
    for t in threads:
        for why in filter(None, t["reasons"].split(",")):
            kind, _, at = why.partition("@")
            after = int(at) - int(killed_at[0]) if killed_at else None
            label = f"{kind} at kill{after:+d} s" if after is not None else kind
            reasons[label] = reasons.get(label, 0) + 1
            # os.time() counts whole seconds; HAProxy takes the dead one out within ~2 s.
            if after is not None and -1 <= after <= 3:
                at_kill += 1
            else:
                elsewhere += 1

    rows = [
        ("cores on this machine", os.cpu_count()),
        ("web instances / workers / beat", "2 / 2 / 1 (web-a and worker-a killed)"),
        ("load", f"{args.connections} connections for {args.seconds} s, {args.batch} records x 2"),
        ("upload requests sent", sent),
        ("requests/s", f"{summary['requests'] / args.seconds:.0f}"),
        ("latency p50 / p99 (ms)", f"{summary['p50_ms']:.0f} / {summary['p99_ms']:.0f}"),
        ("requests failed", f"{failed} ({', '.join(f'{k}: {v}' for k, v in reasons.items())})"),
        (
            "wrk socket errors",
            " ".join(f"{k}={summary[k]}" for k in ("connect", "read", "write", "timeout")),
        ),
        ("in flight at the kill (at most)", args.connections),
        ("points acknowledged", acked_points),
        ("points stored", stored_points),
        ("acknowledged points lost", lost),
        ("answers not matching their batch", mismatched),
        ("jobs in their true final state", f"{len(expected) - len(wrong)} / {len(expected)}"),
        *(
            (f"HAProxy {name}", " ".join(f"{k}={v}" for k, v in c.items()))
            for name, c in counters.items()
        ),
        (
            "HAProxy after the kill",
            ", ".join(f"{k} {'up' if v else 'DOWN'}" for k, v in servers.items()),
        ),
    ]
    width = max(len(name) for name, _ in rows)
    print()
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    problems = []
    if at_kill > args.connections:
        problems.append(
            f"{at_kill} requests failed at the kill, more than the {args.connections} in flight"
        )
    if elsewhere:
        problems.append(f"{elsewhere} requests failed away from the kill")
    if lost:
        problems.append(f"{lost} acknowledged points are not stored")
    if mismatched:
        problems.append(f"{mismatched} answers acknowledged another number of records")
    if wrong:
        problems.append(f"jobs not in their true final state (found, expected): {wrong}")
    for problem in problems:
        print("FAIL:", problem)
    print(f"(logs in {tmp})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
