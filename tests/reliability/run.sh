#!/usr/bin/env bash
# make reliability: the service against faults, scenario by scenario, each
# judged by a model of what was published (gen.awk, check.sql).
#
#   tests/reliability/run.sh [BUILD]      BUILD defaults to build (release);
#                                         build/san runs the sanitizer build
#
# Each scenario runs in a network namespace of its own, with a throw-away
# PostgreSQL and a mock Kafka cluster of its own (its database, topics and
# consumer groups in them), RELIABILITY_JOBS of them side by side (PHASES
# says which may run beside which): they mostly wait on the service's and
# the mock's timers. Prints a line as each scenario starts and ends, then
# each scenario's own lines in the table's order, then a table: records
# published, rows expected and found, lost, duplicated, wrongly updated,
# dead letters expected/found, and the outcome.
# Exit status 1 if any scenario failed (lost, duplicated or wrongly updated
# anything, or broke one of its other promises: exit codes, logs, offsets).
#
# RELIABILITY_ONLY=REGEX runs the matching scenarios only;
# RELIABILITY_JOBS=N runs N scenarios at a time (3; 1: one after the other);
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

# The scenarios (functions scenario_NAME), in the table's order.
SCENARIOS=(checker_selftest kill9 kill_between_commits pg_restart_fast pg_restart_immediate
    pg_terminate_backend pg_max_connections pg_statement_timeout pg_down_past_retries
    pg_restore_backup broker_down_one brokers_all_down leader_changes coordinator_moves
    fetch_errors commit_errors latency_spikes net_postgres net_brokers retention group_churn
    zombie_member model_churn dead_letter_refused graceful_stop sigterm_while_joining production)

# The scenarios run in these phases, one phase after the other, each
# RELIABILITY_JOBS at a time with nothing of another phase beside them.
# production first, alone: it keeps both cores busy for minutes (10,000
# apps, lz4, registry changes). The network scenarios next, beside each
# other only: they sample /readyz from a moment only 200 ms past the
# service's own deadline (scenarios/network.sh, net_notice_ms), where a
# process starved of CPU could still say ready, and each of them is light
# (9,000 records over 90 s). Then every other one, the longest first (as
# listed here, then in the table's order), so that the run does not end
# with a long scenario going on alone. model_churn (three members and their
# PostgreSQL, for two minutes) is left to the rest, in the table's order:
# beside group_churn, whose joins under load are timed in the mock's
# rounds, it once cost one of them a round.
PHASES=("production" "net_postgres net_brokers"
    "group_churn kill9 graceful_stop commit_errors zombie_member pg_restart_immediate *")

# ---------------------------------------------------------------------------
# The run: outside any namespace, it makes one for each scenario, runs this
# script inside it for that scenario (RELIABILITY_SCENARIO), deletes it and
# its /etc/netns directory once the scenario ended (and however the run
# ends), and prints the table. No namespace, no nft: the suite fails, it
# does not skip.

if [ -z "${RELIABILITY_SCENARIO:-}" ]; then
    for tool in ip nft; do
        command -v "$tool" >/dev/null || { echo "reliability: FAILED: $tool is missing (make deps installs iproute2 and nftables); the network scenarios need it" >&2; exit 2; }
    done
    # wait -n -p: the scenario that ended, whichever it is.
    if [ "${BASH_VERSINFO[0]}" -lt 5 ] || { [ "${BASH_VERSINFO[0]}" = 5 ] && [ "${BASH_VERSINFO[1]}" -lt 1 ]; }; then
        echo "reliability: bash 5.1 or newer is needed (wait -n -p), this is $BASH_VERSION" >&2
        exit 2
    fi
    JOBS=${RELIABILITY_JOBS:-3}
    [[ $JOBS =~ ^[1-9][0-9]*$ ]] || { echo "reliability: RELIABILITY_JOBS must be a number of 1 or more, not '$JOBS'" >&2; exit 2; }
    export RWORK
    RWORK=$(mktemp -d /tmp/storage-reliability.XXXXXX)
    chmod 755 "$RWORK"
    SUITE_T0=$(date +%s)
    # One initdb for the run: each scenario's server starts from a copy.
    "$PG" init "$RWORK/pg-template" >/dev/null || { echo "reliability: initdb failed" >&2; exit 1; }
    NETNS_PREFIX=storage-rel-$$
    declare -A RUNNING=() # scenario -> pid of its run inside its namespace

    netns_del() { # name
        ip netns del "$1" 2>/dev/null
        rm -rf "/etc/netns/$1"
    }
    netns_make() { # name
        echo "$1" >>"$RWORK/namespaces"
        mkdir -p "/etc/netns/$1" 2>/dev/null && echo "127.0.0.1 localhost" >"/etc/netns/$1/hosts" &&
            ip netns add "$1" && ip -n "$1" link set lo up && ip netns exec "$1" nft list ruleset >/dev/null
    }
    run_cleanup() {
        local n ns
        # Stopped by a signal: each scenario's run cleans up after itself
        # (its trap), then its namespace goes.
        for n in "${!RUNNING[@]}"; do kill -TERM "${RUNNING[$n]}" 2>/dev/null; done
        for n in "${!RUNNING[@]}"; do wait "${RUNNING[$n]}" 2>/dev/null; done
        for ns in $(cat "$RWORK/namespaces" 2>/dev/null); do netns_del "$ns"; done
        if [ -n "${RELIABILITY_KEEP:-}" ]; then
            echo "# work kept in $RWORK"
        else
            rm -rf "$RWORK"
        fi
    }
    trap run_cleanup EXIT
    trap 'exit 130' INT TERM

    clock() { local s=$(($(date +%s) - SUITE_T0)); printf '%d:%02d' $((s / 60)) $((s % 60)); }

    start_scenario() { # name
        local name=$1 ns=$NETNS_PREFIX-$1
        mkdir -p "$RWORK/$name"
        chmod 755 "$RWORK/$name"
        netns_make "$ns" || {
            echo "reliability: FAILED: cannot make a network namespace with nft rules in it (ip netns add and nft need root)" >&2
            exit 2
        }
        # In the background, so that a signal to this script stops the run
        # inside (whose own trap cleans up) before the namespace goes.
        RELIABILITY_NETNS=$ns RELIABILITY_SCENARIO=$name ip netns exec "$ns" "$HERE/run.sh" "$BUILD" \
            >"$RWORK/$name/output" 2>&1 </dev/null &
        RUNNING[$name]=$!
        echo "# $(clock) started $name${2:+ ($2)}"
    }

    # Start scenario NAME of phase $phase once fewer than JOBS are running.
    declare -A STARTED=()
    start_in_phase() { # name
        while [ "${#RUNNING[@]}" -ge "$JOBS" ]; do reap_one; done
        STARTED[$1]=1
        start_scenario "$1" "phase $phase"
    }

    # Wait until one of the running scenarios ends; delete its namespace.
    # A run that ended without its result line fails the scenario.
    reap_one() {
        local pid= rc=0 n name=
        wait -n -p pid || rc=$?
        for n in "${!RUNNING[@]}"; do [ "${RUNNING[$n]}" = "$pid" ] && name=$n; done
        if [ -z "$pid" ]; then
            # No job left to wait for (not expected): every one has ended.
            for n in "${!RUNNING[@]}"; do name=$n; done
        fi
        [ -n "$name" ] || return 0
        unset "RUNNING[$name]"
        netns_del "$NETNS_PREFIX-$name"
        local dir=$RWORK/$name
        if [ ! -s "$dir/result" ]; then
            printf '%s\t?\t\t0\t%s\t\n' "$name" "the scenario's run ended (exit $rc) without a result: $(tail -n 1 "$dir/output" 2>/dev/null | cut -c1-200)" >"$dir/result"
        fi
        local f
        f=$(grep -c . "$dir/failures" 2>/dev/null)
        [ "${f:-0}" = 0 ] && f=
        echo "# $(clock) ended $name after $(cut -f2 "$dir/result")s${f:+, $f failed check(s)}"
    }

    case "$(basename "$BUILD")" in
    san) FLAVOUR="sanitizer build (ASan+UBSan)" ;;
    *) FLAVOUR="release build (-O2)" ;;
    esac
    echo "# storage-consumer reliability suite: $BIN, $FLAVOUR"
    echo "# each scenario in a network namespace of its own (ip netns, its loopback alone) with its own PostgreSQL and mock Kafka cluster of 3 brokers;"
    echo "# $JOBS at a time, in phases: $(for p in "${PHASES[@]}"; do printf '%s; ' "${p//\*/every other one}"; done | sed 's/; $//')"

    selected=()
    for n in "${SCENARIOS[@]}"; do
        [ -n "${RELIABILITY_ONLY:-}" ] && ! [[ $n =~ $RELIABILITY_ONLY ]] && continue
        selected+=("$n")
    done
    # Each selected scenario in its phase ("*": those no phase names).
    named=" ${PHASES[*]} "
    phase=0
    for p in "${PHASES[@]}"; do
        phase=$((phase + 1))
        read -ra words <<<"$p"
        for n in "${words[@]}"; do
            if [ "$n" = "*" ]; then
                for m in "${selected[@]}"; do
                    [[ $named == *" $m "* ]] || [ -n "${STARTED[$m]:-}" ] || start_in_phase "$m"
                done
            elif [[ " ${selected[*]} " == *" $n "* ]] && [ -z "${STARTED[$n]:-}" ]; then
                start_in_phase "$n"
            fi
        done
        while [ "${#RUNNING[@]}" -gt 0 ]; do reap_one; done
    done

    # Each scenario's lines, then its result, in the table's order.
    RESULTS=$RWORK/results
    : >"$RESULTS"
    for n in "${selected[@]}"; do
        [ -s "$RWORK/$n/result" ] || printf '%s\t?\t\t0\tnot run\t\n' "$n" >"$RWORK/$n/result"
        echo
        cat "$RWORK/$n/output" 2>/dev/null
        cat "$RWORK/$n/result" >>"$RESULTS"
    done

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
fi

# ---------------------------------------------------------------------------
# One scenario, inside its namespace (RELIABILITY_NETNS): its PostgreSQL and
# its broker, the scenario under the watchdog, its result line in
# $RWORK/NAME/result.

NAME=$RELIABILITY_SCENARIO
DIR=$RWORK/$NAME
PG_DIR=$DIR/pg
BROKER_DIR=$DIR/kafka

. "$HERE/lib.sh"
for f in "$HERE"/scenarios/*.sh; do . "$f"; done

run_cleanup() {
    local c
    # Stopped by a signal mid-scenario: the scenario first (its own trap
    # undoes its faults), then the processes it recorded.
    if [ -n "${SCENARIO_PID:-}" ]; then
        for c in "$SCENARIO_PID" $(descendants "$SCENARIO_PID"); do kill -TERM "$c" 2>/dev/null || true; done
        wait "$SCENARIO_PID" 2>/dev/null
    fi
    if [ -f "$DIR/services" ] || [ -f "$DIR/bg.pids" ]; then SVC_DIR=$DIR svc_cleanup; fi
    "$BROKER" stop "$BROKER_DIR" >/dev/null 2>&1 &
    "$PG" destroy "$PG_DIR" >/dev/null 2>&1
    wait
}
trap run_cleanup EXIT
trap 'exit 130' INT TERM

# A small max_connections, so a scenario can exhaust it; ALTER SYSTEM keeps
# it across the restarts the scenarios cause. The data directory is a copy
# of the run's initdb.
mkdir -p "$PG_DIR" && cp -a "$RWORK/pg-template/data" "$PG_DIR/data" || { echo "reliability: $NAME: cannot copy the initdb" >&2; exit 1; }
ROOT_DB=$(PG_MAX_CONNECTIONS=30 "$PG" start "$PG_DIR") || { echo "reliability: $NAME: PostgreSQL did not start" >&2; exit 1; }
psql "$ROOT_DB" -X -q -c "ALTER SYSTEM SET max_connections = 30" >/dev/null
BOOTSTRAP=$("$BROKER" start "$BROKER_DIR" 3) || { echo "reliability: $NAME: the broker did not start" >&2; exit 1; }
export PGCONNECT_TIMEOUT=5

# Progress lines of the scenario (note, fail_check) go to fd 3.
exec 3>&1

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
run_scenario() { # name
    local name=$1 t0 pid rc last
    local dir=$RWORK/$name
    mkdir -p "$dir"
    echo "# --- $name (stopped if nothing moves for ${WATCHDOG_S}s)"
    echo "#     network namespace $RELIABILITY_NETNS; PostgreSQL $(psql "$ROOT_DB" -X -At -c 'SHOW server_version'); mock Kafka cluster of 3 brokers at $BOOTSTRAP"
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
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$secs" "$check" "$allow" "$failures" "$notes" >"$dir/result"
}

run_scenario "$NAME"
