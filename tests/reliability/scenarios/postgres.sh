# PostgreSQL faults mid-ingest (DESIGN.md: Errors): transient errors are retried on the
# same batch, never dead-lettered, and the process stays up; a server down
# longer than the retry schedule is fatal (exit 1) and the restarted process
# loses nothing.
#
# Each scenario: the three pipelines, a stream of ~8,500 records produced
# over ~12 s while the fault happens.

pg_scenario_begin() { # name seed
    scenario_begin "$1" reviews app-stats network-metrics
    gen_stream "$2" 8000 400 100
}

# Transient errors happened and were retried, and no record was
# dead-lettered for them.
expect_transient_retries() { # name regex
    local n
    n=$(log_count "$1" 'transient database error, retrying the same batch')
    if [ "$n" -gt 0 ]; then
        trace "ok: $n transient retries"
    else
        fail_check "$1 logged no transient retry"
    fi
    [ -n "${2:-}" ] && expect_log "$1" "transient database error.*$2" "the retries name /$2/"
    echo "$n"
}

# Two restarts in MODE mid-ingest: one with a batch caught in the middle of
# its INSERT, one wherever the ingest is. The service retries with the
# default schedule (1+2+4+8+16 s), the one meant to cover a restart: the
# suite's 200 ms base (6.2 s in all) is shorter than a restart on a busy
# machine (an immediate one, with its crash recovery, took 8 s).
pg_restarts_mid_ingest() { # scenario seed mode what
    pg_scenario_begin "$1" "$2"
    start_ingest s1 STORAGE_DB_RETRY_BASE_MS=1000
    hold_lock reviews
    wait_blocked sc-s1 || fail_check "no batch caught mid-write"
    local t r1 r2
    t=$(now_ms)
    pg_ctl_ restart -m "$3" >/dev/null || fail_check "pg_ctl restart -m $3 failed"
    r1=$(($(now_ms) - t))
    release_lock
    checkpoint "after restart 1"
    sleep 2
    t=$(now_ms)
    pg_ctl_ restart -m "$3" >/dev/null || fail_check "pg_ctl restart -m $3 failed"
    r2=$(($(now_ms) - t))
    checkpoint "after restart 2"
    producer_wait
    assert_scenario_kept_everything
    settle s1
    expect_alive s1
    local n
    n=$(expect_transient_retries s1 | tail -n 1)
    finish_running s1
    note "2 $4 mid-ingest (one mid-INSERT), taking $r1 and $r2 ms: $n transient retries, process stayed up"
}

scenario_pg_restart_fast() { pg_restarts_mid_ingest pg_restart_fast 21 fast "fast restarts"; }

# immediate: no shutdown checkpoint, crash recovery at start.
scenario_pg_restart_immediate() {
    pg_restarts_mid_ingest pg_restart_immediate 22 immediate "immediate restarts (crash recovery)"
}

scenario_pg_terminate_backend() {
    pg_scenario_begin pg_terminate_backend 23
    start_ingest s1
    local killed=0 k
    # Once while a batch is blocked mid-INSERT (57P01 inside the
    # transaction), then every 0.4 s wherever the sessions are.
    hold_lock reviews
    wait_blocked sc-s1 || fail_check "no batch caught mid-write"
    k=$(sql "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'sc-s1'")
    killed=$((killed + k))
    release_lock
    for _ in $(seq 1 15); do
        sleep 0.4
        k=$(sql "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'sc-s1'")
        killed=$((killed + k))
    done
    checkpoint "after the terminations"
    producer_wait
    assert_scenario_kept_everything
    settle s1
    expect_alive s1
    local n
    n=$(expect_transient_retries s1 | tail -n 1)
    finish_running s1
    note "$killed sessions terminated (pg_terminate_backend), one mid-INSERT: $n transient retries"
}

scenario_pg_max_connections() {
    pg_scenario_begin pg_max_connections 24
    # Back-off from 1 s: time to take the slots the service frees. Its
    # retry schedule (5 attempts: 1+2+4+8+16 s) is how long the server may
    # stay full; our holders sleep half of it, so that they go in time by
    # themselves even if releasing them below failed.
    local base_ms=1000 hold_s
    hold_s=$((base_ms * 31 / 1000 / 2))
    start_ingest s1 STORAGE_DB_RETRY_BASE_MS=$base_ms
    local end=$((SECONDS + STALL_S))
    while [ "$SECONDS" -lt "$end" ]; do
        [ "$(sql "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'sc-s1'")" = 3 ] && break
        sleep 0.2
    done
    # Our own session first (psql reading queries from us): it keeps working
    # once the server is full.
    coproc HOLD { PGAPPNAME=rel-holder psql "$ROOT_DB" -X -q -At 2>&1; }
    track "$HOLD_PID"
    hq() { echo "$1" >&"${HOLD[1]}"; local r; read -r -t "$STALL_S" r <&"${HOLD[0]}"; echo "$r"; }
    spawn_holders() { # count
        for _ in $(seq 1 "$1"); do
            PGAPPNAME=rel-holder psql "$ROOT_DB" -X -q -c "SELECT pg_sleep($hold_s)" >/dev/null 2>&1 &
            track $!
        done
    }
    local max n
    max=$(hq "SHOW max_connections;")
    # Every slot taken (superusers may use the reserved ones too), however
    # long starting the holders takes.
    end=$((SECONDS + STALL_S))
    while [ "$SECONDS" -lt "$end" ]; do
        n=$(hq "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend';")
        [ "$n" -ge "$max" ] 2>/dev/null && break
        spawn_holders $((max - n))
        sleep 0.3
    done
    [ "$n" -ge "$max" ] 2>/dev/null || fail_check "could not fill max_connections=$max (got $n)"
    # Full: end the service's sessions and take their slots before its first
    # reconnection (1 s back-off).
    local k t_full full_ms
    k=$(hq "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'sc-s1';")
    t_full=$(now_ms)
    spawn_holders $((k + 3))
    wait_log s1 'too many clients' 1 "$hold_s" || fail_check "the service never met 'too many clients' while the holders held the server ($hold_s s)"
    # Refused: release the server; the service must be back within its
    # retry schedule.
    hq "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'rel-holder' AND pid <> pg_backend_pid();" >/dev/null
    full_ms=$(($(now_ms) - t_full))
    echo '\q' >&"${HOLD[1]}"
    wait "$HOLD_PID" 2>/dev/null || true
    end=$((SECONDS + STALL_S))
    while [ "$SECONDS" -lt "$end" ]; do
        [ "$(sql_root "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'rel-holder'" 2>/dev/null)" = 0 ] && break
        sleep 0.1
    done
    checkpoint "after the exhaustion"
    producer_wait
    assert_scenario_kept_everything
    settle s1
    expect_alive s1
    local n
    n=$(expect_transient_retries s1 'too many clients' | tail -n 1)
    finish_running s1
    note "max_connections=$max filled, then the service's $k sessions ended and their slots taken until it was refused ($full_ms ms): $n transient retries ('too many clients'), process stayed up"
}

scenario_pg_statement_timeout() {
    pg_scenario_begin pg_statement_timeout 25
    start_ingest s1 STORAGE_DB_STATEMENT_TIMEOUT_MS=500
    hold_lock reviews
    wait_blocked sc-s1 || fail_check "no batch caught mid-write"
    # The INSERT waits: each attempt ends at the 500 ms statement timeout
    # (57014) until the lock goes. Held for five statement timeouts, well
    # within the retry schedule (6 attempts of 500 ms and 0.2+0.4+0.8+1.6+3.2
    # s of back-off); how long it really was is in the note.
    local t_lock held_ms
    t_lock=$(now_ms)
    sleep 2.5
    release_lock
    held_ms=$(($(now_ms) - t_lock))
    checkpoint "after the timeouts"
    producer_wait
    assert_scenario_kept_everything
    settle s1
    expect_alive s1
    local n
    n=$(expect_transient_retries s1 '57014' | tail -n 1)
    finish_running s1
    note "INSERT held $held_ms ms behind a lock, statement_timeout 500 ms: $n retries on 57014, process stayed up"
}

scenario_pg_down_past_retries() {
    pg_scenario_begin pg_down_past_retries 26
    # 3 attempts from 100 ms: 0.7 s of back-off in all.
    start_ingest s1 STORAGE_DB_RETRY_BASE_MS=100 STORAGE_DB_RETRY_MAX_ATTEMPTS=3
    local t0 rc elapsed
    t0=$(now_ms)
    pg_ctl_ stop -m fast >/dev/null || fail_check "pg_ctl stop failed"
    # It retries (a line each), then fails and stops.
    rc=$(svc_wait_progress s1)
    elapsed=$(($(now_ms) - t0))
    expect_eq "exit code with PostgreSQL down longer than the retry schedule" 1 "$rc"
    expect_log s1 'retries exhausted' "the failure names the exhausted retries"
    expect_log s1 'stopped exit=1' "the supervisor stops with exit 1"
    sleep 2
    pg_ctl_ start >/dev/null || fail_check "pg_ctl start failed"
    pg_ensure_up
    checkpoint "after exit 1"
    producer_wait
    assert_scenario_kept_everything
    svc_start s2
    finish s2
    note "server stopped mid-ingest: s1 exit $rc after $elapsed ms (retries 100+200+400 ms); restarted, nothing lost"
}

# A database restored from a backup (DESIGN.md, Progress in the database):
# pg_basebackup mid-ingest, the ingest goes on to its end and is committed
# to Kafka, then PostgreSQL is stopped and the backup put in place of its
# data directory. Kafka's committed offsets are past what the restored
# database holds; the service must start each partition at the database's
# position, read the gap again from Kafka, and say so (a WARN with the exact
# count per partition); the checker finds every published record stored
# exactly once.
scenario_pg_restore_backup() {
    pg_scenario_begin pg_restore_backup 27
    start_ingest s1
    # Every partition of the three pipelines has a position before the
    # backup: the one without would start at Kafka's committed offset.
    local end=$((SECONDS + STALL_S))
    while [ "$(sql "SELECT count(*) FROM consumer_offsets")" != 9 ] && [ "$SECONDS" -lt "$end" ]; do sleep 0.2; done
    pg_backup
    producer_wait
    assert_scenario_kept_everything
    settle s1
    wait_drained || fail_check "s1's offsets were not all committed before the restore: $LAG records behind"
    local rc
    rc=$(svc_stop s1)
    expect_eq "exit code of s1 after SIGTERM" 0 "$rc"
    local pipe p t c kafka=""
    for pipe in $PIPES; do
        for p in 0 1 2; do kafka+="$(topic_of "$pipe") $p $(committed "$pipe" "$p")"$'\n'; done
    done
    pg_restore_from_backup
    # Each partition the restored database is behind Kafka on is read again
    # from its position, and the service says how much.
    local pos gap=0 behind=0
    while read -r t p c; do
        [ -n "$t" ] || continue
        pos=$(sql "SELECT next_offset FROM consumer_offsets WHERE topic = '$t' AND partition = $p")
        [ -n "$pos" ] || { fail_check "$t [$p] has no position in the restored database"; continue; }
        [ "$pos" -lt "$c" ] || continue
        gap=$((gap + c - pos))
        behind=$((behind + 1))
        echo "$t $p $pos $c" >>"$SW/behind"
    done <<<"$kafka"
    [ "$gap" -gt 0 ] || fail_check "the restored database is not behind Kafka's committed offsets: the backup came too late, scenario not set up"
    svc_start s2
    finish s2
    while read -r t p pos c; do
        expect_log s2 "$t \\[$p\\] starts at offset $pos, the database's position: $((c - pos)) message\\(s\\) below Kafka's committed offset $c are read again" \
            "s2 read $t [$p] again from the restored position $pos up to Kafka's committed $c"
    done <"$SW/behind"
    note "pg_basebackup -X stream mid-ingest ($BACKUP_MS ms), restored after the ingest ($RESTORE_MS ms): $behind partitions behind Kafka's committed offsets by $gap records in all, read again from the database's positions"
}
