#!/usr/bin/env bash
# Stop what deploy/condorpool/up.sh started (condor_master and its daemons, the sshd), by
# the PIDs it recorded, and unmount the root's /proc, /dev and /sys. The root (Debian
# trixie with minicondor), users, keys and the pool's history are kept: `up` is quick again.
set -euo pipefail
STATE=${PORTAL_CONDORPOOL_DIR:-/var/lib/portal-condorpool}
ROOT=$STATE/root

stop() {  # stop NAME PIDFILE: TERM, wait up to 15 s (condor_master stops its daemons), KILL
    local name=$1 pidfile=$2 pid
    [ -f "$pidfile" ] || return 0
    pid=$(cat "$pidfile")
    # Only a process chrooted in this root (after a reboot the PID may be another's).
    if kill -0 "$pid" 2>/dev/null && [ "$(readlink "/proc/$pid/root")" = "$(readlink -f "$ROOT")" ]; then
        echo "condorpool: stopping $name (pid $pid)"
        kill "$pid"
        for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
}
stop condor_master "$ROOT/run/condor/portal-master.pid"
stop sshd "$ROOT/run/portal-sshd.pid"
for m in dev/pts dev sys proc; do
    if mountpoint -q "$ROOT/$m" 2>/dev/null && ! umount "$ROOT/$m"; then
        echo "condorpool: $ROOT/$m is busy (a job's process left behind?); detached instead" >&2
        umount -l "$ROOT/$m" || true
    fi
done
echo "condorpool: down (root and state kept in $STATE)"
