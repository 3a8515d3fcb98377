"""What each run of a job used, from accounting: a requeued job runs several times (attempts),
each with its own node, start, end and allocation. GPU-hours and CPU-hours add up over them."""

from __future__ import annotations

from django.db import models


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
        """Store ``runs`` (jobs.schedulers.Attempt, oldest first, from accounting) as the
        job's attempts 0, 1, ...; rows already there are updated. Returns how many changed."""
        changed = 0
        for number, run in enumerate(runs):
            values = {
                "scheduler_state": run.scheduler_state,
                "node": run.node,
                "started_at": run.started_at,
                "ended_at": run.ended_at,
                "elapsed_seconds": run.elapsed_seconds,
                "gpus": run.gpus,
                "cpus": run.cpus,
            }
            row, created = cls.objects.get_or_create(job=job, number=number, defaults=values)
            if not created and any(getattr(row, k) != v for k, v in values.items()):
                cls.objects.filter(pk=row.pk).update(**values)
                created = True
            changed += created
        if changed:
            from jobs.broadcast import publish_job

            publish_job(job)  # the job page shows its runs
        return changed


def usage_of(job) -> dict:
    """What the job's runs used in all (from accounting): GPU-hours, CPU-hours, wall time."""
    runs = list(job.attempts.all())
    return {
        "runs": runs,
        "gpu_hours": sum(r.gpu_hours for r in runs),
        "cpu_hours": sum(r.cpu_hours for r in runs),
        "wall_seconds": sum(r.elapsed_seconds for r in runs),
    }
