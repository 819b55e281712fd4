#!/usr/bin/env bash
# The operator's commands (DESIGN.md: Operations): `storage-consumer verify`, which
# checks a deployment stage by stage, and `storage-consumer replay`, which
# resets one pipeline's consumer group. Run against the suite's PostgreSQL and
# the Kafka-protocol broker, with the real service (sanitizer build) ingesting
# around them.
#
# Every test has its own database (fresh_schema), topics and consumer groups
# (fresh_topics). A failing test prints the tail of every service log and
# command output it produced and kills the services still running.
#
# KEEP_WORK=1 keeps the suite's work directory after the run.

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

pg_start
broker_start

# The migrations the binary embeds (make compiles migrations/ in).
MIGRATION_FILES=("$TOP"/migrations/*.sql)
MIGRATION_COUNT=${#MIGRATION_FILES[@]}

# ---------------------------------------------------------------------------
# Helpers of this suite.

# The line of STAGE in verify NAME's report.
stage() { # name stage
    grep -E "^$2 " "$WORK/$(svc "$1").out" || fail "verify $1 printed no $2 line"
}

assert_stage() { # name stage status [needle...]
    local line n
    line=$(stage "$1" "$2")
    [ "$(echo "$line" | awk '{print $2}')" = "$3" ] || fail "stage $2 of $1: expected status $3: [$line]"
    shift 3
    for n in "$@"; do assert_contains "$line" "$n" "stage line"; done
}

assert_rc() { # expected name
    [ "$OP_RC" = "$1" ] || fail "$2 exited $OP_RC, expected $1: $(out "$2") $(err "$2")"
}

# "o0 o1 o2": GROUP's committed offsets on TOPIC.
offsets_of() { # group topic
    echo "$(broker_committed "$1" "$2" 0) $(broker_committed "$1" "$2" 1) $(broker_committed "$1" "$2" 2)"
}

# "p0 p1 p2": GROUP's positions on TOPIC in the database (consumer_offsets;
# "none": no row), where the service starts (DESIGN.md, Progress in the
# database).
positions_of() { # group topic
    sql "SELECT string_agg(coalesce(o.next_offset::text, 'none'), ' ' ORDER BY p)
         FROM generate_series(0, 2) p
         LEFT JOIN consumer_offsets o ON o.group_id = '$1' AND o.topic = '$2' AND o.partition = p"
}

# The reviews group's two records of its progress: its positions in the
# database and its offsets in Kafka ("o0 o1 o2" each).
assert_reviews_at() { # database kafka when
    assert_eq "$1" "$(positions_of "$(group_of reviews)" "$TOPIC_REVIEWS")" "positions in the database $3"
    assert_eq "$2" "$(offsets_of "$(group_of reviews)" "$TOPIC_REVIEWS")" "offsets in Kafka $3"
}

# A review message: review PACKAGE ID THUMBS LAST_SYNCED_AT
review() {
    printf '{"package_name":"%s","review_id":"%s","score":4,"thumbs_up_count":%s,"reviewed_at":"2026-11-01T00:00:00Z","last_synced_at":"%s"}\n' \
        "$1" "$2" "$3" "$4"
}
app_stat() { # package crawled_at
    printf '{"package_name":"%s","crawled_at":"%s","title":"t","score":4.5}\n' "$1" "$2"
}
metric() { # package analysis_id
    printf '{"package_name":"%s","analysis_id":"%s","analyzed_at":"2026-11-29T10:00:00Z","duration_seconds":1,"total_packets":10,"total_bytes":100}\n' "$1" "$2"
}

# Good messages on every topic and partition: 2 app-stats, 6 reviews,
# 1 network-metrics per partition.
produce_everywhere() { # package
    local p i
    for p in 0 1 2; do
        { app_stat "$1" "2026-11-29T0$p:00:00Z"; app_stat "$1" "2026-11-29T0$p:30:00Z"; } | produce "$TOPIC_APP_STATS" -p $p
        for i in 1 2 3 4 5 6; do review "$1" "r-$p-$i" "$i" "2026-11-29T10:00:00Z"; done | produce "$TOPIC_REVIEWS" -p $p
        metric "$1" "0000000$p-2222-3333-4444-555555555555" | produce "$TOPIC_NETWORK_METRICS" -p $p
    done
}

# Run the service until every pipeline stored everything, then stop it.
ingest_all() { # name
    start_service "$1"
    local g
    for g in app-stats:"$TOPIC_APP_STATS" reviews:"$TOPIC_REVIEWS" network-metrics:"$TOPIC_NETWORK_METRICS"; do
        wait_all_committed "$(group_of "${g%%:*}")" "${g#*:}"
    done
    stop_clean "$1"
}

# Start test NAME (begin_test) with produce_everywhere's messages on every
# topic, all stored by a first run of the service.
begin_ingested_test() { # name
    begin_test "$1"
    register_apps "com.example.$1"
    produce_everywhere "com.example.$1"
    ingest_all first
}

# The broker knows no topic TOPIC (asking creates nothing: see
# watermark_partition_exists in kafka_mock_broker.c).
assert_no_topic() { # topic
    local reply
    reply=$(broker_ctl watermarks "$1" 0 2>&1) && fail "topic $1 exists: $reply"
    assert_contains "$reply" "unknown topic" "broker's answer for $1"
}

# ---------------------------------------------------------------------------
# verify

test_verify_reports_every_stage_healthy_after_ingest() {
    begin_test healthy
    register_apps com.example.healthy
    produce_everywhere com.example.healthy
    ingest_all svc

    op verify verify
    assert_rc 0 verify
    assert_stage verify schema ok "applied=$MIGRATION_COUNT/$MIGRATION_COUNT checksums match"
    assert_stage verify topics ok "$TOPIC_APP_STATS partitions=3" "$TOPIC_REVIEWS partitions=3" "$TOPIC_NETWORK_METRICS partitions=3"
    assert_stage verify messages ok "$TOPIC_APP_STATS messages=6 high_watermarks=2,2,2" \
        "$TOPIC_REVIEWS messages=18 high_watermarks=6,6,6" "$TOPIC_NETWORK_METRICS messages=3 high_watermarks=1,1,1"
    assert_stage verify rows ok "app_stats=6; reviews=18; network_metrics=3"
    assert_stage verify dead-letters ok "unresolved=0"
    assert_stage verify positions ok \
        "$(group_of reviews) [0] database=6 kafka=6 even, [1] database=6 kafka=6 even, [2] database=6 kafka=6 even" \
        "$(group_of app-stats) [0] database=2 kafka=2 even" "$(group_of network-metrics) [0] database=1 kafka=1 even"
    assert_stage verify lag ok "$(group_of app-stats) lag=0 [0]=0 [1]=0 [2]=0" \
        "$(group_of reviews) lag=0 [0]=0 [1]=0 [2]=0" "$(group_of network-metrics) lag=0 [0]=0 [1]=0 [2]=0"
    # One line per stage, in order, then the verdict.
    assert_eq "verify schema topics messages rows dead-letters positions lag verify:" \
        "$(out verify | awk '{printf "%s%s", (NR > 1 ? " " : ""), $1}')" "the report's lines"
    assert_eq "verify: healthy" "$(out verify | tail -n 1)" "verdict"
    # --max-lag 0 holds: everything is stored.
    op max-lag verify --max-lag 0
    assert_rc 0 max-lag
}

test_verify_checks_only_the_enabled_pipelines() {
    begin_test enabled
    register_apps com.example.enabled
    produce_everywhere com.example.enabled
    # The app-stats topic of this deployment does not exist, but this process
    # runs only reviews.
    TOPIC_APP_STATS=app-stats-enabled-absent
    OP_ENV=(STORAGE_PIPELINES=reviews)
    op verify verify
    assert_rc 0 verify
    assert_eq "verify pipelines=reviews" "$(out verify | head -n 1 | awk '{print $1, $2}')" "header"
    assert_stage verify topics ok "$TOPIC_REVIEWS partitions=3"
    assert_stage verify rows ok "reviews=0"
    if out verify | grep -qE 'app-stats|app_stats|network'; then
        fail "verify checked a pipeline that is not enabled: $(out verify | grep -E 'app-stats|app_stats|network')"
    fi
    assert_no_topic app-stats-enabled-absent
}

test_verify_names_the_schema_stage_when_a_migration_is_missing() {
    begin_test schema
    local checksum
    checksum=$(sql "SELECT checksum FROM storage_consumer_migrations WHERE name = '0003_network_metrics.sql'")
    sql "DELETE FROM storage_consumer_migrations WHERE name = '0003_network_metrics.sql'"
    op missing verify
    assert_rc 1 missing
    assert_stage missing schema BROKEN "migration 0003_network_metrics.sql is not applied"
    assert_eq "verify: broken at stage schema" "$(out missing | tail -n 1)" "verdict"
    # The later stages still report.
    assert_stage missing topics ok
    assert_stage missing rows ok "app_stats=0; reviews=0; network_metrics=0"

    # An applied migration edited afterwards: the checksums differ.
    sql "INSERT INTO storage_consumer_migrations (name, checksum) VALUES ('0003_network_metrics.sql', '$checksum')"
    op current verify
    assert_rc 0 current
    sql "UPDATE storage_consumer_migrations SET checksum = md5('edited') WHERE name = '0002_reviews.sql'"
    op edited verify
    assert_rc 1 edited
    assert_stage edited schema BROKEN "migration 0002_reviews.sql was edited after it was applied"
    assert_eq "verify: broken at stage schema" "$(out edited | tail -n 1)" "verdict"

    # No schema at all.
    fresh_db op_schema_empty
    create_applications_table
    op empty verify
    assert_rc 1 empty
    assert_stage empty schema BROKEN "run storage-consumer migrate"
    assert_eq "verify: broken at stage schema" "$(out empty | tail -n 1)" "verdict"
}

test_verify_names_the_topic_stage_when_a_topic_is_missing() {
    begin_test topic
    TOPIC_REVIEWS=nonexistent-topic-$RANDOM
    op verify verify
    assert_rc 1 verify
    assert_stage verify topics BROKEN "topic $TOPIC_REVIEWS (pipeline reviews) does not exist" \
        "$TOPIC_APP_STATS partitions=3"
    assert_stage verify schema ok
    assert_stage verify messages ok "$TOPIC_REVIEWS not checked"
    assert_stage verify lag ok "$(group_of reviews) not checked"
    assert_eq "verify: broken at stage topics" "$(out verify | tail -n 1)" "verdict"
    # verify created nothing: asking for one topic's metadata would have.
    assert_no_topic "$TOPIC_REVIEWS"

    # A partition count other than 3 is a warning, not a break.
    TOPIC_REVIEWS="reviews-topic-five"
    broker_ctl topic-create "$TOPIC_REVIEWS" 5 >/dev/null
    op five verify
    assert_rc 0 five
    assert_stage five topics warn "$TOPIC_REVIEWS partitions=5" "$TOPIC_REVIEWS has 5 partitions, topics are created with 3"
    assert_eq "verify: healthy, with warnings (topics)" "$(out five | tail -n 1)" "verdict"
}

test_verify_reports_lag_before_ingest() {
    begin_test lag
    register_apps com.example.lag
    produce_everywhere com.example.lag
    op before verify
    # Lag alone is a warning: a pipeline that is catching up is healthy.
    assert_rc 0 before
    assert_stage before messages ok "$TOPIC_REVIEWS messages=18"
    assert_stage before rows ok "app_stats=0; reviews=0; network_metrics=0"
    assert_stage before positions ok "$(group_of reviews) [0] database=none kafka=none neither yet"
    assert_stage before lag warn "$(group_of reviews) lag=18 [0]=6 [1]=6 [2]=6 (no offset committed yet)" \
        "$(group_of app-stats) lag=6" "$(group_of network-metrics) lag=3"
    assert_eq "verify: healthy, with warnings (lag)" "$(out before | tail -n 1)" "verdict"
    # --max-lag makes it a break.
    op strict verify --max-lag 17
    assert_rc 1 strict
    assert_stage strict lag BROKEN "$(group_of reviews): lag 18 exceeds --max-lag 17"
    assert_eq "verify: broken at stage lag" "$(out strict | tail -n 1)" "verdict"
    # verify joined no group: nothing committed, and the service's first
    # start stores everything.
    assert_eq "-1001 -1001 -1001" "$(offsets_of "$(group_of reviews)" "$TOPIC_REVIEWS")" "reviews group offsets"
    ingest_all svc
    op after verify --max-lag 0
    assert_rc 0 after
    assert_stage after lag ok "$(group_of reviews) lag=0"
}

# The two records of a group's progress (DESIGN.md, Progress in the
# database), partition by partition. The database ahead of Kafka is normal
# (Kafka's copy is committed after the database's COMMIT), and a partition
# without a database row starts at Kafka's committed offset: both said,
# neither a warning. The lag counts from where the service starts.
test_verify_shows_the_database_and_kafka_positions_and_which_is_ahead() {
    begin_ingested_test ahead
    # One more review on partition 0, stored and recorded in the database,
    # but Kafka's copy not committed yet (a crash between the two commits).
    review com.example.ahead r-0-late 1 "2026-11-29T10:00:00Z" | produce "$TOPIC_REVIEWS" -p 0
    sql "UPDATE consumer_offsets SET next_offset = 7 WHERE group_id = '$(group_of reviews)' AND partition = 0"
    # Partition 2 as before the upgrade: no row.
    sql "DELETE FROM consumer_offsets WHERE group_id = '$(group_of reviews)' AND partition = 2"

    op verify verify
    assert_rc 0 verify
    assert_stage verify positions ok \
        "$(group_of reviews) [0] database=7 kafka=6 database ahead by 1, [1] database=6 kafka=6 even, [2] database=none kafka=6 no database row" \
        "$(group_of reviews): the database ahead of Kafka is normal: Kafka's copy lags a batch, or a crash came between the two commits" \
        "$(group_of reviews) [2]: no position in the database: the service starts at Kafka's committed offset 6 (the first run after the upgrade)"
    # The service starts partition 0 at the database's 7: nothing to read
    # there, though Kafka's copy says 1.
    assert_stage verify lag ok "$(group_of reviews) lag=0 [0]=0 [1]=0 [2]=0"
    assert_eq "verify: healthy" "$(out verify | tail -n 1)" "verdict"
}

# A database restored from a backup is behind Kafka's committed offsets: the
# service starts at the database's positions and stores the gap again. A
# warning naming the partition and the count, and the lag counts it.
test_verify_warns_when_kafka_is_ahead_of_the_database() {
    begin_ingested_test behind
    sql "UPDATE consumer_offsets SET next_offset = 2 WHERE group_id = '$(group_of reviews)' AND partition = 1"

    op verify verify
    assert_rc 0 verify
    assert_stage verify positions warn "$(group_of reviews) [0] database=6 kafka=6 even, [1] database=2 kafka=6 Kafka ahead by 4, [2] database=6 kafka=6 even" \
        "$(group_of reviews) [1]: Kafka's committed offset 6 is ahead of the database's position 2: the service starts at the database's and reads those 4 messages again (was the database restored from a backup?)"
    assert_stage verify lag warn "$(group_of reviews) lag=4 [0]=0 [1]=4 [2]=0"
    assert_eq "verify: healthy, with warnings (positions, lag)" "$(out verify | tail -n 1)" "verdict"
}

test_verify_reports_dead_letters_by_reason_and_the_newest() {
    begin_test dead
    register_apps com.example.dead
    {
        review com.example.dead ok-1 1 "2026-11-29T10:00:00Z"
        echo '{"not json'
        echo '[1,2]'
        review com.example.nobody late 1 "2026-11-29T10:00:00Z"
    } | produce "$TOPIC_REVIEWS" -p 1
    ingest_all svc
    op verify verify
    assert_rc 0 verify
    assert_stage verify dead-letters warn "unresolved=3 invalid_json=2 unregistered_app=1" \
        "newest id=" "topic=$TOPIC_REVIEWS partition=1 offset=3 error_type=unregistered_app"
    assert_stage verify rows ok "reviews=1"
    assert_eq "verify: healthy, with warnings (dead-letters)" "$(out verify | tail -n 1)" "verdict"
}

# A dead letter that was dealt with (redriven, or acknowledged as garbage)
# asks nothing more of anyone: verify counts only the unresolved ones.
test_verify_passes_once_every_dead_letter_is_resolved() {
    begin_test resolved
    register_apps com.example.dead
    {
        review com.example.dead ok-1 1 "2026-11-29T10:00:00Z"
        review com.example.later late 1 "2026-11-29T10:00:00Z"
    } | produce "$TOPIC_REVIEWS" -p 1
    ingest_all svc
    op verify verify
    assert_stage verify dead-letters warn "unresolved=1 unregistered_app=1"

    register_apps com.example.later
    op redrive dead-letters redrive
    assert_rc 0 redrive
    op verify verify
    assert_rc 0 verify
    assert_stage verify dead-letters ok "unresolved=0" "resolved=1"
    assert_eq "verify: healthy" "$(out verify | tail -n 1)" "verdict"

    # Acknowledged as garbage counts as dealt with too.
    echo '{"not json' | produce "$TOPIC_REVIEWS" -p 0
    ingest_all svc2
    op verify verify
    assert_stage verify dead-letters warn "unresolved=1 invalid_json=1" "resolved=1"
    op resolve dead-letters resolve --type invalid_json --note "garbage from a test producer"
    assert_rc 0 resolve
    op verify verify
    assert_stage verify dead-letters ok "unresolved=0" "resolved=2"
    assert_eq "verify: healthy" "$(out verify | tail -n 1)" "verdict"
}

# verify --json: the same report as one document for scripts
# (docs/OPERATIONS.md: Output for scripts), with the same exit codes.
test_verify_json_is_one_document_with_every_stage() {
    begin_test json
    register_apps com.example.json
    produce_everywhere com.example.json
    echo '{"not json' | produce "$TOPIC_REVIEWS" -p 2
    ingest_all svc
    op verify verify --json
    assert_rc 0 verify
    assert_eq 1 "$(out verify | wc -l)" "lines on stdout"
    local doc
    doc=$(out verify)
    jq -e . >/dev/null <<<"$doc" || fail "verify --json is not JSON: $doc"
    assert_eq "verify|schema topics messages rows dead-letters positions lag" \
        "$(jq -r '.command + "|" + ([.stages[].name] | join(" "))' <<<"$doc")" "every stage, in order"
    assert_eq "ok ok ok ok warn ok ok" "$(jq -r '[.stages[].status] | join(" ")' <<<"$doc")" "statuses"
    assert_eq 'healthy_with_warnings|null|["dead-letters"]' \
        "$(jq -r '[.result, (.first_broken | tostring), (.warnings | tojson)] | join("|")' <<<"$doc")" "verdict"
    assert_eq "1|0|1|invalid_json|$TOPIC_REVIEWS|2" \
        "$(jq -r '.stages[] | select(.name == "dead-letters") | .data | [.unresolved, .resolved, .unresolved_by_error_type.invalid_json, .newest_unresolved.error_type, .newest_unresolved.topic, .newest_unresolved.partition] | map(tostring) | join("|")' <<<"$doc")" \
        "the dead-letters stage's numbers"
    assert_eq "applied=$MIGRATION_COUNT/$MIGRATION_COUNT checksums match" \
        "$(jq -r '.stages[0].details[0]' <<<"$doc")" "the schema stage's detail"
    assert_eq "reviews|$TOPIC_REVIEWS|$(group_of reviews)" \
        "$(jq -r '.pipelines[] | select(.name == "reviews") | [.name, .topic, .group] | join("|")' <<<"$doc")" "pipelines"

    # A broken stage: exit 1, named in the document.
    TOPIC_REVIEWS=nonexistent-topic-$RANDOM
    op broken verify --json
    assert_rc 1 broken
    doc=$(out broken)
    jq -e . >/dev/null <<<"$doc" || fail "verify --json is not JSON: $doc"
    assert_eq "broken|topics|broken" \
        "$(jq -r '[.result, .first_broken, (.stages[] | select(.name == "topics") | .status)] | join("|")' <<<"$doc")" \
        "a broken verdict"
    assert_contains "$(jq -r '.stages[1].details | join("\n")' <<<"$doc")" "topic $TOPIC_REVIEWS (pipeline reviews) does not exist"
}

# ---------------------------------------------------------------------------
# replay

test_replay_to_earliest_reprocesses_only_that_pipeline() {
    begin_test earliest
    register_apps com.example.earliest
    produce_everywhere com.example.earliest
    echo '{"broken' | produce "$TOPIC_REVIEWS" -p 2
    ingest_all first
    local t stats metrics
    for t in app_stats reviews network_metrics dead_letter_events; do dump_table "$t" >"$WORK/earliest-$t.before"; done
    stats=$(offsets_of "$(group_of app-stats)" "$TOPIC_APP_STATS")
    metrics=$(offsets_of "$(group_of network-metrics)" "$TOPIC_NETWORK_METRICS")
    assert_eq "6 6 7" "$(offsets_of "$(group_of reviews)" "$TOPIC_REVIEWS")" "reviews offsets after the first run"

    op replay replay reviews --to earliest
    assert_rc 0 replay
    assert_contains "$(out replay)" "$TOPIC_REVIEWS [0] database 6, Kafka committed 6 -> 0 (6 messages to read)" "partition 0"
    assert_contains "$(out replay)" "$TOPIC_REVIEWS [2] database 7, Kafka committed 7 -> 0 (7 messages to read)" "partition 2"
    assert_contains "$(out replay)" "group $(group_of reviews) reset to earliest on 3 partitions, in the database and in Kafka: 19 messages to read (was 0)" "summary"
    assert_reviews_at "0 0 0" "0 0 0" "after the replay"
    assert_eq "$stats" "$(offsets_of "$(group_of app-stats)" "$TOPIC_APP_STATS")" "app-stats offsets untouched"
    assert_eq "$metrics" "$(offsets_of "$(group_of network-metrics)" "$TOPIC_NETWORK_METRICS")" "network-metrics offsets untouched"

    start_service again
    wait_all_committed "$(group_of reviews)" "$TOPIC_REVIEWS"
    sleep 1
    stop_clean again
    # Only reviews was read again, and every good record was a no-op.
    assert_eq "19 0 0 18 1" "$(batch_sum again reviews size) $(batch_sum again reviews inserted) $(batch_sum again reviews updated) $(batch_sum again reviews skipped) $(batch_sum again reviews dead_lettered)" \
        "reviews batch lines: size inserted updated skipped dead_lettered"
    assert_eq "0 0" "$(batch_lines again app-stats) $(batch_lines again network-metrics)" "batches of the other pipelines"
    assert_eq "$stats" "$(offsets_of "$(group_of app-stats)" "$TOPIC_APP_STATS")" "app-stats offsets after the second run"
    for t in app_stats reviews network_metrics dead_letter_events; do
        dump_table "$t" >"$WORK/earliest-$t.after"
        cmp -s "$WORK/earliest-$t.before" "$WORK/earliest-$t.after" ||
            fail "$t changed by the replay: $(diff "$WORK/earliest-$t.before" "$WORK/earliest-$t.after" | head -10)"
    done
}

# The operator's manual: stop the service, replay, start it again. The stop
# is signalled while a batch is still being written (the table is locked), so
# the service is still in the group when the replay joins it, and the group's
# first answer gives the replay nothing: the replay waits for the stopping
# member to leave instead of refusing. The restarted service reads the topic
# again from the start: every row is already stored, so each is skipped.
test_stop_replay_start_reads_the_topic_again_from_the_start() {
    begin_test flow
    register_apps com.example.flow
    local p i
    for p in 0 1 2; do
        for i in 1 2 3 4 5 6; do review com.example.flow "f-$p-$i" "$i" "2026-11-29T10:00:00Z"; done | produce "$TOPIC_REVIEWS" -p $p
    done
    # The held batch must outlast the replay's wait for the stopping member
    # (its window on the group's sessions, 5 s, then up to two session
    # timeouts and 10 s, 22 s): a statement timeout that
    # cancels it first leaves it to be redelivered after the replay, and the
    # counts below would see one insert instead of nineteen skips.
    start_service first STORAGE_PIPELINES=reviews STORAGE_DB_STATEMENT_TIMEOUT_MS=30000 \
        STORAGE_SHUTDOWN_TIMEOUT_SECONDS=60
    wait_all_committed "$(group_of reviews)" "$TOPIC_REVIEWS"
    # A last review, whose batch is in flight when the stop comes.
    hold_lock reviews
    review com.example.flow f-late 1 "2026-11-29T10:00:00Z" | produce "$TOPIC_REVIEWS" -p 0
    wait_blocked || fail "no batch blocked on the lock"

    # Stop, then replay at once.
    svc_signal first TERM
    OPS="$OPS replay"
    local vars t0 elapsed replay_pid rc=0
    mapfile -t vars < <(svc_env replay)
    t0=$(date +%s%N)
    env "${vars[@]}" timeout 120 "$BIN" replay reviews --to earliest \
        >"$WORK/$(svc replay).out" 2>"$WORK/$(svc replay).err" &
    replay_pid=$!
    # The batch ends once the group has answered the replay (or the replay
    # gave up): the stopping service is then still a member.
    local end=$((SECONDS + STALL_S))
    until grep -q "of the 3 partitions\|of 3 partitions" "$WORK/$(svc replay).out" "$WORK/$(svc replay).err"; do
        kill -0 "$replay_pid" 2>/dev/null || break
        [ "$SECONDS" -lt "$end" ] || fail "the replay did not hear from the group within $STALL_S s: $(out replay) $(err replay)"
        sleep 0.1
    done
    release_lock
    wait "$replay_pid" || rc=$?
    elapsed=$((($(date +%s%N) - t0) / 1000000))
    [ "$rc" = 0 ] || fail "replay exited $rc: $(out replay) $(err replay)"
    # The stopping member's session holds the group's lock, blocked: the
    # replay watches it for its window (2 x 2 s pings + the 200 ms poll
    # timeout + 1 s), sees it do nothing, and joins; then two session
    # timeouts (6 s) and 10 s: the stopping member leaves, and the group
    # answers again.
    [ "$elapsed" -lt 28000 ] || fail "the replay took $elapsed ms"
    assert_contains "$(out replay)" "group $(group_of reviews) reset to earliest on 3 partitions, in the database and in Kafka: 19 messages to read" "summary"
    assert_eq 0 "$(svc_wait first 30)" "exit status of the stopped service"
    assert_eq "0 0 0" "$(offsets_of "$(group_of reviews)" "$TOPIC_REVIEWS")" "offsets after the replay"

    # The batch in flight and the replay's reset race for partition 0's
    # position: committed first, the batch moved it to 7 and the replay
    # reset it from there; second, the batch found it reset and was fenced
    # (DESIGN.md: Progress in the database), its row not stored.
    local late_stored
    if grep -q "$TOPIC_REVIEWS \[0\] database 7," "$WORK/$(svc replay).out"; then
        late_stored=1
    else
        assert_contains "$(out replay)" "$TOPIC_REVIEWS [0] database 6," "the position the replay reset"
        assert_contains "$(cat "$(svc_log first)")" "batch fenced" "the late batch, fenced"
        late_stored=0
    fi

    # Start: everything is read again, and skipped, but the late review
    # when its batch was fenced.
    start_service again STORAGE_PIPELINES=reviews
    wait_all_committed "$(group_of reviews)" "$TOPIC_REVIEWS" 60
    stop_clean again
    assert_eq "19 $((1 - late_stored)) 0 $((18 + late_stored))" "$(batch_sum again reviews size) $(batch_sum again reviews inserted) $(batch_sum again reviews updated) $(batch_sum again reviews skipped)" \
        "reviews batch lines after the replay: size inserted updated skipped"
    assert_eq 19 "$(sql "SELECT count(*) FROM reviews")" "reviews stored"
    # Read once before the replay (all but a fenced late batch) and once
    # after it, each time by one batch.
    if [ "$late_stored" = 1 ]; then assert_each_offset_stored_once reviews "$TOPIC_REVIEWS" first; fi
    assert_each_offset_stored_once reviews "$TOPIC_REVIEWS" again
}

test_replay_refuses_while_the_group_has_active_members() {
    begin_test active
    register_apps com.example.active
    produce_everywhere com.example.active
    start_service svc
    wait_all_committed "$(group_of reviews)" "$TOPIC_REVIEWS"
    local before
    before=$(offsets_of "$(group_of reviews)" "$TOPIC_REVIEWS")
    assert_eq "6 6 6" "$before" "reviews offsets while the service runs"

    # Refused in seconds, and the running member never noticed: the replay
    # did not join the group, so no partition was taken from it.
    local began=$SECONDS
    op replay replay reviews --to earliest
    assert_rc 1 replay
    [ $((SECONDS - began)) -le 15 ] || fail "the refusal took $((SECONDS - began)) s (at most 15)"
    assert_eq 0 "$(log_count svc 'partitions revoked')" "revocations in the running member's log"
    assert_contains "$(err replay)" "replay refused: group $(group_of reviews) has other active members" "refusal"
    assert_contains "$(err replay)" "Stop every process running the reviews pipeline first" "refusal says what to do"
    assert_contains "$(err replay)" "Nothing was changed" "refusal"
    assert_eq "$before" "$(offsets_of "$(group_of reviews)" "$TOPIC_REVIEWS")" "offsets after the refusal"

    # The service got through the rebalances and still stores new reviews.
    review com.example.active after-refusal 1 "2026-11-29T10:00:00Z" | produce "$TOPIC_REVIEWS" -p 1
    wait_committed "$(group_of reviews)" "$TOPIC_REVIEWS" 1 7 60
    assert_eq 1 "$(sql "SELECT count(*) FROM reviews WHERE review_id = 'after-refusal'")" "review stored after the refusal"
    stop_clean svc
    assert_eq "6 7 6" "$(offsets_of "$(group_of reviews)" "$TOPIC_REVIEWS")" "offsets after the service stopped"
    assert_eq 19 "$(sql "SELECT count(*) FROM reviews")" "reviews stored"
    assert_each_offset_stored_once reviews "$TOPIC_REVIEWS" svc
}

test_replay_waits_out_a_member_that_crashed() {
    begin_test crashed
    register_apps com.example.crashed
    local i
    for i in 1 2 3 4; do review com.example.crashed "c-$i" 1 "2026-11-29T10:00:00Z"; done | produce "$TOPIC_REVIEWS" -p 2
    start_service svc STORAGE_PIPELINES=reviews
    wait_committed "$(group_of reviews)" "$TOPIC_REVIEWS" 2 4
    # Killed without leaving the group: the broker evicts it only after its
    # session timeout (6 s here); the replay waits for that, then proceeds.
    svc_kill svc >/dev/null
    op replay replay reviews
    assert_rc 0 replay
    assert_contains "$(out replay)" "$TOPIC_REVIEWS [2] database 4, Kafka committed 4 -> 0 (4 messages to read)" "partition 2"
    assert_eq "0 0 0" "$(offsets_of "$(group_of reviews)" "$TOPIC_REVIEWS")" "offsets after the replay"
}

test_replay_to_latest_skips_the_backlog() {
    begin_test latest
    register_apps com.example.latest
    local i
    for i in 1 2 3; do review com.example.latest "early-$i" 1 "2026-11-29T10:00:00Z"; done | produce "$TOPIC_REVIEWS" -p 0
    start_service first STORAGE_PIPELINES=reviews
    wait_committed "$(group_of reviews)" "$TOPIC_REVIEWS" 0 3
    stop_clean first
    # A backlog that must never be stored.
    for i in $(seq 1 10); do review com.example.latest "backlog-$i" 1 "2026-11-29T10:00:00Z"; done | produce "$TOPIC_REVIEWS" -p 1
    for i in $(seq 11 14); do review com.example.latest "backlog-$i" 1 "2026-11-29T10:00:00Z"; done | produce "$TOPIC_REVIEWS" -p 2

    op replay replay reviews --to latest
    assert_rc 0 replay
    assert_contains "$(out replay)" "$TOPIC_REVIEWS [0] database 3, Kafka committed 3 -> 3 (0 messages to read)" "partition 0"
    # Partitions 1 and 2 had no record yet: their start (the reset policy's,
    # 0) was recorded when the first run was assigned them.
    assert_contains "$(out replay)" "$TOPIC_REVIEWS [1] database 0, Kafka committed none -> 10 (0 messages to read)" "partition 1"
    assert_contains "$(out replay)" "$TOPIC_REVIEWS [2] database 0, Kafka committed none -> 4 (0 messages to read)" "partition 2"
    assert_contains "$(out replay)" "reset to latest on 3 partitions, in the database and in Kafka: 0 messages to read (was 14)" "summary"
    assert_reviews_at "3 10 4" "3 10 4" "after the replay"

    review com.example.latest after-1 1 "2026-11-29T10:00:00Z" | produce "$TOPIC_REVIEWS" -p 1
    start_service second STORAGE_PIPELINES=reviews
    wait_committed "$(group_of reviews)" "$TOPIC_REVIEWS" 1 11
    stop_clean second
    assert_eq "after-1 early-1 early-2 early-3" "$(sql "SELECT string_agg(review_id, ' ' ORDER BY review_id) FROM reviews")" "stored reviews"
    assert_eq 1 "$(batch_sum second reviews size)" "records read after the replay"
}

test_replay_to_a_timestamp_starts_there() {
    begin_test time
    register_apps com.example.time
    local p i t
    # Two generations a few seconds apart; the replay's time lies between.
    for p in 0 1 2; do
        for i in $(seq 1 $((p + 2))); do review com.example.time "old-$p-$i" 1 "2026-11-29T10:00:00Z"; done | produce "$TOPIC_REVIEWS" -p $p
    done
    sleep 1.5
    # An ISO 8601 time with a +03:30 offset (Tehran has had no DST since 2022).
    t=$(TZ=Asia/Tehran date +%Y-%m-%dT%H:%M:%S.%6N%:z)
    assert_contains "$t" "+03:30" "the time's offset"
    sleep 1.5
    for p in 0 1 2; do
        for i in 1 2 3; do review com.example.time "new-$p-$i" 1 "2026-11-29T10:00:00Z"; done | produce "$TOPIC_REVIEWS" -p $p
    done
    ingest_all first
    assert_eq "5 6 7" "$(offsets_of "$(group_of reviews)" "$TOPIC_REVIEWS")" "offsets after the first run"
    sql "DELETE FROM reviews"

    op replay replay reviews --to "$t"
    assert_rc 0 replay
    assert_contains "$(out replay)" "$TOPIC_REVIEWS [0] database 5, Kafka committed 5 -> 2 (3 messages to read)" "partition 0"
    assert_contains "$(out replay)" "$TOPIC_REVIEWS [1] database 6, Kafka committed 6 -> 3 (3 messages to read)" "partition 1"
    assert_contains "$(out replay)" "$TOPIC_REVIEWS [2] database 7, Kafka committed 7 -> 4 (3 messages to read)" "partition 2"
    assert_eq "2 3 4" "$(offsets_of "$(group_of reviews)" "$TOPIC_REVIEWS")" "offsets after the replay"

    start_service again STORAGE_PIPELINES=reviews
    wait_all_committed "$(group_of reviews)" "$TOPIC_REVIEWS"
    stop_clean again
    assert_eq "new-0-1 new-0-2 new-0-3 new-1-1 new-1-2 new-1-3 new-2-1 new-2-2 new-2-3" \
        "$(sql "SELECT string_agg(review_id, ' ' ORDER BY review_id) FROM reviews")" "reviews stored again: the newer generation only"

    # A time after every message: nothing left to read. Before all: everything.
    op future replay reviews --to 2999-01-01T00:00:00Z
    assert_rc 0 future
    assert_reviews_at "5 6 7" "5 6 7" "after a replay to the future"
    op past replay reviews --to 2000-01-01T00:00:00
    assert_rc 0 past
    assert_reviews_at "0 0 0" "0 0 0" "after a replay to the past"
}

# DESIGN.md: Progress of long work. Reading a partition to resolve a time
# (the test broker never resolves one) shows done/total on a terminal, and
# nothing when the output is piped.
test_replay_shows_reading_progress_only_on_a_terminal() {
    begin_test replay_progress
    register_apps com.example.prog
    local p i tty cmd vars
    for p in 0 1 2; do
        for i in $(seq 1 40); do review com.example.prog "r-$p-$i" 1 "2026-11-29T10:00:00Z"; done | produce "$TOPIC_REVIEWS" -p $p
    done
    ingest_all first
    op piped replay reviews --to 2000-01-01T00:00:00Z
    assert_rc 0 piped
    case "$(err piped)$(out piped)" in *"messages ("* | *$'\r'*) fail "progress on a pipe: $(err piped)" ;; esac

    mapfile -t vars < <(svc_env tty)
    cmd=$(printf '%q ' env "${vars[@]}" timeout 120 "$BIN" replay reviews --to 2000-01-01T00:00:00Z)
    tty=$(script -qec "$cmd" /dev/null)
    assert_contains "$tty" "replay: reading $TOPIC_REVIEWS [0]: 1/40 messages (2%)" "done/total on a terminal"
    assert_contains "$tty" $'\r'"replay: reading $TOPIC_REVIEWS [2]: " "rewritten in place"
    assert_eq "0 0 0" "$(offsets_of "$(group_of reviews)" "$TOPIC_REVIEWS")" "the replay ran"
}

# Both records of the group's progress move to the targets, the database's
# backwards too: it is where the service starts. The replay prints each
# record's position before, from the database's own rows.
test_replay_resets_the_database_positions_with_kafkas() {
    begin_ingested_test both
    assert_reviews_at "6 6 6" "6 6 6" "after the first run"
    # The two records apart: partition 1's position was restored from a
    # backup (the service would read 4 messages again), partition 2 has no
    # row (the first run after the upgrade).
    sql "UPDATE consumer_offsets SET next_offset = 2 WHERE group_id = '$(group_of reviews)' AND partition = 1"
    sql "DELETE FROM consumer_offsets WHERE group_id = '$(group_of reviews)' AND partition = 2"
    local stats
    stats=$(positions_of "$(group_of app-stats)" "$TOPIC_APP_STATS")

    op replay replay reviews --to earliest
    assert_rc 0 replay
    assert_contains "$(out replay)" "$TOPIC_REVIEWS [0] database 6, Kafka committed 6 -> 0 (6 messages to read)" "partition 0"
    assert_contains "$(out replay)" "$TOPIC_REVIEWS [1] database 2, Kafka committed 6 -> 0 (6 messages to read)" "partition 1"
    assert_contains "$(out replay)" "$TOPIC_REVIEWS [2] database none, Kafka committed 6 -> 0 (6 messages to read)" "partition 2"
    # Before: 0 + 4 + 0 messages to read, from where the service starts.
    assert_contains "$(out replay)" "reset to earliest on 3 partitions, in the database and in Kafka: 18 messages to read (was 4)" "summary"
    assert_reviews_at "0 0 0" "0 0 0" "after the replay"
    assert_eq "$stats" "$(positions_of "$(group_of app-stats)" "$TOPIC_APP_STATS")" "app-stats positions untouched"

    # Forward as well: to latest, both records at the end.
    op latest replay reviews --to latest
    assert_rc 0 latest
    assert_contains "$(out latest)" "$TOPIC_REVIEWS [1] database 0, Kafka committed 0 -> 6 (0 messages to read)" "partition 1"
    assert_reviews_at "6 6 6" "6 6 6" "after the replay to latest"
}

# DESIGN.md, Progress in the database: a member paused past its session
# timeout across a replay, whose batch commits after it, does not raise the
# positions the replay set (each replay moves the positions' epoch on; a
# batch raises a position only within the epoch its member started in).
test_a_replay_is_not_undone_by_a_batch_a_paused_member_commits_late() {
    begin_ingested_test fence
    assert_reviews_at "6 6 6" "6 6 6" "after the first run"
    # A member whose next batch waits on a lock, with time to spare: its
    # statement outlives the pause, the eviction and the replay.
    start_service zombie STORAGE_PIPELINES=reviews STORAGE_DB_STATEMENT_TIMEOUT_MS=60000 \
        STORAGE_DB_RETRY_MAX_ATTEMPTS=1 STORAGE_SHUTDOWN_TIMEOUT_SECONDS=90
    wait_for_log zombie '\[reviews\] partitions assigned' 1
    hold_lock reviews
    # One message: two could be fetched apart, and the second batch never
    # runs in a stopped process.
    review com.example.fence r-0-7 1 2026-11-29T10:00:00Z | produce "$TOPIC_REVIEWS" -p 0
    wait_blocked "" 30 zombie || fail "the member's batch did not wait on the lock"
    svc_signal zombie STOP
    # The group drops the paused member after its session timeout; the
    # replay waits for that.
    op replay replay reviews --to earliest
    assert_rc 0 replay
    assert_reviews_at "0 0 0" "0 0 0" "after the replay"
    # The paused member's transaction goes on: its rows, then its positions,
    # which the replay moved: fenced, the whole transaction fails (its
    # session waits, aborted, for the paused member) and its row with it.
    release_lock
    wait_for_sql "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'storage-consumer'
                  AND state = 'idle in transaction (aborted)'" 1
    assert_eq 0 "$(sql "SELECT count(*) FROM reviews WHERE review_id = 'r-0-7'")" "rows of the late batch"
    assert_eq "0 0 0" "$(positions_of "$(group_of reviews)" "$TOPIC_REVIEWS")" "positions after the late batch"
    svc_kill zombie >/dev/null
}

# The database is checked before the replay joins the group: unreachable, or
# without the table, the replay refuses with both records as they were and
# the group never rebalanced.
test_replay_refuses_with_nothing_changed_when_the_database_is_unreachable_or_lacks_the_table() {
    begin_ingested_test nodb
    local port
    port=$(cat "$PG_DIR/port")
    # The suite's server with a database that does not exist.
    OP_ENV=("STORAGE_DATABASE_URL=host=127.0.0.1 port=$port dbname=no_such_database user=postgres")
    op unreachable replay reviews --to earliest
    assert_rc 1 unreachable
    assert_contains "$(err unreachable)" "replay: cannot connect to PostgreSQL (" "refusal"
    assert_contains "$(err unreachable)" "nothing was changed" "refusal"
    if out unreachable | grep -q 'joining group'; then fail "the replay joined the group: $(out unreachable)"; fi
    assert_reviews_at "6 6 6" "6 6 6" "after the refusal"
    # The database comes before anything is asked of Kafka: with no broker
    # either (a port nobody listens on), the refusal names the database.
    OP_ENV+=("STORAGE_KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:1")
    op first-asked replay reviews --to earliest
    assert_rc 1 first-asked
    assert_contains "$(err first-asked)" "replay: cannot connect to PostgreSQL (" "refusal"

    # The database of a version before migration 0006.
    OP_ENV=()
    sql "ALTER TABLE consumer_offsets RENAME TO consumer_offsets_aside"
    op unmigrated replay reviews --to earliest
    sql "ALTER TABLE consumer_offsets_aside RENAME TO consumer_offsets"
    assert_rc 1 unmigrated
    assert_contains "$(err unmigrated)" "the database has no table consumer_offsets: apply the migrations first (storage-consumer migrate); nothing was changed" "refusal"
    if out unmigrated | grep -q 'joining group'; then fail "the replay joined the group: $(out unmigrated)"; fi
    assert_reviews_at "6 6 6" "6 6 6" "after the refusal"
}

# Kafka refuses the commit: the database's transaction is rolled back, and
# neither record moved.
test_replay_rolls_the_database_back_when_kafka_refuses_the_commit() {
    begin_ingested_test kafkafail
    trap 'end_test broker_ctl clear-request-errors OffsetCommit' EXIT
    broker_ctl request-errors OffsetCommit GROUP_AUTHORIZATION_FAILED GROUP_AUTHORIZATION_FAILED \
        GROUP_AUTHORIZATION_FAILED >/dev/null
    op replay replay reviews --to earliest
    broker_ctl clear-request-errors OffsetCommit >/dev/null
    assert_rc 1 replay
    assert_contains "$(err replay)" "replay: cannot commit the target offsets to Kafka" "failure"
    assert_contains "$(err replay)" "the database's positions were rolled back: nothing was changed, run the replay again" "failure"
    assert_reviews_at "6 6 6" "6 6 6" "after the failure"
}

# The database's COMMIT fails once Kafka took the reset (a deferred check
# refuses it): the replay says which record moved and which did not, and
# that the service would go on as if no replay happened.
test_replay_says_what_changed_when_the_database_commit_fails_after_kafkas() {
    begin_ingested_test commitfail
    sql "CREATE FUNCTION refuse_position() RETURNS trigger LANGUAGE plpgsql AS
           \$\$ BEGIN RAISE EXCEPTION 'positions refused at commit'; END \$\$"
    sql "CREATE CONSTRAINT TRIGGER refuse_position AFTER INSERT OR UPDATE ON consumer_offsets
           DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse_position()"
    op replay replay reviews --to earliest
    assert_rc 1 replay
    assert_contains "$(err replay)" "Kafka's committed offsets of group $(group_of reviews) were reset to earliest, but the database's COMMIT failed" "failure"
    assert_contains "$(err replay)" "positions refused at commit" "the server's reason"
    assert_contains "$(err replay)" "The database's positions are unchanged, and the service starts from them: it would continue as if no replay happened. Run the replay again" "failure"
    # Kafka took the reset; the database's positions are unchanged.
    assert_reviews_at "6 6 6" "0 0 0" "after the failed COMMIT"
}

test_replay_refuses_a_missing_topic_and_creates_none() {
    begin_test notopic
    TOPIC_REVIEWS="reviews-notopic-absent"
    op replay replay reviews
    assert_rc 1 replay
    assert_contains "$(err replay)" "topic $TOPIC_REVIEWS (pipeline reviews) does not exist; nothing was changed" "message"
    assert_no_topic "$TOPIC_REVIEWS"
}

test_replay_rejects_an_unknown_pipeline_with_exit_2() {
    begin_test usage
    op unknown replay reveiws --to earliest
    assert_rc 2 unknown
    assert_contains "$(err unknown)" "unknown pipeline reveiws (known: app-stats, reviews, network-metrics)" "message"
    op none replay
    assert_rc 2 none
    op bad-to replay reviews --to yesterday
    assert_rc 2 bad-to
    assert_contains "$(err bad-to)" "--to yesterday: expected earliest, latest or an ISO 8601 timestamp" "message"
    op bad-date replay reviews --to 2026-02-30T00:00:00Z
    assert_rc 2 bad-date
    op two replay reviews app-stats
    assert_rc 2 two
    op verify-arg verify --max-lag -1
    assert_rc 2 verify-arg
    op verify-extra verify extra
    assert_rc 2 verify-extra
    # None of them touched a group.
    assert_eq "-1001 -1001 -1001" "$(offsets_of "$(group_of reviews)" "$TOPIC_REVIEWS")" "reviews group offsets"
    # --help for each.
    op replay-help replay --help
    assert_rc 0 replay-help
    assert_contains "$(out replay-help)" "usage: storage-consumer replay PIPELINE [--to earliest|latest|TIMESTAMP]" "replay --help"
    op verify-help verify --help
    assert_rc 0 verify-help
    assert_contains "$(out verify-help)" "usage: storage-consumer verify" "verify --help"
    op help --help
    assert_contains "$(out help)" "verify [--max-lag N]" "storage-consumer --help"
    assert_contains "$(out help)" "replay PIPELINE [--to earliest|latest|ISO-8601]" "storage-consumer --help"
}

run_tests
