#!/usr/bin/env bash
# Stop the mail server deploy/mail/up.sh started, by the PID its daemon recorded.
# The Maildir and the spool are kept.
set -euo pipefail
STATE=${PORTAL_MAIL_DIR:-/var/lib/portal-mail}
# shellcheck source=deploy/lib/pidfile.sh
. "$(dirname "$0")/../lib/pidfile.sh"
stop_by_pidfile mail exim "$STATE/run/exim.pid"
echo "mail: down (messages kept in $STATE/Maildir)"
