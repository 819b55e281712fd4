# Shared by the integration suites: a throw-away PostgreSQL and broker per
# suite, TAP output, small assertions, and each test's database, topics and
# services. The service's processes, PostgreSQL and broker helpers and the
# lock that catches a batch mid-write are tests/support/service.sh's, shared
# with the reliability suite. A suite defines functions named test_* after
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

. "$TOP/tests/support/service.sh"
SVC_DIR=$WORK
PG_DIR=$WORK/pg
BROKER_DIR=$WORK/kafka

# No service, lock holder or broker survives the suite.
cleanup_suite() {
    svc_cleanup
    "$BROKER" stop "$BROKER_DIR" >/dev/null 2>&1 || true
    "$PG" destroy "$PG_DIR" >/dev/null 2>&1 || true
    [ -n "${KEEP_WORK:-}" ] && { echo "# work kept in $WORK" >&2; return; }
    rm -rf "$WORK"
}
trap cleanup_suite EXIT

fail() {
    echo "# FAIL: $*" >&2
    exit 1
}

# A check of tests/support/service.sh that failed fails the test.
fail_check() { fail "$@"; }

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
    DB=$("$PG" start "$PG_DIR")
    export DB
}

# SQL with timestamps shown in UTC, whatever the database's time zone.
usql() { PGTZ=UTC sql "$1"; }

# A fresh database per test keeps tests independent on one server.
fresh_db() { # name
    psql "$(pg_root)" -X -q -c "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1" >/dev/null
    DB="$(pg_root | sed "s/dbname=postgres/dbname=$1/")"
    export DB
}

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
    BOOTSTRAP=$("$BROKER" start "$BROKER_DIR" 3 app-stats:3 reviews:3 network-metrics:3 "$@")
    export BOOTSTRAP
}

# Produce stdin, one message per line, to TOPIC (extra args go to kcat, e.g.
# -p 0 for a partition or -K: for keys).
produce() { # topic [kcat args...]
    local topic=$1
    shift
    kcat -P -b "$BOOTSTRAP" -t "$topic" -X compression.codec=lz4 "$@"
}

# Settings every test shares: small session timeouts make rebalances take
# seconds instead of a minute on the mock cluster.
svc_env() { # name
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

# A test's services (svc_start): TEST_NAME, set by begin_test, names their
# files TEST_NAME-NAME, so every log survives the test. When the test ends,
# however it ends, end_test kills what is left running (a failed assertion
# must not leave a service running into the next test) and shows their logs
# if it failed.
TEST_NAME=""

# Start a test: its database with the consumer's schema, its own topics and
# consumer groups (fresh_topics; the default topics in a suite that sets
# DEFAULT_TOPICS=1), and the exit trap. A test that sets up a fault outside
# its services undoes it in that trap: trap 'end_test COMMAND...' EXIT.
begin_test() { # name
    SVC_STARTED=""
    TEST_NAME=$1
    trap end_test EXIT
    fresh_schema "test_$1"
    if [ -n "${DEFAULT_TOPICS:-}" ]; then
        unset TOPIC_APP_STATS TOPIC_REVIEWS TOPIC_NETWORK_METRICS GROUP_PREFIX
    else
        fresh_topics "$1"
    fi
}

# svc_start, with end_test as the exit trap of a test that has none yet.
start_service() { # name [VAR=value...]
    svc_start "$@"
    case "$(trap -p EXIT)" in
    *end_test*) ;; # kept: it may undo a fault too
    *) trap end_test EXIT ;;
    esac
}

# SIGTERM NAME and require a clean stop (exit 0, logged).
stop_clean() { # name
    local rc
    rc=$(svc_stop "$1")
    [ "$rc" = 0 ] || fail "service $(svc "$1") did not stop cleanly: exit [$rc]"
    grep -q 'stopped exit=0' "$(svc_log "$1")" || fail "service $(svc "$1") did not log 'stopped exit=0'"
}

# NAME is still running (it did not fail and exit on its own).
assert_running() { # name
    svc_running "$1" ||
        fail "service $(svc "$1") exited on its own ($(cat "$SVC_DIR/$(svc "$1").rc")): $(grep -E ' error ' "$(svc_log "$1")" | tail -n 2)"
}

# Wait until NAME's log has COUNT lines matching the extended regex REGEX.
wait_for_log() { # name regex [count (1)] [seconds (30)]
    wait_log "$1" "$2" "${3:-1}" "${4:-30}" ||
        fail "waited for ${3:-1} lines [$2] in $(svc "$1")'s log, got $(log_count "$1" "$2")$(svc_running "$1" || echo "; it exited: $(tail -n 5 "$(svc_log "$1")")")"
}

# After the test: release the lock, kill the test's services still running
# (if the test failed, RC, show their last log lines) and make sure the
# suite's PostgreSQL is up for the next test.
end_services() { # rc
    local name
    release_lock
    for name in ${SVC_STARTED:-}; do
        svc_running "$name" && svc_kill "$name" >/dev/null
        if [ "$1" -ne 0 ]; then
            echo "# --- last lines of service $(svc "$name") ---" >&2
            tail -n 40 "$(svc_log "$name")" 2>/dev/null | sed 's/^/# | /' >&2
        fi
    done
    pg_ensure_up || true
}

# The commands a test ran with `op`, whose output a failed test shows.
OPS=""
OP_ENV=()

# Run `storage-consumer ARGS...` once as NAME with the test's settings, plus
# the VAR=value words in the OP_ENV array. Its stdout is out NAME, its
# stderr err NAME, its exit status OP_RC; a sanitizer report fails the test.
op() { # name args...
    local name=$1 vars
    shift
    OPS="$OPS $name"
    OP_RC=0
    mapfile -t vars < <(svc_env "$name") # values hold spaces (conninfo)
    env "${vars[@]}" ${OP_ENV[@]+"${OP_ENV[@]}"} timeout 120 "$BIN" "$@" \
        >"$WORK/$(svc "$name").out" 2>"$WORK/$(svc "$name").err" || OP_RC=$?
    if grep -q 'Sanitizer' "$WORK/$(svc "$name").err"; then
        fail "$name: sanitizer report: $(grep -A12 'Sanitizer' "$WORK/$(svc "$name").err" | head -30)"
    fi
}
out() { cat "$WORK/$(svc "$1").out"; }
err() { cat "$WORK/$(svc "$1").err"; }

# The exit trap of a test; COMMAND, if given, undoes a fault the test set
# up. A failed test shows its services' last log lines and the output of
# the commands it ran with `op`. A suite may define its own, calling
# end_services.
end_test() { # [command...]
    local rc=$? name
    [ $# -gt 0 ] && { "$@" >/dev/null 2>&1 || true; }
    end_services "$rc"
    if [ "$rc" -ne 0 ]; then
        for name in $OPS; do
            echo "# --- $name (stdout, stderr) ---" >&2
            cat "$WORK/$(svc "$name").out" "$WORK/$(svc "$name").err" 2>/dev/null | tail -n 30 | sed 's/^/# | /' >&2
        done
    fi
    exit "$rc"
}

# The sum of COUNTER over NAME's batch lines of PIPELINE.
batch_sum() { # name pipeline counter
    grep -E "info +\[$2\] batch size=" "$(svc_log "$1")" |
        grep -oE " $3=[0-9]+" | cut -d= -f2 | awk '{s += $1} END {print s + 0}'
}

batch_lines() { # name pipeline
    grep -cE "info +\[$2\] batch size=" "$(svc_log "$1")" || true
}

# "Stored exactly once", per record, with what a duplicate would change (the
# natural key's UNIQUE index keeps a record stored twice to one row, so no
# row count can see it): the offset ranges of PIPELINE's batch lines on
# TOPIC, over the logs of every service NAME that consumed it, tile each of
# its partitions from the first offset to the high watermark. An offset in
# two batches was read and written twice; an offset in none was stored by no
# logged batch. A line gives each partition's first and last offset in the
# batch: their spans add up to its size= (no record twice in one batch, no
# gap inside it), and its counters account for every record (inserted +
# updated + skipped + dead_lettered = size). PARTITIONS (3) says how many the topic has;
# UNLOGGED, ranges stored by a batch whose line was never written
# (stored_unlogged).
assert_each_offset_stored_once() { # pipeline topic name...
    local pipeline=$1 topic=$2 name logs=() p wm marks="" ranges=$WORK/ranges.$BASHPID problems
    shift 2
    for name in "$@"; do logs+=("$(svc_log "$name")"); done
    for p in $(seq 0 $((${PARTITIONS:-3} - 1))); do
        wm=$(broker_ctl watermarks "$topic" "$p") || fail "cannot read the watermarks of $topic [$p]: $wm"
        wm=${wm#ok }
        marks="$marks $p:${wm%% *}:${wm##* }"
    done
    problems=$({ cat "${logs[@]}" | grep -E "info +\[$pipeline\] batch size=" |
        awk -v out="$ranges" -v topic="$topic" '
        function field(k) { return match($0, " " k "=[^ ]*") ? substr($0, RSTART + length(k) + 2, RLENGTH - length(k) - 2) : "" }
        BEGIN { printf "" > out }
        {
            # A pipeline of many topics (topic=a,b) names the topic of each
            # range: "a:p0:17-41"; one of a single topic does not: "p0:17-41".
            t = split(field("topic"), ts, ","); mine = 0
            for (i = 1; i <= t; i++) if (ts[i] == topic) mine = 1
            if (!mine) next
            size = field("size"); n = 0
            counted = field("inserted") + field("updated") + field("skipped") + field("dead_lettered")
            if (counted != size) printf "\na batch counted %d of its %d records: %s", counted, size, $0
            k = split(field("offsets"), r, ",")
            for (i = 1; i <= k; i++) {
                of = topic
                if (t > 1 && match(r[i], /^[^:]+:/)) { of = substr(r[i], 1, RLENGTH - 1); r[i] = substr(r[i], RLENGTH + 1) }
                if (r[i] !~ /^p[0-9]+:[0-9]+-[0-9]+$/) { printf "\nunreadable offsets [%s]: %s", r[i], $0; continue }
                split(substr(r[i], 2), a, "[:-]")
                n += a[3] - a[2] + 1
                if (of == topic) print a[1], a[2], a[3] > out
            }
            if (n != size) printf "\na batch of %d records logged %d offsets: %s", size, n, $0
        }'
        echo "${UNLOGGED:-}" | tr ', ' '\n\n' | sed -nE 's/^p([0-9]+):([0-9]+)-([0-9]+)$/\1 \2 \3/p' >>"$ranges"; })
    problems+=$(sort -k1,1n -k2,2n "$ranges" | awk -v marks="$marks" '
        BEGIN { n = split(marks, m, " "); for (i = 1; i <= n; i++) { split(m[i], f, ":"); lo[f[1]] = f[2]; hi[f[1]] = f[3]; at[f[1]] = f[2] } }
        !($1 in lo) { printf "\nbatches of partition %d, which the topic lacks", $1; next }
        $2 < at[$1] { printf "\noffsets %d-%d of partition %d stored by two batches", $2, (at[$1] <= $3 ? at[$1] - 1 : $3), $1 }
        $2 > at[$1] { printf "\noffsets %d-%d of partition %d stored by no batch", at[$1], $2 - 1, $1 }
        $3 + 1 > at[$1] { at[$1] = $3 + 1 }
        END { for (p in lo) if (at[p] != hi[p]) printf "\noffsets %d-%d of partition %d stored by no batch (high watermark %d)", at[p], hi[p] - 1, p, hi[p] }')
    rm -f "$ranges"
    [ -z "$problems" ] || fail "not every offset of $topic stored by exactly one batch of [$pipeline] in $*:$(echo "$problems" | head -n 20)"
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

# The built-in definitions and PIPELINE (a JSON object), at PATH: a file
# for STORAGE_PIPELINES_FILE that declares one pipeline more.
definitions_with() { # path pipeline-json
    { head -n -2 "$TOP/pipelines/default.json" | sed '$ s/}$/},/'; echo "    $2"; printf '  ]\n}\n'; } >"$1"
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

group_of() { echo "$GROUP_PREFIX.$1"; } # pipeline

app_id() { sql "SELECT id FROM apps_registry_application WHERE package_name = '$1'"; } # package

# A whole table, every column, in a stable order: rows that were not
# rewritten compare equal to the byte.
dump_table() { # table
    usql "SELECT t::text FROM $1 t ORDER BY id"
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

# Review messages (≈230 bytes each) of the suite's APP with review ids
# PREFIX-START.., one JSON object per line.
gen_reviews() { # start count [prefix]
    awk -v s="$1" -v n="$2" -v p="${3:-r}" -v app="$APP" 'BEGIN {
        for (i = s; i < s + n; i++)
            printf "{\"package_name\":\"%s\",\"review_id\":\"%s-%d\",\"user_name\":\"user %d\",\"content\":\"works fine, review %d\",\"score\":%d,\"thumbs_up_count\":%d,\"reviewed_at\":\"2026-11-01T10:00:00Z\",\"last_synced_at\":\"2026-11-29T12:00:00Z\"}\n",
                app, p, i, i, i, i % 5 + 1, i % 7
    }'
}

# The offsets of TOPIC that NAME stored without logging their batch: a
# process killed between its database COMMIT and its batch line, or one
# that took for failed a COMMIT which went through. Per partition, from
# NAME's last logged offset to the database's position (which every stored
# batch raises), written as a batch line writes them: "p0:100-199,p2:5-9".
stored_unlogged() { # name topic
    { grep -E " topic=$2( |\$)" "$(svc_log "$1")" | sed -nE 's/.* batch size=.* offsets=([^ ]*) .*/\1/p' |
        tr ',' '\n' | sed -nE 's/^p([0-9]+):[0-9]+-([0-9]+)$/logged \1 \2/p'
      sql "SELECT 'position', partition, next_offset FROM consumer_offsets WHERE topic = '$2'" | tr '|' ' '; } |
        awk '$1 == "logged" { if ($3 + 1 > from[$2]) from[$2] = $3 + 1; next }
             { if ($3 > pos[$2]) pos[$2] = $3 }
             END { for (p in pos) if (pos[p] > from[p] + 0) { printf "%sp%d:%d-%d", sep, p, from[p] + 0, pos[p] - 1; sep = "," } }'
}

# The time of NAME's first (or last) log line matching REGEX, in ms since
# the epoch (the clock of now_ms).
log_ms() { # name regex [first|last]
    local line
    line=$(grep -E -- "$2" "$(svc_log "$1")" | if [ "${3:-first}" = last ]; then tail -n 1; else head -n 1; fi)
    [ -n "$line" ] || fail "no line [$2] in $(svc "$1")'s log"
    echo $(($(date -d "${line%% *}" +%s%N) / 1000000))
}

# Wait until the clock reaches T (ms since the epoch): a deadline the test
# derived from a log line and a setting, not a guess at how long work takes.
wait_until_ms() { # t
    local left=$(($1 - $(now_ms)))
    [ "$left" -le 0 ] || sleep "$((left / 1000)).$(printf '%03d' $((left % 1000)))"
}

# Wait until 127.0.0.1:PORT answers GET /metrics with a response holding
# TEXT (any answer, without TEXT: the port is bound), at most STALL_S;
# print that response, headers included. A batch's counters move just after
# its COMMIT, so a row seen in the database is no sign they have.
wait_metrics() { # port [text]
    local end=$((SECONDS + STALL_S)) resp=""
    while [ "$SECONDS" -lt "$end" ]; do
        resp=$(http_get "$1" /metrics 2>/dev/null || true)
        if [ -n "$resp" ] && [[ "$resp" == *"${2:-}"* ]]; then
            echo "$resp"
            return 0
        fi
        sleep 0.1
    done
    fail "127.0.0.1:$1/metrics did not answer with [${2:-}] within $STALL_S s; last: $(echo "$resp" | tail -n 5)"
}

# Poll SHELL-CONDITION until it holds; fail naming DESCRIPTION once
# STALL_S passed without it.
wait_until() { # description shell-condition
    local end=$((SECONDS + STALL_S))
    until eval "$2"; do
        [ "$SECONDS" -lt "$end" ] || fail "timed out waiting ${STALL_S} s until $1"
        sleep 0.1
    done
}

# The value of one series of 127.0.0.1:PORT/metrics, written as the
# endpoint writes it (name{labels}); empty if it has none.
metric_value() { # port series
    http_get "$1" /metrics 2>/dev/null | awk -v s="$2" '$1 == s { print $2 }'
}

# The reviews pipeline's batch log lines of NAME.
review_batches() { # name
    grep -E '\[reviews\] batch size=' "$(svc_log "$1")" || true
}
