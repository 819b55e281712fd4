# bench/lib.sh — what make bench (bench/run.sh) and make bench-scale
# (bench/scale.sh) share: the settings both read, the /proc accounting, the
# throw-away PostgreSQL and broker helper, the data, the bare_pg lines, the
# service started, timed from its batch lines and stopped, the medians over
# rounds and the verdicts (DESIGN.md: Benchmark). Sourced, never run, by a
# script that set top (the repository), ROUNDS (from ROUNDS_VAR, BENCH_ROUNDS
# unless named) and PROFILE, and declared the results
# array R (declare -A R); it calls bench_check, then bench_workdir.
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$top/$BUILD ;; esac
BIN=$BUILD/storage-consumer
BARE=$BUILD/bench/bare_pg
DECODE=$BUILD/bench/decode_speed
AVRO_DECODE=$BUILD/bench/avro_speed
PG=$top/tests/support/pg.sh
BROKER=$top/tests/support/broker.sh
REVIEWS=${BENCH_REVIEWS:-200000}
APPS=${BENCH_APPS:-10000}
PARTITIONS=${BENCH_REVIEW_PARTITIONS:-6}
TIMEOUT_S=${BENCH_TIMEOUT_S:-240}
BATCH=500
RECRAWL=$((REVIEWS + REVIEWS / 10)) # the next crawl: every review again, and a tenth new
OUT=${BENCH_OUT:-$BUILD}
case $OUT in /*) ;; *) OUT=$top/$OUT ;; esac
TICK=$(getconf CLK_TCK)
NCPU=$(nproc)
SERVICE_PID=
SERVICE2_PID= # the second member of make bench's phase 5
LATENCY_PID=
PERF_PID=

# The binaries BINS built, the knobs whole numbers, gnuplot and (PROFILE=1)
# perf at hand, OUT made; exit 1 or 2 (a usage error) naming what is wrong.
bench_check() { # NAME (make's target) BINS...
    local name=$1 f v
    shift
    for f in "$BIN" "$BARE" "$DECODE" "$BUILD/kafka-mock-broker" "$@"; do
        [ -x "$f" ] || { echo "$name: $f is missing: run make $name" >&2; exit 1; }
    done
    for v in "${ROUNDS_VAR:-BENCH_ROUNDS}:$ROUNDS" BENCH_REVIEWS:$REVIEWS BENCH_APPS:$APPS; do
        [[ ${v#*:} =~ ^[1-9][0-9]*$ ]] || { echo "$name: ${v%%:*} must be a whole number of at least 1, not '${v#*:}'" >&2; exit 2; }
    done
    command -v gnuplot >/dev/null || { echo "$name: the charts need gnuplot (Debian: gnuplot-nox; make deps)" >&2; exit 2; }
    case $PROFILE in
    0) ;;
    1) command -v perf >/dev/null || { echo "$name: BENCH_PROFILE=1 needs perf (Debian: linux-perf)" >&2; exit 2; } ;;
    *) echo "$name: BENCH_PROFILE must be 0 or 1" >&2; exit 2 ;;
    esac
    mkdir -p "$OUT" || { echo "$name: cannot create BENCH_OUT=$OUT" >&2; exit 2; }
}

# The run's scratch directory WORK, removed at exit, its logs kept in LOGS.
bench_workdir() { # PREFIX
    WORK=$(mktemp -d "/tmp/$1.XXXXXX")
    chmod 755 "$WORK"
    trap cleanup EXIT
    trap 'exit 130' INT TERM
}

die() {
    echo >&2
    echo "bench: FAILED: $*" >&2
    exit 1
}

cleanup() {
    local rc=$?
    if [ -n "$LATENCY_PID" ]; then kill -TERM "$LATENCY_PID" 2>/dev/null || true; wait "$LATENCY_PID" 2>/dev/null || true; fi
    if [ -n "$PERF_PID" ]; then kill -INT "$PERF_PID" 2>/dev/null || true; wait "$PERF_PID" 2>/dev/null || true; fi
    if [ -n "$PG_PERF_PID" ]; then kill -INT "$PG_PERF_PID" 2>/dev/null || true; wait "$PG_PERF_PID" 2>/dev/null || true; fi
    if [ -n "$SERVICE_PID" ]; then kill -TERM "$SERVICE_PID" 2>/dev/null || true; wait "$SERVICE_PID" 2>/dev/null || true; fi
    if [ -n "$SERVICE2_PID" ]; then kill -TERM "$SERVICE2_PID" 2>/dev/null || true; wait "$SERVICE2_PID" 2>/dev/null || true; fi
    "$BROKER" stop "$WORK/kafka" >/dev/null 2>&1 || true
    "$PG" destroy "$WORK/pg" >/dev/null 2>&1 || true
    rm -rf "$LOGS"
    mkdir -p "$LOGS"
    cp "$WORK"/*.log "$WORK"/*.txt "$LOGS"/ 2>/dev/null || true
    if [ $rc -ne 0 ]; then echo "bench: logs in $LOGS" >&2; fi
    rm -rf "$WORK"
}
say() { printf '== %s\n' "$*" >&2; }

# Arithmetic on decimals (bash has integers only).
calc() { awk "BEGIN { printf \"$1\", $2 }"; }

# Median of the arguments (mean of the middle two for an even count).
median() {
    printf '%s\n' "$@" | sort -g | awk '{ v[++n] = $1 } END { if (n % 2) print v[(n + 1) / 2]; else print (v[n / 2] + v[n / 2 + 1]) / 2 }'
}

# ---- /proc accounting --------------------------------------------------------

# utime+stime of PID (or of a /proc/.../stat file) in clock ticks (0 if gone).
proc_ticks() {
    local s f=$1
    [ "${f#/}" != "$f" ] || f=/proc/$1/stat
    s=$(cat "$f" 2>/dev/null) || { echo 0; return; }
    s=${s##*) }
    set -- $s
    echo $(( ${12} + ${13} ))
}

# CPU ticks of the whole PostgreSQL cluster so far: the postmaster, the
# children it reaped (cutime+cstime) and the children still alive.
pg_ticks() {
    local pm s total child
    pm=$(head -1 "$WORK/pg/data/postmaster.pid")
    s=$(cat "/proc/$pm/stat")
    s=${s##*) }
    set -- $s
    total=$(( ${12} + ${13} + ${14} + ${15} ))
    for child in $(ps -o pid= --ppid "$pm"); do
        total=$(( total + $(proc_ticks "$child") ))
    done
    echo "$total"
}

# Busy ticks of the whole machine (every CPU), from /proc/stat.
machine_ticks() {
    awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat
}

# CPU seconds of PID's threads, by name (librdkafka names its threads rdk:*;
# the pipeline workers keep the process name).
thread_cpu() { # PID
    local t
    for t in /proc/"$1"/task/*; do
        echo "$(tr ' ' '_' <"$t/comm" 2>/dev/null) $(proc_ticks "$t/stat")"
    done | awk -v hz="$TICK" '{ n = $1; if (n ~ /^rdk:broker/) n = "rdk:broker*"; else if (n !~ /^rdk:/) n = "workers+main"; s[n] += $2 }
        END { for (k in s) if (s[k] > 0) printf "%s=%.2f ", k, s[k] / hz }'
}

status_kb() { # PID FIELD
    awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0
}

# ---- setup -------------------------------------------------------------------

# PostgreSQL and the broker helper with TOPICS (NAME:PARTITIONS each): sets DB,
# BOOTSTRAP and BROKER_PID, and db_url / psql_db reach a database by name.
bench_start() { # TOPICS...
    say "starting PostgreSQL 15 and the broker helper ($*)"
    DB=$("$PG" start "$WORK/pg")
    BOOTSTRAP=$("$BROKER" start "$WORK/kafka" 3 "$@")
    BROKER_PID=$(cat "$WORK/kafka/pid")
    echo "postgres $(psql_db postgres -At -c "SELECT setting FROM pg_settings WHERE name = 'server_version'"):" \
        "$(psql_db postgres -At -c "SELECT string_agg(name || '=' || current_setting(name), ' ' ORDER BY name) FROM pg_settings
            WHERE name IN ('fsync', 'synchronous_commit', 'shared_buffers', 'max_wal_size', 'full_page_writes', 'autovacuum')")" >&2
}
db_url() { echo "${DB/dbname=postgres/dbname=$1}"; }
psql_db() { local d=$1; shift; command psql "$(db_url "$d")" -X -q -v ON_ERROR_STOP=1 "$@"; }

# The apps, the first crawl (REVIEWS messages) and the next (RECRAWL) in
# WORK/apps.tsv, reviews.tsv and recrawl.tsv; AVG_BYTES, a message's mean size.
bench_generate() {
    say "generating $REVIEWS review messages and $APPS apps (bench/gen-reviews.awk)"
    awk -v mode=apps -v apps="$APPS" -f "$top/bench/gen-reviews.awk" >"$WORK/apps.tsv"
    [ "$(sort -u -k1,1 "$WORK/apps.tsv" | wc -l)" -eq "$APPS" ] || die "the generator did not write $APPS distinct apps"
    awk -v mode=reviews -v n="$REVIEWS" -v apps="$APPS" -f "$top/bench/gen-reviews.awk" >"$WORK/reviews.tsv"
    [ "$(wc -l <"$WORK/reviews.tsv")" -eq "$REVIEWS" ] || die "the generator did not write $REVIEWS messages"
    awk -v mode=recrawl -v apps="$APPS" -f "$top/bench/gen-reviews.awk" "$WORK/reviews.tsv" >"$WORK/recrawl.tsv"
    [ "$(wc -l <"$WORK/recrawl.tsv")" -eq "$RECRAWL" ] || die "the generator did not write the next crawl's $RECRAWL messages"
    AVG_BYTES=$(awk -F'\t' '{ s += length($2) } END { printf "%.0f", s / NR }' "$WORK/reviews.tsv")
}

# A fresh database: the App API's applications table (standing in for its
# migrations) with the $APPS apps, then storage-consumer's own migrations.
fresh_db() {
    psql_db postgres -c "CREATE DATABASE $1"
    psql_db "$1" <<SQL
CREATE TABLE apps_registry_application (
    id BIGSERIAL PRIMARY KEY, package_name VARCHAR(255) NOT NULL UNIQUE, name VARCHAR(255),
    is_active BOOLEAN NOT NULL DEFAULT true, created_at TIMESTAMPTZ NOT NULL DEFAULT now());
\copy apps_registry_application (package_name, name) FROM '$WORK/apps.tsv'
ANALYZE apps_registry_application;
SQL
    STORAGE_DATABASE_URL=$(db_url "$1") "$BIN" migrate >"$WORK/migrate-$1.log" 2>&1 ||
        { cat "$WORK/migrate-$1.log" >&2; die "storage-consumer migrate failed on $1"; }
}

# Produce FILE to TOPIC and check that the broker kept every message: sets
# HIGH (its high watermarks by partition).
produce_topic() { # TOPIC FILE COUNT
    local p reply low high total=0
    kcat -P -b "$BOOTSTRAP" -t "$1" -K $'\t' -X compression.codec=zstd <"$2" || die "kcat could not produce to $1"
    HIGH=()
    for ((p = 0; p < PARTITIONS; p++)); do
        reply=$("$BROKER" ctl "$WORK/kafka" watermarks "$1" "$p") || die "watermarks $1 [$p]: $reply"
        read -r _ low high <<<"$reply"
        # The mock silently drops the oldest message sets beyond ~5 MiB or
        # 100,000 sets per partition: a low watermark above 0 means lost data.
        [ "$low" -eq 0 ] || die "$1 [$p] low watermark is $low, not 0: the broker's retention dropped \
messages (raise BENCH_REVIEW_PARTITIONS=$PARTITIONS, or produce less)"
        HIGH[p]=$high
        total=$((total + high))
    done
    [ "$total" -eq "$3" ] || die "the $1 topic holds $total messages, expected $3"
    echo "$1 topic: ${HIGH[*]} messages per partition, low watermark 0 everywhere" >&2
}

# The key=value pairs of bare_pg's line for PASS in OUT into window W.
bare_parse() { # OUT PASS W
    local kv w=$3
    for kv in $(grep "^pass=$2 " "$1"); do R[$w.${kv%%=*}]=${kv#*=}; done
    R[$w.messages]=${R[$w.rows]}
    R[$w.broker_cpu_s]=0
    R[$w.other_cpu_s]=$(calc %.2f "${R[$w.machine_cpu_s]} - ${R[$w.client_cpu_s]} - ${R[$w.pg_cpu_s]}")
    R[$w.backend_us_per_msg]=$(calc %.1f "${R[$w.backend_cpu_s]} * 1e6 / ${R[$w.rows]}")
}

# Untimed, once a round's database has served: VACUUM ANALYZE it, or
# autovacuum would pick its 200,000 new rows during a later measurement.
settle() { # DB
    psql_db "$1" -c "VACUUM ANALYZE"
}

# ---- the service ---------------------------------------------------------------

# Batch lines of PIPELINE in LOG: "size inserted updated skipped dead duration_ms skipped_by_probe
# inserted_by_copy end_time".
batch_lines() { # LOG PIPELINE
    [ -f "$1" ] || return 0 # the service has not opened it yet
    awk -v comp="[$2]" '$3 == comp && $4 == "batch" {
        for (i = 5; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        print v["size"], v["inserted"], v["updated"], v["skipped"], v["dead_lettered"], v["duration_ms"], v["skipped_by_probe"] + 0,
            v["inserted_by_copy"] + 0, $1
    }' "$1"
}

# The messages of the reviews pipeline's batch lines in LOG so far, as
# counted by count_batches. Parsing the whole log at every poll instead cost
# about a fifth of a core during each ingest, taken from the service and
# PostgreSQL on a two-core machine; bare_pg's passes paid nothing of the kind.
consumed() { # LOG
    local n=
    read -r n <"$1.count" 2>/dev/null || true
    echo "${n:-0}"
}

# In the background, until PID exits: follow LOG and keep the running sum of
# the reviews pipeline's batch sizes in LOG.count (bash alone, line by line:
# no process per poll or per line).
count_batches() { # LOG PID
    local log=$1
    echo 0 >"$log.count"
    tail -n +1 --pid="$2" -F "$log" 2>/dev/null | {
        local line sum=0 re=' \[reviews\] batch size=([0-9]+) '
        while IFS= read -r line; do
            [[ $line =~ $re ]] || continue
            sum=$((sum + BASH_REMATCH[1]))
            echo "$sum" >"$log.count"
        done
    } &
}

# Start storage-consumer in the background: NAME DB PIPELINES GROUP_PREFIX
# [FETCH_WAIT_MAX_MS]; the reviews pipeline reads TOPIC (default: reviews).
# Everything else is the service's default.
TOPIC=reviews
# Its database URL is $URL_OF DB (default: the Unix socket).
URL_OF=db_url
start_service() {
    local extra=(STORAGE_TOPIC_REVIEWS="$TOPIC")
    [ -n "${5:-}" ] && extra+=(STORAGE_RDKAFKA_FETCH_WAIT_MAX_MS="$5")
    env STORAGE_DATABASE_URL="$($URL_OF "$2")" STORAGE_KAFKA_BOOTSTRAP_SERVERS="$BOOTSTRAP" \
        STORAGE_PIPELINES="$3" STORAGE_GROUP_PREFIX="$4" STORAGE_SESSION_TIMEOUT_MS=6000 "${extra[@]}" \
        STORAGE_HEARTBEAT_DIR="$WORK/heartbeat-$1" STORAGE_LOG_LEVEL=info STORAGE_LOG_FORMAT=text \
        "$BIN" run >"$WORK/service-$1.log" 2>&1 &
    SERVICE_PID=$!
    count_batches "$WORK/service-$1.log" "$SERVICE_PID"
}

# Wait until the reviews pipeline logged COUNT consumed messages. Its batch
# line comes after the Kafka commit: COUNT=$EXPECT is lag 0.
wait_reviews() { # NAME COUNT
    local log=$WORK/service-$1.log deadline=$((SECONDS + TIMEOUT_S))
    while [ "$(consumed "$log")" -lt "$2" ]; do
        kill -0 "$SERVICE_PID" 2>/dev/null || { tail -20 "$log" >&2; die "storage-consumer ($1) exited early"; }
        [ $SECONDS -lt $deadline ] || { tail -20 "$log" >&2; die "storage-consumer ($1) did not reach lag 0 within $TIMEOUT_S s"; }
        sleep 0.05
    done
}

# The group's committed offsets must equal the high watermarks: lag 0 as the
# broker sees it, not only as the log says.
#
# A commit the coordinator refused while the group rebalanced is held and
# made again when the rebalance ends, or after a session timeout (6 s here;
# docs/DESIGN.md: The batch loop), and the batch's log line does not wait
# for it: the offsets may reach the high watermarks up to that long after
# the last batch line, and not longer.
COMMITTED_WAIT_S=10
check_committed() { # GROUP (on TOPIC)
    local p reply deadline=$((SECONDS + COMMITTED_WAIT_S)) high=("${HIGH[@]}")
    [ "$TOPIC" = reviews ] || high=("${HIGH_RECRAWL[@]}")
    for ((p = 0; p < PARTITIONS; p++)); do
        while :; do
            if ! reply=$("$BROKER" ctl "$WORK/kafka" committed "$1" "$TOPIC" "$p" 2>&1); then
                echo "bench: warning: cannot read committed offsets ($reply); lag 0 is taken from the log only" >&2
                return 0
            fi
            [ "${reply#ok }" = "${high[p]}" ] && break
            [ $SECONDS -lt $deadline ] ||
                die "group $1 committed ${reply#ok } on $TOPIC [$p], high watermark ${high[p]} (${COMMITTED_WAIT_S} s after the last batch)"
            sleep 0.1
        done
    done
}

snapshot() { # NAME PHASE(0|1)
    R[$1.svc_ticks$2]=$(proc_ticks "$SERVICE_PID")
    [ -z "$SERVICE2_PID" ] || R[$1.svc_ticks$2]=$(( ${R[$1.svc_ticks$2]} + $(proc_ticks "$SERVICE2_PID") ))
    R[$1.pg_ticks$2]=$(pg_ticks)
    R[$1.broker_ticks$2]=$(proc_ticks "$BROKER_PID")
    R[$1.machine_ticks$2]=$(machine_ticks)
    R[$1.wall$2]=$(date +%s%N)
}

# Stop the service the way an orchestrator does, reading its cost first.
stop_service() { # NAME DB
    local rc=0 pids pid
    R[$1.rss_mb]=$(calc %.1f "$(status_kb "$SERVICE_PID" VmHWM) / 1024")
    pids=$(psql_db "$2" -At -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'storage-consumer'")
    R[$1.backend_ticks]=0
    for pid in $pids; do R[$1.backend_ticks]=$(( ${R[$1.backend_ticks]} + $(proc_ticks "$pid") )); done
    R[$1.svc_ticks_total]=$(proc_ticks "$SERVICE_PID")
    R[$1.thread_cpu]=$(thread_cpu "$SERVICE_PID")
    kill -TERM "$SERVICE_PID"
    wait "$SERVICE_PID" || rc=$?
    SERVICE_PID=
    [ $rc -eq 0 ] || { tail -20 "$WORK/service-$1.log" >&2; die "storage-consumer ($1) exited with $rc after SIGTERM"; }
}

# Throughput from the batch lines: rows / (end of the last batch - start of
# the first batch), the start being the first line's time minus its duration.
analyse() { # NAME
    batch_lines "$WORK/service-$1.log" reviews >"$WORK/batches-$1.txt"
    analyse_lines "$1" "$WORK/batches-$1.txt"
}

# The same from a file of batch lines in time order; START_MS, when given, is
# the window's start instead.
analyse_lines() { # NAME LINES [START_MS]
    local lines=$2 first last t0 t1 kv k
    first=$(head -1 "$lines")
    last=$(tail -1 "$lines")
    t0=$(date -u -d "${first##* }" +%s%3N)
    t1=$(date -u -d "${last##* }" +%s%3N)
    R[$1.start_ms]=$(calc %.1f "${3:-$t0 - $(echo "$first" | cut -d' ' -f6)}")
    R[$1.end_ms]=$t1
    awk -v t0="${R[$1.start_ms]}" -v t1="$t1" '
        { n++; size += $1; ins += $2; upd += $3; skip += $4; dead += $5; d[n] = $6; busy += $6; probe += $7; copied += $8 }
        END {
            secs = (t1 - t0) / 1000
            for (i = 2; i <= n; i++) { x = d[i]; for (j = i - 1; j >= 1 && d[j] > x; j--) d[j + 1] = d[j]; d[j + 1] = x }
            printf "batches=%d messages=%d inserted=%d updated=%d skipped=%d skipped_by_probe=%d inserted_by_copy=%d dead_lettered=%d seconds=%.3f ", \
                n, size, ins, upd, skip, probe, copied, dead, secs
            printf "rows_per_s=%.0f msgs_per_s=%.0f batch_ms_mean=%.2f batch_ms_p50=%.2f batch_ms_p99=%.2f batch_ms_max=%.2f busy_pct=%.1f mean_batch=%.1f\n", \
                (ins + upd) / secs, size / secs, busy / n, d[int(0.5 * n) + 1], d[int(0.99 * n) + 1], d[n], 100 * busy / (t1 - t0), size / n
        }' "$lines" >"$WORK/analysis-$1.txt"
    for kv in $(cat "$WORK/analysis-$1.txt"); do R[$1.${kv%%=*}]=${kv#*=}; done
    R[$1.cpu_us_per_msg]=$(calc %.1f "${R[$1.svc_ticks_total]} / $TICK * 1e6 / ${R[$1.messages]}")
    R[$1.backend_us_per_msg]=$(calc %.1f "${R[$1.backend_ticks]} / $TICK * 1e6 / ${R[$1.messages]}")
    # CPU seconds from the first batch to lag 0, per process group.
    for k in svc pg broker machine; do
        R[$1.${k}_cpu_s]=$(calc %.2f "(${R[$1.${k}_ticks1]} - ${R[$1.${k}_ticks0]}) / $TICK")
    done
    R[$1.client_cpu_s]=${R[$1.svc_cpu_s]}
    R[$1.window_s]=$(calc %.2f "(${R[$1.wall1]} - ${R[$1.wall0]}) / 1e9")
    R[$1.other_cpu_s]=$(calc %.2f "${R[$1.machine_cpu_s]} - ${R[$1.svc_cpu_s]} - ${R[$1.pg_cpu_s]} - ${R[$1.broker_cpu_s]}")
}

# BENCH_PROFILE=1: sample the running service until profile_stop.
profile_start() { # NAME
    perf record -q -e cpu-clock -F 999 -g -p "$SERVICE_PID" -o "$WORK/perf-$1.data" \
        >"$WORK/perf-$1.log" 2>&1 &
    PERF_PID=$!
}

profile_stop() { # NAME
    kill -INT "$PERF_PID" 2>/dev/null || true
    wait "$PERF_PID" 2>/dev/null || true
    PERF_PID=
    {
        echo "# where the service's CPU went during $1 (perf record -e cpu-clock -g; samples by library, then by function)"
        # awk reads to the end: a reader that stopped early would fail the
        # pipeline (SIGPIPE, under pipefail).
        perf report -i "$WORK/perf-$1.data" --no-children --sort dso --stdio -g none 2>/dev/null |
            awk '!/^#/ && /%/ && n++ < 12'
        echo
        perf report -i "$WORK/perf-$1.data" --no-children --sort dso,symbol --stdio -g none 2>/dev/null |
            awk '!/^#/ && /%/ && n++ < 30'
    } >"$WORK/profile-$1.txt"
}

# BENCH_PROFILE=1: sample PostgreSQL backends PIDS (comma-separated) until
# pg_profile_stop, on the wall clock (perf's times then compare with
# bare_pg's start_ms and end_ms). For the ingests PG_PROFILE_WINDOWS names,
# the service's sessions (pg_profile_start).
PG_PROFILE_WINDOWS=
PG_PERF_PID=
pg_perf_record() { # PIDS NAME
    perf record -q -k realtime -e cpu-clock -F 999 -g -p "$1" -o "$WORK/perf-pg-$2.data" >"$WORK/perf-pg-$2.log" 2>&1 &
    PG_PERF_PID=$!
}

pg_profile_start() { # NAME DB
    local pids
    pids=$(psql_db "$2" -At -c "SELECT string_agg(pid::text, ',') FROM pg_stat_activity
        WHERE application_name = 'storage-consumer' AND datname = current_database()")
    [ -n "$pids" ] || die "no PostgreSQL session of the service to sample ($1)"
    pg_perf_record "$pids" "$1"
}

pg_profile_stop() {
    kill -INT "$PG_PERF_PID" 2>/dev/null || true
    wait "$PG_PERF_PID" 2>/dev/null || true
    PG_PERF_PID=
}

# The service from TOPIC's offset 0 to lag 0: EXPECT messages.
EXPECT=$REVIEWS
ingest() { # NAME DB PIPELINES GROUP_PREFIX [FETCH_WAIT_MAX_MS]
    local profile=0 pg_profile=0
    [ "$PROFILE" = 1 ] && [[ " $PROFILE_WINDOWS " == *" $1 "* ]] && profile=1
    [ "$PROFILE" = 1 ] && [[ " $PG_PROFILE_WINDOWS " == *" $1 "* ]] && pg_profile=1
    psql_db postgres -c CHECKPOINT
    start_service "$@"
    wait_reviews "$1" 1
    [ $profile = 1 ] && profile_start "$1"
    [ $pg_profile = 1 ] && pg_profile_start "$1" "$2"
    snapshot "$1" 0
    wait_reviews "$1" "$EXPECT"
    snapshot "$1" 1
    [ $profile = 1 ] && profile_stop "$1"
    [ $pg_profile = 1 ] && pg_profile_stop
    return 0
}

# The production mix on DB (made by the caller, holding BASE_ROWS reviews
# already, none of them the crawls'): the first crawl, the next crawl, its
# replay, into windows freshS_R, reobS_R and replayS_R (S: SUFFIX).
BASE_ROWS=0
service_round() { # ROUND DB [SUFFIX]
    local r=$1 db=$2 s=${3:-} rows
    TOPIC=reviews EXPECT=$REVIEWS
    ingest "fresh${s}_$r" "$db" reviews "bench-fresh${s}-$r"
    check_committed "bench-fresh${s}-$r.reviews"
    stop_service "fresh${s}_$r" "$db"
    analyse "fresh${s}_$r"
    rows=$(psql_db "$db" -At -c "SELECT count(*) FROM reviews")
    [ "$rows" -eq $((BASE_ROWS + REVIEWS)) ] ||
        die "the reviews table holds $rows rows after the ingest, expected $((BASE_ROWS + REVIEWS))"
    [ "${R[fresh${s}_$r.inserted]}" -eq "$REVIEWS" ] || die "the service logged ${R[fresh${s}_$r.inserted]} inserted rows, expected $REVIEWS"
    # The next crawl, then the same again under a new group prefix (every
    # row skipped). Untimed VACUUM ANALYZE before each, as bare_pg does: a
    # crawl meets a table autovacuum has long since seen, and autovacuum
    # must not pick it during the measurement.
    TOPIC=reviews-recrawl EXPECT=$RECRAWL
    psql_db "$db" -c "VACUUM ANALYZE reviews"
    ingest "reob${s}_$r" "$db" reviews "bench-reob${s}-$r"
    check_committed "bench-reob${s}-$r.reviews"
    stop_service "reob${s}_$r" "$db"
    analyse "reob${s}_$r"
    [ "${R[reob${s}_$r.updated]}" -eq "$REVIEWS" ] && [ "${R[reob${s}_$r.inserted]}" -eq $((RECRAWL - REVIEWS)) ] ||
        die "the next crawl updated ${R[reob${s}_$r.updated]} and inserted ${R[reob${s}_$r.inserted]} rows, expected $REVIEWS and $((RECRAWL - REVIEWS))"
    psql_db "$db" -c "VACUUM ANALYZE reviews"
    ingest "replay${s}_$r" "$db" reviews "bench-replay${s}-$r"
    check_committed "bench-replay${s}-$r.reviews"
    stop_service "replay${s}_$r" "$db"
    analyse "replay${s}_$r"
    [ "${R[replay${s}_$r.skipped]}" -ge "$RECRAWL" ] || die "the replay skipped ${R[replay${s}_$r.skipped]} rows, expected $RECRAWL"
    R[replay${s}_$r.rows_per_s]=${R[replay${s}_$r.msgs_per_s]}
    TOPIC=reviews EXPECT=$REVIEWS
    settle "$db" # the replay updated its consumer_offsets rows with every batch
    echo "storage-consumer: fresh ${R[fresh${s}_$r.rows_per_s]}, reobserve ${R[reob${s}_$r.rows_per_s]}, replay ${R[replay${s}_$r.rows_per_s]} rows/s" \
        "(${R[fresh${s}_$r.inserted_by_copy]} of the fresh rows COPYed into the table," \
        "${R[replay${s}_$r.skipped_by_probe]} of the replay's rows found stored by the probe)" >&2
}

# ---- over the rounds -----------------------------------------------------------

# Figures derived per round from the measured ones, as R[P_r.KEY]: CPU us per
# message of the client, PostgreSQL and the broker helper, the client's CPU
# over PostgreSQL's in the same window (a ratio, because the machine's speed
# changes from run to run), and the share of the machine everything outside
# the benchmark used (%).
derive() { # P
    local r w s
    for ((r = 1; r <= ROUNDS; r++)); do
        w=$1_$r
        R[$w.client_us]=$(calc %.2f "${R[$w.client_cpu_s]} * 1e6 / ${R[$w.messages]}")
        R[$w.pg_us]=$(calc %.2f "${R[$w.pg_cpu_s]} * 1e6 / ${R[$w.messages]}")
        R[$w.broker_us]=$(calc %.2f "${R[$w.broker_cpu_s]} * 1e6 / ${R[$w.messages]}")
        R[$w.cpu_ratio]=$(calc %.3f "${R[$w.client_cpu_s]} / ${R[$w.pg_cpu_s]}")
        s=${R[$w.window_s]:-${R[$w.seconds]}} # the service's window, or bare_pg's pass
        R[$w.other_pct]=$(calc %.1f "100 * ${R[$w.other_cpu_s]} / ($s * $NCPU)")
    done
}

# VALUES of KEY over the rounds of window prefix P.
over_rounds() { # P KEY [N: the number of rounds, ROUNDS unless given]
    local r
    for ((r = 1; r <= ${3:-ROUNDS}; r++)); do printf '%s ' "${R[$1_$r.$2]}"; done
}
med() { median $(over_rounds "$1" "$2"); }
# "MIN-MAX" of KEY over the rounds, in printf format FMT.
spread() { # P KEY FMT
    over_rounds "$1" "$2" | tr ' ' '\n' | grep . | sort -g |
        awk -v f="$3" 'NR == 1 { a = $1 } { b = $1 } END { printf f "-" f, a, b }'
}
# Median in FMT, then its spread in parentheses.
med_spread() { # P KEY FMT
    printf "$3 (%s)" "$(med "$1" "$2")" "$(spread "$1" "$2" "$3")"
}
med_ratio() { calc %.2f "$(med "$1" cpu_ratio)"; }  # P
med_us() { calc %.1f "$(med "$1" "$2")"; }         # P KEY(client_us|pg_us|broker_us)
med_other() { calc %.0f "$(med "$1" other_pct)"; } # P

met() { awk -v v="$1" -v op="$2" -v t="$3" 'BEGIN { print (op == ">=" ? v >= t : v <= t) ? "true" : "false" }'; }
json_list() { local IFS=,; echo "[$*]"; }

# The verdict lines of TARGETS (NAME VALUE OP LIMIT SPREAD LABEL per line,
# the label's underscores spaces), under the title TITLE.
print_targets() { # TITLE
    local name value op limit spr label
    printf '\n%-58s %8s %-13s %11s  %s\n' "$1" "median" "spread" "target" "verdict"
    while read -r name value op limit spr label; do
        printf '%-58s %8s %-13s %11s  %s\n' "${label//_/ }" "$value" "$spr" "$op $limit" \
            "$([ "$(met "$value" "$op" "$limit")" = true ] && echo PASS || echo MISS)"
    done <<<"$TARGETS"
}

# TARGETS as the members of bench.json's "targets" object.
targets_json() {
    local sep= name value op limit spr label
    while read -r name value op limit spr label; do
        printf '%s\n    "%s": {"value": %s, "limit": %s, "op": "%s", "spread": "%s", "met": %s}' "$sep" "$name" "$value" \
            "$limit" "$op" "$spr" "$(met "$value" "$op" "$limit")"
        sep=,
    done <<<"$TARGETS"
}
