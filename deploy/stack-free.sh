#!/usr/bin/env bash
# `make demo`, before set-up: refuse while another portal stack serves from the same data
# directory. Its run_proxy holds DATA_DIR/proxy/run_proxy.lock (flock, released with the
# process however it ends; a second `make demo` is stopped earlier by DATA_DIR/demo.lock,
# which the Makefile holds). A second stack's set-up and HAProxy would otherwise take over
# the first one's proxy configuration and admin socket, and its notebooks would never get
# a route again.
set -uo pipefail
data=${1:-var}
for lock in "$data/proxy/run_proxy.lock"; do
    [ -e "$lock" ] || continue
    if ! flock --nonblock "$lock" true; then
        holder=$(head -c 32 "$lock" 2>/dev/null | tr -dc '0-9')
        echo "make demo: a portal stack already runs from $data${holder:+ (PID $holder)}; stop it" \
            "first (Ctrl-C where it runs), or give this one its own PORTAL_DATA_DIR. Nothing was changed." >&2
        exit 1
    fi
done
