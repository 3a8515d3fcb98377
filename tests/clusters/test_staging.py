"""Stage-in and stage-out in the job script (schedulers/staging.py, schedulers/on_node/stage.sh):
rendered from a job's plain description, no database; then the rendered script itself run
by bash on this machine (no scheduler: the node's scratch is a folder of the test), with a
folder of awkward names, a damaged copy, links that leave the folder and a FIFO."""

from __future__ import annotations

import dataclasses
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from clusters.workdir import ScriptError
from schedulers import staging
from schedulers.htcondor import submit as condor_submit
from schedulers.seam import Member, Staging
from schedulers.slurm import scripts
from tests import factories

WORK = "/scratch/alice/.portal/jobs/7-abc"
DATA = Staging(
    source="/home/alice/data set",
    source_root="/home/alice",
    outputs=("model.pt", "results/*.csv"),
    destination="/proj/vision/out",
    destination_root="/proj/vision",
)


def rendered(**overrides) -> str:
    return scripts.render(factories.spec(**{"staging": DATA, **overrides}), WORK)


def words_of(script: str, start: str) -> list[str]:
    line = next(line for line in script.splitlines() if line.startswith(start))
    return shlex.split(line)


# --- rendered, as text ---------------------------------------------------------------------


def test_a_job_without_staging_has_none_of_it():
    script = scripts.render(factories.spec(), WORK)
    assert "portal_stage.sh" not in script and "PORTAL_STAGED_DIR" not in script


def test_the_folder_is_staged_and_checked_before_the_command_and_copied_back_after():
    script = rendered(command="python train.py --data $PORTAL_STAGED_DIR")
    manifest = script.index('portal_stage.sh" manifest || exit 1')
    copy = script.index('portal_stage.sh" copy || exit 1')
    command = script.index("bash -c 'python train.py --data $PORTAL_STAGED_DIR' &")
    assert manifest < copy < command
    # Stage-out runs in _portal_finish, after the command ended, before the job's exit.
    finish = script[script.index("_portal_finish() {") :]
    assert finish.index("_portal_stage_out") < finish.index('exit "$_portal_status"')
    assert words_of(script, "export PORTAL_STAGE_SOURCE=") == [
        "export",
        "PORTAL_STAGE_SOURCE=/home/alice/data set",
    ]
    out = script[script.index("_portal_stage_out() {") :]
    assert "out model.pt 'results/*.csv' ||" in out  # each pattern one quoted word
    assert 'export PORTAL_STAGED_DIR="$_portal_staged/data"' in script


def test_the_node_scratch_is_slurms_condors_or_tmpdir_unless_the_cluster_names_one():
    assert 'export PORTAL_STAGE_SCRATCH="${SLURM_TMPDIR:-${_CONDOR_SCRATCH_DIR:-' in rendered()
    assert staging.scratch_expression("/local/scratch") == "/local/scratch"
    # Unset on the node: empty (the job then says so), never a folder below /.
    assert staging.scratch_expression("$LOCAL_SCRATCH") == '"${LOCAL_SCRATCH:+${LOCAL_SCRATCH}}"'
    assert staging.scratch_expression("$LOCAL/jobs") == '"${LOCAL:+${LOCAL}/jobs}"'
    for hostile in ("$(id)", "/a b", "/x/../etc", "$X;id", "relative", "${X}"):
        with pytest.raises(ScriptError):
            staging.scratch_expression(hostile)


def test_without_a_destination_the_outputs_go_to_the_work_directory():
    outputs_only = Staging(outputs=("model.pt",))
    script = rendered(staging=outputs_only)
    assert 'export PORTAL_STAGE_DEST="$PORTAL_WORK_DIR"' in script
    assert "export PORTAL_STAGE_SOURCE=''" in script
    assert 'portal_stage.sh" manifest' not in script  # nothing to check: an empty folder


def test_a_multi_node_job_stages_on_every_node_and_copies_back_from_the_first():
    script = rendered(nodes=2, tasks_per_node=2, launcher="mpi")
    copy = words_of(script, "srun ")
    assert copy[1:5] == [
        "--nodes=$SLURM_JOB_NUM_NODES",
        "--ntasks=$SLURM_JOB_NUM_NODES",
        "--ntasks-per-node=1",
        "--kill-on-bad-exit=1",
    ]
    assert copy[-6:] == ["bash", "$PORTAL_WORK_DIR/lib/portal_stage.sh", "copy", "||", "exit", "1"]
    out = script[script.index("_portal_stage_out() {") :].split("\n}")[0]
    assert 'portal_stage.sh" out ' in out and "--ntasks-per-node=1" in out
    assert out.rstrip().endswith('portal_stage.sh" clean')
    assert 'portal_stage.sh" manifest' in script.split("srun ")[0]  # once, on the first node


@pytest.mark.parametrize("runtime", ["apptainer", "podman"])
def test_the_staged_copy_is_mounted_in_the_container(runtime):
    location = "/img/t.sif" if runtime == "apptainer" else "docker://python:3.12"
    script = rendered(runtime=runtime, location=location)
    line = next(line for line in script.splitlines() if line.endswith("&") and "bash -c" in line)
    if runtime == "apptainer":
        assert '--bind "$PORTAL_STAGED_DIR"' in line
    else:
        assert '--volume "$PORTAL_STAGED_DIR:$PORTAL_STAGED_DIR"' in line
        assert "--env PORTAL_STAGED_DIR" in line
    plain = scripts.render(factories.spec(runtime=runtime, location=location), WORK)
    assert "PORTAL_STAGED_DIR:" not in plain and '--bind "$PORTAL_STAGED_DIR"' not in plain


HOSTILE = "x'; touch /tmp/PWNED; $(id) `id` \"q"


@pytest.mark.parametrize(
    "bad",
    [
        Staging(source="relative/data", source_root="/home/alice"),
        Staging(source="/home/alice/../etc", source_root="/home/alice"),
        Staging(source="/home/alice/a\nb", source_root="/home/alice"),
        Staging(source="/home/alice/a\x1b[31m", source_root="/home/alice"),
        Staging(source="/home/alice/data", source_root=""),
        Staging(outputs=("/etc/passwd",)),
        Staging(outputs=("../up",)),
        Staging(outputs=("a\nb",)),
        Staging(outputs=("x",), destination="/proj/x/../y", destination_root="/proj/x"),
        Staging(scratch="/tmp; id"),
    ],
)
def test_values_that_skipped_the_launch_checks_are_refused_here(bad):
    with pytest.raises(ScriptError):
        rendered(staging=bad)


def test_only_batch_jobs_stage():
    with pytest.raises(ScriptError, match="batch"):
        rendered(kind="notebook")


def test_an_array_stages_for_each_member_in_its_own_directory():
    first = factories.spec(staging=DATA, array_index=0)
    second = dataclasses.replace(first, id=2, array_index=1)
    members = [Member(job=first, command="train"), Member(job=second, command="train")]
    script = scripts.render_array(factories.array_spec(), members, WORK)
    assert 'export PORTAL_STAGE_MANIFEST="$PORTAL_WORK_DIR/stage-in.sha256"' in script
    assert "portal-stage-$PORTAL_JOB_ID-" in script  # each member's own folder on the node


def test_htcondor_stages_without_a_container_and_refuses_with_one():
    script = condor_submit.render(factories.spec(staging=DATA), WORK)
    assert 'portal_stage.sh" copy || exit 1' in script and "srun" not in script
    with pytest.raises(ScriptError, match="without a container"):
        condor_submit.render(
            factories.spec(staging=DATA, runtime="apptainer", location="/img/t.sif"), WORK
        )


# --- run, as bash runs it on the node --------------------------------------------------------

COMMAND_SEES_THE_COPY = r"""
set -e
echo "staged at $PORTAL_STAGED_DIR"
test "$(cat "$PORTAL_STAGED_DIR/a b.txt")" = alpha
test "$(cat "$PORTAL_STAGED_DIR/sub dir/deep.txt")" = deep
test -L "$PORTAL_STAGED_DIR/link" && test "$(cat "$PORTAL_STAGED_DIR/link")" = alpha
test -f "$PORTAL_STAGED_DIR/$(printf 'new\nline')"
mkdir -p "$PORTAL_STAGED_DIR/results"
echo 1,2 > "$PORTAL_STAGED_DIR/results/r 1.csv"
echo weights > "$PORTAL_STAGED_DIR/model.pt"
echo log > "$PORTAL_WORK_DIR/train.log"
touch "$PORTAL_WORK_DIR/ran"
exit "${EXIT_WITH:-0}"
"""


@pytest.fixture
def place(tmp_path):
    """A home with a folder to stage (names with a space and a newline, a read-only
    subfolder, a link inside it), a work directory and a node's scratch folder."""
    home = tmp_path / "home"
    data = home / "data set"
    (data / "sub dir").mkdir(parents=True)
    (data / "a b.txt").write_text("alpha\n")
    (data / "sub dir" / "deep.txt").write_text("deep\n")
    (data / "new\nline").write_text("n")
    (data / "link").symlink_to("a b.txt")
    (data / "sub dir").chmod(0o555)  # a dataset is often read-only: removed all the same
    work = home / ".portal" / "jobs" / "7-abc"
    work.mkdir(parents=True)
    node = tmp_path / "node"
    node.mkdir()
    yield tmp_path
    (data / "sub dir").chmod(0o755)


def run_job(place: Path, command: str = COMMAND_SEES_THE_COPY, path: str = "", **fields):
    home = place / "home"
    values = {
        "source": str(home / "data set"),
        "source_root": str(home),
        "outputs": ("model.pt", "results/*.csv", "train.log", "missing*"),
        "destination": str(home / "out"),
        "destination_root": str(home),
        **fields,
    }
    work = home / ".portal" / "jobs" / "7-abc"
    script = place / "job.sh"
    job = factories.spec(command=command, staging=Staging(**values))
    script.write_text(scripts.render(job, str(work)))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "_CONDOR", "PORTAL"))}
    env["TMPDIR"] = str(place / "node")
    if path:
        env["PATH"] = path
    return subprocess.run(
        ["bash", str(script)], cwd=work, env=env, capture_output=True, text=True, timeout=60
    )


def test_the_command_finds_the_checked_copy_and_its_outputs_come_back(place):
    done = run_job(place)
    assert done.returncode == 0, done.stdout + done.stderr
    home = place / "home"
    # Three files (the link is copied as a link), the newline in a name escaped.
    assert "3 file(s) copied to" in done.stdout
    assert "checksums match" in done.stdout
    assert (home / "out" / "model.pt").read_text() == "weights\n"
    assert (home / "out" / "results" / "r 1.csv").read_text() == "1,2\n"  # its place kept
    assert (home / "out" / "train.log").read_text() == "log\n"  # from the work directory
    assert "nothing matches missing\\*" in done.stderr
    manifest = (home / ".portal" / "jobs" / "7-abc" / "stage-in.sha256").read_text()
    assert "./a b.txt" in manifest and "./sub dir/deep.txt" in manifest
    assert "./new\\nline" in manifest  # sha256sum's escape: one line per file
    assert list((place / "node").iterdir()) == []  # the copy is gone, read-only parts too


def test_the_copy_is_private_to_the_job_on_the_node(place):
    done = run_job(place, command='stat -c %a "$PORTAL_STAGED_DIR/.."')
    assert done.returncode == 0, done.stderr
    assert "\n700\n" in done.stdout


def test_a_failing_command_keeps_its_status_and_its_outputs_still_come_back(place):
    done = run_job(place, command=f"EXIT_WITH=3; {COMMAND_SEES_THE_COPY}")
    assert done.returncode == 3, done.stderr
    assert (place / "home" / "out" / "model.pt").exists()
    assert list((place / "node").iterdir()) == []


def test_outputs_that_cannot_be_copied_fail_a_job_that_succeeded(place):
    (place / "home" / "out").write_text("a file where the folder should be")
    done = run_job(place)
    assert done.returncode == 1
    assert "stage-out: cannot make" in done.stderr


def shim_path(place: Path, **tools: str) -> str:
    """PATH with ``tools`` (name: bash body) in front of this machine's."""
    shims = place / "shims"
    shims.mkdir(exist_ok=True)
    for name, body in tools.items():
        (shims / name).write_text(f"#!/bin/bash\n{body}\n")
        (shims / name).chmod(0o755)
    return f"{shims}:{os.environ['PATH']}"


def without_rsync(place: Path, **tools: str) -> str:
    """A PATH of this machine's tools but rsync (a node without it), ``tools`` in front."""
    found = place / "tools"
    found.mkdir()
    for folder in ("/usr/bin", "/bin"):
        for entry in Path(folder).iterdir():
            target = found / entry.name
            if entry.name != "rsync" and not target.exists() and not target.is_symlink():
                target.symlink_to(entry)
    return shim_path(place, **tools).replace(os.environ["PATH"], str(found))


# Appends to the copy of "a b.txt" (the copier's last argument is where it copies to).
DAMAGE = 'for last; do :; done; echo damaged >> "$last/a b.txt"'


@pytest.mark.parametrize("copier", ["rsync", "cp"])
def test_a_damaged_copy_fails_the_job_before_the_command(place, copier):
    """rsync where the node has it, else cp: a copy that differs is caught either way."""
    if copier == "rsync":
        path = shim_path(place, rsync=f'/usr/bin/rsync "$@" || exit; {DAMAGE}')
    else:
        path = without_rsync(place, cp=f'/usr/bin/cp "$@" || exit; {DAMAGE}')
    done = run_job(place, path=path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "a b.txt: FAILED" in done.stderr
    assert "does not match the manifest" in done.stderr
    assert "the command was not run" in done.stderr
    assert not (place / "home" / ".portal" / "jobs" / "7-abc" / "ran").exists()
    assert list((place / "node").iterdir()) == []


def test_files_added_during_the_copy_fail_it_too(place):
    add = 'for last; do :; done; /usr/bin/rsync "$@" || exit; echo new > "$last/extra"'
    done = run_job(place, path=shim_path(place, rsync=add))
    assert done.returncode == 1
    assert "has 4 file(s), its manifest 3" in done.stderr


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda data: (data / "etc").symlink_to("/etc"), "points outside it"),
        (lambda data: (data / "up").symlink_to("../other"), "points outside it"),
        (lambda data: os.mkfifo(data / "pipe"), "is not a file, folder or link"),
    ],
    ids=["absolute link out", "relative link out", "fifo"],
)
def test_links_out_of_the_folder_and_special_files_are_refused(place, make, said):
    make(place / "home" / "data set")
    done = run_job(place)
    assert done.returncode == 1
    assert said in done.stderr and "stage-in failed" in done.stderr
    assert not (place / "home" / ".portal" / "jobs" / "7-abc" / "ran").exists()


def test_a_link_on_the_way_from_the_root_is_refused(place):
    home = place / "home"
    (home / "via").symlink_to(home / "data set")
    done = run_job(place, source=str(home / "via"))
    assert done.returncode == 1 and "is a symbolic link: refused" in done.stderr


def test_outputs_only_get_an_empty_folder_on_the_node(place):
    done = run_job(
        place,
        command='test -z "$(ls -A "$PORTAL_STAGED_DIR")" && echo w > "$PORTAL_STAGED_DIR/model.pt"',
        source="",
        source_root="",
        outputs=("model.pt",),
    )
    assert done.returncode == 0, done.stderr
    assert (place / "home" / "out" / "model.pt").read_text() == "w\n"


def test_an_empty_folder_stages_as_an_empty_copy(place):
    empty = place / "home" / "empty"
    empty.mkdir()
    done = run_job(place, command='test -z "$(ls -A "$PORTAL_STAGED_DIR")"', source=str(empty))
    assert done.returncode == 0, done.stderr
    assert "0 file(s) copied" in done.stdout


def test_a_node_scratch_variable_unset_on_the_node_fails_the_job_saying_so(place):
    done = run_job(place, scratch="$PORTAL_TEST_UNSET/jobs")
    assert done.returncode == 1
    assert "no node-local scratch folder here" in done.stderr
    assert "$PORTAL_TEST_UNSET/jobs" in done.stderr


def test_patterns_cannot_leave_the_staged_folder_or_the_work_directory(place):
    secret = place / "node" / "secret"
    secret.write_text("not the job's")
    done = run_job(
        place, command="true", outputs=(".*/.*/secret", ".*/.*/.*/node/secret", "**/secret")
    )
    assert done.returncode == 0, done.stderr
    assert not list((place / "home" / "out").rglob("secret"))
