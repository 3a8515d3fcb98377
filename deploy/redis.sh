#!/usr/bin/env bash
# The portal's own Redis (broker, channel layer, cache) for `make demo` and `make test`.
# Not the machine's shared Redis: the dev cluster's jobs run on this machine, and whoever
# can write to the portal's Redis can queue tasks and forge cache entries. So: a
# redis-server of this checkout on 127.0.0.1, the first free port from PORTAL_REDIS_PORT
# (6390), `requirepass` with a random password made once in var/redis.password; the
# password is in var/ (0700) and the config file (0600), never on a command line.
# Started only when it does not answer already; writes var/redis.url (0600), which the
# settings read in demo mode. `deploy/redis.sh stop` stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf 'services: %s\n' "$*"; }
umask 077

running_pid() {  # our redis-server's pid, if its pidfile names a live redis-server
    local pid
    pid=$(cat var/redis/redis.pid 2>/dev/null) || return 1
    [ -n "$pid" ] && [ "$(ps -o comm= -p "$pid" 2>/dev/null)" = redis-server ] && echo "$pid"
}
stop_ours() {
    local pid
    pid=$(running_pid) || return 0
    kill "$pid"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
    log "redis-server $pid did not stop"
    return 1
}

if [ "${1:-}" = stop ]; then
    if running_pid >/dev/null; then stop_ours && log "stopped the portal's redis-server"; fi
    exit 0
fi
mkdir -p var/redis && chmod 700 var var/redis

if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
    if [ "$(id -u)" != 0 ]; then
        log "redis-server is missing and cannot be installed without root (apt-get install redis-server)"
        exit 1
    fi
    log "installing redis-server"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server >/dev/null
fi

if [ ! -s var/redis.password ]; then  # made once; written aside, then linked (never half a file)
    python3 -c 'import secrets; print(secrets.token_hex(24))' > "var/.redis.password.$$"
    ln "var/.redis.password.$$" var/redis.password 2>/dev/null || true
    rm -f "var/.redis.password.$$"
fi
chmod 600 var/redis.password
REDIS_PASSWORD=$(cat var/redis.password)

cli() { env -u REDISCLI_AUTH timeout 3 redis-cli -h 127.0.0.1 -p "$@" 2>&1; }
# Ours: nothing is allowed without a password, and ours is accepted. (redis-cli with a
# password still gets PONG from a Redis that has none, such as the machine's shared one.)
is_ours() {
    cli "$1" ping | grep -q NOAUTH &&
        REDISCLI_AUTH=$REDIS_PASSWORD timeout 3 redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null | grep -q PONG
}
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

BASE_PORT=${PORTAL_REDIS_PORT:-6390}
PORTS=$(seq "$BASE_PORT" $((BASE_PORT + 20)))
REDIS_PORT=
for port in $PORTS; do
    if is_ours "$port"; then REDIS_PORT=$port; break; fi
done
if [ -z "$REDIS_PORT" ]; then
    stop_ours  # ours, answering an old password or on a port no longer tried
    # The next free port: another checkout's Redis (or any other server) may hold the first,
    # and a port nothing listens on may still be some connection's local end (a bind then
    # fails with "Address already in use"): then the next one.
    for port in $PORTS; do
        port_free "$port" || continue
        printf '%s\n' "bind 127.0.0.1" "protected-mode yes" "port $port" \
            "requirepass $REDIS_PASSWORD" 'save ""' "appendonly no" "dir $PWD/var/redis" \
            "pidfile $PWD/var/redis/redis.pid" "logfile $PWD/var/redis/redis.log" \
            "daemonize yes" > var/redis/redis.conf
        chmod 600 var/redis/redis.conf
        log "starting the portal's redis-server on 127.0.0.1:$port (password in var/redis.password)"
        redis-server var/redis/redis.conf || true
        for _ in $(seq 50); do is_ours "$port" && break; sleep 0.1; done
        if is_ours "$port"; then REDIS_PORT=$port; break; fi
        if ! tail -n 3 var/redis/redis.log 2>/dev/null | grep -q "Address already in use"; then
            log "redis-server did not come up; see var/redis/redis.log"
            exit 1
        fi
        log "127.0.0.1:$port is in use after all; trying the next port"
    done
    [ -n "$REDIS_PORT" ] || { log "no free port for Redis in $BASE_PORT-$((BASE_PORT + 20))"; exit 1; }
fi
echo "redis://:$REDIS_PASSWORD@127.0.0.1:$REDIS_PORT/0" > var/redis.url
chmod 600 var/redis.url
log "Redis up at 127.0.0.1:$REDIS_PORT (password-protected; URL in var/redis.url)"
