#!/usr/bin/env bash
# A time series partitioned by day and operated by pg_partman (Debian's
# postgresql-15-partman), as docs/OPERATIONS.md (Partitioned time series)
# tells an operator to: the shipped app_stats, holding data, converted by
# that section's SQL as written there; then the service ingests across
# partitions while pg_partman's maintenance makes partitions ahead and drops
# those past the retention. Nothing published is lost or stored twice; the
# only dead letters are rows whose day has no partition, and `dead-letters
# redrive` stores those whose day has one by then.
. "$(dirname "$0")/lib.sh"

pg_start
broker_start

APPS=20

# The block of docs/OPERATIONS.md after its <!-- MARKER --> line.
guide_block() { # marker
    sed -n "/^<!-- $1 -->\$/,/^\`\`\`\$/p" "$TOP/docs/OPERATIONS.md" | sed '1,2d;$d'
}

# A test's database with pg_partman, its days cut at midnight UTC as the
# test reckons them, and the apps.
begin_partman_test() { # name
    begin_test "$1"
    sql "ALTER DATABASE test_$1 SET timezone TO 'UTC';
         CREATE SCHEMA partman;
         CREATE EXTENSION pg_partman SCHEMA partman" >/dev/null
    sql "INSERT INTO apps_registry_application (package_name, name)
         SELECT 'com.example.s-' || i, 'app ' || i FROM generate_series(1, $APPS) i" >/dev/null
}

# Convert app_stats by the guide's SQL, as the guide says to run it.
convert_by_the_guide() {
    local sql_text
    sql_text=$(guide_block partition-app-stats)
    assert_contains "$sql_text" "partman.create_parent('public.app_stats'" "the guide's conversion"
    echo "$sql_text" >"$WORK/convert-$TEST_NAME.sql"
    psql "$DB" -X -q -v ON_ERROR_STOP=1 -f "$WORK/convert-$TEST_NAME.sql" >"$WORK/convert-$TEST_NAME.log" 2>&1 ||
        fail "the guide's conversion failed: $(tail -n 5 "$WORK/convert-$TEST_NAME.log")"
}

# The date N days from the suite's first day (UTC; a run across midnight
# keeps its days), and the name pg_partman gives its partition.
TODAY=$(date -u +%F)
day() { date -u -d "$TODAY $1 days" +%F; }
partition_of() { echo "app_stats_p$(day "$1" | tr - _)"; }
has_partition() { sql "SELECT to_regclass('$(partition_of "$1")') IS NOT NULL"; }

# The crawl of every app at HOUR of day N, one JSON line per app; each
# record's day is added to the ledger of what the table must hold, unless
# the crawl is one the table must refuse (LEDGER=none).
crawl() { # n hour
    local i d
    d=$(day "$1")
    for i in $(seq 1 "$APPS"); do
        printf '{"package_name":"com.example.s-%d","crawled_at":"%sT%s:00:00Z","title":"app %d","score":4.5,"ratings_count":%d}\n' \
            "$i" "$d" "$2" "$i" "$((i * 10))"
        [ "${LEDGER:-}" = none ] || echo "$d" >>"$WORK/ledger-$TEST_NAME"
    done
}

# Publish stdin to partition 0 of the test's app-stats topic and count it.
# Publish stdin to partition 0 of the test's app-stats topic; published
# says how many records it holds so far (publish runs in a pipeline's
# subshell, hence a file).
publish() {
    local f=$WORK/batch-$TEST_NAME
    cat >"$f"
    produce "$TOPIC_APP_STATS" -p 0 <"$f"
    cat "$f" >>"$WORK/published-$TEST_NAME"
}
published() { wc -l <"$WORK/published-$TEST_NAME"; }

start_app_stats() { # name [VAR=value...]
    local name=$1
    shift
    start_service "$name" STORAGE_PIPELINES=app-stats STORAGE_MAX_POLL_RECORDS_APP_STATS=25 "$@"
}

# pg_partman's maintenance, as cron would call it, over and over until the
# test ends; what each call printed goes to a log of its own.
MAINTENANCE_PID=""
start_maintenance() {
    (while :; do
        psql "$DB" -X -q -v ON_ERROR_STOP=1 -c 'CALL partman.run_maintenance_proc()' ||
            echo "maintenance FAILED"
        sleep 0.2
    done) >>"$WORK/maintenance-$TEST_NAME.log" 2>&1 &
    MAINTENANCE_PID=$!
}
stop_maintenance() {
    [ -n "$MAINTENANCE_PID" ] || return 0
    kill "$MAINTENANCE_PID" 2>/dev/null || true
    wait "$MAINTENANCE_PID" 2>/dev/null || true
    MAINTENANCE_PID=""
}

# Rows per day of app_stats, and the ledger's count per day, as "DAY N" lines.
rows_per_day() { usql "SELECT d || ' ' || n FROM (SELECT crawled_at::date, count(*) FROM app_stats GROUP BY 1) r (d, n) ORDER BY d"; }
ledger_per_day() { sort "$WORK/ledger-$TEST_NAME" | uniq -c | awk '{print $2 " " $1}'; }

dead_letters() {
    sql "SELECT error_type || '|' || error_detail FROM dead_letter_events WHERE resolved_at IS NULL ORDER BY kafka_offset"
}

# Wait until the status page at PORT shows app-stats with COUNT unresolved
# dead letters of REASON (each pipeline reads them every 5 s): at most
# STALL_S past that.
wait_page_dead_letters() { # port reason count
    local end=$((SECONDS + 5 + STALL_S)) page=""
    while [ "$SECONDS" -lt "$end" ]; do
        page=$(http_get "$1" / 2>/dev/null || true)
        case "$page" in *"id=\"dl-app-stats-$2\"><td>$2</td><td>$3</td>"*) return 0 ;; esac
        sleep 0.5
    done
    fail "the status page never showed $3 $2 dead letters of app-stats: $(echo "$page" | grep -o 'id="dl-app-stats[^/]*' | tr '\n' ' ')"
}

test_app_stats_converted_by_the_guide_ingests_while_pg_partman_makes_and_drops_partitions() {
    begin_partman_test partman

    # The shipped, plain app_stats with data in it, stored by the service:
    # two days older than the 90 days' retention, the last three days.
    { LEDGER=none crawl -100 06; LEDGER=none crawl -95 06; crawl -2 06; crawl -2 18; crawl -1 06; crawl -1 18; crawl 0 06; crawl 0 18; } | publish
    start_app_stats plain
    wait_committed "$(group_of app-stats)" "$TOPIC_APP_STATS" 0 "$(published)"
    stop_clean plain
    assert_eq "r|$((8 * APPS))" "$(sql "SELECT c.relkind::text || '|' || (SELECT count(*) FROM app_stats) FROM pg_class c WHERE c.oid = 'app_stats'::regclass")" \
        "the plain table and its rows"
    local before max_id
    before=$(dump_table app_stats)
    max_id=$(sql "SELECT max(id) FROM app_stats")

    # The crawlers go on while the pipeline is stopped for the conversion.
    crawl 0 20 | publish
    convert_by_the_guide
    assert_eq "p|" "$(sql "SELECT c.relkind::text || '|' || coalesce((SELECT string_agg(i.inhrelid::regclass::text, ',') FROM pg_inherits i
                                JOIN pg_class p ON p.oid = i.inhrelid WHERE i.inhparent = c.oid AND p.relpartbound IS NOT NULL
                                AND pg_get_expr(p.relpartbound, p.oid) = 'DEFAULT'), '')
                            FROM pg_class c WHERE c.oid = 'app_stats'::regclass")" "partitioned, without a default partition"
    assert_eq "$before" "$(dump_table app_stats)" "every row after the conversion, column for column"
    assert_eq "t|t|t" "$(has_partition -100)|$(has_partition -89)|$(has_partition 4)" \
        "partitions for the oldest row's day, for the days the retention keeps, and 4 days ahead"

    # The ingest, with the maintenance running all the while. The test
    # cannot move the clock: with infinite_time_partitions off, pg_partman
    # makes partitions ahead of the newest row instead of today, so crawls
    # of the coming days drive the maintenance as the passing days would.
    sql "UPDATE partman.part_config SET infinite_time_partitions = false WHERE parent_table = 'public.app_stats'" >/dev/null
    local port
    port=$(free_port)
    start_app_stats svc STORAGE_METRICS_ADDR="127.0.0.1:$port"
    start_maintenance
    trap 'end_test stop_maintenance' EXIT
    # The maintenance drops the days past the retention, rows and all.
    wait_for_sql "SELECT to_regclass('$(partition_of -100)') IS NULL AND to_regclass('$(partition_of -95)') IS NULL" t 60
    local k
    for k in 1 2 3 4 5 6; do
        # Day k's crawls and a late crawl of the day before, in the same
        # batches: each batch is written into two partitions. The first
        # brings a record of a crawler whose clock is a week ahead.
        { [ "$k" != 1 ] || APPS=1 LEDGER=none crawl 8 12
          paste -d '\n' <(crawl "$k" 06) <(crawl $((k - 1)) 23) <(crawl "$k" 18); } | publish
        wait_committed "$(group_of app-stats)" "$TOPIC_APP_STATS" 0 "$(published)" 60
        # Four days ahead of the newest row: made by the maintenance, not by
        # the conversion, from day 1 on.
        wait_for_sql "SELECT to_regclass('$(partition_of $((k + 4)))') IS NOT NULL" t 60
    done
    # A late crawl of a day the retention dropped.
    LEDGER=none crawl -100 07 | publish
    wait_committed "$(group_of app-stats)" "$TOPIC_APP_STATS" 0 "$(published)" 60
    wait_page_dead_letters "$port" database_rejected $((APPS + 1))
    stop_maintenance
    stop_clean svc
    ! grep -q 'FAILED\|ERROR' "$WORK/maintenance-$TEST_NAME.log" ||
        fail "the maintenance failed: $(grep -m 3 'FAILED\|ERROR' "$WORK/maintenance-$TEST_NAME.log")"

    # Every record read by exactly one committed batch, across the two
    # runs and the conversion between them (the table's unique key would
    # hide a record stored twice from any count of rows).
    assert_each_offset_stored_once app-stats "$TOPIC_APP_STATS" plain svc
    # Every record of a day with a partition stored; ids unique across
    # partitions and the new ones after the converted ones.
    assert_eq "$(ledger_per_day)" "$(rows_per_day)" "rows per day: the ledger, the table"
    local rows
    rows=$(wc -l <"$WORK/ledger-$TEST_NAME")
    assert_eq "$rows|$rows|$((6 * APPS))" \
        "$(sql "SELECT count(*) || '|' || count(DISTINCT id) || '|' || count(*) FILTER (WHERE id <= $max_id) FROM app_stats")" \
        "rows, distinct ids, ids of the converted table (its rows of the last three days)"
    assert_eq "f|f|t" "$(has_partition -100)|$(has_partition -95)|$(has_partition 10)" "partitions dropped and made"
    # The dead letters: the week-ahead record and the crawl past the
    # retention, in PostgreSQL's words; nothing else.
    local refused
    refused=$(dead_letters)
    assert_eq $((APPS + 1)) "$(echo "$refused" | grep -c '^database_rejected|the database refused the row: 23514: ERROR:  no partition of relation "app_stats" found for row')" \
        "dead letters for want of a partition: [$refused]"
    assert_contains "$refused" "(crawled_at) = ($(day 8) 12:00:00+00)"
    assert_contains "$refused" "(crawled_at) = ($(day -100) 07:00:00+00)"
    assert_eq "0|$((APPS + 1))" "$(sql "SELECT count(*) FILTER (WHERE error_type <> 'database_rejected') || '|' || count(*) FROM dead_letter_events")" \
        "dead letters of any other kind | in all"

    # verify counts the parent, every partition, and the dead letters.
    OP_ENV=(STORAGE_PIPELINES=app-stats)
    op verify verify
    assert_contains "$(out verify)" "app_stats=$rows"
    assert_contains "$(out verify)" "unresolved=$((APPS + 1)) database_rejected=$((APPS + 1))"

    # redrive: the week-ahead record has a partition now and is stored; the
    # crawl past the retention is refused again and stays.
    op redrive dead-letters redrive --pipeline app-stats
    assert_eq 0 "$OP_RC" "redrive's exit"
    assert_contains "$(out redrive)" "redrive pipeline=app-stats examined=$((APPS + 1)) stored=1 still_failing=$APPS not_redrivable=0 inserted=1"
    day 8 >>"$WORK/ledger-$TEST_NAME"
    assert_eq "$(ledger_per_day)" "$(rows_per_day)" "rows per day after the redrive"
    assert_eq "$APPS" "$(dead_letters | grep -c "no partition of relation \"app_stats\" found for row")" \
        "the crawl past the retention, still refused"
    assert_eq "redriven|1" "$(sql "SELECT resolution_kind || '|' || count(*) FROM dead_letter_events WHERE resolved_at IS NOT NULL GROUP BY resolution_kind")" \
        "the dead letter resolved by the redrive"
    # The operator acknowledges them.
    op resolve dead-letters resolve --type database_rejected --pipeline app-stats --note "older than the retention of app_stats"
    assert_eq 0 "$OP_RC" "resolve's exit"
    assert_contains "$(out resolve)" "acknowledged=$APPS"
    assert_eq 0 "$(sql "SELECT count(*) FROM dead_letter_events WHERE resolved_at IS NULL")" "unresolved dead letters"
}

# The suite's PostgreSQL as it was before a test added to its configuration.
restore_postgresql_conf() {
    cp "$PG_DIR/data/postgresql.conf.before" "$PG_DIR/data/postgresql.conf"
    pg_ctl_ restart -m fast >/dev/null
}

test_the_guides_background_worker_runs_the_maintenance() {
    begin_partman_test bgw
    sql "INSERT INTO app_stats (application_id, crawled_at)
         SELECT id, d FROM apps_registry_application, (VALUES ('$(day -100)T06:00:00Z'::timestamptz), ('$(day 0)T06:00:00Z')) v (d)" >/dev/null
    convert_by_the_guide
    assert_eq t "$(has_partition -100)" "the partition past the retention, before the worker"
    # The guide's postgresql.conf lines, for this test's database, as the
    # suite's superuser, once a second rather than hourly.
    guide_block partman-bgw | sed -e "s/'analytics'/'test_bgw'/" -e 's/= 3600$/= 1/' -e "s/'analytics_owner'/'postgres'/" \
        >"$WORK/bgw.conf"
    assert_eq 3 "$(grep -cE "^pg_partman_bgw\.(dbname = 'test_bgw'|interval = 1|role = 'postgres')$" "$WORK/bgw.conf")" \
        "the guide's lines, made this test's: [$(cat "$WORK/bgw.conf")]"
    cp "$PG_DIR/data/postgresql.conf" "$PG_DIR/data/postgresql.conf.before"
    cat "$WORK/bgw.conf" >>"$PG_DIR/data/postgresql.conf"
    trap 'end_test restore_postgresql_conf' EXIT
    pg_ctl_ restart -m fast >/dev/null
    # The worker's first round, a second after the start, drops the day past
    # the retention; today's rows stay.
    wait_for_sql "SELECT to_regclass('$(partition_of -100)') IS NULL" t 30
    assert_eq "$(day 0)|$APPS" "$(usql "SELECT crawled_at::date || '|' || count(*) FROM app_stats GROUP BY crawled_at::date")" \
        "the rows after the worker's maintenance"
}

run_tests
