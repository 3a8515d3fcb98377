"""What reproduces a run, read on the cluster when it is submitted, as the job's own cluster
user: the image's exact identity (an Apptainer file's sha256, a Podman/Docker reference's
digest where the runtime resolves it, "host" without a container) and, when the job's
folder is a git checkout, its commit, whether it was modified and (opted in) its diff.

One fixed POSIX sh script runs it all in one command; values reach it as positional parameters. Its
answer is hostile data: only ``<nonce> <word> <value>`` lines count (a login banner is
ignored), each value must match a strict pattern, and the diff is cut to a byte bound and
kept as text that is shown, never run.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field

from catalog.models import ContainerImage
from clusters import ssh
from clusters.workdir import work_root
from jobs.models import Job

# Git runs with nothing of the checkout's configuration that could start a program (an
# fsmonitor, hooks, an external diff or a text conversion, a filter driver: every
# ``filter.<name>`` the configuration names is emptied, and attributes are read from no
# file git lets us skip) and takes no lock. Repository discovery stops at the folder
# (GIT_CEILING_DIRECTORIES: never a checkout above it, such as one in a shared scratch
# directory). Each program has a bound of its own; the whole script has one more
# (``read``: coreutils ``timeout`` kills its process group, hence ``--foreground`` here).
_SCRIPT = r"""
nonce=$1 runtime=$2 location=$3 folder=$4 want_diff=$5 max_diff=$6
say() { printf '%s %s\n' "$nonce" "$1"; }
case $runtime in
    apptainer|singularity)
        if [ -f "$location" ] && [ -r "$location" ]; then
            if sum=$(timeout --foreground 300 sha256sum -- "$location" 2>/dev/null); then
                say "image-sha256 ${sum%% *}"
            else
                say "image-error the image file could not be read"
            fi
        else
            say "image-error the image file is missing"
        fi ;;
    podman|docker)
        if d=$(timeout --foreground 60 "$runtime" image inspect --format '{{index .RepoDigests 0}}' -- "$location" 2>/dev/null | head -n 1 | head -c 400) && [ -n "$d" ]; then
            say "image-digest $d"
        else
            say "image-error $runtime could not resolve the reference to a digest on the login node"
        fi ;;
esac
[ -n "$folder" ] || exit 0
[ -d "$folder" ] && command -v git >/dev/null 2>&1 || { say "git-none"; exit 0; }
GIT_CEILING_DIRECTORIES=$(cd -- "$folder/.." 2>/dev/null && pwd -P) || { say "git-none"; exit 0; }
GIT_ATTR_NOSYSTEM=1 GIT_OPTIONAL_LOCKS=0 GIT_TERMINAL_PROMPT=0 GIT_CONFIG_COUNT=0
export GIT_CEILING_DIRECTORIES GIT_ATTR_NOSYSTEM GIT_OPTIONAL_LOCKS GIT_TERMINAL_PROMPT GIT_CONFIG_COUNT
g() {
    timeout --foreground 60 git -c core.fsmonitor=false -c core.hooksPath=/dev/null \
        -c diff.external= -c core.attributesFile=/dev/null -C "$folder" "$@"
}
off() { export "GIT_CONFIG_KEY_$GIT_CONFIG_COUNT=$1" "GIT_CONFIG_VALUE_$GIT_CONFIG_COUNT=$2"; GIT_CONFIG_COUNT=$((GIT_CONFIG_COUNT + 1)); }
drivers=$(g config --name-only --get-regexp '^filter[.]' 2>/dev/null | sed -n 's/[.][^.]*$//p' | sort -u | head -n 100)
while IFS= read -r driver; do
    [ -n "$driver" ] || continue
    off "$driver.clean" ""; off "$driver.smudge" ""; off "$driver.process" ""; off "$driver.required" false
done <<EOF
$drivers
EOF
# Git 2.42 and later: the checkout's .gitattributes too (from the empty tree).
GIT_ATTR_SOURCE=$(g hash-object -t tree --stdin </dev/null 2>/dev/null) && export GIT_ATTR_SOURCE
commit=$(g rev-parse --verify -q HEAD 2>/dev/null | head -c 100) && [ -n "$commit" ] || { say "git-none"; exit 0; }
say "git-commit $commit"
say "git-branch $(g rev-parse --abbrev-ref HEAD 2>/dev/null | head -n 1 | head -c 200)"
say "git-changes $(g status --porcelain 2>/dev/null | head -n 1000000 | awk '/^\?\?/ { u++; next } { c++ } END { print c + 0, u + 0 }')"
if [ "$want_diff" = 1 ]; then
    say "git-diff"
    g diff --no-ext-diff --no-textconv --no-color HEAD -- 2>/dev/null | head -c "$max_diff"
fi
"""

_COMMIT = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?\Z")
_BRANCH = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/+-]{0,199}\Z")
_SHA256 = re.compile(r"[0-9a-f]{64}\Z")
_DIGEST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:-]{0,300}@sha256:[0-9a-f]{64}\Z")
_COUNTS = re.compile(r"([0-9]{1,7}) ([0-9]{1,7})\Z")


@dataclass
class Provenance:
    image: dict = field(default_factory=dict)
    git: dict = field(default_factory=dict)
    diff: str = ""

    def as_record(self) -> dict:
        record: dict = {"image": self.image}
        if self.git:
            record["git"] = self.git
        return record


def git_folder(job: Job, work_dir: str) -> str:
    """The folder whose checkout the run used: a session's folder (notebook_dir), else the
    home or scratch directory the work directory is in (a checkout only if that is one)."""
    root = work_root(work_dir)
    return f"{root}/{job.notebook_dir}" if job.notebook_dir else root


def image_identity(image: ContainerImage) -> dict:
    """What is known of the image without asking the cluster."""
    identity = {"runtime": image.runtime, "location": image.location}
    if image.runtime == ContainerImage.Runtime.NONE:
        return identity | {"identity": "host"}
    pinned = image.location.removeprefix("docker://")
    if _DIGEST.match(pinned):
        return identity | {"digest": pinned}  # pinned by digest already
    return identity


def needs_cluster(image: ContainerImage) -> str:
    """The runtime the script asks ('' when nothing is to be resolved on the cluster)."""
    if image.runtime in (ContainerImage.Runtime.APPTAINER, ContainerImage.Runtime.SINGULARITY):
        return image.runtime if image.location.startswith("/") else ""
    if image.runtime == ContainerImage.Runtime.PODMAN and "digest" not in image_identity(image):
        return image.runtime
    return ""


def parse(stdout: str, nonce: str, image: dict, folder: str, max_diff: int) -> Provenance:
    """The script's answer lines, as data (pure)."""
    found = Provenance(image=dict(image))
    head, marker, diff = stdout.partition(f"\n{nonce} git-diff\n")
    if not marker and stdout.startswith(f"{nonce} git-diff\n"):
        head, marker, diff = "", "x", stdout.removeprefix(f"{nonce} git-diff\n")
    git: dict = {}
    for line in head.splitlines()[:200]:
        word, _, value = line.removeprefix(f"{nonce} ").partition(" ")
        if not line.startswith(f"{nonce} "):
            continue
        if word == "image-sha256" and _SHA256.match(value):
            found.image["sha256"] = value
        elif word == "image-digest" and _DIGEST.match(value):
            found.image["digest"] = value
        elif word == "image-error":
            found.image["error"] = re.sub(r"[^ -~]", "", value)[:200]
        elif word == "git-commit" and _COMMIT.match(value):
            git = {"folder": folder, "commit": value}
        elif word == "git-branch" and git and _BRANCH.match(value) and value != "HEAD":
            git["branch"] = value
        elif word == "git-changes" and git and (counts := _COUNTS.match(value)):
            git["changed"], git["untracked"] = int(counts[1]), int(counts[2])
            git["modified"] = git["changed"] > 0
    if git and "modified" not in git:
        git = {}  # a commit without its status says nothing reliable about the tree
    found.git = git
    if git and marker:
        raw = diff.encode(errors="replace")
        kept = raw[:max_diff]
        found.diff = kept.decode(errors="ignore").replace("\x00", "")
        git["diff_bytes"] = len(found.diff.encode())
        git["diff_truncated"] = len(raw) > max_diff
    return found


def read(
    conn: ssh.Connection, job: Job, work_dir: str, *, max_diff: int, timeout: float = 360
) -> Provenance:
    """What reproduces ``job``, read on the cluster in one command (``conn`` is the job's own
    cluster user's connection) that takes ``timeout`` seconds at most, here and there."""
    image = image_identity(job.image)
    folder = git_folder(job, work_dir)
    nonce = secrets.token_hex(8)
    # Cut on the cluster a second before here: the script, and everything it started.
    remote = max(1, int(timeout) - 1)
    argv = [
        "timeout",
        "-s",
        "KILL",
        str(remote),
        "sh",  # POSIX shell only: whatever the login node's bash
        "-c",
        _SCRIPT,
        "portal-provenance",
        nonce,
        needs_cluster(job.image),
        job.image.location,
        folder,
        "1" if job.keep_diff else "0",
        str(int(max_diff) + 1),  # one byte more than kept: says whether it was cut
    ]
    result = conn.run(argv, check=False, timeout=timeout, max_bytes=int(max_diff) + 256 * 1024)
    return parse(result.stdout, nonce, image, folder, int(max_diff))
