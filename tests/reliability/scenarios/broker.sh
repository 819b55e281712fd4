# Broker faults through the mock cluster's control channel (DESIGN.md: The batch loop; Errors; Operations):
# brokers down, leaders moving or missing, the group coordinator moving,
# request errors on Fetch and OffsetCommit, latency, and retention dropping
# records nobody stored.

broker_scenario_begin() { # name seed
    scenario_begin "$1" reviews app-stats network-metrics
    gen_stream "$2" 8000 400 100
}

scenario_broker_down_one() {
    broker_scenario_begin broker_down_one 31
    start_ingest s1
    local b
    # Each broker in turn (so the leader of some partitions and, once, the
    # group coordinator), 2.5 s each, while records keep coming.
    for b in 1 2 3; do
        broker_ctl broker-down "$b" >/dev/null
        sleep 2.5
        broker_ctl broker-up "$b" >/dev/null
        sleep 0.5
    done
    checkpoint "after the outages"
    producer_wait
    assert_scenario_kept_everything
    settle s1
    expect_alive s1
    finish_running s1
    note "brokers 1, 2, 3 down 2.5 s each, in turn, mid-ingest: process stayed up"
}

scenario_brokers_all_down() {
    broker_scenario_begin brokers_all_down 32
    # Produced in thirds, in the foreground: a producer cannot deliver with
    # every broker down (kcat gives up), and the stream must be whole.
    local t
    mkdir -p "$SW/chunks"
    for t in $(scenario_topics); do split -n l/3 -d -a 1 "$SW/gen/$t.kv" "$SW/chunks/$t."; done
    third() { for t in $(scenario_topics); do kcat_produce "$t" <"$SW/chunks/$t.$1" || fail_check "kcat could not produce to $t"; done; }
    local commit_ms=1000
    svc_start s1 STORAGE_COMMIT_TIMEOUT_MS=$commit_ms STORAGE_COMMIT_FAILURE_LIMIT=5
    wait_log s1 'partitions assigned' 3 "$GROUP_WAIT_S" || fail_check "s1: the pipelines were not assigned within $GROUP_WAIT_S s"
    third 0
    wait_log s1 '\[reviews\] batch size=' 1 || fail_check "s1: no reviews batch within ${STALL_S} s"
    # A batch held mid-write while every broker goes down: its offset commit
    # comes when nobody answers, and must give up at its deadline.
    hold_lock reviews
    third 1
    wait_blocked sc-s1 "$STALL_S" s1 || fail_check "no batch caught mid-write"
    local t0 took
    broker_ctl broker-down -1 >/dev/null
    t0=$(now_ms)
    release_lock
    # The batch ends (its rows were written), then its commit gives up at
    # the deadline: the log line says so, however long the harness takes
    # to see it.
    if wait_log s1 "offset commit did not complete within $commit_ms ms" 1; then
        took=$(($(now_ms) - t0))
    else
        took=never
        fail_check "no commit gave up at its $commit_ms ms deadline"
    fi
    # Down for six commit deadlines in all: several commits give up.
    sleep "$(awk -v t="$(($(now_ms) - t0))" -v d="$((6 * commit_ms))" 'BEGIN {r = (d - t) / 1000; printf "%.1f", (r > 0 ? r : 0)}')"
    broker_ctl broker-up -1 >/dev/null
    # DESIGN.md: The batch loop: each batch stored during the outage makes one commit that
    # gives up at the deadline; STORAGE_COMMIT_FAILURE_LIMIT (5) of them in a
    # row are a livelock and exit 1. Fewer: the process stays up. Either is
    # what the design promises; anything else is not.
    local failures outcome
    failures=$(grep -cE '\[reviews\] offset commit failed \(' "$SW/s1.log" || true)
    # A failed pipeline takes a moment to stop the others and exit.
    grep -q 'pipeline failed' "$SW/s1.log" && svc_wait s1 "$STOP_WAIT_S" >/dev/null
    if svc_running s1; then
        outcome="stayed up"
        [ "$failures" -lt 5 ] || fail_check "s1 logged $failures commit failures in a row of reviews and did not stop"
    else
        local rc
        rc=$(svc_wait s1 "$STOP_WAIT_S")
        outcome="exit $rc after 5 commits timed out in a row (the commit livelock of DESIGN.md: The batch loop)"
        expect_eq "exit code after STORAGE_COMMIT_FAILURE_LIMIT commits failed in a row" 1 "$rc"
        expect_log s1 "commit livelock: 5 offset commits failed in a row, last: offset commit did not complete within $commit_ms ms" \
            "the exit names the commit livelock"
    fi
    checkpoint "after the outage"
    third 2
    assert_scenario_kept_everything
    if ! svc_running s1; then svc_start s2; settle s2; finish s2; else settle s1; expect_alive s1; finish_running s1; fi
    note "all 3 brokers down $((6 * commit_ms / 1000)) s with a batch in flight: its commit gave up after $(ms "$took"), $failures reviews commit(s) failed during the outage, $outcome; nothing lost"
}

scenario_leader_changes() {
    broker_scenario_begin leader_changes 33
    start_ingest s1
    local i t p moves=0
    for i in $(seq 1 10); do
        for t in $(scenario_topics); do
            p=$((RANDOM % 3))
            broker_ctl leader "$t" "$p" $((1 + RANDOM % 3)) >/dev/null && moves=$((moves + 1))
        done
        sleep 0.4
    done
    # A partition with no leader at all for 3 s.
    broker_ctl leader "$T_REVIEWS" 1 -1 >/dev/null
    sleep 3
    broker_ctl leader "$T_REVIEWS" 1 2 >/dev/null
    checkpoint "after the leader changes"
    producer_wait
    assert_scenario_kept_everything
    settle s1
    # librdkafka 2.0.2 may leave a partition on a broker that is no longer
    # its leader (DESIGN.md: Errors): then the pipeline must fail naming
    # it, and the restart (finish_running) must store the rest.
    local outcome="process stayed up" stalled
    stalled=$(grep -oE '[^ ]+ \[[0-9]+\]: no record fetched for [0-9]+ s' "$SW/s1.log" | head -n 1 || true)
    if [ -n "$stalled" ] && ! svc_running s1; then
        expect_eq "exit code after a stalled fetch" 1 "$(svc_wait s1 "$STOP_WAIT_S")"
        outcome="librdkafka stopped fetching ($stalled): exit 1, restarted"
    else
        expect_alive s1
    fi
    finish_running s1
    note "$moves leader moves in 4 s, then $T_REVIEWS [1] leaderless 3 s: $outcome"
}

scenario_coordinator_moves() {
    broker_scenario_begin coordinator_moves 34
    start_ingest s1
    local i pipe moves=0
    for i in $(seq 0 7); do
        for pipe in $PIPES; do
            broker_ctl coordinator group "$GROUP_PREFIX.$pipe" $((1 + (i + ${#pipe}) % 3)) >/dev/null && moves=$((moves + 1))
        done
        sleep 0.8
    done
    checkpoint "after the coordinator moves"
    local before
    before=$(batches s1)
    producer_wait
    assert_scenario_kept_everything
    settle s1
    expect_alive s1
    finish_running s1
    note "$moves coordinator moves (3 groups, every 0.8 s for 6.4 s): process stayed up, $before batches by then"
}

scenario_fetch_errors() {
    broker_scenario_begin fetch_errors 35
    start_ingest s1
    local errs="NOT_LEADER_FOR_PARTITION LEADER_NOT_AVAILABLE REQUEST_TIMED_OUT UNKNOWN_TOPIC_OR_PART KAFKA_STORAGE_ERROR FENCED_LEADER_EPOCH UNKNOWN _TRANSPORT"
    # shellcheck disable=SC2086
    broker_ctl request-errors Fetch $errs $errs >/dev/null || fail_check "could not inject Fetch errors"
    sleep 3
    # shellcheck disable=SC2086
    broker_ctl request-errors Fetch $errs >/dev/null || fail_check "could not inject Fetch errors"
    sleep 2
    checkpoint "after the Fetch errors"
    producer_wait
    assert_scenario_kept_everything
    settle s1
    expect_alive s1
    finish_running s1
    note "24 Fetch errors injected (8 kinds) mid-ingest: process stayed up"
}

# DESIGN.md: The batch loop: a failed offset commit is a warning; commit_failure_limit (5)
# failures in a row are a livelock, exit 1. REBALANCE_IN_PROGRESS is not
# counted: a rebalance fails the pipeline only when it lasts longer than the
# max poll interval (phase D). One record per batch, so each batch makes one
# commit. (ILLEGAL_GENERATION and UNKNOWN_MEMBER_ID crash the mock when
# injected: group_churn and zombie_member produce them for real.)
scenario_commit_errors() {
    scenario_begin commit_errors reviews
    gen_stream 36 2000 0 0
    local kv=$SW/gen/$T_REVIEWS.kv i=0
    svc_start s1 STORAGE_COMMIT_FAILURE_LIMIT=5
    wait_log s1 '\[reviews\] partitions assigned' 1 "$GROUP_WAIT_S" || fail_check "no assignment within $GROUP_WAIT_S s"
    one_record() { # [service]: the next record of the stream, alone in its batch
        local svc=${1:-s1} before
        before=$(log_count "$svc" '\[reviews\] batch size=')
        i=$((i + 1))
        sed -n "${i}p" "$kv" | kcat_produce "$T_REVIEWS" -p 0
        wait_log "$svc" '\[reviews\] batch size=' $((before + 1)) || fail_check "record $i was not stored in a batch of its own within ${STALL_S} s"
    }
    # A: four failures, then a success: a warning each, no exit.
    broker_ctl request-errors OffsetCommit GROUP_AUTHORIZATION_FAILED GROUP_AUTHORIZATION_FAILED \
        GROUP_AUTHORIZATION_FAILED GROUP_AUTHORIZATION_FAILED >/dev/null
    for _ in 1 2 3 4 5 6; do one_record; done
    expect_eq "commit failures logged in phase A" 4 "$(log_count s1 'offset commit failed \([0-9]/5 in a row')"
    expect_eq "a fifth failure in a row" 0 "$(log_count s1 'offset commit failed \(5/5')"
    expect_eq "offset committed after the success" 6 "$(committed reviews 0)"
    expect_alive s1
    checkpoint "after 4 failures and a success"
    # B: REBALANCE_IN_PROGRESS: the service holds its commits until the
    # rebalance is over (no commit with a stale generation), however many
    # batches it stores meanwhile, and counts none toward the limit. The
    # mock's injected error comes with no real rebalance, so no assignment
    # ends the hold: a commit is tried again after a session timeout (6 s),
    # meeting the next injected error, until none is left.
    local refusals=2
    # shellcheck disable=SC2046
    broker_ctl request-errors OffsetCommit $(printf 'REBALANCE_IN_PROGRESS %.0s' $(seq 1 "$refusals")) >/dev/null
    for _ in 1 2 3 4 5 6 7; do one_record; done
    expect_eq "refusal warnings (one per rebalance)" 1 "$(log_count s1 'offset commit refused while the group rebalances')"
    local held=$i held_ms t_b
    t_b=$(now_ms)
    # Each refusal holds the commits one session timeout: the offset is
    # committed within one more than there were refusals.
    while [ "$(committed reviews 0)" != "$held" ] && [ $(($(now_ms) - t_b)) -lt $(((refusals + 1) * SESSION_TIMEOUT_MS)) ]; do sleep 0.2; done
    held_ms=$(($(now_ms) - t_b))
    expect_eq "offset committed once the refusals ended, with no record after them" "$held" "$(committed reviews 0)"
    expect_eq "commits resumed" 1 "$(log_count s1 'offset commits resumed')"
    expect_no_log s1 'commit livelock' "REBALANCE_IN_PROGRESS is not counted toward the limit"
    expect_alive s1
    checkpoint "after REBALANCE_IN_PROGRESS"
    # C: the limit in a row: exit 1.
    broker_ctl request-errors OffsetCommit GROUP_AUTHORIZATION_FAILED GROUP_AUTHORIZATION_FAILED \
        GROUP_AUTHORIZATION_FAILED GROUP_AUTHORIZATION_FAILED GROUP_AUTHORIZATION_FAILED >/dev/null
    for _ in 1 2 3 4; do one_record; done
    i=$((i + 1))
    sed -n "${i}p" "$kv" | kcat_produce "$T_REVIEWS" -p 0
    local rc
    # Its batch, the fifth failure, then the stop.
    rc=$(svc_wait_progress s1)
    expect_eq "exit code after 5 commit failures in a row" 1 "$rc"
    expect_log s1 'commit livelock: 5 offset commits failed in a row' "the failure names the commit livelock"
    checkpoint "after exit 1"
    broker_ctl clear-request-errors OffsetCommit >/dev/null
    # D: commits refused by a rebalance that outlasts the max poll interval
    # (10 s here; the retry settings must fit in it) are a livelock too.
    local max_poll_ms=10000
    svc_start s2 STORAGE_MAX_POLL_INTERVAL_MS=$max_poll_ms STORAGE_DB_RETRY_MAX_ATTEMPTS=2 \
        STORAGE_DB_RETRY_BASE_MS=100 STORAGE_DB_STATEMENT_TIMEOUT_MS=1500 STORAGE_COMMIT_TIMEOUT_MS=1000
    wait_log s2 '\[reviews\] partitions assigned' 1 "$GROUP_WAIT_S" || fail_check "s2 was not assigned within $GROUP_WAIT_S s"
    local errs=""
    for _ in $(seq 1 60); do errs="$errs REBALANCE_IN_PROGRESS"; done
    # shellcheck disable=SC2086
    broker_ctl request-errors OffsetCommit $errs >/dev/null
    local t0 rc_d
    t0=$(now_ms)
    # The refusals outlast the max poll interval; the next commit (a
    # record's, or the probe a session timeout after a refusal) sees it;
    # the stop then takes at most the shutdown timeout.
    while svc_running s2 && [ $(($(now_ms) - t0)) -lt $((max_poll_ms + SESSION_TIMEOUT_MS + SHUTDOWN_TIMEOUT_S * 1000)) ]; do
        one_record s2
        sleep 0.5
    done
    rc_d=$(svc_wait s2 "$STOP_WAIT_S")
    expect_eq "exit code after commits refused for longer than STORAGE_MAX_POLL_INTERVAL_MS" 1 "$rc_d"
    expect_log s2 "commit livelock: offset commits refused for [0-9]+ ms, longer than STORAGE_MAX_POLL_INTERVAL_MS=$max_poll_ms" \
        "the failure names the refusals that outlasted the max poll interval"
    local refused_for
    refused_for=$(grep -oE 'refused for [0-9]+ ms, longer' "$SW/s2.log" | head -n 1 | grep -oE '[0-9]+')
    broker_ctl clear-request-errors OffsetCommit >/dev/null
    checkpoint "after the long rebalance"
    # The rest of the stream, to a restarted process.
    sed -n "$((i + 1)),\$p" "$kv" | kcat_produce "$T_REVIEWS"
    assert_scenario_kept_everything
    svc_start s3
    finish s3
    note "4 failures then a success: up; 2 REBALANCE_IN_PROGRESS: commits held, up, committed $(ms "$held_ms") after the last batch; 5 GROUP_AUTHORIZATION_FAILED in a row: exit $rc; commits refused by a rebalance for $(ms "$refused_for") (max poll interval 10 s): exit $rc_d; restarted, nothing lost"
}

scenario_latency_spikes() {
    broker_scenario_begin latency_spikes 37
    start_ingest s1
    broker_ctl broker-rtt -1 400 >/dev/null
    sleep 3
    broker_ctl broker-rtt -1 0 >/dev/null
    broker_ctl broker-rtt 2 2500 >/dev/null
    sleep 3
    broker_ctl broker-rtt 2 0 >/dev/null
    checkpoint "after the latency spikes"
    producer_wait
    assert_scenario_kept_everything
    settle s1
    expect_alive s1
    local slowest
    slowest=$(sed -nE 's/.*\[reviews\] batch size=.* duration_ms=([0-9.]+).*/\1/p' "$SW/s1.log" | sort -n | tail -n 1)
    finish_running s1
    note "every broker +400 ms for 3 s, then broker 2 +2500 ms for 3 s: process stayed up, slowest reviews batch ${slowest} ms"
}

# The broker's retention drops records the group had not consumed yet, and
# the database is restored from a backup older than what the broker still
# holds (DESIGN.md, Progress in the database). The first part of the stream
# is stored in two halves, with a backup of the database between them; then
# PostgreSQL is restored from it, and 6.5 MB more on partition 0 push its
# log start past the restored position. The service cannot store what the
# broker dropped, and must say exactly how much (an ERROR naming the count,
# the low watermark minus the restored position, and the metric
# messages_lost_to_retention_total equal to it); partitions 1 and 2, behind
# Kafka's committed offsets, are read again; and everything else is exact:
# the checker is told that the records the broker does not hold are lost,
# and their number must be that count.
scenario_retention() {
    scenario_begin retention reviews
    gen_stream 38 1500 0 0 single=1
    local half=$(($(wc -l <"$SW/gen/$T_REVIEWS.kv") / 2))
    head -n "$half" "$SW/gen/$T_REVIEWS.kv" >"$SW/half1.kv"
    tail -n +$((half + 1)) "$SW/gen/$T_REVIEWS.kv" >"$SW/half2.kv"
    kcat_produce "$T_REVIEWS" <"$SW/half1.kv" || fail_check "kcat could not produce the first half"
    svc_start s1
    load_coords
    wait_stored s1 || fail_check "the first half was not stored: $MISSING records missing"
    wait_drained || fail_check "the first half's offsets were not all committed: $LAG records behind"
    checkpoint "first half stored"
    pg_backup
    kcat_produce "$T_REVIEWS" <"$SW/half2.kv" || fail_check "kcat could not produce the second half"
    load_coords
    wait_stored s1 || fail_check "the second half was not stored: $MISSING records missing"
    wait_drained || fail_check "the second half's offsets were not all committed: $LAG records behind"
    local rc
    rc=$(svc_stop s1)
    expect_eq "exit code of s1 after SIGTERM" 0 "$rc"
    local c0 c1 c2
    c0=$(committed reviews 0)
    c1=$(committed reviews 1)
    c2=$(committed reviews 2)
    pg_restore_from_backup
    # The restored positions are the first half's ends (its coordinates
    # were loaded before the backup).
    local b0 b1 b2 p
    for p in 0 1 2; do
        eval "b$p=\$(sql \"SELECT next_offset FROM consumer_offsets WHERE partition = $p\")"
        expect_eq "the restored position of [$p]: the first half's end" \
            "$(sql "SELECT count(*) FROM rel.coord WHERE partition = $p")" "$(eval echo "\$b$p")"
    done
    # 6.5 MB of uncompressed records on partition 0 while nobody consumes
    # (900 of 7 KB: mawk's sprintf stops at 8 KiB): more than the mock
    # keeps (5 MiB), so its log start passes the group's committed offset
    # and the restored position. Generated after the restore, whose model
    # is the backup's.
    GEN_DIR=$SW/gen2 gen_stream 39 900 0 0 single=1 base=100000 pad=7000 bad=0
    kcat_produce "$T_REVIEWS" -p 0 -X compression.codec=none <"$SW/gen2/$T_REVIEWS.kv" ||
        fail_check "kcat could not produce the second part"
    local wm lo
    wm=$(watermarks "$T_REVIEWS" 0)
    lo=${wm%% *}
    if ! [ "$lo" -gt "$c0" ] 2>/dev/null; then
        fail_check "retention did not pass the committed offset ($c0; watermarks $wm): scenario not set up"
    fi
    # Partitions 1 and 2 lost nothing.
    for p in 1 2; do
        wm=$(watermarks "$T_REVIEWS" "$p")
        [ "${wm%% *}" = 0 ] || fail_check "the broker dropped records of $T_REVIEWS [$p] (watermarks $wm): only [0] may lose any"
    done
    echo 1 >"$SW/allow_not_on_broker"
    local lost=$((lo - b0)) port
    port=$(free_port)
    svc_start s2 STORAGE_METRICS_ADDR="127.0.0.1:$port"
    load_coords
    wait_stored s2 || fail_check "the records the broker kept were not stored: $MISSING missing"
    expect_log s2 " error +\[reviews\] $T_REVIEWS \[0\]: $lost message\(s\) can no longer be stored: the database's position $b0 is below the partition's first offset $lo " \
        "s2 reported the $lost records of [0] retention deleted before they were stored (the restored position $b0, the first offset $lo) at ERROR level"
    expect_eq "storage_consumer_messages_lost_to_retention_total of reviews" "$lost" \
        "$(http_get "$port" /metrics | tr -d '\r' | sed -nE 's/^storage_consumer_messages_lost_to_retention_total\{pipeline="reviews"\} ([0-9]+)$/\1/p')"
    expect_log s2 "$T_REVIEWS \[1\] starts at offset $b1, the database's position: $((c1 - b1)) message\(s\) below Kafka's committed offset $c1 are read again" \
        "s2 read [1] again from the restored position $b1"
    expect_log s2 "$T_REVIEWS \[2\] starts at offset $b2, the database's position: $((c2 - b2)) message\(s\) below Kafka's committed offset $c2 are read again" \
        "s2 read [2] again from the restored position $b2"
    finish s2
    # Lost: exactly the records of [0] from the restored position to the
    # first offset, which the broker no longer holds (never loaded into
    # rel.coord since the backup).
    expect_eq "published records the broker no longer holds (lost)" "$lost" "$(cut -d'|' -f11 "$SW/check")"
    note "retention moved $T_REVIEWS [0]'s log start to $lo, past Kafka's committed $c0 and the position $b0 of a database restored from a backup: $lost records never stored, reported at ERROR and in the metric; [1] and [2] read again from the backup's positions"
}
