#!/usr/bin/env bash
# The Prometheus endpoint (STORAGE_METRICS_ADDR) against the running service.
. "$(dirname "$0")/lib.sh"

pg_start
broker_start

test_metrics_endpoint_reports_counters_dead_letters_and_lag() {
    fresh_schema metrics_counts
    fresh_topics metrics1
    register_apps com.metrics
    local port body
    port=$(free_port)
    for i in 1 2 3 4 5; do
        echo "{\"package_name\":\"com.metrics\",\"review_id\":\"m$i\",\"score\":3,\"thumbs_up_count\":$i,\"reviewed_at\":\"2026-11-29T12:00:00Z\",\"last_synced_at\":\"2026-11-29T12:00:00Z\"}"
    done | produce "$TOPIC_REVIEWS" -p 0
    echo '{"package_name":' | produce "$TOPIC_REVIEWS" -p 0
    svc_start metrics STORAGE_METRICS_ADDR="127.0.0.1:$port"
    wait_for_sql "SELECT count(*) FROM reviews" 5
    wait_for_sql "SELECT count(*) FROM dead_letter_events" 1
    body=$(wait_metrics "$port" 'storage_consumer_messages_consumed_total{pipeline="reviews"} 6')
    assert_contains "$body" "200 OK"
    assert_contains "$body" "text/plain; version=0.0.4"
    assert_contains "$body" 'storage_consumer_messages_consumed_total{pipeline="reviews"} 6'
    assert_contains "$body" 'storage_consumer_rows_inserted_total{pipeline="reviews"} 5'
    assert_contains "$body" 'storage_consumer_dead_letters_total{pipeline="reviews",error_type="invalid_json"} 1'
    assert_contains "$body" "storage_consumer_lag{pipeline=\"reviews\",topic=\"$TOPIC_REVIEWS\",partition=\"0\"} 0"
    assert_contains "$body" 'storage_consumer_batch_duration_seconds_count{pipeline="reviews"}'
    assert_contains "$(http_get "$port" /nothing)" "404 Not Found"
    assert_eq 0 "$(svc_stop metrics)" "exit code"
}

test_metrics_address_in_use_stops_start_up() {
    fresh_schema metrics_busy
    fresh_topics metrics2
    local port
    port=$(free_port)
    svc_start holder STORAGE_METRICS_ADDR="127.0.0.1:$port"
    wait_metrics "$port" >/dev/null # bound by the holder
    svc_start second STORAGE_METRICS_ADDR="127.0.0.1:$port"
    assert_eq 1 "$(svc_wait second 20)" "exit code of the second process"
    assert_contains "$(cat "$WORK/second.log")" "STORAGE_METRICS_ADDR=127.0.0.1:$port"
    assert_eq 0 "$(svc_stop holder)" "exit code"
}

# The body of GET /metrics from 127.0.0.1:PORT, without the headers.
metrics_body() { # port
    http_get "$1" /metrics | tr -d '\r' | sed '1,/^$/d'
}

# promtool, Prometheus' own checker, finds nothing to say about the live
# exposition: names, HELP/TYPE, counters ending in _total, units.
test_metrics_pass_promtool_check() {
    fresh_schema metrics_promtool
    fresh_topics metrics4
    register_apps com.metrics
    local port body out rc=0
    port=$(free_port)
    echo '{"package_name":"com.metrics","review_id":"p1","score":3,"thumbs_up_count":1,"reviewed_at":"2026-11-29T12:00:00Z","last_synced_at":"2026-11-29T12:00:00Z"}' |
        produce "$TOPIC_REVIEWS" -p 0
    echo 'not json' | produce "$TOPIC_REVIEWS" -p 1
    svc_start promtool STORAGE_METRICS_ADDR="127.0.0.1:$port"
    wait_for_sql "SELECT count(*) FROM reviews" 1
    wait_for_sql "SELECT count(*) FROM dead_letter_events" 1
    wait_metrics "$port" 'storage_consumer_messages_consumed_total{pipeline="reviews"} 2' >/dev/null
    body=$(metrics_body "$port")
    assert_contains "$body" "storage_consumer_build_info{" "exposition checked"
    assert_contains "$body" "process_cpu_seconds_total" "exposition checked"
    out=$(echo "$body" | promtool check metrics 2>&1) || rc=$?
    assert_eq 0 "$rc" "promtool exit code: $out"
    assert_eq "" "$out" "promtool's complaints"
    assert_eq 0 "$(svc_stop promtool)" "exit code"
}

# The versions are those the process runs with, and the process_* family
# describes this very process.
test_build_info_and_process_metrics_describe_the_running_process() {
    fresh_schema metrics_process
    fresh_topics metrics5
    local port body pid fds started
    port=$(free_port)
    svc_start process STORAGE_METRICS_ADDR="127.0.0.1:$port"
    wait_metrics "$port" >/dev/null
    body=$(metrics_body "$port")
    pid=$(svc_pid process)
    assert_contains "$body" "storage_consumer_build_info{version=\"$("$BIN" version | awk 'NR == 1 {print $2}')\",librdkafka=\"$(dpkg-query -W -f='${Version}' librdkafka1 | sed 's/-.*//')\",libpq=\"$(dpkg-query -W -f='${Version}' libpq5 | sed -E 's/^([0-9]+\.[0-9]+).*/\1/')\"} 1"
    echo "$body" | grep -qE '^process_cpu_seconds_total [0-9.]+$' || fail "no process_cpu_seconds_total in $body"
    echo "$body" | grep -qE '^process_resident_memory_bytes [1-9][0-9]+$' || fail "no process_resident_memory_bytes"
    echo "$body" | grep -qE '^process_virtual_memory_bytes [1-9][0-9]+$' || fail "no process_virtual_memory_bytes"
    assert_contains "$body" "process_max_fds $(awk '/^Max open files/ {print $4}' "/proc/$pid/limits")"
    fds=$(echo "$body" | awk '/^process_open_fds / {print $2}')
    [ "$fds" -gt 3 ] || fail "process_open_fds $fds"
    # Started within the last minute, by the system's clock.
    started=$(echo "$body" | awk '/^process_start_time_seconds / {printf "%d", $2}')
    [ $(($(date +%s) - started)) -ge 0 ] && [ $(($(date +%s) - started)) -lt 60 ] ||
        fail "process_start_time_seconds $started, now $(date +%s)"
    assert_eq 0 "$(svc_stop process)" "exit code"
}

# The committed position of each owned partition is reported from its
# assignment on: the start the database recorded, then each batch's end.
test_committed_lag_is_reported_for_every_owned_partition() {
    fresh_schema metrics_committed
    fresh_topics metrics6
    register_apps com.metrics
    local port body p
    port=$(free_port)
    for i in 1 2 3 4; do
        echo "{\"package_name\":\"com.metrics\",\"review_id\":\"c$i\",\"score\":3,\"thumbs_up_count\":1,\"reviewed_at\":\"2026-11-29T12:00:00Z\",\"last_synced_at\":\"2026-11-29T12:00:00Z\"}"
    done | produce "$TOPIC_REVIEWS" -p 2
    svc_start committed STORAGE_PIPELINES=reviews STORAGE_METRICS_ADDR="127.0.0.1:$port"
    wait_for_sql "SELECT count(*) FROM reviews" 4
    wait_committed "$(group_of reviews)" "$TOPIC_REVIEWS" 2 4
    # Each gauge appears once the fetcher has seen its partition's high
    # watermark (an empty fetch is answered after fetch.wait.max.ms).
    wait_until "three committed_lag gauges" '[ "$(metrics_body "$port" | grep -c "^storage_consumer_committed_lag{")" = 3 ]'
    body=$(metrics_body "$port")
    for p in 0 1 2; do
        assert_contains "$body" "storage_consumer_committed_lag{pipeline=\"reviews\",topic=\"$TOPIC_REVIEWS\",partition=\"$p\"} 0" "partition $p"
    done
    # The read position of a partition nothing was read from is not known yet.
    assert_contains "$body" "storage_consumer_lag{pipeline=\"reviews\",topic=\"$TOPIC_REVIEWS\",partition=\"2\"} 0"
    assert_contains "$body" "# TYPE storage_consumer_committed_lag gauge"
    assert_eq 0 "$(svc_stop committed)" "exit code"
}

# The counter counts dead letters newly stored: a replay reads the bad
# records again, the database keeps each once (its coordinates and the
# digest of what it holds are its identity), and the counter of the process
# that re-read them stays at 0.
test_a_replay_does_not_count_dead_letters_again() {
    fresh_schema metrics_replay
    fresh_topics metrics3
    local port body vars rc=0
    port=$(free_port)
    printf '%s\n' '{"package_name":' 'not json' '{"package_name":"com.none"}' | produce "$TOPIC_REVIEWS" -p 1
    svc_start first STORAGE_PIPELINES=reviews STORAGE_METRICS_ADDR="127.0.0.1:$port"
    wait_for_sql "SELECT count(*) FROM dead_letter_events" 3
    wait_committed "$(group_of reviews)" "$TOPIC_REVIEWS" 1 3
    body=$(http_get "$port" /metrics)
    assert_contains "$body" 'storage_consumer_dead_letters_total{pipeline="reviews",error_type="invalid_json"} 2' "first read"
    assert_contains "$body" 'storage_consumer_dead_letters_total{pipeline="reviews",error_type="missing_field"} 1' "first read"
    assert_eq 0 "$(svc_stop first)" "exit code"

    mapfile -t vars < <(svc_env replay)
    env "${vars[@]}" timeout 120 "$BIN" replay reviews --to earliest >"$WORK/replay.out" 2>&1 || rc=$?
    assert_eq 0 "$rc" "replay exit code: $(cat "$WORK/replay.out")"

    svc_start again STORAGE_PIPELINES=reviews STORAGE_METRICS_ADDR="127.0.0.1:$port"
    wait_committed "$(group_of reviews)" "$TOPIC_REVIEWS" 1 3 60
    body=$(wait_metrics "$port" 'storage_consumer_messages_consumed_total{pipeline="reviews"} 3')
    assert_contains "$body" 'storage_consumer_messages_consumed_total{pipeline="reviews"} 3' "the re-read"
    assert_contains "$body" 'storage_consumer_dead_letters_total{pipeline="reviews",error_type="invalid_json"} 0' "after the replay"
    assert_contains "$body" 'storage_consumer_dead_letters_total{pipeline="reviews",error_type="missing_field"} 0' "after the replay"
    assert_eq 3 "$(sql "SELECT count(*) FROM dead_letter_events")" "dead letters stored once"
    assert_eq 0 "$(svc_stop again)" "exit code"
}

run_tests
