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
VAR=$(realpath -m "${PORTAL_DATA_DIR:-var}")  # the portal's data directory, as in the settings
log() { printf 'services: %s\n' "$*"; }
umask 077

running_pid() {  # our redis-server's pid, if its pidfile names a live redis-server
    local pid
    pid=$(cat "$VAR/redis/redis.pid" 2>/dev/null) || return 1
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
mkdir -p "$VAR/redis" && chmod 700 "$VAR" "$VAR/redis"

if ! command -v ss >/dev/null; then  # is_ours() asks ss which process listens
    if [ "$(id -u)" != 0 ]; then
        log "ss is missing and cannot be installed without root (apt-get install iproute2)"
        exit 1
    fi
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends iproute2 >/dev/null
fi
if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
    if [ "$(id -u)" != 0 ]; then
        log "redis-server is missing and cannot be installed without root (apt-get install redis-server)"
        exit 1
    fi
    log "installing redis-server"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server >/dev/null
fi

if [ ! -s "$VAR/redis.password" ]; then  # made once; written aside, then linked (never half a file)
    python3 -c 'import secrets; print(secrets.token_hex(24))' > "$VAR/.redis.password.$$"
    ln "$VAR/.redis.password.$$" "$VAR/redis.password" 2>/dev/null || true
    rm -f "$VAR/.redis.password.$$"
fi
chmod 600 "$VAR/redis.password"
REDIS_PASSWORD=$(cat "$VAR/redis.password")

# Ours: what listens on the port is the redis-server our pidfile names, and it accepts our
# password. Answers alone prove nothing: any local user (a job on the dev node) can listen
# on the port first and answer NOAUTH, then PONG to whatever password it is sent; so the
# password goes only to our own process.
is_ours() {
    local pid
    pid=$(running_pid) || return 1
    ss -Hltnp "sport = :$1" 2>/dev/null | grep -q "pid=$pid," || return 1
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
            "requirepass $REDIS_PASSWORD" 'save ""' "appendonly no" "dir $VAR/redis" \
            "pidfile $VAR/redis/redis.pid" "logfile $VAR/redis/redis.log" \
            "daemonize yes" > "$VAR/redis/redis.conf"
        chmod 600 "$VAR/redis/redis.conf"
        log "starting the portal's redis-server on 127.0.0.1:$port (password in $VAR/redis.password)"
        redis-server "$VAR/redis/redis.conf" || true
        for _ in $(seq 50); do is_ours "$port" && break; sleep 0.1; done
        if is_ours "$port"; then REDIS_PORT=$port; break; fi
        if ! tail -n 3 "$VAR/redis/redis.log" 2>/dev/null | grep -q "Address already in use"; then
            log "redis-server did not come up; see $VAR/redis/redis.log"
            exit 1
        fi
        log "127.0.0.1:$port is in use after all; trying the next port"
    done
    [ -n "$REDIS_PORT" ] || { log "no free port for Redis in $BASE_PORT-$((BASE_PORT + 20))"; exit 1; }
fi
echo "redis://:$REDIS_PASSWORD@127.0.0.1:$REDIS_PORT/0" > "$VAR/redis.url"
chmod 600 "$VAR/redis.url"
log "Redis up at 127.0.0.1:$REDIS_PORT (password-protected; URL in $VAR/redis.url)"
