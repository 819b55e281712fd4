# Shared by the integration suites: a throw-away PostgreSQL per suite, TAP
# output, and small assertions. A suite defines functions named test_* after
# the behaviour they protect and ends with `run_tests`.
#
# Each test runs in a subshell with `set -e`: the first failing command or
# assertion fails that test and the suite goes on with the next one.

TOP=${STORAGE_TEST_TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
BUILD=${STORAGE_TEST_BUILD:-$TOP/build/san}
BIN=$BUILD/storage-consumer
PG=$TOP/tests/support/pg.sh
BROKER=$TOP/tests/support/broker.sh
# tests/run.sh hands us these through the environment; the service rejects
# unknown STORAGE_* variables (a typo must not be ignored), so they must not
# reach it.
export -n STORAGE_TEST_TOP STORAGE_TEST_BUILD 2>/dev/null || true

WORK=$(mktemp -d /tmp/storage-test.XXXXXX)
chmod 755 "$WORK"

cleanup_suite() {
    [ -n "${SUITE_CLEANUP:-}" ] && eval "$SUITE_CLEANUP"
    "$PG" destroy "$WORK/pg" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup_suite EXIT

fail() {
    echo "# FAIL: $*" >&2
    exit 1
}

assert_eq() { # expected actual message
    [ "$1" = "$2" ] || fail "${3:-values differ}: expected [$1], got [$2]"
}

assert_contains() { # haystack needle message
    case "$1" in
    *"$2"*) ;;
    *) fail "${3:-text lacks expected part}: [$2] not in [$1]" ;;
    esac
}

# Start the suite's PostgreSQL (once) and export DB (its conninfo).
pg_start() {
    DB=$("$PG" start "$WORK/pg")
    export DB
}

# Run SQL, print unaligned tuples only.
sql() {
    psql "$DB" -X -q -v ON_ERROR_STOP=1 -At -c "$1"
}

# A fresh database per test keeps tests independent on one server.
fresh_db() { # name
    psql "$(pg_root)" -X -q -c "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1" >/dev/null
    DB="$(pg_root | sed "s/dbname=postgres/dbname=$1/")"
    export DB
}

pg_root() { "$PG" conninfo "$WORK/pg"; }

# The applications table of the App API, which the consumer only reads.
create_applications_table() {
    sql "CREATE TABLE apps_registry_application (
           id BIGSERIAL PRIMARY KEY,
           package_name VARCHAR(255) NOT NULL UNIQUE,
           name VARCHAR(255),
           is_active BOOLEAN NOT NULL DEFAULT true,
           created_at TIMESTAMPTZ NOT NULL DEFAULT now())"
}

run_tests() {
    local n=0 name rc
    # bash ignores `set -e` inside anything whose status is being tested
    # (if, &&, ||), subshells included: the subshell must run as a plain
    # command or a failing command would not fail its test.
    set +e
    for name in $(declare -F | awk '{print $3}' | grep '^test_'); do
        n=$((n + 1))
        (set -e; "$name")
        rc=$?
        if [ "$rc" -eq 0 ]; then
            echo "ok $n - $name"
        else
            echo "not ok $n - $name"
        fi
    done
    echo "1..$n"
}
