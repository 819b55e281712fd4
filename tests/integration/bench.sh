#!/usr/bin/env bash
# make bench in small (DESIGN.md: Benchmark): one short run of bench/run.sh
# against the release build (make bench-bins) must write every figure of
# bench.json, judge every target, and draw its charts; the scale-out phase
# must fail the bench when the database does not hold exactly the backlog.
# make bench-scale in small: one short run of bench/scale.sh on tables of a
# few thousand rows must write every figure of bench-scale.json under its
# name, the curve, and its charts (the figures are not judged here).
# The runs write into this suite's own directory (BENCH_OUT), never build/.
. "$(dirname "$0")/lib.sh"

# The release build next to the sanitizer build (make test builds bench-bins).
RELEASE=${BENCH_BUILD:-$(cd "$BUILD/.." && pwd)}
OUT=$WORK/bench
SMALL=(BENCH_REVIEWS=10000 BENCH_APPS=1000 BENCH_ROUNDS=1 BENCH_TLS_ROUNDS=1 BENCH_IDLE_LATENCY_S=1 BENCH_DEFAULT_FETCH_S=1 BENCH_TIMEOUT_S=60)

# One short bench for the tests below to read.
env BUILD="$RELEASE" BENCH_OUT="$OUT" "${SMALL[@]}" "$TOP/bench/run.sh" >"$WORK/bench.out" 2>"$WORK/bench.err"
BENCH_RC=$?

# One short bench-scale: three sizes (0, 2,000 and 6,000 reviews; two days of
# app_stats at the largest), one round each. 5,000 reviews a crawl, so that
# every pass costs PostgreSQL some clock ticks (the /proc figures count in
# hundredths of a second).
SCALE_OUT=$WORK/scale
SCALE_SMALL=(BENCH_SCALE_ROWS=6000 "BENCH_SCALE_CURVE=0 2000" BENCH_SCALE_STATS_DAYS=2 BENCH_SCALE_ROUNDS=1
    BENCH_REVIEWS=5000 BENCH_APPS=100 BENCH_PROFILE=0 BENCH_TIMEOUT_S=60)
env BUILD="$RELEASE" BENCH_OUT="$SCALE_OUT" "${SCALE_SMALL[@]}" "$TOP/bench/scale.sh" >"$WORK/scale.out" 2>"$WORK/scale.err"
SCALE_RC=$?

bench_ran() {
    [ "$BENCH_RC" -eq 0 ] || { tail -30 "$WORK/bench.err" >&2; fail "bench/run.sh exited with $BENCH_RC"; }
}

test_bench_json_has_every_figure_and_a_judged_target_for_each_goal() {
    bench_ran
    local key value name
    for key in bare_pg_rows_per_s bare_pg_replay_rows_per_s reviews_rows_per_s reviews_ratio_to_bare_pg \
        replay_rows_per_s replay_ratio_to_bare_pg bare_pg_two_conn_rows_per_s two_member_rows_per_s \
        two_member_ratio_to_bare_pg two_member_ratio_to_one_member all_pipelines_reviews_rows_per_s \
        network_metrics_p50_ms network_metrics_p99_ms cpu_us_per_message cpu_us_per_message_replay \
        cpu_us_per_message_two_members cpu_ratio_to_postgres apps peak_rss_mb \
        decode_us_per_message decode_us_per_message_jansson_alone decode_avro_us_per_message \
        decode_avro_floor_us_per_message decode_avro_json_path_us_per_message reobserve_rows_per_s fresh_ratio_to_copy_limit \
        reobserve_ratio_to_update_limit replay_ratio_to_probe_limit pg_cpu_us_per_row_fresh pg_cpu_us_per_row_reobserve \
        pg_cpu_us_per_row_replay limit_copy_rows_per_s limit_update_rows_per_s limit_probe_rows_per_s \
        tcp_rows_per_s tls_rows_per_s tls_ratio_to_plain; do
        value=$(jq -r ".$key | numbers" "$OUT/bench.json")
        [ -n "$value" ] || fail "bench.json has no number under $key"
    done
    for key in bare_pg_two_conn_rows_per_s_rounds two_member_rows_per_s_rounds reviews_rows_per_s_rounds \
        reobserve_rows_per_s_rounds limit_copy_rows_per_s_rounds limit_update_rows_per_s_rounds limit_probe_rows_per_s_rounds; do
        assert_eq 1 "$(jq ".$key | length" "$OUT/bench.json")" "$key: one value per round"
    done
    assert_eq 13 "$(jq '.targets | length' "$OUT/bench.json")" "the number of targets"
    for name in reviews_ratio_to_bare_pg replay_ratio_to_bare_pg cpu_ratio_to_postgres \
        two_member_ratio_to_bare_pg network_metrics_p99_ms peak_rss_mb apps fresh_ratio_to_copy_limit \
        reobserve_ratio_to_update_limit replay_ratio_to_probe_limit; do
        # Each: the figure itself, its limit, and met as the comparison says.
        jq -e --arg n "$name" '.targets[$n] as $t | ($t.value == .[$n]) and ($t.limit | type == "number")
            and ($t.met == (if $t.op == ">=" then $t.value >= $t.limit else $t.value <= $t.limit end))' \
            "$OUT/bench.json" >/dev/null || fail "target $name is not judged right: $(jq -c --arg n "$name" '.targets[$n]' "$OUT/bench.json")"
    done
    assert_eq "0.85 1 25 64" "$(jq -r '[.targets.two_member_ratio_to_bare_pg.limit, (.targets.reviews_ratio_to_bare_pg.limit / 0.95),
        .targets.network_metrics_p99_ms.limit, .targets.peak_rss_mb.limit] | map(tostring) | join(" ")' "$OUT/bench.json")" "target limits"
    # The printed table judges the same targets.
    grep -Eq '^two members / bare PostgreSQL two connections +[0-9.]+ .* (PASS|MISS)$' "$WORK/bench.out" ||
        fail "the table prints no verdict for the two-member target"
}

# The plotted series of an SVG: the titles of gnuplot's plot groups that
# draw data besides their key sample (a two-point line and, with points, one
# point): more than 3 path coordinates and points in all.
series() { # SVG
    python3 - "$1" <<'PY'
import re, sys, xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
for g in ET.parse(sys.argv[1]).iter(ns + "g"):
    if not (g.get("id") or "").startswith("gnuplot_plot_"):
        continue
    title = g.find(ns + "title")
    marks = sum(len(re.findall(r"[ML]", e.get("d") or "")) for e in g.iter(ns + "path"))
    marks += sum(1 for e in g.iter(ns + "use"))
    if title is not None and marks > 3:
        print(title.text)
PY
}

test_bench_charts_are_well_formed_svg_holding_every_series() {
    bench_ran
    local f s
    for f in throughput latency cpu; do
        [ -s "$OUT/bench-charts/$f.svg" ] || fail "no chart $OUT/bench-charts/$f.svg"
        xmllint --noout "$OUT/bench-charts/$f.svg" || fail "$f.svg is not well-formed XML"
    done
    s=$(series "$OUT/bench-charts/throughput.svg")
    for f in "plain COPY (limit)" "storage-consumer, fresh" "UPDATE ... FROM + COPY (limit)" \
        "storage-consumer, reobserve" "the probe (limit)" "storage-consumer, replay" "storage-consumer, two members"; do
        assert_contains "$s" "$f" "throughput.svg series"
    done
    s=$(series "$OUT/bench-charts/cpu.svg")
    for f in "PostgreSQL, plain COPY (limit)" "PostgreSQL, fresh" "PostgreSQL, UPDATE ... FROM (limit)" \
        "PostgreSQL, reobserve" "PostgreSQL, the probe (limit)" "PostgreSQL, replay" \
        "storage-consumer, fresh" "storage-consumer, reobserve" "storage-consumer, replay"; do
        assert_contains "$s" "$f" "cpu.svg series"
    done
    # The retired baseline, the staging upsert, is drawn no more.
    if grep -q "bare PostgreSQL" "$OUT/bench-charts/throughput.svg" "$OUT/bench-charts/cpu.svg"; then
        fail "a chart still draws the staging upsert as bare PostgreSQL"
    fi
    assert_contains "$(series "$OUT/bench-charts/latency.svg")" "messages visible within x ms" "latency.svg series"
    # Drawn from the run's own data: one line per round, a latency per sample.
    assert_eq 2 "$(wc -l <"$OUT/bench-data/rounds.tsv")" "rounds.tsv: a header and one round"
    assert_eq "$(jq .network_metrics_samples "$OUT/bench.json")" "$(wc -l <"$OUT/bench-data/latency-ingest.tsv")" \
        "latency samples charted"
}

# A short ingest window can hold a single latency sample: its chart still
# draws the series (a step from no message visible to all of them).
test_a_latency_chart_of_one_sample_still_draws_its_series() {
    bench_ran
    local one=$WORK/one-sample
    rm -rf "$one" && mkdir -p "$one/bench-data"
    cp "$OUT/bench.json" "$one/" && cp "$OUT/bench-data/rounds.tsv" "$one/bench-data/"
    printf '30.2\t8.476\n' >"$one/bench-data/latency-ingest.tsv"
    "$TOP/bench/charts.sh" "$one" >/dev/null 2>&1 || fail "bench/charts.sh failed on one latency sample"
    assert_contains "$(series "$one/bench-charts/latency.svg")" "messages visible within x ms" "latency.svg series of one sample"
}

# A member whose rows do not all stay in the database: a wrapper around the
# release binary deletes one stored review when a scale-out member stops.
test_bench_fails_when_the_two_members_leave_a_row_missing() {
    bench_ran
    local fake=$WORK/lossy out=$WORK/lossy-out rc=0
    mkdir -p "$fake/bench"
    ln -s "$RELEASE/kafka-mock-broker" "$fake/kafka-mock-broker"
    ln -s "$RELEASE/bench/bare_pg" "$RELEASE/bench/latency" "$RELEASE/bench/decode_speed" "$RELEASE/bench/avro_speed" \
        "$fake/bench/"
    cat >"$fake/storage-consumer" <<EOF
#!/usr/bin/env bash
"$RELEASE/storage-consumer" "\$@" &
child=\$!
trap 'kill -TERM \$child' TERM
wait \$child; rc=\$?
[ \$rc -le 128 ] || { wait \$child; rc=\$?; }
case "\${STORAGE_GROUP_PREFIX:-}" in bench-two-*)
    psql "\$STORAGE_DATABASE_URL" -qAtc "DELETE FROM reviews WHERE review_id = (SELECT min(review_id) FROM reviews)" ;;
esac
exit \$rc
EOF
    chmod +x "$fake/storage-consumer"
    env BUILD="$fake" BENCH_OUT="$out" "${SMALL[@]}" "$TOP/bench/run.sh" >"$out.out" 2>"$out.err" || rc=$?
    assert_eq 1 "$rc" "bench/run.sh exit status with a row missing"
    grep -q "after two members the reviews table holds 999[89] rows" "$out.err" ||
        fail "no missing-row failure: $(tail -5 "$out.err")"
    [ ! -e "$out/bench.json" ] || fail "a failed bench wrote bench.json"
}

scale_ran() {
    [ "$SCALE_RC" -eq 0 ] || { tail -30 "$WORK/scale.err" >&2; fail "bench/scale.sh exited with $SCALE_RC"; }
}

test_bench_scale_writes_every_named_figure_the_curve_and_a_judged_target_for_each() {
    scale_ran
    local json=$SCALE_OUT/bench-scale.json key name
    for key in prefill_reviews scale_fresh_ratio_to_copy_limit scale_reobserve_ratio_to_update_limit \
        scale_replay_pg_cpu_ratio_to_probe scale_fresh_pg_cpu_ratio_to_copy scale_reobserve_pg_cpu_ratio_to_update \
        service_cpu_us_per_message consumer_floor_cpu_us_per_message service_cpu_ratio_to_floor_plus_decode \
        consumer_floor_unpaced_cpu_us_per_message service_cpu_ratio_to_unpaced_floor_plus_decode \
        peak_rss_mb decode_us_per_message; do
        [ -n "$(jq -r ".$key | numbers" "$json")" ] || fail "bench-scale.json has no number under $key"
    done
    assert_eq 6000 "$(jq .prefill_reviews "$json")" "prefill_reviews"
    # The templates held what the sizes say: reviews, and the month of
    # app_stats scaled to the size (two days at 6,000, none below).
    assert_eq "0 2000 6000" "$(jq -r '[.curve[].rows] | map(tostring) | join(" ")' "$json")" "the curve's sizes"
    assert_eq "0 0 4800" "$(jq -r '[.curve[].app_stats_rows] | map(tostring) | join(" ")' "$json")" "app_stats rows by size"
    jq -e '.curve | all(([.fresh_ratio, .reobserve_ratio, .replay_ratio] | all(type == "number" and . > 0))
        and (.pg_cpu_us_per_row | [.fresh, .limit_copy, .reobserve, .limit_update, .replay, .limit_probe]
        | all(type == "number" and . >= 0)))' "$json" >/dev/null ||
        fail "a curve point lacks a ratio or a CPU figure: $(jq -c .curve "$json")"
    # The service's ratio is its CPU over the floor plus the decoder's (one round: no median to blur it).
    jq -e '(.service_cpu_ratio_to_floor_plus_decode - .service_cpu_us_per_message
        / (.consumer_floor_cpu_us_per_message + .decode_us_per_message)) | (if . < 0 then -. else . end) < 0.01' "$json" >/dev/null ||
        fail "service_cpu_ratio_to_floor_plus_decode is not service / (floor + decode): $(jq -c '[.service_cpu_us_per_message,
            .consumer_floor_cpu_us_per_message, .decode_us_per_message, .service_cpu_ratio_to_floor_plus_decode]' "$json")"
    jq -e '(.service_cpu_ratio_to_unpaced_floor_plus_decode - .service_cpu_us_per_message
        / (.consumer_floor_unpaced_cpu_us_per_message + .decode_us_per_message)) | (if . < 0 then -. else . end) < 0.01' "$json" >/dev/null ||
        fail "the unpaced ratio is not service / (unpaced floor + decode): $(jq -c '[.service_cpu_us_per_message,
            .consumer_floor_unpaced_cpu_us_per_message, .decode_us_per_message, .service_cpu_ratio_to_unpaced_floor_plus_decode]' "$json")"
    # The judged floor read at the rate the service stored the crawl at, not faster.
    jq -e '.consumer_floor_pace_msgs_per_s == .service_msgs_per_s and .consumer_floor_msgs_per_s <= 1.01 * .service_msgs_per_s' \
        "$json" >/dev/null || fail "the floor was not paced to the service's rate: $(jq -c '[.service_msgs_per_s,
            .consumer_floor_pace_msgs_per_s, .consumer_floor_msgs_per_s]' "$json")"
    assert_eq 8 "$(jq '.targets | length' "$json")" "the number of targets"
    for name in $(jq -r '.targets | keys[]' "$json"); do
        jq -e --arg n "$name" '.targets[$n] as $t | ($t.value == .[$n]) and ($t.limit | type == "number")
            and ($t.met == (if $t.op == ">=" then $t.value >= $t.limit else $t.value <= $t.limit end))' \
            "$json" >/dev/null || fail "target $name is not judged right: $(jq -c --arg n "$name" '.targets[$n]' "$json")"
    done
    assert_eq "0.85 0.85 1.15 1.15 1.3 1.5 64 10000000" "$(jq -r '.targets | [.scale_fresh_ratio_to_copy_limit,
        .scale_reobserve_ratio_to_update_limit, .scale_fresh_pg_cpu_ratio_to_copy, .scale_reobserve_pg_cpu_ratio_to_update,
        .scale_replay_pg_cpu_ratio_to_probe, .service_cpu_ratio_to_floor_plus_decode, .peak_rss_mb, .prefill_reviews]
        | map(.limit | tostring) | join(" ")' "$json")" "target limits"
    # The printed table judges the same targets, and the prefilled size missed its own.
    grep -Eq '^service CPU/msg / \(Kafka floor \+ decoding\) +[0-9.]+ .* (PASS|MISS)$' "$WORK/scale.out" ||
        fail "the table prints no verdict for the service's CPU"
    grep -Eq '^reviews already in the table +6000 .* MISS$' "$WORK/scale.out" || fail "6,000 prefilled reviews were not judged short of 10,000,000"
}

test_bench_scale_charts_are_well_formed_svg_holding_every_series() {
    scale_ran
    local f s
    for f in scale-ratio scale-pg-cpu scale-service-cpu; do
        xmllint --noout "$SCALE_OUT/bench-scale-charts/$f.svg" || fail "$f.svg is missing or not well-formed XML"
    done
    s=$(series "$SCALE_OUT/bench-scale-charts/scale-ratio.svg")
    for f in "fresh / plain COPY" "reobserve / UPDATE ... FROM" "replay / the probe"; do
        assert_contains "$s" "$f" "scale-ratio.svg series"
    done
    s=$(series "$SCALE_OUT/bench-scale-charts/scale-pg-cpu.svg")
    for f in "service, fresh" "plain COPY" "service, reobserve" "UPDATE ... FROM" "service, replay" "the probe"; do
        assert_contains "$s" "$f" "scale-pg-cpu.svg series"
    done
    # Both floors are bars of their own, the judged one named by its pace.
    s=$(cat "$SCALE_OUT/bench-scale-charts/scale-service-cpu.svg")
    for f in "Kafka floor, unpaced" "Kafka floor at the service's rate" "floor + decoding" "storage-consumer"; do
        assert_contains "$s" "$f" "scale-service-cpu.svg bars"
    done
}

test_bench_scale_refuses_a_curve_that_does_not_rise_naming_the_variable() {
    local rc=0 err
    err=$(env BUILD="$RELEASE" BENCH_OUT="$WORK/scale-bad" BENCH_SCALE_ROWS=6000 "BENCH_SCALE_CURVE=2000 1000" \
        "$TOP/bench/scale.sh" 2>&1) || rc=$?
    assert_eq 2 "$rc" "exit status"
    assert_contains "$err" "BENCH_SCALE_CURVE must rise" "error message"
    [ ! -e "$WORK/scale-bad/bench-scale.json" ] || fail "a refused bench-scale wrote bench-scale.json"
}

test_bare_pg_two_connections_need_the_partition_count() {
    local rc=0 err
    err=$("$RELEASE/bench/bare_pg" "dbname=none" /dev/null --connections 2 2>&1) || rc=$?
    assert_eq 2 "$rc" "exit status"
    assert_contains "$err" "--connections 2 needs --partitions" "error message"
    rc=0
    err=$("$RELEASE/bench/bare_pg" "dbname=none" /dev/null --connections x --partitions 6 2>&1) || rc=$?
    assert_eq 2 "$rc" "exit status"
    assert_contains "$err" "--connections must be a whole number" "error message"
}

test_bare_pg_limits_and_upsert_are_asked_for_one_series_at_a_time() {
    local rc=0 err
    err=$("$RELEASE/bench/bare_pg" "dbname=none" /dev/null --recrawl /dev/null 2>&1) || rc=$?
    assert_eq 2 "$rc" "exit status"
    assert_contains "$err" "--recrawl needs --passes limits or --passes upsert" "error message"
    rc=0
    err=$("$RELEASE/bench/bare_pg" "dbname=none" /dev/null --recrawl /dev/null --passes both 2>&1) || rc=$?
    assert_eq 2 "$rc" "exit status"
    assert_contains "$err" "--recrawl needs --passes limits or --passes upsert" "error message"
}

run_tests
