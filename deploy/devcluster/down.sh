#!/usr/bin/env bash
# Stop the daemons deploy/devcluster/up.sh started, by the PIDs it recorded.
# Users, keys, configuration and Slurm state are kept, so `up` is quick again.
set -euo pipefail
STATE=${PORTAL_DEVCLUSTER_DIR:-/var/lib/portal-devcluster}

stop() {  # stop NAME PIDFILE
    local name=$1 pidfile=$2 pid
    [ -f "$pidfile" ] || return 0
    pid=$(cat "$pidfile")
    if kill -0 "$pid" 2>/dev/null; then
        echo "devcluster: stopping $name (pid $pid)"
        kill "$pid"
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
}
for pidfile in "$STATE"/run/slurmd.pid "$STATE"/run/slurmd-*.pid; do
    [ -e "$pidfile" ] || continue
    name=$(basename "$pidfile" .pid); stop "${name/-/ for }" "$pidfile"
done
stop slurmctld "$STATE/run/slurmctld.pid"
stop slurmdbd "$STATE/run/slurmdbd.pid"
stop mariadbd "$STATE/run/mariadbd.pid"  # only when up.sh started it
stop sshd "$STATE/run/sshd.pid"
stop "the data-transfer node's sshd" "$STATE/run/sshd-dtn.pid"
stop munged "$STATE/run/munged.pid"
echo "devcluster: down (state kept in $STATE)"
