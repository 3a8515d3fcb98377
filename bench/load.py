"""A centre's busiest day (#35): the served stack on PostgreSQL seeded with a centre's
population (manage.py seed_load), loaded with wrk (C; bench/load/get.lua) at rising
concurrency until p99 passes 250 ms, and the first render of the two heaviest pages in
headless Chromium. One table at the end: figure, value, and the SQL queries behind one
request, counted in-process with Django's CaptureQueriesContext against the same database
at two sizes (a page of few rows and a full one, or 20 and 200 rows): an N+1 shows as a
count that grows with rows.

- the baseline: wrk against a static file through the same gunicorn (whitenoise), the
  rate the load generator and the server's plumbing reach without the app: the app's
  figures are far below it, so wrk (on the same cores) is not what limits them;
- the dashboard and GET /api/v1/jobs/ (first page, and filtered): req/s, p50 and p99 at
  1, 2, 4, ... connections, and the knee (the highest req/s with p99 <= 250 ms) per core;
- the experiment page of the seeded 2,000-trial experiment and the comparison of 1,000
  runs: navigation to the charts drawn, in Chromium via Playwright;
- bench/load_live.py's rows (websocket fan-out, metric ingest) when that module exists:
  ``load_live.run(stack) -> list[Row]``.

The database is ``portal_load`` (created, migrated and seeded if needed; a second run
reuses it). Each web worker is one process; there are as many as cores.

    .venv/bin/python bench/load.py [--scale 1.0] [--seconds 5] [--max-connections 256]
        [--parts baseline,pages,render,live] [--before COMMIT]
    LOAD_SCALE=0.01 make bench-load
    LOAD_BEFORE=920bd0f make bench-load

With ``--before`` (``LOAD_BEFORE``) the parts are measured first with that commit's code
(a git worktree, bench/loadstack.py's checkout()) on the same database migrated back to
its schema, then with this checkout's, and one table shows both runs' figures.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TMP = Path(tempfile.mkdtemp(prefix="bench-load-"))
P99_LIMIT_MS = 250.0

from bench.loadstack import (  # noqa: E402
    UNTHROTTLED,
    LoadStack,
    Row,
    checkout,
    redis_url,
    schema_of,
)


def database_url(name: str) -> str:
    return os.environ.get("LOAD_DATABASE_URL") or f"postgres://postgres@127.0.0.1:5432/{name}"


def ensure_database(url: str, scale: float | str) -> None:
    """CREATE DATABASE if it is not there (connecting to the server's ``postgres``); one
    seeded at another scale, or left half-seeded, is dropped first (faster than deleting
    its rows; seed_load --reset does that in a database shared with other data)."""
    import psycopg  # noqa: PLC0415

    from devtools.loadseed import CLUSTER, DONE, label  # noqa: PLC0415 - once Django is set up

    base, _, name = url.rpartition("/")
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if exists:
            with psycopg.connect(url) as db:
                try:
                    row = db.execute(
                        "SELECT description FROM jobs_cluster WHERE name = %s", [CLUSTER]
                    ).fetchone()
                except psycopg.errors.UndefinedTable:
                    row = None
            if row and row[0] != f"{DONE}{label(scale)}":
                print(f"{name} holds another seeding ({row[0]!r}): dropping it", flush=True)
                conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
                exists = None
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')
            print(f"created the database {name}", flush=True)


def setup_django(url: str) -> None:
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "portal.settings",
            "PORTAL_DEMO": "1",
            "DATABASE_URL": url,
            "REDIS_URL": redis_url(11),
            "PORTAL_CACHE_PREFIX": "loadweb",
            "STATIC_ROOT": str(TMP / "static"),
            **UNTHROTTLED,
        }
    )
    import django  # noqa: PLC0415

    django.setup()


# -- what one request costs in queries ---------------------------------------------------


class Counter:
    """GETs through Django's test client as a user, counting the queries of each."""

    def __init__(self) -> None:
        from django.test import Client  # noqa: PLC0415

        self.clients: dict[str, Client] = {}

    def get(self, username: str, path: str) -> tuple[int, int, bytes]:
        """(status, queries, body) of one GET of ``path`` as ``username``."""
        from django.contrib.auth import get_user_model  # noqa: PLC0415
        from django.db import connection  # noqa: PLC0415
        from django.test import Client  # noqa: PLC0415
        from django.test.utils import CaptureQueriesContext, override_settings  # noqa: PLC0415

        if username not in self.clients:
            client = Client()
            client.force_login(get_user_model().objects.get(username=username))
            self.clients[username] = client
        plain = {
            "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
            "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
        }
        # The queries of a page built, not of one cached (jobs/listing.py): a request the
        # served processes were still working through when wrk stopped may have stored
        # this very page after any renewal made here.
        built = override_settings(STORAGES=plain, PORTAL_LISTING_CACHE_SECONDS=0)
        with built, CaptureQueriesContext(connection) as queries:
            response = self.clients[username].get(path, HTTP_HOST="127.0.0.1")
        return response.status_code, len(queries), response.content

    def two_sizes(self, few: tuple[str, str], many: tuple[str, str]) -> str:
        """Queries of one request at two sizes: "9 (3 rows) / 9 (20 rows)"."""
        out, counts = [], []
        for username, path in (few, many):
            status, n, body = self.get(username, path)
            if status != 200:
                raise RuntimeError(f"GET {path} as {username}: {status} {body[:300]!r}")
            counts.append((n, rows(path, body)))
            out.append(f"{n} ({counts[-1][1]} rows)")
        # An empty page skips its rows' query: only pages with rows are compared.
        grows = counts[0][1] and counts[1][1] and counts[0][0] != counts[1][0]
        return " / ".join(out) + (" GROWS" if grows else "")


def rows(path: str, body: bytes) -> int:
    if path.startswith("/api/"):
        return len(json.loads(body)["results"])
    return body.count(b"<tr data-job-id=")


# -- wrk -----------------------------------------------------------------------------------


def wrk(url: str, paths: list[str], cookie: str, connections: int, seconds: float) -> dict:
    env = {**os.environ, "LOAD_PATHS": "|".join(paths), "LOAD_COOKIE": cookie}
    argv = ["wrk", "-t", "1", "-c", str(connections), "-d", f"{seconds:g}s", "--timeout", "10s"]
    argv += ["-s", str(ROOT / "bench" / "load" / "get.lua"), url]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=seconds + 60)
    for line in out.stdout.splitlines():
        if line.startswith("LOADJSON "):
            result = json.loads(line.removeprefix("LOADJSON "))
            result["rate"] = result["requests"] / (result["duration_us"] / 1e6)
            result["errors"] = sum(result[k] for k in result if k.endswith(("errors", "timeouts")))
            return result
    raise RuntimeError(f"wrk printed no figures: {out.stdout}\n{out.stderr}")


def ms(us: float) -> str:
    return f"{us / 1000:.1f} ms"


def rising(
    stack: LoadStack, name: str, paths: list[str], cookie: str, queries: str, args
) -> list[Row]:
    """Connections 1, 2, 4, ... until p99 passes the limit: a row per level and the knee."""
    out, knee, c = [], None, 1
    while c <= args.max_connections:
        r = wrk(stack.base_url, paths, cookie, c, args.seconds)
        errors = f", {r['errors']} errors" if r["errors"] else ""
        value = f"{r['rate']:.0f} req/s, p50 {ms(r['p50_us'])}, p99 {ms(r['p99_us'])}{errors}"
        print(f"  {name} @ {c} connections: {value}", flush=True)
        out.append(Row(f"{name} @ {c} conn", value, queries))
        if r["p99_us"] / 1000 > P99_LIMIT_MS or r["errors"]:
            break
        if knee is None or r["rate"] > knee[0]:
            knee = (r["rate"], c, r["p99_us"])
        c *= 2
    if knee is None:
        out.append(Row(f"{name}: knee", f"none: p99 > {P99_LIMIT_MS:.0f} ms at 1 connection"))
    else:
        rate, conns, p99 = knee
        out.append(
            Row(
                f"{name}: knee (p99 <= {P99_LIMIT_MS:.0f} ms)",
                f"{rate:.0f} req/s = {rate / stack.cores:.0f} req/s per core "
                f"({conns} conn, p99 {ms(p99)})",
                queries,
            )
        )
    return out


# -- first render in Chromium ---------------------------------------------------------------


@dataclass
class Render:
    """A first render's timeline (ms from navigation): the document's last byte, the last
    fetch's last byte (its data), the first chart drawn, all drawn; the bytes transferred."""

    document: float
    data: float
    first: float
    drawn: float
    kilobytes: float

    def text(self) -> str:
        return (
            f"first chart {self.first:,.0f} ms, all {self.drawn:,.0f} ms (document "
            f"{self.document:,.0f} ms, data {self.data:,.0f} ms, {self.kilobytes / 1000:.1f} MB)"
        )


# Installed before the page's own scripts, polled on every animation frame: when each of
# two JS expressions first held (ms since navigation), in window.benchRender.
WATCH = """(() => {
  const [first, all] = %s;
  const held = (expr) => { try { return Boolean(new Function(`return (${expr});`)()); } catch (e) { return false; } };
  const seen = {};
  const look = () => {
    if (seen.first === undefined && held(first)) seen.first = performance.now();
    if (held(all)) { seen.all = performance.now(); seen.first ??= seen.all; window.benchRender = seen; return; }
    requestAnimationFrame(look);
  };
  requestAnimationFrame(look);
})();"""


def first_render(
    stack: LoadStack,
    cookie: str,
    url: str,
    first: str,
    drawn: str,
    profile: Path | None = None,
) -> Render:
    """The timeline of ``url`` opened in a fresh page until ``first`` (a JS expression: its
    first chart) and ``drawn`` (all of them) hold; with ``profile``, the page's JavaScript
    CPU profile is written there (a .cpuprofile, which Chromium's DevTools open) and its
    heaviest functions printed."""
    from playwright.sync_api import sync_playwright  # noqa: PLC0415

    from tests.e2e.pages import CHROMIUM, CHROMIUM_ARGS  # noqa: PLC0415

    name, _, value = cookie.partition("=")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            context.add_cookies([{"name": name, "value": value, "url": stack.base_url}])
            page = context.new_page()
            page.add_init_script(WATCH % json.dumps([first, drawn]))
            cdp = None
            if profile is not None:
                cdp = context.new_cdp_session(page)
                cdp.send("Profiler.enable")
                cdp.send("Profiler.setSamplingInterval", {"interval": 500})
                cdp.send("Profiler.start")
            page.goto(stack.base_url + url, wait_until="commit", timeout=300_000)
            page.wait_for_function("() => window.benchRender", timeout=300_000)
            seen, t = page.evaluate("() => [window.benchRender.first, window.benchRender.all]")
            timing = page.evaluate(
                """() => {
                  const nav = performance.getEntriesByType("navigation")[0];
                  const all = [nav, ...performance.getEntriesByType("resource")];
                  const fetched = all.filter((e) => ["fetch", "xmlhttprequest"].includes(e.initiatorType));
                  return { document: nav.responseEnd,
                           data: Math.max(nav.responseEnd, ...fetched.map((e) => e.responseEnd)),
                           bytes: all.reduce((n, e) => n + (e.encodedBodySize || 0), 0) };
                }"""
            )
            if cdp is not None and profile is not None:
                cpu = cdp.send("Profiler.stop")["profile"]
                profile.write_text(json.dumps(cpu))
                print(f"  {profile}: the heaviest of {t:,.0f} ms (self time)")
                for ms_, where in heaviest(cpu):
                    print(f"    {ms_:8,.0f} ms  {where}")
            return Render(timing["document"], timing["data"], seen, t, timing["bytes"] / 1000)
        finally:
            browser.close()


def heaviest(cpu: dict, top: int = 15) -> list[tuple[float, str]]:
    """A CPU profile's functions by self time: (ms, "name file:line")."""
    where = {}
    for node in cpu["nodes"]:
        frame = node["callFrame"]
        name = frame["functionName"] or "(anonymous)"
        place = frame["url"].rsplit("/", 1)[-1]
        where[node["id"]] = f"{name} {place}:{frame['lineNumber'] + 1}" if place else name
    total: dict[str, float] = {}
    for node_id, delta in zip(cpu["samples"], cpu["timeDeltas"], strict=True):
        total[where[node_id]] = total.get(where[node_id], 0.0) + delta / 1000
    return sorted(((v, k) for k, v in total.items()), reverse=True)[:top]


@dataclass
class RenderRow(Row):
    """A first render's line, with its timeline (what a median is taken of)."""

    render: Render | None = None


NOT_COUNTED = "(not counted: another commit's code)"  # counted in process: this code only


def render_rows(
    stack: LoadStack, counter: Counter, owner: str, profile: Path | None = None
) -> list[RenderRow]:
    """The two big pages' first renders (with ``profile``, a directory: their JS profiles)."""
    from django.db.models import Count  # noqa: PLC0415

    from experiments.models import Experiment  # noqa: PLC0415
    from metrics.models import MetricSeries  # noqa: PLC0415

    out = []
    counted = stack.root == ROOT
    cookie = stack.cookie_header(owner)
    big = Experiment.objects.filter(owner__username=owner).order_by("uid").first()
    if big is not None:
        n = big.trials.count()
        page = f"/experiments/{big.pk}/"
        sizes = NOT_COUNTED
        if counted:
            q_page = counter.get(owner, page)[1]
            q_data = counter.get(owner, f"{page}data/")[1]
            sizes = f"{q_page} page + {q_data} data"
            small = (  # another experiment (its owner's view): the same queries at few trials
                Experiment.objects.exclude(pk=big.pk)
                .select_related("owner")
                .annotate(n=Count("trials"))
                .order_by("n")
                .first()
            )
            if small is not None:
                q_small = counter.get(small.owner.username, f"/experiments/{small.pk}/data/")[1]
                sizes += f" (data: {q_small} at {small.n} trials)"  # type: ignore[attr-defined]
                sizes += "" if q_small == q_data else " GROWS"
        t = first_render(
            stack,
            cookie,
            page,
            "document.querySelector('[data-chart] .js-plotly-plot, .js-plotly-plot[data-chart]')",
            "document.querySelector(\"[data-chart='curves']\")?.dataset.traces !== undefined"
            " && document.querySelector(\"[data-chart='parallel']\")?.dataset.points"
            " !== undefined",
            profile and profile / "experiment.cpuprofile",
        )
        out.append(
            RenderRow(f"experiment page, {n:,} trials: first render (Chromium)", t.text(), sizes, t)
        )
    ids = list(
        MetricSeries.objects.filter(job__owner__username=owner, job__state="completed")
        .order_by("job_id")
        .values_list("job_id", flat=True)
        .distinct()[:1000]
    )
    if ids:
        url = f"/compare/?ids={','.join(map(str, ids))}&group=param.seed"
        queries = NOT_COUNTED
        if counted:
            q = counter.get(owner, url)[1]
            tenth = ids[: max(1, len(ids) // 10)]
            half = f"/compare/?ids={','.join(map(str, tenth))}&group=param.seed"
            q_small = counter.get(owner, half)[1]
            queries = f"{q_small} ({len(tenth)} runs) / {q} ({len(ids)} runs)"
            queries += "" if q == q_small else " GROWS"
        t = first_render(
            stack,
            cookie,
            url,
            "document.querySelector('[data-compare-charts] .js-plotly-plot')",
            # every chart drawn (as the code of any commit draws them: all at once or in turn)
            "[...document.querySelectorAll('[data-compare-charts] [data-chart]')].every("
            "(c) => c.classList.contains('js-plotly-plot')) && "
            "document.querySelector('[data-compare-charts] [data-chart]')",
            profile and profile / "compare.cpuprofile",
        )
        out.append(
            RenderRow(f"compare {len(ids):,} runs: first render (Chromium)", t.text(), queries, t)
        )
    return out


# -- the run ------------------------------------------------------------------------------


def population(owner: str) -> tuple[str, str]:
    """(the user with most jobs, one with a handful): the two sizes of a page."""
    from django.db.models import Count, Q  # noqa: PLC0415

    from devtools.loadseed import USER_PREFIX  # noqa: PLC0415
    from jobs.models import Job  # noqa: PLC0415

    per_user = (
        Job.objects.filter(owner__username__startswith=USER_PREFIX)
        .values("owner__username")
        .annotate(n=Count("id", filter=Q(trial__isnull=True)))
        .order_by("-n")
    )
    ranked = [(r["owner__username"], r["n"]) for r in per_user if r["n"]]
    few = min(ranked, key=lambda r: (r[1] < 2, r[1]))  # the fewest, two or more if any
    return owner or ranked[0][0], few[0]


def print_table(rows: list[Row], cores: int, header: str) -> None:
    print_grid(
        ("figure", "value", "queries"),
        [(r.figure, r.value, r.queries) for r in rows],
        cores,
        header,
    )


def print_compared(
    before: list[Row], after: list[Row], cores: int, header: str, labels: tuple[str, str]
) -> None:
    """One table of two runs' rows, matched by figure: the figure, its value in each run
    (a figure one run lacks, as the earlier code's live part, which this checkout's bench
    code cannot run on the earlier schema: "not measured"), the queries behind one request
    now."""
    earlier = {b.figure: b for b in before}
    cells = [
        (a.figure, earlier.pop(a.figure).value if a.figure in earlier else "not measured")
        + (a.value, a.queries)
        for a in after
    ]
    cells += [(b.figure, b.value, "not measured", "-") for b in earlier.values()]
    print_grid(("figure", *labels, "queries"), cells, cores, header)


def print_grid(
    heads: tuple[str, ...], cells: list[tuple[str, ...]], cores: int, header: str
) -> None:
    width = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(heads)]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\n{header}; cores (os.cpu_count()): {cores}; load average at the end: {load}\n")
    print("| " + " | ".join(h.ljust(w) for h, w in zip(heads, width, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in width) + "|")
    for row in cells:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(row, width, strict=True)) + " |")


PARTS = ("baseline", "pages", "render", "live")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=float(os.environ.get("LOAD_SCALE", "1")))
    parser.add_argument("--database", default=os.environ.get("LOAD_DATABASE", "portal_load"))
    parser.add_argument("--seconds", type=float, default=float(os.environ.get("LOAD_SECONDS", 5)))
    parser.add_argument("--max-connections", type=int, default=256)
    parser.add_argument("--user", default="", help="Log in as (default: the most jobs).")
    parser.add_argument("--no-browser", action="store_true", help="Leave out the render part.")
    parser.add_argument(
        "--parts",
        default=os.environ.get("LOAD_PARTS", ",".join(PARTS)),
        help=f"What to measure, of {','.join(PARTS)} (default: all).",
    )
    parser.add_argument(
        "--before",
        default=os.environ.get("LOAD_BEFORE", ""),
        help="Also measure commit BEFORE's code on the same database first, and print both.",
    )
    args = parser.parse_args()
    parts = {p for p in args.parts.split(",") if p} - ({"render"} if args.no_browser else set())
    if parts - set(PARTS):
        parser.error(f"--parts: {', '.join(sorted(parts - set(PARTS)))} (of {', '.join(PARTS)})")

    url = database_url(args.database)
    setup_django(url)  # connects to nothing yet
    ensure_database(url, args.scale)
    from django.core.management import call_command  # noqa: PLC0415

    t = time.perf_counter()
    call_command("migrate", verbosity=0)
    call_command("seed_load", "--scale", str(args.scale))
    print(f"database {args.database} ready in {time.perf_counter() - t:.0f} s", flush=True)

    owner, few = population(args.user)
    counter = Counter()
    title = f"make bench-load at scale {args.scale:g}"
    runs = []
    if args.before:
        root = checkout(args.before)
        print(f"\n== before: {args.before}, served from {root}", flush=True)
        with schema_as_at(root):
            stack = LoadStack(url, TMP / "before", root=root)
            runs.append(measure(stack, counter, owner, few, parts, args))
        print_table(runs[-1], stack.cores, f"{title}, {args.before}")
        print("\n== now", flush=True)
    stack = LoadStack(url, TMP / "stack")
    runs.append(measure(stack, counter, owner, few, parts, args))
    print_table(runs[-1], stack.cores, title)
    if args.before:
        before, after = ([r for r in rows if " @ " not in r.figure] for rows in runs)
        print_compared(before, after, stack.cores, title, (args.before, "now"))


@contextlib.contextmanager
def schema_as_at(root: Path) -> Iterator[None]:
    """The database's schema as ``root``'s code expects it (migrated back where this
    checkout has later migrations: an index added since is not measured as the earlier
    code's), then migrated forward again."""
    from django.core.management import call_command  # noqa: PLC0415

    targets = schema_of(root)
    for app, name in targets.items():
        t = time.perf_counter()
        call_command("migrate", app, name, verbosity=0)
        print(f"schema: {app} back to {name} ({time.perf_counter() - t:.0f} s)", flush=True)
    try:
        yield
    finally:
        if targets:
            t = time.perf_counter()
            call_command("migrate", verbosity=0)
            print(f"schema: forward again ({time.perf_counter() - t:.0f} s)", flush=True)


def measure(
    stack: LoadStack, counter: Counter, owner: str, few: str, parts: set[str], args
) -> list[Row]:
    """The figures of ``parts`` on ``stack`` (started here, stopped at the end)."""
    rows_out: list[Row] = []
    stack.start()
    try:
        cookie = stack.cookie_header(owner)
        print(f"served at {stack.base_url} by {stack.web_workers} web workers; as {owner}")
        if "baseline" in parts:
            static = _a_static_file(stack)
            r = wrk(stack.base_url, [static], "", 32, args.seconds)
            rows_out.append(
                Row(
                    "baseline: a static file, same server (wrk, 32 conn)",
                    f"{r['rate']:.0f} req/s, p99 {ms(r['p99_us'])}",
                    "0",
                )
            )
            print(f"  baseline {static}: {rows_out[-1].value}", flush=True)
        targets = [
            ("dashboard", ["/"]),
            (f"dashboard, {CHANGES:g} changes/s to the person's jobs", ["/"]),
            ("dashboard, state=running", ["/?state=running"]),
            ("API jobs, first page", ["/api/v1/jobs/"]),
            (
                f"API jobs, first page, {CHANGES:g} changes/s to the person's jobs",
                ["/api/v1/jobs/"],
            ),
            ("API jobs, state=completed", ["/api/v1/jobs/?state=completed"]),
            (
                "API jobs, filters (state, created_after, experiment)",
                ["/api/v1/jobs/?state=active&created_after=2020-01-01T00:00:00Z&experiment=none"],
            ),
        ]
        for name, paths in targets if "pages" in parts else []:
            path = paths[0]
            if stack.root != ROOT:
                queries = NOT_COUNTED
            elif path.startswith("/api/"):
                sep = "&" if "?" in path else "?"
                queries = counter.two_sizes(
                    (owner, f"{path}{sep}page_size=2"), (owner, f"{path}{sep}page_size=200")
                )
            else:
                queries = counter.two_sizes((few, path), (owner, path))
            print(f"{name}: queries {queries}", flush=True)
            with changing(owner, CHANGES if "changes/s" in name else 0):
                rows_out += rising(stack, name, paths, cookie, queries, args)
        if "render" in parts:
            rows_out += render_rows(stack, counter, owner)
        if "live" in parts and importlib.util.find_spec("bench.load_live") is not None:
            from bench import load_live  # type: ignore[attr-defined]  # noqa: PLC0415

            rows_out += load_live.run(stack)
    finally:
        stack.stop()
    return rows_out


# How often one of the person's jobs changes while their pages are measured "with
# changes": each change ends their cached listings (jobs/listing.py), so these rows show
# what a page costs when it must be built again that often. (A person's jobs change when
# the sync sees a state, a node or a pending reason change: a few times a minute for most
# people, a few a second for the busiest.)
CHANGES = 2.0


@contextlib.contextmanager
def changing(owner: str, per_second: float) -> Iterator[None]:
    """While inside: the person's newest job renamed ``per_second`` times a second through
    the model (Job.update_details, which sends the job's signals as the sync's changes
    do)."""
    if not per_second:
        yield
        return
    import threading  # noqa: PLC0415

    from django.db import connection  # noqa: PLC0415

    from jobs.models import Job  # noqa: PLC0415

    stop = threading.Event()
    done = [0]

    def run() -> None:
        job = Job.objects.filter(owner__username=owner, trial=None).order_by("-created_at").first()
        assert job is not None
        name = job.name
        try:
            while not stop.wait(1 / per_second):
                job.update_details(name=f"{name} ({done[0] % 2})")
                done[0] += 1
        finally:
            job.update_details(name=name)
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        print(f"  ({done[0]} changes made)", flush=True)


def _a_static_file(stack: LoadStack) -> str:
    """The URL of a collected static file (portal.css through its manifest name)."""
    manifest = json.loads((stack.tmp / "static" / "staticfiles.json").read_text())
    return "/static/" + manifest["paths"]["frontend/portal.css"]


if __name__ == "__main__":
    main()
