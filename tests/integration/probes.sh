#!/usr/bin/env bash
# /healthz and /readyz beside /metrics (DESIGN.md: Probes and metrics),
# against the running service, the real PostgreSQL and the mock broker.
. "$(dirname "$0")/lib.sh"

pg_start
broker_start

# METHOD PATH on 127.0.0.1:PORT with bash alone; prints the whole response.
http_req() { # port method path
    exec 3<>"/dev/tcp/127.0.0.1/$1" || return 1
    printf '%s %s HTTP/1.0\r\nHost: localhost\r\n\r\n' "$2" "$3" >&3
    cat <&3
    exec 3<&-
}

status_of() { # port path -> the status code
    http_req "$1" GET "$2" | head -n 1 | awk '{print $2}'
}

# Wait until PATH answers STATUS (at most SECONDS); print the last response.
wait_status() { # port path status [seconds (30)]
    local end=$((SECONDS + ${4:-30})) resp
    while :; do
        resp=$(http_req "$1" GET "$2" 2>/dev/null || true)
        [ "$(echo "$resp" | head -n 1 | awk '{print $2}')" = "$3" ] && { echo "$resp"; return 0; }
        [ "$SECONDS" -ge "$end" ] && fail "$2 did not answer $3 within ${4:-30} s; last: $resp"
        sleep 0.1
    done
}

review_of() { # package id
    echo "{\"package_name\":\"$1\",\"review_id\":\"$2\",\"score\":3,\"thumbs_up_count\":1,\"reviewed_at\":\"2026-11-29T12:00:00Z\",\"last_synced_at\":\"2026-11-29T12:00:00Z\"}"
}

# Begin test NAME with a reviews-only service serving the probes on PORT
# (set here), and wait until it is ready. UNDO... undoes the test's fault
# when the test ends, however it ends.
ready_service() { # name undo...
    begin_test "$1"
    shift
    UNDO=("$@")
    trap 'end_test "${UNDO[@]}"' EXIT
    PORT=$(free_port)
    start_service svc STORAGE_PIPELINES=reviews STORAGE_METRICS_ADDR="127.0.0.1:$PORT" ${READY_EXTRA:-}
    trap 'end_test "${UNDO[@]}"' EXIT
    wait_status "$PORT" /readyz 200 30 >/dev/null
}

# Both topics answer "unknown" until the test has seen the 503: nothing can
# be assigned before (no window of time to catch).
topics_answer() { # error
    broker_ctl topic-error "$TOPIC_REVIEWS" "$1" >/dev/null
    broker_ctl topic-error "$TOPIC_APP_STATS" "$1" >/dev/null
}

test_readyz_is_503_until_partitions_are_assigned() {
    begin_test ready
    trap 'end_test topics_answer NO_ERROR' EXIT
    local port resp
    port=$(free_port)
    topics_answer UNKNOWN_TOPIC_OR_PART
    start_service svc STORAGE_PIPELINES=reviews,app-stats STORAGE_METRICS_ADDR="127.0.0.1:$port"
    trap 'end_test topics_answer NO_ERROR' EXIT
    resp=$(wait_status "$port" /readyz 503 "$STALL_S")
    assert_contains "$resp" "reviews: not ready: no partitions assigned"
    assert_contains "$resp" "app-stats: not ready: no partitions assigned"
    assert_contains "$resp" "text/plain"
    # Alive meanwhile: starting is not dead.
    assert_eq 200 "$(status_of "$port" /healthz)" "/healthz while the group forms"
    assert_eq 0 "$(log_count svc 'partitions assigned')" "assignments while /readyz answered 503"
    topics_answer NO_ERROR
    resp=$(wait_status "$port" /readyz 200 30)
    assert_contains "$resp" "reviews: ready: 3 partition(s) assigned"
    assert_contains "$resp" "app-stats: ready: 3 partition(s) assigned"
    case "$resp" in *network-metrics*) fail "a pipeline this process does not run is judged: $resp" ;; esac
    # HEAD: the status and headers, no body.
    resp=$(http_req "$port" HEAD /readyz)
    assert_contains "$resp" "200 OK" "HEAD /readyz"
    case "$resp" in *"ready: 3"*) fail "HEAD returned a body: $resp" ;; esac
    assert_contains "$(http_req "$port" HEAD /healthz)" "200 OK" "HEAD /healthz"
    resp=$(http_req "$port" GET /nothing)
    assert_contains "$resp" "404 Not Found"
    assert_contains "$resp" "/metrics, /healthz and /readyz"
    stop_clean svc
}

test_readyz_is_503_while_postgresql_is_down() {
    ready_service pgdown pg_ctl_ start
    local port=$PORT resp
    pg_ctl_ stop -m fast >/dev/null
    # An idle pipeline asks PostgreSQL every 2 s (SETTINGS_DB_PING_MS).
    resp=$(wait_status "$port" /readyz 503 10)
    assert_contains "$resp" "reviews: not ready: PostgreSQL unreachable"
    # Alive all the same: the loop turns, nothing failed.
    resp=$(http_req "$port" GET /healthz)
    assert_contains "$resp" "200 OK" "/healthz while PostgreSQL is down"
    assert_contains "$resp" "reviews: alive"
    pg_ctl_ start >/dev/null
    resp=$(wait_status "$port" /readyz 200 15)
    assert_contains "$resp" "reviews: ready"
    assert_contains "$(cat "$(svc_log svc)")" "PostgreSQL answers again"
    stop_clean svc
}

# One pipeline fails (its table is gone: a fatal database error) while
# another is held in a batch by a lock, so the process is still serving
# while it stops: /healthz says which pipeline failed.
test_healthz_is_200_while_pipelines_run_and_503_after_one_fails() {
    begin_test fails
    register_apps com.probes
    local port resp
    port=$(free_port)
    start_service svc STORAGE_PIPELINES=reviews,app-stats STORAGE_METRICS_ADDR="127.0.0.1:$port"
    wait_status "$port" /readyz 200 30 >/dev/null
    resp=$(http_req "$port" GET /healthz)
    assert_contains "$resp" "200 OK" "/healthz while both run"
    assert_contains "$resp" "reviews: alive"
    assert_contains "$resp" "app-stats: alive"
    hold_lock app_stats
    echo '{"package_name":"com.probes","crawled_at":"2026-11-29T10:00:00Z","title":"t","score":4}' | produce "$TOPIC_APP_STATS" -p 0
    wait_blocked || fail "no app-stats batch blocked on the lock"
    sql "ALTER TABLE reviews RENAME TO reviews_gone" >/dev/null
    review_of com.probes f1 | produce "$TOPIC_REVIEWS" -p 0
    wait_for_log svc '\[reviews\] pipeline failed: database error'
    resp=$(http_req "$port" GET /healthz)
    assert_contains "$resp" "503 Service Unavailable" "/healthz after reviews failed"
    assert_contains "$resp" "reviews: not alive: the pipeline failed"
    resp=$(http_req "$port" GET /readyz)
    assert_contains "$resp" "503 Service Unavailable" "/readyz after reviews failed"
    assert_contains "$resp" "reviews: not ready: the pipeline failed"
    release_lock
    assert_eq 1 "$(svc_wait svc 30)" "exit code after a pipeline failed"
}

# A loop that stops turning (a batch stuck behind a lock) is not alive once
# STORAGE_HEALTH_MAX_AGE_SECONDS has passed, and alive again when it moves.
test_healthz_is_503_while_a_loop_is_stuck() {
    begin_test stuck
    register_apps com.probes
    local port resp
    port=$(free_port)
    start_service svc STORAGE_PIPELINES=reviews STORAGE_METRICS_ADDR="127.0.0.1:$port" \
        STORAGE_HEALTH_MAX_AGE_SECONDS=2
    wait_status "$port" /readyz 200 30 >/dev/null
    hold_lock reviews
    review_of com.probes s1 | produce "$TOPIC_REVIEWS" -p 0
    wait_blocked || fail "no batch blocked on the lock"
    resp=$(wait_status "$port" /healthz 503 10)
    assert_contains "$resp" "reviews: not alive: its loop last ran"
    assert_contains "$resp" "(limit STORAGE_HEALTH_MAX_AGE_SECONDS=2)"
    release_lock
    resp=$(wait_status "$port" /healthz 200 10)
    assert_contains "$resp" "reviews: alive"
    wait_for_sql "SELECT count(*) FROM reviews" 1
    stop_clean svc
}

# The brokers' state comes from librdkafka's statistics, when the operator
# turns them on (here every second): no broker connected is not ready, and
# ready again once they are back.
test_readyz_is_503_while_every_broker_is_down() {
    READY_EXTRA=STORAGE_RDKAFKA_STATISTICS_INTERVAL_MS=1000 ready_service brokers broker_ctl broker-up -1
    local port=$PORT resp
    broker_ctl broker-down -1 >/dev/null
    resp=$(wait_status "$port" /readyz 503 10)
    assert_contains "$resp" "reviews: not ready: no Kafka broker reachable"
    assert_eq 200 "$(status_of "$port" /healthz)" "/healthz while the brokers are down"
    broker_ctl broker-up -1 >/dev/null
    resp=$(wait_status "$port" /readyz 200 60)
    assert_contains "$resp" "reviews: ready"
    stop_clean svc
}

run_tests
