#!/usr/bin/env bash
# make reliability: the service against faults, scenario by scenario, each
# judged by a model of what was published (gen.awk, check.sql).
#
#   tests/reliability/run.sh [BUILD]      BUILD defaults to build (release);
#                                         build/san runs the sanitizer build
#
# One throw-away PostgreSQL and one mock Kafka cluster for the run; each
# scenario has its own database, topics and consumer groups. Prints a table:
# records published, rows expected and found, lost, duplicated, wrongly
# updated, dead letters expected/found, and the outcome. Exit status 1 if
# any scenario failed (lost, duplicated or wrongly updated anything, or broke
# one of its other promises: exit codes, logs, offsets).
#
# RELIABILITY_ONLY=REGEX runs the matching scenarios only;
# RELIABILITY_KEEP=1 keeps the work directory (logs, model, checker output).
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
BUILD=$(cd "${1:-$TOP/build}" && pwd)
BIN=$BUILD/storage-consumer
PG=$TOP/tests/support/pg.sh
BROKER=$TOP/tests/support/broker.sh
# The sanitizer build (build/san) has no broker of its own: use the release one.
export BROKER_BIN=$BUILD/kafka-mock-broker
[ -x "$BROKER_BIN" ] || BROKER_BIN=$TOP/build/kafka-mock-broker
[ -x "$BIN" ] && [ -x "$BROKER_BIN" ] || { echo "reliability: build $BIN and $BROKER_BIN first (make all)" >&2; exit 2; }
for tool in kcat psql awk split; do
    command -v "$tool" >/dev/null || { echo "reliability: $tool is missing (make deps)" >&2; exit 2; }
done

# The suite runs in a network namespace of its own, where the network
# scenarios' nft rules and host names (scenarios/network.sh) apply and the
# machine's network is never touched: PostgreSQL (TCP on 127.0.0.1 and a
# Unix socket), the brokers, the service and the harness all run inside.
# Outside it, this script makes the namespace, runs itself there, and
# deletes the namespace and its /etc/netns directory however the run ends.
# No namespace, no nft: the suite fails, it does not skip.
if [ -z "${RELIABILITY_NETNS:-}" ]; then
    for tool in ip nft; do
        command -v "$tool" >/dev/null || { echo "reliability: FAILED: $tool is missing (make deps installs iproute2 and nftables); the network scenarios need it" >&2; exit 2; }
    done
    NETNS=storage-reliability-$$
    netns_cleanup() {
        ip netns del "$NETNS" 2>/dev/null
        rm -rf "/etc/netns/$NETNS"
    }
    trap netns_cleanup EXIT
    trap 'exit 130' INT TERM
    mkdir -p "/etc/netns/$NETNS" 2>/dev/null && echo "127.0.0.1 localhost" >"/etc/netns/$NETNS/hosts" &&
        ip netns add "$NETNS" && ip -n "$NETNS" link set lo up && ip netns exec "$NETNS" nft list ruleset >/dev/null || {
        echo "reliability: FAILED: cannot make a network namespace with nft rules in it (ip netns add and nft need root)" >&2
        exit 2
    }
    # In the background, so that a signal to this script alone stops the
    # run inside (whose own trap cleans up) before the namespace goes.
    RELIABILITY_NETNS=$NETNS ip netns exec "$NETNS" "$HERE/run.sh" "$@" &
    inner=$!
    trap 'kill -TERM "$inner" 2>/dev/null; wait "$inner"; exit 130' INT TERM
    wait "$inner"
    exit $?
fi

RWORK=$(mktemp -d /tmp/storage-reliability.XXXXXX)
chmod 755 "$RWORK"
PG_DIR=$RWORK/pg
BROKER_DIR=$RWORK/kafka
SUITE_T0=$(date +%s)

. "$HERE/lib.sh"
for f in "$HERE"/scenarios/*.sh; do . "$f"; done

suite_cleanup() {
    local d c
    # Stopped by a signal mid-scenario: the scenario first (its own trap
    # undoes its faults), then the processes it recorded.
    if [ -n "${SCENARIO_PID:-}" ]; then
        for c in "$SCENARIO_PID" $(descendants "$SCENARIO_PID"); do kill -TERM "$c" 2>/dev/null || true; done
        wait "$SCENARIO_PID" 2>/dev/null
    fi
    for d in "$RWORK"/*/; do
        [ -f "$d/services" ] || [ -f "$d/bg.pids" ] || continue
        SVC_DIR=${d%/} svc_cleanup
    done
    "$BROKER" stop "$BROKER_DIR" >/dev/null 2>&1 || true
    "$PG" destroy "$PG_DIR" >/dev/null 2>&1 || true
    if [ -n "${RELIABILITY_KEEP:-}" ]; then
        echo "# work kept in $RWORK"
    else
        rm -rf "$RWORK"
    fi
}
trap suite_cleanup EXIT
trap 'exit 130' INT TERM

# A small max_connections, so a scenario can exhaust it; ALTER SYSTEM keeps
# it across the restarts the scenarios cause.
ROOT_DB=$(PG_MAX_CONNECTIONS=30 "$PG" start "$PG_DIR") || { echo "reliability: PostgreSQL did not start" >&2; exit 1; }
psql "$ROOT_DB" -X -q -c "ALTER SYSTEM SET max_connections = 30" >/dev/null
BOOTSTRAP=$("$BROKER" start "$BROKER_DIR" 3) || { echo "reliability: the broker did not start" >&2; exit 1; }
export PGCONNECT_TIMEOUT=5

case "$(basename "$BUILD")" in
san) FLAVOUR="sanitizer build (ASan+UBSan)" ;;
*) FLAVOUR="release build (-O2)" ;;
esac
echo "# storage-consumer reliability suite: $BIN, $FLAVOUR"
echo "# network namespace $RELIABILITY_NETNS (ip netns), its loopback alone"
echo "# PostgreSQL $(psql "$ROOT_DB" -X -At -c 'SHOW server_version'), mock Kafka cluster of 3 brokers at $BOOTSTRAP"

# Progress lines of the scenarios (note, fail_check) go to fd 3.
exec 3>&1
RESULTS=$RWORK/results
: >"$RESULTS"

# A scenario is stopped when it has made no progress for this long: no
# line in its trace, no failure, no note, no progress() from a wait (records
# stored, chunks produced, a process's log growing). Every wait of lib.sh
# and the scenarios gives up within twice STALL_S, so a scenario silent for
# three is stuck in something else (a hung command). No limit on the
# total: a busy machine makes a healthy scenario slower, not stuck.
WATCHDOG_S=$((3 * STALL_S))

# The processes PID started, and theirs, listed while they are ours.
descendants() { # pid
    local c
    for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do
        echo "$c"
        descendants "$c"
    done
}

# The newest change of what the watchdog watches (seconds since the epoch).
last_progress() { # dir
    stat -c %Y "$1/trace.log" "$1/failures" "$1/notes" "$1/progress" 2>/dev/null | sort -n | tail -n 1
}

# Run scenario NAME (function scenario_NAME) in its own subshell, under the
# watchdog, and record its result line.
run_scenario() { # name (a number after it, an older call's limit, is ignored)
    local name=$1 t0 pid rc last
    [ -n "${RELIABILITY_ONLY:-}" ] && ! [[ $name =~ $RELIABILITY_ONLY ]] && return 0
    local dir=$RWORK/$name
    mkdir -p "$dir"
    echo "# --- $name (stopped if nothing moves for ${WATCHDOG_S}s)"
    t0=$(date +%s)
    (
        SC=$name
        SW=$dir
        SVC_DIR=$dir
        trap scenario_cleanup EXIT
        trap 'exit 143' TERM
        "scenario_$name"
    ) >"$dir/trace.log" 2>&1 &
    pid=$!
    SCENARIO_PID=$pid
    while kill -0 "$pid" 2>/dev/null; do
        last=$(last_progress "$dir")
        if [ $(($(date +%s) - ${last:-$t0})) -gt "$WATCHDOG_S" ]; then
            echo "stopped after ${WATCHDOG_S}s without progress (last: $(tail -n 1 "$dir/trace.log" 2>/dev/null | cut -c1-200))" >>"$dir/failures"
            # The scenario's subshell (our own child) and the processes it
            # started: a command it waits for in the foreground (a hung psql
            # or kcat) would keep it from acting on the signal. Then every
            # process it recorded.
            local c
            for c in "$pid" $(descendants "$pid"); do kill -TERM "$c" 2>/dev/null || true; done
            sleep 3
            SC=$name SW=$dir SVC_DIR=$dir scenario_cleanup
            break
        fi
        sleep 1
    done
    wait "$pid" 2>/dev/null
    SCENARIO_PID=
    local secs=$(($(date +%s) - t0))
    local check
    check=$(cat "$dir/check" 2>/dev/null || echo "")
    [ -n "$check" ] || echo "no checker result" >>"$dir/failures"
    local failures notes allow
    failures=$(paste -sd$'\037' "$dir/failures" 2>/dev/null || true)
    notes=$(paste -sd';' "$dir/notes" 2>/dev/null || true)
    allow=$(cat "$dir/allow_not_on_broker" 2>/dev/null || echo 0)
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$secs" "$check" "$allow" "$failures" "$notes" >>"$RESULTS"
}

run_scenario checker_selftest
run_scenario kill9
run_scenario kill_between_commits
run_scenario pg_restart_fast
run_scenario pg_restart_immediate
run_scenario pg_terminate_backend
run_scenario pg_max_connections
run_scenario pg_statement_timeout
run_scenario pg_down_past_retries
run_scenario pg_restore_backup
run_scenario broker_down_one
run_scenario brokers_all_down
run_scenario leader_changes
run_scenario coordinator_moves
run_scenario fetch_errors
run_scenario commit_errors
run_scenario latency_spikes
run_scenario net_postgres
run_scenario net_brokers
run_scenario retention
run_scenario group_churn
run_scenario zombie_member
run_scenario dead_letter_refused
run_scenario graceful_stop
run_scenario sigterm_while_joining
run_scenario production

# ---------------------------------------------------------------------------
# The table.

total=$(($(date +%s) - SUITE_T0))
echo
echo "storage-consumer reliability — $FLAVOUR — $(date -u +%Y-%m-%dT%H:%MZ) — ${total}s in all"
awk -F'\t' '
function pad(s, n) { return sprintf("%-" n "s", s) }
BEGIN {
    printf "%-22s %5s %9s %8s %10s %5s %5s %5s %12s %7s %6s  %s\n", "scenario", "secs", "published", "rows exp", "rows found",
           "lost", "dup", "wrong", "dl exp/found", "offsets", "result", "notes"
    bad = 0
}
{
    name = $1; secs = $2; n = split($3, c, "|"); allow = $4; failures = $5; notes = $6
    if (n < 12) { for (i = 1; i <= 12; i++) c[i] = "?" }
    ok = (n >= 12 && c[4] == 0 && c[5] == 0 && c[6] == 0 && c[9] == 0 && (c[11] == 0 || allow == 1) && failures == "")
    if (!ok) bad++
    printf "%-22s %5s %9s %8s %10s %5s %5s %5s %12s %7s %6s  %s\n", name, secs, c[1], c[2], c[3], c[4], c[5], c[6],
           c[7] "/" c[8], c[9] == 0 ? "ok" : c[9] " bad", ok ? "PASS" : "FAIL", notes
    why = ""
    if (c[10] != 0 && c[10] != "?") why = why "  - (not a failure) " c[10] " stored record(s) left below the committed offsets at the end\n"
    if (c[11] != 0 && c[11] != "?" && allow != 1) why = why "  - " c[11] " generated record(s) not on the broker\n"
    if (failures != "") { m = split(failures, f, "\037"); for (i = 1; i <= m; i++) why = why "  - " f[i] "\n" }
    if (c[12] != "" && c[12] != "?") why = why "  - model: " c[12] "\n"
    if (why != "") details = details name ":\n" why
}
END {
    printf "\npublished: records on the broker; rows: natural keys expected / rows in the three tables;\n"
    printf "lost, dup(licated), wrong(ly updated): as check.sql counts them; offsets: checkpoints where a\n"
    printf "committed offset had passed a record whose effect was not in the database.\n"
    if (details != "") printf "\nproblems:\n%s", details
    printf "\n%d scenario(s), %d failed\n", NR, bad
    exit bad > 0
}' "$RESULTS"
status=$?
[ -s "$RESULTS" ] || { echo "no scenario ran"; status=1; }
exit "$status"
