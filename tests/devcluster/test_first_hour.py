"""The first hour on `make demo`'s Slurm dev cluster, on real Slurm: a newcomer presses
Launch three times with the form's defaults and all three jobs run at once."""

import pytest

from devtools import demo_catalog
from devtools import devcluster as devcluster_mod
from jobs import tasks
from jobs.launch import LaunchForm, launch_initial
from jobs.models import Job
from tests import factories, polling
from tests.devcluster.helpers import squeue_field

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db]


def test_three_jobs_with_the_forms_defaults_run_at_once(devcluster_info, owner, devcluster):
    demo_catalog.load()
    # As `make demo` registers them: the HTCondor pool first by name, the dev cluster marked
    # default (no job goes to the pool here, so it need not answer).
    pool = factories.cluster("condorpool", scheduler="htcondor")
    factories.partition(pool, "cpu", is_default=True)
    factories.account(pool, owner, "condoruser")
    devcluster_mod.register(
        devcluster_info, {"owner": devcluster_info["default_user"]}, default=True
    )

    jobs = []
    for _ in range(3):
        initial = {k: v for k, v in launch_initial(owner).items() if v is not None}
        form = LaunchForm(data=initial, user=owner)
        assert form.is_valid(), form.errors
        job = form.save()
        assert job.cluster.name == "devcluster", job.cluster
        tasks.submit_job.apply(args=[job.pk])
        jobs.append(job)

    states: dict[int, str] = {}

    def all_running() -> bool:
        nonlocal states
        tasks.sync_jobs(Job.objects.filter(pk__in=[j.pk for j in jobs]))
        states = dict(Job.objects.filter(pk__in=[j.pk for j in jobs]).values_list("pk", "state"))
        if set(states.values()) == {Job.State.RUNNING}:
            return True
        assert not set(states.values()) & set(Job.FINAL_STATES), Job.objects.filter(
            pk__in=states
        ).values_list("pk", "state", "message")
        return False

    polling.until(
        all_running,
        120,
        lambda: (
            f"the three jobs to run: {states}, "
            f"{[squeue_field(j.scheduler_job_id, '%r') for j in Job.objects.filter(pk__in=states)]}"
        ),
        interval=1,
    )
    # Slurm says the same of all three at the same moment.
    ran = Job.objects.filter(pk__in=states)
    assert {squeue_field(j.scheduler_job_id, "%T") for j in ran} == {"RUNNING"}
    job = ran.first()
    assert job is not None
    print(
        f"three default jobs: {job.get_kind_display()} of {job.image.slug} on "
        f"{job.partition}, {job.gpus} GPU, {job.cpus} CPUs, {job.memory_gb} GB each"
    )
