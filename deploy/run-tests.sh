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

# The whole suite, in two parts at once (tests/conftest.py, --part): the tests that use the
# Slurm dev cluster mostly wait on Slurm, the others mostly compute, and no daemon a test of
# one part stops or restarts is used by the other. The Slurm part prints as it runs; the
# other part's report follows it. The slowest tests of each are named (CI time is a budget).
mkdir -p var/test-logs
other_log=var/test-logs/other-$$.log
PORTAL_CACHE_PREFIX=portal-test-$$-other PORTAL_TEST_DB_SUFFIX=$$_other \
    pytest_part --part=other --basetemp="/tmp/portal-tests-$$-other" > "$other_log" 2>&1 &
other_pid=$!
# Interrupted: the other part's pytest (a child of its subshell) stops too.
trap 'pkill -P "$other_pid" 2>/dev/null; kill "$other_pid" 2>/dev/null' EXIT
echo "run-tests: the tests that use the Slurm dev cluster, beside the others ($other_log)"
PORTAL_CACHE_PREFIX=portal-test-$$-slurm PORTAL_TEST_DB_SUFFIX=$$_slurm \
    pytest_part --part=slurm --basetemp="/tmp/portal-tests-$$-slurm"
slurm_status=$?
wait "$other_pid"
other_status=$?
trap - EXIT
echo
echo "run-tests: ===== the other tests (units, the HTCondor pool, the proxy), run alongside ====="
cat "$other_log"
echo
echo "run-tests: Slurm part exit $slurm_status, other part exit $other_status"
if [ "$slurm_status" = 0 ] && [ "$other_status" = 0 ]; then
    rm -rf "/tmp/portal-tests-$$-slurm" "/tmp/portal-tests-$$-other" "$other_log"
    exit 0
fi
exit 1
