#!/usr/bin/env bash
# make demo: the whole product on one machine. Starts a throw-away
# PostgreSQL and the Kafka-protocol broker helper, registers sample apps,
# publishes two hourly crawls (with bad messages among them), runs
# storage-consumer until every group has caught up, shows the operator's
# tools (verify, dead-letters list, /healthz, /readyz, /metrics), prints what
# landed, stops it with SIGTERM and cleans up.
#
# DEMO_KEEP=1 keeps the work directory (the service's log, the database's
# data directory, the published crawls) and says where it is.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
BIN=${DEMO_BIN:-$top/build/storage-consumer}
PG=$top/tests/support/pg.sh
BROKER=$top/tests/support/broker.sh
# free_port and http_get
. "$top/tests/support/service.sh"
APPS=12
WORK=$(mktemp -d /tmp/storage-demo.XXXXXX)
chmod 755 "$WORK"
SERVICE_PID=

cleanup() {
    [ -n "$SERVICE_PID" ] && kill -TERM "$SERVICE_PID" 2>/dev/null && wait "$SERVICE_PID" 2>/dev/null
    "$BROKER" stop "$WORK/kafka" >/dev/null 2>&1 || true
    if [ "${DEMO_KEEP:-0}" = 1 ]; then
        "$PG" stop "$WORK/pg" >/dev/null 2>&1 || true
        echo "work directory kept (DEMO_KEEP=1): $WORK (service.log, pg/, wave*.tsv)"
        return
    fi
    "$PG" destroy "$WORK/pg" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT

say() { printf '\n== %s\n' "$*"; }

say "starting PostgreSQL 15 and the Kafka-protocol broker (3 brokers, 3 topics x 3 partitions)"
DB=$("$PG" start "$WORK/pg")
BOOTSTRAP=$("$BROKER" start "$WORK/kafka" 3 app-stats:3 reviews:3 network-metrics:3)
echo "database:  $DB"
echo "bootstrap: $BOOTSTRAP"

psql() { command psql "$DB" -X -q -v ON_ERROR_STOP=1 "$@"; }

say "the App API's applications table, with $APPS sample apps (app12 soft-deleted)"
psql <<SQL
CREATE TABLE apps_registry_application (
    id BIGSERIAL PRIMARY KEY, package_name VARCHAR(255) NOT NULL UNIQUE, name VARCHAR(255),
    is_active BOOLEAN NOT NULL DEFAULT true, created_at TIMESTAMPTZ NOT NULL DEFAULT now());
INSERT INTO apps_registry_application (package_name, name, is_active)
SELECT format('com.example.app%s', lpad(i::text, 2, '0')), format('Example app %s', i), i <> $APPS
FROM generate_series(1, $APPS) AS i;
SQL

publish() { # wave
    awk -v wave="$1" -v apps=$APPS -f "$top/demo/sample-crawl.awk" >"$WORK/wave$1.tsv"
    local t
    for t in app-stats reviews network-metrics; do
        awk -F'\t' -v t="$t" '$1 == t { print $2 "\t" $3 }' "$WORK/wave$1.tsv" |
            kcat -P -b "$BOOTSTRAP" -t "$t" -K $'\t' -X compression.codec=lz4
    done
    awk -F'\t' '{ n[$1]++ } END { printf "published: app-stats=%d reviews=%d network-metrics=%d\n", n["app-stats"], n["reviews"], n["network-metrics"] }' "$WORK/wave$1.tsv"
}

# Lag of every group: high watermark minus committed offset, per partition.
total_lag() {
    local lag=0 t p high committed
    for t in app-stats reviews network-metrics; do
        for p in 0 1 2; do
            high=$("$BROKER" ctl "$WORK/kafka" watermarks "$t" "$p" | awk '{print $3}')
            committed=$("$BROKER" ctl "$WORK/kafka" committed "storage-consumer.$t" "$t" "$p" | awk '{print $2}')
            [ "$committed" -lt 0 ] && committed=0
            lag=$((lag + high - committed))
        done
    done
    echo "$lag"
}

wait_caught_up() {
    local i
    for i in $(seq 1 300); do
        if [ "$(total_lag)" = 0 ]; then return 0; fi
        kill -0 "$SERVICE_PID" 2>/dev/null || { echo "storage-consumer exited early:"; tail -20 "$WORK/service.log"; exit 1; }
        sleep 0.5
    done
    echo "storage-consumer did not catch up within 150 s"
    tail -20 "$WORK/service.log"
    exit 1
}

say "publishing the first hourly crawl"
publish 1

# GET a path from the service's HTTP endpoint (http_get of
# tests/support/service.sh: bash alone, no curl needed); print the status
# line and the body.
show_get() { # path
    http_get "$HTTP_PORT" "$1" | tr -d '\r' | awk 'NR == 1 { print; next } body { print } /^$/ { body = 1 }'
}

# The settings every command of this demo shares.
export STORAGE_DATABASE_URL="$DB" STORAGE_KAFKA_BOOTSTRAP_SERVERS="$BOOTSTRAP" \
    STORAGE_SESSION_TIMEOUT_MS=6000 STORAGE_HEARTBEAT_DIR="$WORK/heartbeat"
HTTP_PORT=$(free_port)

say "starting storage-consumer (HTTP endpoint on 127.0.0.1:$HTTP_PORT)"
STORAGE_METRICS_ADDR="127.0.0.1:$HTTP_PORT" "$BIN" run >"$WORK/service.log" 2>&1 &
SERVICE_PID=$!
wait_caught_up
echo "caught up: lag 0 on every partition of every group"

say "publishing the next hourly crawl (re-observed reviews with more thumbs-up, re-sent unchanged ones, new ones)"
publish 2
wait_caught_up
echo "caught up: lag 0 on every partition of every group"

say "the operator's tools: health (heartbeat files), for a host's health check"
"$BIN" health

say "GET /healthz (liveness) and /readyz (readiness), for an orchestrator's probes"
show_get /healthz
show_get /readyz

say "GET /metrics (a few of the reviews pipeline's series)"
show_get /metrics | grep -E '^storage_consumer_(messages_consumed|rows_inserted|rows_updated|rows_skipped|dead_letters)_total\{pipeline="reviews"' | grep -vE '\} 0$' || true

say "verify: the deployment checked stage by stage (exit 0: nothing broken; warnings are the bad messages)"
"$BIN" verify || { echo "verify found a broken stage"; exit 1; }

say "dead-letters list: what could not be stored, and why"
"$BIN" dead-letters list --limit 6

say "stopping storage-consumer with SIGTERM"
kill -TERM "$SERVICE_PID"
rc=0
wait "$SERVICE_PID" || rc=$?
SERVICE_PID=
echo "exit code: $rc"

say "a few lines of its log"
# grep stops at the 8th line itself: "| head -8" would end grep with SIGPIPE
# whenever more than a pipe's write remained, and pipefail would end the demo.
grep -m 8 -E ' (batch|dead_letter) ' "$WORK/service.log"
echo "..."
grep -E 'supervisor' "$WORK/service.log" | tail -2

say "what landed"
psql -c "SELECT 'app_stats' AS table, count(*) AS rows FROM app_stats
         UNION ALL SELECT 'reviews', count(*) FROM reviews
         UNION ALL SELECT 'network_metrics', count(*) FROM network_metrics
         UNION ALL SELECT 'dead_letter_events', count(*) FROM dead_letter_events"
awk '/ batch size=/ {
        for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] in want) sum[kv[1]] += kv[2] }
     }
     BEGIN { want["size"]; want["inserted"]; want["updated"]; want["skipped"]; want["dead_lettered"] }
     END { printf "batch counters: consumed=%d inserted=%d updated=%d skipped=%d dead_lettered=%d\n",
                  sum["size"], sum["inserted"], sum["updated"], sum["skipped"], sum["dead_lettered"] }' "$WORK/service.log"
psql -c "SELECT error_type, count(*), min(error_detail) AS example FROM dead_letter_events GROUP BY 1 ORDER BY 1"
echo "three reviews: updated by the second crawl, re-sent unchanged (skipped), new in the second crawl:"
psql -c "SELECT review_id, thumbs_up_count, last_synced_at FROM reviews
         WHERE review_id IN ('r-000001', 'r-001001', 'r-002401') ORDER BY 1"
echo "lag: $(total_lag)"
[ "$rc" -eq 0 ] || { echo "storage-consumer did not stop cleanly"; exit 1; }
say "demo finished"
