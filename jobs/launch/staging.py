"""Stage-in and stage-out as a launch asks for them (docs/use/stage-in.md): a folder on the
cluster copied to node-local scratch before a batch command, and outputs copied back
after it, checked here for the launch form, the API and the CLI alike.

Paths are hostile input, checked before anything reaches a cluster with the file
manager's rules (common/paths.py: no ``..``, bounded depth and length) and no control
characters at all, then placed in one of the person's own folders on the cluster
(projects/roots.py: home, scratch, their projects' folders; a project's viewer may read its
folder, never write the outputs there). A path is absolute, or relative to the job's home
or scratch directory (the launch's work directory choice). What is stored on the job
(``Job.staging``) is the resolved folders with their roots; the job script checks again,
on the node, that no folder between a root and its path is a link (schedulers/on_node/stage.sh).
"""

from __future__ import annotations

import unicodedata
from typing import TYPE_CHECKING, Any

from django import forms

from common import paths
from common.choices import Runtime, WorkDir
from common.paths import BadPath
from jobs.models import Job
from projects import roots
from schedulers import registry as schedulers

if TYPE_CHECKING:
    from clusters.models import Cluster, ClusterAccount

# The outputs a job may name, and the length of each (a glob or a relative path).
MAX_OUTPUTS = 32
MAX_OUTPUT_CHARS = 1024
# A folder as typed: common.paths' bound on a path.
MAX_FOLDER_CHARS = paths.MAX_PATH
# The portal's own folders in a home or scratch directory: the job's work directory is
# below them, and would be copied while it is written.
PORTAL_FOLDERS = (".portal", "jobs")

# The launch form's fields (jobs/launch/form.py), named so in the API and the CLI too.
FIELDS = ("stage_in", "stage_out", "stage_out_to")

STAGE_IN_HELP = (
    "A folder on the cluster copied to the node's own disk before the command (every node's, "
    "for a multi-node job); the job reads it at $PORTAL_STAGED_DIR. Its files' sha256 "
    "checksums are taken first and checked on the copy: a copy that does not match fails "
    "the job before the command runs. Absolute, or inside your home (or scratch) directory, "
    "e.g. datasets/mnist. Batch jobs."
)
STAGE_OUT_HELP = (
    f"Copied back after the command (also when it fails), one a line, at most {MAX_OUTPUTS}: "
    "paths or globs such as model.pt or results/*.csv, found in $PORTAL_STAGED_DIR, else in "
    "the work directory; folders keep their place below the destination."
)
STAGE_OUT_TO_HELP = (
    "The folder the outputs go to (made if missing), absolute or inside your home (or "
    "scratch) directory; empty: the job's work directory."
)


def _plain(text: str) -> bool:
    return not any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in text)


class OutputsField(forms.Field):
    """The outputs: one a line on the page, a list from the API."""

    widget = forms.Textarea(attrs={"rows": 2, "placeholder": "model.pt\nresults/*.csv"})

    def prepare_value(self, value):
        return "\n".join(value) if isinstance(value, (list, tuple)) else value

    def to_python(self, value) -> list[str]:
        if value in (None, ""):
            return []
        if isinstance(value, str):
            items = [line.strip() for line in value.replace("\r\n", "\n").split("\n")]
        elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            items = [v.strip() for v in value]
        else:
            raise forms.ValidationError("Give the outputs as a list of paths.")
        items = [item for item in items if item]
        if len(items) > MAX_OUTPUTS:
            raise forms.ValidationError(f"At most {MAX_OUTPUTS} outputs.")
        return [_output(item) for item in items]


def _output(item: str) -> str:
    """One output, as the job script receives it: relative, plain, no '..'."""
    if len(item) > MAX_OUTPUT_CHARS:
        raise forms.ValidationError(f"An output is at most {MAX_OUTPUT_CHARS} characters.")
    if not _plain(item):
        raise forms.ValidationError(
            "An output cannot contain newlines, tabs or other control characters."
        )
    if item.startswith("/"):
        raise forms.ValidationError(
            f"{item[:80]!r}: name outputs relative to $PORTAL_STAGED_DIR or the work "
            "directory (e.g. results/*.csv), not from /."
        )
    try:
        parts = paths.parts_of(item)
    except BadPath as exc:
        raise forms.ValidationError(f"{item[:80]!r}: {exc}") from None
    if not parts:
        raise forms.ValidationError("Name a file, folder or glob inside the job's folders.")
    return paths.joined(parts)


def initial(job: Job) -> dict[str, Any]:
    """What "Launch again" fills in (and an experiment's relaunch request sends)."""
    return {
        "stage_in": job.stage_in,
        "stage_out": job.stage_out,
        "stage_out_to": job.stage_out_to,
    }


def clean(form: Any, cleaned: dict) -> None:
    """Check the stage-in fields of the launch form ``form`` and set ``Job.staging`` on its
    job, or add each field's error."""
    source = (cleaned.get("stage_in") or "").strip()
    outputs = cleaned.get("stage_out") or []
    destination = (cleaned.get("stage_out_to") or "").strip()
    form.instance.staging = {}
    if not (source or outputs or destination):
        return
    if any(name in form.errors for name in FIELDS):
        return
    if cleaned.get("kind") != Job.Kind.BATCH:
        form.add_error("stage_in", "Only batch jobs stage data in and out: choose a batch job.")
        return
    if destination and not outputs:
        form.add_error("stage_out", "Name the outputs to copy to that folder.")
        return
    cluster = cleaned.get("cluster")
    image = cleaned.get("image")
    if cluster is None or "cluster" in form.errors:
        return  # said at the cluster
    try:
        account = roots.account_for(cluster, form.user)
    except roots.NoAccess as exc:
        form.add_error("stage_in", f"Stage-in reads and writes your own folders: {exc}")
        return
    adapter = schedulers.for_cluster(cluster)
    if image is not None and image.runtime != Runtime.NONE and not adapter.stages_in_containers:
        form.add_error(
            "stage_in",
            f"On {cluster.name} ({adapter.name}) the scheduler starts the image's container "
            "around the whole job, where your folders may not be mounted: stage in with an "
            "image without a container, or choose a Slurm cluster.",
        )
        return
    kind = cleaned.get("work_dir_kind") or WorkDir.HOME
    staging: dict[str, Any] = {}
    try:
        if source:
            staging["in"], staging["in_root"] = _place(source, cluster, account, kind)
        if outputs:
            staging["out"] = list(outputs)
        if destination:
            staging["out_to"], staging["out_to_root"] = _place(
                destination, cluster, account, kind, writes=True
            )
    except _Refused as refused:
        form.add_error(refused.field, str(refused))
        return
    form.instance.staging = staging


class _Refused(Exception):
    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


def _place(
    text: str, cluster: Cluster, account: ClusterAccount, kind: str, *, writes: bool = False
) -> tuple[str, str]:
    """The absolute folder ``text`` names and the root it is in, among the person's roots
    on ``cluster``: an absolute path inside one of them, or one relative to the ``kind``
    (home or scratch) root. ``writes``: the outputs go there."""
    field = "stage_out_to" if writes else "stage_in"
    shown = paths.shown(text, 120)
    if not _plain(text):
        raise _Refused(field, "A folder cannot contain newlines, tabs or other control characters.")
    try:
        parts = paths.parts_of(text)
    except BadPath as exc:
        raise _Refused(field, f"{shown}: {exc}") from None
    mine = roots.roots_of(cluster, account)
    if text.startswith("/"):
        inside = [r for r in mine if parts[: len(_parts(r.path))] == _parts(r.path)]
        if not inside:
            listed = ", ".join(r.path for r in mine) or "none"
            raise _Refused(
                field,
                f"{shown} is not inside your folders on {cluster.name} ({listed}); "
                "a path without a leading / is inside your home (or scratch) directory.",
            )
        root = max(inside, key=lambda r: len(_parts(r.path)))
        below = parts[len(_parts(root.path)) :]
    else:
        found = [r for r in mine if r.key == kind]
        if not found:
            raise _Refused(field, f"{cluster.name} has no {kind} directory for you.")
        root, below = found[0], parts
    if writes and root.read_only:
        raise _Refused(field, f"{root.label} is read-only for you: choose another folder.")
    if not writes and root.key in (WorkDir.HOME, WorkDir.SCRATCH):
        if tuple(below) == PORTAL_FOLDERS[: len(below)]:
            raise _Refused(
                field,
                f"Choose a folder inside your {root.label.lower()} directory, not "
                + ("all of it." if not below else "the portal's own folder of jobs."),
            )
    base = "/" + paths.joined(_parts(root.path))
    return (f"{base}/{paths.joined(below)}" if below else base), base


def _parts(path: str) -> list[str]:
    return [p for p in path.split("/") if p not in ("", ".")]


def as_request(job: Job) -> dict[str, Any]:
    """The stage-in fields of ``job`` as a launch request sends them (none if it has none)."""
    return {k: v for k, v in initial(job).items() if v} if job.staging else {}
