#!/usr/bin/env bash
# Heartbeats, `storage-consumer health` and scripts/healthcheck.sh (SPEC 11).
. "$(dirname "$0")/lib.sh"

pg_start
broker_start

health() { # name [VAR=value...]: run `health` with the service's settings, print "rc: output"
    local name=$1 out rc=0 vars
    shift
    mapfile -t vars < <(service_env "$name")
    out=$(env "${vars[@]}" "$@" "$BIN" health 2>&1) || rc=$?
    echo "$rc: $out"
}

test_health_is_ok_while_every_pipeline_runs_and_stale_after_stop() {
    fresh_schema health_ok
    fresh_topics health1
    service_start hb
    local i out
    for i in $(seq 1 50); do
        out=$(health hb)
        [ "${out%%:*}" = 0 ] && break
        sleep 0.2
    done
    assert_eq 0 "${out%%:*}" "health exit code while running: $out"
    assert_contains "$out" "app-stats: healthy"
    assert_contains "$out" "reviews: healthy"
    assert_contains "$out" "network-metrics: healthy"
    # The container health check script says the same.
    local vars
    mapfile -t vars < <(service_env hb)
    env "${vars[@]}" HEALTHCHECK_BIN="$BIN" "$TOP/scripts/healthcheck.sh" >/dev/null ||
        fail "healthcheck.sh reported unhealthy while running"
    assert_eq 0 "$(service_stop hb)" "exit code"
    sleep 2.2
    out=$(health hb STORAGE_HEALTH_MAX_AGE_SECONDS=1)
    assert_eq 1 "${out%%:*}" "health exit code after stop: $out"
    assert_contains "$out" "reviews: unhealthy"
    if env "${vars[@]}" STORAGE_HEALTH_MAX_AGE_SECONDS=1 HEALTHCHECK_BIN="$BIN" "$TOP/scripts/healthcheck.sh" >/dev/null; then
        fail "healthcheck.sh reported healthy after stop"
    fi
}

test_health_checks_only_the_pipelines_this_process_runs() {
    fresh_schema health_subset
    fresh_topics health2
    service_start only STORAGE_PIPELINES=reviews
    local i out
    for i in $(seq 1 50); do
        out=$(health only STORAGE_PIPELINES=reviews)
        [ "${out%%:*}" = 0 ] && break
        sleep 0.2
    done
    assert_eq 0 "${out%%:*}" "health with STORAGE_PIPELINES=reviews: $out"
    case "$out" in *app-stats*) fail "app-stats checked though not run: $out" ;; esac
    # Asked about all three, the pipelines this process does not run are stale.
    out=$(health only)
    assert_eq 1 "${out%%:*}" "health of all pipelines: $out"
    assert_contains "$out" "app-stats: unhealthy"
    assert_eq 0 "$(service_stop only)" "exit code"
}

test_an_unwritable_heartbeat_dir_warns_once_and_ingestion_goes_on() {
    fresh_schema health_unwritable
    fresh_topics health3
    register_apps com.health
    # A file where the directory should be: every heartbeat write fails.
    : >"$WORK/not-a-dir"
    service_start nohb STORAGE_HEARTBEAT_DIR="$WORK/not-a-dir"
    echo '{"package_name":"com.health","review_id":"h1","score":5,"thumbs_up_count":0,"reviewed_at":"2026-11-29T12:00:00Z","last_synced_at":"2026-11-29T12:00:00Z"}' |
        produce "$TOPIC_REVIEWS"
    wait_for_sql "SELECT count(*) FROM reviews" 1
    sleep 2.5 # several more loops, each of which would have written a heartbeat
    assert_eq 0 "$(service_stop nohb)" "exit code"
    assert_eq 1 "$(grep -c 'cannot write heartbeat file .*/reviews' "$WORK/nohb.log")" "warnings for reviews"
}

run_tests
