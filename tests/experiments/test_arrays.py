"""A job array's one script: the shared request, and a table from the array task id to
each member's job, directory, command, parameters and files — all as data. Rendered from
plain descriptions (schedulers.seam: ArraySpec, Member), no database; what a trial's member is
told, from its rows."""

import json
import subprocess

import pytest

from clusters import workdir
from experiments import runs
from jobs.models import Job, JobArray
from schedulers.seam import ArraySpec, JobSpec, Member
from schedulers.slurm import operations, scripts
from tests import factories

WORK = "/home/alice/.portal/jobs/a3-abc"
HOSTILE = "$(touch /tmp/pwned) `id` ' \" ; rm -rf ~"
PYTORCH = {"runtime": "apptainer", "location": "/shared/images/pytorch.sif"}


def member_spec(array: ArraySpec, index: int, command: str, **fields) -> JobSpec:
    """The description of ``array``'s member ``index`` (job 10 + index)."""
    return factories.spec(
        id=10 + index,
        name=array.name,
        comment=array.comment,
        command=command,
        array_index=index,
        **PYTORCH | fields,
    )


def members(params) -> tuple[ArraySpec, list[JobSpec]]:
    array = factories.array_spec(3, throttle=2)
    jobs = [
        member_spec(array, i, runs.trial_command("train --epochs 3", p, pass_arguments=True))
        for i, p in enumerate(params)
    ]
    return array, jobs


def identity_of(script: str, task: int) -> dict[str, str]:
    """Run the member table of ``script`` for array task ``task``; what it exports."""
    start = script.index("# Which member of the array")
    end = script.index("esac", start) + len("esac")
    table = script[start:end].replace('> "$PORTAL_WORK_DIR/', '> "$OUT/')
    out = subprocess.run(
        [
            "bash",
            "-c",
            f"OUT=$(mktemp -d); {table}\nexport PORTAL_COMMAND; env -0; printf '\\0FILE'; cat \"$OUT\"/*",
        ],
        env={"SLURM_ARRAY_TASK_ID": str(task), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    env_part, _, file_part = out.partition("\0FILE")
    env = dict(item.split("=", 1) for item in env_part.split("\0") if "=" in item)
    env["_file"] = file_part
    return env


def test_each_task_finds_its_member_and_hostile_values_stay_data():
    array, jobs = members([{"lr": 0.1}, {"lr": HOSTILE}])
    script = scripts.render_array(
        array,
        [
            Member(
                job=j,
                command=j.command,
                env={"PORTAL_PARAM_LR": str(j.command)},
                files={"params.json": json.dumps({"n": i})},
                metrics_url=f"http://portal/api/{j.id}/",
            )
            for i, j in enumerate(jobs)
        ],
        WORK,
    )
    directives = [line for line in script.splitlines() if line.startswith("#SBATCH")]
    assert directives[:4] == [
        "#SBATCH --job-name=portal-a3-abc",
        "#SBATCH --comment=portal-array-3-abc",
        "#SBATCH --array=0-1%2",
        f"#SBATCH --chdir={WORK}",
    ]
    assert f"#SBATCH --output={WORK}/%a/stdout.log" in directives
    second = identity_of(script, 1)
    assert second["PORTAL_JOB_ID"] == str(jobs[1].id)
    assert second["PORTAL_WORK_DIR"] == f"{WORK}/1"
    assert second["PORTAL_COMMAND"] == jobs[1].command
    assert second["PORTAL_PARAM_LR"] == jobs[1].command  # the hostile text, unchanged
    assert second["PORTAL_METRICS_URL"] == f"http://portal/api/{jobs[1].id}/"
    assert json.loads(second["_file"]) == {"n": 1}
    assert identity_of(script, 0)["PORTAL_JOB_ID"] == str(jobs[0].id)
    with pytest.raises(subprocess.CalledProcessError):
        identity_of(script, 2)  # not a member: the task stops
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)


def test_the_trial_command_gets_its_arguments_as_one_word_each():
    command = runs.trial_command("train", {"lr": 0.001, "act": HOSTILE}, pass_arguments=True)
    argv = subprocess.run(
        ["bash", "-c", f"printf '%s\\0' {command.removeprefix('train ')}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")[:-1]
    assert argv == ["--lr=0.001", f"--act={HOSTILE}"]
    assert runs.trial_command("train", {"lr": 1}, pass_arguments=False) == "train"


def test_a_members_own_environment_names_and_file_names_are_checked():
    array, jobs = members([{"lr": 0.1}])
    for bad in ({"env": {"lr; rm": "x"}}, {"files": {"../x": "y"}}):
        with pytest.raises(workdir.ScriptError):
            scripts.render_array(array, [Member(job=jobs[0], command="x", **bad)], WORK)


def test_trial_members_are_told_their_trial_fold_and_parameters(owner, cluster, image):
    experiment = factories.experiment_record(owner, cluster, image, folds=3)
    trial = experiment.trials.create(number=4, params={"lr": 0.5, "act": "relu"})
    job = factories.job(owner, cluster, image=image, trial=trial, fold=2)
    member = job.as_member("http://u/")
    assert member.env == {
        "PORTAL_EXPERIMENT_ID": str(experiment.pk),
        "PORTAL_TRIAL": "4",
        "FOLD": "2",
        "NUM_FOLDS": "3",
        "PORTAL_PARAM_LR": "0.5",
        "PORTAL_PARAM_ACT": "relu",
    }
    assert json.loads(member.files["params.json"]) == {"act": "relu", "lr": 0.5}


def test_the_submit_step_refuses_a_token_that_could_break_its_member_list():
    with pytest.raises(ValueError):
        operations.submit_array(None, WORK, "n", "script", [(0, "a b")])  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        operations.submit_array(None, WORK, "n", "script", [(-1, "t")])  # type: ignore[arg-type]


def test_a_member_is_named_by_its_array_on_the_cluster(owner, cluster, image):
    array = JobArray.objects.create(owner=owner, cluster=cluster, throttle=2)
    jobs = [factories.job(owner, cluster, "train", image=image, array=array, array_index=0)]
    assert jobs[0].scheduler_name == array.scheduler_name
    described = jobs[0].describe()
    assert (described.name, described.comment) == (array.scheduler_name, array.describe().comment)
    assert described.comment == f"portal-array-{array.pk}-{array.uid}"
    assert Job.objects.get(pk=jobs[0].pk).submitted_script == ""
    JobArray.objects.filter(pk=array.pk).update(script="#!/bin/bash")
    assert Job.objects.get(pk=jobs[0].pk).submitted_script == "#!/bin/bash"


def test_a_multi_node_trial_starts_its_members_command_through_the_launcher():
    """An experiment whose launch is distributed: the launcher's argv ends in the member's
    own command, expanded by the batch shell from the table, never pasted as text."""
    array = factories.array_spec(3, throttle=1)
    job = member_spec(
        array,
        0,
        runs.trial_command("python train.py", {"lr": 0.1}, pass_arguments=True),
        partition="gpu",
        nodes=2,
        tasks_per_node=2,
        gpus=2,
        launcher="mpi",
    )
    script = scripts.render_array(array, [Member(job=job, command=job.command)], WORK)
    start = next(line for line in script.splitlines() if line.startswith("mpirun "))
    assert start.endswith('bash -c "$PORTAL_COMMAND" &')
    assert "python train.py" not in start
    # The container gets the member's own directory, expanded by the batch shell.
    assert f'--pwd "{WORK}/$PORTAL_ARRAY_INDEX"' in start
    assert "PORTAL_COMMAND='python train.py --lr=0.1'" in script
    assert "#SBATCH --nodes=2" in script and "#SBATCH --array=0-0%1" in script
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)
