"""Job scripts rendered from a job's plain description (schedulers.seam.JobSpec: its image,
partition and resources), no database; where a work directory goes, from the job's row."""

import json
import shlex
import subprocess
from functools import partial

import pytest

from clusters import workdir
from common.validators import split_list
from jobs.models import Job
from schedulers import launchers
from schedulers.slurm import scripts
from tests import factories

WORK = "/scratch/alice/.portal/jobs/7-abc"
PYTORCH = {"runtime": "apptainer", "location": "/shared/images/pytorch.sif"}


# A GPU batch job with every directive set, in the PyTorch image; each test changes what it
# looks at.
job_with = partial(
    factories.spec,
    command="python train.py --epochs 3",
    partition="gpu",
    gpus=2,
    gpu_type="a100",
    cpus=8,
    memory_gb=32,
    time_limit_minutes=90,
    account="proj1",
    **PYTORCH,
)


def directives_of(script: str) -> list[str]:
    return [line for line in script.splitlines() if line.startswith("#SBATCH")]


def test_directives_carry_resources_name_comment_and_work_dir():
    job = job_with(id=12, name="portal-12-f00", comment="portal-job-12-f00")
    script = scripts.render(job, WORK)
    assert directives_of(script) == [
        "#SBATCH --job-name=portal-12-f00",
        "#SBATCH --comment=portal-job-12-f00",
        "#SBATCH --partition=gpu",
        "#SBATCH --account=proj1",
        "#SBATCH --gres=gpu:a100:2",
        "#SBATCH --nodes=1",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --cpus-per-task=8",
        "#SBATCH --mem=32G",
        "#SBATCH --time=90",
        f"#SBATCH --chdir={WORK}",
        f"#SBATCH --output={WORK}/stdout.log",
        f"#SBATCH --error={WORK}/stderr.log",
        "#SBATCH --open-mode=append",
    ]


def test_work_dir_is_under_the_chosen_root(owner, cluster):
    job = factories.job(owner, cluster, work_dir_kind="scratch")
    assert workdir.job_work_dir(job, "alice") == f"/scratch/alice/.portal/jobs/{job.pk}-{job.uid}"
    job.work_dir_kind = "home"
    assert workdir.job_work_dir(job, "alice") == f"/home/alice/.portal/jobs/{job.pk}-{job.uid}"


def test_a_root_without_user_on_a_per_user_cluster_ends_the_submission_with_why(owner, cluster):
    """A row saved before the {user} rule: the submit step's ScriptError, not a crash."""
    job = factories.job(owner, cluster, work_dir_kind="scratch")
    cluster.scratch_root = "/scratch/shared"
    with pytest.raises(workdir.ScriptError, match="has no {user}"):
        workdir.job_work_dir(job, "alice")


def test_no_account_line_without_an_account_and_untyped_gres():
    """The cluster's default account is the description's (tests/jobs/test_describe.py)."""
    lines = directives_of(scripts.render(job_with(account="", gpu_type="", gpus=1), WORK))
    assert not [line for line in lines if "--account" in line] and "#SBATCH --gres=gpu:1" in lines


def test_gpu_type_as_constraint():
    job = job_with(gpu_type_as_constraint=True)
    lines = directives_of(scripts.render(job, WORK))
    assert "#SBATCH --gres=gpu:2" in lines and "#SBATCH --constraint=a100" in lines


def test_no_gres_without_gpus():
    job = job_with(gpus=0, gpu_type="")
    assert not [d for d in directives_of(scripts.render(job, WORK)) if "gres" in d]


def launch_line(script: str) -> list[str]:
    line = next(
        line for line in script.splitlines() if line.rstrip().endswith("&") and "bash -c" in line
    )
    return shlex.split(line.rstrip(" &"))


@pytest.mark.parametrize("runtime", ["apptainer", "singularity"])
def test_apptainer_and_singularity_exec_with_nv_and_a_bind(runtime):
    job = job_with(runtime=runtime, location="/img/t.sif")
    assert launch_line(scripts.render(job, WORK)) == [
        runtime,
        "exec",
        "--nv",
        "--bind",
        WORK,
        "--pwd",
        WORK,
        "/img/t.sif",
        "bash",
        "-c",
        "python train.py --epochs 3",
    ]
    no_gpus = job_with(runtime=runtime, location="/img/t.sif", gpus=0, gpu_type="")
    assert "--nv" not in launch_line(scripts.render(no_gpus, WORK))


def test_podman_runs_with_the_work_dir_and_gpus():
    job = job_with(runtime="podman", location="docker://docker.io/library/python:3.12")
    argv = launch_line(scripts.render(job, WORK))
    assert argv[:4] == ["podman", "run", "--rm", "--network=host"]
    assert ["--device", "nvidia.com/gpu=all"] == argv[4:6]
    assert [
        "--volume",
        f"{WORK}:{WORK}",
        "--workdir",
        WORK,
        "docker://docker.io/library/python:3.12",
    ] == argv[-8:-3]
    assert argv[-3:] == ["bash", "-c", "python train.py --epochs 3"]


@pytest.mark.parametrize("runtime", ["none", "apptainer", "podman"])
def test_a_notebook_opens_in_the_home_or_scratch_root_with_it_mounted(runtime):
    job = job_with(runtime=runtime, location="/img/n.sif", kind="notebook", command="")
    script = scripts.render(job, WORK)
    line = next(line for line in script.splitlines() if "jupyter lab" in line)
    argv = shlex.split(line.rstrip(" &"))
    assert argv[-1] == "--ServerApp.root_dir=/scratch/alice"
    if runtime == "apptainer":
        assert argv[argv.index("--bind") + 1] == "/scratch/alice"
        assert argv[argv.index("--pwd") + 1] == WORK  # connection.json is written there
    if runtime == "podman":
        assert argv[argv.index("--volume") + 1] == "/scratch/alice:/scratch/alice"
    assert workdir.work_root("/home/o'brien/.portal/jobs/1-x") == "/home/o'brien"
    with pytest.raises(workdir.ScriptError):
        workdir.work_root("/tmp/elsewhere")


def test_a_notebook_opens_in_the_folder_chosen_with_the_whole_root_mounted():
    job = job_with(location="/img/n.sif", kind="notebook", command="", notebook_dir="My work/a'b")
    script = scripts.render(job, WORK)
    assert "mkdir -p -- '/scratch/alice/My work/a'\"'\"'b'\n" in script
    line = next(line for line in script.splitlines() if "jupyter lab" in line)
    argv = shlex.split(line.rstrip(" &"))
    assert argv[-1] == "--ServerApp.root_dir=/scratch/alice/My work/a'b"
    assert argv[argv.index("--bind") + 1] == "/scratch/alice"


NEWS_OFF = {
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False}
}


@pytest.mark.parametrize("image_path", ["", "/opt/image/etc/jupyter"])
def test_a_notebook_defaults_jupyter_news_and_update_checks_to_off_in_its_own_config(
    tmp_path, image_path
):
    """JupyterLab's "notified about official Jupyter news?" pop-up: the job sets the
    settings' defaults in a config directory of its own, put in front of the image's
    JUPYTER_CONFIG_PATH; the user's ~/.jupyter is neither written nor hidden."""
    podman = {"runtime": "podman", "location": "img"}
    script = scripts.render(job_with(**podman, kind="notebook", command=""), WORK)
    lines = script.splitlines()
    start = lines.index("mkdir -p jupyter-config/labconfig")
    end = next(i for i, line in enumerate(lines) if line.startswith("export JUPYTER_CONFIG_PATH="))
    assert end < next(i for i, line in enumerate(lines) if "jupyter lab" in line)
    env = {"PATH": "/usr/bin:/bin", "PORTAL_WORK_DIR": str(tmp_path)}
    if image_path:
        env["JUPYTER_CONFIG_PATH"] = image_path
    shown = subprocess.run(
        ["bash", "-c", "\n".join(lines[start : end + 1]) + '\nprintf %s "$JUPYTER_CONFIG_PATH"'],
        cwd=tmp_path,  # the job's work directory
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert shown == ":".join(filter(None, [f"{tmp_path}/jupyter-config", image_path]))
    # The types are the schema's: fetchNews is a string ("true"/"false"/"none").
    written = tmp_path / "jupyter-config/labconfig/default_setting_overrides.json"
    assert json.loads(written.read_text()) == NEWS_OFF
    assert sorted(p.name for p in tmp_path.rglob("*")) == [
        "default_setting_overrides.json",
        "jupyter-config",
        "jupyter_server_config.py",  # pages without the Jupyter token (the proxy adds it)
        "labconfig",
    ]
    server_config = (tmp_path / "jupyter-config/jupyter_server_config.py").read_text()
    assert 'page_config["token"] = ""' in server_config
    assert "c.ServerApp.tornado_settings.update(" in server_config  # merged, not replaced
    code = "\n".join(line for line in lines if not line.lstrip().startswith("#"))
    for name in ("JUPYTER_CONFIG_DIR", "JUPYTERLAB_SETTINGS_DIR", "JUPYTER_NO_CONFIG", ".jupyter"):
        assert name not in code
    # Podman passes the variable into the container (Apptainer keeps the environment).
    argv = shlex.split(next(line for line in lines if "jupyter lab" in line).rstrip(" &"))
    assert argv[argv.index("JUPYTER_CONFIG_PATH") - 1] == "--env"
    batch = scripts.render(job_with(**podman), WORK)
    assert "jupyter-config" not in batch


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("projects/mnist", True),
        ("/projects/mnist/", True),
        ("My Project, v2/run-1", True),
        ("../etc", False),
        ("projects/../../etc", False),
        (".portal/jobs", False),
        (".portal/jobs/12-abcdef0123", True),  # a job's own directory (TensorBoard only)
        (".portal/jobs/12-abcdef0123/runs", True),
        (".portal/jobs/12-abcdef0123/../x", False),
        (".portal/jobs/12-abcdef012", False),
        (".portal/x/12-abcdef0123", False),
        ("a/.hidden", False),
        ("a//b", False),
        ("$(reboot)", False),
        ("a;b", False),
        ("/".join(["d"] * 11), False),
    ],
)
def test_a_notebook_folder_stays_inside_the_directory(value, ok):
    from django.core.exceptions import ValidationError

    from common import validators

    if ok:
        validators.relative_folder(value)
    else:
        with pytest.raises(ValidationError):
            validators.relative_folder(value)


def test_runtime_none_runs_on_the_host():
    assert launch_line(scripts.render(job_with(runtime="none", location=""), WORK)) == [
        "bash",
        "-c",
        "python train.py --epochs 3",
    ]


def test_modules_are_loaded_before_the_container():
    script = scripts.render(job_with(modules=["cuda/12.4", "apptainer/1.3"]), WORK)
    assert (
        script.index("module load cuda/12.4")
        < script.index("module load apptainer/1.3")
        < script.index("apptainer exec")
    )


def test_rendered_script_is_valid_bash(tmp_path):
    for kind in (Job.Kind.BATCH, Job.Kind.NOTEBOOK):
        path = tmp_path / f"{kind}.sh"
        path.write_text(scripts.render(job_with(kind=kind), WORK))
        result = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr


HOSTILE = "x; touch /tmp/PWNED; $(touch /tmp/PWNED) `touch /tmp/PWNED` 'q\" \\"


def test_hostile_values_in_directives_are_refused():
    """Values that skipped model validation (e.g. a raw database write) still cannot reach #SBATCH lines."""
    for field in ("account", "gpu_type", "partition"):
        with pytest.raises(workdir.ScriptError, match="unexpected characters"):
            scripts.render(job_with(**{field: HOSTILE}), WORK)
    job = job_with()
    with pytest.raises(workdir.ScriptError):
        scripts.render(job, "/scratch/a b/$(id)")


def test_hostile_values_elsewhere_stay_single_quoted_words(tmp_path):
    # The image's module list as the catalog splits it (ContainerImage.module_list).
    job = job_with(location=f"/img/{HOSTILE}", modules=split_list(HOSTILE), command=HOSTILE)
    script = scripts.render(job, WORK)
    argv = launch_line(script)
    assert argv[argv.index("exec") + 6] == f"/img/{HOSTILE}"  # one word, as typed
    assert argv[-1] == HOSTILE  # the command is handed to the job's bash as one argument
    # Execute the module and launch lines with stub commands: nothing but the stubs may run.
    module_line = next(line for line in script.splitlines() if line.startswith("module load"))
    marker = tmp_path / "PWNED"
    stub = f"module() {{ printf '%s\\n' \"$@\" > {tmp_path}/module.args; }}\n{module_line.replace('/tmp/PWNED', str(marker))}\n"
    subprocess.run(["bash", "-c", stub], check=True, cwd=tmp_path)
    assert not marker.exists() and not (tmp_path / "x").exists()
    # Module lists split on blanks and commas; each word arrives literally.
    assert (tmp_path / "module.args").read_text().splitlines() == ["load", "x;"]


@pytest.mark.parametrize("runtime", ["none", "apptainer", "podman"])
def test_a_tensorboard_session_serves_the_folder_behind_the_sessions_secret(runtime):
    job = job_with(
        runtime=runtime,
        location="/img/t.sif",
        kind="tensorboard",
        command="",
        notebook_dir="runs/a b",
    )
    script = scripts.render(job, WORK, register_url="https://portal.example.org/r/1/")
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
    line = next(line for line in script.splitlines() if line.endswith('"$_portal_port" &'))
    argv = shlex.split(line.rstrip(" &"))
    assert argv[-3:] == ["serve_tensorboard.py", "/scratch/alice/runs/a b", "$_portal_port"]
    # The server script is written from the template, whole, and checks the secret.
    served = script.split("<<'PORTAL_TENSORBOARD'\n", 1)[1].split("PORTAL_TENSORBOARD\n", 1)[0]
    assert served == (launchers.TEMPLATES / "tensorboard" / "serve_tensorboard.py").read_text()
    assert "hmac.compare_digest" in served and '"--load_fast", "false"' in served
    # It registers like a notebook, with the same secret the server checks.
    assert "export PORTAL_SESSION_PORT=$_portal_port PORTAL_SESSION_TOKEN=$_portal_secret" in script
    assert 'os.environ["PORTAL_SESSION_TOKEN"]' in script
    assert "PORTAL_REGISTER_URL=https://portal.example.org/r/1/" in script
    assert "$$" not in script.replace("$$(", "").replace("$$ ", "")  # templates fully rendered
    if runtime == "podman":
        assert argv[argv.index("PORTAL_SESSION_TOKEN") - 1] == "--env"
    assert "jupyter lab" not in script


def test_the_tensorboard_server_refuses_requests_without_the_secret():
    """serve_tensorboard.py's guard, run as WSGI without TensorBoard."""
    import importlib.util
    import os
    import sys
    import types

    fake = types.ModuleType("tensorboard")
    fake.program = types.SimpleNamespace(WerkzeugServer=object, TensorBoard=None)
    sys.modules["tensorboard"] = fake
    try:
        os.environ["PORTAL_SESSION_TOKEN"] = "s3cret-" + "x" * 20
        spec = importlib.util.spec_from_file_location(
            "serve_tensorboard", launchers.TEMPLATES / "tensorboard" / "serve_tensorboard.py"
        )
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        del sys.modules["tensorboard"]
    assert "PORTAL_SESSION_TOKEN" not in os.environ  # not passed on to TensorBoard's children
    app = module.guard(lambda environ, start: (start("200 OK", []), [b"runs"])[1])
    for given, status in [
        ("", "403"),
        ("token wrong", "403"),
        ("token s3cret-" + "x" * 19, "403"),
        ("token s3cret-" + "x" * 20, "200"),
    ]:
        seen = []
        app({"HTTP_AUTHORIZATION": given}, lambda s, h, seen=seen: seen.append(s))
        assert seen[0].startswith(status), given


# -- distributed jobs ------------------------------------------------------------------

distributed = partial(job_with, nodes=2, tasks_per_node=2, gpus=2, gpu_type="a100", cpus=4)


def start_line(script: str) -> list[str]:
    """The line that starts the job's processes (before its ' &'), as bash splits it."""
    line = next(line for line in script.splitlines() if line.startswith(("srun ", "mpirun ")))
    return shlex.split(line.removesuffix(" &"))


def test_the_directives_ask_for_nodes_tasks_per_node_and_per_node_gpus():
    script = scripts.render(distributed(launcher="mpi"), WORK)
    lines = directives_of(script)
    assert "#SBATCH --nodes=2" in lines and "#SBATCH --ntasks-per-node=2" in lines
    assert "#SBATCH --cpus-per-task=4" in lines and "#SBATCH --gres=gpu:a100:2" in lines


def test_the_torchrun_line_runs_one_torchrun_per_node_with_the_rendezvous():
    job = distributed(location="/img/pt.sif", launcher="torchrun")
    script = scripts.render(job, WORK)
    assert start_line(script) == [
        "srun",
        "--nodes=$NNODES",
        "--ntasks=$NNODES",
        "--ntasks-per-node=1",
        "--cpus-per-task=8",  # the node's two tasks' CPUs, for torchrun's two workers
        "--kill-on-bad-exit=1",
        "bash",
        "$PORTAL_WORK_DIR/lib/portal_rank.sh",
        "node",
        *["apptainer", "exec", "--nv", "--bind", WORK, "--pwd", WORK, "/img/pt.sif"],
        "torchrun",
        "--nnodes=$NNODES",
        "--nproc-per-node=$NPROC_PER_NODE",
        "--rdzv-backend=static",  # not c10d's, which unpickles what its store holds
        "--master-addr=$MASTER_ADDR",
        "--rdzv-id=$SLURM_JOB_ID",
        "--max-restarts=0",
        "--no-python",
        "bash",
        "-c",
        "python train.py --epochs 3",
    ]
    assert "export NPROC_PER_NODE=2" in script
    # The node's rank and the port reach torchrun in its environment (not in argv, for ps).
    assert "export PET_NODE_RANK=$NODE_RANK PET_MASTER_PORT=${MASTER_PORT:-}" in script
    assert "SLURM_JOB_ID:-0} % 20000" not in script  # no port anyone can work out
    podman = distributed(runtime="podman", location="pt:2", launcher="torchrun")
    line = start_line(scripts.render(podman, WORK))
    assert "PET_NODE_RANK" in line and "PET_MASTER_PORT" in line  # podman --env


def test_the_master_port_is_random_and_free_on_the_first_node(tmp_path):
    """The job script's choice of MASTER_PORT, run here: 20000 + a random number from
    /dev/urandom mod 12000, drawn again while a socket of this machine has the port."""
    import socket

    script = scripts.render(distributed(launcher="mpi"), WORK)
    lines = script.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('_portal_taken=" "'))
    end = lines.index("export MASTER_PORT")
    chooser = "\n".join(lines[start : end + 1]) + '\necho "$MASTER_PORT"\n'
    assert "od -An -N4 -tu4 /dev/urandom" in chooser

    def choose(draws: list[int] | None = None) -> int:
        fake = ""
        if draws is not None:  # od answers these, one per call, instead of /dev/urandom
            (tmp_path / "draws").write_text("".join(f" {d}\n" for d in draws))
            (tmp_path / "n").write_text("0")
            fake = f"cd {tmp_path}; od() {{ n=$(( $(cat n) + 1 )); echo $n > n; sed -n ${{n}}p draws; }}\n"
        out = subprocess.run(["bash", "-uc", fake + chooser], capture_output=True, text=True)
        assert out.returncode == 0 and not out.stderr, out.stderr
        return int(out.stdout)

    held: list[socket.socket] = []
    try:
        for port in range(31999, 20000, -1):  # two ports of the range that sockets here hold
            if len(held) == 2:
                break
            sock = socket.socket()
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                sock.close()
                continue
            sock.listen()
            held.append(sock)
        ports = [s.getsockname()[1] for s in held]
        free = next(p for p in range(20000, 32000) if p not in ports and _free(p))
        draws = [p - 20000 + 12000 * 7 for p in ports] + [free - 20000 + 12000 * 3]
        assert choose(draws) == free  # the held ones, drawn first, were passed over
    finally:
        for sock in held:
            sock.close()
    seen = {choose() for _ in range(10)}
    assert all(20000 <= p < 32000 for p in seen) and len(seen) > 5


def _free(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_the_mpi_line_starts_one_rank_per_task_through_the_rank_script():
    # Runtime none: no container around the ranks.
    script = scripts.render(distributed(runtime="none", location="", launcher="mpi"), WORK)
    assert start_line(script) == [
        "mpirun",
        "-np",
        "$WORLD_SIZE",
        "bash",
        "$PORTAL_WORK_DIR/lib/portal_rank.sh",
        "rank",
        "bash",
        "-c",
        "python train.py --epochs 3",
    ]


def test_launcher_none_runs_the_command_once_with_the_contract(tmp_path):
    job = distributed(launcher="none")
    script = scripts.render(job, WORK)
    assert "export MASTER_ADDR=" in script
    assert not [line for line in script.splitlines() if line.startswith(("srun ", "mpirun "))]
    assert "bash -c 'python train.py --epochs 3' &" in script
    path = tmp_path / "job.sh"
    path.write_text(script)
    assert subprocess.run(["bash", "-n", str(path)]).returncode == 0


@pytest.mark.parametrize("launcher", ["torchrun", "mpi"])
def test_a_hostile_command_stays_one_word_in_a_distributed_job(tmp_path, launcher):
    job = distributed(launcher=launcher, command=HOSTILE)
    script = scripts.render(job, WORK)
    assert start_line(script)[-1] == HOSTILE
    path = tmp_path / "job.sh"
    path.write_text(script)
    assert subprocess.run(["bash", "-n", str(path)]).returncode == 0


def test_only_the_contracts_own_words_are_left_to_expand():
    assert launchers.Expand("--nnodes=$NNODES").shell() == '"--nnodes=$NNODES"'
    for word in ("$(id)", "$NNODES;id", "`id`", "$NNODES $X", '$A"'):
        with pytest.raises(workdir.ScriptError):
            launchers.Expand(word).shell()


def test_the_rank_script_pins_each_rank_to_its_share_of_the_nodes_gpus(tmp_path):
    """portal_rank.sh under Open MPI's variables: rank 3 is local rank 1 of 2 on a node
    with GPUs 2,3 (and 4 GPUs for 2 ranks: two each)."""
    rank_script = launchers.RANK_SCRIPT
    show = [
        "sh",
        "-c",
        'echo "$RANK $LOCAL_RANK $NODE_RANK $CUDA_VISIBLE_DEVICES $PORTAL_NODE_GPUS"',
    ]

    def run(gpus: str, local: int, local_size: int, **extra: str) -> str:
        env = {
            "PATH": "/usr/bin:/bin",
            "OMPI_COMM_WORLD_RANK": "3",
            "OMPI_COMM_WORLD_LOCAL_RANK": str(local),
            "OMPI_COMM_WORLD_SIZE": "4",
            "OMPI_COMM_WORLD_LOCAL_SIZE": str(local_size),
            "SLURM_NODEID": "1",
            "SLURMD_NODENAME": "node2",
            "CUDA_VISIBLE_DEVICES": gpus,
            **extra,
        }
        out = subprocess.run(
            ["bash", str(rank_script), "rank", *show], env=env, capture_output=True, text=True
        ).stdout
        return out.splitlines()[-1]

    assert run("2,3", 1, 2) == "3 1 1 3 2,3"
    assert run("0,1,2,3", 1, 2) == "3 1 1 2,3 0,1,2,3"
    assert run("0", 1, 2) == "3 1 1 0 0"  # more ranks than GPUs: they share
    # The node's rank is its place in the job's node list, whatever step started it (an
    # MPI library may start the other nodes' daemons in a step of their own: node ID 0).
    assert run("0", 0, 1, SLURM_NODEID="0", PORTAL_NODES="node1 node2 ").split()[2] == "1"


SHOW_MLFLOW = 'printf "%s|%s" "${MLFLOW_TRACKING_URI:-}" "${MLFLOW_TRACKING_TOKEN:-}"'


@pytest.mark.parametrize(
    "given, token, expected",
    [
        ({}, "pm_secret", ("http://portal.example/api/v1/jobs/7/metrics/mlflow", "pm_secret")),
        # A tracking URI of the person's own is kept; no upload URL or token: none set.
        ({"MLFLOW_TRACKING_URI": "http://mine:5000"}, "pm_secret", ("http://mine:5000", "")),
        # Nodes that cannot reach the portal: MLflow's file store in the work directory.
        ({"PORTAL_METRICS_URL": ""}, "pm_secret", ("file://{work}/mlruns", "")),
        ({}, None, ("", "")),
    ],
    ids=["set", "own uri kept", "metrics over ssh", "no token"],
)
def test_an_unchanged_mlflow_client_is_pointed_at_its_job(tmp_path, given, token, expected):
    """MLflow's client reads MLFLOW_TRACKING_URI and MLFLOW_TRACKING_TOKEN: the job script
    sets them to the portal's MLflow-compatible API beside its upload URL and the job's
    own token (read from its private file, never on a command line), and a container is
    given both."""
    url = "http://portal.example/api/v1/jobs/7/metrics/ingest/"
    script = scripts.render(job_with(), WORK, metrics_url=url)
    lines = script.splitlines()
    start = next(
        i for i, line in enumerate(lines) if line.startswith("export PORTAL_METRICS_TOKEN")
    )
    store = next(i for i, line in enumerate(lines) if "MLFLOW_ALLOW_FILE_STORE=true" in line)
    end = next(i for i, line in enumerate(lines) if i > store and line == "fi")
    if token is not None:
        (tmp_path / ".portal_metrics_token").write_text(token + "\n")
    env = {"PATH": "/usr/bin:/bin", "PORTAL_WORK_DIR": str(tmp_path), "PORTAL_METRICS_URL": url}
    shown = subprocess.run(
        ["bash", "-uc", "\n".join(lines[start : end + 1] + [SHOW_MLFLOW])],
        env={**env, **given},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert shown == "|".join(expected).format(work=tmp_path)
    podman = scripts.render(job_with(runtime="podman", location="img"), WORK, metrics_url=url)
    assert "--env MLFLOW_TRACKING_URI --env MLFLOW_TRACKING_TOKEN" in podman
