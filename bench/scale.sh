#!/usr/bin/env bash
# make bench-scale: what the service costs as the tables grow (DESIGN.md:
# Benchmark). make bench measures every phase on an empty table; a crawler's
# tables are never empty. Here the same production mix as make bench's
# phases 1 and 2 meets a database that already holds the reviews and
# app_stats of a month of crawling, and PostgreSQL's own limits are measured
# on a database in the same state:
#
#   for each size S of the curve (BENCH_SCALE_CURVE, then BENCH_SCALE_ROWS):
#     a template database: the apps, the migrations, then S reviews and
#     BENCH_SCALE_STATS_DAYS x S / BENCH_SCALE_ROWS days of hourly app_stats
#     of every app, written by PostgreSQL itself (bench/prefill.sql), frozen
#     and analyzed, checkpointed;
#     BENCH_SCALE_ROUNDS rounds, each on two copies of it (CREATE DATABASE
#     ... TEMPLATE, STRATEGY FILE_COPY: the same files, then sync, untimed):
#       1. bare_pg --passes limits --prefilled: plain COPY of the first crawl,
#          UPDATE ... FROM + COPY of the next, the probe of its keys;
#       2. the service: the first crawl, the next crawl, its replay;
#       at the largest size only, 3. the floor of reading Kafka: a bare
#          librdkafka consumer (bench/consumer_floor: the service's consumer
#          and allocator settings, batches of 500 committed, no decoding, no
#          database) reads the first crawl's topic, paced to the rate the
#          service stored it at in this round, then once more unpaced; and
#          before them the decoder alone over the first crawl
#          (bench/decode_speed), on the machine as quiet as the floor's.
#
# The service's CPU per message is judged against the paced floor plus the
# decoder's own cost (the unpaced floor is reported beside it); its
# PostgreSQL CPU per row (its sessions' backends over the whole run) against
# the limits'. BENCH_PROFILE=1 samples the service
# with perf during the last round's first crawl at the largest size and
# splits its CPU (bench-scale-logs/profile-split.txt), and its PostgreSQL
# sessions during that round's replay (pg-profile-split.txt). The loaded tables are
# the migrations' own (bench/prefill.sql makes every constraint again under
# its name): the service's start-up checks them against the catalog on every
# copy, and fails the bench if they were not.
#
# Prints every figure with its target and verdict, writes
# $BENCH_OUT/bench-scale.json and the charts in $BENCH_OUT/bench-scale-charts/,
# keeps the logs in $BENCH_OUT/bench-scale-logs/. Knobs (environment):
# BENCH_OUT [$BUILD], BENCH_SCALE_ROWS [10000000] (N, the reviews the largest
# database holds), BENCH_SCALE_CURVE ["0 1000000"] (the smaller sizes),
# BENCH_SCALE_STATS_DAYS [30], BENCH_SCALE_ROUNDS [3], BENCH_REVIEWS [200000]
# (the first crawl; the next is 1.1 times it), BENCH_APPS [10000],
# BENCH_REVIEW_PARTITIONS [6], BENCH_TIMEOUT_S [240], BENCH_PROFILE [1 when perf
# is installed, else 0].
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
SCALE_ROWS=${BENCH_SCALE_ROWS:-10000000}
CURVE=${BENCH_SCALE_CURVE-0 1000000}
STATS_DAYS=${BENCH_SCALE_STATS_DAYS:-30}
ROUNDS=${BENCH_SCALE_ROUNDS:-3} ROUNDS_VAR=BENCH_SCALE_ROUNDS
PROFILE=${BENCH_PROFILE-$(command -v perf >/dev/null && echo 1 || echo 0)}
declare -A R # results: R[window.key]; windows (each _R: round R, K: the size's index in SIZES)
# lcopyK, lupdK, lprobeK (the limits), freshK, reobK, replayK (the service), floor and floorfast (the Kafka floor, paced and not)
. "$top/bench/lib.sh"
FLOOR=$BUILD/bench/consumer_floor
LOGS=$OUT/bench-scale-logs
JSON=$OUT/bench-scale.json
CHARTS=$OUT/bench-scale-charts

bench_check bench-scale "$FLOOR"
[[ $SCALE_ROWS =~ ^[1-9][0-9]*$ ]] ||
    { echo "bench-scale: BENCH_SCALE_ROWS must be a whole number of at least 1, not '$SCALE_ROWS'" >&2; exit 2; }
[[ $STATS_DAYS =~ ^[0-9]+$ ]] || { echo "bench-scale: BENCH_SCALE_STATS_DAYS must be a whole number, not '$STATS_DAYS'" >&2; exit 2; }
SIZES=()
for s in $CURVE; do
    [[ $s =~ ^[0-9]+$ ]] && [ "$s" -lt "$SCALE_ROWS" ] ||
        { echo "bench-scale: BENCH_SCALE_CURVE holds whole numbers below BENCH_SCALE_ROWS ($SCALE_ROWS), not '$s'" >&2; exit 2; }
    [ ${#SIZES[@]} -eq 0 ] || [ "$s" -gt "${SIZES[-1]}" ] ||
        { echo "bench-scale: BENCH_SCALE_CURVE must rise, '$s' does not" >&2; exit 2; }
    SIZES+=("$s")
done
SIZES+=("$SCALE_ROWS")
LAST=$((${#SIZES[@]} - 1))
rm -rf "$CHARTS" "$JSON"
bench_workdir storage-bench-scale
SECONDS_START=$SECONDS

bench_start reviews:"$PARTITIONS" reviews-recrawl:"$PARTITIONS"
bench_generate

say "producing the $RECRAWL messages of the next crawl to reviews-recrawl, then the $REVIEWS of the first to reviews (kcat, zstd)"
produce_topic reviews-recrawl "$WORK/recrawl.tsv" "$RECRAWL"
HIGH_RECRAWL=("${HIGH[@]}")
produce_topic reviews "$WORK/reviews.tsv" "$REVIEWS"

# ---- the databases -------------------------------------------------------------

# The template of size index K: SIZES[K] reviews and its share of the month
# of app_stats; frozen, analyzed and checkpointed, so that every copy starts
# with nothing for VACUUM or autovacuum to do.
make_template() { # K
    local k=$1 rows=${SIZES[$1]} days t0
    days=$((STATS_DAYS * SIZES[$1] / SCALE_ROWS))
    t0=$SECONDS
    fresh_db "scale_tmpl_$k"
    if [ "$rows" -gt 0 ]; then
        psql_db "scale_tmpl_$k" -v rows="$rows" -v apps="$APPS" -v days="$days" -f "$top/bench/prefill.sql" >/dev/null
    fi
    psql_db "scale_tmpl_$k" -c "VACUUM (FREEZE, ANALYZE)"
    psql_db postgres -c CHECKPOINT
    R[size_$k.rows]=$(psql_db "scale_tmpl_$k" -At -c "SELECT count(*) FROM reviews")
    R[size_$k.stats_rows]=$(psql_db "scale_tmpl_$k" -At -c "SELECT count(*) FROM app_stats")
    R[size_$k.stats_days]=$days
    R[size_$k.db_mb]=$(psql_db postgres -At -c "SELECT pg_database_size('scale_tmpl_$k') / 1048576")
    R[size_$k.prefill_s]=$((SECONDS - t0))
    [ "${R[size_$k.rows]}" -eq "$rows" ] || die "the template of size $rows holds ${R[size_$k.rows]} reviews"
    [ "${R[size_$k.stats_rows]}" -eq $((days * 24 * APPS)) ] ||
        die "the template of size $rows holds ${R[size_$k.stats_rows]} app_stats rows, expected $((days * 24 * APPS))"
    echo "template $k: ${R[size_$k.rows]} reviews, ${R[size_$k.stats_rows]} app_stats rows ($days days), ${R[size_$k.db_mb]} MB, made in ${R[size_$k.prefill_s]} s" >&2
}

# A copy of the template, its files on disk before anything is timed.
copy_db() { # K NAME
    psql_db postgres -c "CREATE DATABASE $2 TEMPLATE scale_tmpl_$1 STRATEGY FILE_COPY"
    sync
}

drop_db() { psql_db postgres -c "DROP DATABASE $1"; }

# ---- the rounds ----------------------------------------------------------------

limits_round() { # K ROUND
    local k=$1 r=$2 out=$WORK/limits-$1-$2.txt db=scale_limits_$1_$2 w
    copy_db "$k" "$db"
    "$BARE" "$(db_url "$db")" "$WORK/reviews.tsv" "$BATCH" --recrawl "$WORK/recrawl.tsv" --passes limits --prefilled \
        >"$out" 2>"$WORK/limits-$k-$r.log" &
    local bare=$! pid=
    # BENCH_PROFILE=1, the last round at N: its session sampled, on the
    # wall clock, for the probe pass's own window (pg_profile_split).
    if [ "$PROFILE" = 1 ] && [ "$k" -eq "$LAST" ] && [ "$r" -eq "$ROUNDS" ]; then
        while kill -0 "$bare" 2>/dev/null && [ -z "$pid" ]; do
            pid=$(psql_db "$db" -At -c "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
            [ -n "$pid" ] || sleep 0.1
        done
        [ -z "$pid" ] || pg_perf_record "$pid" lprobe
    fi
    wait "$bare" || { cat "$WORK/limits-$k-$r.log" >&2; die "bare_pg --passes limits failed"; }
    [ -z "$PG_PERF_PID" ] || pg_profile_stop
    grep -Eq "prefilled_rows=${SIZES[k]}( |$)" "$out" || die "bare_pg did not meet the ${SIZES[k]} reviews of the template: $(head -1 "$out")"
    bare_parse "$out" limit_copy "lcopy${k}_$r"
    bare_parse "$out" limit_update "lupd${k}_$r"
    bare_parse "$out" limit_probe "lprobe${k}_$r"
    for w in "lcopy inserted $REVIEWS" "lupd updated $REVIEWS" "lupd inserted $((RECRAWL - REVIEWS))" "lprobe skipped $RECRAWL"; do
        set -- $w
        [ "${R[$1${k}_$r.$2]}" -eq "$3" ] || die "bare_pg's $1 pass $2 ${R[$1${k}_$r.$2]} rows, expected $3"
    done
    drop_db "$db"
    echo "limits at ${SIZES[k]} rows: copy ${R[lcopy${k}_$r.rows_per_s]}, update ${R[lupd${k}_$r.rows_per_s]}, probe ${R[lprobe${k}_$r.rows_per_s]} rows/s" >&2
}

# The floor: a bare consumer reads the first crawl's topic under a group of
# its own, and its committed offsets must then be the high watermarks. Twice:
# paced to the rate the service stored the same crawl at in this round (the
# floor its CPU is judged against: librdkafka spends more per record when it
# is read at a service's pace than when it is drained at once), and unpaced.
floor_round() { # ROUND
    local r=$1 w rate kv line
    line=$("$DECODE" "$WORK/reviews.tsv" 3) || die "bench/decode_speed failed: $line"
    R[decode_$r.us]=$(sed -n 's/.*fast_us=\([0-9.]*\).*/\1/p' <<<"$line")
    echo "decoding alone: ${R[decode_$r.us]} us per message" >&2
    for w in floor floorfast; do
        rate=0
        [ $w = floorfast ] || rate=$(calc %.0f "${R[fresh${LAST}_$r.msgs_per_s]}")
        "$FLOOR" "$BOOTSTRAP" reviews "bench-$w-$r" "$REVIEWS" "$BATCH" "$rate" >"$WORK/$w-$r.txt" 2>"$WORK/$w-$r.log" ||
            { cat "$WORK/$w-$r.log" >&2; die "bench/consumer_floor failed"; }
        for kv in $(cat "$WORK/$w-$r.txt"); do R[${w}_$r.${kv%%=*}]=${kv#*=}; done
        [ "${R[${w}_$r.messages]}" -eq "$REVIEWS" ] || die "the floor consumer read ${R[${w}_$r.messages]} messages, expected $REVIEWS"
        TOPIC=reviews check_committed "bench-$w-$r"
        echo "Kafka floor ($([ "$rate" = 0 ] && echo unpaced || echo "paced to $rate messages/s")):" \
            "${R[${w}_$r.cpu_us_per_message]} us CPU per message (${R[${w}_$r.msgs_per_s]} messages/s)" >&2
    done
}

PROFILE_WINDOWS="fresh${LAST}_$ROUNDS" # the one ingest BENCH_PROFILE=1 samples
PG_PROFILE_WINDOWS="replay${LAST}_$ROUNDS" # and the one whose PostgreSQL sessions it samples
for k in "${!SIZES[@]}"; do
    say "size ${SIZES[k]}: the template (reviews, app_stats, frozen)"
    make_template "$k"
    BASE_ROWS=${SIZES[k]}
    for ((r = 1; r <= ROUNDS; r++)); do
        say "size ${SIZES[k]}, round $r/$ROUNDS: 1. PostgreSQL's limits on a copy"
        limits_round "$k" "$r"
        say "size ${SIZES[k]}, round $r/$ROUNDS: 2. storage-consumer on a copy: the first crawl, the next, its replay"
        copy_db "$k" "scale_svc_${k}_$r"
        service_round "$r" "scale_svc_${k}_$r" "$k"
        drop_db "scale_svc_${k}_$r"
        if [ "$k" -eq "$LAST" ]; then
            say "round $r/$ROUNDS: 3. the decoder alone and the Kafka floor (bench/consumer_floor)"
            floor_round "$r"
        fi
    done
    # The template is not needed again: its disk back before the next size.
    drop_db "scale_tmpl_$k"
done
BASE_ROWS=0

# ---- where the service's CPU went ------------------------------------------------

# The samples of the profiled ingest by what spent them: the Kafka client's
# threads (fetching, decompressing, the protocol, their system calls), and on
# the pipeline's worker thread the Kafka client, decoding, COPY text, the
# database client, the batch loop, the kernel, libc and the rest, each
# function by the source file the binary's debug information names. Each
# share is also given in us per message of that ingest's window.
profile_split() { # NAME
    local us=${R[$1.client_us]}
    nm -l --defined-only "$BIN" | awk -F'\t' 'NF == 2 { n = split($1, a, " "); f = $2; sub(/:[0-9]+$/, "", f)
        sub(/.*\/src\//, "src/", f); print a[n] "\t" f }' >"$WORK/symbol-files.tsv"
    perf report -i "$WORK/perf-$1.data" --no-children --sort comm,dso,sym -t '|' --stdio -g none 2>/dev/null |
        awk -F'|' -v us="$us" 'NR == FNR { split($0, kv, "\t"); file[kv[1]] = kv[2]; next }
        /^#/ || NF < 4 { next }
        {
            pct = $1 + 0; comm = $2; dso = $3; sym = $4
            gsub(/^ +| +$/, "", comm); gsub(/^ +| +$/, "", dso); gsub(/^ +| +$/, "", sym); sub(/^\[.\] /, "", sym)
            f = file[sym]
            if (comm ~ /^rdk:/) c = "Kafka client threads (fetch, decompression, protocol, their kernel time)"
            else if (dso ~ /librdkafka|libzstd|liblz4|libz[.]/) c = "Kafka client on the worker (poll, records, commit)"
            else if (dso ~ /libsimdjson|libjansson/ || f ~ /src\/core\/(decode|json_fast|number_text|timestamp|utf8)/) c = "decoding"
            else if (f ~ /src\/pg\/copy_text/) c = "COPY text"
            else if (dso ~ /libpq|libssl|libcrypto/ || f ~ /src\/pg\/db[.]/) c = "database client (libpq)"
            else if (f ~ /src\/(core\/batch|worker|pg\/store|pg\/probe|pg\/offsets|core\/app_cache|core\/pipeline|kafka\/)/) c = "batch loop (plan, probe, positions, consumer)"
            else if (dso ~ /kernel/) c = "kernel on the worker (sockets, wake-ups)"
            else if (dso ~ /libc[.]/) c = "libc on the worker (memory, copies)"
            else c = "the rest"
            share[c] += pct; total += pct
        }
        END {
            printf "where the service'"'"'s CPU went (perf, the last round'"'"'s first crawl at the largest size; %.1f us per message in its window):\n", us
            for (c in share) printf "%6.1f%%  %5.2f us  %s\n", share[c], share[c] / 100 * us, c
        }' "$WORK/symbol-files.tsv" - | { read -r head; echo "$head"; sort -rn; } >"$WORK/profile-split.txt"
}

# The replay's PostgreSQL CPU by what its sessions' backends did, from the
# call chains of the samples (PostgreSQL's exported functions; its static ones
# have no symbols in Debian's build), each share also in us per row of the
# window's backend CPU; the same of the probe limit's session, from the
# samples of its pass's window alone (bare_pg's start_ms and end_ms).
pg_profile_split() { # NAME PERF_DATA START_MS END_MS TITLE (START_MS "": every sample)
    local window=()
    [ -z "${3:-}" ] || window=(--time "$(calc %.3f "$3 / 1000"),$(calc %.3f "$4 / 1000")")
    perf script -i "$2" -F ip,sym "${window[@]}" 2>/dev/null |
        awk -v us="${R[$1.backend_us_per_msg]}" -v name="$5" '
        function sample() {
            if (n == 0) return
            if (s ~ / XLogFlush /) c = "COMMIT: the WAL flush"
            else if (s ~ / (CommitTransactionCommand|StartTransactionCommand) /) c = "BEGIN and COMMIT: the rest"
            else if (s ~ / (ExecCheckIndexConstraints|check_exclusion_or_unique_constraint|heap_insert|heap_update|ExecInsertIndexTuples) /) c = "the positions (insert, conflict, update)"
            else if (s ~ / (pg_plan_queries|standard_planner|GetCachedPlan) /) c = "planning"
            else if (s ~ / (raw_parser|parse_analyze_fixedparams|parse_analyze_varparams|pg_analyze_and_rewrite_fixedparams|pg_analyze_and_rewrite_varparams) /) c = "parsing"
            else if (s ~ / (array_in|InputFunctionCall|OidInputFunctionCall) /) c = "parameters (the arrays read)"
            else if (s ~ / (index_getnext_slot|index_getnext_tid|index_fetch_heap|_bt_first|btgettuple) /) c = "execution: index scans (the probe)"
            else if (s ~ / (standard_ExecutorRun|PortalRun|ExecutorStart|standard_ExecutorStart|ExecutorEnd|standard_ExecutorEnd) /) c = "execution: the rest (join, unnest, registry look-ups)"
            else if (s ~ / (pq_getmessage|pq_getbyte|pq_flush|pq_putmessage|secure_read|secure_write|socket_flush|__send|__recv|recv|send|epoll_wait) /) c = "protocol and sockets"
            else c = "the rest"
            share[c]++; total++
            n = 0; s = " "
        }
        BEGIN { s = " " }
        /^$/ { sample(); next }
        { sym = $2; sub(/\+0x[0-9a-f]+$/, "", sym); s = s sym " "; n++ }
        END {
            sample()
            printf "%s (%.1f us of PostgreSQL CPU per row):\n", name, us
            for (c in share) printf "%6.1f%%  %5.2f us  %s\n", 100 * share[c] / total, share[c] / total * us, c
        }' | { read -r head; echo "$head"; sort -rn; }
}

# ---- aggregation ---------------------------------------------------------------

for k in "${!SIZES[@]}"; do
    for p in lcopy lupd lprobe fresh reob replay; do derive "$p$k"; done
    for ((r = 1; r <= ROUNDS; r++)); do
        for w in fresh:lcopy reob:lupd replay:lprobe; do
            R[limit${k}_$r.${w%%:*}]=$(calc %.3f "${R[${w%%:*}${k}_$r.rows_per_s]} / ${R[${w#*:}${k}_$r.rows_per_s]}")
            R[pgcpu${k}_$r.${w%%:*}]=$(calc %.3f "${R[${w%%:*}${k}_$r.backend_us_per_msg]} / ${R[${w#*:}${k}_$r.backend_us_per_msg]}")
        done
    done
done
for ((r = 1; r <= ROUNDS; r++)); do
    for w in floor floorfast; do
        R[${w}_$r.ratio]=$(calc %.3f "${R[fresh${LAST}_$r.cpu_us_per_msg]} / (${R[${w}_$r.cpu_us_per_message]} + ${R[decode_$r.us]})")
    done
done
[ "$PROFILE" = 1 ] && profile_split "fresh${LAST}_$ROUNDS"
[ "$PROFILE" = 1 ] && {
    w=replay${LAST}_$ROUNDS
    pg_profile_split "$w" "$WORK/perf-pg-$w.data" "" "" \
        "where the replay's PostgreSQL CPU went (perf on the service's sessions, the last round at the largest size)"
    echo
    w=lprobe${LAST}_$ROUNDS
    pg_profile_split "$w" "$WORK/perf-pg-lprobe.data" "${R[$w.start_ms]}" "${R[$w.end_ms]}" \
        "and the probe limit's (bare_pg's session during its probe pass, the same round)"
} >"$WORK/pg-profile-split.txt"
m2() { calc %.2f "$(med "$1" "$2")"; } # P KEY: the median, two decimals
m1() { calc %.1f "$(med "$1" "$2")"; }
RSS_ALL=()
for k in "${!SIZES[@]}"; do
    for ((r = 1; r <= ROUNDS; r++)); do RSS_ALL+=("${R[fresh${k}_$r.rss_mb]}" "${R[reob${k}_$r.rss_mb]}" "${R[replay${k}_$r.rss_mb]}"); done
done
PEAK_RSS=$(printf '%s\n' "${RSS_ALL[@]}" | sort -g | tail -1)
N=$LAST
FLOOR_US=$(m2 floor cpu_us_per_message)
FLOOR_FAST_US=$(m2 floorfast cpu_us_per_message)
DECODE_US=$(calc %.3f "$(med decode us)")
SVC_US=$(m2 "fresh$N" cpu_us_per_msg)
REV=$(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown)
DIRTY=$([ -n "$(git -C "$top" status --porcelain --untracked-files=no 2>/dev/null)" ] && echo "+dirty" || true)

# The targets at the largest size, each judged by its median: NAME VALUE OP
# LIMIT SPREAD LABEL per line. A missed target is a finding, not a failure.
TARGETS="scale_fresh_ratio_to_copy_limit $(m2 "limit$N" fresh) >= 0.85 $(spread "limit$N" fresh %.2f) fresh_/_plain_COPY
scale_reobserve_ratio_to_update_limit $(m2 "limit$N" reob) >= 0.85 $(spread "limit$N" reob %.2f) reobserve_/_UPDATE_..._FROM
scale_fresh_pg_cpu_ratio_to_copy $(m2 "pgcpu$N" fresh) <= 1.15 $(spread "pgcpu$N" fresh %.2f) PostgreSQL_CPU/row,_fresh_/_plain_COPY's
scale_reobserve_pg_cpu_ratio_to_update $(m2 "pgcpu$N" reob) <= 1.15 $(spread "pgcpu$N" reob %.2f) PostgreSQL_CPU/row,_reobserve_/_UPDATE's
scale_replay_pg_cpu_ratio_to_probe $(m2 "pgcpu$N" replay) <= 1.3 $(spread "pgcpu$N" replay %.2f) PostgreSQL_CPU/row,_replay_/_the_probe's
service_cpu_ratio_to_floor_plus_decode $(m2 floor ratio) <= 1.5 $(spread floor ratio %.2f) service_CPU/msg_/_(Kafka_floor_+_decoding)
peak_rss_mb $PEAK_RSS <= 64 $(printf '%s\n' "${RSS_ALL[@]}" | sort -g | awk 'NR == 1 { a = $1 } { b = $1 } END { print a "-" b }') peak_RSS_MiB
prefill_reviews ${SIZES[N]} >= 10000000 - reviews_already_in_the_table"

# ---- report --------------------------------------------------------------------

{
printf '\nstorage-consumer at scale  %s%s  %s\n' "$REV" "$DIRTY" "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
printf 'first crawl %d reviews, next crawl %d (avg %d B; zstd; %d partitions), %d apps, batch %d; %d CPUs;\n' \
    "$REVIEWS" "$RECRAWL" "$AVG_BYTES" "$PARTITIONS" "$APPS" "$BATCH" "$NCPU"
printf 'each size: %d rounds on copies of one template, median (spread min-max)\n\n' "$ROUNDS"
printf '%-12s %-10s %-8s %-24s %-24s %-24s\n' "reviews" "app_stats" "db MB" "fresh / COPY" "reobserve / UPDATE" "replay / probe"
for k in "${!SIZES[@]}"; do
    printf '%-12s %-10s %-8s %-24s %-24s %-24s\n' "${SIZES[k]}" "${R[size_$k.stats_rows]}" "${R[size_$k.db_mb]}" \
        "$(m2 "limit$k" fresh) ($(spread "limit$k" fresh %.2f))" "$(m2 "limit$k" reob) ($(spread "limit$k" reob %.2f))" \
        "$(m2 "limit$k" replay) ($(spread "limit$k" replay %.2f))"
done
printf '\n%-12s %-32s %-32s %-32s\n' "PostgreSQL" "fresh: service / COPY" "reobserve: service / UPDATE" "replay: service / probe"
printf '%-12s %-32s %-32s %-32s\n' "us per row" "(x limit)" "(x limit)" "(x limit)"
for k in "${!SIZES[@]}"; do
    printf '%-12s %-32s %-32s %-32s\n' "${SIZES[k]}" \
        "$(m1 "fresh$k" backend_us_per_msg) / $(m1 "lcopy$k" backend_us_per_msg) ($(m2 "pgcpu$k" fresh)x)" \
        "$(m1 "reob$k" backend_us_per_msg) / $(m1 "lupd$k" backend_us_per_msg) ($(m2 "pgcpu$k" reob)x)" \
        "$(m1 "replay$k" backend_us_per_msg) / $(m1 "lprobe$k" backend_us_per_msg) ($(m2 "pgcpu$k" replay)x)"
done
printf '\nrows/s at %s reviews: COPY %s, service fresh %s; UPDATE %s, reobserve %s; probe %s, replay %s\n' "${SIZES[N]}" \
    "$(calc %.0f "$(med "lcopy$N" rows_per_s)")" "$(calc %.0f "$(med "fresh$N" rows_per_s)")" \
    "$(calc %.0f "$(med "lupd$N" rows_per_s)")" "$(calc %.0f "$(med "reob$N" rows_per_s)")" \
    "$(calc %.0f "$(med "lprobe$N" rows_per_s)")" "$(calc %.0f "$(med "replay$N" rows_per_s)")"
printf 'service CPU per message (fresh, whole run) %s us; decoding %s us\n' "$SVC_US" "$DECODE_US"
printf 'Kafka floor paced to the service'"'"'s rate (%s messages/s) %s us (%s): service / (floor + decoding) %s\n' \
    "$(calc %.0f "$(med floor rate)")" "$FLOOR_US" "$(spread floor cpu_us_per_message %.2f)" "$(m2 floor ratio)"
printf 'Kafka floor unpaced (%s messages/s) %s us (%s): service / (floor + decoding) %s\n' \
    "$(calc %.0f "$(med floorfast msgs_per_s)")" "$FLOOR_FAST_US" "$(spread floorfast cpu_us_per_message %.2f)" "$(m2 floorfast ratio)"
printf 'templates made in: %s s\n' "$(for k in "${!SIZES[@]}"; do printf '%s ' "${R[size_$k.prefill_s]}"; done)"
[ ! -s "$WORK/profile-split.txt" ] || { echo; cat "$WORK/profile-split.txt"; }
[ ! -s "$WORK/pg-profile-split.txt" ] || { echo; cat "$WORK/pg-profile-split.txt"; }
print_targets "targets at ${SIZES[N]} reviews (the median)"
printf '\n(%d s in all)\n' $((SECONDS - SECONDS_START))
} | tee "$WORK/table.txt"

curve_json() {
    local k sep=
    for k in "${!SIZES[@]}"; do
        printf '%s\n    {"rows": %s, "app_stats_rows": %s, "database_mb": %s, "fresh_ratio": %s, "reobserve_ratio": %s, "replay_ratio": %s,' \
            "$sep" "${SIZES[k]}" "${R[size_$k.stats_rows]}" "${R[size_$k.db_mb]}" "$(m2 "limit$k" fresh)" "$(m2 "limit$k" reob)" "$(m2 "limit$k" replay)"
        printf '\n     "pg_cpu_us_per_row": {"fresh": %s, "limit_copy": %s, "reobserve": %s, "limit_update": %s, "replay": %s, "limit_probe": %s}}' \
            "$(m1 "fresh$k" backend_us_per_msg)" "$(m1 "lcopy$k" backend_us_per_msg)" "$(m1 "reob$k" backend_us_per_msg)" \
            "$(m1 "lupd$k" backend_us_per_msg)" "$(m1 "replay$k" backend_us_per_msg)" "$(m1 "lprobe$k" backend_us_per_msg)"
        sep=,
    done
}
cat >"$JSON" <<JSON
{
  "revision": "$REV$DIRTY",
  "rounds": $ROUNDS,
  "messages": $REVIEWS,
  "recrawl_messages": $RECRAWL,
  "apps": $APPS,
  "prefill_reviews": ${SIZES[N]},
  "prefill_app_stats": ${R[size_$N.stats_rows]},
  "scale_fresh_ratio_to_copy_limit": $(m2 "limit$N" fresh),
  "scale_reobserve_ratio_to_update_limit": $(m2 "limit$N" reob),
  "scale_replay_ratio_to_probe_limit": $(m2 "limit$N" replay),
  "scale_fresh_pg_cpu_ratio_to_copy": $(m2 "pgcpu$N" fresh),
  "scale_reobserve_pg_cpu_ratio_to_update": $(m2 "pgcpu$N" reob),
  "scale_replay_pg_cpu_ratio_to_probe": $(m2 "pgcpu$N" replay),
  "service_cpu_us_per_message": $SVC_US,
  "consumer_floor_cpu_us_per_message": $FLOOR_US,
  "decode_us_per_message": $DECODE_US,
  "service_cpu_ratio_to_floor_plus_decode": $(m2 floor ratio),
  "consumer_floor_msgs_per_s": $(calc %.0f "$(med floor msgs_per_s)"),
  "consumer_floor_pace_msgs_per_s": $(calc %.0f "$(med floor rate)"),
  "service_msgs_per_s": $(calc %.0f "$(med "fresh$N" msgs_per_s)"),
  "consumer_floor_unpaced_cpu_us_per_message": $FLOOR_FAST_US,
  "consumer_floor_unpaced_msgs_per_s": $(calc %.0f "$(med floorfast msgs_per_s)"),
  "service_cpu_ratio_to_unpaced_floor_plus_decode": $(m2 floorfast ratio),
  "peak_rss_mb": $PEAK_RSS,
  "consumer_floor_cpu_us_per_message_rounds": $(json_list $(over_rounds floor cpu_us_per_message)),
  "consumer_floor_unpaced_cpu_us_per_message_rounds": $(json_list $(over_rounds floorfast cpu_us_per_message)),
  "decode_us_per_message_rounds": $(json_list $(over_rounds decode us)),
  "service_cpu_us_per_message_rounds": $(json_list $(over_rounds "fresh$N" cpu_us_per_msg)),
  "curve": [$(curve_json)
  ],
  "targets": {$(targets_json)
  }
}
JSON
jq . "$JSON" >/dev/null || die "wrote a $JSON that is not JSON"
echo "wrote $JSON" >&2
"$top/bench/charts.sh" --scale "$OUT" || die "bench/charts.sh could not draw the charts"
