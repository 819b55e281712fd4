# Shared by the reliability scenarios (run.sh sources it): the scenario's
# database and topics, the published stream and its model, the service's
# settings, checkpoints and the checker. The service's processes, the
# PostgreSQL and broker helpers and the lock that catches a batch mid-write
# are tests/support/service.sh's, shared with the integration suites.
#
# Set by run.sh: TOP, HERE, BIN, PG, PG_DIR, BROKER, BROKER_DIR, RWORK,
# ROOT_DB, BOOTSTRAP (the PostgreSQL and the broker of the scenario's own,
# in its own network namespace, RELIABILITY_NETNS); for the scenario (run in
# a subshell) SC (its name), SW (its work directory) and SVC_DIR (the same).
# Set by scenario_begin: DB (its database), PIPES (the pipelines it
# consumes), T_REVIEWS, T_APP_STATS, T_NETWORK_METRICS, GROUP_PREFIX.
#
# Checks never stop a scenario: a failed expectation is written to
# $SW/failures and the scenario goes on to the checker, so that the table
# always says what was lost, duplicated or wrongly updated.
#
# No limit here is a number of seconds found on an idle machine: a busy one
# (CI runners are shared) slows the harness and the service alike. Each is
# derived from a clock a load cannot stretch (the settings svc_env gives the
# service, the mock cluster's group protocol timers) or waits for progress.

. "$TOP/tests/support/service.sh"
# The service sees only PATH and its settings; its PostgreSQL sessions are
# named sc-NAME (svc_env), the lock holder's rel-locker, so that
# scenario_cleanup ends every session of the scenario.
SVC_CLEAN_ENV=1
SVC_SESSIONS=sc-%
LOCKER_APP=rel-locker

# ---------------------------------------------------------------------------
# The clocks the limits are derived from.

# Settings of every process (svc_env); a scenario may override them.
SESSION_TIMEOUT_MS=6000 # small: rebalances in seconds on the mock cluster
SHUTDOWN_TIMEOUT_S=10
# librdkafka's default heartbeat.interval.ms (the suite does not set it).
HEARTBEAT_INTERVAL_MS=3000
# The mock's group protocol: a new group's first election comes 3 s after
# the first JoinGroup; any later join or leave starts a round whose election
# comes a session timeout minus 1 s later, and whose sync then waits up to
# a session timeout for every member.
FIRST_JOIN_MS=3000
round_ms() { echo $((${1:-$SESSION_TIMEOUT_MS} - 1000)); } # [session_ms]
ROUND_MS=$(round_ms)
# A member joins, or the group takes over a leaver's partitions, within
# this many rounds: the mock needs one or two, a commit that meets the next
# generation makes librdkafka drop its assignment and rejoin (one more), and
# on a loaded machine a member whose rejoin reaches the mock after a round's
# election waits for the next (a takeover of 5 rounds, 25.2 s, seen once in
# a CI run whose every other check passed).
GROUP_ROUNDS=5
# The harness's wait for the group to assign partitions: the first
# election, the eviction of a member that died without leaving (a session
# timeout), then GROUP_ROUNDS rounds each with the longest sync the mock
# allows.
group_wait_s() { # [session_ms]
    local s=${1:-$SESSION_TIMEOUT_MS}
    echo $(((FIRST_JOIN_MS + s + GROUP_ROUNDS * ($(round_ms "$s") + s) + 999) / 1000))
}
GROUP_WAIT_S=$(group_wait_s)

# A process killed -9 stays a member of its groups until the mock's session
# check (once a second) finds it a session timeout past its last heartbeat;
# its successor in those groups starts only then: joining beside the dead
# member meets a defect of the mock's coordinator that crashes librdkafka
# (README.md). The death's time is when NAME.rc was written.
await_eviction() { # name [session_ms]
    local died left
    died=$(stat -c %.3Y "$SW/$1.rc" 2>/dev/null) || return 0
    left=$(awk -v s="${2:-$SESSION_TIMEOUT_MS}" -v t0="$died" -v now="$EPOCHREALTIME" \
        'BEGIN {l = t0 + (s + 1200) / 1000 - now; printf "%.2f", (l > 0 ? l : 0)}')
    trace "waiting ${left} s for $1's members to be evicted"
    sleep "$left"
}
# A wait for progress (records stored, chunks produced, a batch logged)
# gives up only after this long with nothing moving: a healthy service
# pauses no longer than a group settling (group_wait_s), which is longer
# than its longest DB retry schedule here (1+2+4+8+16 s).
STALL_S=$GROUP_WAIT_S
# A stopped process exits within its shutdown timeout, or its supervisor
# exits 1 at that timeout: three of them and it is hung.
STOP_WAIT_S=$((3 * SHUTDOWN_TIMEOUT_S))

# The scenario moved forward (records stored, a chunk produced, a process's
# log grew): run.sh's watchdog stops only a scenario that made none for long.
progress() { : >"$SW/progress"; }

# ---------------------------------------------------------------------------
# Reporting.

# "1234 ms" for a number, the word itself ("timeout", "exited") otherwise.
ms() { case $1 in '' | *[!0-9]*) echo "${1:-?}" ;; *) echo "$1 ms" ;; esac; }

note() { # text: a line of the scenario's notes (printed in the report)
    echo "$*" >>"$SW/notes"
    echo "# [$SC] $*"
    echo "#   $SC: $*" >&3
}

trace() { echo "# [$SC] $(date +%T.%3N) $*"; }

fail_check() { # text
    echo "$*" >>"$SW/failures"
    echo "# [$SC] FAILED CHECK: $*"
    echo "#   $SC: FAILED: $*" >&3
}

expect_eq() { # description expected actual
    if [ "$2" = "$3" ]; then
        trace "ok: $1 = $3"
    else
        fail_check "$1: expected [$2], got [$3]"
    fi
}

expect_log() { # service regex description
    if grep -qE -- "$2" "$SW/$1.log" 2>/dev/null; then
        trace "ok: $3"
    else
        fail_check "$3: /$2/ not in $1's log"
    fi
}

expect_no_log() { # service regex description
    if grep -qE -- "$2" "$SW/$1.log" 2>/dev/null; then
        fail_check "$3: $(grep -m1 -E -- "$2" "$SW/$1.log" | cut -c1-300)"
    else
        trace "ok: $3"
    fi
}

# ---------------------------------------------------------------------------
# PostgreSQL and the broker.

sql_root() { psql "$ROOT_DB" -X -q -v ON_ERROR_STOP=1 -At -c "$1"; }

topic_of() { # pipeline
    case $1 in
    reviews) echo "$T_REVIEWS" ;;
    app-stats) echo "$T_APP_STATS" ;;
    network-metrics) echo "$T_NETWORK_METRICS" ;;
    esac
}

scenario_topics() {
    local p
    for p in $PIPES; do topic_of "$p"; done
}

watermarks() { # topic partition -> "LO HI"
    local r
    r=$(broker_ctl watermarks "$1" "$2") || { echo "? ?"; return 1; }
    echo "${r#ok }"
}

committed() { # pipeline partition -> offset (-1001: nothing committed)
    local r
    r=$(broker_ctl committed "$GROUP_PREFIX.$1" "$(topic_of "$1")" "$2") || { echo "?"; return 1; }
    echo "${r#ok }"
}

# The database's positions of the scenario's pipelines, "TOPIC PARTITION
# NEXT_OFFSET" a line.
db_positions() {
    sql "SELECT topic || ' ' || partition || ' ' || next_offset FROM consumer_offsets ORDER BY 1"
}

# A backup of the whole server (pg_basebackup -X stream) into $SW/backup;
# BACKUP_MS: how long it took.
pg_backup() {
    local t0
    t0=$(now_ms)
    "$PG" backup "$PG_DIR" "$SW/backup" >"$SW/backup.log" 2>&1 || fail_check "pg_basebackup failed: $(tail -n 2 "$SW/backup.log" | xargs)"
    BACKUP_MS=$(($(now_ms) - t0))
    trace "backup taken in $BACKUP_MS ms"
}

# Put the backup in $SW/backup in place of the server's data directory
# (the scenario's own server: nothing else is in it). The model (schema
# rel) goes back too: coordinates are loaded again by finish, checkpoints
# and the model of a stream generated after the backup are gone.
pg_restore_from_backup() {
    local t0
    t0=$(now_ms)
    "$PG" restore "$PG_DIR" "$SW/backup" >"$SW/restore.log" 2>&1 || fail_check "pg.sh restore failed: $(tail -n 2 "$SW/restore.log" | xargs)"
    pg_ensure_up || fail_check "PostgreSQL did not come back from the restore"
    RESTORE_MS=$(($(now_ms) - t0))
    trace "restored the backup in $RESTORE_MS ms: positions $(db_positions | xargs)"
}

# ---------------------------------------------------------------------------
# The scenario's world: a database with the App API's table, the consumer's
# schema and the model's; topics of 3 partitions; its own consumer groups.

APPS=8

scenario_begin() { # name pipelines...
    SC=$1
    shift
    PIPES="$*"
    PIPES_CSV=$(echo "$PIPES" | tr ' ' ',')
    CK=0
    local db
    db=rel_$(echo "$SC" | tr -c 'a-z0-9\n' '_')
    sql_root "DROP DATABASE IF EXISTS $db" >/dev/null
    sql_root "CREATE DATABASE $db" >/dev/null
    DB=$(echo "$ROOT_DB" | sed "s/dbname=postgres/dbname=$db/")
    sql "CREATE TABLE apps_registry_application (
           id BIGSERIAL PRIMARY KEY,
           package_name VARCHAR(255) NOT NULL UNIQUE,
           name VARCHAR(255),
           is_active BOOLEAN NOT NULL DEFAULT true,
           created_at TIMESTAMPTZ NOT NULL DEFAULT now())" >/dev/null
    sql "INSERT INTO apps_registry_application (package_name, name)
         SELECT 'com.rel.app' || i, 'app ' || i FROM generate_series(1, $APPS) i" >/dev/null
    env -i PATH="$PATH" STORAGE_DATABASE_URL="$DB" "$BIN" migrate >"$SW/migrate.log" 2>&1 ||
        fail_check "migrate failed: $(tail -n 2 "$SW/migrate.log")"
    psql "$DB" -X -q -v ON_ERROR_STOP=1 -f "$HERE/model.sql" >/dev/null
    T_REVIEWS=rel-$SC-reviews
    T_APP_STATS=rel-$SC-app-stats
    T_NETWORK_METRICS=rel-$SC-network-metrics
    GROUP_PREFIX=rel-$SC
    local p t
    for p in $PIPES; do
        t=$(topic_of "$p")
        broker_ctl topic-create "$t" 3 >/dev/null
        sql "INSERT INTO rel.topics VALUES ('$t', '$p')" >/dev/null
    done
    trace "database $db, topics $(scenario_topics | xargs), groups $GROUP_PREFIX.*"
}

# ---------------------------------------------------------------------------
# The stream: gen.awk writes it ($SW/gen/<topic>.kv) with its model.

gen_stream() { # seed reviews app_stats network_metrics [awk -v assignments...]
    local seed=$1 r=$2 a=$3 n=$4 dir=${GEN_DIR:-$SW/gen}
    shift 4
    mkdir -p "$dir"
    local args=() kv
    for kv in "$@"; do args+=(-v "$kv"); done
    LC_ALL=C awk -f "$HERE/gen.awk" -v out="$dir" -v seed="$seed" -v apps="$APPS" \
        -v reviews="$r" -v app_stats="$a" -v network_metrics="$n" \
        -v topic_reviews="$T_REVIEWS" -v topic_app_stats="$T_APP_STATS" \
        -v topic_network_metrics="$T_NETWORK_METRICS" "${args[@]}" || fail_check "gen.awk failed"
    psql "$DB" -X -q -v ON_ERROR_STOP=1 \
        -c "\\copy rel.gen FROM '$dir/model.tsv' WITH (FORMAT csv, DELIMITER E'\\t', QUOTE E'\\x01')"
    trace "generated $(wc -l <"$dir/model.tsv") records in $dir"
}

# kcat gives up on a message after half of STALL_S (not its default 300 s),
# so that a chunk and its re-production (produce_chunk) end within STALL_S.
kcat_produce() { # topic [kcat args...] <records
    local t=$1
    shift
    kcat -P -b "$BOOTSTRAP" -t "$t" -K'|' -X compression.codec=lz4 \
        -X message.timeout.ms=$((STALL_S * 500)) "$@"
}

# Produce the whole stream now.
produce_all() {
    local t
    for t in $(scenario_topics); do
        [ -s "$SW/gen/$t.kv" ] || continue
        kcat_produce "$t" <"$SW/gen/$t.kv" || fail_check "kcat could not produce to $t"
    done
}

# Produce the records of FILE to TOPIC. kcat gives up on a message now and
# then while a broker of the mock is down; then the records that did not
# reach the broker (by key) are produced again, once: none twice, none lost.
produce_chunk() { # topic file
    kcat_produce "$1" <"$2" 2>>"$SW/kcat.err" && return 0
    sleep 1
    kcat -C -b "$BOOTSTRAP" -t "$1" -o beginning -e -q -f '%k\n' 2>>"$SW/kcat.err" >"$2.present" || return 1
    awk -F'|' 'NR == FNR { have[$0] = 1; next } !($1 in have)' "$2.present" "$2" >"$2.missing"
    trace "kcat failed on $2: $(wc -l <"$2.missing") of its records produced again"
    kcat_produce "$1" <"$2.missing" 2>>"$SW/kcat.err"
}

# Produce the stream in the background, in CHUNKS slices spread over
# SECONDS, every topic's slices interleaved: ingest and faults overlap.
producer_start() { # seconds [chunks]
    local secs=$1 chunks=${2:-20} t
    mkdir -p "$SW/chunks"
    rm -f "$SW/producer.done"
    for t in $(scenario_topics); do
        [ -s "$SW/gen/$t.kv" ] || continue
        split -n "l/$chunks" -d -a 3 "$SW/gen/$t.kv" "$SW/chunks/$t."
    done
    local pause
    pause=$(awk -v s="$secs" -v c="$chunks" 'BEGIN {printf "%.3f", s / c}')
    rm -f "$SW/producer.hurry" "$SW/producer.progress"
    (
        for i in $(seq -f %03g 0 $((chunks - 1))); do
            for t in $(scenario_topics); do
                [ -s "$SW/chunks/$t.$i" ] || continue
                produce_chunk "$t" "$SW/chunks/$t.$i" || echo "$t chunk $i: $(tail -n 2 "$SW/kcat.err" | xargs)" >>"$SW/producer.failed"
                echo "$t.$i" >>"$SW/producer.progress"
            done
            [ -f "$SW/producer.hurry" ] || sleep "$pause"
        done
        touch "$SW/producer.done"
    ) &
    PRODUCER_PID=$!
    track "$PRODUCER_PID"
}

# Wait until the file DONE exists, as long as MEASURE (a command printing a
# number: chunks produced, bytes logged) keeps changing; give up once it has
# not changed for STALL_S. Each change marks progress for the watchdog.
wait_while_moving() { # done measure
    local now last=-1 t=$SECONDS
    while [ ! -f "$1" ]; do
        now=$(eval "$2" 2>/dev/null || echo 0)
        if [ "$now" != "$last" ]; then
            last=$now
            t=$SECONDS
            progress
        fi
        [ $((SECONDS - t)) -ge "$STALL_S" ] && break
        sleep 0.1
    done
}

# The faults are over: produce what is left of the stream at once. Waits
# as long as chunks keep reaching the broker; gives up when none did for
# STALL_S (kcat_produce's delivery timeout fits in it twice).
producer_wait() { # (a number given, seconds of an older call, is ignored)
    touch "$SW/producer.hurry"
    wait_while_moving "$SW/producer.done" "wc -l <'$SW/producer.progress'"
    [ -f "$SW/producer.done" ] || fail_check "the producer did not finish: no chunk produced for ${STALL_S} s"
    [ -f "$SW/producer.failed" ] && fail_check "kcat could not produce: $(xargs <"$SW/producer.failed")"
    wait "$PRODUCER_PID" 2>/dev/null || true
}

# Where every record is: consume the scenario's topics once (kcat prints
# topic, partition, offset and key) and load that into rel.coord. Called
# again after more records, it adds the new ones.
load_coords() {
    local t
    : >"$SW/coords.tsv"
    for t in $(scenario_topics); do
        kcat -C -b "$BOOTSTRAP" -t "$t" -o beginning -e -q -f '%t\t%p\t%o\t%k\n' >>"$SW/coords.tsv" ||
            fail_check "kcat could not consume $t"
    done
    psql "$DB" -X -q -v ON_ERROR_STOP=1 \
        -c "CREATE TEMP TABLE c (LIKE rel.coord)" \
        -c "\\copy c FROM '$SW/coords.tsv'" \
        -c "INSERT INTO rel.coord SELECT * FROM c ON CONFLICT DO NOTHING"
}

# A claim of "nothing lost" needs the broker to hold everything produced:
# low watermark 0 on every partition of the scenario's topics.
assert_scenario_kept_everything() {
    local t
    for t in $(scenario_topics); do assert_broker_kept_everything "$t"; done
}

# ---------------------------------------------------------------------------
# The service (svc_start and the rest: tests/support/service.sh). Its
# PostgreSQL sessions are named sc-NAME (application_name), so a fault can
# pick one process's session.

svc_env() { # name
    echo "STORAGE_DATABASE_URL=$DB application_name=sc-$1"
    echo "STORAGE_KAFKA_BOOTSTRAP_SERVERS=$BOOTSTRAP"
    echo "STORAGE_PIPELINES=$PIPES_CSV"
    echo "STORAGE_GROUP_PREFIX=$GROUP_PREFIX"
    echo "STORAGE_TOPIC_REVIEWS=$T_REVIEWS"
    echo "STORAGE_TOPIC_APP_STATS=$T_APP_STATS"
    echo "STORAGE_TOPIC_NETWORK_METRICS=$T_NETWORK_METRICS"
    # Small session timeouts: rebalances in seconds on the mock cluster.
    echo "STORAGE_SESSION_TIMEOUT_MS=$SESSION_TIMEOUT_MS"
    echo "STORAGE_POLL_TIMEOUT_MS=200"
    echo "STORAGE_DB_RETRY_BASE_MS=200"
    echo "STORAGE_SHUTDOWN_TIMEOUT_SECONDS=$SHUTDOWN_TIMEOUT_S"
    # A clean stop must fit the shutdown timeout (start-up refuses settings
    # where it could not): a 0.2 s poll, a 3.5 s database attempt, a 4 s
    # commit and 2 s to leave the group.
    echo "STORAGE_DB_STATEMENT_TIMEOUT_MS=2500"
    echo "STORAGE_COMMIT_TIMEOUT_MS=4000"
    echo "STORAGE_HEARTBEAT_DIR=$SW/heartbeat-$1"
    # A partition librdkafka stopped fetching fails its pipeline well
    # within STALL_S (DESIGN.md: Errors), so that a scenario sees the exit,
    # not a stall; every scenario thereby also shows that no fault here
    # passes for a stalled fetch.
    echo "STORAGE_FETCH_STALL_SECONDS=15"
    # A small prefetch bound: the consumer wakes librdkafka's fetcher with
    # a seek every 256 KiB taken (DESIGN.md: Settings and budgets), so
    # every fault here also meets those seeks.
    echo "STORAGE_RDKAFKA_QUEUED_MAX_MESSAGES_KBYTES=512"
}

svc_started() { # name [VAR=value...]
    local name=$1
    shift
    trace "started $name (pid $(svc_pid "$name")) $*"
}

# Wait for NAME to exit on its own (a fault point, a fatal error) as long as
# its log keeps growing: exit code, or "timeout" once it logged nothing for
# STALL_S.
svc_wait_progress() { # name
    wait_while_moving "$SW/$1.rc" "stat -c %s '$SW/$1.log'"
    if [ -f "$SW/$1.rc" ]; then cat "$SW/$1.rc"; else echo timeout; fi
}

batches() { log_count "$1" '\] batch size='; } # name: batches logged

# The partitions NAME's PIPELINE owns, from its last assignment log line.
owned() { # name pipeline
    { grep -E "\[$2\] partitions (assigned|revoked)" "$SW/$1.log" 2>/dev/null || true; } |
        tail -n 1 | sed -nE 's/.*owned=([0-9]+).*/\1/p' | awk '{n = $1} END {print n + 0}'
}

# Wait until the members' owned partitions of PIPELINE add up to 3, each
# member owning at least one; prints the milliseconds it took.
wait_owners() { # seconds pipeline names...: "exited" at once if one exited
    local secs=$1 pipe=$2 t0 n total ok
    shift 2
    t0=$(now_ms)
    while [ $(($(now_ms) - t0)) -lt $((secs * 1000)) ]; do
        total=0
        ok=1
        for n in "$@"; do
            svc_running "$n" || { echo exited; return 1; }
            total=$((total + $(owned "$n" "$pipe")))
            [ "$(owned "$n" "$pipe")" -gt 0 ] || ok=0
        done
        if [ "$ok" = 1 ] && [ "$total" = 3 ]; then
            echo $(($(now_ms) - t0))
            return 0
        fi
        sleep 0.1
    done
    echo timeout
    return 1
}

# Start NAME and the stream; return once the reviews pipeline has stored a
# batch, so the fault hits an ingest under way.
start_ingest() { # name [VAR=value...]
    local name=$1
    shift
    svc_start "$name" "$@"
    wait_log "$name" 'partitions assigned' 3 "$GROUP_WAIT_S" ||
        fail_check "$name: the pipelines were not assigned within $GROUP_WAIT_S s (a first election and $GROUP_ROUNDS rounds)"
    producer_start 8 16
    wait_log "$name" '\[reviews\] batch size=' 1 "$STALL_S" || fail_check "$name: no reviews batch within ${STALL_S} s"
}

expect_alive() { # name (an exit is reported once)
    if svc_running "$1"; then
        trace "ok: $1 still running"
    elif ! grep -qx "$1" "$SW/exits_reported" 2>/dev/null; then
        echo "$1" >>"$SW/exits_reported"
        fail_check "$1 exited ($(cat "$SW/$1.rc")): $(grep -E ' error ' "$SW/$1.log" | tail -n 1 | cut -c1-250)"
    fi
}

expect_below() { # description limit value
    if [ "$3" -lt "$2" ] 2>/dev/null; then
        trace "ok: $1: $3 < $2"
    else
        fail_check "$1: $3 ms, limit $2 ms"
    fi
}

# ---------------------------------------------------------------------------
# Checkpoints: the committed offset of every partition of the scenario's
# groups, then (in this order: an offset is committed only after its rows,
# so reading the offsets first can never make a correct service look
# wrong) a snapshot of what the database holds, its own positions
# (consumer_offsets) first. The checker verifies that every record below
# each committed offset, and below each position, had its effect in the
# snapshot.

checkpoint() { # label
    local label=$1 pipe p c rows=""
    CK=$((CK + 1))
    for pipe in $PIPES; do
        for p in 0 1 2; do
            c=$(committed "$pipe" "$p") || { fail_check "checkpoint $label: cannot read the committed offset of $pipe [$p]"; continue; }
            rows+="$CK"$'\t'"$label"$'\t'"$(topic_of "$pipe")"$'\t'"$p"$'\t'"$c"$'\n'
        done
    done
    printf '%s' "$rows" | psql "$DB" -X -q -v ON_ERROR_STOP=1 -c "\\copy rel.ckpt FROM STDIN"
    # The database's positions before its rows, for the same reason: a
    # position is raised in the transaction of the rows it covers.
    sql "INSERT INTO rel.snap_pos SELECT $CK, topic, partition, next_offset FROM consumer_offsets;
         INSERT INTO rel.snap_reviews SELECT $CK, review_id, last_synced_at FROM reviews;
         INSERT INTO rel.snap_app SELECT $CK, application_id, crawled_at FROM app_stats;
         INSERT INTO rel.snap_nm SELECT $CK, analysis_id FROM network_metrics;
         INSERT INTO rel.snap_dl SELECT $CK, topic, partition, kafka_offset FROM dead_letter_events" >/dev/null
    trace "checkpoint $CK ($label): $(printf '%s' "$rows" | awk -F'\t' '{printf "%s[%s]=%s ", substr($3, length($3) - 6), $4, $5}')"
}

# Wait until every partition's committed offset is its high watermark (the
# groups have consumed and stored everything), as long as the offsets keep
# moving; 1 once they stood still for STALL_S. A commit held by a rebalance
# is made at the member's next assignment (within a group's wait), or probed
# a session timeout after it was refused; an idle pipeline commits again
# what a failed commit left behind (DESIGN.md, Offsets held during a
# rebalance): offsets standing still longer are never committed. $LAG:
# records left.
wait_drained() { # (a number given, seconds of an older call, is ignored)
    local pipe p hi c last=-1 t=$SECONDS
    while :; do
        LAG=0
        for pipe in $PIPES; do
            for p in 0 1 2; do
                hi=$(watermarks "$(topic_of "$pipe")" "$p")
                hi=${hi#* }
                c=$(committed "$pipe" "$p")
                # Unreadable: not drained (counted as one record).
                if ! [[ $hi =~ ^[0-9]+$ && $c =~ ^-?[0-9]+$ ]]; then
                    LAG=$((LAG + 1))
                    continue
                fi
                [ "$c" -lt 0 ] && c=0
                LAG=$((LAG + hi - c))
            done
        done
        [ "$LAG" = 0 ] && return 0
        if [ "$LAG" != "$last" ]; then
            last=$LAG
            t=$SECONDS
            progress
        fi
        [ $((SECONDS - t)) -ge "$STALL_S" ] && return 1
        sleep 0.5
    done
}

# Wait until every record the broker holds (load_coords first) has its
# effect in the database, as long as records keep being stored: 1 once
# none was for STALL_S, or (with NAME) as soon as NAME has exited. 0 when
# stored; the count of missing records is in $MISSING.
wait_stored() { # [name] (a number first, seconds of an older call, is ignored)
    case ${1:-} in [0-9]*) shift ;; esac
    local last=-1 t=$SECONDS
    while :; do
        MISSING=$(psql "$DB" -X -q -At -v ON_ERROR_STOP=1 -f "$HERE/stored.sql" 2>/dev/null | tail -n 1)
        [ "$MISSING" = 0 ] && return 0
        [ -n "${1:-}" ] && ! svc_running "$1" && return 1
        if [ "$MISSING" != "$last" ]; then
            last=$MISSING
            t=$SECONDS
            progress
        fi
        [ $((SECONDS - t)) -ge "$STALL_S" ] && return 1
        sleep 1
    done
}

# The stream is fully produced: wait until NAME stored it (or exited).
settle() { # name (a number after it, seconds of an older call, is ignored)
    load_coords
    wait_stored "$1" || trace "$1: $MISSING records not stored yet"
}

# finish, with NAMES that must still be running; one that exited already
# (a failure its scenario reported) is replaced by a restarted process, as
# an orchestrator would, so that the data can still be checked.
finish_running() { # names...
    local n names=()
    for n in "$@"; do
        if svc_running "$n"; then
            names+=("$n")
        else
            trace "$n exited ($(cat "$SW/$n.rc")): restarting it as $n-restarted to check the data"
            svc_start "$n-restarted"
            names+=("$n-restarted")
        fi
    done
    finish "${names[@]}"
}

# The end of every scenario: everything consumed, stored and checked.
finish() { # service names still running, stopped with SIGTERM (exit 0 expected)
    local n rc
    load_coords
    local stored="everything stored, but"
    wait_stored || {
        fail_check "$MISSING published records still not stored: none was for ${STALL_S} s"
        stored="$MISSING records not stored, and"
    }
    # Everything is stored; the offsets must follow: a group whose committed
    # offsets end behind what was published reads those records again at
    # its next start (skipped by the database's position, but its lag never
    # returns to 0), so it fails the scenario.
    wait_drained ||
        fail_check "$stored the committed offsets stay $LAG records behind the high watermarks: none moved for ${STALL_S} s"
    checkpoint "end"
    for n in "$@"; do
        # A process stopped before its pipelines joined their groups tests
        # something else (sigterm_while_joining): let them join first.
        wait_log "$n" 'partitions assigned' "$(echo "$PIPES" | wc -w)" "$GROUP_WAIT_S" ||
            trace "$n: not every pipeline was assigned partitions within $GROUP_WAIT_S s"
        rc=$(svc_stop "$n")
        expect_eq "exit code of $n after SIGTERM" 0 "$rc"
    done
    load_coords
    local line
    line=$(psql "$DB" -X -q -At -v ON_ERROR_STOP=1 -f "$HERE/check.sql" 2>"$SW/check.err" | tail -n 1)
    [ -n "$line" ] || fail_check "the checker failed: $(head -c 300 "$SW/check.err")"
    echo "$line" >"$SW/check"
    trace "checker: $line"
    expect_positions_never_backwards
}

# The database's positions only ever rise (rel.position_moves, every change
# of consumer_offsets): a late batch of a member that lost its partitions
# must leave the new owner's position as it is. Prints the moves recorded.
expect_positions_never_backwards() {
    local back
    back=$(sql "SELECT count(*) || coalesce(': ' || string_agg(topic || ' [' || partition || '] ' || old_next || ' -> ' || new_next
                                                          || ' at ' || to_char(at, 'HH24:MI:SS.MS'), ', '), '')
                FROM (SELECT * FROM rel.position_moves WHERE new_next < old_next ORDER BY at LIMIT 5) x")
    if [ "${back%%:*}" = 0 ]; then
        trace "ok: no position moved backwards ($(sql "SELECT count(*) FROM rel.position_moves") changes)"
    else
        fail_check "the database's position moved backwards ($(sql "SELECT count(*) FROM rel.position_moves WHERE new_next < old_next") times; first: ${back#*: })"
    fi
}

# Batches a later process read again. Each batch whose database COMMIT is
# known (its batch line, or the line of the fault point that killed the
# process after that COMMIT) covers offset ranges; a batch line of a later
# process overlapping any of them of the same pipeline is a batch read
# again, which the database's positions exclude (DESIGN.md, Progress in the
# database). NAMES in the order they ran, one after the other; prints the
# count, and the first few are in $SW/redelivered.
redelivered_batches() { # names...
    local n files=()
    for n in "$@"; do files+=("$SW/$n.log"); done
    : >"$SW/redelivered"
    awk '
    FNR == 1 { L++; name = FILENAME; sub(/.*\//, "", name); sub(/\.log$/, "", name) }
    /\] batch size=|test fault point: killing the process after the database commit offsets=/ {
        if (!match($0, /\[[a-z-]+\]/)) next
        pipe = substr($0, RSTART + 1, RLENGTH - 2)
        if (!match($0, /offsets=[^ ]*/)) next
        m = split(substr($0, RSTART + 8, RLENGTH - 8), r, ",")
        hit = ""
        for (i = 1; i <= m; i++) {
            split(r[i], a, /[:-]/)
            k = pipe SUBSEP a[1]
            for (j = 1; j <= cnt[k]; j++)
                if (life[k, j] < L && a[2] + 0 <= hi[k, j] && a[3] + 0 >= lo[k, j]) {
                    hit = r[i] " (read by " name ", stored by " who[k, j] ")"
                    break
                }
        }
        if (hit != "") { bad++; if (bad <= 5) print pipe " " hit > out }
        for (i = 1; i <= m; i++) {
            split(r[i], a, /[:-]/)
            k = pipe SUBSEP a[1]
            j = ++cnt[k]
            life[k, j] = L; lo[k, j] = a[2] + 0; hi[k, j] = a[3] + 0; who[k, j] = name
        }
    }
    END { print bad + 0 }' out="$SW/redelivered" "${files[@]}"
}

# Exit trap of a scenario: no process it started survives it (svc_cleanup).
# Its PostgreSQL, broker and network namespace go after it (run.sh), with
# whatever fault they were left in.
scenario_cleanup() {
    svc_cleanup
    # A crash is a failure whatever the scenario expected of the process
    # (a kill -9 it meant to send, a timeout), with where it happened.
    local log stack rc
    for log in "$SW"/*.log; do
        if stack=$(crash_stack "$log" "$BIN"); then
            fail_check "$(basename "$log" .log) crashed: $stack"
        else
            # Died of a fault signal, and no report: the handler never ran.
            rc=$(cat "${log%.log}.rc" 2>/dev/null)
            case $rc in 132 | 134 | 135 | 136 | 139)
                fail_check "$(basename "$log" .log) died of signal $((rc - 128)) (exit $rc) without a crash report" ;;
            esac
        fi
    done
}
