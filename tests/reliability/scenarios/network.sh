# The real network's faults (DESIGN.md: Errors; Probes and metrics): packets
# dropped or answered with a reset, a slow link, names that stop resolving.
# run.sh runs each scenario in a network namespace of its own, so these
# nft rules and host names never touch the machine's network, nor another
# scenario's: the rules filter the namespace's loopback by port (PostgreSQL
# over TCP here, not the Unix socket the harness uses), the names live in
# its /etc/hosts (/etc/netns/NAME/hosts, bind-mounted by `ip netns exec`,
# edited in place).
#
# Two scenarios, each one process through several faults in turn, to keep
# the suite short. After each heal the service must make progress within a
# bound derived from its settings; while PostgreSQL cannot be reached,
# /readyz must not say ready once the service could have noticed.

NET_TABLE=reliability
NET_DB_HOST=db.reliability.test
NET_KAFKA_HOST=kafka.reliability.test

# How long /readyz may say ready after PostgreSQL stopped answering
# (DESIGN.md: Probes and metrics): the silence it allows, whatever the loop
# is busy with (settings_db_silence_ms: the ping period, 2 s, longer than
# the suite's poll, plus one attempt, the statement timeout plus 1 s),
# counted from PostgreSQL's last answer, which came before the fault was
# in place (once nft has returned); 200 ms for the pipeline's thread, which
# dates an answer when it reads it, reading the last one late on a busy
# machine.
NET_PING_MS=2000
net_attempt_ms() { echo $((2500 + 1000)); } # svc_env's STORAGE_DB_STATEMENT_TIMEOUT_MS
net_notice_ms() { echo $((NET_PING_MS + $(net_attempt_ms) + 200)); }
# A refused connection (a reset) fails at once: a ping period, and a poll
# for the loop's turn.
NET_NOTICE_REFUSED_MS=$((NET_PING_MS + 200))
# net_postgres retries from 500 ms (STORAGE_DB_RETRY_BASE_MS): 15.5 s of
# back-off in all, which a fault failing every attempt at once (a reset, a
# name) must fit in; the suite's 200 ms gives 6.2 s.
NET_RETRY_BASE_MS=500
# After a heal, the service stores again within its worst-case batch
# (settings_worst_case_batch_ms: 6 attempts to their deadline, the back-off
# doubled 5 times, two commits of 4 s): a batch that met the fault would
# have failed the pipeline by then.
net_heal_ms() { echo $((6 * $(net_attempt_ms) + NET_RETRY_BASE_MS * 31 + 2 * 4000)); }

# nft, only inside the scenario's namespace (never the machine's).
net_nft() {
    if [ -z "${RELIABILITY_NETNS:-}" ] || [ "$(ip netns identify 2>/dev/null)" != "$RELIABILITY_NETNS" ]; then
        fail_check "nft refused: not inside the scenario's network namespace"
        return 1
    fi
    nft "$@"
}

# A table of the namespace's own, with an input chain the faults add to.
net_begin() {
    net_nft add table inet "$NET_TABLE" &&
        net_nft add chain inet "$NET_TABLE" input '{ type filter hook input priority 0; policy accept; }' ||
        fail_check "cannot set up the nft table in the namespace"
    net_names_all
}

net_rule() { net_nft add rule inet "$NET_TABLE" input "$@" || fail_check "nft rule refused: $*"; } # rule...

# Every fault ends (the namespace, and any fault left in it, goes with the scenario).
net_heal() {
    [ -n "${RELIABILITY_NETNS:-}" ] || return 0
    net_nft list table inet "$NET_TABLE" >/dev/null 2>&1 || return 0
    net_nft flush chain inet "$NET_TABLE" input
}

# Packets to and from PORT vanish: no answer, no reset.
net_blackhole() { # port
    net_rule tcp dport "$1" drop
    net_rule tcp sport "$1" drop
}

# The namespace's host names: those given resolve to 127.0.0.1, the
# others do not. Written in place: `ip netns exec` bind-mounted this very
# file (its inode) over /etc/hosts.
net_names() { # [name...]
    [ -n "${RELIABILITY_NETNS:-}" ] || return 0
    {
        echo "127.0.0.1 localhost"
        [ $# = 0 ] || echo "127.0.0.1 $*"
    } >"/etc/netns/$RELIABILITY_NETNS/hosts"
}
net_names_all() { net_names "$NET_DB_HOST" "$NET_KAFKA_HOST"; }

# /readyz of a process on PORT, in one line: the status, then each
# pipeline's line.
readyz() { # port
    http_get "$1" /readyz 2>/dev/null | tr -d '\r' | awk 'NR == 1 {s = $2} /: (not )?ready/ {l = l "; " $0} END {print s l}'
}

# From FROM_MS (epoch ms) until UNTIL_MS, /readyz on PORT must say every
# pipeline is not ready: PostgreSQL cannot be reached since ON_MS.
expect_unready() { # port on_ms from_ms until_ms what
    local r n=0 at
    trace "$5: in place at $(date -u -d "@$(($2 / 1000))" +%T).$(printf %03d $(($2 % 1000)))"
    while [ "$(now_ms)" -lt "$3" ]; do sleep 0.1; done
    while [ "$(now_ms)" -lt "$4" ]; do
        at=$(now_ms)
        r=$(readyz "$1")
        n=$((n + 1))
        if [ "${r%%;*}" != 503 ] || [[ $r =~ \;\ [a-z-]+:\ ready ]]; then
            fail_check "$5: /readyz said ready $((at - $2)) ms after PostgreSQL could no longer be reached: $r"
            return
        fi
        sleep 0.2
    done
    trace "ok: $5: /readyz not ready in all $n samples: $r"
}

# After a heal at HEAL_MS: NAME logs a batch again and /readyz on PORT says
# ready within LIMIT_MS. Prints the milliseconds it took.
expect_progress() { # name port heal_ms limit_ms what
    local before r
    before=$(batches "$1")
    while :; do
        if [ "$(batches "$1")" -gt "$before" ] && r=$(readyz "$2") && [ "${r%%;*}" = 200 ]; then
            echo $(($(now_ms) - $3))
            return
        fi
        if ! svc_running "$1" || [ $(($(now_ms) - $3)) -gt "$4" ]; then
            fail_check "$5: no progress within $4 ms of the heal (batches logged: $before before; /readyz: $(readyz "$2"))"
            echo never
            return
        fi
        progress
        sleep 0.1
    done
}

# Sleep until epoch ms T.
sleep_until() { sleep "$(awk -v t="$1" -v n="$(now_ms)" 'BEGIN {d = (t - n) / 1000; printf "%.2f", (d > 0 ? d : 0)}')"; }

# The delay relay in front of PostgreSQL's TCP port (no tc netem here):
# RELAY_PORT, and RELAY_DELAY, the file of its delay each way (ms).
relay_start() {
    RELAY_PORT=$(free_port)
    RELAY_DELAY=$SW/relay.delay
    echo 0 >"$RELAY_DELAY"
    "$(dirname "$BIN")/delay-relay" "$RELAY_PORT" "$(cat "$PG_DIR/port")" "$RELAY_DELAY" >"$SW/relay.log" 2>&1 &
    track $!
    local end=$((SECONDS + STALL_S))
    until (exec 3<>"/dev/tcp/127.0.0.1/$RELAY_PORT") 2>/dev/null; do
        [ "$SECONDS" -lt "$end" ] || { fail_check "the delay relay did not listen: $(cat "$SW/relay.log")"; return 1; }
        sleep 0.05
    done
}

# The service through the network: PostgreSQL by name over TCP via the
# relay, the brokers' bootstrap by name, probes on METRICS_PORT.
net_start() { # name [VAR=value...]
    local name=$1
    shift
    METRICS_PORT=$(free_port)
    svc_start "$name" STORAGE_DATABASE_URL="$(echo "$DB" | sed -E "s/host=[^ ]+/host=$NET_DB_HOST/; s/port=[0-9]+/port=$RELAY_PORT/") application_name=sc-$name" \
        STORAGE_KAFKA_BOOTSTRAP_SERVERS="${BOOTSTRAP//127.0.0.1/$NET_KAFKA_HOST}" STORAGE_METRICS_ADDR="127.0.0.1:$METRICS_PORT" "$@"
    wait_log "$name" 'partitions assigned' 3 "$GROUP_WAIT_S" ||
        fail_check "$name: the pipelines were not assigned within $GROUP_WAIT_S s (a first election and $GROUP_ROUNDS rounds)"
    # Produced slowly all along: every fault meets records to store, and
    # every heal has a backlog to show progress on.
    producer_start 90 45
    wait_log "$name" '\[reviews\] batch size=' 1 "$STALL_S" || fail_check "$name: no reviews batch within ${STALL_S} s"
}

net_scenario_begin() { # name seed
    scenario_begin "$1" reviews app-stats network-metrics
    gen_stream "$2" 8000 400 100
    net_begin
    relay_start
}

# PostgreSQL unreachable in four ways and slow, one process through them
# all: blackholed both ways past the attempt's deadline; its answers dropped
# while a COMMIT is in flight (the outcome unknown to the service: the
# retry must change nothing); connections reset; +200 ms a round trip; its
# host name gone while the connections reset. The service must stay up,
# retry, store again within its worst-case batch after each heal, and
# /readyz must not say ready while PostgreSQL cannot be reached.
scenario_net_postgres() {
    net_scenario_begin net_postgres 41
    net_start s1 STORAGE_DB_RETRY_BASE_MS=$NET_RETRY_BASE_MS
    local R=$RELAY_PORT notice heal t0 t_on t_heal p_black p_answers p_reset p_name
    notice=$(net_notice_ms)
    heal=$(net_heal_ms)
    # 1. Blackholed both ways for the time to notice plus 1.5 s of samples:
    # longer than an attempt's deadline, within the retry schedule.
    t0=$(now_ms)
    net_blackhole "$R"
    t_on=$(now_ms)
    expect_unready "$METRICS_PORT" "$t_on" $((t_on + notice)) $((t_on + notice + 1500)) "blackholed"
    net_heal
    t_heal=$(now_ms)
    p_black=$(expect_progress s1 "$METRICS_PORT" "$t_heal" "$heal" "blackholed $((t_heal - t0)) ms" | tail -n 1)
    checkpoint "after the blackhole"
    # 2. Its answers dropped while a batch's COMMIT is in flight: the batch
    # is caught mid-INSERT behind a lock, the answers stop, the lock goes,
    # and the transaction commits unseen. The retry must find it stored.
    hold_lock reviews
    wait_blocked sc-s1 || fail_check "no batch caught mid-write"
    t0=$(now_ms)
    net_rule tcp sport "$R" drop
    t_on=$(now_ms)
    release_lock
    expect_unready "$METRICS_PORT" "$t_on" $((t_on + notice)) $((t_on + notice + 1000)) "answers dropped"
    net_heal
    t_heal=$(now_ms)
    p_answers=$(expect_progress s1 "$METRICS_PORT" "$t_heal" "$heal" "answers dropped $((t_heal - t0)) ms" | tail -n 1)
    local unseen
    unseen=$(sql "SELECT count(*) FROM rel.position_moves WHERE topic = '$T_REVIEWS'
                  AND at BETWEEN to_timestamp($t0 / 1000.0) AND to_timestamp($t_heal / 1000.0)")
    [ "$unseen" -gt 0 ] || fail_check "no reviews transaction committed while the answers were dropped: scenario not set up"
    # Its retry found every row stored (by the database's position) and
    # wrote nothing.
    local since
    since=$(date -u -d "@$((t0 / 1000))" +%Y-%m-%dT%H:%M:%S)
    awk -v s="$since" '$1 >= s && /\[reviews\] batch size=.* inserted=0 updated=0 skipped=[1-9]/' "$SW/s1.log" | grep -q . ||
        fail_check "answers dropped: no reviews batch after the heal found its rows stored (inserted=0 updated=0): the retry of the COMMIT that went through unseen wrote again"
    checkpoint "after the dropped answers"
    # 3. Reset: every packet to PostgreSQL answered with a TCP reset, for
    # twice the ping period (the idle pipelines notice), well within the
    # retry schedule's back-off (15.5 s), which is all a refused attempt waits.
    t0=$(now_ms)
    net_rule tcp dport "$R" reject with tcp reset
    t_on=$(now_ms)
    expect_unready "$METRICS_PORT" "$t_on" $((t_on + NET_NOTICE_REFUSED_MS)) $((t_on + 2 * NET_PING_MS)) "connections reset"
    net_heal
    t_heal=$(now_ms)
    p_reset=$(expect_progress s1 "$METRICS_PORT" "$t_heal" "$heal" "connections reset $((t_heal - t0)) ms" | tail -n 1)
    checkpoint "after the resets"
    # 4. Slow: 100 ms each way at the relay, +200 ms a round trip. Nothing
    # in the service adds up over time: each batch, ping and commit is
    # judged by its own deadline. So three ping periods prove the point: the
    # batches of the busy pipelines and the pings of the idle one all went
    # through the slow link without a retry, and /readyz stayed ready.
    local b0 r0 slow_batches bad=""
    b0=$(batches s1)
    r0=$(log_count s1 'transient database error')
    echo 100 >"$RELAY_DELAY"
    t0=$(now_ms)
    while [ $(($(now_ms) - t0)) -lt $((3 * NET_PING_MS)) ]; do
        local r
        r=$(readyz "$METRICS_PORT")
        [ "${r%%;*}" = 200 ] || bad=$r
        sleep 0.2
    done
    echo 0 >"$RELAY_DELAY"
    slow_batches=$(($(batches s1) - b0))
    [ -z "$bad" ] || fail_check "slow (+200 ms a round trip): /readyz said not ready: $bad"
    expect_eq "retries while slow (+200 ms a round trip)" "$r0" "$(log_count s1 'transient database error')"
    [ "$slow_batches" -gt 0 ] || fail_check "slow (+200 ms a round trip): no batch stored in $((3 * NET_PING_MS)) ms"
    # 5. The names stop resolving, and the connections reset for a ping
    # period and half a second so that the service must connect again:
    # every pipeline sends something within a ping period (its ping when
    # idle; the producer's chunks come every 2 s), and a connection that
    # sent nothing during the reset still reaches PostgreSQL. (A second of
    # resets could fall between two chunks stored in milliseconds each: the
    # service then never met the name.) The names resolve again
    # after twice the ping period, within the retry schedule's back-off.
    # /readyz is not judged here, for the same reason.
    t0=$(now_ms)
    net_names
    net_rule tcp dport "$R" reject with tcp reset
    sleep_until $((t0 + NET_PING_MS + 500))
    net_heal
    sleep_until $((t0 + 2 * NET_PING_MS))
    net_names_all
    t_heal=$(now_ms)
    p_name=$(expect_progress s1 "$METRICS_PORT" "$t_heal" "$heal" "host name gone $((t_heal - t0)) ms" | tail -n 1)
    expect_log s1 "could not translate host name [^ ]*$NET_DB_HOST" "the service met the name that did not resolve"
    checkpoint "after the names came back"
    producer_wait
    assert_scenario_kept_everything
    settle s1
    expect_alive s1
    local n
    n=$(log_count s1 'transient database error, retrying the same batch')
    finish_running s1
    note "progress after the heal (limit $(ms "$heal")): blackholed $(ms "$p_black"), answers dropped mid-COMMIT $(ms "$p_answers") ($unseen reviews position(s) committed unseen, the retry a no-op), resets $(ms "$p_reset"), name gone $(ms "$p_name"); slow +200 ms/RTT: $slow_batches batches, no retry; $n transient retries, process stayed up"
}

# The brokers' ports in the namespace: "ID PORT" a line, from the metadata.
broker_ports() {
    kcat -L -b "$BOOTSTRAP" 2>/dev/null | sed -nE 's/^ *broker ([0-9]+) at [^:]+:([0-9]+).*/\1 \2/p' | sort -u
}

# Kafka unreachable: one broker blackholed; the group coordinator alone
# blackholed past the session timeout while a batch is held in PostgreSQL
# (the member loses its partitions mid-batch, and the batch's offset commit
# cannot reach anyone); every broker blackholed, the bootstrap name gone
# with them. The service must stay up, and store again after each heal
# within the bound of what the fault cost: a partition's fetch within
# STORAGE_FETCH_STALL_SECONDS, a lost membership within a rejoin.
scenario_net_brokers() {
    net_scenario_begin net_brokers 42
    net_start s1
    # svc_env's STORAGE_FETCH_STALL_SECONDS.
    local ports b p fetch_stall_ms=15000 t0 t_heal p_one p_coord p_all
    ports=$(broker_ports)
    [ "$(echo "$ports" | wc -l)" = 3 ] || fail_check "cannot read the brokers' ports: [$ports]"
    port_of() { echo "$ports" | awk -v b="$1" '$1 == b {print $2}'; }
    # 1. Broker 1 blackholed for a third of the fetch stall limit (a
    # partition unfetched for longer fails its pipeline, by design); its
    # partitions must be stored again within that limit of the heal.
    t0=$(now_ms)
    net_blackhole "$(port_of 1)"
    sleep_until $((t0 + fetch_stall_ms / 3))
    net_heal
    t_heal=$(now_ms)
    p_one=$(expect_progress s1 "$METRICS_PORT" "$t_heal" "$fetch_stall_ms" "broker 1 blackholed $((t_heal - t0)) ms" | tail -n 1)
    checkpoint "after broker 1"
    # 2. The coordinator alone: every partition led by brokers 1 and 2, the
    # groups' coordinator moved to 3, found by the member within a heartbeat.
    local t
    for t in $(scenario_topics); do
        for p in 0 1 2; do broker_ctl leader "$t" "$p" $((1 + p % 2)) >/dev/null || fail_check "cannot move $t [$p]"; done
    done
    for p in $PIPES; do broker_ctl coordinator group "$GROUP_PREFIX.$p" 3 >/dev/null || fail_check "cannot move the coordinator of $p"; done
    sleep $(((HEARTBEAT_INTERVAL_MS + 1000) / 1000))
    hold_lock reviews
    wait_blocked sc-s1 || fail_check "no batch caught mid-write"
    local revoked
    revoked=$(log_count s1 'partitions revoked')
    t0=$(now_ms)
    net_blackhole "$(port_of 3)"
    # Heartbeats lost past the session timeout (and the mock's once-a-second
    # session check): the member is out of the group with its batch still
    # in PostgreSQL, which then commits, and whose offset commit has nowhere
    # to go.
    sleep_until $((t0 + SESSION_TIMEOUT_MS + 1200))
    release_lock
    sleep 1
    net_heal
    t_heal=$(now_ms)
    p_coord=$(expect_progress s1 "$METRICS_PORT" "$t_heal" $((GROUP_WAIT_S * 1000)) "coordinator blackholed $((t_heal - t0)) ms" | tail -n 1)
    [ "$(log_count s1 'partitions revoked')" -gt "$revoked" ] ||
        fail_check "no partition was revoked while the coordinator was blackholed: scenario not set up"
    checkpoint "after the coordinator"
    # 3. Every broker, and the bootstrap name, for a session timeout and 2 s
    # (the groups lose their members, each in-flight commit gives up at its
    # deadline: fewer than STORAGE_COMMIT_FAILURE_LIMIT); the name comes
    # back only after the brokers: their advertised addresses are enough.
    t0=$(now_ms)
    net_names "$NET_DB_HOST"
    for b in 1 2 3; do net_blackhole "$(port_of "$b")"; done
    sleep_until $((t0 + SESSION_TIMEOUT_MS + 2000))
    net_heal
    t_heal=$(now_ms)
    p_all=$(expect_progress s1 "$METRICS_PORT" "$t_heal" $((GROUP_WAIT_S * 1000)) "every broker blackholed $((t_heal - t0)) ms" | tail -n 1)
    net_names_all
    checkpoint "after every broker"
    producer_wait
    assert_scenario_kept_everything
    settle s1
    expect_alive s1
    finish_running s1
    note "progress after the heal: broker 1 blackholed $(ms "$p_one") (limit $((fetch_stall_ms / 1000)) s), coordinator blackholed past the session timeout with a batch in PostgreSQL $(ms "$p_coord") (limit ${GROUP_WAIT_S} s), every broker and the name $(ms "$p_all"); process stayed up"
}
