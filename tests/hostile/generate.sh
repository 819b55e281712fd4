#!/usr/bin/env bash
# Writes the corpus records too big (several MiB) or too deep to commit into
# DIR/<topic>/gen-*.  Their rows are in manifest.tsv like every other record;
# the suites run this into their copy of the corpus before producing it.
#
#   tests/hostile/generate.sh DIR
set -euo pipefail
dir=${1:?usage: generate.sh DIR}
mkdir -p "$dir/reviews" "$dir/app-stats" "$dir/network-metrics"

APP=com.example.hostile
review_head() { # review_id
    printf '{"package_name":"%s","review_id":"%s","score":3,"thumbs_up_count":1,"reviewed_at":"2026-11-01T00:00:00Z","last_synced_at":"2026-11-29T10:00:00Z"' "$APP" "$1"
}
repeat() { # count char
    head -c "$1" /dev/zero | tr '\0' "$2"
}

# Nesting far beyond any parser's limit, in a field nobody reads.
{ review_head gen-deep-100000; printf ',"x":'; repeat 100000 '['; repeat 100000 ']'; printf '}'; } \
    >"$dir/reviews/gen-deep-100000.json"
# 1000 levels of objects in an unknown field: deep, but a reasonable parser
# handles it, and unknown fields are ignored.
{ review_head gen-deep-1000; printf ',"x":'; for _ in $(seq 1000); do printf '{"a":'; done; printf '1'; repeat 1000 '}'; printf '}'; } \
    >"$dir/reviews/gen-deep-1000.json"
# Invalid JSON of exactly 64 KiB (kept whole) and 64 KiB + 1 (truncated).
head=$(printf '{"package_name":"%s","content":"' "$APP")
{ printf '%s' "$head"; repeat $((65536 - ${#head})) 'y'; } >"$dir/reviews/gen-bad-64KiB.bin"
{ printf '%s' "$head"; repeat $((65537 - ${#head})) 'z'; } >"$dir/reviews/gen-bad-64KiB-plus-1.bin"
# Several MiB, valid: a review whose content is 5 MiB of random base64
# (incompressible: the broker really holds and serves ~4 MB).
{ review_head gen-content-5MiB; printf ',"content":"'; head -c $((5 * 1024 * 1024 * 3 / 4)) /dev/urandom | base64 -w0; printf '"}'; } \
    >"$dir/reviews/gen-content-5MiB.json"
# Several MiB, invalid: 6 MiB of an unterminated string.
{ printf '{"package_name":"%s","review_id":"gen-6MiB","content":"' "$APP"; repeat $((6 * 1024 * 1024)) 'x'; } \
    >"$dir/reviews/gen-bad-6MiB-unterminated.bin"
# A valid app-stats record inside 20 MiB of JSON whitespace.
{ repeat $((10 * 1024 * 1024)) ' '
  printf '{"package_name":"%s","crawled_at":"2026-11-29T11:00:00Z","title":"padded"}' "$APP"
  repeat $((10 * 1024 * 1024)) $'\n'; } >"$dir/app-stats/gen-20MiB-whitespace.json"
# A valid app-stats record with a 3 MiB string in an unknown field.
{ printf '{"package_name":"%s","crawled_at":"2026-11-29T11:00:01Z","title":"big unknown field","x_blob":"' "$APP"
  repeat $((3 * 1024 * 1024)) 'b'; printf '"}'; } >"$dir/app-stats/gen-unknown-field-3MiB.json"
# A valid network-metrics record whose protocols object has 200,000 names (~6 MiB).
{ printf '{"package_name":"%s","analysis_id":"00000000-0000-4000-9000-000000000001","analyzed_at":"2026-11-29T10:00:00Z","duration_seconds":60,"total_packets":1,"total_bytes":1,"protocols":{' "$APP"
  awk 'BEGIN { for (i = 0; i < 200000; i++) printf "%s\"protocol-number-%07d\":%d", (i ? "," : ""), i, i }'
  printf '}}'; } >"$dir/network-metrics/gen-protocols-200000-names.json"
# Nesting far beyond any parser's limit inside protocols.
{ printf '{"package_name":"%s","analysis_id":"00000000-0000-4000-9000-000000000002","analyzed_at":"2026-11-29T10:00:00Z","duration_seconds":1,"total_packets":1,"total_bytes":1,"protocols":' "$APP"
  repeat 100000 '['; repeat 100000 ']'; printf '}'; } >"$dir/network-metrics/gen-deep-protocols-100000.json"
