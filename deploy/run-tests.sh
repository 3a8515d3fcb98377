#!/usr/bin/env bash
# Run the whole suite: against PostgreSQL when deploy/services.sh found it,
# otherwise the embedded SQLite default. Fails when no test ran (pytest exit 5).
set -uo pipefail
cd "$(dirname "$0")/.."
[ -f var/services.env ] && set -a && . var/services.env && set +a
if [ -n "${PORTAL_TEST_DATABASE_URL:-}" ]; then
    export DATABASE_URL=$PORTAL_TEST_DATABASE_URL
    echo "run-tests: database $(sed -E 's#//([^:/@]*):[^@]*@#//\1:***@#' <<< "$DATABASE_URL")"  # never its password
else
    echo "run-tests: database SQLite (embedded default)"
fi
# As root (CI, dev machines) the dev cluster and the HTCondor pool are up: their tests
# must run, not skip.
[ "$(id -u)" = 0 ] && export PORTAL_REQUIRE_DEVCLUSTER=1 PORTAL_REQUIRE_CONDORPOOL=1
export PORTAL_DEMO=1

# pytest's exit 5 (no test collected) is a failure, never a silent pass.
pytest_part() {
    .venv/bin/python -m pytest --durations=25 "$@"
    local status=$?
    if [ "$status" = 5 ]; then
        echo "run-tests: pytest collected no tests; that is a failure" >&2
        return 1
    fi
    return "$status"
}

# Each run gets its own cache keys (job locks, API throttling; apart from a `make demo` on
# the same Redis) and its own test database, so runs started together never share them.
if [ "$#" -gt 0 ]; then
    PORTAL_CACHE_PREFIX=portal-test-$$ PORTAL_TEST_DB_SUFFIX=$$ pytest_part "$@"
    exit $?
fi

# The whole suite in parts (tests/conftest.py, --part): the tests that use the Slurm dev
# cluster mostly wait on Slurm, the others mostly compute, and no daemon a test of one part
# stops or restarts is used by another. The other part runs from start to end; beside it
# the Slurm tests that change what all share (`alone`) run first, by themselves, then the
# rest in two halves at once. The alone part prints as it runs; the others' reports follow.
# The slowest tests of each are named (CI time is a budget).
mkdir -p var/test-logs
part() {  # part NAME: its pytest, with its own database, cache keys and temporary folder
    PORTAL_CACHE_PREFIX=portal-test-$$-$1 PORTAL_TEST_DB_SUFFIX=$$_${1//-/_} \
        pytest_part --part="$1" --basetemp="/tmp/portal-tests-$$-$1"
}
log() { echo "var/test-logs/$1-$$.log"; }
part other > "$(log other)" 2>&1 &
other_pid=$!
pids=("$other_pid")
# Interrupted: every part's pytest (each a child of its subshell) stops too.
trap 'for p in "${pids[@]}"; do pkill -P "$p" 2>/dev/null; kill "$p" 2>/dev/null; done' EXIT
echo "run-tests: the Slurm tests that change what all share, beside the others ($(log other))"
part slurm-alone
alone_status=$?
echo "run-tests: the other Slurm tests, in two halves at once ($(log slurm-1), $(log slurm-2))"
part slurm-1 > "$(log slurm-1)" 2>&1 &
one_pid=$!
part slurm-2 > "$(log slurm-2)" 2>&1 &
two_pid=$!
pids+=("$one_pid" "$two_pid")
wait "$one_pid"
one_status=$?
wait "$two_pid"
two_status=$?
wait "$other_pid"
other_status=$?
trap - EXIT
for name in slurm-1 slurm-2 other; do
    echo
    echo "run-tests: ===== the $name part, run alongside ====="
    cat "$(log "$name")"
done
echo
# The suite leaves nothing running: no process of the dev cluster's users, no Slurm job
# (devtools/leftovers.py names what is left; a job cancelled at a test's end may take a
# moment to end, so it looks again for up to a minute).
.venv/bin/python -m devtools.leftovers --within 60
left_status=$?
echo "run-tests: exit of the parts: slurm-alone $alone_status, slurm-1 $one_status," \
    "slurm-2 $two_status, other $other_status; leftovers $left_status"
if [ "$alone_status$one_status$two_status$other_status$left_status" = 00000 ]; then
    rm -rf /tmp/portal-tests-$$-* var/test-logs/*-$$.log
    exit 0
fi
exit 1
