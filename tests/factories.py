"""Builders for test objects, so tests say what differs and not how a job is made.

(Older test modules still build their jobs inline; they move here as they are touched.)
"""

from __future__ import annotations

from jobs.models import Cluster, ContainerImage, Job, Partition


def host_image(slug: str = "host", **fields) -> ContainerImage:
    """The catalog entry that runs on the node itself (runtime 'none')."""
    image, _ = ContainerImage.objects.get_or_create(
        slug=slug, defaults={"name": "Host", "runtime": "none", **fields}
    )
    return image


def job(
    owner, cluster: Cluster, command: str = "echo hello", *, partition: str = "cpu", **fields
) -> Job:
    """A small batch job (1 CPU, 1 GB, 5 minutes) on ``partition``; ``fields`` override."""
    values = dict(
        kind=Job.Kind.BATCH,
        command=command,
        cpus=1,
        memory_gb=1,
        time_limit_minutes=5,
        image=host_image(),
    )
    values.update(fields)
    return Job.objects.create(
        owner=owner,
        cluster=cluster,
        partition=Partition.objects.get(cluster=cluster, name=partition),
        **values,
    )


def submitted_job(owner, cluster: Cluster, command: str = "echo hello", **fields) -> Job:
    """job(), submitted to the cluster by the submit task's own code (no worker)."""
    from jobs import tasks

    made = job(owner, cluster, command, **fields)
    tasks.submit_job.apply(args=[made.pk])
    made.refresh_from_db()
    assert made.scheduler_job_id, made.message
    return made
