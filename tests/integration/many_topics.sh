#!/usr/bin/env bash
# Many topics, one definition (DESIGN.md: Pipelines are declared): a
# definition whose "topic" is a list reads every topic of it in one
# consumer group, into one table, with a position per topic and partition,
# the topic available as a column; its batch lines, lag series, dead
# letters, verify and replay name each topic.
. "$(dirname "$0")/lib.sh"

pg_start
broker_start

APP=com.example.crawl

# A crawler per region publishes into its own topic; one table holds them
# all, each row keyed by where its record was published.
crawl_def() { # eu-topic us-topic
    printf '%s' '{"name": "crawl", "batch_size": 40, "table": "crawl",
      "topic": ["'"$1"'", "'"$2"'"],
      "application": {"member": "package_name", "column": "application_id"},
      "fields": [{"record": "topic", "column": "src_topic", "required": true},
                 {"record": "partition", "column": "src_partition", "required": true},
                 {"record": "offset", "column": "src_offset", "required": true},
                 {"member": "body", "required": true}],
      "key": ["src_topic", "src_partition", "src_offset"],
      "on_conflict": "nothing"}'
}

# The table, the two topics of the test (eu: 2 partitions, us: 3), and the
# settings every command of the test shares ($EU, $US, OP_ENV).
setup() {
    register_apps "$APP"
    sql "CREATE TABLE crawl (
           application_id BIGINT NOT NULL,
           src_topic      TEXT NOT NULL,
           src_partition  INT NOT NULL,
           src_offset     BIGINT NOT NULL,
           body           TEXT NOT NULL,
           UNIQUE (src_topic, src_partition, src_offset))" >/dev/null
    EU=crawl-eu-$TEST_NAME
    US=crawl-us-$TEST_NAME
    broker_ctl topic-create "$EU" 2 >/dev/null
    broker_ctl topic-create "$US" 3 >/dev/null
    definitions_with "$WORK/def-$TEST_NAME.json" "$(crawl_def "$EU" "$US")"
    OP_ENV=("STORAGE_PIPELINES_FILE=$WORK/def-$TEST_NAME.json" STORAGE_PIPELINES=crawl)
}

start_crawl() { # svc [VAR=value...]
    local svc=$1
    shift
    start_service "$svc" "${OP_ENV[@]}" "$@"
}

# COUNT records of BODY on partition P of TOPIC.
publish() { # topic partition count body
    local i
    for i in $(seq 1 "$3"); do printf '{"package_name":"%s","body":"%s"}\n' "$APP" "$4"; done | produce "$1" -p "$2"
}

# Every partition of both topics committed by the group up to its high
# watermark, in Kafka and in the database's positions.
wait_both_stored() {
    local p
    for p in 0 1; do wait_committed "$(group_of crawl)" "$EU" "$p" "$(high_watermark "$EU" "$p")"; done
    for p in 0 1 2; do wait_committed "$(group_of crawl)" "$US" "$p" "$(high_watermark "$US" "$p")"; done
}

positions() { # topic
    sql "SELECT string_agg(partition || ':' || next_offset, ' ' ORDER BY partition) FROM consumer_offsets
         WHERE group_id = '$(group_of crawl)' AND topic = '$1'"
}

test_two_topics_fill_one_table_with_each_record_once_and_a_position_per_topic_and_partition() {
    begin_test twotopics
    setup
    publish "$EU" 0 70 eu && publish "$EU" 1 50 eu
    publish "$US" 0 30 us && publish "$US" 1 40 us && publish "$US" 2 20 us
    printf 'not json\n' | produce "$US" -p 2
    local port
    port=$(free_port)
    start_crawl first STORAGE_METRICS_ADDR="127.0.0.1:$port"
    wait_both_stored
    # A lag series per topic and partition, labelled with its topic.
    local metrics
    metrics=$(wait_metrics "$port" "storage_consumer_committed_lag{pipeline=\"crawl\",topic=\"$US\",partition=\"2\"} 0")
    assert_contains "$metrics" "storage_consumer_committed_lag{pipeline=\"crawl\",topic=\"$EU\",partition=\"1\"} 0" \
        "the eu topic's committed lag"
    stop_clean first

    assert_eq "$EU:0:0-69:eu $EU:1:0-49:eu $US:0:0-29:us $US:1:0-39:us $US:2:0-19:us" \
        "$(sql "SELECT string_agg(t, ' ' ORDER BY t) FROM (
                  SELECT src_topic || ':' || src_partition || ':' || min(src_offset) || '-' || max(src_offset) || ':'
                         || string_agg(DISTINCT body, ',') AS t
                  FROM crawl GROUP BY src_topic, src_partition) r")" \
        "per topic and partition: the offsets stored, and the region of their bodies"
    assert_eq 210 "$(sql "SELECT count(*) FROM crawl")" "rows"
    PARTITIONS=2 assert_each_offset_stored_once crawl "$EU" first
    PARTITIONS=3 assert_each_offset_stored_once crawl "$US" first
    assert_eq "0:70 1:50" "$(positions "$EU")" "the database's positions of the eu topic"
    assert_eq "0:30 1:40 2:21" "$(positions "$US")" "the database's positions of the us topic"
    # The batch lines name the topic of each range.
    grep -E "info +\[crawl\] batch size=.* offsets=[^ ]*$US:p2:" "$(svc_log first)" >/dev/null ||
        fail "no batch line names a range of $US [2]: $(grep -m3 'batch size=' "$(svc_log first)")"
    # The bad record is dead-lettered under its topic, listed with the pipeline's.
    assert_eq "$US|2|20|invalid_json" "$(sql "SELECT topic || '|' || partition || '|' || kafka_offset || '|' || error_type
                                           FROM dead_letter_events")" "the dead letter"
    op list dead-letters list --pipeline crawl
    assert_eq 0 "$OP_RC" "dead-letters list: $(err list)"
    assert_contains "$(out list)" "$US" "dead-letters list --pipeline crawl"

    # More of one region: a restart reads on from each topic's positions,
    # reading nothing twice.
    publish "$US" 1 15 us
    publish "$EU" 0 5 eu
    start_crawl second
    wait_both_stored
    stop_clean second
    assert_eq "0|20" "$(batch_sum second crawl skipped)|$(batch_sum second crawl inserted)" \
        "the restart's skipped and inserted"
    PARTITIONS=2 assert_each_offset_stored_once crawl "$EU" first second
    PARTITIONS=3 assert_each_offset_stored_once crawl "$US" first second
}

test_verify_and_replay_of_a_pipeline_of_two_topics_cover_both() {
    begin_test replaytwo
    setup
    publish "$EU" 0 10 eu && publish "$EU" 1 10 eu
    publish "$US" 0 10 us && publish "$US" 1 10 us && publish "$US" 2 10 us
    start_crawl first
    wait_both_stored
    stop_clean first
    local digest
    digest=$(sql "SELECT count(*) || ' ' || md5(string_agg(c::text, ',' ORDER BY src_topic, src_partition, src_offset)) FROM crawl c")

    op verify verify
    assert_eq 0 "$OP_RC" "verify's exit: $(out verify)"
    assert_contains "$(out verify)" "$EU partitions=2" "verify's topics stage"
    assert_contains "$(out verify)" "$US partitions=3" "verify's topics stage"

    # Back to the earliest offset of every partition of both topics, in
    # the database and in Kafka, in one step.
    op replay replay crawl --to earliest
    assert_eq 0 "$OP_RC" "replay's exit: $(err replay)"
    assert_contains "$(out replay)" "reset to earliest on 5 partitions" "replay's summary"
    assert_eq "0:0 1:0" "$(positions "$EU")" "eu positions after the replay"
    assert_eq "0:0 1:0 2:0" "$(positions "$US")" "us positions after the replay"
    assert_eq "0 0" "$(broker_committed "$(group_of crawl)" "$EU" 1) $(broker_committed "$(group_of crawl)" "$US" 2)" \
        "Kafka's committed offsets after the replay"
    start_crawl again
    wait_both_stored
    stop_clean again
    assert_eq "50|0" "$(batch_sum again crawl skipped)|$(batch_sum again crawl inserted)" \
        "records of the replay skipped, inserted"
    assert_eq "$digest" "$(sql "SELECT count(*) || ' ' || md5(string_agg(c::text, ',' ORDER BY src_topic, src_partition, src_offset)) FROM crawl c")" \
        "the table after the replay"

    # A topic of the list the cluster does not have: verify names it.
    definitions_with "$WORK/def-$TEST_NAME.json" "$(crawl_def "$EU" "crawl-nowhere-$TEST_NAME")"
    op missing verify
    [ "$OP_RC" -ne 0 ] || fail "verify passed with a missing topic: $(out missing)"
    assert_contains "$(out missing)" "topic crawl-nowhere-$TEST_NAME (pipeline crawl) does not exist" "verify"
}

test_a_topic_listed_twice_or_read_by_two_pipelines_is_refused_at_start() {
    begin_test refused
    setup
    OP_ENV+=("STORAGE_TOPIC_CRAWL=$EU,$US,$EU")
    op twice run
    assert_eq 2 "$OP_RC" "exit with a topic twice in STORAGE_TOPIC_CRAWL"
    assert_contains "$(err twice)" "STORAGE_TOPIC_CRAWL=$EU,$US,$EU: \"$EU\" is named twice" "the error"
    OP_ENV=("STORAGE_PIPELINES_FILE=$WORK/def-$TEST_NAME.json" STORAGE_PIPELINES=crawl,reviews "STORAGE_TOPIC_REVIEWS=$US")
    op shared run
    assert_eq 2 "$OP_RC" "exit with a topic of two pipelines"
    assert_contains "$(err shared)" "topic $US is STORAGE_TOPIC_" "the error"
}

run_tests
