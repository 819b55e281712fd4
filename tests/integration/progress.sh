#!/usr/bin/env bash
# The database as the one record of progress (DESIGN.md: Progress in the
# database): each batch raises its partitions' positions in consumer_offsets
# in its own transaction; an assignment starts at the database's position,
# else at Kafka's committed offset; a database behind Kafka (restored from a
# backup) reads the gap again; a position retention has passed is reported
# as loss; positions that cannot be read fail the pipeline.
#
# One PostgreSQL and one broker for the suite; each test has its own database,
# topics and groups (begin_test).
#
# For development: ONLY_TESTS=REGEX runs only the tests whose name matches;
# KEEP_WORK=1 keeps the work directory (the services' logs).

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

APP=com.example.progress

begin_progress_test() { # name
    begin_test "$1"
    register_apps "$APP"
}

# The database's positions of GROUP on TOPIC: "p:next p:next ...".
db_positions() { # group topic
    sql "SELECT string_agg(partition || ':' || next_offset, ' ' ORDER BY partition)
         FROM consumer_offsets WHERE group_id = '$1' AND topic = '$2'"
}

# The high watermarks of TOPIC's 3 partitions, as db_positions prints them.
high_watermarks() { # topic
    local p out=""
    for p in 0 1 2; do out="$out${out:+ }$p:$(high_watermark "$1" "$p")"; done
    echo "$out"
}

# Every batch moves the positions, also a batch of dead letters only and a
# batch whose every row was already stored.
test_each_batch_records_its_partitions_next_offsets_in_the_database() {
    begin_progress_test record
    local group
    group=$(group_of reviews)
    gen_reviews 0 60 | produce "$TOPIC_REVIEWS"
    # Partition 2 also gets two records that can only be dead letters.
    printf '%s\n' 'not json' '{"package_name":' | produce "$TOPIC_REVIEWS" -p 2
    assert_broker_kept_everything "$TOPIC_REVIEWS"
    svc_start rec STORAGE_PIPELINES=reviews
    wait_for_sql "SELECT count(*) FROM reviews" 60
    wait_for_sql "SELECT count(*) FROM dead_letter_events" 2
    wait_for_sql "SELECT coalesce((SELECT sum(next_offset) FROM consumer_offsets WHERE group_id = '$group'), 0)" 62
    assert_eq "$(high_watermarks "$TOPIC_REVIEWS")" "$(db_positions "$group" "$TOPIC_REVIEWS")" "database positions = high watermarks"

    # A batch of dead letters only, on partition 1.
    echo '[]' | produce "$TOPIC_REVIEWS" -p 1
    wait_for_sql "SELECT count(*) FROM dead_letter_events" 3
    # A batch of rows already stored (a producer's retry), on partition 0.
    gen_reviews 0 5 | produce "$TOPIC_REVIEWS" -p 0
    wait_for_sql "SELECT coalesce((SELECT sum(next_offset) FROM consumer_offsets WHERE group_id = '$group'), 0)" 68
    assert_eq "$(high_watermarks "$TOPIC_REVIEWS")" "$(db_positions "$group" "$TOPIC_REVIEWS")" "positions after dead letters and skipped rows"
    assert_eq 5 "$(batch_sum rec reviews skipped)" "the redelivered rows were skipped"
    assert_eq 0 "$(sql "SELECT count(*) FROM consumer_offsets WHERE group_id <> '$group'")" "rows of other groups"
    stop_clean rec
}

# DESIGN.md: Progress in the database: the database's position wins over
# Kafka's copy, so a crash after the database COMMIT and before the offset
# commit does not redeliver the batch.
test_a_kill_between_the_two_commits_does_not_redeliver_the_batch() {
    begin_progress_test kill
    gen_reviews 0 1000 | produce "$TOPIC_REVIEWS"
    assert_broker_kept_everything "$TOPIC_REVIEWS"

    svc_start kill1 STORAGE_PIPELINES=reviews SC_TEST_KILL_AFTER_DB_COMMIT=2 STORAGE_MAX_POLL_RECORDS_REVIEWS=100
    assert_eq 137 "$(svc_wait kill1 60)" "exit status of the process killed by the fault point"
    assert_contains "$(cat "$(svc_log kill1)")" "test fault point: killing the process after the database commit"
    # Batch 1 was committed to Kafka and logged; batch 2 is in the database
    # only (it died before its offset commit and its log line).
    assert_eq 1 "$(review_batches kill1 | wc -l)" "batches logged before the kill"
    local first stored
    first=$(batch_sum kill1 reviews size)
    stored=$(sql "SELECT count(*) FROM reviews")
    [ "$stored" -gt "$first" ] || fail "the second batch is not in the database: $stored rows, first batch $first"
    local unlogged
    unlogged=$(stored_unlogged kill1 "$TOPIC_REVIEWS")

    svc_start kill2 STORAGE_PIPELINES=reviews STORAGE_MAX_POLL_RECORDS_REVIEWS=100
    wait_for_sql "SELECT count(*) FROM reviews" 1000 60
    stop_clean kill2
    assert_eq 1000 "$(sql "SELECT count(*) FROM reviews")" "rows"
    # The batch stored before the kill, by the database's positions, and
    # the restart's batches: each offset once.
    UNLOGGED=$unlogged assert_each_offset_stored_once reviews "$TOPIC_REVIEWS" kill1 kill2
    # Nothing of the batch stored before the kill came back.
    assert_eq 0 "$(batch_sum kill2 reviews skipped)" "rows read again after the restart"
    assert_eq $((1000 - stored)) "$(batch_sum kill2 reviews size)" "records delivered after the restart"
    assert_eq $((1000 - stored)) "$(batch_sum kill2 reviews inserted)" "rows inserted after the restart"
    # How the start compares the two records depends on how the batches fell
    # (a batch takes what is already fetched): where batch 2 shares a
    # partition with batch 1, Kafka's committed offset is behind the
    # database's position and the start says so; a partition only batch 2
    # touched has no committed offset, and starts at the database's position.
    local log b1 b2 p
    log=$(cat "$(svc_log kill2)")
    b1=$(review_batches kill1 | grep -o 'offsets=[^ ]*' | grep -o 'p[0-9]*' | sort -u)
    b2=$(grep -o 'after the database commit offsets=[^ ]*' "$(svc_log kill1)" | sed 's/.*offsets=//' | grep -o 'p[0-9]*' | sort -u)
    [ -n "$b2" ] || fail "the fault point did not name the killed batch's partitions"
    for p in $b2; do
        if grep -qx "$p" <<<"$b1"; then
            grep -qE "\[${p#p}\] starts at offset [0-9]+, the database's position \(Kafka's committed offset [0-9]+ is behind" <<<"$log" ||
                fail "partition ${p#p}: the start does not say Kafka's committed offset is behind: $log"
        else
            grep -qE "\[${p#p}\] starts at offset [0-9]+, the database's position$" <<<"$log" ||
                fail "partition ${p#p}: does not start at the database's position: $log"
        fi
    done
}

# A database restored from a backup is behind Kafka's committed offsets: the
# gap is read again from Kafka instead of being lost.
test_a_database_behind_kafka_reads_the_gap_again() {
    begin_progress_test restore
    local group
    group=$(group_of reviews)
    gen_reviews 0 300 | produce "$TOPIC_REVIEWS"
    assert_broker_kept_everything "$TOPIC_REVIEWS"
    svc_start first STORAGE_PIPELINES=reviews
    wait_for_sql "SELECT count(*) FROM reviews" 300
    wait_all_committed "$group" "$TOPIC_REVIEWS"
    stop_clean first

    # What a restore of a backup taken before the first batch looks like:
    # no rows, and positions at 0.
    sql "DELETE FROM reviews" >/dev/null
    sql "UPDATE consumer_offsets SET next_offset = 0 WHERE group_id = '$group'" >/dev/null
    assert_eq 0 "$(sql "SELECT count(*) FROM reviews")" "rows after the simulated restore"

    svc_start second STORAGE_PIPELINES=reviews
    wait_for_sql "SELECT count(*) FROM reviews" 300
    stop_clean second
    assert_eq 300 "$(batch_sum second reviews inserted)" "rows stored again from Kafka"
    assert_eq "$(high_watermarks "$TOPIC_REVIEWS")" "$(db_positions "$group" "$TOPIC_REVIEWS")" "positions caught up"
    [ "$(log_count second "warn .*are read again \(was the database restored from a backup\?\)")" -gt 0 ] ||
        fail "no warning that the database is behind Kafka: $(grep -E 'starts at|position' "$(svc_log second)" | head -n 5)"
}

# Upgrading: the first run after the migration has no positions and starts
# at Kafka's committed offsets, not at the beginning.
test_the_first_run_after_the_upgrade_starts_at_kafkas_committed_offsets() {
    begin_progress_test upgrade
    local group
    group=$(group_of reviews)
    gen_reviews 0 200 | produce "$TOPIC_REVIEWS" -p 0
    assert_broker_kept_everything "$TOPIC_REVIEWS"
    svc_start old STORAGE_PIPELINES=reviews
    wait_for_sql "SELECT count(*) FROM reviews" 200
    wait_all_committed "$group" "$TOPIC_REVIEWS"
    stop_clean old
    # As a deployment that ran before migration 0006 left it.
    sql "DELETE FROM consumer_offsets" >/dev/null
    gen_reviews 200 50 | produce "$TOPIC_REVIEWS" -p 0

    svc_start new STORAGE_PIPELINES=reviews
    wait_for_sql "SELECT count(*) FROM reviews" 250
    wait_for_sql "SELECT coalesce((SELECT sum(next_offset) FROM consumer_offsets WHERE group_id = '$group'), 0)" 250
    stop_clean new
    # Partition 0 from Kafka's committed offset; 1 and 2, never committed,
    # from the reset policy's start: each recorded at the assignment.
    assert_eq "0:250 1:0 2:0" "$(db_positions "$group" "$TOPIC_REVIEWS")" "positions recorded by the new run"
    assert_eq 50 "$(batch_sum new reviews size)" "records delivered after the upgrade"
    assert_eq 0 "$(batch_sum new reviews skipped)" "rows read twice"
    assert_eq 1 "$(log_count new "warn .*\\[0\\] has no position in the database: starting at Kafka.s committed offset 200 and recording it")" "partition 0 started from Kafka's copy, with a warning"
    assert_eq 2 "$(log_count new "has no position in the database nor in Kafka: starting at offset 0 \\(STORAGE_AUTO_OFFSET_RESET=earliest\\) and recording it")" "partitions 1 and 2 started by the reset policy"
}

# A partition's position is recorded when it is assigned, before any batch:
# a backup taken from then on restores it, so a database restored to before
# the partition's first batch reads the partition again instead of starting
# at Kafka's committed offset.
test_a_partition_gets_its_position_when_assigned_before_any_batch() {
    begin_progress_test assigned
    local group
    group=$(group_of reviews)
    gen_reviews 0 40 | produce "$TOPIC_REVIEWS" -p 1
    svc_start empty STORAGE_PIPELINES=reviews
    wait_for_log empty '\[reviews\] partitions assigned' 1
    wait_for_sql "SELECT count(*) FROM reviews" 40
    stop_clean empty
    # Latest: partition 2 starts at its end, which is recorded as such.
    gen_reviews 100 5 | produce "$TOPIC_REVIEWS" -p 2
    sql "DELETE FROM consumer_offsets WHERE partition = 2" >/dev/null
    svc_start latest STORAGE_PIPELINES=reviews STORAGE_AUTO_OFFSET_RESET=latest
    wait_for_sql "SELECT next_offset FROM consumer_offsets WHERE group_id = '$group' AND partition = 2" 5
    stop_clean latest
    assert_eq "0:0 1:40 2:5" "$(db_positions "$group" "$TOPIC_REVIEWS")" "positions"
    assert_eq 0 "$(batch_lines latest reviews)" "batches of the run that started at the end"
}

# A database position below the partition's first offset: retention deleted
# records before they were stored. Said (ERROR with the count), counted, and
# the rest is stored from the first offset the broker has.
test_a_position_retention_has_passed_is_reported_as_loss_and_counted() {
    begin_progress_test retention
    local group port lo hi
    group=$(group_of reviews)
    port=$(free_port)
    # Uncompressed ~1.5 KiB records to partition 0 until the mock's ~5 MiB
    # retention moves the partition's start.
    awk 'BEGIN { pad = sprintf("%1500s", ""); gsub(/ /, "x", pad);
                 for (i = 0; i < 5000; i++) printf "{\"bad\":\"%s\"}\n", pad }' |
        kcat -P -b "$BOOTSTRAP" -t "$TOPIC_REVIEWS" -p 0
    lo=$(broker_ctl watermarks "$TOPIC_REVIEWS" 0 | awk '{print $2}')
    hi=$(high_watermark "$TOPIC_REVIEWS" 0)
    assert_eq 5000 "$hi" "records produced"
    [ "$lo" -gt 0 ] || fail "retention did not move the first offset of $TOPIC_REVIEWS [0] (watermarks $lo $hi): test not set up"
    # The database says everything below 10 is stored (as a backup taken
    # when the consumer had read 10 records would).
    sql "INSERT INTO consumer_offsets (group_id, topic, partition, next_offset) VALUES ('$group', '$TOPIC_REVIEWS', 0, 10)" >/dev/null

    # Not the reset policy's choice: "latest" would skip what the broker still has.
    svc_start lost STORAGE_PIPELINES=reviews STORAGE_METRICS_ADDR="127.0.0.1:$port" STORAGE_AUTO_OFFSET_RESET=latest
    wait_for_sql "SELECT count(*) FROM dead_letter_events" $((hi - lo)) 90
    wait_for_sql "SELECT next_offset FROM consumer_offsets WHERE group_id = '$group' AND partition = 0" "$hi"
    assert_eq 1 "$(log_count lost "error .*\[0\]: $((lo - 10)) message\(s\) can no longer be stored: the database's position 10 is below the partition's first offset $lo")" "the loss, said once with its count"
    assert_contains "$(http_get "$port" /metrics)" \
        "storage_consumer_messages_lost_to_retention_total{pipeline=\"reviews\"} $((lo - 10))" "the loss, counted"
    assert_eq "$lo" "$(sql "SELECT min(kafka_offset) FROM dead_letter_events")" "the first record stored"
    stop_clean lost
}

# Where an assignment starts cannot be read (here the table is missing, an
# error no retry fixes): the pipeline fails, storing nothing of it.
# A topic deleted and created again numbers its records from 0 again, below
# the database's position. The member reads it from where
# STORAGE_AUTO_OFFSET_RESET says, and the position follows the records it
# stored: kept above them, a restart would start past records never stored.
# (The suite's broker cannot delete a topic; a new broker process has none,
# so the same topic name there is the topic recreated.)
test_a_recreated_topic_below_the_position_loses_nothing_across_a_restart() {
    begin_progress_test recreatedpos
    start_service old STORAGE_PIPELINES=reviews
    printf '{"old":%d\n' 0 1 2 3 4 | produce "$TOPIC_REVIEWS" -p 0
    wait_committed "$GROUP_PREFIX.reviews" "$TOPIC_REVIEWS" 0 5 60
    stop_clean old
    # The second cluster goes with the test, whatever its outcome.
    trap 'end_test "$BROKER" stop "$WORK/kafka-recreatedpos"' EXIT
    BOOTSTRAP=$("$BROKER" start "$WORK/kafka-recreatedpos" 1 "$TOPIC_REVIEWS:3")
    BROKER_DIR=$WORK/kafka-recreatedpos
    printf '{"new":%d\n' 0 1 | produce "$TOPIC_REVIEWS" -p 0
    start_service new STORAGE_PIPELINES=reviews
    wait_committed "$GROUP_PREFIX.reviews" "$TOPIC_REVIEWS" 0 2 60
    stop_clean new
    assert_contains "$(cat "$(svc_log new)")" "the database's position 5 is beyond the partition's end 2" "the start's warning"
    assert_eq "0:2" "$(db_positions "$GROUP_PREFIX.reviews" "$TOPIC_REVIEWS" | cut -d' ' -f1)" "the position after the new topic's records"
    # More records, a restart: it starts where the records stored end.
    printf '{"new":%d\n' 2 3 4 | produce "$TOPIC_REVIEWS" -p 0
    start_service again STORAGE_PIPELINES=reviews
    wait_committed "$GROUP_PREFIX.reviews" "$TOPIC_REVIEWS" 0 5 60
    stop_clean again
    assert_eq '0 {"new":0|1 {"new":1|2 {"new":2|3 {"new":3|4 {"new":4' \
        "$(sql "SELECT string_agg(kafka_offset || ' ' || convert_from(payload, 'UTF8'), '|' ORDER BY kafka_offset)
                FROM dead_letter_events WHERE convert_from(payload, 'UTF8') LIKE '{\"new\"%'")" \
        "the new topic's records, each dead-lettered once"
}

test_an_assignment_whose_positions_cannot_be_read_fails_the_pipeline_and_stores_nothing() {
    begin_progress_test unreadable
    gen_reviews 0 20 | produce "$TOPIC_REVIEWS"
    sql "ALTER TABLE consumer_offsets RENAME TO consumer_offsets_elsewhere" >/dev/null
    svc_start broken STORAGE_PIPELINES=reviews
    assert_eq 1 "$(svc_wait broken 60)" "exit status"
    assert_contains "$(cat "$(svc_log broken)")" "cannot read where the assigned partitions of $TOPIC_REVIEWS start from the database: 42P01"
    assert_eq 0 "$(sql "SELECT count(*) FROM reviews")" "rows stored"
}

pg_start
broker_start
run_tests
