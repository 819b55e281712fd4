# Rebalances (DESIGN.md: Architecture; Supervisor, health, shutdown; Operations): several processes with the same
# STORAGE_PIPELINES share the partitions; members join and leave mid-stream,
# one leaves on SIGTERM while it holds a batch, one is frozen past its
# session timeout and comes back as a zombie; a graceful stop under load
# commits the batch in flight, exits 0 and leaves the group at once.
#
# The mock cluster rebalances slowly (a round waits the session timeout
# minus 1 s: ROUND_MS), so joins and takeovers are judged in its rounds
# (GROUP_ROUNDS at most), and every time is read from the services' own
# logs: a busy machine delays the harness's view, not the group protocol.
# What tells a clean leave from an eviction is how soon the others' round
# ends: a LeaveGroup starts the rebalance at once, a crashed member is
# noticed only after its session timeout.

# A member that left: the survivors' round ends a round after its
# LeaveGroup. One evicted instead: a session timeout after its last
# heartbeat (at worst a heartbeat interval before it stopped), then a round.
EVICTION_ROUND_MS=$((SESSION_TIMEOUT_MS - HEARTBEAT_INTERVAL_MS + ROUND_MS))
REBALANCE_LINES='partitions (assigned|revoked)|refused while the group rebalances|generation id|commit failed'
ROUND_END='partitions (assigned|revoked)'

# ISO timestamp of epoch milliseconds, as the services log it.
iso_ms() { echo "$(date -u -d "@$(($1 / 1000))" +%Y-%m-%dT%H:%M:%S).$(printf %03d $(($1 % 1000)))Z"; }

# The time (epoch ms) of NAME's first line, or with LAST its last, matching
# REGEX and logged from FROM_MS to TO_MS (default: any); empty if none.
log_ms() { # name regex [from_ms] [to_ms] [last]
    local line
    line=$(awk -v a="$(iso_ms "${3:-0}")" -v b="$([ -n "${4:-}" ] && iso_ms "$4")" \
        '$1 >= a && (b == "" || $1 <= b)' "$SW/$1.log" 2>/dev/null | grep -E -- "$2" |
        if [ -n "${5:-}" ]; then tail -n 1; else head -n 1; fi)
    [ -n "$line" ] && date -u -d "${line%% *}" +%s%3N
}

# A join or takeover that ended MS after it began took MS / ROUND_MS
# rounds: each round ends at its election, its sync follows within the
# next. At most GROUP_ROUNDS.
expect_rounds() { # description ms
    case $2 in '' | *[!0-9]*)
        fail_check "$1: ${2:-never}"
        return
        ;;
    esac
    local r=$(($2 / ROUND_MS))
    if [ "$r" -le "$GROUP_ROUNDS" ]; then
        trace "ok: $1: $2 ms, $r round(s) of $ROUND_MS ms"
    else
        fail_check "$1: $2 ms, $r rounds of the mock's $ROUND_MS ms (session timeout $SESSION_TIMEOUT_MS ms - 1 s); at most $GROUP_ROUNDS"
    fi
}

# A stop by NAME's own log, from the signal's arrival to its last line,
# within its shutdown timeout (past it, the supervisor exits 1). Sets
# STOP_LOG_MS.
expect_stop_within_shutdown_timeout() { # name
    local a b
    a=$(log_ms "$1" 'received (Terminated|Interrupt)')
    b=$(log_ms "$1" 'stopped exit=' 0 "" last)
    STOP_LOG_MS=never
    [ -n "$a" ] && [ -n "$b" ] && STOP_LOG_MS=$((b - a))
    expect_below "$1's stop by its own log, signal to exit (STORAGE_SHUTDOWN_TIMEOUT_SECONDS=$SHUTDOWN_TIMEOUT_S)" \
        $((SHUTDOWN_TIMEOUT_S * 1000)) "$STOP_LOG_MS"
}

expect_all_alive() { # names...
    local n
    for n in "$@"; do expect_alive "$n"; done
}

# Wait until none of NAMES has logged a rebalance line for a session
# timeout (the rounds of one rebalance come a round apart): the group is
# settled. At most GROUP_WAIT_S.
wait_stable() { # names... (a number first, an older call's seconds, is ignored)
    case ${1:-} in [0-9]*) shift ;; esac
    local end=$((SECONDS + GROUP_WAIT_S)) n last now quiet
    while [ "$SECONDS" -lt "$end" ]; do
        quiet=1
        now=$(now_ms)
        for n in "$@"; do
            last=$(log_ms "$n" "$REBALANCE_LINES" 0 "" last)
            [ -z "$last" ] && continue
            [ $((now - last)) -lt "$SESSION_TIMEOUT_MS" ] && quiet=0
        done
        [ "$quiet" = 1 ] && return 0
        sleep 0.5
    done
    return 1
}

# Milliseconds from T0_MS to NAME's first log line after T0_MS matching
# REGEX ("never" if none).
reaction_ms() { # name t0_ms regex
    local t
    t=$(log_ms "$1" "$3" "$2")
    if [ -z "$t" ]; then echo never; else echo $((t - $2)); fi
}

# The batch NAME finished after its SIGTERM is committed: for each of its
# partitions, the committed offset is past its last record. With LENIENT
# (a group in the middle of rebalances), a batch whose partition was revoked
# meanwhile, or whose commit the group refused, is only reported: committing
# a partition one no longer owns would be wrong, and the batch is stored.
expect_final_batch_committed() { # name [lenient]
    local ranges r p hi c n=0
    ranges=$(awk '/received Terminated/ {s = 1} s && /\[reviews\] batch size=/' "$SW/$1.log" |
        sed -nE 's/.* offsets=([^ ]*) .*/\1/p' | tr ',' '\n')
    for r in $ranges; do
        p=${r%%:*}
        p=${p#p}
        hi=${r##*-}
        c=$(committed reviews "$p")
        n=$((n + 1))
        if [ "$c" -le "$hi" ] 2>/dev/null; then
            local why
            why=$(awk '/received Terminated/ {s = 1} s' "$SW/$1.log" | grep -m1 -E 'offset commit' | sed -E 's/.*\): //' | cut -c1-100)
            [ -n "$why" ] || why="no commit logged: the partition was revoked before the batch ended, so the service skipped its commit"
            if [ -n "${2:-}" ] && awk '/received Terminated/ {s = 1} s' "$SW/$1.log" |
                grep -qE 'partitions revoked|refused while the group rebalances'; then
                note "$1's batch in flight at SIGTERM ($r) is stored but not committed (offset $c): the group was rebalancing ($why)"
            else
                fail_check "$1's batch in flight at SIGTERM ($r) is not committed: the group's offset on [$p] is $c ($why)"
            fi
        fi
    done
    if [ "$n" = 0 ]; then
        # DESIGN.md: Errors: a stop request interrupts a back-off; the batch stays
        # uncommitted and is redelivered. That is the one excuse.
        if awk '/received Terminated/ {s = 1} s' "$SW/$1.log" | grep -q 'stop requested during the back-off'; then
            trace "$1's batch in flight was in a back-off at SIGTERM: left uncommitted, by design ($(awk '/received Terminated/ {s = 1} s' "$SW/$1.log" | grep -m1 -oE 'error="[^"]{0,60}'))"
        else
            fail_check "$1 logged no batch after the signal (none in flight?)"
        fi
    fi
    trace "$1's batches after the signal: $ranges"
}

# SIGTERM NAME while its batch is blocked mid-INSERT (0.7 s); the batch
# must be finished and committed, the exit 0 and within the shutdown
# timeout. Sets STOP_MS (how long the stop took by NAME's own log) and
# STOP_RC.
stop_holding_a_batch() { # name [lenient: see expect_final_batch_committed]
    local name=$1 rc
    STOP_MS=never
    STOP_RC=none
    if ! svc_running "$name"; then
        fail_check "$name had exited already ($(cat "$SW/$name.rc")): cannot stop it holding a batch"
        return
    fi
    hold_lock reviews
    wait_blocked "sc-$name" "$STALL_S" "$name" || fail_check "no batch of $name caught mid-write"
    svc_signal "$name" TERM
    sleep 0.7
    svc_running "$name" || fail_check "$name exited before finishing its batch in flight"
    release_lock
    rc=$(svc_wait "$name" "$STOP_WAIT_S")
    STOP_RC=$rc
    expect_eq "exit code of $name after SIGTERM with a batch in flight" 0 "$rc"
    expect_stop_within_shutdown_timeout "$name"
    STOP_MS=$STOP_LOG_MS
    expect_log "$name" 'stopped exit=0' "$name's supervisor stopped with exit 0"
    expect_final_batch_committed "$name" "${2:-}"
}

# LEAVER, stopped, left the group: the survivors' first rebalance round
# after it ended before an evicted member's could have, and they took its
# partitions over within GROUP_ROUNDS rounds. Both measured from LEAVER's
# close of its reviews pipeline (its LeaveGroup), by the services' logs.
# Prints a summary.
expect_takeover() { # leaver survivors...
    local leaver=$1 n left t_owned first=never end="" take="" r end_s
    shift
    local who
    who=$(echo "$@" | tr ' ' '+')
    wait_owners "$GROUP_WAIT_S" reviews "$@" >/dev/null ||
        fail_check "$who did not own every partition within $GROUP_WAIT_S s of $leaver's stop"
    t_owned=$(now_ms)
    left=$(log_ms "$leaver" '\[reviews\] pipeline stopped' 0 "" last)
    if [ -z "$left" ]; then
        fail_check "$leaver logged no stop of its reviews pipeline"
        echo "$leaver logged no stop"
        return
    fi
    # The round the leave started may end after the takeover was complete
    # (a leaver that owned nothing).
    end_s=$((SECONDS + GROUP_WAIT_S))
    while :; do
        for n in "$@"; do
            r=$(log_ms "$n" "\\[reviews\\] $ROUND_END" "$left")
            [ -n "$r" ] && { [ -z "$end" ] || [ "$r" -lt "$end" ]; } && end=$r
        done
        [ -n "$end" ] || [ "$SECONDS" -ge "$end_s" ] && break
        sleep 0.2
    done
    for n in "$@"; do
        r=$(reaction_ms "$n" "$left" "\\[reviews\\] .*($REBALANCE_LINES)")
        if [ "$r" != never ] && { [ "$first" = never ] || [ "$r" -lt "$first" ]; }; then first=$r; fi
        r=$(log_ms "$n" '\[reviews\] partitions (assigned|revoked) count=[1-9]' "$left" "$t_owned" last)
        [ -n "$r" ] && { [ -z "$take" ] || [ "$r" -gt "$take" ]; } && take=$r
    done
    [ -n "$end" ] && end=$((end - left))
    # A leaver that owned nothing left nothing to take over.
    take=$([ -n "$take" ] && echo $((take - left)) || echo 0)
    expect_below "the survivors' first round after $leaver left ended before an eviction's could ($SESSION_TIMEOUT_MS ms session timeout - $HEARTBEAT_INTERVAL_MS ms heartbeat interval + $ROUND_MS ms round)" \
        "$EVICTION_ROUND_MS" "${end:-never}"
    expect_rounds "$who took over $leaver's partitions" "$take"
    # Past the bound, the survivors' own account of the rounds, for the report.
    if [ "$((take / ROUND_MS))" -gt "$GROUP_ROUNDS" ]; then
        for n in "$@"; do
            fail_check "  $n after $leaver left: $(awk -v a="$(iso_ms "$left")" '$1 >= a' "$SW/$n.log" |
                grep -E "\[reviews\] .*($REBALANCE_LINES)" | head -12 | cut -c12-110 | tr '\n' ';')"
        done
    fi
    echo "noticed after $(ms "$first"), its round ended after $(ms "${end:-never}"), taken over after $(ms "$take")"
}

# Start NAME and wait until the group (MEMBERS, NAME among them) shares the
# partitions: NAME admitted within GROUP_ROUNDS rounds of its subscription
# (by its own log), all alive. Sets JOIN_MS.
join_under_load() { # name members...
    local name=$1 a b
    shift
    svc_start "$name"
    wait_owners "$GROUP_WAIT_S" reviews "$@" >/dev/null || fail_check "$name never got partitions within $GROUP_WAIT_S s"
    a=$(log_ms "$name" '\[reviews\] pipeline started')
    b=$(log_ms "$name" '\[reviews\] partitions (assigned|revoked) count=[0-9]+ owned=[1-9]')
    JOIN_MS=never
    [ -n "$a" ] && [ -n "$b" ] && JOIN_MS=$((b - a))
    expect_rounds "$name's join under load, from its subscription to its first partitions" "$JOIN_MS"
    expect_all_alive "$@"
    checkpoint "$name joined"
}

scenario_group_churn() {
    scenario_begin group_churn reviews
    gen_stream 41 30000 0 0
    svc_start A
    wait_owners "$GROUP_WAIT_S" reviews A >/dev/null || fail_check "A was not assigned the partitions"
    # Records keep coming however long the group takes (producer_wait
    # produces the rest at once).
    producer_start 150 150
    local j_b j_c j_d rc left_b left_c
    join_under_load B A B
    j_b=$JOIN_MS
    join_under_load C A B C
    j_c=$JOIN_MS
    wait_stable A B C || trace "the group did not settle"
    stop_holding_a_batch B lenient
    left_b=$(expect_takeover B A C | tail -n 1)
    expect_all_alive A C
    checkpoint "B left"
    join_under_load D A C D
    j_d=$JOIN_MS
    wait_stable A C D || trace "the group did not settle"
    rc=$(svc_stop C)
    expect_eq "exit code of C after SIGTERM under load" 0 "$rc"
    left_c=$(expect_takeover C A D | tail -n 1)
    expect_all_alive A D
    checkpoint "C left"
    producer_wait
    assert_scenario_kept_everything
    settle A
    expect_all_alive A D
    finish_running A D
    note "joins took B $(ms "$j_b"), C $(ms "$j_c"), D $(ms "$j_d") (rounds of $ROUND_MS ms, at most $GROUP_ROUNDS); B stopped holding a batch (exit ${STOP_RC} after $(ms "$STOP_MS")): ${left_b}; C stopped under load (exit $rc): ${left_c}"
}

# A member frozen (SIGSTOP) with a batch in hand, past its session timeout:
# the group evicts it and another member takes its partitions and stores
# that batch's records and more. Resumed, the zombie writes its batch late,
# every time: it freezes itself right before writing its 3rd batch
# (SC_TEST_STOP_BEFORE_DB_WRITE) and is resumed only once the new owner's
# position in the database is past that batch on each of its partitions.
# Its transaction must leave those positions as they are (DESIGN.md,
# Progress in the database: never backwards; rel.position_moves records
# every change), its offset commit must be refused or skipped, and its
# stale rows must not corrupt newer ones (the last_synced_at guard; reviews
# are observed up to 4 times across partitions).
scenario_zombie_member() {
    scenario_begin zombie_member reviews
    gen_stream 42 25000 0 0
    svc_start A
    wait_owners "$GROUP_WAIT_S" reviews A >/dev/null || fail_check "A was not assigned the partitions"
    producer_start 90 90
    svc_start B SC_TEST_STOP_BEFORE_DB_WRITE=3
    wait_owners "$GROUP_WAIT_S" reviews A B >/dev/null || fail_check "A and B never shared the partitions"
    local fault='test fault point: stopping the process before writing the batch offsets='
    wait_log B "$fault" 1 "$STALL_S" || fail_check "B did not freeze itself before its 3rd batch"
    local late t0 take
    late=$(sed -nE "s/.*$fault([^ ]*).*/\1/p" "$SW/B.log" | head -n 1)
    t0=$(now_ms)
    # Evicted a session timeout after its last heartbeat, then rounds.
    take=$(wait_owners "$GROUP_WAIT_S" reviews A)
    [ "$take" = timeout ] && fail_check "B was never evicted: A does not own every partition"
    # A stores B's batch and goes past it on each of its partitions.
    local r p hi pos end kafka_before=""
    for r in $(echo "$late" | tr ',' ' '); do
        p=${r%%:*}
        p=${p#p}
        hi=${r##*-}
        end=$((SECONDS + STALL_S))
        while :; do
            pos=$(sql "SELECT next_offset FROM consumer_offsets WHERE partition = $p")
            [ "${pos:-0}" -gt "$((hi + 1))" ] && break
            [ "$SECONDS" -ge "$end" ] && { fail_check "A's position on [$p] did not pass B's batch ($r) within ${STALL_S} s: ${pos:-none}"; break; }
            sleep 0.2
        done
        kafka_before+="$p:$(committed reviews "$p") "
    done
    checkpoint "B frozen, A past its batch"
    local batches_before frozen
    batches_before=$(batches B)
    svc_signal B CONT
    frozen=$(($(now_ms) - t0))
    # B writes its batch: the database commit succeeds (idempotent rows, the
    # positions left as they are); the offset commit of a member that is no
    # longer one must not, or must not be tried (its partitions revoked
    # first). Its commit gives up at the latest at its commit timeout.
    wait_log B '\[reviews\] batch size=' $((batches_before + 1)) "$STALL_S" ||
        fail_check "B resumed after ${frozen} ms frozen and logged no batch: its late batch ($late) was not written"
    local refused
    if grep -qE 'offset commit (failed|refused|did not)' "$SW/B.log"; then
        refused=$(grep -m1 -E 'offset commit (failed|refused|did not)' "$SW/B.log" | sed -E 's/.*\): //' | cut -c1-90)
    elif awk -v f="$fault" 'index($0, f) {s = 1} s' "$SW/B.log" | grep -qE '\[reviews\] partitions revoked'; then
        refused="skipped, its partitions revoked first"
    else
        fail_check "B wrote its late batch and logged neither a refused offset commit nor the loss of its partitions (was its commit accepted?)"
    fi
    trace "the zombie's offset commit: ${refused:-accepted}"
    local kv kafka_after
    for kv in $kafka_before; do
        kafka_after=$(committed reviews "${kv%%:*}")
        [ "$kafka_after" -ge "${kv#*:}" ] 2>/dev/null ||
            fail_check "Kafka's committed offset of [${kv%%:*}] went back from ${kv#*:} to $kafka_after after B's late batch"
    done
    # finish fails the scenario if any position moved backwards.
    local moves back
    moves=$(sql "SELECT count(*) FROM rel.position_moves")
    back=$(sql "SELECT count(*) FROM rel.position_moves WHERE new_next < old_next")
    checkpoint "B resumed"
    wait_owners "$GROUP_WAIT_S" reviews A B >/dev/null || fail_check "B did not rejoin the group"
    producer_wait
    assert_scenario_kept_everything
    settle A
    expect_all_alive A B
    finish_running A B
    note "B frozen before writing $late for $(ms "$frozen") (session timeout $SESSION_TIMEOUT_MS ms): A owned every partition after $(ms "$take") and stored past it; after B's late batch, $back of $moves position changes went backwards; its offset commit ${refused:-accepted}; B rejoined"
}

scenario_graceful_stop() {
    scenario_begin graceful_stop reviews app-stats network-metrics
    gen_stream 43 25000 1000 300
    svc_start A
    svc_start B
    producer_start 90 90
    wait_owners "$GROUP_WAIT_S" reviews A B >/dev/null || fail_check "A and B never shared the partitions"
    wait_stable A B || trace "the group did not settle"
    local left_a left_c
    stop_holding_a_batch A
    local out_a=$STOP_MS rc_a=$STOP_RC
    left_a=$(expect_takeover A B | tail -n 1)
    expect_alive B
    checkpoint "A stopped"
    # A second member, stopped under load with no lock in the way, once all
    # three of its pipelines have partitions.
    svc_start C
    wait_owners "$GROUP_WAIT_S" reviews B C >/dev/null || fail_check "B and C never shared the partitions"
    wait_log C 'partitions assigned count=[1-9]' 3 "$GROUP_WAIT_S" || fail_check "C's three pipelines were not all assigned partitions"
    wait_stable B C || trace "the group did not settle"
    local rc out_c
    rc=$(svc_stop C)
    expect_eq "exit code of C after SIGTERM under load" 0 "$rc"
    local rc_c=$rc
    expect_stop_within_shutdown_timeout C
    out_c=$STOP_LOG_MS
    left_c=$(expect_takeover C B | tail -n 1)
    expect_alive B
    checkpoint "C stopped"
    producer_wait
    assert_scenario_kept_everything
    settle B
    expect_alive B
    finish_running B
    note "A (batch in flight): exit ${rc_a} after $(ms "$out_a"), ${left_a}; C (under load): exit ${rc_c} after $(ms "$out_c"), ${left_c}"
}

# SIGTERM while a pipeline has joined its group but has no assignment yet
# (its SyncGroup answer is still on the way): a rolling restart right after
# a start, or a stop during a long rebalance. The mock delays the group's
# SyncGroup answer by 4 s (its coordinator pinned to broker 1) so that the
# signal lands in that window every time: it opens the first election
# (3 s) after E subscribed, the signal comes 2 s into it.
scenario_sigterm_while_joining() {
    scenario_begin sigterm_while_joining reviews
    gen_stream 44 1000 0 0
    produce_all
    assert_scenario_kept_everything
    local sync_delay_ms=4000
    broker_ctl coordinator group "$GROUP_PREFIX.reviews" 1 >/dev/null
    broker_ctl broker-request-errors 1 SyncGroup NO_ERROR:$sync_delay_ms >/dev/null || fail_check "could not delay SyncGroup"
    svc_start E
    local sub wait_ms
    wait_log E '\[reviews\] pipeline started' 1 || fail_check "E's reviews pipeline did not start within ${STALL_S} s"
    sub=$(log_ms E '\[reviews\] pipeline started')
    wait_ms=$((${sub:-$(now_ms)} + FIRST_JOIN_MS + sync_delay_ms / 2 - $(now_ms)))
    [ "$wait_ms" -gt 0 ] && sleep "$(awk -v m="$wait_ms" 'BEGIN {printf "%.3f", m / 1000}')"
    local t0 rc ms
    t0=$(now_ms)
    rc=$(svc_stop E)
    ms=$(($(now_ms) - t0))
    # The signal must have come before the first assignment, or this tested
    # an ordinary stop.
    if grep -qE 'partitions assigned' <(awk '/received (Terminated|Interrupt)/ {exit} {print}' "$SW/E.log"); then
        fail_check "E was assigned partitions before the signal: the stop did not land while it was joining"
    fi
    expect_eq "exit code of E after SIGTERM between joining and its first assignment" 0 "$rc"
    local last
    last=$(grep -vE 'batch size=|dead_letter' "$SW/E.log" | tail -n 1 | cut -c1-160)
    [ "$rc" = 0 ] || trace "E's last words: $last"
    svc_start F
    finish F
    if [ "$rc" = 0 ]; then
        note "E stopped while awaiting its first assignment: exit 0 in ${ms} ms"
    else
        note "E stopped while awaiting its first assignment: exit ${rc} in ${ms} ms (${last#*Z })"
    fi
}
