#!/usr/bin/env bash
# Create .venv and install the locked dependencies and the `portal` command (client/).
# The apps run from the checkout (manage.py, pytest's pythonpath), so the server side
# is not installed.
# Idempotent: re-runs only when requirements.lock or pyproject.toml changed.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=.venv
STAMP=$VENV/.installed

if ! command -v "$PYTHON" >/dev/null 2>&1; then
    echo "bootstrap: $PYTHON not found; installing Debian's python3" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv >/dev/null
fi
if [ ! -x "$VENV/bin/python" ]; then
    if ! "$PYTHON" -m venv "$VENV" 2>/dev/null; then
        if [ "$(id -u)" = 0 ]; then
            echo "bootstrap: python3 -m venv failed; installing python3-venv" >&2
            apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
            rm -rf "$VENV"; "$PYTHON" -m venv "$VENV"
        else
            echo "bootstrap: '$PYTHON -m venv' failed; install python3-venv (as root) and retry" >&2
            exit 1
        fi
    fi
fi

if [ -f "$STAMP" ] && [ "$STAMP" -nt requirements.lock ] && [ "$STAMP" -nt pyproject.toml ] \
    && [ "$STAMP" -nt client/pyproject.toml ]; then
    exit 0
fi
echo "bootstrap: installing locked dependencies into $VENV"
# Some machines' pip.conf names local mirrors that may be absent; drop that noise only.
quiet() { "$@" 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }; }
quiet "$VENV/bin/python" -m pip install -q --upgrade pip
quiet "$VENV/bin/python" -m pip install -q -r requirements.lock
# The `portal` command (client/, standard library only), editable so the checkout is what runs.
PYTHONWARNINGS=ignore quiet "$VENV/bin/python" -m pip install -q -e ./client
touch "$STAMP"
