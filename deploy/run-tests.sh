#!/usr/bin/env bash
# Run the whole suite: against PostgreSQL when deploy/services.sh found it,
# otherwise the embedded SQLite default. Fails when no test ran (pytest exit 5).
set -uo pipefail
cd "$(dirname "$0")/.."
[ -f var/services.env ] && set -a && . var/services.env && set +a
if [ -n "${PORTAL_TEST_DATABASE_URL:-}" ]; then
    export DATABASE_URL=$PORTAL_TEST_DATABASE_URL
    echo "run-tests: database $DATABASE_URL"
else
    echo "run-tests: database SQLite (embedded default)"
fi
# As root (CI, dev machines) the dev cluster and the HTCondor pool are up: their tests
# must run, not skip.
[ "$(id -u)" = 0 ] && export PORTAL_REQUIRE_DEVCLUSTER=1 PORTAL_REQUIRE_CONDORPOOL=1
export PORTAL_DEMO=1
# Cache keys (job locks, API throttling) apart from a `make demo` on the same Redis.
export PORTAL_CACHE_PREFIX=portal-test-$$
# A test database of its own, so runs started together do not drop each other's.
export PORTAL_TEST_DB_SUFFIX=$$
# The slowest tests are named at the end of every run (CI time is a budget).
.venv/bin/python -m pytest --durations=25 "$@"
status=$?
if [ "$status" = 5 ]; then
    echo "run-tests: pytest collected no tests; that is a failure" >&2
    exit 1
fi
exit "$status"
