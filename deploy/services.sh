#!/usr/bin/env bash
# Make sure Redis (required) and PostgreSQL (optional, used by the tests when
# present) run on 127.0.0.1. Starts what is stopped; as root, installs what is
# missing from Debian's packages. Writes var/services.env for the test runner.
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
# Not the machine's shared Redis: jobs of the dev cluster run on this machine, and
# whoever can write to the portal's Redis can queue tasks and forge cache entries.
# The password lives in var/ (0700), in the config file (0600), never on a command line.
if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
    apt_install redis-server || { log "redis-server is missing and cannot be installed without root"; exit 1; }
fi
mkdir -p var/redis && chmod 700 var/redis
[ -s var/redis.password ] || (umask 077 && python3 -c 'import secrets; print(secrets.token_hex(24))' > var/redis.password)
REDIS_PASSWORD=$(cat var/redis.password)
redis_up() { REDISCLI_AUTH=$REDIS_PASSWORD redis-cli -p "$1" ping 2>/dev/null | grep -q PONG; }
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# Ours if it answers our password; another checkout's Redis may hold the first port.
BASE_PORT=${PORTAL_REDIS_PORT:-6390}
REDIS_PORT=
for port in $(seq "$BASE_PORT" $((BASE_PORT + 20))); do
    if redis_up "$port"; then REDIS_PORT=$port; break; fi
done
if [ -z "$REDIS_PORT" ]; then
    if [ -s var/redis/redis.pid ] && kill -0 "$(cat var/redis/redis.pid)" 2>/dev/null; then
        kill "$(cat var/redis/redis.pid)"; sleep 0.5  # ours, with an old password
    fi
    for port in $(seq "$BASE_PORT" $((BASE_PORT + 20))); do
        if port_free "$port"; then REDIS_PORT=$port; break; fi
    done
    [ -n "$REDIS_PORT" ] || { log "no free port for Redis in $BASE_PORT-$((BASE_PORT + 20))"; exit 1; }
    (
        umask 077
        printf '%s\n' "bind 127.0.0.1" "port $REDIS_PORT" "requirepass $REDIS_PASSWORD" 'save ""' \
            "appendonly no" "dir $PWD/var/redis" "pidfile $PWD/var/redis/redis.pid" \
            "logfile $PWD/var/redis/redis.log" "daemonize yes" > var/redis/redis.conf
    )
    log "starting the portal's redis-server on 127.0.0.1:$REDIS_PORT (password in var/redis.password)"
    redis-server var/redis/redis.conf
    for _ in $(seq 50); do redis_up "$REDIS_PORT" && break; sleep 0.1; done
    redis_up "$REDIS_PORT" || { log "redis-server did not come up; see var/redis/redis.log"; exit 1; }
fi
(umask 077 && echo "redis://:$REDIS_PASSWORD@127.0.0.1:$REDIS_PORT/0" > var/redis.url)

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
if pg_up; then
    # A password role works with Debian's default (scram) and with trust auth.
    if [ "$ROOT" = 1 ] && command -v runuser >/dev/null && id postgres >/dev/null 2>&1; then
        runuser -u postgres -- psql -q -h /var/run/postgresql -d postgres -v ON_ERROR_STOP=1 <<'SQL' >/dev/null 2>&1 || true
DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'portal') THEN
    CREATE ROLE portal LOGIN PASSWORD 'portal' CREATEDB;
  END IF;
END $$;
SQL
        runuser -u postgres -- createdb -h /var/run/postgresql -O portal portal 2>/dev/null || true
    fi
    if PGPASSWORD=portal psql -q -h 127.0.0.1 -U portal -d portal -c 'select 1' >/dev/null 2>&1; then
        echo "PORTAL_TEST_DATABASE_URL=postgres://portal:portal@127.0.0.1:5432/portal" >> "$ENV_FILE"
        log "PostgreSQL available for tests (role portal)"
    else
        log "PostgreSQL runs but role 'portal' cannot log in; tests use SQLite"
    fi
else
    log "PostgreSQL not available; tests use SQLite"
fi
log "Redis up at 127.0.0.1:$REDIS_PORT (password-protected; URL in var/redis.url)"
