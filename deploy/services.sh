#!/usr/bin/env bash
# Make sure the portal's own Redis (required; deploy/redis.sh) and PostgreSQL
# (optional, used by the tests when present) run on 127.0.0.1. Starts what is
# stopped; as root, installs what is missing from Debian's packages. Writes
# var/services.env for the test runner.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p var && chmod 700 var
ENV_FILE=var/services.env
(umask 077 && : > "$ENV_FILE") && chmod 600 "$ENV_FILE"
ROOT=0; [ "$(id -u)" = 0 ] && ROOT=1
log() { printf 'services: %s\n' "$*"; }

apt_install() {
    [ "$ROOT" = 1 ] || return 1
    log "installing $*"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# --- Redis (broker, channel layer, cache): the portal's own, with a password --------
bash deploy/redis.sh

# --- HAProxy: the session data path (proxy/haproxy.py); the portal runs its own instance.
if ! command -v haproxy >/dev/null 2>&1 && ! [ -x /usr/sbin/haproxy ]; then
    apt_install haproxy || log "haproxy is missing (apt-get install haproxy); its tests will be skipped"
fi

# --- PostgreSQL (optional) ---------------------------------------------------------
pg_up() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }
if ! pg_up && [ "$ROOT" = 1 ]; then
    if ! command -v pg_ctlcluster >/dev/null; then
        apt_install postgresql || true
    fi
    if command -v pg_ctlcluster >/dev/null; then
        version=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -1)
        if [ -n "$version" ]; then
            log "starting PostgreSQL $version"
            pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
            for _ in $(seq 50); do pg_up && break; sleep 0.2; done
        fi
    fi
fi
# pg_dump and pg_restore (manage.py backup/restore) where a server runs without them.
if pg_up && ! command -v pg_dump >/dev/null && [ "$ROOT" = 1 ]; then
    apt_install postgresql-client || log "pg_dump is missing (apt-get install postgresql-client)"
fi
if pg_up; then
    # The test role's password is random, made once and kept in var/ (0600): the dev
    # cluster's jobs run on this machine and reach 127.0.0.1:5432 too. A password role works
    # with Debian's default (scram) and with trust auth.
    if [ ! -s var/postgres.password ]; then
        (umask 077 && python3 -c 'import secrets; print(secrets.token_hex(24))' > var/postgres.password)
    fi
    chmod 600 var/postgres.password
    PG_PASSWORD=$(cat var/postgres.password)
    if [ "$ROOT" = 1 ] && command -v runuser >/dev/null && id postgres >/dev/null 2>&1; then
        # The password reaches psql on stdin (a \set line), never on a command line,
        # where any local user could read it.
        { printf "\\set pw '%s'\n" "$PG_PASSWORD"; cat <<'SQL'; } |
SELECT format('CREATE ROLE portal LOGIN CREATEDB PASSWORD %L', :'pw')
  WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'portal') \gexec
SELECT format('ALTER ROLE portal PASSWORD %L', :'pw') \gexec
SQL
            runuser -u postgres -- psql -q -h /var/run/postgresql -d postgres -v ON_ERROR_STOP=1 \
                >/dev/null 2>&1 || true
        runuser -u postgres -- createdb -h /var/run/postgresql -O portal portal 2>/dev/null || true
    fi
    if PGPASSWORD=$PG_PASSWORD psql -q -h 127.0.0.1 -U portal -d portal -c 'select 1' >/dev/null 2>&1; then
        echo "PORTAL_TEST_DATABASE_URL=postgres://portal:$PG_PASSWORD@127.0.0.1:5432/portal" >> "$ENV_FILE"
        log "PostgreSQL available for tests (role portal, password in var/postgres.password)"
        if PGPASSWORD=not-the-password psql -q -h 127.0.0.1 -U portal -d portal -c 'select 1' >/dev/null 2>&1; then
            log "warning: PostgreSQL trusts connections on 127.0.0.1 (pg_hba.conf 'trust'): any local user, a dev-cluster job too, reaches the test database whatever the password"
        fi
    else
        log "PostgreSQL runs but role 'portal' cannot log in; tests use SQLite"
    fi
else
    log "PostgreSQL not available; tests use SQLite"
fi
