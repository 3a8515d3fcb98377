import pytest

from jobs.models import ContainerImage, Job


def make_job(owner, cluster, state="running", image=None):
    if image is None:
        image, _ = ContainerImage.objects.get_or_create(
            slug="host-batch", defaults={"name": "Host", "runtime": "none"}
        )
    return Job.objects.create(
        owner=owner,
        cluster=cluster,
        partition=cluster.partitions.first(),
        image=image,
        kind="batch",
        command="python train.py",
        state=state,
    )


@pytest.fixture
def job(owner, cluster):
    return make_job(owner, cluster)


def records(n, start=0, attempt=0, rank=0, **extra):
    return [
        {
            "seq": s,
            "attempt": attempt,
            "rank": rank,
            "step": s,
            "time": 1.7e9 + s,
            "metrics": {"loss": 1.0 / (s + 1), "acc": s / (n + start)},
            **extra,
        }
        for s in range(start, start + n)
    ]
