import time

from django.core.management.base import BaseCommand, CommandError

from devtools import loadseed


class Command(BaseCommand):
    help = (
        "Generate a centre's population in PostgreSQL for the load harness (make bench-load): "
        "at --scale 1.0, 1,000 users, 100,000 finished and 5,000 active jobs, 200 experiments "
        "and 100 million metric points on the cluster 'load'. A second run at the same scale "
        "does nothing; --reset removes what an earlier run made first."
    )

    def add_arguments(self, parser):
        parser.add_argument("--scale", type=float, default=1.0, help="1.0: the full sizes.")
        parser.add_argument(
            "--preset",
            choices=sorted(loadseed.PRESETS),
            help="Named sizes instead of a scale (big-pages: an experiment of 2,000 trials "
            "and 2,000 runs with metrics, little else; bench/bigpages.py).",
        )
        parser.add_argument("--reset", action="store_true", help="Remove an earlier seeding.")

    def handle(self, *args, scale: float = 1.0, preset=None, reset: bool = False, **options):
        try:
            if reset:
                t = time.perf_counter()
                loadseed.reset()
                self.stdout.write(f"removed the earlier seeding in {time.perf_counter() - t:.1f} s")
            report = loadseed.seed(preset or scale, say=self.stdout.write)
        except loadseed.SeedError as exc:
            raise CommandError(str(exc)) from exc
        for line in report.lines():
            self.stdout.write(line)
