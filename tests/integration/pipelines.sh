#!/usr/bin/env bash
# The three pipelines end to end (DESIGN.md: The batch loop; Errors): the real service (sanitizer
# build) against the suite's PostgreSQL and the Kafka-protocol broker.
#
# Every test has its own database (fresh_schema), topics and consumer groups
# (fresh_topics), so tests never see each other's rows, messages or offsets.
# Each test stops the services it starts and checks they stop cleanly; a
# failing test prints the tail of every service log it started and kills the
# services still running, so one failure cannot disturb the next test.
#
# KEEP_WORK=1 keeps the suite's work directory (service logs, broker log)
# for debugging; ONLY_TESTS=REGEX runs only the tests whose names match.

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

pg_start
broker_start

# ---------------------------------------------------------------------------
# Helpers of this suite.

log_of() { cat "$(svc_log "$1")"; }

# Wait until the reviews group has committed partition 0 up to OFFSET: the
# service stored every review produced there before it.
wait_reviews_committed() { # offset
    wait_committed "$(group_of reviews)" "$TOPIC_REVIEWS" 0 "$1"
}

# The review ids stored, in order, on one line.
stored_review_ids() {
    sql "SELECT string_agg(review_id, ' ' ORDER BY review_id) FROM reviews"
}

# DESIGN.md: Dead letters log volume, batch by batch: the first 5 dead letters of a batch in
# detail, then (only if there were more) one summary line with their total.
assert_dead_letter_logging() { # name pipeline
    local problems
    problems=$(grep -E "\[$2\] (dead_letter |batch size=)" "$(svc_log "$1")" | awk '
        / dead_letter topic=/ { details++; next }
        / dead_letter summary total=/ {
            match($0, /total=[0-9]+/); total = substr($0, RSTART + 6, RLENGTH - 6)
            match($0, /not_shown=[0-9]+/); more = substr($0, RSTART + 10, RLENGTH - 10); next }
        / batch size=/ {
            match($0, /dead_lettered=[0-9]+/); dl = substr($0, RSTART + 14, RLENGTH - 14) + 0
            want = dl < 5 ? dl : 5
            if (details != want) print "batch with dead_lettered=" dl " logged " details + 0 " in detail"
            if (dl > 5 && (total != dl || more != dl - 5)) print "batch with dead_lettered=" dl ": summary total=[" total "] more=[" more "]"
            if (dl <= 5 && total != "") print "batch with dead_lettered=" dl " has a summary line"
            details = 0; total = ""; more = "" }')
    [ -z "$problems" ] || fail "dead letter logging: $problems"
}

assert_committed() { # group topic partition expected
    assert_eq "$4" "$(broker_committed "$1" "$2" "$3")" "offset committed by $1 on $2 [$3]"
}

# A review message: review PACKAGE ID THUMBS LAST_SYNCED_AT [SCORE]
review() {
    printf '{"package_name":"%s","review_id":"%s","user_name":"u-%s","content":"c %s %s","score":%s,"thumbs_up_count":%s,"app_version":"1.0","reviewed_at":"2026-11-01T00:00:00Z","last_synced_at":"%s"}\n' \
        "$1" "$2" "$2" "$2" "$3" "${5:-4}" "$3" "$4"
}

# ---------------------------------------------------------------------------
# 1. Every pipeline stores every field with the right value.

test_each_pipeline_stores_every_field_exactly() {
    begin_test fields
    register_apps com.example.other com.example.fields
    local app
    app=$(app_id com.example.fields)
    # Naive timestamps are UTC by policy, whatever the session's time zone:
    # run the service's sessions in a zone that is not UTC.
    sql "ALTER DATABASE test_fields SET timezone = 'Asia/Tehran'"

    produce "$TOPIC_APP_STATS" -p 1 <<'EOF'
{"package_name":"com.example.fields","crawled_at":"2026-11-29T15:30:00.123456+03:30","title":"Fields — «Ünïcode» \\ tab\there \\N","score":4.25,"ratings_count":12345,"reviews_count":678,"min_installs":9223372036854775807,"real_installs":9007199254740993,"histogram":[0,1,22,333,4444],"price":1234567890.12,"is_free":false,"version":"2.3.1-beta","app_updated_at":"2026-11-20T08:00:00","added_later":{"x":[1,2]}}
EOF
    produce "$TOPIC_REVIEWS" -p 0 <<'EOF'
{"package_name":"com.example.fields","review_id":"gp:full","user_name":"Ada \\N Lovelace","content":"Line one\nline two\ttabbed \\ backslash \"quoted\" 😀","score":5,"thumbs_up_count":2147483647,"app_version":"2.3.1","reviewed_at":"2026-11-28T23:59:59.999999Z","reply_content":"Thanks!\r\nDev team","replied_at":"2026-11-29T01:00:00+03:30","last_synced_at":"2026-11-29T12:00:00"}
{"package_name":"com.example.fields","review_id":"gp:minimal","user_name":null,"score":1,"thumbs_up_count":0,"reviewed_at":"2026-01-01T00:00:00Z","last_synced_at":"2026-11-29T12:00:00Z"}
{"package_name":"com.example.fields","review_id":"gp:third","user_name":"名前","content":"","score":3,"thumbs_up_count":7,"app_version":"","reviewed_at":"2026-02-03T04:05:06.7-01:00","last_synced_at":"2026-11-29T12:00:00.000001+00:00"}
EOF
    produce "$TOPIC_NETWORK_METRICS" -p 2 <<'EOF'
{"package_name":"com.example.fields","analysis_id":"6F9619FF-8B86-D011-B42D-00C04FC964FF","analyzed_at":"2026-11-29T10:00:05.5+03:30","duration_seconds":12.5,"total_packets":1500,"total_bytes":9876543210,"unique_hosts":42,"dns_queries":17,"tls_handshakes":9,"avg_packet_size":658.436,"protocols":{"tcp":1200,"udp":280,"quic":20}}
EOF

    start_service svc
    wait_for_sql "SELECT (SELECT count(*) FROM app_stats) || '/' || (SELECT count(*) FROM reviews) || '/' || (SELECT count(*) FROM network_metrics)" "1/3/1" 30

    # app_stats: +03:30 is the right UTC instant with its microseconds;
    # naive app_updated_at is UTC; BIGINT max and 2^53+1 exactly; price to
    # the cent; escapes (backslash, tab, a literal \N) survive COPY.
    assert_eq "$app" "$(sql "SELECT application_id FROM app_stats")" "app_stats.application_id"
    assert_eq '{"crawled_at":"2026-11-29T12:00:00.123456+00:00","title":"Fields — «Ünïcode» \\ tab\there \\N","score":4.25,"ratings_count":12345,"reviews_count":678,"min_installs":9223372036854775807,"real_installs":9007199254740993,"histogram":[0,1,22,333,4444],"price":1234567890.12,"is_free":false,"version":"2.3.1-beta","app_updated_at":"2026-11-20T08:00:00+00:00"}' \
        "$(usql "SELECT row_to_json(t) FROM (SELECT crawled_at, title, score, ratings_count, reviews_count, min_installs, real_installs, histogram, price, is_free, version, app_updated_at FROM app_stats) t")" \
        "app_stats row"
    assert_eq "t" "$(sql "SELECT ingested_at > now() - interval '5 minutes' FROM app_stats")" "app_stats.ingested_at is set"

    # reviews: every column, NULLs for absent and null optionals, empty
    # strings kept as empty strings, sentiment untouched.
    assert_eq "$app $app $app" "$(sql "SELECT string_agg(application_id::text, ' ') FROM reviews")" "reviews.application_id"
    assert_eq '{"review_id":"gp:full","user_name":"Ada \\N Lovelace","content":"Line one\nline two\ttabbed \\ backslash \"quoted\" 😀","score":5,"thumbs_up_count":2147483647,"app_version":"2.3.1","reviewed_at":"2026-11-28T23:59:59.999999+00:00","reply_content":"Thanks!\r\nDev team","replied_at":"2026-11-28T21:30:00+00:00","last_synced_at":"2026-11-29T12:00:00+00:00","sentiment":null,"sentiment_score":null}
{"review_id":"gp:minimal","user_name":null,"content":null,"score":1,"thumbs_up_count":0,"app_version":null,"reviewed_at":"2026-01-01T00:00:00+00:00","reply_content":null,"replied_at":null,"last_synced_at":"2026-11-29T12:00:00+00:00","sentiment":null,"sentiment_score":null}
{"review_id":"gp:third","user_name":"名前","content":"","score":3,"thumbs_up_count":7,"app_version":"","reviewed_at":"2026-02-03T05:05:06.7+00:00","reply_content":null,"replied_at":null,"last_synced_at":"2026-11-29T12:00:00.000001+00:00","sentiment":null,"sentiment_score":null}' \
        "$(usql "SELECT row_to_json(t) FROM (SELECT review_id, user_name, content, score, thumbs_up_count, app_version, reviewed_at, reply_content, replied_at, last_synced_at, sentiment, sentiment_score FROM reviews ORDER BY review_id) t")" \
        "reviews rows"
    assert_eq "3" "$(sql "SELECT count(*) FROM reviews WHERE first_seen_at > now() - interval '5 minutes'")" "reviews.first_seen_at is set"

    # network_metrics: the upper-case UUID lower-cased, protocols as jsonb.
    assert_eq "$app" "$(sql "SELECT application_id FROM network_metrics")" "network_metrics.application_id"
    assert_eq '{"analysis_id":"6f9619ff-8b86-d011-b42d-00c04fc964ff","analyzed_at":"2026-11-29T06:30:05.5+00:00","duration_seconds":12.5,"total_packets":1500,"total_bytes":9876543210,"unique_hosts":42,"dns_queries":17,"tls_handshakes":9,"avg_packet_size":658.436,"protocols":{"tcp": 1200, "udp": 280, "quic": 20}}' \
        "$(usql "SELECT row_to_json(t) FROM (SELECT analysis_id, analyzed_at, duration_seconds, total_packets, total_bytes, unique_hosts, dns_queries, tls_handshakes, avg_packet_size, protocols FROM network_metrics) t")" \
        "network_metrics row"
    assert_eq "t" "$(sql "SELECT protocols = '{\"quic\":20,\"tcp\":1200,\"udp\":280}'::jsonb AND jsonb_typeof(protocols) = 'object' FROM network_metrics")" "protocols is a jsonb object"
    assert_eq "0" "$(sql "SELECT count(*) FROM dead_letter_events")" "dead letters"

    # The INFO batch lines count what was written.
    wait_committed "$(group_of network-metrics)" "$TOPIC_NETWORK_METRICS" 2 1
    stop_clean svc
    assert_eq "1 3 1" "$(batch_sum svc app-stats inserted) $(batch_sum svc reviews inserted) $(batch_sum svc network-metrics inserted)" "inserted= of the batch lines"
    local p c
    for p in app-stats reviews network-metrics; do
        for c in updated skipped dead_lettered; do
            assert_eq 0 "$(batch_sum svc "$p" "$c")" "$p batch lines: $c="
        done
    done
    assert_contains "$(log_of svc)" "[app-stats] batch size=1 inserted=1 updated=0 skipped=0 dead_lettered=0 offsets=p1:0-0" "app-stats batch line"
}

# ---------------------------------------------------------------------------
# 2. A replay from the earliest offset changes nothing.

test_replay_from_earliest_rewrites_nothing() {
    begin_test replay
    register_apps com.example.replay com.example.second
    local i
    {
        for i in $(seq 1 40); do review com.example.replay "r$i" "$i" "2026-11-29T10:00:00Z"; done
        # A newer observation of r1..r5 (an update in the first run).
        for i in $(seq 1 5); do review com.example.replay "r$i" "$((i + 100))" "2026-11-29T11:00:00Z"; done
        echo '{"not json'
        review com.example.nobody r-unregistered 1 "2026-11-29T10:00:00Z"
    } | produce "$TOPIC_REVIEWS"
    # Keyed, so that they spread over the partitions.
    produce "$TOPIC_APP_STATS" -K'|' <<'EOF'
a|{"package_name":"com.example.replay","crawled_at":"2026-11-29T10:00:00Z","title":"Replay","score":4.5,"histogram":[1,2,3,4,5],"price":0,"is_free":true}
b|{"package_name":"com.example.replay","crawled_at":"2026-11-29T11:00:00Z","title":"Replay","score":4.6}
c|{"package_name":"com.example.second","crawled_at":"2026-11-29T10:00:00Z"}
d|{"package_name":"com.example.replay"}
EOF
    produce "$TOPIC_NETWORK_METRICS" <<'EOF'
{"package_name":"com.example.replay","analysis_id":"11111111-2222-3333-4444-555555555555","analyzed_at":"2026-11-29T10:00:00Z","duration_seconds":1.5,"total_packets":10,"total_bytes":1000,"protocols":{"tcp":10}}
{"package_name":"com.example.second","analysis_id":"21111111-2222-3333-4444-555555555555","analyzed_at":"2026-11-29T10:00:00Z","duration_seconds":2,"total_packets":20,"total_bytes":2000}
EOF

    start_service first
    local g
    for g in app-stats:"$TOPIC_APP_STATS" reviews:"$TOPIC_REVIEWS" network-metrics:"$TOPIC_NETWORK_METRICS"; do
        wait_all_committed "$(group_of "${g%%:*}")" "${g#*:}"
    done
    stop_clean first
    assert_eq "3/40/2/3" "$(sql "SELECT (SELECT count(*) FROM app_stats) || '/' || (SELECT count(*) FROM reviews) || '/' || (SELECT count(*) FROM network_metrics) || '/' || (SELECT count(*) FROM dead_letter_events)")" "rows after the first run (app_stats/reviews/network_metrics/dead letters)"
    assert_eq "5" "$(sql "SELECT count(*) FROM reviews WHERE thumbs_up_count > 100")" "newer observations applied"

    local t
    for t in app_stats reviews network_metrics dead_letter_events; do dump_table "$t" >"$WORK/replay-$t.before"; done

    # A new group reads every topic from the earliest offset: what a reset of
    # the groups to earliest does.
    GROUP_PREFIX=$GROUP_PREFIX-again
    start_service again
    for g in app-stats:"$TOPIC_APP_STATS" reviews:"$TOPIC_REVIEWS" network-metrics:"$TOPIC_NETWORK_METRICS"; do
        wait_all_committed "$(group_of "${g%%:*}")" "${g#*:}"
    done
    stop_clean again

    for t in app_stats reviews network_metrics dead_letter_events; do
        dump_table "$t" >"$WORK/replay-$t.after"
        cmp -s "$WORK/replay-$t.before" "$WORK/replay-$t.after" ||
            fail "$t changed by the replay: $(diff "$WORK/replay-$t.before" "$WORK/replay-$t.after" | head -20)"
    done
    # Nothing inserted or updated; every good record skipped.
    local p size dead
    for p in app-stats reviews network-metrics; do
        assert_eq 0 "$(batch_sum again "$p" inserted)" "$p replay: inserted="
        assert_eq 0 "$(batch_sum again "$p" updated)" "$p replay: updated="
        size=$(batch_sum again "$p" size)
        dead=$(batch_sum again "$p" dead_lettered)
        assert_eq "$((size - dead))" "$(batch_sum again "$p" skipped)" "$p replay: skipped= (size=$size dead_lettered=$dead)"
    done
    assert_eq "4/47/2" "$(batch_sum again app-stats size)/$(batch_sum again reviews size)/$(batch_sum again network-metrics size)" "records replayed"
    assert_eq "3/45/2" "$(batch_sum again app-stats skipped)/$(batch_sum again reviews skipped)/$(batch_sum again network-metrics skipped)" "records skipped by the replay"
}

# New reviews of APP with ids PREFIX<FROM>..PREFIX<TO>, keyed by their ids
# ("KEY|JSON" lines for produce -K'|'), one thumbs up, synced at 10:00.
keyed_reviews() { # app prefix from to
    local i
    for i in $(seq "$3" "$4"); do printf '%s%s|' "$2" "$i"; review "$1" "$2$i" 1 "2026-11-29T10:00:00Z"; done
}

# A redelivered backlog (DESIGN.md: The write path): once a batch has found
# most of its rows already stored, the next ones first probe their keys and
# versions and send only what would change, so a redelivery neither writes
# nor even locks the rows it skips; a review re-observed meanwhile is still
# updated, and a new one inserted.
test_a_redelivered_backlog_is_found_stored_by_a_probe_and_left_unlocked() {
    begin_test probe
    register_apps com.example.probe
    backlog() { keyed_reviews com.example.probe p 1 1500; }
    { backlog; printf 'x7|'; review com.example.probe x7 1 "2026-11-29T10:00:00Z"; } | produce "$TOPIC_REVIEWS" -K'|'
    start_service first STORAGE_PIPELINES=reviews STORAGE_MAX_POLL_RECORDS_REVIEWS=100
    wait_all_committed "$(group_of reviews)" "$TOPIC_REVIEWS"
    stop_clean first
    assert_eq 0 "$(sql "SELECT count(*) FROM reviews WHERE xmax <> '0'")" "rows locked after the first ingest"

    # The next run reads a topic that holds the backlog again, x7 re-observed
    # and p9999 new, under a new group.
    TOPIC_REVIEWS=$TOPIC_REVIEWS-next GROUP_PREFIX=$GROUP_PREFIX-next
    broker_ctl topic-create "$TOPIC_REVIEWS" 3 >/dev/null
    { backlog; printf 'x7|'; review com.example.probe x7 55 "2026-11-29T11:00:00Z"; printf 'p9999|'
      review com.example.probe p9999 3 "2026-11-29T11:00:00Z"; } | produce "$TOPIC_REVIEWS" -K'|'
    start_service next STORAGE_PIPELINES=reviews STORAGE_MAX_POLL_RECORDS_REVIEWS=100
    wait_all_committed "$(group_of reviews)" "$TOPIC_REVIEWS"
    stop_clean next

    local skipped probed batches
    skipped=$(batch_sum next reviews skipped)
    probed=$(batch_sum next reviews skipped_by_probe)
    batches=$(batch_lines next reviews)
    assert_eq 1500 "$skipped" "records skipped"
    assert_eq "1/1/55/1502" "$(batch_sum next reviews inserted)/$(batch_sum next reviews updated)/$(sql "SELECT thumbs_up_count FROM reviews WHERE review_id = 'x7'")/$(sql "SELECT count(*) FROM reviews")" \
        "inserted/updated, x7's thumbs up, rows"
    # Only the batches before the first that found its rows stored went
    # through the upsert, which locks even the rows it skips (x7, updated,
    # carries its update's lock).
    [ "$probed" -ge $((1500 - 3 * 100)) ] || fail "only $probed of 1500 skipped records were found by the probe ($batches batches)"
    assert_eq "$((skipped - probed))" "$(sql "SELECT count(*) FROM reviews WHERE xmax <> '0' AND review_id <> 'x7'")" \
        "rows locked: those the upserts skipped"
}

# The probe is a statement prepared in the pipeline's session (DESIGN.md:
# The write path): a session the server ended (a restart, a terminated
# backend, a pooler's reconnect) takes the prepared probe with it, and the
# batches of the new session must prepare it again and keep skipping, not
# fail on a statement that no longer exists.
test_a_replay_keeps_probing_after_its_session_is_lost() {
    begin_test reprobe
    register_apps com.example.reprobe
    backlog() { keyed_reviews com.example.reprobe r "$1" "$2"; }
    backlog 1 600 | produce "$TOPIC_REVIEWS" -K'|'
    start_service first STORAGE_PIPELINES=reviews STORAGE_MAX_POLL_RECORDS_REVIEWS=100
    wait_all_committed "$(group_of reviews)" "$TOPIC_REVIEWS"
    stop_clean first

    TOPIC_REVIEWS=$TOPIC_REVIEWS-again GROUP_PREFIX=$GROUP_PREFIX-again
    broker_ctl topic-create "$TOPIC_REVIEWS" 3 >/dev/null
    backlog 1 300 | produce "$TOPIC_REVIEWS" -K'|'
    start_service again STORAGE_PIPELINES=reviews STORAGE_MAX_POLL_RECORDS_REVIEWS=100
    wait_all_committed "$(group_of reviews)" "$TOPIC_REVIEWS"
    local before ended
    before=$(batch_sum again reviews skipped_by_probe)
    [ "$before" -ge 200 ] || fail "the replay's first 300 records: only $before found by the probe"
    ended=$(sql "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'storage-consumer'")
    [ "$ended" -ge 1 ] || fail "no session of the service to end"
    backlog 301 600 | produce "$TOPIC_REVIEWS" -K'|'
    wait_all_committed "$(group_of reviews)" "$TOPIC_REVIEWS"
    stop_clean again

    # The batch that met the ended session is retried on a new one, and it
    # and every batch after it are probed again.
    assert_eq "0/600/300" \
        "$(batch_sum again reviews inserted)/$(batch_sum again reviews skipped)/$(($(batch_sum again reviews skipped_by_probe) - before))" \
        "inserted/skipped/found by the probe after the session ended"
    ! grep -q "the probe of stored rows failed" "$(svc_log again)" || fail "the probe failed after the session ended"
}

# A fresh ingest (DESIGN.md: The write path): once a batch has inserted
# every row, the next is COPYed straight into the table, with no staging
# table and no upsert. A batch so predicted that meets a stored key (a
# re-observation amid new reviews) is written again at once by the guarded
# upsert, in the same attempt: nothing is dead-lettered or retried, the
# stored review is updated, and the batches after it go back to COPY once
# one inserts every row again.
test_a_fresh_backlog_is_copied_into_the_table_and_a_stored_key_falls_back_to_the_upsert() {
    begin_test direct
    register_apps com.example.direct
    fresh() { keyed_reviews com.example.direct d "$1" "$2"; }
    fresh 1 1500 | produce "$TOPIC_REVIEWS" -K'|'
    start_service direct STORAGE_PIPELINES=reviews STORAGE_MAX_POLL_RECORDS_REVIEWS=100 STORAGE_LOG_LEVEL=debug
    wait_all_committed "$(group_of reviews)" "$TOPIC_REVIEWS"
    local copied
    copied=$(batch_sum direct reviews inserted_by_copy)
    # Only the batches up to the first that inserted all its rows upserted.
    [ "$copied" -ge $((1500 - 3 * 100)) ] || fail "only $copied of 1500 new rows were COPYed into the table ($(batch_lines direct reviews) batches)"
    assert_eq "1500/0/0" "$(batch_sum direct reviews inserted)/$(batch_sum direct reviews updated)/$(batch_sum direct reviews skipped)" \
        "inserted/updated/skipped of the first backlog"

    # More new reviews with d7 re-observed among them, read by the same
    # running service: d7's batch is predicted new and meets d7 stored.
    { fresh 1501 1800; printf 'd7|'; review com.example.direct d7 77 "2026-11-29T11:00:00Z"; fresh 1801 2400; } |
        produce "$TOPIC_REVIEWS" -K'|'
    wait_all_committed "$(group_of reviews)" "$TOPIC_REVIEWS"
    stop_clean direct
    assert_eq "2400/1/0/0" "$(batch_sum direct reviews inserted)/$(batch_sum direct reviews updated)/$(batch_sum direct reviews skipped)/$(batch_sum direct reviews dead_lettered)" \
        "inserted/updated/skipped/dead-lettered in all"
    assert_eq "77/2400" "$(sql "SELECT thumbs_up_count FROM reviews WHERE review_id = 'd7'")/$(sql "SELECT count(*) FROM reviews")" \
        "d7's thumbs up, rows"
    assert_eq 1 "$(grep -c 'a batch predicted new was refused by the table' "$(svc_log direct)")" "fallbacks to the upsert"
    assert_contains "$(grep -F 'a batch predicted new was refused' "$(svc_log direct)")" "23505" "the fallback's reason"
    # d7's batch was written by the upsert alone; the second backlog's other
    # batches by COPY again, but the one after d7's.
    assert_eq 0 "$(grep -E 'info +\[reviews\] batch size=.* updated=1 ' "$(svc_log direct)" | grep -oE ' inserted_by_copy=[0-9]+' | cut -d= -f2)" \
        "rows COPYed in d7's batch"
    copied=$(batch_sum direct reviews inserted_by_copy)
    [ "$copied" -ge $((2400 - 3 * 100 - 2 * 100)) ] || fail "only $copied of 2400 new rows were COPYed into the table"
    assert_eq 0 "$(grep -cE 'retry|isolating' "$(svc_log direct)")" "retries or isolation"
}

# A concurrent writer of a new key (DESIGN.md: The write path): another
# transaction inserts c250, a newer observation, and holds it uncommitted
# while the service COPYs a batch predicted new that holds c250 too. The
# COPY waits for that transaction, then meets c250 stored (23505); the batch
# is written again by the guarded upsert, which keeps the newer row and
# stores the rest, with no retry and no dead letter.
test_a_new_key_a_concurrent_writer_stores_first_is_settled_by_the_upsert() {
    begin_test race
    register_apps com.example.race
    fresh() { keyed_reviews com.example.race c "$1" "$2"; }
    fresh 1 200 | produce "$TOPIC_REVIEWS" -K'|'
    start_service race STORAGE_PIPELINES=reviews STORAGE_MAX_POLL_RECORDS_REVIEWS=100 STORAGE_LOG_LEVEL=debug
    wait_all_committed "$(group_of reviews)" "$TOPIC_REVIEWS"
    sql "BEGIN; INSERT INTO reviews (application_id, review_id, score, thumbs_up_count, reviewed_at, last_synced_at)
         SELECT id, 'c250', 5, 99, '2026-11-29T09:00:00Z', '2026-11-29T12:00:00Z'
         FROM apps_registry_application WHERE package_name = 'com.example.race';
         SELECT pg_sleep(4); COMMIT" >/dev/null &
    local writer=$!
    wait_for_sql "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(4)%' AND state = 'active' AND pid <> pg_backend_pid()" 1
    fresh 201 300 | produce "$TOPIC_REVIEWS" -K'|'
    wait "$writer" || fail "the concurrent writer failed"
    wait_all_committed "$(group_of reviews)" "$TOPIC_REVIEWS"
    stop_clean race
    assert_eq "299/0/1/0" "$(batch_sum race reviews inserted)/$(batch_sum race reviews updated)/$(batch_sum race reviews skipped)/$(batch_sum race reviews dead_lettered)" \
        "inserted/updated/skipped/dead-lettered"
    assert_eq "99/300" "$(sql "SELECT thumbs_up_count FROM reviews WHERE review_id = 'c250'")/$(sql "SELECT count(*) FROM reviews")" \
        "c250's thumbs up (the concurrent writer's newer row), rows"
    assert_contains "$(grep -F 'a batch predicted new was refused by the table' "$(svc_log race)")" "23505" "the fallback's reason"
    assert_eq 0 "$(grep -cE 'retry|isolating' "$(svc_log race)")" "retries or isolation"
}

# The prediction earns COPY back gradually (DESIGN.md: The write path):
# batches that alternate between only new reviews and new reviews with one
# stored review among them cost a few fall-backs from a COPY, not one every
# other batch, each leaving the rows it COPYed as dead tuples.
test_batches_alternating_new_rows_and_a_stored_key_cost_a_few_fall_backs() {
    begin_test alternate
    register_apps com.example.alt
    keyed_reviews com.example.alt h 1 100 | produce "$TOPIC_REVIEWS" -K'|' -p 0
    local k i
    for k in $(seq 1 20); do
        for i in $(seq 1 100); do
            if [ $((k % 2)) = 1 ] && [ "$i" = 50 ]; then
                printf 'h%s|' "$k"; review com.example.alt "h$k" 7 "2026-11-29T11:00:00Z"
            else
                printf 'a%s-%s|' "$k" "$i"; review com.example.alt "a$k-$i" 1 "2026-11-29T10:00:00Z"
            fi
        done
    done | produce "$TOPIC_REVIEWS" -K'|' -p 0
    start_service alt STORAGE_PIPELINES=reviews STORAGE_MAX_POLL_RECORDS_REVIEWS=100 STORAGE_LOG_LEVEL=debug
    wait_committed "$(group_of reviews)" "$TOPIC_REVIEWS" 0 2100
    stop_clean alt
    assert_eq "2090/10/0/0" "$(batch_sum alt reviews inserted)/$(batch_sum alt reviews updated)/$(batch_sum alt reviews skipped)/$(batch_sum alt reviews dead_lettered)" \
        "inserted/updated/skipped/dead-lettered"
    assert_eq 10 "$(sql "SELECT count(*) FROM reviews WHERE thumbs_up_count = 7")" "re-observed reviews updated"
    local fallbacks
    fallbacks=$(grep -c 'a batch predicted new was refused by the table' "$(svc_log alt)" || true)
    [ "$fallbacks" -ge 1 ] || fail "no batch met a stored key after a COPY: the test set nothing up ($(batch_lines alt reviews) batches)"
    [ "$fallbacks" -le 3 ] || fail "$fallbacks fall-backs from a COPY for 10 batches with a stored key among 21"
}

# Records a transactional producer sent (its transactions committed) beside
# a plain producer's are stored, and trip nothing: the committed offsets reach
# the high watermarks (lag 0), verify's lag stage is ok, the stalled-fetch
# check stays quiet past its limit, and a replay reads everything again.
# librdkafka 2.0.2's mock writes no commit markers (each partition's high
# watermark is its record count) and does not filter aborted transactions,
# so neither the markers' offset gaps nor read_committed can be shown here
# (DESIGN.md: Progress in the database): the name says what is shown.
test_a_transactional_producers_records_without_markers_are_stored_beside_a_plain_producers() {
    begin_test txn
    register_apps com.example.txn
    cc -std=c11 -D_GNU_SOURCE -O1 -o "$WORK/produce" "$TOP/tests/hostile/produce.c" $(pkg-config --cflags --libs rdkafka) ||
        fail "cannot build tests/hostile/produce.c"
    local i
    for i in $(seq 1 6); do
        review com.example.txn "t$i" "$i" "2026-11-29T10:00:00Z" >"$WORK/txn-$i.json"
        printf '%s\t%s\t-\t-\t-\n' $((i % 3)) "$WORK/txn-$i.json"
    done >"$WORK/txn.plan"
    for i in 1 2 3; do review com.example.txn "plain$i" "$i" "2026-11-29T10:00:00Z"; done | produce "$TOPIC_REVIEWS" -p 0
    PRODUCE_TRANSACTIONAL_ID=txn-a "$WORK/produce" "$BOOTSTRAP" "$TOPIC_REVIEWS" <"$WORK/txn.plan" >/dev/null ||
        fail "the transactional producer failed"
    review com.example.txn plain4 4 "2026-11-29T10:00:00Z" | produce "$TOPIC_REVIEWS" -p 0

    start_service txn STORAGE_PIPELINES=reviews STORAGE_FETCH_STALL_SECONDS=3
    wait_all_committed "$(group_of reviews)" "$TOPIC_REVIEWS" 60
    assert_eq 10 "$(sql "SELECT count(*) FROM reviews")" "reviews stored"
    # Past the stalled-fetch limit (3 s) from the last record, and a check
    # (every 0.5 s) on either side of it.
    wait_until_ms $(($(log_ms txn '\[reviews\] batch size=' last) + 3000 + 2 * 500))
    assert_running txn
    assert_eq 0 "$(log_count txn 'no record fetched')" "stalls reported"
    stop_clean txn
    OP_ENV=(STORAGE_PIPELINES=reviews)
    op verify verify
    assert_eq 0 "$OP_RC" "verify's exit"
    assert_contains "$(out verify | grep '^lag ')" "ok" "verify's lag stage"
    op replay replay reviews --to earliest
    assert_eq 0 "$OP_RC" "replay's exit"
    assert_contains "$(out replay)" "reset to earliest on 3 partitions" "the replay"
    start_service again STORAGE_PIPELINES=reviews STORAGE_FETCH_STALL_SECONDS=3
    wait_all_committed "$(group_of reviews)" "$TOPIC_REVIEWS" 60
    stop_clean again
    assert_eq "10 0" "$(batch_sum again reviews skipped) $(batch_sum again reviews inserted)" "the replay read every record again, skipped"
}

# ---------------------------------------------------------------------------
# 3. reviews: the latest observation wins; first_seen_at and the sentiment
# columns are never touched.

test_reviews_keep_the_latest_observation_and_leave_first_seen_and_sentiment_alone() {
    begin_test latest
    register_apps com.example.latest
    local app=com.example.latest group
    group=$(group_of reviews)
    # Two observations of one review in one batch, in both orders: the later
    # last_synced_at wins whatever the order. Same key, same partition,
    # produced before the service starts, so they arrive in one batch.
    {
        review $app solo 10 "2026-11-29T10:00:00Z"
        review $app newer-first 50 "2026-11-29T12:00:00Z"
        review $app newer-first 40 "2026-11-29T11:00:00Z"
        review $app older-first 40 "2026-11-29T11:00:00Z"
        review $app older-first 50 "2026-11-29T12:00:00Z"
    } | sed 's/^/k:/' | produce "$TOPIC_REVIEWS" -p 0 -K:

    start_service svc
    wait_committed "$group" "$TOPIC_REVIEWS" 0 5
    assert_eq "1" "$(batch_lines svc reviews)" "the five observations came in one batch"
    assert_contains "$(log_of svc)" "[reviews] batch size=5 inserted=3 updated=0 skipped=2 dead_lettered=0" "batch line"
    assert_eq "newer-first 50 2026-11-29 12:00:00+00
older-first 50 2026-11-29 12:00:00+00
solo 10 2026-11-29 10:00:00+00" \
        "$(usql "SELECT review_id, thumbs_up_count, last_synced_at FROM reviews ORDER BY review_id" | tr '|' ' ')" \
        "in-batch duplicates: the later observation wins"

    # The sentiment subsystem's columns, and a first_seen_at we can recognise.
    sql "UPDATE reviews SET sentiment = 'positive', sentiment_score = 0.75,
                first_seen_at = '2020-01-02 03:04:05.678901+00' WHERE review_id = 'solo'" >/dev/null

    # An older observation arriving later is skipped by the guard.
    review $app solo 5 "2026-11-29T09:00:00Z" 1 | produce "$TOPIC_REVIEWS" -p 0
    wait_committed "$group" "$TOPIC_REVIEWS" 0 6
    assert_eq "solo|u-solo|c solo 10|4|10|2026-11-29 10:00:00+00" \
        "$(usql "SELECT review_id, user_name, content, score, thumbs_up_count, last_synced_at FROM reviews WHERE review_id = 'solo'")" \
        "an older observation changes nothing"
    assert_contains "$(log_of svc)" "[reviews] batch size=1 inserted=0 updated=0 skipped=1 dead_lettered=0" "batch line of the older observation"

    # A newer one updates the observed state, and nothing else.
    printf '%s\n' '{"package_name":"com.example.latest","review_id":"solo","user_name":"renamed","content":"edited","score":2,"thumbs_up_count":20,"app_version":"2.0","reviewed_at":"2026-11-02T00:00:00Z","reply_content":"a reply","replied_at":"2026-11-29T10:30:00Z","last_synced_at":"2026-11-29T13:00:00Z"}' |
        produce "$TOPIC_REVIEWS" -p 0
    wait_committed "$group" "$TOPIC_REVIEWS" 0 7
    assert_contains "$(log_of svc)" "[reviews] batch size=1 inserted=0 updated=1 skipped=0 dead_lettered=0" "batch line of the newer observation"
    assert_eq "solo|2|20|edited|a reply|2026-11-29 10:30:00+00|2.0|2026-11-29 13:00:00+00" \
        "$(usql "SELECT review_id, score, thumbs_up_count, content, reply_content, replied_at, app_version, last_synced_at FROM reviews WHERE review_id = 'solo'")" \
        "a newer observation updates the review"
    assert_eq "positive|0.75|2020-01-02 03:04:05.678901+00" \
        "$(usql "SELECT sentiment, sentiment_score, first_seen_at FROM reviews WHERE review_id = 'solo'")" \
        "sentiment, sentiment_score and first_seen_at are never written"
    stop_clean svc
}

# ---------------------------------------------------------------------------
# 4. Bad records go to dead_letter_events beside the good rows of their batch,
# byte-exact, and the offsets move past all of them.

test_bad_records_are_dead_lettered_beside_the_good_rows_of_their_batch() {
    begin_test badmix
    register_apps com.example.good
    local app=com.example.good
    # Partition 0, offsets in production order (one kcat per special kind).
    {
        review $app good-1 1 "2026-11-29T10:00:00Z"                                   # 0
        echo '{"package_name":"com.example.good","review_id":"x",'                     # 1 truncated
        echo '{"package_name":"com.example.good","package_name":"com.evil"}'           # 2 duplicate key
        echo '[1,2,3]'                                                                 # 3 not an object
        printf '{"package_name":"com.example.good","review_id":"bad\xff\xfeutf8"}\n'   # 4 invalid UTF-8
        echo '{"package_name":"com.example.good","score":5,"thumbs_up_count":1,"reviewed_at":"2026-11-01T00:00:00Z","last_synced_at":"2026-11-29T10:00:00Z"}' # 5 no review_id
        review $app bad-score 1 "2026-11-29T10:00:00Z" 7                               # 6 score out of range
        review com.example.unknown unregistered 1 "2026-11-29T10:00:00Z"               # 7
        review $app good-2 2 "2026-11-29T10:00:00Z"                                    # 8
    } | produce "$TOPIC_REVIEWS" -p 0
    printf 'tomb\\stone:\n' | produce "$TOPIC_REVIEWS" -p 0 -K: -Z                     # 9 tombstone (NULL value)
    printf 'empty:\n' | produce "$TOPIC_REVIEWS" -p 0 -K:                              # 10 empty value
    printf '%s\n' '{"package_name":"com.example.good","review_id":"nul","content":"a\u0000b","score":1,"thumbs_up_count":1,"reviewed_at":"2026-11-01T00:00:00Z","last_synced_at":"2026-11-29T10:00:00Z"}' |
        produce "$TOPIC_REVIEWS" -p 0                                                  # 11 NUL in a string

    start_service svc
    local group
    group=$(group_of reviews)
    wait_committed "$group" "$TOPIC_REVIEWS" 0 12
    # The batch lines count the dead letters; per batch the first 5 are
    # logged in detail, then one summary line grouped by reason. (The mock
    # broker may hand partition 0 over in more than one fetch: one batch per
    # kcat call above.)
    assert_eq "2 10 0 0" "$(batch_sum svc reviews inserted) $(batch_sum svc reviews dead_lettered) $(batch_sum svc reviews updated) $(batch_sum svc reviews skipped)" "batch lines: inserted, dead_lettered, updated, skipped"
    assert_dead_letter_logging svc reviews
    assert_contains "$(log_of svc)" "by_error_type=\"invalid_json=3 invalid_utf8=1 missing_field=1 invalid_field=" "summary line grouped by reason"

    # The other partitions too.
    review $app good-3 3 "2026-11-29T10:00:00Z" | produce "$TOPIC_REVIEWS" -p 1
    echo 'garbage on partition 2' | produce "$TOPIC_REVIEWS" -p 2
    wait_committed "$group" "$TOPIC_REVIEWS" 1 1
    wait_committed "$group" "$TOPIC_REVIEWS" 2 1
    # Offsets past all of them: the committed offset of every partition is its
    # high watermark.
    local p
    for p in 0 1 2; do
        assert_committed "$group" "$TOPIC_REVIEWS" "$p" "$(high_watermark "$TOPIC_REVIEWS" "$p")"
    done
    assert_broker_kept_everything "$TOPIC_REVIEWS"

    assert_eq "good-1 good-2 good-3" "$(stored_review_ids)" "good rows stored"
    assert_eq "0 1 invalid_json
0 2 invalid_json
0 3 invalid_json
0 4 invalid_utf8
0 5 missing_field
0 6 invalid_field
0 7 unregistered_app
0 9 empty_payload
0 10 empty_payload
0 11 invalid_field
2 0 invalid_json" \
        "$(sql "SELECT partition, kafka_offset, error_type FROM dead_letter_events WHERE topic = '$TOPIC_REVIEWS' ORDER BY partition, kafka_offset" | tr '|' ' ')" \
        "dead letters and their error_type"
    assert_eq 11 "$(sql "SELECT count(*) FROM dead_letter_events")" "no other dead letters"

    # Payloads byte-exact (bytea), sizes, keys, timestamps.
    local row off expected
    for row in "1:{\"package_name\":\"com.example.good\",\"review_id\":\"x\"," \
               "3:[1,2,3]" \
               "7:$(review com.example.unknown unregistered 1 2026-11-29T10:00:00Z)"; do
        off=${row%%:*}
        expected=${row#*:}
        assert_eq "$(printf '%s' "$expected" | xxd -p | tr -d '\n') ${#expected}" \
            "$(sql "SELECT encode(payload, 'hex') || ' ' || payload_size FROM dead_letter_events WHERE partition = 0 AND kafka_offset = $off")" \
            "payload of offset $off"
    done
    assert_eq "$(printf '{"package_name":"com.example.good","review_id":"bad\xff\xfeutf8"}' | xxd -p | tr -d '\n') 59" \
        "$(sql "SELECT encode(payload, 'hex') || ' ' || payload_size FROM dead_letter_events WHERE partition = 0 AND kafka_offset = 4")" \
        "invalid UTF-8 payload stored byte-exact"
    assert_eq "$(printf 'tomb\\stone' | xxd -p) 0 []" \
        "$(sql "SELECT encode(message_key, 'hex') || ' ' || payload_size || ' [' || encode(payload, 'hex') || ']' FROM dead_letter_events WHERE partition = 0 AND kafka_offset = 9")" \
        "tombstone: key kept, empty payload"
    assert_eq "\\x656d707479|0|\\x" \
        "$(sql "SELECT message_key, payload_size, payload FROM dead_letter_events WHERE partition = 0 AND kafka_offset = 10")" \
        "empty value: key kept, empty payload"
    assert_eq 11 "$(sql "SELECT count(*) FROM dead_letter_events WHERE kafka_timestamp > now() - interval '10 minutes' AND created_at > now() - interval '10 minutes'")" "kafka_timestamp and created_at set"
    assert_eq 9 "$(sql "SELECT count(*) FROM dead_letter_events WHERE message_key IS NULL")" "records without a key have a NULL message_key"

    # error_detail names the field and the problem.
    local detail
    detail=$(sql "SELECT kafka_offset || ': ' || error_detail FROM dead_letter_events WHERE partition = 0 ORDER BY kafka_offset")
    assert_contains "$detail" "5: review_id" "missing_field names the field"
    assert_contains "$detail" "6: score" "invalid_field names the field"
    assert_contains "$detail" "7: package_name: com.example.unknown" "unregistered_app names the package"
    assert_contains "$detail" "11: content" "a NUL character names the field"
    [ "$(sql "SELECT count(*) FROM dead_letter_events WHERE length(error_detail) < 10")" = 0 ] ||
        fail "an error_detail says nothing: $detail"
    stop_clean svc
}

# DESIGN.md: Logs: with STORAGE_LOG_FORMAT=json an event's facts are members
# of its object, numbers as JSON numbers, not text inside "msg"; and every
# line of a whole run (migrations, librdkafka, the pipelines, the stop) is
# one JSON object.
test_json_logs_carry_batch_facts_as_fields() {
    begin_test jsonlogs
    register_apps com.example.json
    {
        review com.example.json j-1 1 "2026-11-29T10:00:00Z"      # 0
        review com.example.nobody j-2 1 "2026-11-29T10:00:00Z"    # 1 unregistered_app
        echo '{"broken'                                           # 2 invalid_json
        review com.example.json j-3 1 "2026-11-29T10:00:00Z"      # 3
    } | produce "$TOPIC_REVIEWS" -p 1
    start_service svc STORAGE_PIPELINES=reviews STORAGE_LOG_FORMAT=json
    wait_committed "$(group_of reviews)" "$TOPIC_REVIEWS" 1 4
    assert_eq 0 "$(svc_stop svc)" "exit code on SIGTERM"
    local log
    log=$(svc_log svc)

    assert_eq "" "$(jq -R 'fromjson? // "NOT JSON: \(.)" | strings' "$log" | head -n 3)" "lines that are not JSON objects"
    assert_eq "$(wc -l <"$log")" "$(jq -R 'fromjson? | objects' "$log" | jq -s length)" "lines that are JSON objects"
    assert_eq "0" "$(jq -c 'select(.component == "supervisor" and .msg == "stopped") | .exit' "$log")" "the stop line's exit, a number"

    # The batch lines: counts, offsets and duration as typed members.
    local batches
    batches=$(jq -c 'select(.component == "reviews" and .msg == "batch")' "$log")
    [ -n "$batches" ] || fail "no batch line: $(head -n 20 "$log")"
    assert_eq "number" "$(echo "$batches" | jq -r '[.size, .inserted, .updated, .skipped, .dead_lettered, .duration_ms,
        (.offsets[] | .partition, .first, .last)] | map(type) | unique | join(",")' | sort -u | xargs)" "types of the batch members"
    assert_eq "4 2 0 0 2" "$(echo "$batches" | jq -s -r '[map(.size), map(.inserted), map(.updated), map(.skipped), map(.dead_lettered)] | map(add) | join(" ")')" \
        "size, inserted, updated, skipped, dead_lettered over the batch lines"
    assert_eq "1:0-3" "$(echo "$batches" | jq -s -r '[.[].offsets[]] | "\(map(.partition) | unique | join(",")):\(map(.first) | min)-\(map(.last) | max)"')" \
        "partition and offsets the batch lines cover"
    assert_eq "$TOPIC_REVIEWS" "$(echo "$batches" | jq -r .topic | sort -u)" "topic of the batch lines"
    assert_eq "" "$(echo "$batches" | jq -r 'select(.msg | contains("=")) | .msg')" "facts left inside msg"

    # The dead letters: partition, offset and error_type as members.
    assert_eq "1 1 unregistered_app|1 2 invalid_json" \
        "$(jq -r 'select(.msg == "dead_letter") | "\(.partition) \(.offset) \(.error_type)"' "$log" | sort | paste -sd '|')" \
        "dead letter lines: partition, offset, error_type"
    assert_eq "number number string string" \
        "$(jq -r 'select(.msg == "dead_letter") | [.partition, .offset, .error_type, .detail] | map(type) | join(" ")' "$log" | sort -u)" \
        "types of the dead letter members"
}

# ---------------------------------------------------------------------------
# 5. An unregistered app is a dead letter until it is registered; no negative
# cache; inactive apps are stored.

test_an_app_registered_later_is_stored_at_once_and_inactive_apps_are_stored() {
    begin_test register
    register_apps com.example.known com.example.retired
    sql "UPDATE apps_registry_application SET is_active = false WHERE package_name = 'com.example.retired'" >/dev/null
    local group
    group=$(group_of reviews)

    # The default cache TTL (300 s): a negative cache entry would hide the
    # registration for five minutes.
    start_service svc
    {
        review com.example.known k-1 1 "2026-11-29T10:00:00Z"
        review com.example.late late-1 1 "2026-11-29T10:00:00Z"
        review com.example.retired retired-1 1 "2026-11-29T10:00:00Z"
    } | produce "$TOPIC_REVIEWS" -p 0
    wait_committed "$group" "$TOPIC_REVIEWS" 0 3
    assert_eq "k-1 retired-1" "$(stored_review_ids)" "registered apps stored, inactive included"
    assert_eq "1|unregistered_app" "$(sql "SELECT kafka_offset, error_type FROM dead_letter_events")" "unregistered app dead-lettered"
    assert_eq "$(app_id com.example.retired)" "$(sql "SELECT application_id FROM reviews WHERE review_id = 'retired-1'")" "inactive app's id"

    register_apps com.example.late
    review com.example.late late-2 2 "2026-11-29T11:00:00Z" | produce "$TOPIC_REVIEWS" -p 0
    wait_committed "$group" "$TOPIC_REVIEWS" 0 4
    assert_eq "$(app_id com.example.late)" "$(sql "SELECT application_id FROM reviews WHERE review_id = 'late-2'")" "the app registered meanwhile is seen on the next batch"
    assert_eq "1" "$(sql "SELECT count(*) FROM dead_letter_events")" "no new dead letter"
    assert_eq "0" "$(sql "SELECT count(*) FROM reviews WHERE review_id = 'late-1'")" "the dead letter is not stored retroactively"
    stop_clean svc
}

# ---------------------------------------------------------------------------
# 5a. The application registry at production shape: thousands of apps, TTLs
# that expire mid-batch, a TTL of 0. A registered app is never dead-lettered.

# COUNT apps com.shape.app1 .. com.shape.appCOUNT, registered in one statement.
register_many_apps() { # count
    sql "INSERT INTO apps_registry_application (package_name, name)
         SELECT 'com.shape.app' || g, 'app ' || g FROM generate_series(1, $1) g" >/dev/null
}

# One app-stats message per app for apps 1..COUNT, crawled at CRAWLED_AT.
app_stats_crawl() { # count crawled_at
    awk -v n="$1" -v at="$2" 'BEGIN { for (i = 1; i <= n; i++)
        printf "{\"package_name\":\"com.shape.app%d\",\"crawled_at\":\"%s\",\"score\":4.5,\"ratings_count\":%d}\n", i, at, i }'
}

test_thousands_of_registered_apps_are_all_stored_and_none_dead_lettered() {
    begin_test thousands
    # More names than the cache's first table holds, so it grows while
    # batches are being resolved.
    register_many_apps 1500
    { app_stats_crawl 1500 "2026-11-29T10:00:00Z"; app_stats_crawl 1500 "2026-11-29T11:00:00Z"; } |
        produce "$TOPIC_APP_STATS"
    start_service svc STORAGE_PIPELINES=app-stats
    wait_all_committed "$(group_of app-stats)" "$TOPIC_APP_STATS" 60
    assert_broker_kept_everything "$TOPIC_APP_STATS"
    assert_eq "0" "$(sql "SELECT count(*) FROM dead_letter_events")" "dead letters of registered apps"
    assert_eq "3000" "$(sql "SELECT count(*) FROM app_stats")" "app_stats rows"
    stop_clean svc
}

# A name that was fresh when its batch began stays resolved while the
# registry query for the batch's other names waits (here on a lock), even
# when its TTL passes meanwhile.
test_a_name_whose_ttl_passes_while_the_registry_query_waits_is_still_bound() {
    begin_test expiring
    register_apps com.example.cached com.example.queried
    local ttl_s=3
    start_service svc STORAGE_PIPELINES=reviews STORAGE_APPLICATION_CACHE_TTL_SECONDS=$ttl_s
    review com.example.cached c-1 1 "2026-11-29T10:00:00Z" | produce "$TOPIC_REVIEWS" -p 0
    wait_reviews_committed 1
    # com.example.cached is now fresh for ttl_s (cached before the first
    # batch's line). The next batch holds it and a name the cache lacks; the
    # query for that one waits on a lock until the TTL has passed.
    PGAPPNAME=$LOCKER_APP psql "$DB" -X -q -v ON_ERROR_STOP=1 -c "BEGIN" \
        -c "LOCK TABLE apps_registry_application IN ACCESS EXCLUSIVE MODE" -c "SELECT pg_sleep(300)" >/dev/null 2>&1 &
    LOCKER_PID=$!
    track "$LOCKER_PID"
    wait_for_sql "SELECT count(*) FROM pg_locks WHERE relation = 'apps_registry_application'::regclass AND mode = 'AccessExclusiveLock' AND granted" 1 5
    {
        review com.example.cached c-2 1 "2026-11-29T10:00:00Z"
        review com.example.queried q-1 1 "2026-11-29T10:00:00Z"
    } | produce "$TOPIC_REVIEWS" -p 0
    wait_blocked || fail "the registry query never waited on the lock"
    wait_until_ms $(($(log_ms svc '\[reviews\] batch size=') + ttl_s * 1000))
    wait_blocked "" 2 || fail "the registry query stopped waiting before the TTL passed"
    assert_eq "c-1" "$(stored_review_ids)" "stored reviews while the query waits"
    release_lock
    wait_reviews_committed 3
    assert_eq "0" "$(sql "SELECT count(*) FROM dead_letter_events")" "dead letters"
    assert_eq "c-1 c-2 q-1" "$(stored_review_ids)" "stored reviews"
    stop_clean svc
}

# An app hard-deleted and registered again (a new id) while its old id is
# still cached: the row the cache bound to the old id fails its foreign key,
# and the batch is resolved again instead of dead-lettering a message of a
# registered app.
test_an_app_registered_again_under_a_new_id_is_stored_despite_the_cached_old_id() {
    begin_test reregistered
    register_apps com.example.again
    start_service svc STORAGE_PIPELINES=reviews
    review com.example.again a-1 1 "2026-11-29T10:00:00Z" | produce "$TOPIC_REVIEWS" -p 0
    wait_reviews_committed 1
    sql "BEGIN; DELETE FROM reviews WHERE review_id = 'a-1';
         DELETE FROM apps_registry_application WHERE package_name = 'com.example.again'; COMMIT" >/dev/null
    register_apps com.example.again
    review com.example.again a-2 1 "2026-11-29T11:00:00Z" | produce "$TOPIC_REVIEWS" -p 0
    wait_reviews_committed 2
    assert_eq "0" "$(sql "SELECT count(*) FROM dead_letter_events")" "dead letters"
    assert_eq "$(app_id com.example.again)" "$(sql "SELECT application_id FROM reviews WHERE review_id = 'a-2'")" \
        "stored under the app's new id"
    stop_clean svc
}

# TTL 0: the registry is asked for every batch. Every registered app is
# stored; a hard-deleted app is dead-lettered on the very next batch.
test_a_cache_ttl_of_zero_asks_the_registry_for_every_batch() {
    begin_test ttl0
    register_apps com.example.kept com.example.removed
    start_service svc STORAGE_PIPELINES=reviews STORAGE_APPLICATION_CACHE_TTL_SECONDS=0
    {
        review com.example.kept k-1 1 "2026-11-29T10:00:00Z"
        review com.example.removed r-1 1 "2026-11-29T10:00:00Z"
    } | produce "$TOPIC_REVIEWS" -p 0
    wait_reviews_committed 2
    sql "BEGIN; DELETE FROM reviews WHERE review_id = 'r-1';
         DELETE FROM apps_registry_application WHERE package_name = 'com.example.removed'; COMMIT" >/dev/null
    {
        review com.example.kept k-2 1 "2026-11-29T10:00:00Z"
        review com.example.removed r-2 1 "2026-11-29T10:00:00Z"
    } | produce "$TOPIC_REVIEWS" -p 0
    wait_reviews_committed 4
    assert_eq "k-1 k-2" "$(stored_review_ids)" "stored reviews"
    assert_eq "3|unregistered_app" "$(sql "SELECT kafka_offset, error_type FROM dead_letter_events")" "the removed app's next message"
    stop_clean svc
}

# ---------------------------------------------------------------------------
# 6. A value that slips past decoding and fails in SQL is isolated and
# dead-lettered with the database's message; the rest is stored.

test_a_row_the_database_refuses_is_dead_lettered_alone() {
    begin_test refused
    register_apps com.example.refused
    sql "ALTER TABLE reviews ADD CONSTRAINT thumbs_not_13 CHECK (thumbs_up_count <> 13)"
    local i
    for i in 1 2 3 4 5 6 7 8; do
        review com.example.refused "r$i" "$([ "$i" = 3 ] || [ "$i" = 7 ] && echo 13 || echo "$i")" "2026-11-29T10:00:00Z"
    done | produce "$TOPIC_REVIEWS" -p 0
    start_service svc
    wait_reviews_committed 8

    assert_eq "r1 r2 r4 r5 r6 r8" "$(stored_review_ids)" "the rest of the batch is stored"
    assert_eq "2|database_rejected
6|database_rejected" "$(sql "SELECT kafka_offset, error_type FROM dead_letter_events ORDER BY kafka_offset")" "refused rows dead-lettered"
    local detail
    detail=$(sql "SELECT error_detail FROM dead_letter_events WHERE kafka_offset = 2")
    assert_contains "$detail" 'violates check constraint "thumbs_not_13"' "error_detail has the database's message"
    assert_eq "$(review com.example.refused r3 13 2026-11-29T10:00:00Z | tr -d '\n')" \
        "$(sql "SELECT convert_from(payload, 'UTF8') FROM dead_letter_events WHERE kafka_offset = 2")" "payload of the refused record"
    # Once a poll has its first record it takes only what librdkafka has
    # already fetched: the 8 records usually make one batch, but in a slower
    # build (ThreadSanitizer) they came as two of 4. The batch lines account
    # for every record either way.
    assert_eq "8 6 0 0 2" "$(batch_sum svc reviews size) $(batch_sum svc reviews inserted) $(batch_sum svc reviews updated) $(batch_sum svc reviews skipped) $(batch_sum svc reviews dead_lettered)" \
        "batch lines: size, inserted, updated, skipped, dead_lettered"
    stop_clean svc
}

# Two observations of one review in a batch: the newer wins de-duplication.
# When the database refuses the winner, the older one is not silently
# dropped: it is written in its place (or dead-lettered with its own reason).
test_the_older_observation_is_stored_when_the_database_refuses_the_newer_one() {
    begin_test superseded
    register_apps com.example.sup
    sql "ALTER TABLE reviews ADD CONSTRAINT thumbs_below_1000 CHECK (thumbs_up_count < 1000)"
    {
        review com.example.sup kept 5 "2026-11-29T10:00:00Z"
        review com.example.sup kept 5000 "2026-11-29T12:00:00Z"
        review com.example.sup kept 7 "2026-11-29T11:00:00Z"
        review com.example.sup gone 2000 "2026-11-29T10:00:00Z"
        review com.example.sup gone 3000 "2026-11-29T11:00:00Z"
    } | produce "$TOPIC_REVIEWS" -p 0
    start_service svc STORAGE_PIPELINES=reviews
    wait_reviews_committed 5
    assert_eq "kept|7|2026-11-29 11:00:00+00" "$(usql "SELECT review_id, thumbs_up_count, last_synced_at FROM reviews")" \
        "the newest observation the database accepts"
    assert_eq "1|database_rejected
3|database_rejected
4|database_rejected" "$(sql "SELECT kafka_offset, error_type FROM dead_letter_events ORDER BY kafka_offset")" \
        "every refused observation dead-lettered, none vanished"
    assert_contains "$(log_of svc)" "[reviews] batch size=5 inserted=1 updated=0 skipped=1 dead_lettered=3" "batch line"
    stop_clean svc
}

# ---------------------------------------------------------------------------
# 7. Each pipeline's group commits only its own topic's offsets.

test_each_pipeline_commits_only_its_own_offsets() {
    begin_test offsets
    register_apps com.example.offsets
    local app=com.example.offsets
    printf '%s\n' "{\"package_name\":\"$app\",\"crawled_at\":\"2026-11-29T10:00:00Z\"}" \
        "{\"package_name\":\"$app\",\"crawled_at\":\"2026-11-29T11:00:00Z\"}" | produce "$TOPIC_APP_STATS" -p 0
    printf '%s\n' "{\"package_name\":\"$app\",\"crawled_at\":\"2026-11-29T12:00:00Z\"}" | produce "$TOPIC_APP_STATS" -p 2
    for i in 1 2 3 4; do review $app "r$i" "$i" "2026-11-29T10:00:00Z"; done | produce "$TOPIC_REVIEWS" -p 1
    printf '%s\n' "{\"package_name\":\"$app\",\"analysis_id\":\"31111111-2222-3333-4444-555555555555\",\"analyzed_at\":\"2026-11-29T10:00:00Z\",\"duration_seconds\":1,\"total_packets\":1,\"total_bytes\":1}" |
        produce "$TOPIC_NETWORK_METRICS" -p 2

    local stats reviews metrics
    stats=$(group_of app-stats)
    reviews=$(group_of reviews)
    metrics=$(group_of network-metrics)

    # Only the reviews pipeline: only the reviews group moves.
    start_service only-reviews STORAGE_PIPELINES=reviews
    wait_committed "$reviews" "$TOPIC_REVIEWS" 1 4
    assert_eq "0/4/0" "$(sql "SELECT (SELECT count(*) FROM app_stats) || '/' || (SELECT count(*) FROM reviews) || '/' || (SELECT count(*) FROM network_metrics)")" "rows after the reviews-only run"
    stop_clean only-reviews
    local p t g
    for p in 0 1 2; do
        for g in "$stats" "$metrics"; do
            for t in "$TOPIC_APP_STATS" "$TOPIC_REVIEWS" "$TOPIC_NETWORK_METRICS"; do
                assert_committed "$g" "$t" "$p" -1001
            done
        done
        assert_committed "$reviews" "$TOPIC_APP_STATS" "$p" -1001
        assert_committed "$reviews" "$TOPIC_NETWORK_METRICS" "$p" -1001
    done
    assert_committed "$reviews" "$TOPIC_REVIEWS" 0 -1001
    assert_committed "$reviews" "$TOPIC_REVIEWS" 2 -1001
    if grep -qE '\[(app-stats|network-metrics)\]' "$(svc_log only-reviews)"; then
        fail "STORAGE_PIPELINES=reviews ran another pipeline: $(grep -E '\[(app-stats|network-metrics)\]' "$(svc_log only-reviews)" | head -3)"
    fi

    # All three: each group commits exactly its own topic's offsets, and the
    # reviews group resumes where it was (nothing reprocessed): it starts
    # partition 1 at offset 4, and a fifth review there is the one record
    # its batches read.
    start_service all
    wait_committed "$stats" "$TOPIC_APP_STATS" 0 2
    wait_committed "$stats" "$TOPIC_APP_STATS" 2 1
    wait_committed "$metrics" "$TOPIC_NETWORK_METRICS" 2 1
    wait_for_log all "\[reviews\] $TOPIC_REVIEWS \[1\] starts at offset 4, the database's position"
    review $app r5 5 "2026-11-29T10:00:00Z" | produce "$TOPIC_REVIEWS" -p 1
    wait_committed "$reviews" "$TOPIC_REVIEWS" 1 5
    wait_for_sql "SELECT (SELECT count(*) FROM app_stats) || '/' || (SELECT count(*) FROM reviews) || '/' || (SELECT count(*) FROM network_metrics)" "3/5/1" 10
    stop_clean all
    assert_committed "$stats" "$TOPIC_APP_STATS" 1 -1001
    assert_committed "$metrics" "$TOPIC_NETWORK_METRICS" 0 -1001
    assert_committed "$metrics" "$TOPIC_NETWORK_METRICS" 1 -1001
    assert_committed "$reviews" "$TOPIC_REVIEWS" 1 5
    for p in 0 1 2; do
        for t in "$TOPIC_REVIEWS" "$TOPIC_NETWORK_METRICS"; do assert_committed "$stats" "$t" "$p" -1001; done
        for t in "$TOPIC_APP_STATS" "$TOPIC_REVIEWS"; do assert_committed "$metrics" "$t" "$p" -1001; done
        for t in "$TOPIC_APP_STATS" "$TOPIC_NETWORK_METRICS"; do assert_committed "$reviews" "$t" "$p" -1001; done
    done
    assert_eq "p1:4-4" "$(review_batches all | sed -nE 's/.* offsets=([^ ]*) .*/\1/p' | paste -sd' ')" \
        "the reviews group resumed from its committed offsets: the offsets its batches read"
    assert_each_offset_stored_once reviews "$TOPIC_REVIEWS" only-reviews all
}

# ---------------------------------------------------------------------------
# 8. Two processes with the same groups share the partitions and store every
# review exactly once.

# The last "owned=N" a service logged for PIPELINE (0 if none yet).
owned_partitions() { # name pipeline
    { grep -E "\[$2\] partitions (assigned|revoked)" "$(svc_log "$1")" 2>/dev/null || true; } |
        tail -n 1 | grep -oE 'owned=[0-9]+' | cut -d= -f2 | awk '{print $1 + 0} END {if (NR == 0) print 0}'
}

# Services ONE and TWO share the three partitions (each owns at least one).
shared_by() { # one two
    local a b
    a=$(owned_partitions "$1" reviews)
    b=$(owned_partitions "$2" reviews)
    [ "$a" -gt 0 ] && [ "$b" -gt 0 ] && [ $((a + b)) = 3 ]
}

wait_shared_by() { # one two
    local end=$((SECONDS + STALL_S))
    while [ "$SECONDS" -lt "$end" ]; do
        shared_by "$1" "$2" && return 0
        sleep 0.2
    done
    fail "the group never settled: $1 owns $(owned_partitions "$1" reviews), $2 owns $(owned_partitions "$2" reviews)"
}

# Chunk N (0..29) of a 3000-message reviews burst for APP: 100 messages on
# partition N % 3; 2900 distinct reviews, s-1..s-100 (chunk 0, partition 0)
# observed a second time, newer, in chunk 29 (partition 2).
produce_burst_chunk() { # app n
    awk -v app="$1" -v c="$2" 'BEGIN {
        for (i = c * 100 + 1; i <= c * 100 + 100; i++) {
            id = i; thumbs = 1; ts = "2026-11-29T10:00:00Z"
            if (i > 2900) { id = i - 2900; thumbs = 2; ts = "2026-11-29T11:00:00Z" }
            printf "{\"package_name\":\"%s\",\"review_id\":\"s-%d\",\"score\":3,\"thumbs_up_count\":%d,\"reviewed_at\":\"2026-11-01T00:00:00Z\",\"last_synced_at\":\"%s\"}\n", app, id, thumbs, ts
        }
    }' | produce "$TOPIC_REVIEWS" -p $(($2 % 3))
}

# After the burst: everything consumed by the group, on the broker, stored
# once, the newer observations won, no dead letters; both members stop
# cleanly, both were assigned partitions and stored batches, and together
# their batch lines inserted each review exactly once.
assert_burst_stored_once_by() { # one two
    wait_all_committed "$(group_of reviews)" "$TOPIC_REVIEWS" 60
    assert_broker_kept_everything "$TOPIC_REVIEWS"
    assert_eq "3000" "$(( $(high_watermark "$TOPIC_REVIEWS" 0) + $(high_watermark "$TOPIC_REVIEWS" 1) + $(high_watermark "$TOPIC_REVIEWS" 2) ))" "messages on the topic"
    assert_eq "2900" "$(sql "SELECT count(*) FROM reviews WHERE review_id ~ '^s-[0-9]+$' AND substr(review_id, 3)::int BETWEEN 1 AND 2900")" "the review ids produced"
    assert_eq "2900" "$(sql "SELECT count(*) FROM reviews")" "rows"
    assert_eq "100" "$(sql "SELECT count(*) FROM reviews WHERE thumbs_up_count = 2 AND last_synced_at = '2026-11-29T11:00:00Z'")" "the newer observations won"
    assert_eq "0" "$(sql "SELECT count(*) FROM dead_letter_events")" "no dead letters"
    stop_clean "$1"
    stop_clean "$2"
    local n
    for n in "$1" "$2"; do
        grep -qE '\[reviews\] partitions assigned count=[1-9]' "$(svc_log "$n")" || fail "$n was never assigned a partition"
        [ "$(batch_lines "$n" reviews)" -gt 0 ] || fail "$n stored no batch"
    done
    assert_eq 2900 "$(( $(batch_sum "$1" reviews inserted) + $(batch_sum "$2" reviews inserted) ))" "inserted= over both processes"
    # Each of the 3000 records read and written by one member only, once.
    assert_each_offset_stored_once reviews "$TOPIC_REVIEWS" "$1" "$2"
}

test_two_processes_share_the_partitions_and_store_each_review_once() {
    begin_test shared
    register_apps com.example.shared
    start_service one STORAGE_PIPELINES=reviews STORAGE_MAX_POLL_RECORDS_REVIEWS=100
    start_service two STORAGE_PIPELINES=reviews STORAGE_MAX_POLL_RECORDS_REVIEWS=100
    wait_shared_by one two
    local n
    for n in $(seq 0 29); do
        produce_burst_chunk com.example.shared "$n"
        sleep 0.05
    done
    assert_burst_stored_once_by one two
}

# Scaling out during a burst (DESIGN.md: Operations): the busy member keeps going while the
# group rebalances (its commits fail with REBALANCE_IN_PROGRESS meanwhile),
# neither process fails, and every review is stored once.
test_a_member_joining_mid_burst_takes_partitions_without_failing_the_busy_one() {
    begin_test joining
    register_apps com.example.joining
    local n
    start_service one STORAGE_PIPELINES=reviews STORAGE_MAX_POLL_RECORDS_REVIEWS=100
    wait_for_log one '\[reviews\] partitions assigned count=3'
    for n in $(seq 0 29); do
        produce_burst_chunk com.example.joining "$n"
        assert_running one
        [ "$n" -gt 5 ] && assert_running two
        [ "$n" = 5 ] && start_service two STORAGE_PIPELINES=reviews STORAGE_MAX_POLL_RECORDS_REVIEWS=100
        # The last third of the burst is produced once the group has settled.
        [ "$n" = 19 ] && wait_shared_by one two
        sleep 0.2
    done
    assert_burst_stored_once_by one two
}

# librdkafka stops fetching once queued.max.messages.kbytes are queued and
# looks again only when woken or a second later; the consumer wakes it with
# a seek to where it stands (DESIGN.md: Settings and budgets). A backlog of fifty
# times a 64 KiB bound, then a burst during which a second member joins (a
# rebalance forgets where the partitions stood): read through wake-ups,
# every review stored once, every offset committed.
test_a_backlog_far_past_the_prefetch_bound_is_read_through_wake_ups_and_stored_once() {
    begin_test wake
    local APP=com.example.wake p n
    register_apps "$APP"
    for p in 0 1 2; do gen_reviews $((p * 5000 + 1)) 5000 w | produce "$TOPIC_REVIEWS" -p "$p"; done
    local small=(STORAGE_PIPELINES=reviews STORAGE_LOG_LEVEL=debug STORAGE_RDKAFKA_QUEUED_MAX_MESSAGES_KBYTES=64)
    start_service one "${small[@]}"
    wait_for_sql "SELECT count(*) = 15000 FROM reviews" t 60
    for n in $(seq 0 14); do
        gen_reviews $((15001 + n * 1000)) 1000 w | produce "$TOPIC_REVIEWS" -p $((n % 3))
        [ "$n" = 4 ] && start_service two "${small[@]}"
        sleep 0.3
    done
    wait_all_committed "$(group_of reviews)" "$TOPIC_REVIEWS" 120
    assert_broker_kept_everything "$TOPIC_REVIEWS"
    assert_eq "30000" "$(sql "SELECT count(*) FROM reviews")" "one row per review"
    assert_eq "0" "$(sql "SELECT count(*) FROM dead_letter_events")" "no dead letters"
    stop_clean one
    stop_clean two
    assert_eq 30000 "$(($(batch_sum one reviews inserted) + $(batch_sum two reviews inserted)))" "inserted= over both processes"
    assert_each_offset_stored_once reviews "$TOPIC_REVIEWS" one two
    grep -qE '\[reviews\] partitions assigned count=[1-9]' "$(svc_log two)" || fail "two was never assigned a partition"
    n=$(grep -c 'woke the fetcher' "$(svc_log one)" || true)
    [ "$n" -ge 5 ] || fail "one woke its fetcher $n times reading 6.9 MB through a 64 KiB bound"
}

# ---------------------------------------------------------------------------
# 9. An oversized bad payload is truncated in dead_letter_events.

test_an_oversized_bad_payload_is_dead_lettered_truncated_to_64_KiB() {
    begin_test oversized
    register_apps com.example.big
    local big=$WORK/oversized.json size
    # 100 KiB of invalid JSON: an unterminated string.
    { printf '{"package_name":"com.example.big","content":"'; head -c 102400 /dev/zero | tr '\0' 'x'; } >"$big"
    size=$(stat -c %s "$big")
    { cat "$big"; echo; review com.example.big after-big 1 "2026-11-29T10:00:00Z"; } | produce "$TOPIC_REVIEWS" -p 0
    start_service svc
    wait_reviews_committed 2
    assert_eq "after-big" "$(sql "SELECT string_agg(review_id, ' ') FROM reviews")" "the good record beside it"
    assert_eq "0|invalid_json|65536|$size|$(head -c 65536 "$big" | md5sum | cut -d' ' -f1)" \
        "$(sql "SELECT kafka_offset, error_type, length(payload), payload_size, md5(payload) FROM dead_letter_events")" \
        "payload truncated to its first 65536 bytes, payload_size the original size"
    assert_contains "$(sql "SELECT error_detail FROM dead_letter_events")" "payload truncated to 65536 of $size bytes" "error_detail states the truncation"
    stop_clean svc
}

run_tests
