#!/usr/bin/env bash
# A real mail server on 127.0.0.1 for `make demo` and the tests: Debian's exim4
# (exim4-daemon-light) with a configuration of its own, listening on 127.0.0.1:2525 only and
# delivering every message, for any address, to one Maildir under $STATE that the tests read
# (tests/mailbox.py) and a person can browse (e.g. `mutt -f $STATE/Maildir`).
#
# Why exim4 rather than Postfix (both in bookworm): exim is one binary that takes a whole
# configuration file with -C, so a second, private instance needs one file and one command
# (`exim4 -C our.conf -bd`) and leaves the system's mail set-up untouched; Postfix's second
# instance needs postmulti, a copied main.cf/master.cf pair, its own queue tree with the
# postdrop group and the master daemon with its helpers. exim is also Debian's default MTA.
#
# The daemon runs as the exim user (Debian-exim) from the start: exim drops root for a -C
# configuration that is not in /etc/exim4/trusted_configs, and we do not add ours there
# (system configuration); the exim user can bind 2525 and write our spool and Maildir.
# Installing the package starts nothing here: bookworm's exim4 postinst starts its own
# daemon on port 25 through invoke-rc.d, so we install with a policy-rc.d that refuses
# (the one Docker images ship is used when it is there) and never use its init script.
#
# Idempotent: a second run starts only what is not running. Needs root. Everything lives
# under $STATE; the daemon writes its pidfile there and down.sh stops it by that PID.
set -euo pipefail

STATE=${PORTAL_MAIL_DIR:-/var/lib/portal-mail}
PORT=${PORTAL_MAIL_PORT:-2525}
MARK="# managed by hpc-portal deploy/mail (safe to delete with make mail-down)"
EXIM_USER=Debian-exim

log() { printf 'mail: %s\n' "$*"; }
die() { printf 'mail: error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (it installs a package and starts a daemon)"

# --- package ------------------------------------------------------------------------
if ! command -v exim4 >/dev/null 2>&1; then
    log "installing exim4-daemon-light"
    added_policy=
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        # invoke-rc.d asks this before starting a service: 101 = not allowed.
        printf '#!/bin/sh\n%s\nexit 101\n' "$MARK" > /usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        added_policy=1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends exim4-daemon-light >/dev/null
    [ -z "$added_policy" ] || rm -f /usr/sbin/policy-rc.d
fi
id "$EXIM_USER" >/dev/null 2>&1 || die "the package made no user $EXIM_USER"

install -d -m 755 "$STATE"
install -d -m 750 -o "$EXIM_USER" -g "$EXIM_USER" "$STATE/spool" "$STATE/log" "$STATE/run" "$STATE/Maildir"

# --- configuration (exim's own format: spec.txt chapters 6, 15, 17, 26) -----------------
conf=$STATE/exim.conf
tmp=$(mktemp)
cat > "$tmp" <<CONF
$MARK
# A private exim for the portal's tests and demo: SMTP on 127.0.0.1:$PORT only, every
# recipient accepted and delivered to $STATE/Maildir; nothing is ever relayed.
primary_hostname = portal-mail.localhost
qualify_domain = localhost
local_interfaces = 127.0.0.1
daemon_smtp_ports = $PORT
spool_directory = $STATE/spool
log_file_path = $STATE/log/%slog
pid_file_path = $STATE/run/exim.pid
exim_user = $EXIM_USER
exim_group = $EXIM_USER
deliver_drop_privilege = true
keep_environment =
tls_advertise_hosts =
host_lookup =
rfc1413_hosts =
message_size_limit = 10M
acl_smtp_rcpt = acl_check_rcpt

begin acl

acl_check_rcpt:
  accept  hosts = 127.0.0.1
  deny    message = relay not permitted

begin routers

# Any address, any domain: the one mailbox.
everyone:
  driver = accept
  transport = maildir

begin transports

maildir:
  driver = appendfile
  directory = $STATE/Maildir
  maildir_format
  create_directory
  delivery_date_add
  envelope_to_add
  return_path_add
  user = $EXIM_USER
  group = $EXIM_USER
  mode = 0640

begin retry

*   *   F,1h,1m
CONF
if [ -f "$conf" ] && ! grep -qF "$MARK" "$conf"; then
    rm -f "$tmp"; die "$conf exists and was not written by deploy/mail; refusing to overwrite it"
fi
restart=
if ! cmp -s "$tmp" "$conf"; then
    install -m 644 "$tmp" "$conf"; restart=1
fi
rm -f "$tmp"
runuser -u "$EXIM_USER" -- exim4 -C "$conf" -bV >/dev/null || die "exim refuses $conf (exim4 -C $conf -bV)"

# --- the daemon -------------------------------------------------------------------------
pidfile=$STATE/run/exim.pid
alive() { [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }
if alive && [ -n "$restart" ]; then
    log "configuration changed; restarting"
    bash "$(dirname "$0")/down.sh" >/dev/null
fi
if ! alive; then
    # -bd: the SMTP daemon (it forks into the background and writes the pidfile);
    # -q1m: a queue runner every minute for anything deferred.
    runuser -u "$EXIM_USER" -- exim4 -C "$conf" -bd -q1m
    for _ in $(seq 50); do
        alive && (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
        sleep 0.1
    done
    alive || die "exim did not start; see $STATE/log/paniclog and mainlog"
fi
# What the demo and the tests read (tests/mailbox.py): where to send, where mail lands.
printf '%s\nEMAIL_HOST=127.0.0.1\nEMAIL_PORT=%s\nMAILDIR=%s\n' "$MARK" "$PORT" "$STATE/Maildir" > "$STATE/mail.env"
log "up: SMTP on 127.0.0.1:$PORT (pid $(cat "$pidfile")), every message delivered to $STATE/Maildir"
