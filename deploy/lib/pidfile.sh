# Sourced by deploy/*/up.sh and down.sh.

# alive PIDFILE: the process the file names runs.
alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# stop_recorded PIDFILE...: TERM what they name, wait up to 15 s, then KILL (files kept).
stop_recorded() {
    local f pids=()
    for f in "$@"; do alive "$f" && pids+=("$(cat "$f")"); done
    [ ${#pids[@]} -gt 0 ] || return 0
    kill "${pids[@]}" 2>/dev/null || true
    for _ in $(seq 150); do kill -0 "${pids[@]}" 2>/dev/null || return 0; sleep 0.1; done
    kill -9 "${pids[@]}" 2>/dev/null || true
}

# stop_by_pidfile TAG WHAT PIDFILE: stop_recorded, saying so, then remove the file; nothing
# else is touched, so a daemon this project did not start is never stopped.
stop_by_pidfile() {
    local tag=$1 what=$2 pidfile=$3
    [ -f "$pidfile" ] || return 0
    if alive "$pidfile"; then
        echo "$tag: stopping $what (pid $(cat "$pidfile"))"
        stop_recorded "$pidfile"
    fi
    rm -f "$pidfile"
}
