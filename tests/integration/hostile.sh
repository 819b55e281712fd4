#!/usr/bin/env bash
# Hostile input (DESIGN.md: The message contract; Dead letters; Errors): the corpus of tests/hostile (bad records, and
# tricky records that are valid) against the running service, the sanitizer
# build.
#
# The suite produces the whole corpus once, each record between two good
# records, into the three topics: partition 0 of each topic gets its whole
# interleaved stream as ONE message set (so the service takes it as one batch,
# and "a bad record never aborts its batch" is proven, not assumed);
# partition 1 gets the records of several MiB, each between good records.
# Then the service runs until every group has committed every partition to
# its end, and stops with SIGTERM. The test_* functions check that one run
# from every side: the outcome of every record against the manifest (dead
# letter with the exact error_type, or the row stored verbatim, checked with
# PostgreSQL's own JSON parser as the oracle), the good records beside them,
# byte-exact dead letters, no crash, no sanitizer report, and that no value
# ever became SQL text (log_statement=all on the service's sessions).
#
# Further tests isolate the records that stop a pipeline, one per test, so a
# failure names its cause.
#
# KEEP_WORK=1 keeps the work directory (service logs, server log, corpus
# copy, plans); HOSTILE_EXCLUDE=REGEX leaves the corpus files whose path
# matches out of the shared run (for diagnosis only: the suite then reports
# what the rest of the corpus does); ONLY_TESTS=REGEX runs only those tests.

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

pg_start
broker_start

HOSTILE=$TOP/tests/hostile
APP=com.example.hostile
# The CreateTime of every record that does not choose its own: dead letters
# must carry it to the millisecond.
DEFAULT_TS=1764417600123
# Records larger than this go to partition 1 (the mock broker keeps at most
# 5 MiB of message sets per partition: they must not push the interleaved
# stream out of partition 0).
BIG=1048576

# ---------------------------------------------------------------------------
# Helpers.

# The producer of byte-exact records (keys, headers, NULL values, CreateTime).
build_producer() {
    [ -x "$WORK/produce" ] && return 0
    # shellcheck disable=SC2046
    cc -std=c11 -D_GNU_SOURCE -O1 -o "$WORK/produce" "$HOSTILE/produce.c" $(pkg-config --cflags --libs rdkafka) ||
        fail "cannot build tests/hostile/produce.c"
}

# The corpus, committed and generated, in $WORK/corpus (readable by the
# PostgreSQL server, which reads the files as the oracle).
prepare_corpus() {
    [ -d "$WORK/corpus" ] && return 0
    cp -r "$HOSTILE/corpus" "$WORK/corpus"
    "$HOSTILE/generate.sh" "$WORK/corpus"
    chmod -R a+rX "$WORK/corpus"
}

# A good record of TOPIC number N, written to a file; prints its path.
good_record() { # topic n
    local f="$WORK/good/$1/good-$2.json"
    mkdir -p "$WORK/good/$1"
    case $1 in
    reviews)
        printf '{"package_name":"%s","review_id":"good-%s","user_name":"good user %s","content":"good content %s","score":%s,"thumbs_up_count":%s,"app_version":"2.0","reviewed_at":"2026-11-01T00:00:00Z","last_synced_at":"2026-11-29T09:00:00Z"}' \
            "$APP" "$2" "$2" "$2" $(($2 % 5 + 1)) "$2" >"$f" ;;
    app-stats)
        printf '{"package_name":"%s","crawled_at":"2026-11-29T%02d:%02d:%02dZ","title":"good %s","score":4.5,"ratings_count":%s,"histogram":[1,2,3,4,5],"price":1.99,"is_free":false}' \
            "$APP" $((1 + $2 / 3600)) $(($2 / 60 % 60)) $(($2 % 60)) "$2" "$2" >"$f" ;;
    network-metrics)
        printf '{"package_name":"%s","analysis_id":"00000000-0000-4000-a000-%012d","analyzed_at":"2026-11-29T10:00:00Z","duration_seconds":%s.5,"total_packets":%s,"total_bytes":%s,"protocols":{"tcp":%s}}' \
            "$APP" "$2" "$2" "$2" $(($2 * 1000 + 1)) "$2" >"$f" ;;
    esac
    echo "$f"
}

# One plan line (see produce.c) for corpus FILE to PARTITION.
plan_line() { # partition path
    local value=$2 key=- headers=- ts=$DEFAULT_TS
    [[ $2 == *.null ]] && value=NULL
    [ -f "$2.key" ] && key=$2.key
    [ -f "$2.headers" ] && headers=$2.headers
    [ -f "$2.timestamp" ] && ts=$(cat "$2.timestamp")
    printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$value" "$key" "$headers" "$ts"
}

# Produce PLAN to TOPIC and append one row per record to $WORK/expect.tsv:
# topic, partition, offset, file, base directory (of file), key path,
# expected, note, kind, ts. META has, per plan line: file, expected, note,
# kind, base directory.
produce_plan() { # topic plan meta
    "$WORK/produce" "$BOOTSTRAP" "$1" <"$2" >"$2.offsets" || fail "producing $2 to $1 failed"
    [ "$(wc -l <"$2.offsets")" = "$(wc -l <"$2")" ] || fail "not every record of $2 was acknowledged"
    # offsets: "PARTITION OFFSET"; plan: $2..$6; meta: $7..$11.
    paste "$2.offsets" "$2" "$3" | awk -F'\t' -v OFS='\t' -v topic="$1" '{
        split($1, po, " ")
        print topic, po[1], po[2], $7, $11, ($4 == "-" ? "" : $4), $8, $9, $10, $6
    }' >>"$WORK/expect.tsv"
}

# Build the plans of the three topics from the manifest: partition 0 gets
# good, record, good, record, ..., good; partition 1 gets the records bigger
# than $BIG the same way. EXCLUDE (a regex) leaves corpus files out.
plan_corpus() { # exclude
    local topic file expected note path n part
    rm -f "$WORK"/plan.* "$WORK/expect.tsv"
    for topic in app-stats reviews network-metrics; do
        : >"$WORK/plan.$topic"
        : >"$WORK/meta.$topic"
    done
    declare -A count
    declare -A last_part
    while IFS=$'\t' read -r file topic expected note; do
        [ -n "$1" ] && [[ $file =~ $1 ]] && continue
        path=$WORK/corpus/$file
        [ -f "$path" ] || fail "manifest names $file, which is neither committed nor generated"
        part=0
        [ "$(stat -c %s "$path")" -gt "$BIG" ] && part=1
        n=${count[$topic]:-0}
        # A good record before every corpus record (and one after the last
        # of each partition, below).
        plan_line "$part" "$(good_record "$topic" "$n")" >>"$WORK/plan.$topic"
        printf 'good/%s/good-%s.json\tstored\tgood record\tgood\t%s\n' "$topic" "$n" "$WORK" >>"$WORK/meta.$topic"
        plan_line "$part" "$path" >>"$WORK/plan.$topic"
        printf '%s\t%s\t%s\tcorpus\t%s\n' "$file" "$expected" "$note" "$WORK/corpus" >>"$WORK/meta.$topic"
        count[$topic]=$((n + 1))
        last_part[$topic:$part]=1
    done < <(tail -n +2 "$HOSTILE/manifest.tsv")
    for topic in app-stats reviews network-metrics; do
        for part in 0 1; do
            [ -n "${last_part[$topic:$part]:-}" ] || continue
            n=${count[$topic]}
            plan_line "$part" "$(good_record "$topic" "$n")" >>"$WORK/plan.$topic"
            printf 'good/%s/good-%s.json\tstored\tgood record\tgood\t%s\n' "$topic" "$n" "$WORK" >>"$WORK/meta.$topic"
            count[$topic]=$((n + 1))
        done
    done
}

topic_var() { # pipeline: the test's topic of that pipeline
    case $1 in
    app-stats) echo "$TOPIC_APP_STATS" ;;
    reviews) echo "$TOPIC_REVIEWS" ;;
    network-metrics) echo "$TOPIC_NETWORK_METRICS" ;;
    esac
}

# The App API's apps: the corpus's app and the registered names that look
# like SQL, array literals, LIKE patterns, NULL, and 255 four-byte characters.
register_hostile_apps() {
    psql "$DB" -X -q -v ON_ERROR_STOP=1 >/dev/null <<'SQL'
INSERT INTO apps_registry_application (package_name, name) VALUES
  ('com.example.hostile', 'the corpus app'),
  ($q$com.sql'); DROP TABLE reviews; --INJ3CT$q$, 'SQL-shaped'),
  ($q$com.array"quote\back,slash{brace} INJ3CT$q$, 'array literal characters'),
  ('NULL', 'spelled NULL'),
  (repeat(U&'\+01F4F1', 255), '255 four-byte characters'),
  ('com.example.%_', 'LIKE wildcards'),
  (E'com.tab\tnew\nline INJ3CT', 'tab and newline');
SQL
}

# Load $WORK/expect.tsv into hostile.expect, in the test's database.
load_expectations() {
    sql "CREATE SCHEMA IF NOT EXISTS hostile;
         DROP TABLE IF EXISTS hostile.expect;
         CREATE TABLE hostile.expect (topic text, partition int, kafka_offset bigint, file text,
           path text, key_path text, expected text, note text, kind text, ts bigint)" >/dev/null
    # CSV with a quote character that never occurs: notes hold backslashes
    # and double quotes, which text-format COPY would interpret.
    psql "$DB" -X -q -v ON_ERROR_STOP=1 \
        -c "\\copy hostile.expect FROM '$WORK/expect.tsv' WITH (FORMAT csv, DELIMITER E'\\t', QUOTE E'\\x01')" ||
        fail "cannot load the expectations"
}

# Wait until every group has committed every partition of its topic to the
# end (the high watermark), or the service NAME has exited, or no committed
# offset moved for longer than one database attempt may take (the default
# STORAGE_DB_STATEMENT_TIMEOUT_MS, 15 s, and 1 s: one batch holds a topic's
# whole corpus) and STALL_S. Returns 0 if everything was committed.
wait_all_consumed() { # name
    local p topic pipeline hw got done sum last="" end
    while :; do
        done=1
        sum=0
        for pipeline in app-stats reviews network-metrics; do
            topic=$(topic_var "$pipeline")
            for p in 0 1 2; do
                hw=$(high_watermark "$topic" "$p")
                [ "$hw" = 0 ] && continue
                got=$(broker_committed "$GROUP_PREFIX.$pipeline" "$topic" "$p")
                [ "$got" -lt 0 ] || sum=$((sum + got))
                [ "$got" = "$hw" ] || done=0
            done
        done
        [ "$done" = 1 ] && return 0
        [ -f "$WORK/$1.rc" ] && return 1
        if [ "$sum" != "$last" ]; then
            last=$sum
            end=$((SECONDS + 16 + STALL_S))
        fi
        [ "$SECONDS" -lt "$end" ] || return 1
        sleep 0.5
    done
}

# Run SQL that lists problems, one per line; fail with them if any.
assert_no_rows() { # sql message
    local out
    out=$(usql "$1") || fail "query failed: $1"
    [ -z "$out" ] || fail "$2 ($(printf '%s\n' "$out" | wc -l)):
$(printf '%s\n' "$out" | head -n 40 | cut -c 1-400)"
}

# ---------------------------------------------------------------------------
# The shared run: the whole corpus, once.

RUN=corpus
shared_run() {
    [ -f "$WORK/shared-run.done" ] && return 0
    [ ! -f "$WORK/shared-run.started" ] || fail "the shared run of the corpus failed (see the first test)"
    touch "$WORK/shared-run.started"
    fresh_schema hostile
    register_hostile_apps
    fresh_topics hostile
    build_producer
    prepare_corpus
    plan_corpus "${HOSTILE_EXCLUDE:-}"
    local pipeline
    for pipeline in app-stats reviews network-metrics; do
        produce_plan "$(topic_var "$pipeline")" "$WORK/plan.$pipeline" "$WORK/meta.$pipeline"
    done
    load_expectations
    for pipeline in app-stats reviews network-metrics; do
        assert_broker_kept_everything "$(topic_var "$pipeline")"
    done

    # Every statement of the service's sessions in the server log, prefixed
    # with the application name; values would show only as parameters.
    sql "ALTER SYSTEM SET log_line_prefix = '%m [%p] app=%a '" >/dev/null
    sql "SELECT pg_reload_conf()" >/dev/null
    sql "ALTER DATABASE hostile SET log_statement = 'all'" >/dev/null
    wc -c <"$WORK/pg/server.log" >"$WORK/server-log.start"

    # Batches large enough for each topic's whole interleaved stream.
    start_service "$RUN" STORAGE_MAX_POLL_RECORDS=1000
    # Whether everything was committed is the second test's to judge.
    wait_all_consumed "$RUN" || true
    if [ -f "$WORK/$RUN.rc" ]; then
        echo "exited on its own with $(cat "$WORK/$RUN.rc")" >"$WORK/shared-run.early-exit"
    fi
    svc_stop "$RUN" 60 >"$WORK/shared-run.stop-rc"
    sql "ALTER DATABASE hostile RESET log_statement" >/dev/null
    tail -c +"$(($(cat "$WORK/server-log.start") + 1))" "$WORK/pg/server.log" >"$WORK/server-log.run"
    touch "$WORK/shared-run.done"
}

# Each test of the shared run starts from its results (the first one runs it).
use_shared_run() {
    shared_run
    DB="$(pg_root | sed "s/dbname=postgres/dbname=hostile/")"
    export DB
    TOPIC_APP_STATS=app-stats-hostile TOPIC_REVIEWS=reviews-hostile
    TOPIC_NETWORK_METRICS=network-metrics-hostile GROUP_PREFIX=sc-hostile
    export TOPIC_APP_STATS TOPIC_REVIEWS TOPIC_NETWORK_METRICS GROUP_PREFIX
}

# ---------------------------------------------------------------------------
# 1. The process survives the corpus.

test_the_service_survives_the_whole_corpus_and_stops_cleanly_on_sigterm() {
    use_shared_run
    [ ! -f "$WORK/shared-run.early-exit" ] ||
        fail "the service did not survive the corpus: it $(cat "$WORK/shared-run.early-exit"): $(grep -E ' error |runtime error|Sanitizer' "$WORK/$RUN.log" | head -n 5)"
    assert_eq 0 "$(cat "$WORK/shared-run.stop-rc")" "exit code on SIGTERM"
    grep -q 'stopped exit=0' "$WORK/$RUN.log" || fail "no 'stopped exit=0' in the log"
    no_sanitizer_report "$WORK/$RUN.log"
}

test_every_partition_is_consumed_and_committed_to_its_end() {
    use_shared_run
    local pipeline topic p hw
    for pipeline in app-stats reviews network-metrics; do
        topic=$(topic_var "$pipeline")
        assert_broker_kept_everything "$topic"
        for p in 0 1 2; do
            hw=$(high_watermark "$topic" "$p")
            [ "$hw" = 0 ] && hw=-1001
            assert_eq "$hw" "$(broker_committed "$GROUP_PREFIX.$pipeline" "$topic" "$p")" "offset committed on $topic [$p]"
        done
    done
}

# One message set per topic in partition 0, one batch: the log's batch line
# covers the whole interleaved stream, so every bad record shared its batch
# with good ones and did not abort it.
test_each_topics_interleaved_stream_was_stored_as_one_batch() {
    use_shared_run
    local pipeline topic n
    for pipeline in app-stats reviews network-metrics; do
        topic=$(topic_var "$pipeline")
        n=$(high_watermark "$topic" 0)
        grep -qE "info +\[$pipeline\] batch size=[0-9]+ .* offsets=([^ ]*,)?p0:0-$((n - 1))[, ]" "$WORK/$RUN.log" ||
            fail "$pipeline: no single batch of the $n records of partition 0; batch lines: $(grep -E "\[$pipeline\] batch size=" "$WORK/$RUN.log" | head -n 5)"
    done
}

# ---------------------------------------------------------------------------
# 2. Every record's outcome, against the manifest.

test_every_bad_record_is_dead_lettered_with_its_error_type() {
    use_shared_run
    assert_eq "$(awk -F'\t' '$7 != "stored"' "$WORK/expect.tsv" | wc -l)" \
        "$(sql "SELECT count(*) FROM hostile.expect WHERE expected <> 'stored'")" "expectations loaded"
    assert_no_rows "
        SELECT e.file || ': expected ' || e.expected || ', got ' || coalesce(d.error_type || ' (' || d.error_detail || ')', 'no dead letter')
        FROM hostile.expect e
        LEFT JOIN dead_letter_events d USING (topic, partition, kafka_offset)
        WHERE e.expected <> 'stored' AND d.error_type IS DISTINCT FROM e.expected
        ORDER BY e.topic, e.partition, e.kafka_offset" \
        "records without their dead letter"
}

# The oracle: PostgreSQL's own JSON parser reads the record file, and every
# column must equal what the contract says the field means. (A valid record
# may hold \u0000 in a field nobody reads, which PostgreSQL's JSON refuses to
# unescape: the oracle reads it as U+FFFD. A stored \u0000 in a column
# would then differ from the oracle, and must anyway never be stored.)
stored_check_sql() { # kind: corpus or good
    cat <<SQL
WITH x AS (
  SELECT e.*, replace(convert_from(pg_read_binary_file(e.path || '/' || e.file), 'UTF8'), '\u0000', '\uFFFD')::json AS j
  FROM hostile.expect e WHERE e.expected = 'stored' AND e.kind = '$1'
), checked AS (
  SELECT x.file, x.topic, x.partition, x.kafka_offset, d.error_type, d.error_detail,
    (SELECT id FROM apps_registry_application a WHERE a.package_name = x.j->>'package_name') AS app,
    x.j,
    (SELECT row_to_json(r) FROM reviews r WHERE x.topic = '$TOPIC_REVIEWS' AND r.review_id = x.j->>'review_id') AS rv,
    (SELECT row_to_json(s) FROM app_stats s WHERE x.topic = '$TOPIC_APP_STATS'
       AND s.crawled_at = (x.j->>'crawled_at')::timestamptz
       AND s.application_id = (SELECT id FROM apps_registry_application a WHERE a.package_name = x.j->>'package_name')) AS st,
    (SELECT row_to_json(m) FROM network_metrics m WHERE x.topic = '$TOPIC_NETWORK_METRICS' AND m.analysis_id = (x.j->>'analysis_id')::uuid) AS nm
  FROM x LEFT JOIN dead_letter_events d USING (topic, partition, kafka_offset)
)
SELECT file || ': ' || CASE
    WHEN error_type IS NOT NULL THEN 'dead-lettered as ' || error_type || ' (' || error_detail || ')'
    WHEN coalesce(rv, st, nm) IS NULL THEN 'no row'
    ELSE 'columns differ: ' || bad END
FROM checked
CROSS JOIN LATERAL (
  SELECT string_agg(col, ', ') AS bad FROM (
    SELECT col, ok FROM (VALUES
      -- reviews
      ('application_id', rv IS NULL OR (rv->>'application_id')::bigint = app),
      ('user_name', rv IS NULL OR (rv->>'user_name') IS NOT DISTINCT FROM j->>'user_name'),
      ('content', rv IS NULL OR (rv->>'content') IS NOT DISTINCT FROM j->>'content'),
      ('score', rv IS NULL OR (rv->>'score')::numeric = (j->>'score')::numeric),
      ('thumbs_up_count', rv IS NULL OR (rv->>'thumbs_up_count')::numeric = (j->>'thumbs_up_count')::numeric),
      ('app_version', rv IS NULL OR (rv->>'app_version') IS NOT DISTINCT FROM j->>'app_version'),
      ('reviewed_at', rv IS NULL OR (rv->>'reviewed_at')::timestamptz = (j->>'reviewed_at')::timestamptz),
      ('reply_content', rv IS NULL OR (rv->>'reply_content') IS NOT DISTINCT FROM j->>'reply_content'),
      ('replied_at', rv IS NULL OR (rv->>'replied_at')::timestamptz IS NOT DISTINCT FROM (j->>'replied_at')::timestamptz),
      ('last_synced_at', rv IS NULL OR (rv->>'last_synced_at')::timestamptz = (j->>'last_synced_at')::timestamptz),
      ('sentiment', rv IS NULL OR (rv->>'sentiment' IS NULL AND rv->>'sentiment_score' IS NULL)),
      -- app_stats
      ('application_id', st IS NULL OR (st->>'application_id')::bigint = app),
      ('title', st IS NULL OR (st->>'title') IS NOT DISTINCT FROM j->>'title'),
      ('score', st IS NULL OR (st->>'score')::float8 IS NOT DISTINCT FROM (j->>'score')::float8),
      ('ratings_count', st IS NULL OR (st->>'ratings_count')::numeric IS NOT DISTINCT FROM (j->>'ratings_count')::numeric),
      ('reviews_count', st IS NULL OR (st->>'reviews_count')::numeric IS NOT DISTINCT FROM (j->>'reviews_count')::numeric),
      ('min_installs', st IS NULL OR (st->>'min_installs')::numeric IS NOT DISTINCT FROM (j->>'min_installs')::numeric),
      ('real_installs', st IS NULL OR (st->>'real_installs')::numeric IS NOT DISTINCT FROM (j->>'real_installs')::numeric),
      ('histogram', st IS NULL OR (SELECT array_agg(v::numeric ORDER BY n) FROM json_array_elements_text(CASE WHEN json_typeof(st->'histogram') = 'array' THEN st->'histogram' ELSE '[]' END) WITH ORDINALITY h(v, n))
           IS NOT DISTINCT FROM (SELECT array_agg(v::numeric ORDER BY n) FROM json_array_elements_text(CASE WHEN json_typeof(j->'histogram') = 'array' THEN j->'histogram' ELSE '[]' END) WITH ORDINALITY h(v, n))),
      ('price', st IS NULL OR (st->>'price')::numeric IS NOT DISTINCT FROM (j->>'price')::numeric),
      ('is_free', st IS NULL OR (st->>'is_free')::boolean IS NOT DISTINCT FROM (j->>'is_free')::boolean),
      ('version', st IS NULL OR (st->>'version') IS NOT DISTINCT FROM j->>'version'),
      ('app_updated_at', st IS NULL OR (st->>'app_updated_at')::timestamptz IS NOT DISTINCT FROM (j->>'app_updated_at')::timestamptz),
      -- network_metrics
      ('application_id', nm IS NULL OR (nm->>'application_id')::bigint = app),
      ('analyzed_at', nm IS NULL OR (nm->>'analyzed_at')::timestamptz = (j->>'analyzed_at')::timestamptz),
      ('duration_seconds', nm IS NULL OR (nm->>'duration_seconds')::float8 = (j->>'duration_seconds')::float8),
      ('total_packets', nm IS NULL OR (nm->>'total_packets')::numeric = (j->>'total_packets')::numeric),
      ('total_bytes', nm IS NULL OR (nm->>'total_bytes')::numeric = (j->>'total_bytes')::numeric),
      ('unique_hosts', nm IS NULL OR (nm->>'unique_hosts')::numeric IS NOT DISTINCT FROM (j->>'unique_hosts')::numeric),
      ('dns_queries', nm IS NULL OR (nm->>'dns_queries')::numeric IS NOT DISTINCT FROM (j->>'dns_queries')::numeric),
      ('tls_handshakes', nm IS NULL OR (nm->>'tls_handshakes')::numeric IS NOT DISTINCT FROM (j->>'tls_handshakes')::numeric),
      ('avg_packet_size', nm IS NULL OR (nm->>'avg_packet_size')::float8 IS NOT DISTINCT FROM (j->>'avg_packet_size')::float8),
      ('protocols', nm IS NULL OR CASE WHEN json_typeof(nm->'protocols') = 'null' THEN NULL ELSE (nm->'protocols')::jsonb END IS NOT DISTINCT FROM
           CASE WHEN json_typeof(j->'protocols') = 'null' THEN NULL ELSE (j->'protocols')::jsonb END)
    ) v(col, ok) WHERE ok IS NOT TRUE) c
) c
WHERE error_type IS NOT NULL OR coalesce(rv, st, nm) IS NULL OR bad IS NOT NULL
ORDER BY topic, partition, kafka_offset
SQL
}

test_every_valid_corpus_record_is_stored_verbatim() {
    use_shared_run
    assert_no_rows "$(stored_check_sql corpus)" "valid corpus records not stored verbatim"
}

test_the_good_records_beside_the_bad_ones_are_all_stored() {
    use_shared_run
    assert_no_rows "$(stored_check_sql good)" "good records not stored verbatim"
}

test_nothing_else_is_written() {
    use_shared_run
    local want got
    want=$(awk -F'\t' '$7 != "stored" {n++} END {print n + 0}' "$WORK/expect.tsv")
    assert_eq "$want" "$(sql "SELECT count(*) FROM dead_letter_events")" "dead letters"
    for t in reviews:"$TOPIC_REVIEWS" app_stats:"$TOPIC_APP_STATS" network_metrics:"$TOPIC_NETWORK_METRICS"; do
        want=$(awk -F'\t' -v t="${t#*:}" '$1 == t && $7 == "stored" {n++} END {print n + 0}' "$WORK/expect.tsv")
        got=$(sql "SELECT count(*) FROM ${t%%:*}")
        assert_eq "$want" "$got" "rows in ${t%%:*}"
    done
}

# ---------------------------------------------------------------------------
# 3. Dead letters are byte-exact: payload (first 64 KiB), size, key,
# timestamp; truncation stated in error_detail; details are text.

# kafka_timestamp is CreateTime to the millisecond, for every CreateTime
# whose microseconds fit in 64 bits (beyond that, what the column should
# hold is not specified: only that the record is dead-lettered).
MAX_MS=9223372036854775
MS_OF_TS="(extract(epoch FROM kafka_timestamp) * 1000)"

test_dead_letters_keep_payload_key_size_and_timestamp_byte_exact() {
    use_shared_run
    assert_no_rows "
        WITH x AS (
          SELECT e.*, d.payload, d.payload_size, d.message_key, d.kafka_timestamp, d.error_detail,
                 CASE WHEN e.file LIKE '%.null' THEN NULL ELSE pg_read_binary_file(e.path || '/' || e.file) END AS bytes,
                 CASE WHEN coalesce(e.key_path, '') = '' THEN NULL ELSE pg_read_binary_file(e.key_path) END AS key
          FROM hostile.expect e JOIN dead_letter_events d USING (topic, partition, kafka_offset)
          WHERE e.expected <> 'stored')
        SELECT file || ': ' || concat_ws(', ',
            CASE WHEN payload <> coalesce(substring(bytes FROM 1 FOR 65536), '') THEN 'payload differs (' || length(payload) || ' bytes)' END,
            CASE WHEN payload_size <> coalesce(length(bytes), 0) THEN 'payload_size ' || payload_size || ' <> ' || coalesce(length(bytes), 0) END,
            CASE WHEN message_key IS DISTINCT FROM key THEN 'message_key ' || coalesce(encode(message_key, 'hex'), 'NULL') || ' <> ' || coalesce(encode(key, 'hex'), 'NULL') END,
            CASE WHEN ts BETWEEN 0 AND $MAX_MS AND $MS_OF_TS IS DISTINCT FROM ts
                 THEN 'kafka_timestamp ' || coalesce(kafka_timestamp::text, 'NULL') || ' is not CreateTime ' || ts || ' ms' END,
            CASE WHEN (coalesce(length(bytes), 0) > 65536) <> (error_detail LIKE '%payload truncated to 65536 of ' || coalesce(length(bytes), 0) || ' bytes%')
                 THEN 'truncation not stated exactly: ' || error_detail END)
        FROM x
        WHERE payload <> coalesce(substring(bytes FROM 1 FOR 65536), '') OR payload_size <> coalesce(length(bytes), 0)
           OR message_key IS DISTINCT FROM key
           OR (ts BETWEEN 0 AND $MAX_MS AND $MS_OF_TS IS DISTINCT FROM ts)
           OR (coalesce(length(bytes), 0) > 65536) <> (error_detail LIKE '%payload truncated to 65536 of ' || coalesce(length(bytes), 0) || ' bytes%')
        ORDER BY topic, partition, kafka_offset" \
        "dead letters that are not byte-exact"
}

# DESIGN.md: The message contract: error_detail names the field and the problem. The manifest's note
# of a field error starts with the field's name.
test_field_errors_name_the_field_in_error_detail() {
    use_shared_run
    assert_no_rows "
        SELECT e.file || ': [' || d.error_detail || '] does not start with ' || split_part(e.note, ':', 1)
        FROM hostile.expect e JOIN dead_letter_events d USING (topic, partition, kafka_offset)
        WHERE e.expected IN ('missing_field', 'invalid_field') AND d.error_type = e.expected
          AND d.error_detail NOT LIKE split_part(e.note, ':', 1) || '%'
        ORDER BY e.topic, e.partition, e.kafka_offset" \
        "field errors whose error_detail does not name the field"
}

# ---------------------------------------------------------------------------
# 4. Values reach PostgreSQL as parameters or COPY data, never as SQL text.

# The service's entries in the server log as "KIND<TAB>text" (one line per
# entry; continuation lines of a multi-line entry joined with \n).
service_log_entries() {
    awk '
        function flush() { if (keep) { gsub(/\t/, "\\t", text); print kind "\t" text } }
        /^[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9] [0-9:.]+ [A-Z]+ \[[0-9]+\] app=/ {
            flush()
            keep = index($0, "] app=storage-consumer ") > 0
            kind = "other"
            if ($0 ~ / LOG:  (statement|execute [^:]*): / || $0 ~ / STATEMENT:  /) kind = "statement"
            if ($0 ~ / DETAIL:  parameters: /) kind = "parameters"
            text = $0; next
        }
        { text = text "\\n" $0 }
        END { flush() }' "$WORK/server-log.run"
}

test_no_value_ever_becomes_sql_text() {
    use_shared_run
    service_log_entries >"$WORK/service-log.entries"
    # The log did record the service's statements.
    grep -q $'^statement\t.*COPY pg_temp.storage_stage' "$WORK/service-log.entries" ||
        fail "log_statement did not record the service's COPY: $(head -c 600 "$WORK/service-log.entries")"
    grep -q $'^statement\t.*INSERT INTO dead_letter_events' "$WORK/service-log.entries" ||
        fail "log_statement did not record the service's dead letter INSERT"
    # The SQL-shaped values travelled as parameters (the package names of
    # the resolve query) ...
    grep -q $'^parameters\t.*INJ3CT' "$WORK/service-log.entries" ||
        fail "no SQL-shaped value among the logged parameters"
    # ... or as COPY data (the row values), and never in a statement's text.
    if grep -E $'^statement\t' "$WORK/service-log.entries" | grep -qE "INJ3CT|DROP TABLE|DELETE FROM apps|students|pg_sleep"; then
        fail "a value reached SQL text: $(grep -E $'^statement\t' "$WORK/service-log.entries" | grep -E 'INJ3CT|DROP TABLE|students|pg_sleep' | head -n 3 | cut -c 1-400)"
    fi
    # The values themselves are stored (checked verbatim above), and every
    # table they named is intact.
    local stored
    stored=$(sql "SELECT (SELECT count(*) FROM reviews WHERE review_id LIKE '%INJ3CT%' OR content LIKE '%INJ3CT%')
                  + (SELECT count(*) FROM app_stats WHERE title LIKE '%INJ3CT%')
                  + (SELECT count(*) FROM network_metrics WHERE protocols::text LIKE '%INJ3CT%')")
    [ "$stored" -ge 4 ] || fail "only $stored rows hold the SQL-shaped values"
    assert_eq "7" "$(sql "SELECT count(*) FROM apps_registry_application")" "apps_registry_application rows"
    assert_eq "app_stats applied_tombstones apps_registry_application consumer_offsets dead_letter_events network_metrics reviews storage_consumer_migrations" \
        "$(sql "SELECT string_agg(tablename, ' ' ORDER BY tablename) FROM pg_tables WHERE schemaname = 'public'")" "tables"
}

# COPY's own syntax inside values: the end-of-data marker \. on its own line,
# \N (its NULL), tabs, backslashes, CR/LF, stored exactly, never as NULL or as
# the end of the data.
test_copy_syntax_inside_values_is_stored_verbatim() {
    use_shared_run
    assert_eq 'first line
\.
after the COPY terminator INJ3CT|\N|false' \
        "$(sql "SELECT content || '|' || user_name || '|' || (user_name IS NULL) FROM reviews WHERE review_id = 'copy\\.INJ3CT'")" \
        "content with the COPY terminator, user_name \\N"
    assert_eq '\N|\.' "$(sql "SELECT title || '|' || version FROM app_stats WHERE title = '\\N'")" "title \\N is the string, not NULL"
    assert_eq "5c4e" "$(sql "SELECT encode(convert_to(user_name, 'UTF8'), 'hex') FROM reviews WHERE review_id = 'copy\\.INJ3CT'")" "user_name bytes"
    assert_eq "t" "$(sql "SELECT reply_content = E'tab\\there \\\\t back\\\\\\\\slash\\r\\nCRLF\\\\r INJ3CT' FROM reviews WHERE review_id = 'copy\\.INJ3CT'")" \
        "reply_content: a real TAB, literal \\t, two backslashes, a real CR LF, literal \\r"
    assert_eq '{"\\.": 2, "\\N": 6, "nl\nkey": 5, "tab\tkey": 3}' \
        "$(sql "SELECT jsonb_build_object('\\.', protocols->'\\.', '\\N', protocols->'\\N', E'nl\\nkey', protocols->E'nl\\nkey', E'tab\\tkey', protocols->E'tab\\tkey') FROM network_metrics WHERE analysis_id = '6f9619ff-8b86-d011-b42d-00c04fc964ff'")" \
        "protocol names with COPY syntax"
}

# ---------------------------------------------------------------------------
# 5. The records that stop a pipeline, one per test: a bad record between
# two good ones on one partition. The service must dead-letter it, store the
# good ones, and keep running. If it exits instead, it is restarted once (as
# an orchestrator would) to show whether the partition is stuck for good.

isolated() { # name topic-pipeline corpus-file
    local name=$1 pipeline=$2 file=$3 topic
    fresh_schema "iso_$name"
    register_hostile_apps
    fresh_topics "iso-$name"
    build_producer
    prepare_corpus
    topic=$(topic_var "$pipeline")
    {
        plan_line 0 "$(good_record "$pipeline" 900)"
        plan_line 0 "$WORK/corpus/$file"
        plan_line 0 "$(good_record "$pipeline" 901)"
    } >"$WORK/plan.iso-$name"
    "$WORK/produce" "$BOOTSTRAP" "$topic" <"$WORK/plan.iso-$name" >/dev/null || fail "produce failed"
    start_service "iso-$name"
    local rc end=$((SECONDS + STALL_S))
    until [ "$(broker_committed "$GROUP_PREFIX.$pipeline" "$topic" 0)" = 3 ] || [ -f "$WORK/iso-$name.rc" ] ||
        [ "$SECONDS" -ge "$end" ]; do
        sleep 0.25
    done
    if [ -f "$WORK/iso-$name.rc" ]; then
        rc=$(cat "$WORK/iso-$name.rc")
        local why again
        why=$(grep -E ' error |runtime error|Sanitizer' "$WORK/iso-$name.log" | head -n 3 | cut -c 1-500)
        start_service "iso-$name-restarted"
        again=$(svc_wait "iso-$name-restarted" 30)
        [ "$again" = timeout ] && again="kept running: $(svc_stop "iso-$name-restarted")"
        fail "the service exited with $rc on $file instead of dead-lettering it:
$why
restarted, it exited again with [$again]: $(grep -E ' error |runtime error' "$WORK/iso-$name-restarted.log" | head -n 2 | cut -c 1-300)
dead letters: $(sql "SELECT count(*) FROM dead_letter_events"), good rows stored: $(sql "SELECT count(*) FROM $(echo "$pipeline" | tr - _)"), committed offset: $(broker_committed "$GROUP_PREFIX.$pipeline" "$topic" 0)"
    fi
    assert_eq 3 "$(broker_committed "$GROUP_PREFIX.$pipeline" "$topic" 0)" "the committed offset, within $STALL_S s"
    assert_eq 0 "$(svc_stop "iso-$name")" "exit code on SIGTERM"
    no_sanitizer_report "$WORK/iso-$name.log"
    assert_eq 2 "$(sql "SELECT count(*) FROM $(echo "$pipeline" | tr - _)")" "the good records around it"
    assert_eq "1|$(awk -F'\t' -v f="$file" '$1 == f {print $3}' "$HOSTILE/manifest.tsv")" \
        "$(sql "SELECT kafka_offset, error_type FROM dead_letter_events")" "its dead letter"
    assert_eq "t" "$(sql "SELECT error_detail IS NOT NULL FROM dead_letter_events")" "error_detail"
}

test_an_unregistered_name_of_multibyte_characters_is_dead_lettered_without_stopping_the_pipeline() {
    isolated unregistered_mb reviews reviews/r082-unregistered-255-two-byte-chars.json
}

test_a_bad_count_under_a_long_multibyte_protocol_name_is_dead_lettered_without_stopping_the_pipeline() {
    isolated protocol_mb network-metrics network-metrics/n032-protocols-long-multibyte-key.json
}

# A producer sets CreateTime; Kafka accepts any 64-bit value by default.
test_a_bad_record_whose_kafka_timestamp_overflows_microseconds_is_dead_lettered_without_stopping_the_pipeline() {
    isolated ts_1e16 reviews reviews/r085-kafka-timestamp-1e16-ms.bin
}

test_a_bad_record_with_the_largest_kafka_timestamp_is_dead_lettered_without_stopping_the_pipeline() {
    isolated ts_int64_max reviews reviews/r086-kafka-timestamp-int64-max.bin
}


# ---------------------------------------------------------------------------
# 6. Producer strings reach the service's log (an unregistered package name
# is quoted in its dead letter's detail): one event stays one line, and no
# control character or terminal escape sequence reaches the log raw.

# The package name: a newline followed by a whole forged log line, ESC
# sequences that clear the screen and set the terminal's title, a CR, DEL and
# the C1 control CSI (U+009B).
FORGED_NAME='com.forge\n2026-11-29T12:00:00.000Z error [reviews] pipeline failed: FORGED LINE\u001b[2J\u001b]0;owned\u0007\r\u007f\u009b'

# Produce a review of the unregistered $FORGED_NAME between two good ones,
# run the service (extra VAR=value arguments) until all three are taken, and
# stop it. Its log is $WORK/NAME.log.
run_forged_name() { # name [VAR=value...]
    local name=$1
    shift
    fresh_schema "$(echo "$name" | tr - _)"
    register_hostile_apps
    fresh_topics "$name"
    {
        cat "$(good_record reviews 800)"
        echo
        printf '{"package_name":"%s","review_id":"forged-1","score":1,"thumbs_up_count":0,"reviewed_at":"2026-11-29T12:00:00Z","last_synced_at":"2026-11-29T12:00:00Z"}\n' "$FORGED_NAME"
        cat "$(good_record reviews 801)"
        echo
    } | produce "$TOPIC_REVIEWS" -p 0
    start_service "$name" "$@"
    wait_committed "$GROUP_PREFIX.reviews" "$TOPIC_REVIEWS" 0 3 60
    assert_eq 0 "$(svc_stop "$name")" "exit code on SIGTERM"
    no_sanitizer_report "$WORK/$name.log"
    assert_eq "2" "$(sql "SELECT count(*) FROM reviews")" "the good reviews around it"
    assert_eq "unregistered_app" "$(sql "SELECT error_type FROM dead_letter_events")" "its dead letter"
}

# No raw control byte but the newline ending each line (TAB included: the
# formatter writes none of its own).
assert_no_raw_control_bytes() { # log
    if LC_ALL=C grep -n $'[\x01-\x09\x0b-\x1f\x7f]' "$1" >/dev/null; then
        fail "raw control bytes in $1: $(LC_ALL=C grep -n $'[\x01-\x09\x0b-\x1f\x7f]' "$1" | head -n 3 | cat -v)"
    fi
    if LC_ALL=C grep -n $'\xc2[\x80-\x9f]' "$1" >/dev/null; then
        fail "a raw C1 control character in $1: $(LC_ALL=C grep -n $'\xc2[\x80-\x9f]' "$1" | head -n 3 | cat -v)"
    fi
}

test_a_package_name_with_a_newline_and_escape_sequences_cannot_forge_a_text_log_line() {
    local log=$WORK/forge-text.log
    run_forged_name forge-text STORAGE_LOG_FORMAT=text
    if grep -n 'FORGED LINE' "$log" | grep -v 'dead_letter' >/dev/null || grep -q '^2026-11-29T12:00:00.000Z' "$log"; then
        fail "the package name forged a log line: $(grep -n 'FORGED LINE' "$log" | cat -v)"
    fi
    assert_no_raw_control_bytes "$log"
    # The name is shown escaped, inside its dead letter's line.
    grep -qF 'detail="package_name: com.forge\n2026-11-29T12:00:00.000Z error [reviews] pipeline failed: FORGED LINE\x1b[2J\x1b]0;owned\x07\r\x7f\u009b is not registered' "$log" ||
        fail "no dead_letter line with the escaped name: $(grep -n 'dead_letter' "$log" | head -n 3 | cat -v)"
}

test_a_package_name_with_a_newline_and_escape_sequences_stays_inside_one_json_log_line() {
    local log=$WORK/forge-json.log
    run_forged_name forge-json STORAGE_LOG_FORMAT=json
    assert_no_raw_control_bytes "$log"
    # Every line is one JSON object (the sanitizer's own report aside, of
    # which there is none).
    local bad
    bad=$(jq -R 'fromjson? // "NOT JSON: \(.)" | strings' "$log" | head -n 3)
    assert_eq "" "$bad" "lines that are not JSON objects"
    # The name comes back exactly, decoded from its one line.
    local expected
    expected=$(printf '%s' "\"$FORGED_NAME\"" | jq -r .)
    jq -r --arg name "$expected" 'select(.msg == "dead_letter" and (.detail | startswith("package_name: " + $name + " is not registered"))) | .component' "$log" |
        grep -qx reviews || fail "no dead_letter line holding the exact name: $(grep -n 'dead_letter' "$log" | head -n 3 | cat -v)"
}

run_tests
