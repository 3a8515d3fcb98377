"""A job array: jobs submitted together as one scheduler job (Slurm's ``--array``).

Each member is an ordinary Job (its own state, log, metrics and page) with an
``array_index``; the scheduler knows it as ``<array id>_<index>``. The array holds what
the members share: one script, one work directory (each member works in its own
sub-directory ``<index>``), one name on the cluster and the ``%`` throttle.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from jobs.models.job import new_job_uid
from jobs.models.run import claim_submit, release_submit_claim
from schedulers.seam import ArraySpec


class JobArray(models.Model):
    uid = models.CharField(max_length=16, unique=True, default=new_job_uid, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="job_arrays"
    )
    cluster = models.ForeignKey("Cluster", on_delete=models.PROTECT, related_name="job_arrays")
    throttle = models.PositiveIntegerField(
        default=0, help_text="At most this many members run at once (Slurm's %); 0: no limit."
    )
    scheduler_array_id = models.CharField(max_length=32, blank=True)
    work_dir = models.CharField(max_length=500, blank=True)
    script = models.TextField(blank=True, help_text="The array's job script as submitted.")
    submit_claimed_at = models.DateTimeField(null=True, blank=True, editable=False)
    # Submissions begun that no task finished (each claim counts; a task retrying by itself
    # hands its try back): recovery gives up at PORTAL_SUBMIT_MAX_TRIES (jobs/tasks.py).
    submit_tries = models.PositiveSmallIntegerField(default=0, editable=False)
    # As Job.submit_sent_at: from then on the array may exist on the cluster.
    submit_sent_at = models.DateTimeField(null=True, blank=True, editable=False)
    submitted_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"job array {self.pk}"

    @property
    def scheduler_name(self) -> str:
        """Every member's name on the cluster; the submit step adopts the array by it."""
        return f"portal-a{self.pk}-{self.uid}"

    def claim_submit(self) -> bool:
        """Take the right to submit the array, like Job.claim_submit (the submit step then
        adopts an array a dead worker already submitted)."""
        return claim_submit(self, JobArray.objects.filter(pk=self.pk, submitted_at__isnull=True))

    def release_submit_claim(self) -> None:
        release_submit_claim(self, JobArray.objects.filter(pk=self.pk))

    def mark_submit_sent(self) -> None:
        """Record that this try sends the array now (Job.mark_submit_sent: a member's cancel
        from then on also reaches the cluster)."""
        self.submit_sent_at = timezone.now()
        JobArray.objects.filter(pk=self.pk).update(submit_sent_at=self.submit_sent_at)

    @property
    def comment(self) -> str:
        """The portal's own id of the array, which the scheduler keeps with it (Slurm's
        --comment); its members share it."""
        return f"portal-array-{self.pk}-{self.uid}"

    def describe(self) -> ArraySpec:
        """The array as the scheduler seam's plain values (schedulers/seam.py)."""
        return ArraySpec(
            id=self.pk, name=self.scheduler_name, comment=self.comment, throttle=self.throttle
        )
