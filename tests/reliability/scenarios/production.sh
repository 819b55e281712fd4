# Production-shaped: 10,000 registered apps, crawls of all of them, and a
# registry that changes while the messages flow. The other scenarios
# register 8 apps; the application cache (package_name -> id, per pipeline
# thread) never held more than those.
#
# The stream (production.awk): three crawls, each one app-stats message
# per app (distinct crawled_at per crawl) and PROD_REVIEWS_PER_CRAWL reviews
# (a third of them newer observations of earlier reviews), cut into
# PROD_STEPS_PER_CRAWL steps published one after the other, no faster than
# one every PROD_STEP_SECONDS; network-metrics, one every 300 ms, all along.
#
# The registry changes between steps, the way the App API's Django changes
# it (registry.sql): PROD_NEW apps registered (messages of each published
# before and after), PROD_SOFT soft-deleted (is_active=false: still stored),
# PROD_HARD hard-deleted (the app's rows and the app in one transaction; its
# messages then go to dead letters), half of them registered again (the
# same package_name, a new id).
#
# The service runs in three phases, one process each, with the application
# cache TTL at 0 (ask the registry every batch), 1 s and the default 300 s.
# In the middle phase the process is killed (kill -9) with a batch blocked
# mid-INSERT, and PostgreSQL restarts (fast) with another batch mid-INSERT.
#
# Judged by check.sql with the registry history: nothing lost, duplicated
# or wrongly updated; no message of an app registered when its batch was
# bound dead-lettered (for an app the registry never changed for: no
# unregistered_app or database_rejected dead letter at all); every other
# dead letter's reason true of the registry then; the rows a hard delete
# removed are not "lost". And the service's memory (VmRSS) and open file
# descriptors flat after warm-up, sampled every PROD_SAMPLE_SECONDS.
#
# RELIABILITY_SOAK_MINUTES=N makes the same scenario a soak test: as many
# crawls as fill about N minutes at the same pace, the same three phases
# (each a quarter of the run or more, so each process lives long enough
# for a slow leak to show).

PROD_APPS=10000
PROD_STEPS_PER_CRAWL=9
PROD_REVIEWS_PER_CRAWL=10000
PROD_NEW=40
PROD_SOFT=40
PROD_HARD=30
PROD_STEP_SECONDS=3
PROD_NM_SECONDS=0.3
PROD_SAMPLE_SECONDS=0.5
PROD_TTLS=(0 1 300)
# The suite's settings for every service (lib.sh svc_env) that bound how
# long the service may legitimately make no progress.
PROD_SESSION_S=6
PROD_RETRY_BASE_MS=200
PROD_RETRY_ATTEMPTS=5
PROD_COMMIT_TIMEOUT_S=10

prod_crawls() {
    local m=${RELIABILITY_SOAK_MINUTES:-}
    if [ -n "$m" ]; then
        awk -v m="$m" -v s="$PROD_STEPS_PER_CRAWL" -v p="$PROD_STEP_SECONDS" \
            'BEGIN { c = int(m * 60 / (s * p) + 0.5); print (c < 3 ? 3 : c) }'
    else
        echo 3
    fi
}

# The longest the service may make no progress with nothing wrong: a killed
# member is evicted after a session timeout, then the mock's rebalance
# round (about a session timeout) and the first join (3 s); a batch caught
# by a PostgreSQL restart waits out the retry schedule (200 ms doubling, 5
# attempts); an offset commit has its own deadline.
prod_stall_limit() {
    local backoff=0 i
    for i in $(seq 0 $((PROD_RETRY_ATTEMPTS - 1))); do backoff=$((backoff + PROD_RETRY_BASE_MS * (1 << i))); done
    echo $((2 * PROD_SESSION_S + 3 + (backoff + 999) / 1000 + PROD_COMMIT_TIMEOUT_S))
}

prod_sql_file() { psql "$DB" -X -q -v ON_ERROR_STOP=1 -f "$1" >/dev/null; }

# ---------------------------------------------------------------------------
# The service's phases and its resources.

# Sample NAME's VmRSS (KiB), open file descriptors and threads into
# $SW/NAME.res while it runs.
prod_sampler() { # name
    local name=$1 pid
    pid=$(svc_pid "$name")
    (
        local k v rss threads fds
        while svc_running "$name" && [ -r "/proc/$pid/status" ]; do
            rss=
            threads=
            while read -r k v _; do
                case $k in
                VmRSS:) rss=$v ;;
                Threads:) threads=$v ;;
                esac
            done <"/proc/$pid/status" 2>/dev/null
            fds=(/proc/"$pid"/fd/*)
            [ -n "$rss" ] && echo "$EPOCHREALTIME $rss ${#fds[@]} $threads" >>"$SW/$name.res"
            sleep "$PROD_SAMPLE_SECONDS"
        done
    ) 2>/dev/null &
    track $!
}

# Start the phase NAME with cache TTL seconds; wait for its three
# assignments: a first join, plus the rounds a departed member costs
# (evicted: a session timeout; then a round).
prod_phase_start() { # name ttl
    sql "INSERT INTO rel.phases VALUES ('$1', $2, clock_timestamp())" >/dev/null
    svc_start "$1" STORAGE_APPLICATION_CACHE_TTL_SECONDS="$2"
    prod_sampler "$1"
    PROD_CURRENT=$1
    local limit=$((3 + 4 * PROD_SESSION_S))
    wait_log "$1" 'partitions assigned' 3 "$limit" ||
        fail_check "$1: its three pipelines were not assigned within $limit s (a first join and four rounds of the mock's group protocol)"
}

prod_phase_ended() { # name
    sql "UPDATE rel.phases SET stopped = clock_timestamp() WHERE name = '$1'" >/dev/null
}

prod_checkpoint() { # label
    checkpoint "$1"
    sql "INSERT INTO rel.ckpt_at VALUES ($CK, clock_timestamp())" >/dev/null
}

# The next phase: the running process stops (SIGTERM: exit 0), the next
# starts with another TTL.
prod_phase_switch() { # name ttl
    local rc
    expect_alive "$PROD_CURRENT"
    rc=$(svc_stop "$PROD_CURRENT")
    expect_eq "exit code of $PROD_CURRENT after SIGTERM" 0 "$rc"
    prod_phase_ended "$PROD_CURRENT"
    prod_checkpoint "$PROD_CURRENT stopped"
    prod_phase_start "$1" "$2"
}

# kill -9 while the app-stats pipeline's INSERT is blocked behind a lock
# (taken before the step was published): its batch dies half written. The
# replacement has the same TTL.
prod_kill_mid_write() {
    local name=$PROD_CURRENT rc
    wait_blocked "sc-$name" 30 "$name" || fail_check "no app-stats batch of $name caught mid-write"
    rc=$(svc_kill "$name")
    expect_eq "$name: exit code after kill -9" 137 "$rc"
    release_lock
    prod_phase_ended "$name"
    prod_checkpoint "after kill -9 of $name"
    await_eviction "$name"
    prod_phase_start "$name-after-kill" "$(sql "SELECT ttl_seconds FROM rel.phases WHERE name = '$name'")"
    PROD_KILLED=$name
}

# PostgreSQL restarts (fast shutdown) while a reviews batch is blocked
# mid-INSERT (the lock taken before the step was published): the batch is
# retried, never dead-lettered.
prod_pg_restart_mid_write() {
    wait_blocked "sc-$PROD_CURRENT" 30 "$PROD_CURRENT" || fail_check "no reviews batch of $PROD_CURRENT caught mid-write"
    pg_ctl_ restart -m fast >/dev/null || fail_check "pg_ctl restart -m fast failed"
    release_lock
    pg_ensure_up
    prod_checkpoint "after the PostgreSQL restart"
    PROD_PG_RESTARTED_UNDER=$PROD_CURRENT
}

# ---------------------------------------------------------------------------
# The stream.

# Publish step S (its app-stats and reviews), noting when: none of its
# records can have been consumed before.
prod_produce_step() { # step
    local s t f
    s=$(printf %04d "$1")
    sql "INSERT INTO rel.prod_step_at VALUES ($1, clock_timestamp())" >/dev/null
    for t in "$T_APP_STATS" "$T_REVIEWS"; do
        f=$SW/gen/step$s.$t.kv
        [ -s "$f" ] || continue
        produce_chunk "$t" "$f" || echo "$t step $1: $(tail -n 2 "$SW/kcat.err" | xargs)" >>"$SW/producer.failed"
    done
}

# The network-metrics, one every PROD_NM_SECONDS until nm.hurry, then the
# rest at once; each line's time goes to nm.times.
prod_nm_start() {
    rm -f "$SW/nm.hurry"
    (
        while IFS= read -r line; do
            echo "${line%%|*} $EPOCHREALTIME" >>"$SW/nm.times"
            printf '%s\n' "$line"
            [ -f "$SW/nm.hurry" ] || sleep "$PROD_NM_SECONDS"
        done <"$SW/gen/nm.kv" | kcat_produce "$T_NETWORK_METRICS" 2>>"$SW/kcat.err" ||
            echo "network-metrics: $(tail -n 2 "$SW/kcat.err" | xargs)" >>"$SW/producer.failed"
        touch "$SW/nm.done"
    ) &
    PROD_NM_PID=$!
    track "$PROD_NM_PID"
}

prod_nm_finish() {
    touch "$SW/nm.hurry"
    wait "$PROD_NM_PID" 2>/dev/null || true
    [ -f "$SW/nm.done" ] || fail_check "the network-metrics producer did not finish"
}

# The registry's changes due after step S, each in its own transaction,
# its history stamped once its COMMIT returned.
prod_registry_changes() { # step
    local step action pkg args=() out
    while IFS=$'\t' read -r step action pkg; do
        [ "$step" = "$1" ] || continue
        args+=(-c "SELECT '$action', rel.app_$action('$pkg')"
            -c "UPDATE rel.registry_history SET committed = clock_timestamp() WHERE committed IS NULL")
    done <"$SW/gen/events.tsv"
    [ ${#args[@]} -gt 0 ] || return 0
    out=$(psql "$DB" -X -q -At -v ON_ERROR_STOP=1 "${args[@]}" 2>&1) ||
        fail_check "registry change after step $1 failed: $(echo "$out" | tail -n 1)"
    # Hard deletes that had to be tried again: the service wrote a row of
    # the app in the middle (what Django's caller would see as an
    # IntegrityError or a deadlock).
    echo "$out" | awk -F'|' '$1 == "hard_delete" && $2 > 1 {n += $2 - 1} END {print n + 0}' >>"$SW/hard_delete.retries"
}

# What a step left on the broker: "pipeline partition high_watermark"
# lines for app-stats and reviews.
prod_targets() {
    local pipe p hi
    for pipe in app-stats reviews; do
        for p in 0 1 2; do
            hi=$(watermarks "$(topic_of "$pipe")" "$p")
            echo "$pipe $p ${hi#* }"
        done
    done
}

# Wait until the groups committed everything up to TARGETS (see
# prod_targets). No deadline while the offsets move; a fail_check once
# they have not moved for the stall limit.
prod_wait_committed() { # targets
    local targets=$1 last=-1 since pipe p hi c sum left stall
    stall=$(prod_stall_limit)
    since=$(date +%s)
    while :; do
        left=0
        sum=0
        while read -r pipe p hi; do
            c=$(committed "$pipe" "$p")
            [ "$c" -ge 0 ] 2>/dev/null || c=0
            sum=$((sum + c))
            [ "$c" -ge "$hi" ] || left=1
        done <<<"$targets"
        [ "$left" = 0 ] && return 0
        if [ "$sum" != "$last" ]; then
            last=$sum
            since=$(date +%s)
        elif [ $(($(date +%s) - since)) -ge "$stall" ]; then
            fail_check "the committed offsets did not move for ${stall} s (the longest a kill, a rebalance and a PostgreSQL restart can explain)"
            return 1
        fi
        sleep 0.2
    done
}

# ---------------------------------------------------------------------------
# Judging the resources.

# When NAME's three pipelines had each stored a batch (epoch seconds; empty
# if one never did).
prod_ready_at() { # name
    local p iso t ready=0
    for p in app-stats reviews network-metrics; do
        iso=$(grep -m1 -E "\[$p\] batch size=" "$SW/$1.log" | cut -d' ' -f1)
        [ -n "$iso" ] || return 0
        t=$(date -u -d "$iso" +%s.%N)
        ready=$(awk -v a="$ready" -v b="$t" 'BEGIN { print (b > a ? b : a) }')
    done
    echo "$ready"
}

# VmRSS and descriptors of NAME flat after its warm-up. The warm-up is the
# join and the first batches of every pipeline, then the first half of
# what is left of its life (connections, librdkafka's buffers, the
# application cache filling with the crawl's names); its highest value is
# the reference, and no sample of the second half may exceed it by more
# than the tolerance (PROD_RSS_TOLERANCE_KIB, PROD_FD_TOLERANCE). A process
# that stored batches for less than PROD_JUDGE_MIN_SECONDS (the one killed
# on purpose) is reported, not judged. Prints one line: "name: rss ...,
# fds ..., N samples over S s", with " FAILED: why".
prod_judge_resources() { # name
    local f=$SW/$1.res
    [ -s "$f" ] || { echo "$1: no resource samples"; return; }
    awk -v name="$1" -v ready="$(prod_ready_at "$1")" -v min_s="$PROD_JUDGE_MIN_SECONDS" \
        -v tol_kib="$PROD_RSS_TOLERANCE_KIB" -v fd_tol="$PROD_FD_TOLERANCE" '
    { t[NR] = $1; rss[NR] = $2; fd[NR] = $3 }
    END {
        n = NR
        for (i = 1; i <= n && (ready == "" || t[i] < ready); i++) ;
        first = i
        if (ready == "" || n - first < 8 || t[n] - t[first] < min_s) {
            printf "%s: not judged, it stored batches for %.0f s (%d samples)\n", name,
                (ready == "" || first > n ? 0 : t[n] - t[first]), n - first + 1
            exit
        }
        half = first + int((n - first + 1) / 2)
        for (i = first; i < half; i++) { if (rss[i] > r0) r0 = rss[i]; if (fd[i] > f0) f0 = fd[i] }
        for (i = half; i <= n; i++) { if (rss[i] > r1) r1 = rss[i]; if (fd[i] > f1) f1 = fd[i] }
        bad = ""
        if (r1 > r0 + tol_kib)
            bad = bad sprintf(" RSS rose after warm-up from %.1f to %.1f MiB (tolerance %.1f MiB);", r0 / 1024, r1 / 1024, tol_kib / 1024)
        if (f1 > f0 + fd_tol) bad = bad sprintf(" open descriptors rose after warm-up from %d to %d (tolerance %d);", f0, f1, fd_tol)
        printf "%s: rss at most %.1f MiB during warm-up, %.1f after; fds at most %d, then %d; %d samples over %.0f s%s\n",
            name, r0 / 1024, r1 / 1024, f0, f1, n, t[n] - t[1], (bad == "" ? "" : " FAILED:" bad)
    }' "$f"
}

# ---------------------------------------------------------------------------

scenario_production() {
    local t0
    t0=$(date +%s)
    APPS=$PROD_APPS # read by scenario_begin (lib.sh)
    scenario_begin production reviews app-stats network-metrics
    # Tolerances. RSS: a process of the default run sees one crawl, so its
    # application caches are still filling after warm-up: up to 10,040
    # names on each pipeline thread, in tables that grow by doubling (about
    # 1.5 MiB for the last doubling of the app-stats thread's, 0.7 MiB for
    # the reviews thread's); measured, the second half rose at most 2.2 MiB
    # above the warm-up's peak, which those doublings explain. 8 MiB is that
    # bound with the noise of a busy machine: a leak of about 800 bytes per
    # message exceeds it in the second half of a default phase (some 11,000
    # messages), and of about 30 bytes in a 30-minute soak (some 250,000
    # messages, the caches long full). Descriptors did not move
    # at all (3 sessions, 3 consumers with their broker connections); 2
    # allows a consumer to open a connection to a broker it had not needed,
    # and still catches a leak per PostgreSQL reconnection (3 sessions
    # reconnect at once).
    PROD_RSS_TOLERANCE_KIB=8192
    PROD_FD_TOLERANCE=2
    # Judged only after 15 s of batches: the process killed on purpose
    # works a few seconds; the others, 20 s and more.
    PROD_JUDGE_MIN_SECONDS=15
    local crawls steps
    crawls=$(prod_crawls)
    steps=$((crawls * PROD_STEPS_PER_CRAWL))
    # Network-metrics for twice the steps at their pace (a busy machine
    # makes the steps slower); what is left at the end is produced at once.
    local nm
    nm=$(awk -v s="$steps" -v p="$PROD_STEP_SECONDS" -v n="$PROD_NM_SECONDS" 'BEGIN { printf "%d", 2 * s * p / n }')

    prod_sql_file "$HERE/registry.sql"
    sql "CREATE TABLE rel.prod_keys (key text PRIMARY KEY, step int NOT NULL);
         CREATE TABLE rel.prod_step_at (step int PRIMARY KEY, at timestamptz NOT NULL);
         CREATE TABLE rel.prod_nm_at (key text PRIMARY KEY, epoch numeric NOT NULL);
         INSERT INTO rel.registry_history (package_name, app_id, change, began, committed)
         SELECT package_name, id, 'registered', now(), now() FROM apps_registry_application" >/dev/null

    mkdir -p "$SW/gen"
    LC_ALL=C awk -f "$HERE/gen.awk" -f "$HERE/production.awk" -v out="$SW/gen" -v seed=71 \
        -v reviews=0 -v app_stats=0 -v network_metrics=0 \
        -v topic_reviews="$T_REVIEWS" -v topic_app_stats="$T_APP_STATS" -v topic_network_metrics="$T_NETWORK_METRICS" \
        -v apps="$PROD_APPS" -v crawls="$crawls" -v steps="$PROD_STEPS_PER_CRAWL" \
        -v reviews_per_crawl="$PROD_REVIEWS_PER_CRAWL" -v new_apps="$PROD_NEW" -v soft="$PROD_SOFT" \
        -v hard="$PROD_HARD" -v nm="$nm" || fail_check "production.awk failed"
    psql "$DB" -X -q -v ON_ERROR_STOP=1 \
        -c "\\copy rel.gen FROM '$SW/gen/model.tsv' WITH (FORMAT csv, DELIMITER E'\\t', QUOTE E'\\x01')" \
        -c "\\copy rel.prod_keys FROM '$SW/gen/keys.tsv'" \
        -c "\\copy rel.churn FROM '$SW/gen/churn.tsv'" || fail_check "loading the model failed"
    trace "generated $(wc -l <"$SW/gen/model.tsv") records: $crawls crawls of $PROD_APPS apps in $steps steps, $nm network-metrics"

    : >"$SW/hard_delete.retries"
    prod_nm_start
    prod_phase_start "ttl${PROD_TTLS[0]}" "${PROD_TTLS[0]}"
    local s t_step prev="" cur left
    # The phases start at steps 0, P2 and P3: 30 %, 45 % and 25 % of the
    # steps (the last one also drains and stops); the middle one holds the
    # faults, so it is the longest.
    local p2=$((steps * 3 / 10)) p3=$((steps * 3 / 4))
    # The kill a sixth into the middle phase; the restart five sixths into
    # it, late in the life of the process that replaced the killed one
    # (after its warm-up, so that a leak per reconnection shows in its
    # resources).
    local kill_step=$((p2 + (p3 - p2) / 6)) pg_step=$((p2 + 5 * (p3 - p2) / 6))
    for ((s = 0; s < steps; s++)); do
        t_step=$EPOCHREALTIME
        if [ "$s" = "$p2" ]; then prod_phase_switch "ttl${PROD_TTLS[1]}" "${PROD_TTLS[1]}"; fi
        if [ "$s" = "$p3" ]; then prod_phase_switch "ttl${PROD_TTLS[2]}" "${PROD_TTLS[2]}"; fi
        if [ "$s" = "$kill_step" ]; then hold_lock app_stats; fi
        if [ "$s" = "$pg_step" ]; then hold_lock reviews; fi
        prod_produce_step "$s"
        cur=$(prod_targets)
        if [ "$s" = "$kill_step" ]; then prod_kill_mid_write; fi
        if [ "$s" = "$pg_step" ]; then prod_pg_restart_mid_write; fi
        prod_registry_changes "$s"
        # Produce while consuming: the step before this one stored first
        # (the backlog stays one step; the broker's partitions stay small).
        if [ -n "$prev" ]; then prod_wait_committed "$prev" || break; fi
        prev=$cur
        # In a soak, the coordinates of each crawl are taken while the
        # broker holds them: past 5 MiB a partition drops its oldest.
        if [ -n "${RELIABILITY_SOAK_MINUTES:-}" ] && [ $(((s + 1) % PROD_STEPS_PER_CRAWL)) = 0 ]; then load_coords >/dev/null; fi
        left=$(awk -v t0="$t_step" -v now="$EPOCHREALTIME" -v p="$PROD_STEP_SECONDS" 'BEGIN { d = t0 + p - now; printf "%.2f", (d > 0 ? d : 0) }')
        sleep "$left"
    done
    [ -n "$prev" ] && prod_wait_committed "$prev"
    prod_nm_finish
    [ -f "$SW/producer.failed" ] && fail_check "kcat could not produce: $(xargs <"$SW/producer.failed")"
    expect_alive "$PROD_CURRENT"

    # Everything stored before the checker's inputs are written: the bind
    # window is measured over every batch.
    load_coords >/dev/null
    wait_stored "$(prod_stall_limit)" "$PROD_CURRENT" || fail_check "$MISSING published records not stored $(prod_stall_limit) s after the last step"
    prod_inputs
    if [ -n "${RELIABILITY_SOAK_MINUTES:-}" ]; then
        prod_broker_soak_note
    else
        assert_scenario_kept_everything
    fi
    # The end checkpoint (finish's) comes after every hard delete.
    sql "INSERT INTO rel.ckpt_at VALUES ($((CK + 1)), clock_timestamp())" >/dev/null
    finish "$PROD_CURRENT"
    prod_phase_ended "$PROD_CURRENT"
    prod_report "$t0"
}

# The checker's inputs the run only knows at its end: when each record was
# produced, and the bind window.
prod_inputs() {
    awk '{printf "%s\t%s\n", $1, $2}' "$SW/nm.times" >"$SW/nm.times.tsv"
    psql "$DB" -X -q -v ON_ERROR_STOP=1 -c "\\copy rel.prod_nm_at FROM '$SW/nm.times.tsv'" \
        -c "INSERT INTO rel.produced
            SELECT k.key, a.at FROM rel.prod_keys k JOIN rel.prod_step_at a USING (step)
            UNION ALL SELECT key, to_timestamp(epoch) FROM rel.prod_nm_at" >/dev/null ||
        fail_check "loading the produce times failed"
    # The bind window: a batch is resolved, then its transaction begins
    # (the dead letter's created_at), within the batch's own processing,
    # which its batch line's duration_ms bounds (from the poll to the
    # offset commit). A batch retried after a transient error is resolved
    # again before its new transaction: its back-offs do not count, nor do
    # they for the next batch, polled while the retried one was in flight
    # and resolved after it.
    local n w=0 d
    for n in $(cat "$SW/services"); do
        d=$(awk '
            /transient database error/ { match($0, /\[[a-z-]+\]/); retried[substr($0, RSTART, RLENGTH)] = 2 }
            /\] batch size=/ {
                match($0, /\[[a-z-]+\]/); p = substr($0, RSTART, RLENGTH)
                if (retried[p] > 0) { retried[p]--; next }
                if (match($0, /duration_ms=[0-9.]+/)) { d = substr($0, RSTART + 12, RLENGTH - 12) + 0; if (d > max) max = d }
            }
            END { printf "%d", max + 1 }' "$SW/$n.log")
        [ "$d" -gt "$w" ] && w=$d
    done
    PROD_BIND_WINDOW_MS=$w
    sql "INSERT INTO rel.params VALUES ('bind_window_ms', $w)" >/dev/null
    trace "bind window: $w ms (the longest batch not retried)"
}

prod_broker_soak_note() {
    local pipe p wm lows=""
    for pipe in $PIPES; do
        for p in 0 1 2; do
            wm=$(watermarks "$(topic_of "$pipe")" "$p")
            [ "${wm%% *}" = 0 ] || lows="$lows ${pipe}[$p]=${wm%% *}"
        done
    done
    # Retention past 5 MiB drops the oldest records. The coordinates of
    # every crawl were taken while the broker held it: a record dropped
    # before it was stored is counted lost, and one dropped before it was
    # located not_on_broker.
    if [ -n "$lows" ]; then
        note "soak: the broker's retention moved the low watermarks ($lows ) after locating every crawl"
    fi
}

prod_report() { # t0
    local n line
    for n in $(cat "$SW/services"); do
        line=$(prod_judge_resources "$n")
        trace "resources: $line"
        echo "$line" >>"$SW/resources"
        case $line in *FAILED:*) fail_check "resources of $line" ;; esac
    done
    trace "registry verdict: $(sql "SELECT string_agg(what || '=' || n, ' ' ORDER BY what) FROM rel.registry_verdict")"
    local mis
    mis=$(sql "SELECT n FROM rel.registry_verdict WHERE what = 'registered_dead_lettered'")
    if [ "${mis:-0}" != 0 ]; then
        fail_check "$mis message(s) of apps registered when their batch was bound were dead-lettered: $(sql "
            SELECT string_agg(x, '; ') FROM (
                SELECT coalesce(ph.name, '?') || ' (TTL ' || coalesce(ph.ttl_seconds::text, '?') || ' s): '
                       || count(*) || ' (' || string_agg(DISTINCT m.error_type, ', ') || '; '
                       || count(*) FILTER (WHERE NOT m.changed) || ' of apps the registry never changed for)' AS x
                FROM rel.registry_misfiled m
                LEFT JOIN rel.phases ph ON m.created_at BETWEEN ph.started AND coalesce(ph.stopped, 'infinity')
                GROUP BY ph.name, ph.ttl_seconds, ph.started ORDER BY ph.started) y")"
    fi
    local pubs rows dls changes justified retries
    pubs=$(sql "SELECT string_agg(pipeline || ' ' || n, ', ' ORDER BY pipeline) FROM (
                SELECT t.pipeline, count(*) AS n FROM rel.coord c JOIN rel.topics t USING (topic) GROUP BY 1) x")
    rows=$(sql "SELECT 'app_stats ' || (SELECT count(*) FROM app_stats) || ', reviews ' || (SELECT count(*) FROM reviews)
                || ', network_metrics ' || (SELECT count(*) FROM network_metrics)")
    dls=$(sql "SELECT string_agg(error_type || ' ' || n, ', ' ORDER BY n DESC) FROM (
               SELECT error_type, count(*) AS n FROM dead_letter_events GROUP BY 1) x")
    # The changes made during the run (the initial registrations share
    # their transaction's now()).
    changes=$(sql "SELECT count(*) FILTER (WHERE change = 'registered') || ' registered ('
                          || count(*) FILTER (WHERE change = 'registered' AND EXISTS (
                                 SELECT 1 FROM rel.registry_history e WHERE e.package_name = h.package_name AND e.seq < h.seq))
                          || ' of them again), ' || count(*) FILTER (WHERE change = 'soft_deleted') || ' soft-deleted, '
                          || count(*) FILTER (WHERE change = 'hard_deleted') || ' hard-deleted'
                   FROM rel.registry_history h WHERE began > (SELECT min(began) FROM rel.registry_history)")
    justified=$(sql "SELECT 'unregistered_app ' || sum(n) FILTER (WHERE what = 'justified_unregistered_app')
                            || ', database_rejected ' || sum(n) FILTER (WHERE what = 'justified_database_rejected')
                            || '; of apps registered when bound: ' || sum(n) FILTER (WHERE what = 'registered_dead_lettered')
                            || '; rows deleted with their app: ' || sum(n) FILTER (WHERE what = 'deleted_rows')
                     FROM rel.registry_verdict")
    retries=$(awk '{n += $1} END {print n + 0}' "$SW/hard_delete.retries")
    note "$(prod_crawls) crawls of $PROD_APPS apps in $(($(prod_crawls) * PROD_STEPS_PER_CRAWL)) steps, phases TTL ${PROD_TTLS[*]} s, kill -9 of ${PROD_KILLED:-?} mid-INSERT, PostgreSQL restarted under ${PROD_PG_RESTARTED_UNDER:-?}; $(($(date +%s) - $1)) s"
    note "published: $pubs; rows: $rows; dead letters: ${dls:-none}"
    note "registry: $changes (hard deletes tried again: $retries); dead letters the history justifies: $justified; bind window ${PROD_BIND_WINDOW_MS:-?} ms"
    note "resources: $(paste -sd';' "$SW/resources" | sed 's/;/; /g')"
}
