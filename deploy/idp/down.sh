#!/usr/bin/env bash
# Stop the identity provider deploy/idp/up.sh started, by the PID it recorded.
# Its database, keys, client secret and passwords are kept, so `up` is quick again.
set -euo pipefail
STATE=${PORTAL_IDP_DIR:-/var/lib/portal-idp}
pidfile=$STATE/run/glewlwyd.pid
if [ -f "$pidfile" ]; then
    pid=$(cat "$pidfile")
    if kill -0 "$pid" 2>/dev/null; then
        echo "idp: stopping glewlwyd (pid $pid)"
        kill "$pid"
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
fi
echo "idp: down (state kept in $STATE)"
