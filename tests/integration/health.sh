#!/usr/bin/env bash
# Heartbeats, `storage-consumer health` (DESIGN.md: Supervisor, health, shutdown).
. "$(dirname "$0")/lib.sh"

pg_start
broker_start

health() { # name [VAR=value...]: run `health` with the service's settings, print "rc: output"
    local name=$1 out rc=0 vars
    shift
    mapfile -t vars < <(svc_env "$name")
    out=$(env "${vars[@]}" "$@" "$BIN" health 2>&1) || rc=$?
    echo "$rc: $out"
}

# Wait until `health` of NAME's settings (extra VAR=value) exits 0, at most
# STALL_S; print its last output.
wait_healthy() { # name [VAR=value...]
    local end=$((SECONDS + STALL_S)) out
    while out=$(health "$@") && [ "${out%%:*}" != 0 ] && [ "$SECONDS" -lt "$end" ]; do
        sleep 0.2
    done
    echo "$out"
}

test_health_is_ok_while_every_pipeline_runs_and_unhealthy_after_stop() {
    fresh_schema health_ok
    fresh_topics health1
    svc_start hb
    local out
    out=$(wait_healthy hb)
    assert_eq 0 "${out%%:*}" "health exit code while running: $out"
    assert_contains "$out" "app-stats: healthy"
    assert_contains "$out" "reviews: healthy"
    assert_contains "$out" "network-metrics: healthy"
    assert_eq 0 "$(svc_stop hb)" "exit code"
    out=$(health hb)
    assert_eq 1 "${out%%:*}" "health exit code after stop: $out"
    assert_contains "$out" "reviews: unhealthy (stopped at "
}

test_health_checks_only_the_pipelines_this_process_runs() {
    fresh_schema health_subset
    fresh_topics health2
    svc_start only STORAGE_PIPELINES=reviews
    local out
    out=$(wait_healthy only STORAGE_PIPELINES=reviews)
    assert_eq 0 "${out%%:*}" "health with STORAGE_PIPELINES=reviews: $out"
    case "$out" in *app-stats*) fail "app-stats checked though not run: $out" ;; esac
    # Asked about all three, the pipelines this process does not run are stale.
    out=$(health only)
    assert_eq 1 "${out%%:*}" "health of all pipelines: $out"
    assert_contains "$out" "app-stats: unhealthy"
    assert_eq 0 "$(svc_stop only)" "exit code"
}

test_an_unwritable_heartbeat_dir_warns_once_and_ingestion_goes_on() {
    fresh_schema health_unwritable
    fresh_topics health3
    register_apps com.health
    # A file where the directory should be: every heartbeat write fails.
    : >"$WORK/not-a-dir"
    local port
    port=$(free_port)
    svc_start nohb STORAGE_HEARTBEAT_DIR="$WORK/not-a-dir" STORAGE_METRICS_ADDR="127.0.0.1:$port"
    echo '{"package_name":"com.health","review_id":"h1","score":5,"thumbs_up_count":0,"reviewed_at":"2026-11-29T12:00:00Z","last_synced_at":"2026-11-29T12:00:00Z"}' |
        produce "$TOPIC_REVIEWS"
    wait_for_sql "SELECT count(*) FROM reviews" 1
    # Two more failed writes (one a second) after the row was stored, each
    # of which could have warned again.
    local series='storage_consumer_heartbeat_failures_total{pipeline="reviews"}' first
    first=$(metric_value "$port" "$series")
    [ "${first:-0}" -ge 1 ] || fail "no failed heartbeat write counted before the row was stored: [$first]"
    wait_until "two more failed heartbeat writes than $first" '[ "$(metric_value "$port" "$series")" -ge $((first + 2)) ] 2>/dev/null'
    assert_eq 0 "$(svc_stop nohb)" "exit code"
    assert_eq 1 "$(grep -c 'cannot write heartbeat file .*/reviews' "$WORK/nohb.log")" "warnings for reviews"
}


# A stopped process is not healthy, though its heartbeat files are seconds
# old: `health` says so at once, with the default max age (90 s).
test_health_reports_a_cleanly_stopped_process_unhealthy_at_once() {
    fresh_schema health_stopped
    fresh_topics health5
    svc_start stopped
    local out p
    out=$(wait_healthy stopped)
    assert_eq 0 "${out%%:*}" "health while running: $out"
    assert_eq 0 "$(svc_stop stopped)" "exit code"
    out=$(health stopped)
    assert_eq 1 "${out%%:*}" "health exit code right after a clean stop: $out"
    for p in app-stats reviews network-metrics; do
        assert_contains "$out" "$p: unhealthy (stopped at "
    done
    assert_contains "$out" "result=clean"
}

# A failed pipeline stops the process (exit 1): unhealthy at once, the
# failed pipeline named as such.
test_health_reports_a_process_that_exited_on_a_pipeline_failure_unhealthy_at_once() {
    fresh_schema health_failed
    fresh_topics health6
    register_apps com.health
    svc_start failed
    local out
    out=$(wait_healthy failed)
    assert_eq 0 "${out%%:*}" "health while running: $out"
    sql "DROP TABLE network_metrics"
    echo '{"package_name":"com.health","analysis_id":"00000000-0000-4000-a000-000000000001","analyzed_at":"2026-11-29T10:00:00Z","duration_seconds":1.5,"total_packets":1,"total_bytes":1,"protocols":{"tcp":1}}' |
        produce "$TOPIC_NETWORK_METRICS"
    assert_eq 1 "$(svc_wait failed 60)" "exit code after the pipeline failure"
    assert_contains "$(cat "$(svc_log failed)")" "pipeline network-metrics failed: " "the failure is the network-metrics pipeline's"
    out=$(health failed)
    assert_eq 1 "${out%%:*}" "health exit code right after the failure: $out"
    assert_contains "$out" "network-metrics: unhealthy (stopped at "
    assert_contains "$out" "result=failed"
    assert_contains "$out" "reviews: unhealthy (stopped at "
}

# The next process's first heartbeats make it healthy again.
test_a_restarted_process_is_healthy_again_after_a_stop() {
    fresh_schema health_restart
    fresh_topics health7
    svc_start first
    local out
    out=$(wait_healthy first)
    assert_eq 0 "${out%%:*}" "health of the first process: $out"
    assert_eq 0 "$(svc_stop first)" "exit code"
    out=$(health first)
    assert_eq 1 "${out%%:*}" "health between the stop and the restart: $out"
    # The second process shares the first one's heartbeat directory.
    svc_start second STORAGE_HEARTBEAT_DIR="$WORK/heartbeat-first"
    out=$(wait_healthy first)
    assert_eq 0 "${out%%:*}" "health of the restarted process: $out"
    assert_contains "$out" "reviews: healthy"
    assert_eq 0 "$(svc_stop second)" "exit code"
}

# kill -9 leaves no word behind: the heartbeat goes stale, and `health`
# says so once it is older than the max age.
test_health_reports_a_killed_process_stale_after_the_max_age() {
    fresh_schema health_killed
    fresh_topics health8
    svc_start killed
    local out
    out=$(wait_healthy killed)
    assert_eq 0 "${out%%:*}" "health while running: $out"
    assert_eq 137 "$(svc_kill killed)" "exit code of kill -9"
    # Nothing said it stopped: within the max age (90 s) it looks healthy.
    out=$(health killed)
    assert_eq 0 "${out%%:*}" "health right after kill -9, within the max age: $out"
    # With a max age of 1 s, unhealthy once its last heartbeat (at most a
    # heartbeat interval, 1 s, before the kill) is older than that.
    wait_until "reviews is reported stale" '[[ $(health killed STORAGE_HEALTH_MAX_AGE_SECONDS=1) == *"reviews: unhealthy"* ]]'
    out=$(health killed STORAGE_HEALTH_MAX_AGE_SECONDS=1)
    assert_eq 1 "${out%%:*}" "health exit code after kill -9, past the max age of 1 s: $out"
    assert_contains "$out" "reviews: unhealthy (heartbeat stale: last "
    case "$out" in *"stopped at"*) fail "a killed process reported as stopped: $out" ;; esac
}

# A crash leaves the stack of the thread that crashed in the log, in frames
# addr2line resolves, and the process still dies of its signal (DESIGN.md:
# Logs). The release build: sanitizer builds keep their own report.
# The release build (the crash tests' subject) started as NAME on a schema
# and topics of its own, healthy.
start_release_healthy() { # name suffix [VAR=value...]
    local name=$1 suffix=$2 out
    shift 2
    [ -x "$TOP/build/storage-consumer" ] || fail "$TOP/build/storage-consumer is missing (make all)"
    fresh_schema "health_crash_$suffix"
    fresh_topics "health_crash_$suffix"
    BIN=$TOP/build/storage-consumer svc_start "$name" "$@"
    out=$(wait_healthy "$name")
    assert_eq 0 "${out%%:*}" "health of $name before the crash: $out"
}

test_a_crash_logs_the_stack_and_dies_of_the_same_signal() {
    local release=$TOP/build/storage-consumer fmt out rc
    for fmt in text json; do
        start_release_healthy "crash-$fmt" "$fmt" STORAGE_LOG_FORMAT=$fmt
        svc_signal "crash-$fmt" SEGV
        rc=$(svc_wait "crash-$fmt" "$STOP_WAIT_S")
        assert_eq 139 "$rc" "exit status after SIGSEGV ($fmt)"
        out=$(cat "$(svc_log "crash-$fmt")")
        assert_contains "$out" "crashed on SIGSEGV; the stack of the crashing thread follows" "the crash line ($fmt)"
        if [ "$fmt" = json ]; then
            grep -F 'crashed on SIGSEGV' <<<"$out" | jq -e '.level == "error" and .component == "main"' >/dev/null ||
                fail "the crash line is not one JSON log object: $(grep -F 'crashed on SIGSEGV' <<<"$out")"
        fi
        # The frames resolved (as the reliability suite reports a crash):
        # the handler's own first, in the binary's source.
        out=$(crash_stack "$(svc_log "crash-$fmt")" "$release")
        assert_contains "$out" "SIGSEGV: on_crash at " "the frames resolved ($fmt)"
        assert_contains "$out" "crash.c:" "the frames resolved to source lines ($fmt)"
    done
}

# librdkafka starts its threads with every signal blocked, and a fault on a
# thread that blocks its signal kills the process before any handler runs:
# without crash_report_thread a crash inside librdkafka left no report at
# all, only exit 139. A SIGSEGV sent to librdkafka's main thread alone (no
# tool here makes that thread fault) stays pending there unless the thread
# takes it; taken, it must be reported as the crash of that thread.
test_a_crash_on_a_librdkafka_thread_logs_the_stack_too() {
    local release=$TOP/build/storage-consumer out rc pid tid t
    start_release_healthy crash-rdk rdk
    pid=$(svc_pid crash-rdk)
    tid=""
    for t in /proc/"$pid"/task/*; do
        [ "$(cat "$t/comm" 2>/dev/null)" = "rdk:main" ] && { tid=${t##*/}; break; }
    done
    [ -n "$tid" ] || fail "no librdkafka main thread (rdk:main) in process $pid: $(cat /proc/"$pid"/task/*/comm | sort | uniq -c | xargs)"
    python3 -c 'import ctypes, sys; sys.exit(ctypes.CDLL(None).tgkill(int(sys.argv[1]), int(sys.argv[2]), 11))' \
        "$pid" "$tid" || fail "tgkill of thread $tid of process $pid failed"
    rc=$(svc_wait crash-rdk 10)
    assert_eq 139 "$rc" "exit status after SIGSEGV on librdkafka's main thread"
    out=$(crash_stack "$(svc_log crash-rdk)" "$release")
    assert_contains "$out" "SIGSEGV: on_crash at " "the frames resolved"
}

run_tests
