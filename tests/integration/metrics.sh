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
    sleep 0.5
    body=$(http_get "$port" /metrics)
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
    sleep 1.5
    svc_start second STORAGE_METRICS_ADDR="127.0.0.1:$port"
    assert_eq 1 "$(svc_wait second 20)" "exit code of the second process"
    assert_contains "$(cat "$WORK/second.log")" "STORAGE_METRICS_ADDR=127.0.0.1:$port"
    assert_eq 0 "$(svc_stop holder)" "exit code"
}

run_tests
