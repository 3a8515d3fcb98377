"""The two heaviest pages at full size, without seeding a whole centre (#43): an experiment
of 2,000 trials and a comparison of 1,000 runs, opened in headless Chromium on the served
stack, each ``--runs`` times in a fresh browser; the median timeline of each (the
document's last byte, its data's last byte, the charts drawn) and the bytes transferred.

The database is ``portal_bigpages``, seeded once with ``seed_load --preset big-pages``
(2,000 trials and 2,000 runs with four 1,000-step series each; a few minutes) and kept
between runs. ``make bench-load`` measures the same pages in the full population; this
is the quick loop for working on them.

    .venv/bin/python bench/bigpages.py [--runs 3] [--before REV]

With ``--before REV`` the same pages are first served by the code of commit REV (a git
worktree, bench/loadstack.py's checkout()) on the same database, and one table shows both.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import load  # noqa: E402
from bench.loadstack import LoadStack, Row, checkout  # noqa: E402

PRESET = "big-pages"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", default="portal_bigpages")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--profile", type=Path, help="A directory for the pages' JavaScript CPU profiles."
    )
    parser.add_argument(
        "--before",
        default=os.environ.get("LOAD_BEFORE", ""),
        help="Also serve commit BEFORE's code first, and compare.",
    )
    args = parser.parse_args()

    url = load.database_url(args.database)
    load.setup_django(url)
    load.ensure_database(url, PRESET)
    from django.core.management import call_command  # noqa: PLC0415

    from experiments.models import Experiment  # noqa: PLC0415

    t = time.perf_counter()
    call_command("migrate", verbosity=0)
    call_command("seed_load", "--preset", PRESET)
    print(f"database {args.database} ready in {time.perf_counter() - t:.0f} s", flush=True)
    big = Experiment.objects.select_related("owner").order_by("uid").first()
    assert big is not None, "the preset seeds two experiments"
    owner = big.owner.get_username()

    counter = load.Counter()
    if args.before:
        root = checkout(args.before)
        print(f"before: {args.before} served from {root}", flush=True)
        with load.schema_as_at(root):
            before = measure(LoadStack(url, load.TMP / "before", root=root), counter, owner, args)
    after = measure(LoadStack(url, load.TMP / "stack"), counter, owner, args)
    title = f"bench/bigpages.py, median of {args.runs}"
    if args.before:
        load.print_compared(before, after, os.cpu_count() or 1, title, (args.before, "now"))
    else:
        load.print_table(after, os.cpu_count() or 1, title)


def measure(stack: LoadStack, counter: load.Counter, owner: str, args) -> list[Row]:
    """Each page's median of ``args.runs`` first renders on ``stack``."""
    stack.start()
    try:
        if args.profile:
            args.profile.mkdir(parents=True, exist_ok=True)
            load.render_rows(stack, counter, owner, args.profile)
        runs = [load.render_rows(stack, counter, owner) for _ in range(args.runs)]
    finally:
        stack.stop()
    rows = []
    for i, row in enumerate(runs[0]):
        renders = [r[i].render for r in runs]
        drawn = [render.drawn for render in renders if render is not None]
        median = renders[drawn.index(statistics.median_low(drawn))]
        assert median is not None  # render_rows() gives every row its timeline
        spread = f" (of {args.runs}: {min(drawn):,.0f}–{max(drawn):,.0f} ms)"
        rows.append(Row(row.figure, median.text() + spread, row.queries))
    return rows


if __name__ == "__main__":
    main()
