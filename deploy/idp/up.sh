#!/usr/bin/env bash
# Start a real OpenID Connect provider on 127.0.0.1 for `make demo` and the tests:
# Debian's glewlwyd (bookworm 2.7), with a confidential client `portal`, the people
# demo, hpcuser, hpcuser2 (group portal-users; demo also portal-staff) and outsider
# (group visitors, whom the portal refuses), each with a random password.
#
# Why glewlwyd rather than LemonLDAP::NG (both in bookworm): glewlwyd is one C daemon
# with SQLite and its own login web app, configured entirely through a REST admin API,
# and starts in about a second; LemonLDAP::NG needs a web server with FastCGI (nginx or
# Apache plus the llng-fastcgi-server), a Perl stack of some hundred packages and its
# configuration in its own serialised format. glewlwyd's OIDC plugin has what the
# portal needs: discovery, a JWKS (RS256 here), code flow with PKCE S256, a groups claim
# from a list-valued user property, and RP-initiated logout (end_session_endpoint).
# Its Debian README says it is meant for testing rather than production: right for a
# dev provider, and the portal does not depend on it (any OIDC provider will do).
#
# Idempotent: a second run starts only what is not running and writes only what
# changed (configure.py reads every object before writing it). Needs root. Everything
# lives under $STATE; the daemon is started with a pidfile there and stopped by PID
# (down.sh).
#
# Writes, root only (0600): $STATE/portal.env (PORTAL_OIDC_ISSUER, _CLIENT_ID,
# _CLIENT_SECRET) and $STATE/users.json (each person's password and groups).
set -euo pipefail

STATE=${PORTAL_IDP_DIR:-/var/lib/portal-idp}
PORT=${PORTAL_IDP_PORT:-4593}
# The demo portal's addresses (make demo); tests add their own through tests/idp.py.
DEMO_URL=${PORTAL_IDP_DEMO_URL:-http://localhost:8000}
# The issuer is what the discovery document names: external_url + /api + /oidc (plugin).
EXTERNAL_URL="http://localhost:$PORT"
ISSUER="$EXTERNAL_URL/api/oidc"
MARK="# managed by hpc-portal deploy/idp (safe to delete with make idp-down)"
HERE=$(cd "$(dirname "$0")" && pwd)

log() { printf 'idp: %s\n' "$*"; }
die() { printf 'idp: error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (it installs a package and starts a daemon)"

# --- package ------------------------------------------------------------------------
# "No configuration": the package's own postinst then writes no database and starts
# nothing of ours (its init script is not used; we run the daemon ourselves).
need=()
for pair in glewlwyd:glewlwyd sqlite3:sqlite3 openssl:openssl curl:curl; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
    log "installing ${need[*]}"
    echo 'glewlwyd glewlwyd/config_type select No configuration' | debconf-set-selections
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

install -d -m 700 "$STATE" "$STATE/run" "$STATE/log"

# alive PIDFILE, stop_recorded PIDFILE...: deploy/lib/pidfile.sh
# shellcheck source=deploy/lib/pidfile.sh
. "$HERE/../lib/pidfile.sh"
write_managed() {  # write_managed FILE MODE: content on stdin; never clobbers a file we did not write
    local file=$1 mode=$2 tmp; tmp=$(mktemp)
    cat > "$tmp"
    if [ -f "$file" ] && ! grep -qF "$MARK" "$file"; then
        rm -f "$tmp"
        die "$file exists and was not written by deploy/idp; refusing to overwrite it"
    fi
    if ! cmp -s "$tmp" "$file"; then
        install -m "$mode" "$tmp" "$file"; CONF_CHANGED=1
    fi
    rm -f "$tmp"
}
CONF_CHANGED=0

# --- the signing key (RS256), made once ------------------------------------------------
if [ ! -s "$STATE/oidc-rsa.key" ]; then
    log "making the RS256 signing key"
    (umask 077 && openssl genrsa -out "$STATE/oidc-rsa.key" 2048 2>/dev/null)
    openssl rsa -in "$STATE/oidc-rsa.key" -pubout -out "$STATE/oidc-rsa.pub" 2>/dev/null
fi
chmod 600 "$STATE/oidc-rsa.key"

# --- the login web app: a copy of the package's files with our config.json -----------------
# (glewlwyd's file server serves no symbolic links, and the package's webapp/config.json
# links to a directory; the app reads its API address from config.json, "./" = here)
WEBAPP=$STATE/webapp
GLEWLWYD_VERSION=$(dpkg-query -W -f '${Version}' glewlwyd)
if [ "$(cat "$WEBAPP/.copied" 2>/dev/null)" != "$GLEWLWYD_VERSION" ]; then
    log "copying glewlwyd's login web app ($GLEWLWYD_VERSION)"
    rm -rf "$WEBAPP" "$WEBAPP.new"
    cp -rL /usr/share/glewlwyd/webapp "$WEBAPP.new" 2>/dev/null || true  # (config.json: a directory)
    [ -s "$WEBAPP.new/login.html" ] || die "could not copy /usr/share/glewlwyd/webapp"
    rm -rf "$WEBAPP.new/config.json"
    echo "$GLEWLWYD_VERSION" > "$WEBAPP.new/.copied"
    mv "$WEBAPP.new" "$WEBAPP"
fi
/usr/bin/python3 - "$WEBAPP/config.json" <<'PY'
import json, pathlib, sys
conf = json.loads(pathlib.Path("/etc/glewlwyd/config-2.7.json/config.json").read_text())
conf["lang"] = ["en"]
out = pathlib.Path(sys.argv[1])
text = json.dumps(conf, indent=2) + "\n"
if not out.exists() or out.read_text() != text:
    out.write_text(text)
PY

# --- glewlwyd.conf --------------------------------------------------------------------
# (no use_secure_connection line at all: 2.7.5 then demands certificate files, even for false)
write_managed "$STATE/glewlwyd.conf" 600 <<EOF
$MARK
port=$PORT
bind_address="127.0.0.1"
external_url="$EXTERNAL_URL"
login_url="login.html"
api_prefix="api"
static_files_path="$WEBAPP/"
allow_origin="$EXTERNAL_URL"
log_mode="file"
log_level="INFO"
log_file="$STATE/log/glewlwyd.log"
# Domain= left empty: a host-only cookie in browsers (localhost or 127.0.0.1 alike).
cookie_domain=""
# plain http on 127.0.0.1 (a dev provider); a real one is behind TLS with this set to 1
cookie_secure=0
cookie_same_site="lax"
session_expiration=86400
session_key="GLEWLWYD2_SESSION_ID"
admin_session_authentication="cookie,api_key"
profile_session_authentication="cookie"
allow_multiple_user_per_session=false
login_api_enabled=true
add_x_frame_option_header_deny=true
admin_scope="g_admin"
profile_scope="g_profile"
user_module_path="/usr/lib/glewlwyd/user"
user_middleware_module_path="/usr/lib/glewlwyd/user_middleware"
client_module_path="/usr/lib/glewlwyd/client"
user_auth_scheme_module_path="/usr/lib/glewlwyd/scheme"
plugin_module_path="/usr/lib/glewlwyd/plugin"
hash_algorithm="SHA512"
database = { type = "sqlite3" path = "$STATE/glewlwyd.db" };
static_files_mime_types = (
  { extension = ".html" mime_type = "text/html" compress = 1 },
  { extension = ".css" mime_type = "text/css" compress = 1 },
  { extension = ".js" mime_type = "application/javascript" compress = 1 },
  { extension = ".json" mime_type = "application/json" compress = 1 },
  { extension = ".png" mime_type = "image/png" compress = 0 },
  { extension = ".ico" mime_type = "image/x-icon" compress = 0 },
  { extension = ".svg" mime_type = "image/svg+xml" compress = 1 },
  { extension = ".ttf" mime_type = "font/ttf" compress = 0 },
  { extension = ".woff" mime_type = "font/woff" compress = 0 },
  { extension = ".woff2" mime_type = "font/woff2" compress = 0 },
  { extension = ".eot" mime_type = "application/vnd.ms-fontobject" compress = 0 }
)
EOF

# --- the database: the package's schema, once ------------------------------------------
if [ ! -s "$STATE/glewlwyd.db" ]; then
    log "creating the database"
    rm -f "$STATE/glewlwyd.db.new"
    zcat /usr/share/doc/glewlwyd/database/init.sqlite3.sql.gz | sqlite3 "$STATE/glewlwyd.db.new"
    chmod 600 "$STATE/glewlwyd.db.new"
    mv "$STATE/glewlwyd.db.new" "$STATE/glewlwyd.db"
fi

# --- the daemon -------------------------------------------------------------------------
PIDFILE=$STATE/run/glewlwyd.pid
[ "$CONF_CHANGED" = 1 ] && stop_recorded "$PIDFILE"
if ! alive "$PIDFILE"; then
    log "starting glewlwyd on 127.0.0.1:$PORT"
    # glewlwyd does not fork: the recorded pid is the daemon's.
    start-stop-daemon --start --background --make-pidfile --pidfile "$PIDFILE" \
        --output "$STATE/log/glewlwyd.out" --exec /usr/bin/glewlwyd -- --config-file="$STATE/glewlwyd.conf"
fi
for _ in $(seq 100); do
    curl -fsS -o /dev/null "http://127.0.0.1:$PORT/config/" 2>/dev/null && break
    alive "$PIDFILE" || die "glewlwyd exited; see $STATE/log/glewlwyd.out and glewlwyd.log"
    sleep 0.1
done
curl -fsS -o /dev/null "http://127.0.0.1:$PORT/config/" || die "glewlwyd does not answer on 127.0.0.1:$PORT"

# --- users, groups, the portal's client, the OIDC plugin (through the admin API) ------------
/usr/bin/python3 "$HERE/configure.py" "$STATE" "http://127.0.0.1:$PORT/api" "$ISSUER" \
    "$DEMO_URL/oidc/callback/" "$DEMO_URL/accounts/login/"

curl -fsS "http://127.0.0.1:$PORT/api/oidc/.well-known/openid-configuration" | grep -qF "\"issuer\":\"$ISSUER\"" \
    || die "the discovery document does not name $ISSUER"
log "up: issuer $ISSUER (client and people in $STATE/portal.env and users.json)"
