"""The catalog check: does a cluster's login node have what an image needs (its runtime
command, its image file, its environment modules)? One fixed script runs every check in
one command; its answer lines are parsed as data (a login banner is ignored)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from clusters import ssh
from common.text import plain_line
from schedulers.envmodules import MODULE_INIT


@dataclass(frozen=True)
class CheckFinding:
    ok: bool | None  # None: noted, not checked (a registry image is pulled when a job starts)
    text: str


def parse_image_check(stdout: str, nonce: str, count: int) -> list[list[CheckFinding]]:
    """Findings per checked image from the check script's ``<nonce> <index> ok|fail|note
    <text>`` lines; anything else on stdout (a login banner) is ignored."""
    found: list[list[CheckFinding]] = [[] for _ in range(count)]
    for line in stdout.splitlines()[:1000]:
        parts = line.split(" ", 3)
        if len(parts) != 4 or parts[0] != nonce or not parts[1].isdigit():
            continue
        index, status, text = int(parts[1]), parts[2], plain_line(parts[3])[:300]
        if index < count and status in ("ok", "fail", "note") and len(found[index]) < 50:
            ok = {"ok": True, "fail": False, "note": None}[status]
            found[index].append(CheckFinding(ok, text))
    return found


# Checks that what a catalog image needs is on the cluster's login node. Arguments: a
# nonce that marks the answer lines, then three per image: the runtime's command ('' for
# the host), the image location, and its modules one per line.
_CHECK_IMAGES = r"""
nonce=$1; shift
i=0
modules_ready=
say() { printf '%s %s %s %s\n' "$nonce" "$i" "$1" "$2"; }
while [ $# -ge 3 ]; do
    runtime=$1 location=$2 modules=$3
    shift 3
    if [ -n "$runtime" ]; then
        if found=$(command -v -- "$runtime" 2>/dev/null); then
            say ok "$runtime is installed ($found)"
        else
            say fail "$runtime is not installed on the login node (not on PATH)"
        fi
    fi
    case $location in
        /*)
            if [ -f "$location" ] && [ -r "$location" ]; then
                say ok "image file $location is there ($(stat -L -c %s -- "$location") bytes)"
            elif [ -e "$location" ]; then
                say fail "$location is there but is not a readable file"
            else
                say fail "image file $location is missing"
            fi ;;
        '') ;;
        *) say note "$location is pulled when a job starts; not checked here" ;;
    esac
    if [ -n "$modules" ]; then
        if [ -z "$modules_ready" ]; then
__MODULE_INIT__
            modules_ready=yes
        fi
        if ! command -v module >/dev/null 2>&1; then
            say fail "the module command is not available (neither Lmod nor Environment Modules is set up)"
        else
            while IFS= read -r m; do
                if module is-avail "$m" >/dev/null 2>&1; then
                    say ok "module $m is available"
                else
                    say fail "module $m is not available"
                fi
            done <<< "$modules"
        fi
    fi
    i=$((i + 1))
done
"""


def check_images(conn: ssh.Connection, images) -> list[list[CheckFinding]]:
    """What each image needs (runtime, image file, modules), checked on the login node
    in one command; findings per image, in order."""
    nonce = secrets.token_hex(8)
    script = _CHECK_IMAGES.replace("__MODULE_INIT__", MODULE_INIT)
    argv = ["bash", "-c", script, "portal-check", nonce]
    for image in images:
        argv += [
            "" if image.runtime == "none" else image.runtime,  # runtimes are named by their command
            image.location,
            "\n".join(image.module_list),
        ]
    result = conn.run(argv, check=False, max_bytes=256 * 1024)
    found = parse_image_check(result.stdout, nonce, len(images))
    if result.exit_status != 0 and not any(found):
        raise ssh.CommandFailed(
            result.stderr.strip()[-500:] or f"the check stopped with status {result.exit_status}"
        )
    return found
