# kill -9 at every stage of the batch loop, over and over, while a stream of
# more than 50,000 records (three topics; redeliveries; reviews observed up
# to four times, published out of order over different partitions; bad
# records of every kind) is being produced.
#
# Each life of the process ends in one of these ways, in a fixed (seeded)
# order with random timing:
#   before_poll         within 2.5 s of start: before or during the group join
#                       (the mock's first election comes 3 s after a join)
#   random              0.2 to 4 s after the partitions are assigned: anywhere
#                       (decode, write, commit, poll), under load
#   after_db_commit     the test-only fault point SC_TEST_KILL_AFTER_DB_COMMIT=N
#                       (N random): right after the Nth database commit,
#                       before its offsets are committed
#   mid_write           the reviews INSERT blocked behind a lock (taken before
#                       the start): the batch is half written when it dies
#   mid_write_dead_letters  the same, blocked on dead_letter_events
#   after_kafka_commit  right after the Nth batch line (N random, 1 to 4; the
#                       line is logged after the offset commit)
# After each kill, a checkpoint: the committed offsets must not be ahead of
# what the database holds. At the end, no batch whose database COMMIT is
# known (its batch line, or the after_db_commit fault point's) was read again
# by a later life: each life starts at the database's positions.

KILL9_MODES=(before_poll random after_db_commit mid_write random after_kafka_commit
    mid_write_dead_letters random after_db_commit before_poll random mid_write
    after_kafka_commit random after_db_commit random)

rand_secs() { # min max (seconds, 0.1 steps)
    awk -v a="$1" -v b="$2" -v r="$RANDOM" 'BEGIN {printf "%.1f", a + (b - a) * r / 32767}'
}

scenario_kill9() {
    scenario_begin kill9 reviews app-stats network-metrics
    # A killed member stays in its group until its session times out, and
    # the next life waits for that: 3 s sessions (heartbeats every 0.5 s)
    # make a life ~5 s shorter than the suite's 6 s.
    local session=3000
    KILL9_ENV=(STORAGE_SESSION_TIMEOUT_MS=$session STORAGE_RDKAFKA_HEARTBEAT_INTERVAL_MS=500)
    # Each life starts once its predecessor's members are evicted (a session
    # timeout after its death: await_eviction, lib.sh, says why), and joins
    # in rounds of these sessions.
    local join_s
    join_s=$(group_wait_s "$session")
    RANDOM=4242
    gen_stream 11 46000 3000 1000
    # One slice of the stream per life, produced while that life starts and
    # works: every life has a backlog to be killed in the middle of.
    local lives=${#KILL9_MODES[@]} t
    mkdir -p "$SW/chunks"
    for t in $(scenario_topics); do
        split -n "l/$lives" -d -a 3 "$SW/gen/$t.kv" "$SW/chunks/$t."
    done
    local i=0 mode name prev="" rc n sizes=(50 200 500 2000) counts="" producers=""
    for mode in "${KILL9_MODES[@]}"; do
        (
            for t in $(scenario_topics); do
                kcat_produce "$t" <"$SW/chunks/$t.$(printf %03d "$i")" || echo "$t chunk $i" >>"$SW/producer.failed"
            done
        ) &
        producers="$producers $!"
        track $!
        i=$((i + 1))
        name=k$(printf %02d "$i")
        local batch=${sizes[RANDOM % 4]}
        await_eviction "$prev" "$session"
        case $mode in
        before_poll)
            svc_start "$name" "${KILL9_ENV[@]}" STORAGE_MAX_POLL_RECORDS_REVIEWS="$batch"
            sleep "$(rand_secs 0 2.5)"
            ;;
        random)
            svc_start "$name" "${KILL9_ENV[@]}" STORAGE_MAX_POLL_RECORDS_REVIEWS="$batch"
            wait_log "$name" '\[reviews\] partitions assigned' 1 "$join_s" || fail_check "$name: no assignment within $join_s s"
            sleep "$(rand_secs 0.2 4)"
            ;;
        after_db_commit)
            n=$((1 + RANDOM % 8))
            svc_start "$name" "${KILL9_ENV[@]}" STORAGE_MAX_POLL_RECORDS_REVIEWS="$batch" SC_TEST_KILL_AFTER_DB_COMMIT="$n"
            # It joins, then stores batches as long as records come.
            rc=$(svc_wait_progress "$name")
            expect_eq "$name: exit code at the fault point after DB commit $n" 137 "$rc"
            expect_log "$name" 'test fault point: killing the process after the database commit' \
                "$name: died at the fault point"
            ;;
        mid_write | mid_write_dead_letters)
            # The table is locked before the process starts: its first batch
            # that writes there stops in the middle.
            local table=reviews
            [ "$mode" = mid_write_dead_letters ] && table=dead_letter_events
            hold_lock "$table"
            svc_start "$name" "${KILL9_ENV[@]}" STORAGE_MAX_POLL_RECORDS_REVIEWS="$batch"
            wait_blocked "sc-$name" $((join_s + STALL_S)) "$name" || fail_check "$name: no batch caught writing $table"
            ;;
        after_kafka_commit)
            n=$((1 + RANDOM % 4))
            svc_start "$name" "${KILL9_ENV[@]}" STORAGE_MAX_POLL_RECORDS_REVIEWS="$batch"
            wait_log "$name" '\] batch size=' "$n" $((join_s + STALL_S)) ||
                fail_check "$name: fewer than $n batches within $((join_s + STALL_S)) s (a join, then records)"
            ;;
        esac
        if [ "$mode" != after_db_commit ]; then
            rc=$(svc_kill "$name")
            expect_eq "$name: exit code after kill -9 ($mode)" 137 "$rc"
        fi
        [ "$mode" = mid_write ] || [ "$mode" = mid_write_dead_letters ] && release_lock
        trace "$name ($mode, batch $batch) died after $(batches "$name") committed batches"
        counts="$counts$mode "
        checkpoint "after kill $i ($mode)"
        prev=$name
    done
    for n in $producers; do wait "$n" 2>/dev/null || true; done
    [ -f "$SW/producer.failed" ] && fail_check "kcat could not produce: $(xargs <"$SW/producer.failed")"
    assert_scenario_kept_everything
    await_eviction "$prev" "$session"
    svc_start final "${KILL9_ENV[@]}"
    finish final
    local lives_run=() redelivered
    for n in $(seq 1 "$i"); do lives_run+=("k$(printf %02d "$n")"); done
    redelivered=$(redelivered_batches "${lives_run[@]}" final)
    [ "$redelivered" = 0 ] || fail_check "$redelivered batch(es) stored by one life read again by a later one: $(paste -sd';' "$SW/redelivered")"
    note "$i kill -9: $(echo "$counts" | tr ' ' '\n' | grep . | sort | uniq -c | awk 'NF {printf "%s%d %s", s, $1, $2; s = ", "}'); $redelivered redelivered batches"
}

# The crash the database's positions exist for (DESIGN.md, Progress in the
# database): kill -9 right after a batch's database COMMIT, before its offset
# commit (SC_TEST_KILL_AFTER_DB_COMMIT). Kafka's committed offset is then
# behind the database; the next process starts each partition at the
# database's position, so it never reads the killed batch again: none of its
# batches overlaps the killed one, each of the killed batch's partitions
# starts where the database says, right after the killed batch or after the
# batch sent behind it before the kill (DESIGN.md, The batch loop: that one
# went with its COMMIT), and nothing is skipped (the stream has one
# observation per review and no redeliveries, so a skipped row is a record
# read again).
scenario_kill_between_commits() {
    scenario_begin kill_between_commits reviews
    gen_stream 13 6000 0 0 single=1 dup=0
    produce_all
    assert_scenario_kept_everything
    # As kill9: short sessions, so the next process waits less for the dead
    # one's eviction.
    local env=(STORAGE_SESSION_TIMEOUT_MS=3000 STORAGE_RDKAFKA_HEARTBEAT_INTERVAL_MS=500 STORAGE_MAX_POLL_RECORDS_REVIEWS=250)
    svc_start k1 "${env[@]}" SC_TEST_KILL_AFTER_DB_COMMIT=3
    local rc killed r p hi
    rc=$(svc_wait_progress k1)
    expect_eq "k1: exit code at the fault point after DB commit 3" 137 "$rc"
    killed=$(sed -nE 's/.*test fault point: killing the process after the database commit offsets=([^ ]*).*/\1/p' "$SW/k1.log")
    [ -n "$killed" ] || fail_check "k1 did not die at the fault point: no killed batch to look for"
    checkpoint "k1 killed between the commits"
    await_eviction k1 3000
    local -A pos
    for r in $(echo "$killed" | tr ',' ' '); do
        p=${r%%:*}
        p=${p#p}
        hi=${r##*-}
        pos[$p]=$(sql "SELECT next_offset FROM consumer_offsets WHERE topic = '$T_REVIEWS' AND partition = $p")
        # The killed batch, and at most the one batch of 250 sent behind it.
        [ "${pos[$p]:-0}" -ge $((hi + 1)) ] && [ "${pos[$p]}" -le $((hi + 251)) ] ||
            fail_check "the database's position of [$p] after the kill is '${pos[$p]}', not within $((hi + 1))-$((hi + 251)) (the killed batch $r, and at most one batch more)"
    done
    svc_start k2 "${env[@]}"
    finish k2
    for r in $(echo "$killed" | tr ',' ' '); do
        p=${r%%:*}
        p=${p#p}
        expect_log k2 "$T_REVIEWS \[$p\] starts at offset ${pos[$p]}, the database's position(\$| \(Kafka's committed offset [0-9]+ is behind)" \
            "k2 started [$p] at the database's position after the killed batch ($r)"
    done
    local redelivered skipped
    redelivered=$(redelivered_batches k1 k2)
    expect_eq "batches of k1 read again by k2" 0 "$redelivered"
    skipped=$(sed -nE 's/.*\[reviews\] batch size=.* skipped=([0-9]+) .*/\1/p' "$SW/k2.log" | awk '{n += $1} END {print n + 0}')
    expect_eq "rows k2 skipped (a stream without redeliveries)" 0 "$skipped"
    note "killed after the database COMMIT of $killed, before its offset commit: k2 started at the database's position ($(for p in "${!pos[@]}"; do printf '[%s] %s ' "$p" "${pos[$p]}"; done)), $redelivered batches read again, $skipped rows skipped"
}
