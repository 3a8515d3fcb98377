"""What each run of a job used, from accounting: a requeued job runs several times (attempts),
each with its own node, start, end and allocation. GPU-hours and CPU-hours add up over them."""

from __future__ import annotations

from django.db import models, transaction

from jobs import signals


class JobAttempt(models.Model):
    """One run of a job as accounting (``sacct -D``) reports it; attempt 0 is the first."""

    job = models.ForeignKey("Job", on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveIntegerField(help_text="Restarts before this run (0: the first).")
    # The scheduler's word for how this run ended (COMPLETED, REQUEUED, PREEMPTED, ...).
    scheduler_state = models.CharField(max_length=32, blank=True)
    node = models.CharField(max_length=4000, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    elapsed_seconds = models.PositiveBigIntegerField(default=0)
    # What the run held (AllocTRES): GPUs and CPUs over all its nodes.
    gpus = models.PositiveIntegerField(default=0)
    cpus = models.PositiveIntegerField(default=0)
    # The Slurm account the run was charged to, as accounting recorded it.
    account = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["job", "number"]
        constraints = [
            models.UniqueConstraint(fields=["job", "number"], name="job_attempt_unique"),
        ]

    def __str__(self) -> str:
        return f"job {self.job_id} attempt {self.number + 1}"

    @property
    def gpu_hours(self) -> float:
        return self.gpus * self.elapsed_seconds / 3600

    @property
    def cpu_hours(self) -> float:
        return self.cpus * self.elapsed_seconds / 3600

    @classmethod
    def record(cls, job, runs) -> int:
        """Store ``runs`` (schedulers.seam.Attempt, oldest first, from accounting) as the
        job's attempts 0, 1, ...; returns how many changed. Never goes back: an ended run
        is not replaced by an older snapshot of it still running, nor a longer elapsed time
        by a shorter one (two reads of one job may finish in either order)."""
        changed = 0
        with transaction.atomic():
            # One writer per job at a time (PostgreSQL row lock; SQLite writes serialise).
            type(job).objects.select_for_update().filter(pk=job.pk).values_list("pk").first()
            have = {row.number: row for row in cls.objects.filter(job=job)}
            for number, run in enumerate(runs):
                values = {
                    "scheduler_state": run.scheduler_state,
                    "node": run.node,
                    "started_at": run.started_at,
                    "ended_at": run.ended_at,
                    "elapsed_seconds": run.elapsed_seconds,
                    "gpus": run.gpus,
                    "cpus": run.cpus,
                    "account": run.account,
                }
                row = have.get(number)
                if row is None:
                    cls.objects.create(job=job, number=number, **values)
                    changed += 1
                    continue
                older = (row.ended_at is not None and run.ended_at is None) or (
                    run.elapsed_seconds < row.elapsed_seconds
                )
                if not older and any(getattr(row, k) != v for k, v in values.items()):
                    cls.objects.filter(pk=row.pk).update(**values)
                    changed += 1
        if changed:
            signals.updated_on_commit(job)  # the job page shows its runs
        return changed

    @classmethod
    def settled(cls, job) -> bool:
        """Whether accounting has told the whole story of an ended job: its last run has
        ended. (slurmdbd may lag the controller by a few seconds.)"""
        last = cls.objects.filter(job=job).order_by("-number").first()
        return last is not None and last.ended_at is not None


def usage_of(job) -> dict:
    """What the job's runs used in all (from accounting): GPU-hours, CPU-hours, wall time."""
    runs = list(job.attempts.all())
    return {
        "runs": runs,
        "gpu_hours": sum(r.gpu_hours for r in runs),
        "cpu_hours": sum(r.cpu_hours for r in runs),
        "wall_seconds": sum(r.elapsed_seconds for r in runs),
    }
