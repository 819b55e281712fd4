#!/usr/bin/env bash
# The benchmark's charts (DESIGN.md: Benchmark), drawn with gnuplot as SVG
# from what bench/run.sh wrote:
#
#   bench/charts.sh [OUT]             OUT/bench-charts/*.svg from OUT/bench.json
#                                     and OUT/bench-data/ (OUT: build)
#   bench/charts.sh --publish [OUT]   the same, then copies them to docs/bench/,
#                                     where docs/PERFORMANCE.md shows them
#   bench/charts.sh --scale [--publish] [OUT]
#                                     make bench-scale's: OUT/bench-scale-charts/*.svg
#                                     from OUT/bench-scale.json (bench/scale.sh)
#
#   throughput.svg  rows/s per round: each phase of storage-consumer against
#                   PostgreSQL's limit for it (fresh / plain COPY, reobserve /
#                   UPDATE ... FROM, replay / the probe), and two members
#   latency.svg     network-metrics publish -> visible during phase 3's
#                   ingest: the share of messages visible within x ms
#   cpu.svg         per round, PostgreSQL's backend CPU per row of each phase
#                   against its limit's, and the service's own CPU per message
#   scale-ratio.svg     (--scale) each phase's rows/s over its limit's, by the
#                       reviews the table held before the crawls
#   scale-pg-cpu.svg    (--scale) PostgreSQL CPU us per row of each phase and
#                       its limit, by the same sizes
#   scale-service-cpu.svg (--scale) the service's CPU per message against the
#                       Kafka floor (at the service's rate, and unpaced) and
#                       the decoder
#
# Exit 1 when an input is missing or gnuplot fails, 2 on a usage error.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
publish=0 scale=0
if [ "${1:-}" = --scale ]; then scale=1; shift; fi
if [ "${1:-}" = --publish ]; then publish=1; shift; fi
[ $# -le 1 ] || { echo "usage: bench/charts.sh [--scale] [--publish] [OUT]" >&2; exit 2; }
OUT=${1:-build}
case $OUT in /*) ;; *) OUT=$top/$OUT ;; esac
command -v gnuplot >/dev/null || { echo "bench/charts.sh: gnuplot is missing (Debian: gnuplot-nox)" >&2; exit 1; }

# Copy CHARTS' SVGs named NAMES to docs/bench/ (--publish).
publish_charts() { # CHARTS NAMES...
    local dir=$1 f
    shift
    for f in "$@"; do
        [ -s "$dir/$f.svg" ] || { echo "bench/charts.sh: gnuplot wrote no $dir/$f.svg" >&2; exit 1; }
    done
    echo "charts in $dir" >&2
    if [ $publish = 1 ]; then
        mkdir -p "$top/docs/bench"
        for f in "$@"; do cp "$dir/$f.svg" "$top/docs/bench/"; done
        echo "copied to $top/docs/bench/" >&2
    fi
}

if [ $scale = 1 ]; then
    JSON=$OUT/bench-scale.json
    CHARTS=$OUT/bench-scale-charts
    [ -s "$JSON" ] || { echo "bench/charts.sh: $JSON is missing or empty: run make bench-scale (or bench/scale.sh with BENCH_OUT=$OUT)" >&2; exit 1; }
    mkdir -p "$CHARTS"
    j() { jq -r "$1" "$JSON"; }
    # One line per size: rows, the three ratios, the six CPU figures.
    jq -r '.curve[] | [.rows, .fresh_ratio, .reobserve_ratio, .replay_ratio, .pg_cpu_us_per_row.fresh,
        .pg_cpu_us_per_row.limit_copy, .pg_cpu_us_per_row.reobserve, .pg_cpu_us_per_row.limit_update,
        .pg_cpu_us_per_row.replay, .pg_cpu_us_per_row.limit_probe] | @tsv' "$JSON" >"$CHARTS/.curve.tsv"
    floor=$(j .consumer_floor_cpu_us_per_message) decode=$(j .decode_us_per_message)
    printf '"Kafka floor, unpaced"\t%s\n"Kafka floor at the service'"'"'s rate"\t%s\n"floor + decoding"\t%s\n"target: 1.5 x (floor + decoding)"\t%s\n"storage-consumer"\t%s\n' \
        "$(j .consumer_floor_unpaced_cpu_us_per_message)" "$floor" "$(awk -v a="$floor" -v b="$decode" 'BEGIN { print a + b }')" \
        "$(awk -v a="$floor" -v b="$decode" 'BEGIN { print 1.5 * (a + b) }')" "$(j .service_cpu_us_per_message)" >"$CHARTS/.cpu.tsv"
    gnuplot <<GNUPLOT
set terminal svg size 900,520 dynamic enhanced font "sans,12" background "white"
set datafile separator "\t"
set key below
set grid ytics lc rgb "#dddddd"
set xlabel "reviews in the table before the crawls"
set output "$CHARTS/scale-ratio.svg"
set title "Each phase against PostgreSQL's limit on the same table ($(j .messages) reviews, then the next crawl)\nat $(j .prefill_reviews) rows: fresh $(j .scale_fresh_ratio_to_copy_limit) x COPY, reobserve $(j .scale_reobserve_ratio_to_update_limit) x UPDATE, replay $(j .scale_replay_ratio_to_probe_limit) x the probe" noenhanced
set ylabel "rows/s, x the limit's"
set yrange [0:1.2]
set arrow 1 from graph 0, first 0.85 to graph 1, first 0.85 nohead dt 2 lc rgb "#d62728"
set label 1 "target 0.85" at graph 0.01, first 0.88 tc rgb "#d62728"
plot "$CHARTS/.curve.tsv" using 0:2:xtic(1) with linespoints lw 2 pt 5 lc rgb "#1f77b4" title "fresh / plain COPY", \
     "" using 0:3 with linespoints lw 2 pt 7 lc rgb "#ff7f0e" title "reobserve / UPDATE ... FROM", \
     "" using 0:4 with linespoints lw 2 pt 9 lc rgb "#2ca02c" title "replay / the probe"
unset arrow 1
unset label 1
set output "$CHARTS/scale-pg-cpu.svg"
set title "PostgreSQL CPU per row: the service's phases and PostgreSQL's limits, by the table's size\ntargets at $(j .prefill_reviews) rows: fresh and reobserve <= 1.15 x, replay <= 1.3 x the limit's" noenhanced
set ylabel "PostgreSQL backend CPU us per row"
set yrange [0:*]
plot "$CHARTS/.curve.tsv" using 0:5:xtic(1) with linespoints lw 2 pt 5 lc rgb "#1f77b4" title "service, fresh", \
     "" using 0:6 with linespoints lw 2 pt 4 dt 2 lc rgb "#1f77b4" title "plain COPY", \
     "" using 0:7 with linespoints lw 2 pt 7 lc rgb "#ff7f0e" title "service, reobserve", \
     "" using 0:8 with linespoints lw 2 pt 6 dt 2 lc rgb "#ff7f0e" title "UPDATE ... FROM", \
     "" using 0:9 with linespoints lw 2 pt 9 lc rgb "#2ca02c" title "service, replay", \
     "" using 0:10 with linespoints lw 2 pt 8 dt 2 lc rgb "#2ca02c" title "the probe"
set output "$CHARTS/scale-service-cpu.svg"
set title "The service's CPU per message against reading Kafka alone (bench/consumer_floor, at the service's rate) and decoding\nratio $(j .service_cpu_ratio_to_floor_plus_decode) x (floor + decoding), target <= 1.5; $(j .service_cpu_ratio_to_unpaced_floor_plus_decode) x with the unpaced floor" noenhanced
set xlabel ""
set ylabel "CPU us per message"
set style fill solid 0.7
set boxwidth 0.6
set yrange [0:*]
plot "$CHARTS/.cpu.tsv" using 0:2:xtic(1) with boxes lc rgb "#1f77b4" notitle
GNUPLOT
    rm -f "$CHARTS/.curve.tsv" "$CHARTS/.cpu.tsv"
    publish_charts "$CHARTS" scale-ratio scale-pg-cpu scale-service-cpu
    exit 0
fi
JSON=$OUT/bench.json
DATA=$OUT/bench-data
CHARTS=$OUT/bench-charts

for f in "$JSON" "$DATA/rounds.tsv" "$DATA/latency-ingest.tsv"; do
    [ -s "$f" ] || { echo "bench/charts.sh: $f is missing or empty: run make bench (or bench/run.sh with BENCH_OUT=$OUT)" >&2; exit 1; }
done
j() { jq -r "$1" "$JSON"; }
rounds=$(j .rounds)
mkdir -p "$CHARTS"

# The latency samples in order, with the share of samples at or below each,
# from none visible below the smallest: one sample still draws a step.
sort -g -k2,2 "$DATA/latency-ingest.tsv" |
    awk '{ v[++n] = $2 } END { printf "%s\t0\n", v[1]; for (i = 1; i <= n; i++) printf "%s\t%.4f\n", v[i], i / n }' \
    >"$CHARTS/.latency-cdf.tsv"
# The latency axis reaches past the 25 ms target line, whatever the samples.
lat_max=$(awk '$1 > m { m = $1 } END { printf "%.0f", (m > 25 ? m * 1.05 + 1 : 30) }' "$CHARTS/.latency-cdf.tsv")

# gnuplot's plot clauses, one per COLUMN:POINT_TYPE:COLOUR:DASH:TITLE, of
# rounds.tsv against its first column (the round).
plot_rounds() {
    local spec col pt colour dash title sep=
    for spec in "$@"; do
        IFS=: read -r col pt colour dash title <<<"$spec"
        printf '%s"%s" using 1:%s skip 1 with linespoints lw 2 pt %s dt %s lc rgb "%s" title "%s"' \
            "$sep" "$DATA/rounds.tsv" "$col" "$pt" "$dash" "$colour" "$title"
        sep=", "
    done
}

gnuplot <<GNUPLOT
set terminal svg size 900,520 dynamic enhanced font "sans,12" background "white"
set datafile separator "\t"
set key below
set grid ytics lc rgb "#dddddd"
set xtics 1
set xrange [0.5:$rounds + 0.5]
set xlabel "round"

set output "$CHARTS/throughput.svg"
set title "Rows/s per round: each phase against PostgreSQL's limit ($(j .messages) reviews, $(j .review_partitions) partitions)\nmedians: fresh $(j .fresh_ratio_to_copy_limit) x plain COPY, reobserve $(j .reobserve_ratio_to_update_limit) x UPDATE ... FROM, replay $(j .replay_ratio_to_probe_limit) x the probe; two members $(j .two_member_ratio_to_one_member) x one" noenhanced
set ylabel "rows/s"
set yrange [0:*]
plot $(plot_rounds 2:4:"#1f77b4":2:"plain COPY (limit)" 3:5:"#1f77b4":1:"storage-consumer, fresh" \
    4:6:"#ff7f0e":2:"UPDATE ... FROM + COPY (limit)" 5:7:"#ff7f0e":1:"storage-consumer, reobserve" \
    6:8:"#2ca02c":2:"the probe (limit)" 7:9:"#2ca02c":1:"storage-consumer, replay" \
    8:11:"#d62728":1:"storage-consumer, two members")

set output "$CHARTS/cpu.svg"
set title "CPU per round: PostgreSQL's per row, each phase against its limit; the service's own per message\nPostgreSQL medians: fresh $(j .targets.pg_cpu_ratio_fresh.value) x, reobserve $(j .targets.pg_cpu_ratio_reobserve.value) x, replay $(j .targets.pg_cpu_ratio_replay.value) x the limit's (target <= 1.15)" noenhanced
set ylabel "CPU us per row (the service: per message)"
plot $(plot_rounds 9:4:"#1f77b4":2:"PostgreSQL, plain COPY (limit)" 10:5:"#1f77b4":1:"PostgreSQL, fresh" \
    11:6:"#ff7f0e":2:"PostgreSQL, UPDATE ... FROM (limit)" 12:7:"#ff7f0e":1:"PostgreSQL, reobserve" \
    13:8:"#2ca02c":2:"PostgreSQL, the probe (limit)" 14:9:"#2ca02c":1:"PostgreSQL, replay" \
    15:13:"#555555":1:"storage-consumer, fresh" 16:13:"#999999":1:"storage-consumer, reobserve" \
    17:13:"#333333":3:"storage-consumer, replay")

set output "$CHARTS/latency.svg"
set title "network-metrics publish -> visible during the all-pipelines ingest ($(j .network_metrics_samples) messages)\np50 $(j .network_metrics_p50_ms) ms, p99 $(j .network_metrics_p99_ms) ms (target <= 25 ms)" noenhanced
set xlabel "ms"
set ylabel "share of messages visible"
set xrange [0:$lat_max]
set xtics autofreq
set yrange [0:1.05]
set arrow 1 from 25, graph 0 to 25, graph 1 nohead dt 2 lc rgb "#d62728"
set label 1 "target p99 25 ms" at 25, graph 0.05 offset 1,0 tc rgb "#d62728"
plot "$CHARTS/.latency-cdf.tsv" using 1:2 with steps lw 2 lc rgb "#1f77b4" title "messages visible within x ms"
GNUPLOT
rm -f "$CHARTS/.latency-cdf.tsv"

publish_charts "$CHARTS" throughput latency cpu
