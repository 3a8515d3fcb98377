# Sourced by deploy/*/down.sh. stop_by_pidfile TAG WHAT PIDFILE: stop the daemon whose PID
# the file records (TERM, up to 5 s, then KILL) and remove the file; nothing else is
# touched, so a daemon this project did not start is never stopped.
stop_by_pidfile() {
    local tag=$1 what=$2 pidfile=$3 pid
    [ -f "$pidfile" ] || return 0
    pid=$(cat "$pidfile")
    if kill -0 "$pid" 2>/dev/null; then
        echo "$tag: stopping $what (pid $pid)"
        kill "$pid"
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
}
