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
# what the database holds.

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
    # Each life joins a group its predecessor may still be in (evicted a
    # session timeout after its death), in rounds of these sessions.
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
    local i=0 mode name rc n sizes=(50 200 500 2000) counts="" producers=""
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
    done
    for n in $producers; do wait "$n" 2>/dev/null || true; done
    [ -f "$SW/producer.failed" ] && fail_check "kcat could not produce: $(xargs <"$SW/producer.failed")"
    assert_scenario_kept_everything
    svc_start final "${KILL9_ENV[@]}"
    finish final
    note "$i kill -9: $(echo "$counts" | tr ' ' '\n' | grep . | sort | uniq -c | awk 'NF {printf "%s%d %s", s, $1, $2; s = ", "}')"
}
