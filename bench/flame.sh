#!/bin/bash
# Flame graphs of the web processes under load (issue #43), kept under bench/flames/.
#
#   bench/flame.sh OUT.svg SECONDS WAIT_FOR -- COMMAND...
#
# runs COMMAND (a bench that serves its own stack: bench/load_live.py, bench/load.py),
# waits until a process whose command line matches WAIT_FOR runs (the bench's load
# generator: ingest.lua, get.lua), then records every web worker of the stack for
# SECONDS with py-spy: GIL samples only, so a frame's width is the Python CPU time it
# took (a thread waiting for PostgreSQL or Redis holds no GIL and draws nothing).
# Example, the figure the README quotes:
#   bench/flame.sh bench/flames/ingest-after.svg 15 ingest.lua -- \
#       .venv/bin/python bench/load_live.py --only ingest
set -euo pipefail
[ $# -ge 5 ] && [ "$4" = "--" ] || { sed -n '3,12p' "$0" >&2; exit 2; }
out=$1 seconds=$2 wait_for=$3
shift 4
here=$(cd "$(dirname "$0")/.." && pwd)
spy=$here/.venv/bin/py-spy
[ -x "$spy" ] || "$here/.venv/bin/pip" install -q py-spy
"$@" &
bench=$!
trap 'kill "$bench" 2>/dev/null || true' EXIT  # a failure here stops the bench too
for _ in $(seq 1200); do  # up to 10 minutes for the bench to seed and start its load
    pgrep -af -- "$wait_for" | grep -v flame.sh | grep -q . && break  # not this script
    kill -0 "$bench" 2>/dev/null || { echo "flame: the bench ended first" >&2; exit 1; }
    sleep 0.5
done
master=$(pgrep -n -f "gunicorn portal.asgi:application") || { echo "flame: no web server" >&2; exit 1; }
"$spy" record --pid "$master" --subprocesses --gil --rate 50 --duration "$seconds" \
    --format flamegraph --output "$out" --nonblocking
wait "$bench"
echo "flame: $out"
