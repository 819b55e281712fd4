#!/usr/bin/env bash
# make bench: one command, one run, everything side by side on this machine,
# against one throw-away PostgreSQL and one broker helper, with one data set.
#
#   1. bare PostgreSQL (bench/bare_pg): the same rows, decoded up front, in
#      500-row batches, one transaction each: first the limits PostgreSQL
#      itself sets — plain COPY of the first crawl into the empty table
#      (inserting), the next crawl (every review re-observed an hour later,
#      a third changed, a tenth new) by one UPDATE ... FROM plus COPY of the
#      new (updating), and a probe of its keys and versions (finding nothing
#      changes) — then, on a second new database, the service's first method
#      (COPY into a staging table + INSERT ... SELECT ... ON CONFLICT) on the
#      same three: fresh, reobserve, replay; each series meets the table as
#      the service's phases do (its first pass on a table never written);
#   2. storage-consumer end to end (release build, STORAGE_PIPELINES=reviews):
#      the first crawl, already in the broker, consumed from offset 0 to lag
#      0 (fresh); the next crawl from its own topic (reobserve); the next
#      crawl again under a new group prefix (replay: byte-identical
#      redeliveries, every row skipped);
#   3. latency isolation: the fresh ingest once more with all three pipelines,
#      while bench/latency publishes a network-metrics message every 100 ms
#      and measures publish -> row committed and visible;
#   4. cost: the service's CPU time per message and its peak RSS;
#   5. scale-out: bare PostgreSQL with two connections, the rows split by
#      partition as Kafka splits them (bare_pg --connections 2), then two
#      storage-consumer members of one group against the same backlog, timed
#      from when both own their partitions to the last batch committed
#      (DESIGN.md: Benchmark); the database must then hold exactly the
#      backlog's rows, or the bench fails;
#   6. TLS: the fresh ingest over TCP, plain and with sslmode=verify-full,
#      alternating BENCH_TLS_ROUNDS times.
#
# 1, 2 and 5 run BENCH_ROUNDS times, alternating (bare, service, bare two
# connections, two members, ...), each round on fresh databases; the table
# reports the median, the spread (min-max) and every round, because the
# machine may be shared: it also shows how much CPU everything outside the
# benchmark used during each measurement. Targets are judged by the medians.
#
# Prints a table and writes $BENCH_OUT/bench.json, the per-round data the
# charts read in $BENCH_OUT/bench-data/ and the charts (bench/charts.sh) in
# $BENCH_OUT/bench-charts/; the logs of the run are kept in
# $BENCH_OUT/bench-logs/. Knobs (environment): BENCH_OUT [$BUILD] (where the
# results go; the binaries are always $BUILD's), BENCH_ROUNDS [5], BENCH_REVIEWS
# [200000], BENCH_APPS [10000] (registered apps, the reviews spread over
# them), BENCH_REVIEW_PARTITIONS [6], BENCH_FETCH_WAIT_MAX_MS [10] (phase 3,
# see there), BENCH_IDLE_LATENCY_S [3], BENCH_DEFAULT_FETCH_S [5] (phase 3b),
# BENCH_TIMEOUT_S [240] (per ingest), BENCH_TLS_ROUNDS [2] (phase 6), BENCH_PROFILE [0]: 1 samples the
# service with `perf record` (cpu-clock, call graphs) during the last round's
# fresh and replay ingests and writes where its CPU went, by library and by
# function, to $BUILD/bench-logs/profile-NAME.txt (perf adds its own cost to
# that round's figures).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${BENCH_ROUNDS:-5}
IDLE_S=${BENCH_IDLE_LATENCY_S:-3}
DEFAULT_FETCH_S=${BENCH_DEFAULT_FETCH_S:-5}
PROFILE=${BENCH_PROFILE:-0}
TLS_ROUNDS=${BENCH_TLS_ROUNDS:-2}
declare -A R # results: R[window.key]; windows (each _N: round N) lcopy, lupd, lprobe (the limits), bare,
# barereob, barerep (bare_pg by the staging upsert), fresh, reob, replay (the service), bare2, two, all
. "$top/bench/lib.sh"
LATENCY=$BUILD/bench/latency
LOGS=$OUT/bench-logs
JSON=$OUT/bench.json
DATA=$OUT/bench-data
bench_check bench "$LATENCY" "$AVRO_DECODE"
rm -rf "$DATA" "$OUT/bench-charts"
mkdir -p "$DATA"
bench_workdir storage-bench
PROFILE_WINDOWS="fresh_$ROUNDS reob_$ROUNDS replay_$ROUNDS" # the ingests BENCH_PROFILE=1 samples

bench_start reviews:"$PARTITIONS" reviews-recrawl:"$PARTITIONS" app-stats:3 network-metrics:3
bench_generate

# ---- 0. the decoder alone ----------------------------------------------------
# Every message through the decoder (simdjson, jansson for the unusual) and
# through jansson alone, 3 alternating passes: what the parser change buys,
# measured side by side (docs/DESIGN.md: Two parsers, one outcome).
say "0. decoding alone: the $REVIEWS messages through both readers, 3 alternating passes"
DECODE_LINE=$("$DECODE" "$WORK/reviews.tsv" 3) || die "bench/decode_speed failed: $DECODE_LINE"
DECODE_FAST=$(sed -n 's/.*fast_us=\([0-9.]*\).*/\1/p' <<<"$DECODE_LINE")
DECODE_REF=$(sed -n 's/.*reference_us=\([0-9.]*\).*/\1/p' <<<"$DECODE_LINE")
DECODE_DECLINED=$(sed -n 's/.*declined=\([0-9]*\).*/\1/p' <<<"$DECODE_LINE")
echo "decoding: $DECODE_FAST us per message, jansson alone $DECODE_REF; $DECODE_DECLINED of $REVIEWS left to jansson" >&2
# The same reviews in Avro (the registry's wire format, encoded by avro-c's
# writer): the service's decode against avro-c's read alone (the floor) and
# the JSON path, 3 alternating passes (docs/DESIGN.md: Formats).
AVRO_LINE=$("$AVRO_DECODE" "$WORK/reviews.tsv" 3) || die "bench/avro_speed failed: $AVRO_LINE"
AVRO_US=$(sed -n 's/.*avro_us=\([0-9.]*\).*/\1/p' <<<"$AVRO_LINE")
AVRO_FLOOR=$(sed -n 's/.*floor_us=\([0-9.]*\).*/\1/p' <<<"$AVRO_LINE")
AVRO_JSON=$(sed -n 's/.*json_us=\([0-9.]*\).*/\1/p' <<<"$AVRO_LINE")
echo "decoding Avro: $AVRO_US us per message, avro-c's read alone $AVRO_FLOOR, the JSON path $AVRO_JSON" >&2
LAT_PACKAGE=$(head -1 "$WORK/apps.tsv" | cut -f1)

say "producing the $RECRAWL messages of the next crawl to reviews-recrawl, then the $REVIEWS of the first to reviews (kcat, zstd)"
produce_topic reviews-recrawl "$WORK/recrawl.tsv" "$RECRAWL"
HIGH_RECRAWL=("${HIGH[@]}")
produce_topic reviews "$WORK/reviews.tsv" "$REVIEWS"

# ---- 1. bare PostgreSQL ------------------------------------------------------

CLAUSE_MATCH=1

bare_round() { # ROUND
    local r=$1 series out
    # Each series on a new database: its first pass meets the table as the
    # service's fresh phase does, empty and never written.
    for series in limits upsert; do
        out=$WORK/bare-$series-$r.txt
        fresh_db "bench_bare_${series}_$r"
        "$BARE" "$(db_url "bench_bare_${series}_$r")" "$WORK/reviews.tsv" "$BATCH" --recrawl "$WORK/recrawl.tsv" \
            --passes "$series" >"$out" 2>"$WORK/bare-$series-$r.log" ||
            { cat "$WORK/bare-$series-$r.log" >&2; die "bare_pg --passes $series failed"; }
        cat "$WORK/bare-$series-$r.log" >&2
        grep -q 'conflict_clause_matches_service=1' "$out" || CLAUSE_MATCH=0
        # Dropped, so that no autovacuum of it runs during a later measurement.
        psql_db postgres -c "DROP DATABASE bench_bare_${series}_$r"
    done
    out=$WORK/bare-limits-$r.txt
    bare_parse "$out" limit_copy "lcopy_$r"
    bare_parse "$out" limit_update "lupd_$r"
    bare_parse "$out" limit_probe "lprobe_$r"
    out=$WORK/bare-upsert-$r.txt
    bare_parse "$out" fresh "bare_$r"
    bare_parse "$out" reobserve "barereob_$r"
    bare_parse "$out" replay "barerep_$r"
    local new=$((RECRAWL - REVIEWS)) w
    for w in "lcopy inserted $REVIEWS" "lupd updated $REVIEWS" "lupd inserted $new" "lprobe skipped $RECRAWL" \
        "bare inserted $REVIEWS" "barereob updated $REVIEWS" "barereob inserted $new" "barerep skipped $RECRAWL"; do
        set -- $w
        [ "${R[$1_$r.$2]}" -eq "$3" ] || die "bare_pg's $1 pass $2 ${R[$1_$r.$2]} rows, expected $3"
    done
    echo "bare PostgreSQL: limits: copy ${R[lcopy_$r.rows_per_s]}, update ${R[lupd_$r.rows_per_s]}, probe ${R[lprobe_$r.rows_per_s]} rows/s;" \
        "staging upsert: fresh ${R[bare_$r.rows_per_s]}, reobserve ${R[barereob_$r.rows_per_s]}, replay ${R[barerep_$r.rows_per_s]} rows/s" >&2
}

# ---- 5. scale-out ------------------------------------------------------------


# bare_pg with two connections on a fresh database: the rows of partitions
# 0, 2, 4 on one, 1, 3, 5 on the other, written in parallel.
bare_two_round() { # ROUND
    local r=$1 out=$WORK/bare2-$1.txt
    fresh_db "bench_bare2_$r"
    "$BARE" "$(db_url "bench_bare2_$r")" "$WORK/reviews.tsv" "$BATCH" --connections 2 --partitions "$PARTITIONS" \
        >"$out" 2>"$WORK/bare2-$r.log" || { cat "$WORK/bare2-$r.log" >&2; die "bare_pg --connections 2 failed"; }
    bare_parse "$out" fresh "bare2_$r"
    # Its split must be the broker's: the same count in every partition.
    [ "${R[bare2_$r.partition_rows]}" = "$(IFS=,; echo "${HIGH[*]}")" ] ||
        die "bare_pg --connections 2 split the rows ${R[bare2_$r.partition_rows]} over the partitions, the topic holds $(IFS=,; echo "${HIGH[*]}")"
    [ "${R[bare2_$r.inserted]}" -eq "$REVIEWS" ] || die "bare_pg --connections 2 inserted ${R[bare2_$r.inserted]} rows, expected $REVIEWS"
    settle "bench_bare2_$r"
    echo "bare PostgreSQL, two connections: ${R[bare2_$r.rows_per_s]} rows/s" >&2
}

# "partitions assigned" lines of LOG that gave it partitions: "TIME count=N".
assignments() { # LOG
    [ -f "$1" ] || return 0
    awk '$3 == "[reviews]" && $4 == "partitions" && $5 == "assigned" {
        c = ""; for (i = 6; i <= NF; i++) if ($i ~ /^count=/) c = $i; if (c != "count=0") print $1, c }' "$1"
}

# Two members of one group (the settings of phase 2), started together so
# that the group's first generation gives each its share: the mock's first
# join waits ~3 s for every member, and a member joining later would cost a
# rebalance of a session timeout. Timed from the later of the two
# assignments to the last batch line of either (each batch line follows its
# COMMIT and Kafka commit: the whole backlog is in the database then).
two_member_round() { # ROUND
    local r=$1 db=bench_two_$1 w=two_$1 a b deadline rows distinct n t0 t1 m
    fresh_db "$db"
    psql_db postgres -c CHECKPOINT
    start_service "${w}a" "$db" reviews "bench-two-$r"
    SERVICE2_PID=$SERVICE_PID
    start_service "${w}b" "$db" reviews "bench-two-$r"
    a=$WORK/service-${w}a.log b=$WORK/service-${w}b.log
    deadline=$((SECONDS + TIMEOUT_S))
    # Both members alive and the deadline ahead, or the bench fails.
    members_ok() { # WHAT
        for m in "$SERVICE_PID" "$SERVICE2_PID"; do
            kill -0 "$m" 2>/dev/null || { tail -20 "$a" "$b" >&2; die "a storage-consumer member ($w) exited early"; }
        done
        [ $SECONDS -lt $deadline ] || die "the two members ($w) did not $1 within $TIMEOUT_S s"
    }
    until [ -n "$(assignments "$a")" ] && [ -n "$(assignments "$b")" ]; do
        members_ok "both get partitions"
        sleep 0.02
    done
    snapshot "$w" 0
    until [ $(( $(consumed "$a") + $(consumed "$b") )) -ge "$REVIEWS" ]; do
        members_ok "reach lag 0"
        sleep 0.05
    done
    snapshot "$w" 1
    # One generation: each member assigned once, never revoked before the end.
    for m in "$a" "$b"; do
        n=$(assignments "$m" | wc -l)
        [ "$n" -eq 1 ] && ! grep -q '\[reviews\] partitions revoked' "$m" ||
            die "the group rebalanced during the two-member measurement ($m: $n assignments): not a steady two-member figure"
    done
    check_committed "bench-two-$r.reviews"
    R[$w.rss_mb]=$(printf '%s\n' "$(status_kb "$SERVICE_PID" VmHWM)" "$(status_kb "$SERVICE2_PID" VmHWM)" |
        sort -g | tail -1 | awk '{ printf "%.1f", $1 / 1024 }') # the larger member's peak
    R[$w.svc_ticks_total]=$(( $(proc_ticks "$SERVICE_PID") + $(proc_ticks "$SERVICE2_PID") ))
    R[$w.backend_ticks]=0
    R[$w.assigned]="$(assignments "$a" | sed 's/.*count=//') + $(assignments "$b" | sed 's/.*count=//')"
    for m in "$SERVICE_PID" "$SERVICE2_PID"; do
        kill -TERM "$m"
        wait "$m" || die "a storage-consumer member ($w) exited with $? after SIGTERM"
    done
    SERVICE_PID= SERVICE2_PID=
    # Exactly the backlog in the database: none lost, none twice.
    read -r rows distinct <<<"$(psql_db "$db" -At -F' ' -c "SELECT count(*), count(DISTINCT review_id) FROM reviews")"
    [ "$rows" -eq "$REVIEWS" ] && [ "$distinct" -eq "$REVIEWS" ] ||
        die "after two members the reviews table holds $rows rows ($distinct distinct review ids), expected exactly $REVIEWS"
    # The window: both logs' batch lines, by end time.
    { batch_lines "$a" reviews; batch_lines "$b" reviews; } | sort -k9,9 >"$WORK/service-$w.batches"
    t0=$(date -u -d "$(assignments "$a" | cut -d' ' -f1)" +%s%3N)
    t1=$(date -u -d "$(assignments "$b" | cut -d' ' -f1)" +%s%3N)
    [ "$t1" -gt "$t0" ] && t0=$t1
    analyse_lines "$w" "$WORK/service-$w.batches" "$t0"
    [ "${R[$w.inserted]}" -eq "$REVIEWS" ] && [ "${R[$w.messages]}" -eq "$REVIEWS" ] ||
        die "the two members consumed ${R[$w.messages]} messages and inserted ${R[$w.inserted]} rows, expected $REVIEWS each"
    settle "$db"
    echo "storage-consumer, two members: ${R[$w.rows_per_s]} rows/s (partitions assigned: ${R[$w.assigned]})" >&2
}

# ---- 2. storage-consumer -----------------------------------------------------


for ((r = 1; r <= ROUNDS; r++)); do
    say "round $r/$ROUNDS, 1. bare PostgreSQL: decode up front (untimed), then batches of $BATCH: the limits, then the staging upsert"
    bare_round "$r"
    say "round $r/$ROUNDS, 2. storage-consumer (STORAGE_PIPELINES=reviews) from offset 0 to lag 0: fresh, the next crawl, its replay"
    fresh_db "bench_svc_$r"
    service_round "$r" "bench_svc_$r"
    say "round $r/$ROUNDS, 5. bare PostgreSQL, two connections (the rows split by partition), fresh"
    bare_two_round "$r"
    say "round $r/$ROUNDS, 5. storage-consumer, two members of one group, from offset 0 to the whole backlog committed"
    two_member_round "$r"
done

# ---- 3. latency isolation ------------------------------------------------------

# The mock broker answers an empty Fetch only after the full fetch.wait.max.ms
# (librdkafka's default 500 ms), even when a message arrives meanwhile; a real
# broker answers as soon as data is there. That alone puts ~400-500 ms on
# every network-metrics message, whatever the service does. Phase 3 therefore
# runs with fetch.wait.max.ms=$FETCH_WAIT (BENCH_FETCH_WAIT_MAX_MS; empty: the
# default), which brings the mock close to a real broker; phase 3b measures
# the idle latency with the default, to show the mock's share.
FETCH_WAIT=${BENCH_FETCH_WAIT_MAX_MS-10}
say "3. latency: the fresh ingest again with all pipelines (fetch.wait.max.ms=${FETCH_WAIT:-default}), a network-metrics message every 100 ms"
fresh_db bench_lat
"$LATENCY" "$BOOTSTRAP" "$(db_url bench_lat)" "$LAT_PACKAGE" >"$WORK/latency.txt" 2>"$WORK/latency.log" &
LATENCY_PID=$!
sleep 0.3 # its first message waits for the service's assignment: published before the window, not counted
ingest all bench_lat app-stats,reviews,network-metrics bench-all "$FETCH_WAIT"
sleep "$IDLE_S" # idle samples: the same path without the reviews load
kill -TERM "$LATENCY_PID"
wait "$LATENCY_PID" || die "the latency tool failed: $(cat "$WORK/latency.log")"
LATENCY_PID=
check_committed bench-all.reviews
stop_service all bench_lat
analyse all

# "n p50 p99 max" of the latencies (column 2, ms) published in [FROM, TO] ms.
lat_stats() { # FILE FROM_MS TO_MS
    awk -v a="$2" -v b="$3" '$1 >= a && $1 <= b && $2 >= 0 { print $2 }' "$1" | sort -g |
        awk '{ v[++n] = $1 } END { if (n == 0) { print "0 - - -"; exit }
            k = int(0.99 * n) + 1; if (k > n) k = n
            printf "%d %.1f %.1f %.1f\n", n, v[int(0.5 * n) + 1], v[k], v[n] }'
}
TIMEOUTS=$(awk '$2 < 0' "$WORK/latency.txt" | wc -l)
read -r LN LP50 LP99 LMAX <<<"$(lat_stats "$WORK/latency.txt" "${R[all.start_ms]}" "${R[all.end_ms]}")"
read -r IN IP50 IP99 IMAX <<<"$(lat_stats "$WORK/latency.txt" "$(calc %.0f "${R[all.end_ms]} + 500")" 9e15)"
[ "$LN" -gt 0 ] || die "no network-metrics sample fell inside the reviews ingest window"
NM_ROWS=$(psql_db bench_lat -At -c "SELECT count(*) FROM network_metrics")

say "3b. idle network-metrics latency with librdkafka's default fetch.wait.max.ms (the mock's share)"
start_service nmdefault bench_lat network-metrics bench-nmdefault
"$LATENCY" "$BOOTSTRAP" "$(db_url bench_lat)" "$LAT_PACKAGE" >"$WORK/latency-default.txt" 2>"$WORK/latency-default.log" &
LATENCY_PID=$!
deadline=$((SECONDS + 60))
until [ -s "$WORK/latency-default.txt" ]; do # the first message waits for the group's assignment
    [ $SECONDS -lt $deadline ] || die "no network-metrics message became visible within 60 s (3b)"
    sleep 0.1
done
FIRST_DONE=$(calc %.0f "$(date +%s%N) / 1e6")
sleep "$DEFAULT_FETCH_S"
kill -TERM "$LATENCY_PID"
wait "$LATENCY_PID" || die "the latency tool failed: $(cat "$WORK/latency-default.log")"
LATENCY_PID=
stop_service nmdefault bench_lat
read -r DN DP50 DP99 DMAX <<<"$(lat_stats "$WORK/latency-default.txt" "$FIRST_DONE" 9e15)"

# ---- 6. TLS ---------------------------------------------------------------------
# The fresh ingest over TCP to 127.0.0.1, plain and over TLS (sslmode=verify-full,
# a CA and a server certificate made here), alternating: what TLS costs the
# service end to end.
say "6. TLS: the fresh ingest over TCP, plain then with sslmode=verify-full, $TLS_ROUNDS rounds"
CERTS=$WORK/certs
mkdir -p "$CERTS"
. "$top/tests/support/certs.sh"
make_cert ca "storage-consumer bench CA" self 2
make_cert server localhost ca 2 "DNS:localhost,IP:127.0.0.1"
serve_cert "$DB" "$WORK/pg" server
PG_PORT=$(cat "$WORK/pg/port")
tcp_url() { echo "host=127.0.0.1 port=$PG_PORT dbname=$1 user=postgres sslmode=disable"; }
tls_url() { echo "host=localhost port=$PG_PORT dbname=$1 user=postgres sslmode=verify-full sslrootcert=$CERTS/ca.crt"; }
for ((r = 1; r <= TLS_ROUNDS; r++)); do
    for w in tcp tls; do
        fresh_db "bench_${w}_$r"
        URL_OF=${w}_url
        ingest "${w}_$r" "bench_${w}_$r" reviews "bench-$w-$r"
        # Every session of the service is what the round says it is.
        [ "$(psql_db "bench_${w}_$r" -At -c "SELECT string_agg(DISTINCT s.ssl::text, ',') FROM pg_stat_ssl s
            JOIN pg_stat_activity a USING (pid) WHERE a.application_name = 'storage-consumer'")" = \
            "$([ $w = tls ] && echo true || echo false)" ] || die "the service's sessions in the $w round are not all ${w^^}"
        check_committed "bench-$w-$r.reviews"
        stop_service "${w}_$r" "bench_${w}_$r"
        analyse "${w}_$r"
        psql_db postgres -c "DROP DATABASE bench_${w}_$r"
    done
    R[ratio_$r.tls]=$(calc %.3f "${R[tls_$r.rows_per_s]} / ${R[tcp_$r.rows_per_s]}")
    echo "storage-consumer over TCP: plain ${R[tcp_$r.rows_per_s]}, TLS ${R[tls_$r.rows_per_s]} rows/s" >&2
done
URL_OF=db_url

# ---- aggregation ---------------------------------------------------------------

for p in lcopy lupd lprobe bare barereob barerep fresh reob replay bare2 two; do derive $p; done
for ((r = 1; r <= ROUNDS; r++)); do
    # The production mix against PostgreSQL's own limits: rows/s, and its
    # backend CPU per row (the service's sessions over their whole run).
    for w in fresh:lcopy reob:lupd replay:lprobe; do
        R[limit_$r.${w%%:*}]=$(calc %.3f "${R[${w%%:*}_$r.rows_per_s]} / ${R[${w#*:}_$r.rows_per_s]}")
        R[pgcpu_$r.${w%%:*}]=$(calc %.3f "${R[${w%%:*}_$r.backend_us_per_msg]} / ${R[${w#*:}_$r.backend_us_per_msg]}")
    done
    R[ratio_$r.fresh]=$(calc %.3f "${R[fresh_$r.rows_per_s]} / ${R[bare_$r.rows_per_s]}")
    R[ratio_$r.replay]=$(calc %.3f "${R[replay_$r.rows_per_s]} / ${R[barerep_$r.rows_per_s]}")
    R[ratio_$r.two]=$(calc %.3f "${R[two_$r.rows_per_s]} / ${R[bare2_$r.rows_per_s]}")
    R[ratio_$r.two_to_one]=$(calc %.3f "${R[two_$r.rows_per_s]} / ${R[fresh_$r.rows_per_s]}")
done

TLS_RATIO=$(calc %.2f "$(median $(over_rounds ratio tls "$TLS_ROUNDS"))")

BARE_FRESH=$(calc %.0f "$(med bare rows_per_s)")
BARE_REOB=$(calc %.0f "$(med barereob rows_per_s)")
LIMIT_COPY=$(calc %.0f "$(med lcopy rows_per_s)")
LIMIT_UPDATE=$(calc %.0f "$(med lupd rows_per_s)")
LIMIT_PROBE=$(calc %.0f "$(med lprobe rows_per_s)")
SVC_REOB=$(calc %.0f "$(med reob rows_per_s)")
TO_COPY=$(calc %.2f "$(med limit fresh)")
TO_UPDATE=$(calc %.2f "$(med limit reob)")
TO_PROBE=$(calc %.2f "$(med limit replay)")
# PostgreSQL backend CPU us per row: the service's phase, its limit's.
pg_row() { calc %.1f "$(med "$1" backend_us_per_msg)"; } # P
BARE_REPLAY=$(calc %.0f "$(med barerep rows_per_s)")
BARE_TWO=$(calc %.0f "$(med bare2 rows_per_s)")
SVC_FRESH=$(calc %.0f "$(med fresh rows_per_s)")
SVC_REPLAY=$(calc %.0f "$(med replay rows_per_s)")
SVC_TWO=$(calc %.0f "$(med two rows_per_s)")
RATIO_FRESH=$(calc %.2f "$SVC_FRESH / $BARE_FRESH")
RATIO_REPLAY=$(calc %.2f "$SVC_REPLAY / $BARE_REPLAY")
RATIO_TWO=$(calc %.2f "$SVC_TWO / $BARE_TWO")
RATIO_TWO_TO_ONE=$(calc %.2f "$SVC_TWO / $SVC_FRESH")
RATIO_ALL=$(calc %.2f "${R[all.rows_per_s]} / $BARE_FRESH")
RSS_ALL=()
for ((r = 1; r <= ROUNDS; r++)); do RSS_ALL+=("${R[fresh_$r.rss_mb]}" "${R[reob_$r.rss_mb]}" "${R[replay_$r.rss_mb]}" "${R[two_$r.rss_mb]}"); done
RSS_ALL+=("${R[all.rss_mb]}")
PEAK_RSS=$(printf '%s\n' "${RSS_ALL[@]}" | sort -g | tail -1)
CPU_FRESH=$(med fresh cpu_us_per_msg)
CPU_REPLAY=$(med replay cpu_us_per_msg)
CPU_RATIO=$(med_ratio fresh)
REV=$(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown)
DIRTY=$([ -n "$(git -C "$top" status --porcelain --untracked-files=no 2>/dev/null)" ] && echo "+dirty" || true)

# The targets (DESIGN.md: Benchmark), each judged by its median: NAME VALUE
# OP LIMIT SPREAD LABEL per line. A missed target is a finding, not a failure
# of the bench.
TARGETS="reviews_ratio_to_bare_pg $RATIO_FRESH >= 0.95 $(spread ratio fresh %.2f) fresh_reviews_/_bare_PostgreSQL
replay_ratio_to_bare_pg $RATIO_REPLAY >= 0.8 $(spread ratio replay %.2f) replay_/_bare_PostgreSQL_replay
cpu_ratio_to_postgres $CPU_RATIO <= 0.15 $(spread fresh cpu_ratio %.2f) service_CPU/msg_/_PostgreSQL_CPU/row,_fresh
fresh_ratio_to_copy_limit $TO_COPY >= 0.9 $(spread limit fresh %.2f) fresh_/_plain_COPY_(the_insert_limit)
reobserve_ratio_to_update_limit $TO_UPDATE >= 0.9 $(spread limit reob %.2f) reobserve_/_UPDATE_..._FROM_(the_update_limit)
replay_ratio_to_probe_limit $TO_PROBE >= 0.8 $(spread limit replay %.2f) replay_/_the_key_and_version_probe
pg_cpu_ratio_fresh $(calc %.2f "$(med pgcpu fresh)") <= 1.15 $(spread pgcpu fresh %.2f) PostgreSQL_CPU/row,_fresh_/_plain_COPY's
pg_cpu_ratio_reobserve $(calc %.2f "$(med pgcpu reob)") <= 1.15 $(spread pgcpu reob %.2f) PostgreSQL_CPU/row,_reobserve_/_UPDATE_..._FROM's
pg_cpu_ratio_replay $(calc %.2f "$(med pgcpu replay)") <= 1.15 $(spread pgcpu replay %.2f) PostgreSQL_CPU/row,_replay_/_the_probe's
two_member_ratio_to_bare_pg $RATIO_TWO >= 0.85 $(spread ratio two %.2f) two_members_/_bare_PostgreSQL_two_connections
network_metrics_p99_ms $LP99 <= 25 - network-metrics_p99_ms_during_the_ingest_(once)
peak_rss_mb $PEAK_RSS <= 64 $(printf '%s\n' "${RSS_ALL[@]}" | sort -g | awk 'NR == 1 { a = $1 } { b = $1 } END { print a "-" b }') peak_RSS_MiB_(the_largest_of_every_ingest)
apps $APPS >= 10000 - registered_apps"

# Autovacuum runs that ended inside a measured window (PostgreSQL keeps only
# the last one per table: a hint, not an audit; the apps table's
# autoanalyze is left out).
WINDOWS=
for ((r = 1; r <= ROUNDS; r++)); do
    for w in lcopy_$r lupd_$r lprobe_$r bare_$r barereob_$r barerep_$r fresh_$r reob_$r replay_$r bare2_$r two_$r; do
        WINDOWS="$WINDOWS $w:${R[$w.start_ms]}:${R[$w.end_ms]}"
    done
done
WINDOWS="$WINDOWS all:${R[all.start_ms]}:${R[all.end_ms]}"
AUTOVAC=
for d in $(psql_db postgres -At -c "SELECT datname FROM pg_database WHERE datname LIKE 'bench%'"); do
    while IFS='|' read -r what table at; do
        [ -n "$at" ] || continue
        for w in $WINDOWS; do
            IFS=: read -r wn ws we <<<"$w"
            if awk -v t="$at" -v a="$ws" -v b="$we" 'BEGIN { exit !(t >= a && t <= b) }'; then
                AUTOVAC="$AUTOVAC $what of $d.$table during $wn;"
            fi
        done
    done < <(psql_db "$d" -At -c "SELECT 'autovacuum', relname, (extract(epoch FROM last_autovacuum) * 1000)::bigint FROM pg_stat_user_tables
                                  WHERE relname <> 'apps_registry_application' UNION ALL SELECT 'autoanalyze', relname, (extract(epoch FROM last_autoanalyze) * 1000)::bigint FROM pg_stat_user_tables
                                  WHERE relname <> 'apps_registry_application'")
done

# ---- report ------------------------------------------------------------------

rounds_of() { # P KEY [FMT]
    local r out=
    for ((r = 1; r <= ROUNDS; r++)); do out="$out $(calc "${3:-%.0f}" "${R[$1_$r.$2]}")"; done
    echo "${out# }"
}
row() { # LABEL P RATIO
    printf '%-42s %8s %-15s %6s  %-34s %13s %7s%%\n' "$1" "$(calc %.0f "$(med "$2" rows_per_s)")" "$(spread "$2" rows_per_s %.0f)" \
        "$3" "$(rounds_of "$2" rows_per_s)" \
        "$(calc %.1f "$(med "$2" batch_ms_p50)")/$(calc %.1f "$(med "$2" batch_ms_p99)")" "$(med_other "$2")"
}
cost() { # LABEL KEY: median (spread) of KEY in each window prefix
    printf '%-42s %17s %17s %17s %17s %17s\n' "$1" "$(med_spread bare "$2" %.1f)" "$(med_spread fresh "$2" %.1f)" \
        "$(med_spread barerep "$2" %.1f)" "$(med_spread replay "$2" %.1f)" "$(med_spread two "$2" %.1f)"
}

{
printf '\nstorage-consumer benchmark  %s%s  %s\n' "$REV" "$DIRTY" "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
printf '%d reviews (avg %d B; zstd; reviews topic %d partitions), %d apps, batch %d; PostgreSQL 15, fsync on,\n' \
    "$REVIEWS" "$AVG_BYTES" "$PARTITIONS" "$APPS" "$BATCH"
printf 'synchronous_commit on; %d CPUs; 1, 2 and 5 alternate over %d rounds (fresh databases each), median and spread (min-max) shown\n\n' "$NCPU" "$ROUNDS"
printf '%-42s %8s %-15s %6s  %-34s %13s %8s\n' "throughput" "rows/s" "spread" "x bare" "rounds" "batch ms" "others"
row "1. bare PostgreSQL, fresh" bare 1.00
row "2. storage-consumer, fresh (reviews only)" fresh "$RATIO_FRESH"
row "1. bare PostgreSQL, reobserve" barereob 1.00
row "2. storage-consumer, reobserve" reob "$(calc %.2f "$SVC_REOB / $BARE_REOB")"
row "1. bare PostgreSQL, replay (all skipped)" barerep 1.00
row "2. storage-consumer, replay (all skipped)" replay "$RATIO_REPLAY"
row "5. bare PostgreSQL, two connections, fresh" bare2 1.00
row "5. storage-consumer, two members, fresh" two "$RATIO_TWO"
printf '%-42s %8s %-15s %6s  %-34s %13s %7s%%\n' "3. storage-consumer, fresh, all pipelines" "${R[all.rows_per_s]}" "-" "$RATIO_ALL" "(once)" \
    "$(calc %.1f "${R[all.batch_ms_p50]}")/$(calc %.1f "${R[all.batch_ms_p99]}")" "$(calc %.0f "100 * ${R[all.other_cpu_s]} / (${R[all.window_s]} * $NCPU)")"
printf '\n%-42s %8s %-15s %6s  %-34s %13s %8s\n' "the limits PostgreSQL sets" "rows/s" "spread" "x limit" "rounds" "batch ms" "others"
row "1. limit: plain COPY, first crawl" lcopy 1.00
row "2. storage-consumer, fresh" fresh "$TO_COPY"
row "1. limit: UPDATE ... FROM + COPY, next crawl" lupd 1.00
row "2. storage-consumer, reobserve" reob "$TO_UPDATE"
row "1. limit: probe keys+versions, next crawl" lprobe 1.00
row "2. storage-consumer, replay" replay "$TO_PROBE"
printf '   PostgreSQL backend CPU us per row, limit / staging upsert / service: fresh %s / %s / %s; reobserve %s / %s / %s;\n' \
    "$(pg_row lcopy)" "$(pg_row bare)" "$(pg_row fresh)" "$(pg_row lupd)" "$(pg_row barereob)" "$(pg_row reob)"
printf '   replay %s / %s / %s; %s of the replay'"'"'s %s rows found stored by the probe (round 1)\n' \
    "$(pg_row lprobe)" "$(pg_row barerep)" "$(pg_row replay)" "${R[replay_1.skipped_by_probe]}" "$RECRAWL"
printf '   (the next crawl: %d messages, every review of the first again an hour later, a third changed, a tenth new)\n\n' "$RECRAWL"
printf '6. fresh over TCP, TLS (sslmode=verify-full) / plain: %s (median of %d alternating rounds: %s)\n\n' "$TLS_RATIO" "$TLS_ROUNDS" \
    "$(for ((r = 1; r <= TLS_ROUNDS; r++)); do printf '%s/%s ' "$(calc %.0f "${R[tls_$r.rows_per_s]}")" "$(calc %.0f "${R[tcp_$r.rows_per_s]}")"; done)"
printf '   ratio to bare per round: fresh %s; replay %s; two members %s\n' "$(rounds_of ratio fresh %.2f)" \
    "$(rounds_of ratio replay %.2f)" "$(rounds_of ratio two %.2f)"
printf '   two members / one member: %s (median of the rows/s; rounds %s)\n' "$RATIO_TWO_TO_ONE" "$(rounds_of ratio two_to_one %.2f)"
printf '   two members: timed from when both own partitions (one generation; round 1: %s partitions) to the last batch committed\n' \
    "${R[two_1.assigned]}"
printf '   service time inside batches (sum of duration_ms / window; the rest is waiting in poll): fresh %s%%, replay %s%%\n' \
    "$(med fresh busy_pct)" "$(med replay busy_pct)"
printf '   batch ms = p50/p99 per batch: service = its log'"'"'s duration_ms (decode .. Kafka commit), bare = BEGIN .. COMMIT;\n'
printf '   others = CPU used by everything outside the benchmark during the window, share of the machine\n\n'

printf '0. decoding alone, us per message (median of 3 passes): %s; jansson alone %s (%s x); %s of the messages left to jansson\n\n' \
    "$DECODE_FAST" "$DECODE_REF" "$(calc %.1f "$DECODE_REF / $DECODE_FAST")" "$DECODE_DECLINED"
printf '0. decoding Avro, us per message (median of 3 passes): %s; avro-c reading into its generic value alone %s (%s x); the JSON path %s\n\n' \
    "$AVRO_US" "$AVRO_FLOOR" "$(calc %.1f "$AVRO_US / $AVRO_FLOOR")" "$AVRO_JSON"

printf '%-42s %7s %7s %7s %8s\n' "network-metrics publish -> visible" "p50 ms" "p99 ms" "max ms" "samples"
printf '%-42s %7s %7s %7s %8s\n' "3. during the all-pipelines ingest" "$LP50" "$LP99" "$LMAX" "$LN"
printf '%-42s %7s %7s %7s %8s\n' "   idle, after lag 0" "$IP50" "$IP99" "$IMAX" "$IN"
printf '%-42s %7s %7s %7s %8s\n' "3b. idle, fetch.wait.max.ms 500 (default)" "$DP50" "$DP99" "$DMAX" "$DN"
printf '   (3 runs with fetch.wait.max.ms=%s: the mock answers an empty fetch only after that wait, see 3b and\n' "${FETCH_WAIT:-default}"
printf '   bench/run.sh; %s timed out; %s network_metrics rows stored)\n\n' "$TIMEOUTS" "$NM_ROWS"

printf '%-42s %17s %17s %17s %17s %17s\n' "4. cost, CPU us per message, median (spread)" "bare" "svc" "bare rep" "svc rep" "svc 2 members"
cost "client: bare_pg / storage-consumer" client_us
cost "postgres, whole cluster" pg_us
printf '%-42s %17s %17s %17s %17s %17s\n' "broker helper" "-" "$(med_spread fresh broker_us %.1f)" "-" \
    "$(med_spread replay broker_us %.1f)" "$(med_spread two broker_us %.1f)"
printf '%-42s %17s %17s %17s %17s %17s\n' "storage-consumer, whole run (utime+stime)" "-" "$(med_spread fresh cpu_us_per_msg %.1f)" "-" \
    "$(med_spread replay cpu_us_per_msg %.1f)" "$(med_spread two cpu_us_per_msg %.1f)"
printf '%-42s %17s %17s %17s %17s %17s\n' "client CPU / postgres CPU (same window)" "$(med_spread bare cpu_ratio %.2f)" \
    "$(med_spread fresh cpu_ratio %.2f)" "$(med_spread barerep cpu_ratio %.2f)" "$(med_spread replay cpu_ratio %.2f)" "$(med_spread two cpu_ratio %.2f)"
printf '%-42s %17s %17s %17s %17s %17s\n' "storage-consumer peak RSS MiB (VmHWM)" "-" "$(med_spread fresh rss_mb %.1f)" "-" \
    "$(med_spread replay rss_mb %.1f)" "$(med_spread two rss_mb %.1f)"
printf '   all pipelines (once): client %s, postgres %s, broker %s, storage-consumer whole run %s us per message; RSS %s MiB\n' \
    "$(calc %.1f "${R[all.svc_cpu_s]} * 1e6 / $REVIEWS")" "$(calc %.1f "${R[all.pg_cpu_s]} * 1e6 / $REVIEWS")" \
    "$(calc %.1f "${R[all.broker_cpu_s]} * 1e6 / $REVIEWS")" "${R[all.cpu_us_per_msg]}" "${R[all.rss_mb]}"
printf '   (client and postgres: first batch to lag 0, two members: both assigned to the last batch; "all" includes the\n'
printf '   latency tool'"'"'s 500 queries/s; two members: both processes, RSS of the larger;\n'
printf '   storage-consumer threads, round 1 fresh, whole run, s: %s)\n' "${R[fresh_1.thread_cpu]}"
[ -z "$AUTOVAC" ] || printf 'NOTE: autovacuum finished inside a measured window:%s\n' "$AUTOVAC"
[ "$CLAUSE_MATCH" = 1 ] || printf 'WARNING: the service'"'"'s reviews conflict clause differs from the baseline'"'"'s (see bare-*.log)\n'

print_targets "targets (judged by the median)"
} | tee "$WORK/table.txt"

cat >"$JSON" <<JSON
{
  "revision": "$REV$DIRTY",
  "rounds": $ROUNDS,
  "messages": $REVIEWS,
  "message_avg_bytes": $AVG_BYTES,
  "review_partitions": $PARTITIONS,
  "batch_size": $BATCH,
  "bare_pg_rows_per_s": $BARE_FRESH,
  "bare_pg_replay_rows_per_s": $BARE_REPLAY,
  "reviews_rows_per_s": $SVC_FRESH,
  "reviews_ratio_to_bare_pg": $RATIO_FRESH,
  "recrawl_messages": $RECRAWL,
  "reobserve_rows_per_s": $SVC_REOB,
  "tcp_rows_per_s": $(calc %.0f "$(median $(over_rounds tcp rows_per_s "$TLS_ROUNDS"))"),
  "tls_rows_per_s": $(calc %.0f "$(median $(over_rounds tls rows_per_s "$TLS_ROUNDS"))"),
  "tls_ratio_to_plain": $TLS_RATIO,
  "bare_pg_reobserve_rows_per_s": $BARE_REOB,
  "limit_copy_rows_per_s": $LIMIT_COPY,
  "limit_update_rows_per_s": $LIMIT_UPDATE,
  "limit_probe_rows_per_s": $LIMIT_PROBE,
  "fresh_ratio_to_copy_limit": $TO_COPY,
  "reobserve_ratio_to_update_limit": $TO_UPDATE,
  "replay_ratio_to_probe_limit": $TO_PROBE,
  "pg_cpu_us_per_row_fresh": $(pg_row fresh),
  "pg_cpu_us_per_row_reobserve": $(pg_row reob),
  "pg_cpu_us_per_row_replay": $(pg_row replay),
  "pg_cpu_us_per_row_limit_copy": $(pg_row lcopy),
  "pg_cpu_us_per_row_limit_update": $(pg_row lupd),
  "pg_cpu_us_per_row_limit_probe": $(pg_row lprobe),
  "pg_cpu_us_per_row_bare_pg_fresh": $(pg_row bare),
  "pg_cpu_us_per_row_bare_pg_reobserve": $(pg_row barereob),
  "pg_cpu_us_per_row_bare_pg_replay": $(pg_row barerep),
  "replay_rows_skipped_by_probe_round1": ${R[replay_1.skipped_by_probe]},
  "fresh_rows_inserted_by_copy_round1": ${R[fresh_1.inserted_by_copy]},
  "replay_rows_per_s": $SVC_REPLAY,
  "replay_ratio_to_bare_pg": $RATIO_REPLAY,
  "bare_pg_two_conn_rows_per_s": $BARE_TWO,
  "two_member_rows_per_s": $SVC_TWO,
  "two_member_ratio_to_bare_pg": $RATIO_TWO,
  "two_member_ratio_to_one_member": $RATIO_TWO_TO_ONE,
  "all_pipelines_reviews_rows_per_s": ${R[all.rows_per_s]},
  "network_metrics_p50_ms": $LP50,
  "network_metrics_p99_ms": $LP99,
  "network_metrics_max_ms": $LMAX,
  "network_metrics_samples": $LN,
  "network_metrics_timeouts": $TIMEOUTS,
  "network_metrics_fetch_wait_max_ms": ${FETCH_WAIT:-null},
  "network_metrics_idle_p50_ms": ${IP50/-/null},
  "network_metrics_idle_p50_ms_default_fetch_wait": ${DP50/-/null},
  "cpu_us_per_message": $CPU_FRESH,
  "cpu_us_per_message_replay": $CPU_REPLAY,
  "cpu_us_per_message_two_members": $(med two cpu_us_per_msg),
  "cpu_us_per_message_all_pipelines": ${R[all.cpu_us_per_msg]},
  "cpu_ratio_to_postgres": $CPU_RATIO,
  "apps": $APPS,
  "decode_us_per_message": $DECODE_FAST,
  "decode_us_per_message_jansson_alone": $DECODE_REF,
  "decode_messages_left_to_jansson": $DECODE_DECLINED,
  "decode_avro_us_per_message": $AVRO_US,
  "decode_avro_floor_us_per_message": $AVRO_FLOOR,
  "decode_avro_json_path_us_per_message": $AVRO_JSON,
  "peak_rss_mb": $PEAK_RSS,
  "bare_pg_batch_ms_p50": $(med bare batch_ms_p50),
  "reviews_batch_ms_p50": $(med fresh batch_ms_p50),
  "bare_pg_replay_batch_ms_p50": $(med barerep batch_ms_p50),
  "replay_batch_ms_p50": $(med replay batch_ms_p50),
  "postgres_cpu_us_per_row_bare": $(med_us bare pg_us),
  "postgres_cpu_us_per_row_reviews": $(med_us fresh pg_us),
  "bare_pg_rows_per_s_rounds": $(json_list $(rounds_of bare rows_per_s)),
  "reviews_rows_per_s_rounds": $(json_list $(rounds_of fresh rows_per_s)),
  "reobserve_rows_per_s_rounds": $(json_list $(rounds_of reob rows_per_s)),
  "limit_copy_rows_per_s_rounds": $(json_list $(rounds_of lcopy rows_per_s)),
  "limit_update_rows_per_s_rounds": $(json_list $(rounds_of lupd rows_per_s)),
  "limit_probe_rows_per_s_rounds": $(json_list $(rounds_of lprobe rows_per_s)),
  "bare_pg_replay_rows_per_s_rounds": $(json_list $(rounds_of barerep rows_per_s)),
  "replay_rows_per_s_rounds": $(json_list $(rounds_of replay rows_per_s)),
  "bare_pg_two_conn_rows_per_s_rounds": $(json_list $(rounds_of bare2 rows_per_s)),
  "two_member_rows_per_s_rounds": $(json_list $(rounds_of two rows_per_s)),
  "other_load_pct_bare": $(med_other bare),
  "other_load_pct_reviews": $(med_other fresh),
  "conflict_clause_matches_service": $([ "$CLAUSE_MATCH" = 1 ] && echo true || echo false),
  "targets": {$(targets_json)
  }
}
JSON
echo "wrote $JSON" >&2

# ---- charts ------------------------------------------------------------------

# What bench/charts.sh draws besides bench.json: one line per round (each
# phase's rows/s beside its limit's, then PostgreSQL's backend CPU per row the
# same way, then the service's own CPU per message), and the network-metrics
# samples of phase 3's ingest window (ms since its start, latency ms).
{
    PAIRS="lcopy fresh lupd reob lprobe replay" # each limit, then the service's phase it bounds
    printf 'round\tlimit_copy\tsvc_fresh\tlimit_update\tsvc_reobserve\tlimit_probe\tsvc_replay\tsvc_two_members'
    printf '\tpg_us_copy\tpg_us_fresh\tpg_us_update\tpg_us_reobserve\tpg_us_probe\tpg_us_replay'
    printf '\tsvc_cpu_us_fresh\tsvc_cpu_us_reobserve\tsvc_cpu_us_replay\n'
    for ((r = 1; r <= ROUNDS; r++)); do
        printf '%d' "$r"
        for p in $PAIRS two; do printf '\t%.0f' "${R[${p}_$r.rows_per_s]}"; done
        for p in $PAIRS; do printf '\t%s' "${R[${p}_$r.backend_us_per_msg]}"; done
        for p in fresh reob replay; do printf '\t%s' "${R[${p}_$r.client_us]}"; done
        printf '\n'
    done
} >"$DATA/rounds.tsv"
awk -v a="${R[all.start_ms]}" -v b="${R[all.end_ms]}" '$1 >= a && $1 <= b && $2 >= 0 { printf "%.1f\t%s\n", $1 - a, $2 }' \
    "$WORK/latency.txt" >"$DATA/latency-ingest.tsv"
"$top/bench/charts.sh" "$OUT" || die "bench/charts.sh could not draw the charts"
