"""Stage-in and stage-out in the job script, whatever the scheduler (docs/use/stage-in.md):
before the command, the job's folder is copied to scratch on each node's own disk
(``PORTAL_STAGED_DIR``) and checked there against a manifest of its checksums made from
the source; after the command, the outputs are copied back and the copy removed. The work
is done by schedulers/on_node/stage.sh, written beside the job; this module renders what calls
it, from a job's plain description (``JobSpec.staging``).

Multi-node jobs stage on every node (one ``srun`` task per node): node-local scratch is
each node's own, and every node's ranks read the data. The outputs are copied back from
the first node, where the job script runs (rank 0's, by the usual convention).

Every value is shell-quoted (``shlex.quote``) and checked here again, whatever the launch
form already checked: absolute folders without ``..`` or control characters, relative
outputs.
"""

from __future__ import annotations

import re
import shlex
import unicodedata

from clusters.workdir import ScriptError
from schedulers.launchers import TEMPLATES, heredoc_body
from schedulers.seam import JobSpec, Staging

STAGE_SCRIPT = TEMPLATES / "stage.sh"
# The manifest of the staged folder, kept in the work directory: what the job ran on.
MANIFEST = "stage-in.sha256"
# Where the copy goes when the cluster names no folder: Slurm's per-job folder on the
# node (where a site sets one), HTCondor's per-job scratch directory, the job's TMPDIR.
DEFAULT_SCRATCH = "${SLURM_TMPDIR:-${_CONDOR_SCRATCH_DIR:-${TMPDIR:-/tmp}}}"
_VARIABLE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]{0,63})(/[A-Za-z0-9_.+@=/-]*)?\Z")
_FOLDER = re.compile(r"/[A-Za-z0-9_.+@=/-]*\Z")
# One srun task on each node of the job (its allocation's own count).
EACH_NODE = (
    'srun --nodes="$SLURM_JOB_NUM_NODES" --ntasks="$SLURM_JOB_NUM_NODES" '
    "--ntasks-per-node=1 --kill-on-bad-exit=1"
)


def _plain(text: str) -> bool:
    return not any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in text)


def _folder(path: str, what: str) -> str:
    parts = path.split("/")
    if not path.startswith("/") or ".." in parts or "" in parts[1:] or not _plain(path):
        raise ScriptError(f"refusing to render the {what} {path!r}")
    return shlex.quote(path)


def _output(pattern: str) -> str:
    parts = pattern.split("/")
    if not pattern or pattern.startswith("/") or ".." in parts or not _plain(pattern):
        raise ScriptError(f"refusing to render the output {pattern!r}")
    return shlex.quote(pattern)


def scratch_expression(scratch: str) -> str:
    """The node-local folder as the job's shell expands it: the cluster's ``node_scratch``
    (an absolute folder, or ``$VARIABLE`` and a path below it), else the default."""
    if not scratch:
        return f'"{DEFAULT_SCRATCH}"'
    if _FOLDER.match(scratch) and "/../" not in f"{scratch}/":
        return shlex.quote(scratch)
    variable = _VARIABLE.match(scratch)
    if variable and "/../" not in f"{scratch}/":
        # Empty where the variable is unset on the node (stage.sh then says so), never a
        # folder below /. The path below it is of the pattern's safe characters.
        name, below = variable[1], variable[2] or ""
        return f'"${{{name}:+${{{name}}}{below}}}"'
    raise ScriptError(f"refusing to render the node scratch {scratch!r}")


def lines(job: JobSpec) -> str:
    """The job script's stage-in, before the payload ("" for a job that stages nothing),
    and ``_portal_stage_out``, which the wrapper's ``_portal_finish`` calls after the
    command."""
    staging = job.staging
    if staging is None:
        return ""
    if job.kind != "batch":
        raise ScriptError("only batch jobs stage data in and out")
    each_node = job.resources.nodes > 1
    work_dir = '"$PORTAL_WORK_DIR"'
    if staging.source:
        source = _folder(staging.source, "folder to stage in")
        source_root = _folder(staging.source_root, "root of the folder to stage in")
    else:
        source, source_root = "''", work_dir
    if staging.destination:
        destination = _folder(staging.destination, "destination of the outputs")
        destination_root = _folder(staging.destination_root, "root of the destination")
    else:
        destination = destination_root = work_dir
    script = '"$PORTAL_WORK_DIR/lib/portal_stage.sh"'
    out = [
        "# Stage-in (docs/use/stage-in.md): the folder to scratch on "
        + ("each node's" if each_node else "the node's")
        + " own disk, checked",
        "# against the checksums of its files, before the command; the outputs back after it.",
        f"export PORTAL_STAGE_SOURCE={source}",
        f"export PORTAL_STAGE_SOURCE_ROOT={source_root}",
        f"export PORTAL_STAGE_DEST={destination}",
        f"export PORTAL_STAGE_DEST_ROOT={destination_root}",
        f'export PORTAL_STAGE_MANIFEST="$PORTAL_WORK_DIR/{MANIFEST}"',
        f"export PORTAL_STAGE_SCRATCH_FROM={shlex.quote(staging.scratch or DEFAULT_SCRATCH)}",
        f"export PORTAL_STAGE_SCRATCH={scratch_expression(staging.scratch)}",
        # The job's own folder on the node (mode 700), with the copy in it.
        '_portal_staged="$PORTAL_STAGE_SCRATCH/portal-stage-$PORTAL_JOB_ID-'
        '${SLURM_JOB_ID:-${PORTAL_SCHEDULER_JOB_ID:-$$}}"',
        'export PORTAL_STAGED_DIR="$_portal_staged/data"',
        f"cat > {script} <<'PORTAL_STAGE_SH'",
        heredoc_body(STAGE_SCRIPT, "PORTAL_STAGE_SH") + "PORTAL_STAGE_SH",
    ]
    if staging.source:
        out.append(f"bash {script} manifest || exit 1")
    # srun runs the script itself on every node (one task each).
    out.append(f"{EACH_NODE + ' ' if each_node else ''}bash {script} copy || exit 1")
    return "\n".join([*out, *_stage_out(staging, script, each_node)])


def _stage_out(staging: Staging, script: str, each_node: bool) -> list[str]:
    """``_portal_stage_out``: the outputs back (a failed copy fails a job whose command
    succeeded), then the other nodes' copies removed."""
    body = []
    if staging.outputs:
        patterns = " ".join(_output(p) for p in staging.outputs)
        body += [
            f"    bash {script} out {patterns} || {{",
            '        [ "$_portal_status" = 0 ] && _portal_status=1',
            "    }",
        ]
    if each_node:
        body.append(f"    {EACH_NODE} bash {script} clean")
    return ["_portal_stage_out() {", *(body or ["    :"]), "}"]
