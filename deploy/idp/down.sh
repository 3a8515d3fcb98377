#!/usr/bin/env bash
# Stop the identity provider deploy/idp/up.sh started, by the PID it recorded.
# Its database, keys, client secret and passwords are kept, so `up` is quick again.
set -euo pipefail
STATE=${PORTAL_IDP_DIR:-/var/lib/portal-idp}
# shellcheck source=deploy/lib/pidfile.sh
. "$(dirname "$0")/../lib/pidfile.sh"
stop_by_pidfile idp glewlwyd "$STATE/run/glewlwyd.pid"
echo "idp: down (state kept in $STATE)"
