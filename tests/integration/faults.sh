#!/usr/bin/env bash
# Faults against the running service (DESIGN.md: The batch loop; Errors; Supervisor, health, shutdown; Operations): PostgreSQL
# restarted or down mid-ingest, failing offset commits, SIGTERM mid-batch, one failed
# pipeline stopping the others, and network-metrics latency during a reviews
# burst. Every "nothing lost" claim first proves the broker dropped nothing
# (assert_broker_kept_everything): a row count can only prove no loss when the
# broker still holds everything that was produced.
#
# One PostgreSQL and one broker for the suite; each test has its own database,
# topics and groups (begin_test).
#
# For development: ONLY_TESTS=REGEX runs only the tests whose name matches;
# KEEP_WORK=1 keeps the work directory (the services' logs).

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

APP=com.example.faults

# ---------------------------------------------------------------------------
# Suite-local helpers.

gen_network_metric() { # analysis_id
    printf '{"package_name":"%s","analysis_id":"%s","analyzed_at":"2026-11-29T12:00:00Z","duration_seconds":30.5,"total_packets":1200,"total_bytes":834000,"unique_hosts":12,"protocols":{"tcp":1000,"udp":200}}\n' \
        "$APP" "$1"
}

new_uuid() { cat /proc/sys/kernel/random/uuid; }

# A test of its own database, topics and groups, with the suite's app.
begin_fault_test() { # name
    begin_test "$1"
    register_apps "$APP"
}

# Sum of the high watermarks of TOPIC's 3 partitions: what the broker holds.
broker_message_count() { # topic
    local p total=0 hi
    for p in 0 1 2; do
        hi=$(broker_ctl watermarks "$1" "$p" | awk '{print $3}')
        total=$((total + hi))
    done
    echo "$total"
}


# Wait until SQL prints a number >= MIN.
wait_for_at_least() { # sql min [seconds]
    local got i
    for i in $(seq 1 $((${3:-60} * 20))); do
        got=$(sql "$1" 2>/dev/null || true)
        [ -n "$got" ] && [ "$got" -ge "$2" ] && return 0
        sleep 0.05
    done
    fail "waited for [$1] to reach $2, last got [$got]"
}

# ---------------------------------------------------------------------------

pg_start
broker_start

# DESIGN.md: Errors: a server restart is transient: the same batch is retried after a
# back-off and a reconnect, never dead-lettered, and the process stays up.
test_a_postgres_restart_mid_ingest_is_retried_without_loss_or_duplicates() {
    begin_fault_test pgrestart
    gen_reviews 0 20000 | produce "$TOPIC_REVIEWS"
    assert_broker_kept_everything "$TOPIC_REVIEWS"
    assert_eq 20000 "$(broker_message_count "$TOPIC_REVIEWS")" "messages the broker holds"

    # The default schedule (1+2+4+8+16 s), the one meant to cover a restart:
    # on a busy machine a restart takes longer than a shortened one.
    svc_start pgrestart STORAGE_DB_RETRY_BASE_MS=1000 STORAGE_DB_RETRY_MAX_ATTEMPTS=5 \
        STORAGE_MAX_POLL_RECORDS_REVIEWS=100
    wait_for_at_least "SELECT count(*) FROM reviews" 1000
    # Catch a batch in the middle, then restart: sent whole, waiting for its
    # result inside PostgreSQL, so that the restart fails the wait for the
    # batch's result (finish_batch), not its sending. Its rows written (a
    # COPY straight into the table: the batches before it inserted every
    # row), it waits to raise its positions, consumer_offsets being locked:
    # a session of the service waits for that lock while holding the one
    # its rows took on reviews. (With reviews locked instead, the batch's
    # COPY waits to begin and the restart fails it while it is being sent.)
    hold_lock consumer_offsets
    wait_for_sql "SELECT count(*) FROM pg_locks w JOIN pg_stat_activity a USING (pid) JOIN pg_locks h USING (pid)
                   WHERE a.application_name = '$SVC_SESSIONS' AND a.wait_event_type = 'Lock'
                     AND NOT w.granted AND w.relation = 'consumer_offsets'::regclass
                     AND h.granted AND h.relation = 'reviews'::regclass AND h.mode = 'RowExclusiveLock'" 1 "$STALL_S"
    local before
    before=$(sql "SELECT count(*) FROM reviews")
    if [ "$before" -eq 0 ] || [ "$before" -ge 20000 ]; then
        fail "ingest not under way at the restart: $before rows"
    fi
    pg_ctl_ restart -m fast >/dev/null
    wait "$LOCKER_PID" 2>/dev/null || true
    LOCKER_PID=

    # Every record consumed (its offsets committed to Kafka after its
    # COMMIT), then every one stored: a batch taken for stored after the
    # failed wait would be committed without its rows.
    wait_all_committed "$(group_of reviews)" "$TOPIC_REVIEWS" 60
    assert_eq 20000 "$(sql "SELECT count(*) FROM reviews")" "rows once every offset is committed"
    assert_running pgrestart
    assert_contains "$(cat "$(svc_log pgrestart)")" "transient database error, retrying the same batch" \
        "the restart is logged as a transient retry"
    # Ingest went on after the retry: batches were logged after it.
    [ "$(awk '/transient database error/ {seen = 1} seen && /\[reviews\] batch size=/ {n++} END {print n + 0}' \
        "$(svc_log pgrestart)")" -gt 0 ] || fail "no batch after the transient retry"
    assert_eq "20000 0 19999" \
        "$(sql "SELECT count(*), min(substr(review_id, 3)::int), max(substr(review_id, 3)::int) FROM reviews" | tr '|' ' ')" \
        "rows, review id range"
    # The batch retried after the restart was not also stored before it.
    assert_each_offset_stored_once reviews "$TOPIC_REVIEWS" pgrestart
    assert_eq 0 "$(sql "SELECT count(*) FROM dead_letter_events")" "dead letters"
    assert_eq 20000 "$(batch_sum pgrestart reviews inserted)" "rows reported inserted"
    assert_eq 0 "$(log_count pgrestart 'pipeline failed')" "failed pipelines"
    rc=$(svc_stop pgrestart)
    assert_eq 0 "$rc" "exit status after SIGTERM"
}

# DESIGN.md: The batch loop: a failed offset commit is a warning (the rows are durable) and the
# pipeline goes on; commit_failure_limit failures in a row are a livelock:
# exit 1.
test_failing_offset_commits_warn_then_a_commit_livelock_exits_1() {
    begin_fault_test commit
    trap 'end_test broker_ctl clear-request-errors OffsetCommit' EXIT
    local i

    # Phase 1: four failing commits, limit 5: warnings, progress, still up.
    svc_start commit1 STORAGE_COMMIT_FAILURE_LIMIT=5
    wait_for_log commit1 '\[reviews\] partitions assigned' 1
    broker_ctl request-errors OffsetCommit GROUP_AUTHORIZATION_FAILED GROUP_AUTHORIZATION_FAILED \
        GROUP_AUTHORIZATION_FAILED GROUP_AUTHORIZATION_FAILED >/dev/null
    # One message at a time, so that each batch makes one commit.
    for i in 1 2 3 4 5 6; do
        gen_reviews "$i" 1 c | produce "$TOPIC_REVIEWS" -p 0
        wait_for_log commit1 '\[reviews\] batch size=' "$i"
    done
    assert_eq 6 "$(sql "SELECT count(*) FROM reviews")" "rows stored despite failing commits"
    assert_eq 4 "$(log_count commit1 'offset commit failed \([0-9]/5 in a row')" "commit warnings"
    assert_eq 1 "$(log_count commit1 'offset commit failed \(4/5 in a row')" "fourth failure in a row"
    assert_eq 0 "$(log_count commit1 'offset commit failed \(5/5')" "a fifth failure"
    # The successful commits reset the count: one more failure is the first
    # in a row again, not the fifth.
    broker_ctl request-errors OffsetCommit GROUP_AUTHORIZATION_FAILED >/dev/null
    for i in 7 8; do
        gen_reviews "$i" 1 c | produce "$TOPIC_REVIEWS" -p 0
        wait_for_log commit1 '\[reviews\] batch size=' "$i"
    done
    assert_eq 2 "$(log_count commit1 'offset commit failed \(1/5 in a row')" "failures counted from 1 after a success"
    assert_eq 5 "$(log_count commit1 'offset commit failed')" "commit warnings"
    assert_eq 8 "$(sql "SELECT count(*) FROM reviews")" "rows stored"
    assert_running commit1
    rc=$(svc_stop commit1)
    assert_eq 0 "$rc" "exit status after SIGTERM"

    # Phase 2, same group, limit 3: the commits after the failures moved the
    # offsets past all eight messages, so nothing is redelivered. Three failing
    # commits in a row are a livelock.
    svc_start commit2 STORAGE_COMMIT_FAILURE_LIMIT=3
    wait_for_log commit2 '\[reviews\] partitions assigned' 1
    broker_ctl request-errors OffsetCommit GROUP_AUTHORIZATION_FAILED GROUP_AUTHORIZATION_FAILED \
        GROUP_AUTHORIZATION_FAILED GROUP_AUTHORIZATION_FAILED >/dev/null
    for i in 11 12; do
        gen_reviews "$i" 1 c | produce "$TOPIC_REVIEWS" -p 0
        wait_for_log commit2 '\[reviews\] batch size=' $((i - 10))
    done
    gen_reviews 13 1 c | produce "$TOPIC_REVIEWS" -p 0
    rc=$(svc_wait commit2 30)
    assert_eq 1 "$rc" "exit status after the third failing commit"
    broker_ctl clear-request-errors OffsetCommit >/dev/null
    local log
    log=$(cat "$(svc_log commit2)")
    assert_contains "$log" "commit livelock"
    assert_contains "$log" "offset commit failed (3/3 in a row"
    assert_contains "$log" "pipeline reviews failed"
    assert_broker_kept_everything "$TOPIC_REVIEWS"
    assert_eq 11 "$(broker_message_count "$TOPIC_REVIEWS")" "messages the broker holds"
    assert_eq 11 "$(sql "SELECT count(*) FROM reviews")" "rows stored (a failed commit loses no data)"
    assert_eq 0 "$(batch_sum commit2 reviews skipped)" "rows redelivered after phase 1"
    # Phase 2 starts where phase 1's last successful commit left p0.
    assert_eq "p0:8-8" "$(review_batches commit2 | head -n 1 | sed -nE 's/.* offsets=([^ ]*) .*/\1/p')" \
        "first batch of phase 2"
}

# A commit refused as if the group were rebalancing, with no rebalance to
# end it and no record after it: the offsets must still reach Kafka (a held
# commit is tried again after a session timeout; an idle pipeline commits
# what is left behind), or the group's offset stays behind rows stored long
# ago and lag never returns to 0.
test_offsets_of_a_refused_commit_reach_kafka_while_the_pipeline_is_idle() {
    begin_fault_test held
    trap 'end_test broker_ctl clear-request-errors OffsetCommit' EXIT
    svc_start held1
    wait_for_log held1 '\[reviews\] partitions assigned' 1
    broker_ctl request-errors OffsetCommit REBALANCE_IN_PROGRESS >/dev/null
    gen_reviews 1 5 h | produce "$TOPIC_REVIEWS" -p 1
    wait_for_log held1 '\[reviews\] batch size=5 ' 1
    assert_eq 1 "$(log_count held1 'offset commit refused while the group rebalances')" "refusals logged"
    # Nothing else arrives; the session timeout is 6 s.
    wait_committed "$GROUP_PREFIX.reviews" "$TOPIC_REVIEWS" 1 5 20
    assert_eq 1 "$(log_count held1 'offset commits resumed')" "commits resumed"
    assert_eq 5 "$(sql "SELECT count(*) FROM reviews")" "rows stored"
    rc=$(svc_stop held1)
    assert_eq 0 "$rc" "exit status after SIGTERM"
}

# Start NAME on COUNT reviews of partition 0, in batches of 100 with a 1 s
# statement timeout (an attempt's budget: 2 s), then make every offset
# commit take 2.5 s: the group's coordinator is broker 1, slowed, and the
# partition's leader another. The test's trap sets broker 1 back.
start_with_slow_offset_commits() { # name count
    broker_ctl coordinator group "$GROUP_PREFIX.reviews" 1 >/dev/null
    broker_ctl leader "$TOPIC_REVIEWS" 0 2 >/dev/null
    gen_reviews 1 "$2" s | produce "$TOPIC_REVIEWS" -p 0
    svc_start "$1" STORAGE_PIPELINES=reviews STORAGE_MAX_POLL_RECORDS_REVIEWS=100 STORAGE_DB_STATEMENT_TIMEOUT_MS=1000
    wait_for_log "$1" '\[reviews\] partitions assigned' 1
    broker_ctl broker-rtt 1 2500 >/dev/null
}

# DESIGN.md: The batch loop. The next batch is sent to PostgreSQL as soon as
# the one before it is committed there, and waited for only after that one's
# offsets are committed to Kafka: the wait has the attempt's own deadline,
# not one that ran while the Kafka commit did. With offset commits slower
# than the attempt's budget (2.5 s against 1 s + 1 s), every batch sent
# early was declared timed out, its connection cancelled and the batch
# retried, though PostgreSQL had committed it: counted inserted=0
# skipped=100, 8 s a batch instead of 3.
test_a_batch_sent_early_is_not_timed_out_by_a_slow_offset_commit() {
    begin_fault_test slowcommit
    trap 'end_test broker_ctl broker-rtt 1 0' EXIT
    start_with_slow_offset_commits slow 500
    wait_committed "$GROUP_PREFIX.reviews" "$TOPIC_REVIEWS" 0 500 90
    broker_ctl broker-rtt 1 0 >/dev/null
    assert_eq 500 "$(sql "SELECT count(*) FROM reviews")" "rows stored"
    assert_eq 0 "$(log_count slow 'did not answer before the deadline')" "attempts declared timed out"
    assert_eq "500 0" "$(batch_sum slow reviews inserted) $(batch_sum slow reviews skipped)" \
        "every review counted inserted once, none skipped"
    stop_clean slow
}

# The same slow offset commits, and a stop while batches flow: the stop
# finishes the batch being written and the one sent early behind it, and
# commits both batches' offsets; none is said to be left unstored. (With
# the early-sent batch declared timed out, a stop landed in its back-off
# and logged "left uncommitted, it will be redelivered" for a batch
# PostgreSQL held with its position.)
test_a_stop_with_slow_offset_commits_finishes_and_commits_the_batches_sent() {
    begin_fault_test slowstop
    trap 'end_test broker_ctl broker-rtt 1 0' EXIT
    start_with_slow_offset_commits slowstop 1000
    wait_for_log slowstop '\[reviews\] batch size=' 2 60
    assert_eq 0 "$(svc_stop slowstop 60)" "exit status of the stop"
    broker_ctl broker-rtt 1 0 >/dev/null
    assert_eq 0 "$(log_count slowstop 'stop requested during the back-off|did not answer before the deadline')" \
        "batches said to be left or timed out"
    local stored position
    stored=$(sql "SELECT count(*) FROM reviews")
    position=$(sql "SELECT next_offset FROM consumer_offsets WHERE group_id = '$GROUP_PREFIX.reviews' AND partition = 0")
    assert_eq "$stored" "$position" "the database's position covers exactly the rows stored"
    assert_eq "$stored" "$(broker_committed "$GROUP_PREFIX.reviews" "$TOPIC_REVIEWS" 0)" \
        "Kafka's committed offset: every stored batch's offsets committed at the stop"
    assert_eq "$stored" "$(batch_sum slowstop reviews inserted)" "every stored review counted, each once"
}

# Writers that share keys (two members, a review observed on two
# partitions) must lock those rows in one order, or they deadlock and a
# batch is rolled back and retried (40P01). The service upserts in
# natural-key order: here another transaction holds d-1 and then takes d-2,
# in key order, while the service's batch carries d-2 before d-1. The
# service waits for d-1 holding nothing, so neither side deadlocks. The
# other transaction takes d-2 only once the service waits on it (a
# session of the service blocked by it, in pg_locks), and fails if that
# never happens within STALL_S: without that wait there is no order to test.
# The batch must be written by the upsert, whose order is under test: a
# batch predicted new (DESIGN.md: The write path) is COPYed straight into
# the table instead, waits at the uniqueness check and falls back to the
# upsert once the other transaction is gone, so no order would decide
# anything. The batch before it is one dead letter (a batch with dead
# letters takes the upsert): it inserts nothing, so the next batch is not
# predicted new, and skips nothing, so it is not probed either. The debug
# log shows no batch COPYed and refused (the fall-back's line), and the
# batch's line its two keys skipped by the upsert, none by COPY or probe.
test_a_batch_locks_its_rows_in_key_order_so_sharing_writers_do_not_deadlock() {
    begin_fault_test order
    svc_start order1 STORAGE_LOG_LEVEL=debug
    gen_reviews 1 2 d | produce "$TOPIC_REVIEWS" -p 0
    wait_for_sql "SELECT count(*) FROM reviews" 2 30
    printf 'not json\n' | produce "$TOPIC_REVIEWS" -p 0
    wait_for_log order1 '\[reviews\] batch size=1 inserted=0 updated=0 skipped=0 dead_lettered=1 ' 1
    PGAPPNAME=$LOCKER_APP psql "$DB" -X -q -v ON_ERROR_STOP=1 -v stall_s="$STALL_S" \
        >"$WORK/order-locker.out" 2>&1 <<'SQL' &
BEGIN;
SELECT set_config('test.stall_s', :'stall_s', true) \g /dev/null
UPDATE reviews SET content = content WHERE review_id = 'd-1';
DO $$
DECLARE
    waited boolean := false;
    until timestamptz := clock_timestamp() + current_setting('test.stall_s')::int * interval '1 s';
BEGIN
    WHILE NOT waited AND clock_timestamp() < until LOOP
        PERFORM pg_sleep(0.05);
        PERFORM pg_stat_clear_snapshot();
        waited := EXISTS (SELECT 1 FROM pg_stat_activity
                          WHERE application_name = 'storage-consumer' AND wait_event_type = 'Lock'
                            AND pg_backend_pid() = ANY (pg_blocking_pids(pid)));
    END LOOP;
    IF NOT waited THEN
        RAISE EXCEPTION 'no session of the service waited on the row this transaction holds';
    END IF;
END $$;
UPDATE reviews SET content = content WHERE review_id = 'd-2';
COMMIT;
SQL
    LOCKER_PID=$!
    wait_for_sql "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
                   WHERE a.application_name = '$LOCKER_APP' AND l.locktype = 'transactionid' AND l.granted" 1 10
    gen_reviews 1 2 d | tac | produce "$TOPIC_REVIEWS" -p 0
    local rc=0
    wait "$LOCKER_PID" || rc=$?
    LOCKER_PID=
    assert_eq 0 "$rc" "the other transaction's exit status ($(cat "$WORK/order-locker.out"))"
    wait_for_log order1 '\[reviews\] batch size=' 3
    assert_eq 0 "$(log_count order1 '40P01|deadlock')" "deadlocks the service met"
    assert_eq "size=2 inserted=0 updated=0 skipped=2 skipped_by_probe=0 inserted_by_copy=0" \
        "$(review_batches order1 | tail -n 1 | grep -oE '(size|inserted|updated|skipped|skipped_by_probe|inserted_by_copy)=[0-9]+' | xargs)" \
        "the batch's counters: both keys skipped by the upsert"
    assert_eq 0 "$(log_count order1 'a batch predicted new was refused by the table')" \
        "batches COPYed straight into the table, then written by the upsert"
    assert_eq 2 "$(sql "SELECT count(*) FROM reviews")" "rows"
    rc=$(svc_stop order1)
    assert_eq 0 "$rc" "exit status after SIGTERM"
}

# DESIGN.md: Supervisor, health, shutdown: SIGTERM is seen at a poll boundary; the in-flight batch is
# finished and committed, and the process exits 0 within the timeout.
test_sigterm_mid_batch_commits_the_batch_and_exits_0() {
    begin_fault_test sigterm
    local p
    # Review s-P-I is at offset I of partition P. First 500 per partition,
    # stored while nothing is in the way.
    for p in 0 1 2; do
        gen_reviews 0 500 "s-$p" | produce "$TOPIC_REVIEWS" -p "$p"
    done
    # A stop that fits 10 s: a 0.2 s poll, a 5 s database attempt, a 2 s
    # commit and 2 s to leave the group.
    svc_start sigterm1 STORAGE_MAX_POLL_RECORDS_REVIEWS=200 STORAGE_SHUTDOWN_TIMEOUT_SECONDS=10 \
        STORAGE_DB_STATEMENT_TIMEOUT_MS=4000 STORAGE_COMMIT_TIMEOUT_MS=2000
    wait_for_sql "SELECT count(*) FROM reviews" 1500
    # Then 500 more per partition with the table locked: the next batch
    # stops in the middle, on its INSERT, and the signal comes then.
    hold_lock reviews
    for p in 0 1 2; do
        gen_reviews 500 500 "s-$p" | produce "$TOPIC_REVIEWS" -p "$p"
    done
    assert_broker_kept_everything "$TOPIC_REVIEWS"
    assert_eq 3000 "$(broker_message_count "$TOPIC_REVIEWS")" "messages the broker holds"
    wait_blocked || fail "no batch blocked on the lock"
    local t0 rc elapsed
    t0=$(now_ms)
    svc_signal sigterm1 TERM
    sleep 1
    # Still finishing the blocked batch, not gone.
    assert_running sigterm1
    release_lock
    rc=$(svc_wait sigterm1 15)
    elapsed=$(($(now_ms) - t0))
    assert_eq 0 "$rc" "exit status after SIGTERM mid-batch"
    [ "$elapsed" -lt 10000 ] || fail "exit took $elapsed ms, over STORAGE_SHUTDOWN_TIMEOUT_SECONDS=10"
    assert_eq 3 "$(log_count sigterm1 'pipeline stopped result=clean')" "pipelines stopped cleanly"
    # The batch in flight at the signal was finished and logged.
    [ "$(awk '/received Terminated/ {seen = 1} seen && /\[reviews\] batch size=/ {n++} END {print n + 0}' \
        "$(svc_log sigterm1)")" -eq 1 ] || fail "no batch (or more than one) finished after the signal"

    # Every record of every logged batch is stored, and nothing else.
    local ranges logged stored
    ranges=$(review_batches sigterm1 | sed -nE 's/.* offsets=([^ ]*) .*/\1/p' | tr ',' '\n')
    logged=$(echo "$ranges" | awk -F'[p:-]' '{n += $4 - $3 + 1} END {print n + 0}')
    stored=$(sql "SELECT count(*) FROM reviews")
    assert_eq "$(batch_sum sigterm1 reviews size)" "$logged" "records in the logged offset ranges"
    assert_eq "$logged" "$stored" "rows stored vs records in the logged batches"
    local values
    values=$(echo "$ranges" | awk -F'[p:-]' '{printf "%s(%d,%d,%d)", (NR > 1 ? "," : ""), $2, $3, $4}')
    assert_eq "$logged" "$(sql "SELECT count(*) FROM reviews r JOIN (VALUES $values) AS b(p, lo, hi)
                                 ON r.review_id LIKE 's-' || b.p || '-%'
                                AND substr(r.review_id, 5)::int BETWEEN b.lo AND b.hi")" \
        "logged records found in the table"
    # Where each partition stopped in the first run.
    local next
    next=$(echo "$ranges" | awk -F'[p:-]' '{if ($4 + 1 > m[$2]) m[$2] = $4 + 1} END {for (p = 0; p < 3; p++) printf "p%d:%d ", p, m[p] + 0}')

    # Same group again: the committed offsets cover every logged batch, so
    # nothing is redelivered and every row comes exactly once.
    svc_start sigterm2 STORAGE_MAX_POLL_RECORDS_REVIEWS=200
    wait_for_sql "SELECT count(*) FROM reviews" 3000 60
    rc=$(svc_stop sigterm2)
    assert_eq 0 "$rc" "exit status of the restarted service"
    assert_eq 0 "$(batch_sum sigterm2 reviews skipped)" "rows redelivered after the clean stop"
    assert_eq $((3000 - stored)) "$(batch_sum sigterm2 reviews size)" "records delivered after the restart"
    assert_eq $((3000 - stored)) "$(batch_sum sigterm2 reviews inserted)" "rows inserted after the restart"
    local resumed
    resumed=$(review_batches sigterm2 | sed -nE 's/.* offsets=([^ ]*) .*/\1/p' | tr ',' '\n' |
        awk -F'[p:-]' '{if (!($2 in m) || $3 < m[$2]) m[$2] = $3} END {for (p = 0; p < 3; p++) printf "p%d:%d ", p, (p in m) ? m[p] : 1000}')
    assert_eq "$next" "$resumed" "first offset per partition after the restart"
    assert_eq 3000 "$(sql "SELECT count(*) FROM reviews")" "rows"
    assert_each_offset_stored_once reviews "$TOPIC_REVIEWS" sigterm1 sigterm2
}

# A stop that comes before the group assigned anything: each pipeline waits
# for its first assignment (half the shutdown timeout), then leaves its
# consumer undestroyed (librdkafka 2.0.2 aborts the process when such a
# consumer is destroyed) and records it so that it stays reachable. No broker
# answers here, so all three pipelines reach that point together; their
# records must not trample each other (the ThreadSanitizer build, make tsan,
# reports it if they do) and the stop is clean.
test_all_pipelines_stopped_before_any_assignment_keep_their_consumers_and_exit_0() {
    begin_test unassigned
    # Nothing listens on port 1: connections are refused, no group is ever
    # joined. A stop that fits 10 s: a 0.2 s poll, a 3 s database attempt,
    # a 2 s commit and 2 s to leave the group.
    svc_start unassigned1 STORAGE_KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:1 STORAGE_SHUTDOWN_TIMEOUT_SECONDS=10 \
        STORAGE_DB_STATEMENT_TIMEOUT_MS=2000 STORAGE_COMMIT_TIMEOUT_MS=2000
    wait_for_log unassigned1 'pipeline started' 3
    rc=$(svc_stop unassigned1 30)
    assert_eq 0 "$rc" "exit status after SIGTERM before any assignment"
    assert_eq 3 "$(log_count unassigned1 'consumer closed before the group assigned it anything')" \
        "consumers left undestroyed"
    assert_eq 3 "$(log_count unassigned1 'pipeline stopped result=clean')" "pipelines stopped cleanly"
    assert_contains "$(cat "$(svc_log unassigned1)")" "stopped exit=0"
    no_sanitizer_report "$(svc_log unassigned1)"
}

# DESIGN.md: Guarantees (guarantee 4) and 11: one failed pipeline stops all of them and the
# process exits 1, naming the failed pipeline.
test_a_failed_pipeline_stops_the_others_and_exits_1() {
    begin_fault_test failed
    svc_start failed1
    wait_for_log failed1 'partitions assigned' 3
    # The other pipelines are working.
    gen_reviews 0 10 | produce "$TOPIC_REVIEWS"
    wait_for_sql "SELECT count(*) FROM reviews" 10
    sql "DROP TABLE network_metrics"
    gen_network_metric "$(new_uuid)" | produce "$TOPIC_NETWORK_METRICS"
    rc=$(svc_wait failed1 30)
    assert_eq 1 "$rc" "exit status"
    local log
    log=$(cat "$(svc_log failed1)")
    assert_contains "$log" "[network-metrics] pipeline failed: database error"
    assert_contains "$log" "pipeline network-metrics failed"
    assert_contains "$log" "[network-metrics] pipeline stopped result=failed"
    assert_contains "$log" "[reviews] pipeline stopped result=clean"
    assert_contains "$log" "[app-stats] pipeline stopped result=clean"
    assert_contains "$log" "stopped exit=1"
}

# A pipeline that can never consume is a failed pipeline, not a warning: its
# topic does not exist (after a grace, in case it is being created), it may
# not read its topic, or it may not use its group. The ERROR names the topic
# (and the group), the others are stopped, the process exits 1.
#
# The test broker would create a topic a consumer names; `topic-error` makes
# its Metadata answers say "unknown topic" (or "not authorized") instead, as
# a broker with auto-creation off (or with ACLs) does.

# The test's reviews topic is TOPIC, and the broker's Metadata answers for
# it carry ERROR until the test ends.
reviews_topic_answering() { # topic error
    TOPIC_REVIEWS=$1
    trap "end_test broker_ctl topic-error $1 NO_ERROR" EXIT
    broker_ctl topic-error "$TOPIC_REVIEWS" "$2" >/dev/null
}

test_a_pipeline_whose_topic_does_not_exist_fails_after_a_grace_and_stops_all() {
    begin_fault_test notopic
    reviews_topic_answering reviews-missing-topic UNKNOWN_TOPIC_OR_PART
    svc_start notopic1
    local warning="\\[reviews\\] topic $TOPIC_REVIEWS does not exist .*the pipeline fails unless it appears within [0-9]+ s"
    wait_for_log notopic1 "$warning" 1 20
    # The other pipelines work meanwhile.
    gen_network_metric "$(new_uuid)" | produce "$TOPIC_NETWORK_METRICS"
    wait_for_sql "SELECT count(*) FROM network_metrics" 1
    # A topic may be created moments after the service starts: the failure
    # comes the grace the warning names after it, not sooner.
    local grace_s waited_ms
    grace_s=$(grep -m1 -oE 'fails unless it appears within [0-9]+ s' "$(svc_log notopic1)" | grep -oE '[0-9]+')
    rc=$(svc_wait notopic1 $((grace_s + STALL_S)))
    assert_eq 1 "$rc" "exit status"
    waited_ms=$(($(log_ms notopic1 'error \[reviews\] pipeline failed') - $(log_ms notopic1 "$warning")))
    [ "$waited_ms" -ge $((grace_s * 1000)) ] || fail "failed $waited_ms ms after the warning: less than its grace of $grace_s s"
    local log
    log=$(cat "$(svc_log notopic1)")
    assert_contains "$log" "error [reviews] pipeline failed: Kafka consumer error: topic $TOPIC_REVIEWS does not exist" "the ERROR names the topic"
    assert_contains "$log" "pipeline reviews failed" "the supervisor names the pipeline"
    assert_contains "$log" "[app-stats] pipeline stopped result=clean"
    assert_contains "$log" "[network-metrics] pipeline stopped result=clean"
    assert_contains "$log" "stopped exit=1"
    no_sanitizer_report "$(svc_log notopic1)"
}

# The grace (the warning says how long) counts from the warning; the topic
# appears within it, the service says it saw it (the grace is over), and
# it is still consuming once the grace would have run out, plus a recheck.
test_a_topic_created_during_the_grace_is_consumed() {
    begin_fault_test latetopic
    reviews_topic_answering reviews-late-topic UNKNOWN_TOPIC_OR_PART
    svc_start late1 STORAGE_PIPELINES=reviews
    local warning="\\[reviews\\] topic $TOPIC_REVIEWS does not exist .*the pipeline fails unless it appears within [0-9]+ s"
    wait_for_log late1 "$warning" 1 20
    local grace_s warned_ms
    grace_s=$(grep -m1 -oE 'fails unless it appears within [0-9]+ s' "$(svc_log late1)" | grep -oE '[0-9]+')
    warned_ms=$(log_ms late1 "$warning")
    # "Created" now: the broker knows it from here on.
    broker_ctl topic-error "$TOPIC_REVIEWS" NO_ERROR >/dev/null
    [ $(($(now_ms) - warned_ms)) -lt $((grace_s * 1000)) ] || fail "the topic was created after the grace of $grace_s s"
    gen_reviews 0 20 | produce "$TOPIC_REVIEWS"
    wait_for_sql "SELECT count(*) FROM reviews" 20 40
    # The missing topic is forgotten: seen again, or assigned.
    wait_for_log late1 "\\[reviews\\] (topic $TOPIC_REVIEWS exists now|partitions assigned)"
    # Past the grace, and past the recheck (2 s) that would end it.
    wait_until_ms $((warned_ms + grace_s * 1000 + 2000))
    gen_reviews 20 1 | produce "$TOPIC_REVIEWS"
    wait_for_sql "SELECT count(*) FROM reviews" 21 40
    assert_running late1
    rc=$(svc_stop late1)
    assert_eq 0 "$rc" "exit status after SIGTERM"
    assert_eq 0 "$(log_count late1 'pipeline failed')" "failures"
}

test_a_pipeline_not_authorized_to_read_its_topic_fails_and_stops_all() {
    begin_fault_test topicacl
    broker_ctl topic-create reviews-denied-topic 3 >/dev/null
    reviews_topic_answering reviews-denied-topic TOPIC_AUTHORIZATION_FAILED
    svc_start topicacl1
    rc=$(svc_wait topicacl1 30)
    assert_eq 1 "$rc" "exit status"
    local log
    log=$(cat "$(svc_log topicacl1)")
    assert_contains "$log" "error [reviews] pipeline failed: Kafka consumer error: not authorized to read topic $TOPIC_REVIEWS" "the ERROR names the topic"
    assert_contains "$log" "pipeline reviews failed" "the supervisor names the pipeline"
    assert_contains "$log" "[app-stats] pipeline stopped result=clean"
    assert_contains "$log" "stopped exit=1"
    no_sanitizer_report "$(svc_log topicacl1)"
}

test_a_pipeline_not_authorized_for_its_group_fails_and_stops_all() {
    begin_fault_test groupacl
    trap 'end_test broker_ctl clear-request-errors FindCoordinator' EXIT
    # A broker answers every FindCoordinator of a group the client may not
    # use with GROUP_AUTHORIZATION_FAILED; a few answers are enough here (the
    # first one decides). Nothing else may ask for a coordinator meanwhile:
    # one pipeline only, and no `committed` queries.
    broker_ctl request-errors FindCoordinator GROUP_AUTHORIZATION_FAILED GROUP_AUTHORIZATION_FAILED \
        GROUP_AUTHORIZATION_FAILED GROUP_AUTHORIZATION_FAILED GROUP_AUTHORIZATION_FAILED >/dev/null
    svc_start groupacl1 STORAGE_PIPELINES=reviews
    rc=$(svc_wait groupacl1 30)
    broker_ctl clear-request-errors FindCoordinator >/dev/null
    assert_eq 1 "$rc" "exit status"
    local log
    log=$(cat "$(svc_log groupacl1)")
    assert_contains "$log" "error [reviews] pipeline failed: Kafka consumer error: not authorized to use consumer group $GROUP_PREFIX.reviews (topic $TOPIC_REVIEWS)" "the ERROR names the group and the topic"
    assert_contains "$log" "pipeline reviews failed" "the supervisor names the pipeline"
    assert_contains "$log" "stopped exit=1"
    no_sanitizer_report "$(svc_log groupacl1)"
}

# DESIGN.md: Errors: a partition librdkafka no longer fetches is a failed pipeline. After a
# burst of leader changes librdkafka 2.0.2 can leave a partition on a broker
# that is no longer its leader: every Fetch is refused with
# NOT_LEADER_FOR_PARTITION and the application hears nothing, for good.
# Here every Fetch is refused that way (the leader still answers ListOffsets,
# as in that failure): the records wait on the leader, the queue stays
# empty, and after STORAGE_FETCH_STALL_SECONDS the pipeline fails naming
# the partition; the restart reads on from the database's position. The
# partitions with nothing waiting are not named.
test_a_partition_librdkafka_stopped_fetching_fails_the_pipeline_and_the_restart_reads_it() {
    begin_fault_test stall
    trap 'end_test broker_ctl clear-request-errors Fetch' EXIT
    svc_start stall1 STORAGE_PIPELINES=reviews STORAGE_FETCH_STALL_SECONDS=5
    wait_for_log stall1 '\[reviews\] partitions assigned' 1
    gen_reviews 0 5 s | produce "$TOPIC_REVIEWS" -p 0
    wait_for_sql "SELECT count(*) FROM reviews" 5 30
    # Refusals for minutes (each broker's fetcher backs off 0.5 s after
    # one), 150 to a command line.
    local i
    for i in 1 2 3 4; do
        # shellcheck disable=SC2046
        broker_ctl request-errors Fetch $(printf 'NOT_LEADER_FOR_PARTITION %.0s' $(seq 1 150)) >/dev/null ||
            fail "could not inject Fetch errors"
    done
    sleep 1
    gen_reviews 5 7 s | produce "$TOPIC_REVIEWS" -p 0
    local t0 elapsed
    t0=$(now_ms)
    rc=$(svc_wait stall1 40)
    elapsed=$(($(now_ms) - t0))
    assert_eq 1 "$rc" "exit status"
    [ "$elapsed" -ge 5000 ] || fail "failed after $elapsed ms, before STORAGE_FETCH_STALL_SECONDS=5"
    assert_eq 5 "$(sql "SELECT count(*) FROM reviews")" "rows stored before the fetcher stalled"
    local log
    log=$(cat "$(svc_log stall1)")
    assert_eq 1 "$(log_count stall1 "error \[reviews\] pipeline failed: Kafka consumer error: $TOPIC_REVIEWS \[0\]: no record fetched for [0-9]+ s while its leader holds 7 record\(s\) past this member's position 5 ")" \
        "ERRORs naming the partition"
    assert_eq 0 "$(log_count stall1 "$TOPIC_REVIEWS \[[12]\]: no record fetched")" "partitions with nothing waiting named"
    assert_contains "$log" "stopped exit=1"
    no_sanitizer_report "$(svc_log stall1)"

    broker_ctl clear-request-errors Fetch >/dev/null
    svc_start stall2 STORAGE_PIPELINES=reviews STORAGE_FETCH_STALL_SECONDS=5
    wait_for_sql "SELECT count(*) FROM reviews" 12 60
    assert_broker_kept_everything "$TOPIC_REVIEWS"
    assert_eq 12 "$(broker_message_count "$TOPIC_REVIEWS")" "messages the broker holds"
    rc=$(svc_stop stall2)
    assert_eq 0 "$rc" "exit status after SIGTERM"
    assert_eq 0 "$(log_count stall2 'no record fetched')" "a stall reported after the restart"
}

# The other way a partition's end stays past the position with nothing
# coming, which is no stall: retention deleted records before they were
# fetched and librdkafka, with STORAGE_AUTO_OFFSET_RESET=latest, reset the
# fetch to the end. The position stays below the partition's first offset
# until the next record; the pipeline must not fail for that. The batch is
# held behind a lock while 6.3 MB arrive on partition 0 (more than the test
# broker keeps: 5 MiB), and a 64 KiB queue keeps librdkafka from fetching
# them all first.
test_records_retention_deleted_before_a_reset_to_latest_are_no_stalled_fetch() {
    begin_fault_test resetlatest
    svc_start rl1 STORAGE_PIPELINES=reviews STORAGE_AUTO_OFFSET_RESET=latest STORAGE_FETCH_STALL_SECONDS=3 \
        STORAGE_RDKAFKA_QUEUED_MAX_MESSAGES_KBYTES=64
    wait_for_log rl1 '\[reviews\] partitions assigned' 1
    gen_reviews 0 3 l | produce "$TOPIC_REVIEWS" -p 0
    wait_for_sql "SELECT count(*) FROM reviews" 3 30
    hold_lock reviews
    awk -v app="$APP" 'BEGIN {
        pad = sprintf("%7000s", ""); gsub(/ /, "x", pad)
        for (i = 3; i < 903; i++)
            printf "{\"package_name\":\"%s\",\"review_id\":\"l-%d\",\"user_name\":\"user %d\",\"content\":\"%s\",\"score\":1,\"thumbs_up_count\":0,\"reviewed_at\":\"2026-11-01T10:00:00Z\",\"last_synced_at\":\"2026-11-29T12:00:00Z\"}\n", app, i, i, pad
    }' | produce "$TOPIC_REVIEWS" -p 0 -X compression.codec=none
    local lo
    lo=$(broker_ctl watermarks "$TOPIC_REVIEWS" 0 | awk '{print $2}')
    [ "$lo" -gt 3 ] 2>/dev/null || fail "retention kept partition 0 whole (first offset $lo): test not set up"
    release_lock
    local reset="MESSAGES LOST BEFORE THEY WERE STORED.*$TOPIC_REVIEWS \\[0\\]: offset reset .* to END"
    wait_for_log rl1 "$reset" 1 30
    # Three times the limit (STORAGE_FETCH_STALL_SECONDS=3), counted from the
    # reset, checked every 0.5 s.
    wait_until_ms $(($(log_ms rl1 "$reset") + 3 * 3000))
    assert_running rl1
    assert_eq 0 "$(log_count rl1 'no record fetched')" "stalls reported"
    # The next record moves the position on: read alone, from the end the
    # reset put the position at.
    local end
    gen_reviews 1000 1 l | produce "$TOPIC_REVIEWS" -p 0
    end=$(high_watermark "$TOPIC_REVIEWS" 0)
    wait_for_sql "SELECT count(*) FROM reviews WHERE review_id = 'l-1000'" 1 30
    rc=$(svc_stop rl1)
    assert_eq 0 "$rc" "exit status after SIGTERM"
    assert_eq "p0:$((end - 1))-$((end - 1))" "$(review_batches rl1 | tail -n 1 | sed -nE 's/.* offsets=([^ ]*) .*/\1/p')" \
        "the offsets of the last batch"
}

# DESIGN.md: Architecture: a reviews burst must not hold a network-metrics
# message back: each pipeline has its own consumer and connection, so each
# of three network-metrics messages is stored while a backlog of 300,000
# reviews is still being ingested. How soon is the bench's to judge (its
# network-metrics p99 under load), never a wall clock under the sanitizers.
# The backlog is sized to outlast the three messages: the service stores
# 100,000 reviews in about 3 s even under the sanitizers, and a message
# stored after the backlog fails the test rather than passing unloaded.
test_network_metrics_are_stored_while_a_300k_reviews_backlog_is_ingested() {
    begin_fault_test latency
    gen_reviews 0 300000 | produce "$TOPIC_REVIEWS"
    # The mock keeps at most 5 MiB per partition: prove it kept all 300,000.
    assert_broker_kept_everything "$TOPIC_REVIEWS"
    assert_eq 300000 "$(broker_message_count "$TOPIC_REVIEWS")" "messages the broker holds"

    svc_start latency1
    wait_for_at_least "SELECT count(*) FROM reviews" 1 60
    local i id before after
    for i in 1 2 3; do
        before=$(sql "SELECT count(*) FROM reviews")
        id=$(new_uuid)
        gen_network_metric "$id" | produce "$TOPIC_NETWORK_METRICS"
        wait_for_sql "SELECT count(*) FROM network_metrics WHERE analysis_id = '$id'" 1 60
        after=$(sql "SELECT count(*) FROM reviews")
        echo "# network-metrics message $i stored while reviews rows went $before -> $after" >&2
        [ "$after" -lt 300000 ] || fail "the reviews backlog ended before network-metrics message $i was stored ($before -> $after rows)"
    done
    wait_for_sql "SELECT count(*) FROM reviews" 300000 180
    assert_eq 3 "$(sql "SELECT count(*) FROM network_metrics")" "network-metrics rows"
    rc=$(svc_stop latency1)
    assert_eq 0 "$rc" "exit status"
}

# DESIGN.md: Errors: retries exhausted is fatal (exit 1); the restarted process resumes
# from the committed offsets and nothing is lost.
test_postgres_down_longer_than_the_retries_exits_1_then_resumes_without_loss() {
    begin_fault_test pgdown
    svc_start pgdown1 STORAGE_DB_RETRY_BASE_MS=100 STORAGE_DB_RETRY_MAX_ATTEMPTS=3
    gen_reviews 0 500 | produce "$TOPIC_REVIEWS"
    wait_for_sql "SELECT count(*) FROM reviews" 500
    pg_ctl_ stop -m fast >/dev/null
    gen_reviews 500 500 | produce "$TOPIC_REVIEWS"
    assert_broker_kept_everything "$TOPIC_REVIEWS"
    assert_eq 1000 "$(broker_message_count "$TOPIC_REVIEWS")" "messages the broker holds"
    rc=$(svc_wait pgdown1 30)
    assert_eq 1 "$rc" "exit status with the database gone"
    local log
    log=$(cat "$(svc_log pgdown1)")
    assert_contains "$log" "retries exhausted"
    # The same batch, three times, with the back-off doubling from the base.
    assert_eq "1/3:100 2/3:200 3/3:400" \
        "$(sed -nE 's/.*\[reviews\] transient database error, retrying the same batch attempt=([0-9]+) max_attempts=([0-9]+) delay_ms=([0-9]+) .*/\1\/\2:\3/p' \
            "$(svc_log pgdown1)" | xargs)" "retries before giving up (attempt:back-off ms)"
    assert_contains "$log" "stopped exit=1"
    pg_ctl_ start >/dev/null

    svc_start pgdown2
    wait_for_sql "SELECT count(*) FROM reviews" 1000 60
    rc=$(svc_stop pgdown2)
    assert_eq 0 "$rc" "exit status of the restarted service"
    assert_eq 1000 "$(sql "SELECT count(*) FROM reviews")" "rows"
    assert_each_offset_stored_once reviews "$TOPIC_REVIEWS" pgdown1 pgdown2
    assert_eq 0 "$(sql "SELECT count(*) FROM dead_letter_events")" "dead letters"
}

# DESIGN.md: Errors: a stop request interrupts the back-off; the batch stays
# uncommitted and comes back to the next process.
test_sigterm_interrupts_the_database_back_off() {
    begin_fault_test backoff
    svc_start backoff1 STORAGE_DB_RETRY_BASE_MS=5000 STORAGE_DB_RETRY_MAX_ATTEMPTS=3
    gen_reviews 0 100 | produce "$TOPIC_REVIEWS"
    wait_for_sql "SELECT count(*) FROM reviews" 100
    pg_ctl_ stop -m fast >/dev/null
    gen_reviews 100 100 | produce "$TOPIC_REVIEWS"
    assert_broker_kept_everything "$TOPIC_REVIEWS"
    assert_eq 200 "$(broker_message_count "$TOPIC_REVIEWS")" "messages the broker holds"
    wait_for_log backoff1 '\[reviews\] transient database error, retrying the same batch attempt=1 max_attempts=3 delay_ms=5000 ' 1
    local t0 elapsed
    t0=$(now_ms)
    rc=$(svc_stop backoff1 10)
    elapsed=$(($(now_ms) - t0))
    assert_eq 0 "$rc" "exit status after SIGTERM during the back-off"
    [ "$elapsed" -lt 3000 ] || fail "SIGTERM took $elapsed ms to stop a 5000 ms back-off"
    assert_contains "$(cat "$(svc_log backoff1)")" "stop requested during the back-off"
    pg_ctl_ start >/dev/null

    svc_start backoff2
    wait_for_sql "SELECT count(*) FROM reviews" 200 60
    rc=$(svc_stop backoff2)
    assert_eq 0 "$rc" "exit status of the restarted service"
    assert_eq 200 "$(sql "SELECT count(*) FROM reviews")" "rows"
    assert_each_offset_stored_once reviews "$TOPIC_REVIEWS" backoff1 backoff2
    assert_eq 100 "$(batch_sum backoff2 reviews inserted)" "interrupted rows delivered again"
}

# A batch stuck at a stop (its INSERT waits on a lock) ends by its own
# deadline: the stop path fits the shutdown timeout by construction (start-up
# refuses settings where it could not), so the process exits 0, not 1, and
# the unfinished batch, left uncommitted, comes back to the next process.
test_a_batch_stuck_at_a_stop_ends_by_its_deadline_and_the_stop_is_clean() {
    begin_fault_test stuck
    # 0.2 s poll + 2.5 s attempt + 1 s commit + 2 s to leave <= 6 s.
    svc_start stuck1 STORAGE_SHUTDOWN_TIMEOUT_SECONDS=6 STORAGE_DB_STATEMENT_TIMEOUT_MS=1500 \
        STORAGE_COMMIT_TIMEOUT_MS=1000 STORAGE_DB_RETRY_BASE_MS=5000
    gen_reviews 0 100 | produce "$TOPIC_REVIEWS"
    wait_for_sql "SELECT count(*) FROM reviews" 100
    hold_lock reviews
    gen_reviews 100 100 | produce "$TOPIC_REVIEWS"
    assert_broker_kept_everything "$TOPIC_REVIEWS"
    assert_eq 200 "$(broker_message_count "$TOPIC_REVIEWS")" "messages the broker holds"
    wait_blocked || fail "no batch blocked on the lock"
    local t0 elapsed
    t0=$(now_ms)
    rc=$(svc_stop stuck1 15)
    elapsed=$(($(now_ms) - t0))
    assert_eq 0 "$rc" "exit status when the in-flight batch is stuck at the stop"
    [ "$elapsed" -lt 6000 ] || fail "the stop took $elapsed ms, over STORAGE_SHUTDOWN_TIMEOUT_SECONDS=6"
    assert_contains "$(cat "$(svc_log stuck1)")" "stop requested during the back-off"
    release_lock
    assert_eq 100 "$(sql "SELECT count(*) FROM reviews")" "rows of the stuck batch (rolled back)"

    svc_start stuck2
    wait_for_sql "SELECT count(*) FROM reviews" 200 60
    rc=$(svc_stop stuck2)
    assert_eq 0 "$rc" "exit status of the restarted service"
    assert_eq 200 "$(sql "SELECT count(*) FROM reviews")" "rows"
    assert_each_offset_stored_once reviews "$TOPIC_REVIEWS" stuck1 stuck2
    assert_eq 100 "$(batch_sum stuck2 reviews inserted)" "the unfinished batch delivered again"
}

# A COMMIT that waits for a synchronous standby is not ended by
# statement_timeout (it waited 12 minutes with a 1.5 s timeout): the
# service's own deadline cancels it, the attempt counts as a transient
# error, and when the retries are exhausted the process exits 1 instead of
# hanging. The standby never comes here ("ghost"), so every attempt waits.
reset_synchronous_standby() {
    sql "ALTER SYSTEM RESET synchronous_standby_names" >/dev/null 2>&1 || true
    sql "SELECT pg_reload_conf()" >/dev/null 2>&1 || true
}

test_a_commit_waiting_for_a_synchronous_standby_is_cancelled_by_the_client_deadline() {
    begin_fault_test syncrep
    trap 'end_test reset_synchronous_standby' EXIT
    svc_start syncrep1 STORAGE_PIPELINES=reviews STORAGE_DB_STATEMENT_TIMEOUT_MS=1500 \
        STORAGE_DB_RETRY_BASE_MS=100 STORAGE_DB_RETRY_MAX_ATTEMPTS=2
    gen_reviews 0 100 | produce "$TOPIC_REVIEWS" -p 0
    wait_for_sql "SELECT count(*) FROM reviews" 100
    sql "ALTER SYSTEM SET synchronous_standby_names = 'ghost'" >/dev/null
    sql "SELECT pg_reload_conf()" >/dev/null
    gen_reviews 100 100 | produce "$TOPIC_REVIEWS" -p 0
    # Three attempts of at most 2.5 s each, 300 ms of back-off, a stop.
    rc=$(svc_wait syncrep1 30)
    assert_eq 1 "$rc" "exit status when every COMMIT waits for a standby that never comes"
    local log
    log=$(cat "$(svc_log syncrep1)")
    assert_contains "$log" "PostgreSQL did not answer before the deadline"
    assert_contains "$log" "retries exhausted"
    # No statement of the service waits on in the server: each was
    # cancelled. (Its dropped sessions still wait, idle, to drop their
    # staging tables at exit: that commit waits for the standby too.)
    wait_for_sql "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep' AND state = 'active'" 0 10
    reset_synchronous_standby
    # A cancelled wait for the standby leaves the COMMIT done locally: those
    # records are stored, by no logged batch.
    local unlogged
    unlogged=$(stored_unlogged syncrep1 "$TOPIC_REVIEWS")

    svc_start syncrep2 STORAGE_PIPELINES=reviews
    wait_committed "$GROUP_PREFIX.reviews" "$TOPIC_REVIEWS" 0 200
    rc=$(svc_stop syncrep2)
    assert_eq 0 "$rc" "exit status of the restarted service"
    assert_eq 200 "$(sql "SELECT count(*) FROM reviews")" "rows"
    UNLOGGED=$unlogged assert_each_offset_stored_once reviews "$TOPIC_REVIEWS" syncrep1 syncrep2
}

# DESIGN.md: Errors: with every broker down a synchronous commit can block for minutes;
# the commit has a deadline of its own and its failure counts.
test_an_offset_commit_with_every_broker_down_fails_within_the_commit_timeout() {
    begin_fault_test deadline
    trap 'end_test broker_ctl broker-up -1' EXIT
    svc_start deadline1 STORAGE_COMMIT_TIMEOUT_MS=1000 STORAGE_COMMIT_FAILURE_LIMIT=5
    gen_reviews 0 10 | produce "$TOPIC_REVIEWS" -p 0
    wait_for_log deadline1 '\[reviews\] batch size=' 1
    # A batch held in the middle while every broker goes down: its offset
    # commit comes when no broker answers.
    hold_lock reviews
    gen_reviews 10 10 | produce "$TOPIC_REVIEWS" -p 0
    wait_blocked || fail "no batch blocked on the lock"
    broker_ctl broker-down -1 >/dev/null
    local t0 elapsed
    t0=$(now_ms)
    release_lock
    wait_for_log deadline1 'offset commit did not complete within 1000 ms' 1 15
    elapsed=$(($(now_ms) - t0))
    [ "$elapsed" -lt 5000 ] || fail "the commit failure came after $elapsed ms (deadline 1000 ms)"
    assert_contains "$(cat "$(svc_log deadline1)")" "offset commit failed (1/5 in a row"
    broker_ctl broker-up -1 >/dev/null
    assert_eq 20 "$(sql "SELECT count(*) FROM reviews")" "rows of the batch whose commit failed"

    # The brokers are back: the pipeline goes on.
    gen_reviews 20 10 | produce "$TOPIC_REVIEWS" -p 0
    assert_broker_kept_everything "$TOPIC_REVIEWS"
    assert_eq 30 "$(broker_message_count "$TOPIC_REVIEWS")" "messages the broker holds"
    wait_for_sql "SELECT count(*) FROM reviews" 30 60
    assert_running deadline1
    rc=$(svc_stop deadline1)
    assert_eq 0 "$rc" "exit status after SIGTERM"
    assert_eq 30 "$(sql "SELECT count(*) FROM reviews")" "rows"
    assert_each_offset_stored_once reviews "$TOPIC_REVIEWS" deadline1
}

run_tests
