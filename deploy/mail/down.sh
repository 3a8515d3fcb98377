#!/usr/bin/env bash
# Stop the mail server deploy/mail/up.sh started, by the PID its daemon recorded.
# The Maildir and the spool are kept.
set -euo pipefail
STATE=${PORTAL_MAIL_DIR:-/var/lib/portal-mail}
pidfile=$STATE/run/exim.pid
if [ -f "$pidfile" ]; then
    pid=$(cat "$pidfile")
    if kill -0 "$pid" 2>/dev/null; then
        echo "mail: stopping exim (pid $pid)"
        kill "$pid"
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
fi
echo "mail: down (messages kept in $STATE/Maildir)"
