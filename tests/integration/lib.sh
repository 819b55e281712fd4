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
    [ -n "${KEEP_WORK:-}" ] && { echo "# work kept in $WORK" >&2; return; }
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
    for name in $(declare -F | awk '{print $3}' | grep '^test_' | grep -E "${ONLY_TESTS:-.}"); do
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

# ---------------------------------------------------------------------------
# The Kafka-protocol broker helper and the service.

# Start the suite's broker (3 brokers, the three topics with 3 partitions)
# and export BOOTSTRAP. Extra TOPIC:PARTITIONS arguments create more topics.
broker_start() {
    BOOTSTRAP=$("$BROKER" start "$WORK/kafka" 3 app-stats:3 reviews:3 network-metrics:3 "$@")
    export BOOTSTRAP
    SUITE_CLEANUP="${SUITE_CLEANUP:+$SUITE_CLEANUP; }\"$BROKER\" stop \"$WORK/kafka\" >/dev/null 2>&1 || true"
}

broker_ctl() { "$BROKER" ctl "$WORK/kafka" "$@"; }

# Produce stdin, one message per line, to TOPIC (extra args go to kcat, e.g.
# -p 0 for a partition or -K: for keys).
produce() { # topic [kcat args...]
    local topic=$1
    shift
    kcat -P -b "$BOOTSTRAP" -t "$topic" -X compression.codec=lz4 "$@"
}

# The broker dropped nothing (low watermark 0) on every partition of TOPIC:
# a test that claims "nothing lost" must first prove this.
assert_broker_kept_everything() { # topic [partitions]
    local p reply
    for p in $(seq 0 $((${2:-3} - 1))); do
        reply=$(broker_ctl watermarks "$1" "$p")
        [ "$(echo "$reply" | awk '{print $2}')" = 0 ] || fail "broker retention dropped messages of $1 [$p]: $reply"
    done
}

# Settings every test shares: small session timeouts make rebalances take
# seconds instead of a minute on the mock cluster.
service_env() {
    echo "STORAGE_DATABASE_URL=$DB"
    echo "STORAGE_KAFKA_BOOTSTRAP_SERVERS=$BOOTSTRAP"
    echo "STORAGE_SESSION_TIMEOUT_MS=6000"
    echo "STORAGE_POLL_TIMEOUT_MS=200"
    echo "STORAGE_HEARTBEAT_DIR=$WORK/heartbeat-$1"
    echo "STORAGE_GROUP_PREFIX=${GROUP_PREFIX:-storage-consumer}"
    [ -n "${TOPIC_APP_STATS:-}" ] && echo "STORAGE_TOPIC_APP_STATS=$TOPIC_APP_STATS"
    [ -n "${TOPIC_REVIEWS:-}" ] && echo "STORAGE_TOPIC_REVIEWS=$TOPIC_REVIEWS"
    [ -n "${TOPIC_NETWORK_METRICS:-}" ] && echo "STORAGE_TOPIC_NETWORK_METRICS=$TOPIC_NETWORK_METRICS"
    return 0
}

# Topics and groups of one test: app-stats-SUFFIX, reviews-SUFFIX,
# network-metrics-SUFFIX with 3 partitions each, and the group prefix
# sc-SUFFIX, so tests never see each other's messages or offsets.
fresh_topics() { # suffix
    TOPIC_APP_STATS=app-stats-$1
    TOPIC_REVIEWS=reviews-$1
    TOPIC_NETWORK_METRICS=network-metrics-$1
    GROUP_PREFIX=sc-$1
    export TOPIC_APP_STATS TOPIC_REVIEWS TOPIC_NETWORK_METRICS GROUP_PREFIX
    broker_ctl topic-create "$TOPIC_APP_STATS" 3 >/dev/null
    broker_ctl topic-create "$TOPIC_REVIEWS" 3 >/dev/null
    broker_ctl topic-create "$TOPIC_NETWORK_METRICS" 3 >/dev/null
}

# Start `storage-consumer run` in the background as NAME; extra NAME=value
# arguments override the environment. Its log is $WORK/NAME.log, its pid is
# in $WORK/NAME.pid and, once it has exited, its exit code in $WORK/NAME.rc
# (a watcher subshell waits for it: exit codes are then readable from any
# subshell, command substitutions included).
service_start() { # name [VAR=value...]
    local name=$1
    shift
    rm -f "$WORK/$name.rc" "$WORK/$name.pid"
    local vars
    mapfile -t vars < <(service_env "$name") # values hold spaces (conninfo)
    (
        env "${vars[@]}" "$@" "$BIN" run >"$WORK/$name.log" 2>&1 &
        echo $! >"$WORK/$name.pid"
        rc=0
        wait $! || rc=$? # the tests run under set -e
        echo "$rc" >"$WORK/$name.rc.tmp"
        mv "$WORK/$name.rc.tmp" "$WORK/$name.rc"
    ) &
    while [ ! -s "$WORK/$name.pid" ]; do sleep 0.01; done
}

service_pid() { cat "$WORK/$1.pid"; }

# Wait for NAME to exit by itself (at most SECONDS) and print its exit code,
# or "timeout".
service_wait() { # name seconds
    local i
    for i in $(seq 1 $(($2 * 10))); do
        [ -f "$WORK/$1.rc" ] && break
        sleep 0.1
    done
    if [ -f "$WORK/$1.rc" ]; then cat "$WORK/$1.rc"; else echo timeout; fi
}

# SIGTERM NAME and print its exit code (or "timeout" after SECONDS).
service_stop() { # name [seconds]
    kill -TERM "$(service_pid "$1")" 2>/dev/null || true
    service_wait "$1" "${2:-40}"
}

service_kill() { # name: kill -9, and wait until it is gone
    kill -KILL "$(service_pid "$1")" 2>/dev/null || true
    service_wait "$1" 10 >/dev/null
}

# A test's services: NAME is kept in $WORK as TEST_NAME-NAME (just NAME in
# suites without TEST_NAME), so every log survives, and recorded in STARTED:
# when the test ends, however it ends, end_test kills what is left running
# (a failed assertion must not leave a service running into the next test).
STARTED=""
TEST_NAME=""

svc() { echo "${TEST_NAME:+$TEST_NAME-}$1"; }

start_service() { # name [VAR=value...]
    local name=$1
    shift
    service_start "$(svc "$name")" "$@"
    STARTED="$STARTED $name"
    trap end_test EXIT
}

# SIGTERM NAME and require a clean stop (exit 0, logged).
stop_clean() { # name
    local rc name
    name=$(svc "$1")
    rc=$(service_stop "$name")
    [ "$rc" = 0 ] || fail "service $name did not stop cleanly: exit [$rc]"
    grep -q 'stopped exit=0' "$WORK/$name.log" || fail "service $name did not log 'stopped exit=0'"
}

# Kill the test's services still running; if the test failed (RC), show
# their last log lines.
end_services() { # rc
    local name
    for name in $STARTED; do
        name=$(svc "$name")
        [ -f "$WORK/$name.rc" ] || service_kill "$name"
        if [ "$1" -ne 0 ]; then
            echo "# --- last lines of service $name ---" >&2
            tail -n 40 "$WORK/$name.log" 2>/dev/null | sed 's/^/# | /' >&2
        fi
    done
}

# The exit trap of a test; a suite may define its own, calling end_services.
end_test() {
    local rc=$?
    end_services "$rc"
    exit "$rc"
}

# tests/run.sh sends ThreadSanitizer's reports to files of their own; with
# other TSAN_OPTIONS they reach the service's log, and are recognised there.
SANITIZER_REPORT='ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|SUMMARY: (AddressSanitizer|UndefinedBehaviorSanitizer|ThreadSanitizer)|UndefinedBehaviorSanitizer|WARNING: ThreadSanitizer'

no_sanitizer_report() { # log
    if grep -qE "$SANITIZER_REPORT" "$1"; then
        fail "sanitizer report in $1: $(grep -E -A 12 "$SANITIZER_REPORT" "$1" | head -n 30)"
    fi
}

# Poll SQL until it prints EXPECTED (at most SECONDS, default 60).
wait_for_sql() { # sql expected [seconds]
    local got i
    for i in $(seq 1 $((${3:-60} * 5))); do
        got=$(sql "$1" 2>/dev/null || true)
        [ "$got" = "$2" ] && return 0
        sleep 0.2
    done
    fail "waited for [$1] to be [$2], last got [$got]"
}

# Register apps (package names) in the App API's table.
register_apps() {
    local p
    for p in "$@"; do
        sql "INSERT INTO apps_registry_application (package_name, name) VALUES ('$p', '$p')" >/dev/null
    done
}

# A database with the applications table and the consumer's schema.
fresh_schema() { # dbname
    fresh_db "$1"
    create_applications_table
    env STORAGE_DATABASE_URL="$DB" "$BIN" migrate >/dev/null 2>&1 || fail "migrate failed"
}

# The offset GROUP has committed on TOPIC [PARTITION], as the broker stores
# it: a number, or -1001 when the group has committed nothing there. Asking
# neither joins nor disturbs the group (see `committed` in kafka_mock_broker.c).
broker_committed() { # group topic partition
    local reply
    reply=$(broker_ctl committed "$1" "$2" "$3") || fail "committed $1 $2 [$3]: $reply"
    echo "${reply#ok }"
}

high_watermark() { # topic partition
    broker_ctl watermarks "$1" "$2" | awk '{print $3}'
}

# Wait until GROUP's committed offset on TOPIC [PARTITION] is EXPECTED.
wait_committed() { # group topic partition expected [seconds]
    local got i
    for i in $(seq 1 $((${5:-30} * 4))); do
        got=$(broker_committed "$1" "$2" "$3")
        [ "$got" = "$4" ] && return 0
        sleep 0.25
    done
    fail "group $1 committed [$got] on $2 [$3], expected [$4]"
}

# Every partition of TOPIC is committed by GROUP up to its high watermark:
# the group has consumed (and stored) everything there is.
# (A partition that never had a message gets no commit: -1001.)
wait_all_committed() { # group topic [seconds]
    local p hw
    for p in 0 1 2; do
        hw=$(high_watermark "$2" "$p")
        [ "$hw" = 0 ] && hw=-1001
        wait_committed "$1" "$2" "$p" "$hw" "${3:-30}"
    done
}

# Hold an EXCLUSIVE lock on TABLE in a separate session (application_name
# faults-locker) until release_lock: the service's next INSERT into it blocks
# mid-batch, so a fault can be timed inside a batch deterministically.
hold_lock() { # table
    PGAPPNAME=faults-locker psql "$DB" -X -q -v ON_ERROR_STOP=1 \
        -c "BEGIN" -c "LOCK TABLE $1 IN EXCLUSIVE MODE" -c "SELECT pg_sleep(120)" >/dev/null 2>&1 &
    LOCKER_PID=$!
    wait_for_sql "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
                   WHERE a.application_name = 'faults-locker' AND l.granted AND l.mode = 'ExclusiveLock'
                     AND l.relation = '$1'::regclass" 1 10
}

# Wait until a storage-consumer session waits for a lock (its batch is stuck
# in the middle, behind hold_lock).
wait_for_blocked_batch() {
    wait_for_sql "SELECT count(*) FROM pg_stat_activity
                   WHERE application_name = 'storage-consumer' AND wait_event_type = 'Lock'" 1 30
}

# End hold_lock's session (nothing when no lock is held).
release_lock() {
    [ -n "${LOCKER_PID:-}" ] || return 0
    sql "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'faults-locker'" >/dev/null || true
    wait "$LOCKER_PID" 2>/dev/null || true
    LOCKER_PID=
}
