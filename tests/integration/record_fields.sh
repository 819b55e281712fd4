#!/usr/bin/env bash
# The record's own fields as columns (DESIGN.md: Pipelines are declared): a
# definition stores a record's topic, partition, offset, timestamp and its
# type, key, headers (all, or one by name) beside the members of its value,
# and keys a table by them: an append-only table keyed by (topic,
# partition, offset) where every redelivery is a no-op, a table keyed by the
# record's key.
. "$(dirname "$0")/lib.sh"

pg_start
broker_start

APP=com.example.events

# Start pipeline NAME of definition DEF reading TOPIC, as service SVC.
start_pipeline() { # svc name topic [VAR=value...]
    local svc=$1 name=$2 topic=$3 suffix
    shift 3
    suffix=$(echo "$name" | tr 'a-z-' 'A-Z_')
    definitions_with "$WORK/def-$TEST_NAME.json" "$DEF"
    start_service "$svc" "STORAGE_PIPELINES=$name" "STORAGE_PIPELINES_FILE=$WORK/def-$TEST_NAME.json" \
        "STORAGE_TOPIC_$suffix=$topic" "$@"
}

EVENTS_DEF='{"name": "events", "batch_size": 50, "table": "events",
      "application": {"member": "package_name", "column": "application_id"},
      "fields": [{"record": "topic", "column": "src_topic", "required": true},
                 {"record": "partition", "column": "src_partition", "required": true},
                 {"record": "offset", "column": "src_offset", "required": true},
                 {"record": "timestamp", "column": "published_at"},
                 {"record": "timestamp_type", "column": "timestamp_type"},
                 {"record": "headers", "column": "headers"},
                 {"record": "header", "header": "trace-id", "column": "trace"},
                 {"member": "body"}],
      "key": ["src_topic", "src_partition", "src_offset"],
      "on_conflict": "nothing"}'

create_events() {
    sql "CREATE TABLE events (
           application_id BIGINT NOT NULL,
           src_topic      TEXT NOT NULL,
           src_partition  INT NOT NULL,
           src_offset     BIGINT NOT NULL,
           published_at   TIMESTAMPTZ,
           timestamp_type TEXT,
           headers        JSONB,
           trace          TEXT,
           body           TEXT,
           UNIQUE (src_topic, src_partition, src_offset))" >/dev/null
}

event() { printf '{"package_name":"%s","body":"%s"}\n' "$APP" "$1"; } # body

events_digest() {
    sql "SELECT count(*) || ' ' || md5(string_agg(e::text, ',' ORDER BY src_partition, src_offset)) FROM events e"
}

test_an_append_only_table_keyed_by_topic_partition_and_offset_stays_exact_under_redelivery_and_replay() {
    begin_test appendonly
    register_apps "$APP"
    create_events
    local topic=events-$TEST_NAME i
    broker_ctl topic-create "$topic" 2 >/dev/null
    # The same body 120 times on each partition (no natural key in the
    # value: only the record's position tells them apart), with headers on
    # the first 100 of each. The producer stamps each record while it is
    # sent: its create time lies between these two readings of the clock,
    # before the service runs.
    local produced_from produced_to
    produced_from=$(now_ms)
    for p in 0 1; do
        for i in $(seq 1 100); do event same; done | produce "$topic" -p "$p" -H trace-id=t-1 -H source=crawler
        for i in $(seq 1 20); do event same; done | produce "$topic" -p "$p"
    done
    produced_to=$(now_ms)
    DEF=$EVENTS_DEF start_pipeline svc events "$topic"
    wait_committed "$(group_of events)" "$topic" 0 120
    wait_committed "$(group_of events)" "$topic" 1 120
    stop_clean svc
    assert_eq 0 "$(sql "SELECT count(*) FROM dead_letter_events")" "dead letters"
    assert_eq "240|2|120|0-119" "$(sql "SELECT count(*) || '|' || count(DISTINCT src_partition) || '|' ||
                                          count(DISTINCT src_offset) || '|' || min(src_offset) || '-' || max(src_offset)
                                   FROM events WHERE src_topic = '$topic' AND body = 'same'")" \
        "rows, partitions, offsets per partition, their range"
    assert_eq "200|200|40" "$(sql "SELECT count(*) FILTER (WHERE trace = 't-1') || '|' ||
        count(*) FILTER (WHERE headers = '[{\"key\": \"trace-id\", \"value\": \"t-1\"}, {\"key\": \"source\", \"value\": \"crawler\"}]') || '|' ||
        count(*) FILTER (WHERE headers = '[]' AND trace IS NULL) FROM events")" \
        "rows with the trace header, with both headers in order, with none"
    assert_eq "240" "$(sql "SELECT count(*) FROM events WHERE timestamp_type = 'create'
        AND published_at BETWEEN to_timestamp($produced_from / 1000.0) AND to_timestamp($produced_to / 1000.0)")" \
        "rows with the producer's create time"
    local digest
    digest=$(events_digest)

    # Replay from the earliest offset: every record again, every one a
    # no-op, the table unchanged to the byte.
    OP_ENV=("STORAGE_PIPELINES_FILE=$WORK/def-$TEST_NAME.json" "STORAGE_TOPIC_EVENTS=$topic" STORAGE_PIPELINES=events)
    op replay replay events --to earliest
    assert_eq 0 "$OP_RC" "replay's exit: $(err replay)"
    DEF=$EVENTS_DEF start_pipeline again events "$topic"
    wait_committed "$(group_of events)" "$topic" 0 120
    wait_committed "$(group_of events)" "$topic" 1 120
    stop_clean again
    assert_eq "240|0" "$(batch_sum again events skipped)|$(batch_sum again events inserted)" \
        "records of the replay skipped, inserted"
    assert_eq "$digest" "$(events_digest)" "the table after the replay"

    # A dead letter keeps no headers: redrive refuses rather than store a
    # row without them.
    op redrive dead-letters redrive --pipeline events
    [ "$OP_RC" -ne 0 ] || fail "redrive of a pipeline that stores headers succeeded"
    assert_contains "$(err redrive)" "pipeline events stores the record's headers or its timestamp's type"
}

KV_DEF='{"name": "latest", "batch_size": 50, "table": "latest",
      "application": {"member": "package_name", "column": "application_id"},
      "fields": [{"record": "key", "column": "k", "required": true},
                 {"member": "v", "required": true},
                 {"record": "timestamp", "column": "seen_ms", "required": true}],
      "key": ["k"],
      "on_conflict": {"update": ["v", "seen_ms"], "when_newer": "seen_ms"}}'

# The latest table (EXTRA columns added) and a topic of the test's own,
# whose name goes into $topic.
latest_table_and_topic() { # [extra]
    sql "CREATE TABLE latest (application_id BIGINT NOT NULL, k TEXT NOT NULL UNIQUE, v TEXT NOT NULL,
                              seen_ms BIGINT NOT NULL${1:+, $1})" >/dev/null
    topic=latest-$TEST_NAME
    broker_ctl topic-create "$topic" 1 >/dev/null
}

test_a_table_keyed_by_the_record_key_keeps_each_keys_newest_value() {
    begin_test reckey
    register_apps "$APP"
    local topic i
    latest_table_and_topic
    # k-1..k-50 = old; then k-1..k-25 = new (later, so newer); then a
    # record without a key and one whose key is not UTF-8.
    for i in $(seq 1 50); do printf 'k-%s|{"package_name":"%s","v":"old"}\n' "$i" "$APP"; done |
        produce "$topic" -p 0 -K '|'
    for i in $(seq 1 25); do printf 'k-%s|{"package_name":"%s","v":"new"}\n' "$i" "$APP"; done |
        produce "$topic" -p 0 -K '|'
    printf '{"package_name":"%s","v":"keyless"}\n' "$APP" | produce "$topic" -p 0
    printf 'k-\xff|{"package_name":"%s","v":"bad key"}\n' "$APP" | produce "$topic" -p 0 -K '|'
    DEF=$KV_DEF start_pipeline svc latest "$topic"
    wait_committed "$(group_of latest)" "$topic" 0 77
    stop_clean svc
    assert_eq "50|25|25" "$(sql "SELECT count(*) || '|' || count(*) FILTER (WHERE v = 'new' AND substr(k, 3)::int <= 25)
                                 || '|' || count(*) FILTER (WHERE v = 'old' AND substr(k, 3)::int > 25) FROM latest")" \
        "keys, newest values, values never overwritten"
    assert_eq "75 missing_field|76 invalid_utf8" \
        "$(sql "SELECT string_agg(kafka_offset || ' ' || error_type, '|' ORDER BY kafka_offset) FROM dead_letter_events")" \
        "dead letters: the keyless record, then the key that is not UTF-8"
    assert_contains "$(sql "SELECT string_agg(error_detail, ' / ') FROM dead_letter_events")" "record key"
}

test_a_record_field_on_a_column_that_cannot_take_it_is_refused_at_start() {
    begin_test recrefused
    sql "CREATE TABLE events (application_id BIGINT NOT NULL, src_topic TEXT NOT NULL, src_partition TEXT NOT NULL,
           src_offset BIGINT NOT NULL, body TEXT, UNIQUE (src_topic, src_partition, src_offset))" >/dev/null
    local topic=events-$TEST_NAME
    broker_ctl topic-create "$topic" 1 >/dev/null
    DEF='{"name": "events", "table": "events",
          "application": {"member": "package_name", "column": "application_id"},
          "fields": [{"record": "topic", "column": "src_topic", "required": true},
                     {"record": "partition", "column": "src_partition", "required": true},
                     {"record": "offset", "column": "src_offset", "required": true},
                     {"member": "body"}],
          "key": ["src_topic", "src_partition", "src_offset"], "on_conflict": "nothing"}' \
        start_pipeline svc events "$topic"
    assert_eq 1 "$(svc_wait svc 60)" "exit"
    assert_contains "$(cat "$(svc_log svc)")" \
        "pipeline events, field record partition, column events.src_partition: the record partition needs an integer column, not text"
}

# A value (or, with an empty VALUE, a tombstone) of key K, keyed records
# one per line for `produce -K '|' -Z`.
kv() { # k [value]
    if [ -n "${2:-}" ]; then printf '%s|{"package_name":"%s","v":"%s"}\n' "$1" "$APP" "$2"; else printf '%s|\n' "$1"; fi
}

latest_state() {
    sql "SELECT string_agg(k || '=' || v || '@' || seen_ms, ',' ORDER BY k) FROM latest"
}

test_tombstones_delete_the_rows_of_their_keys_in_record_order() {
    begin_test tombdelete
    register_apps "$APP"
    local topic i
    latest_table_and_topic
    # k-1..k-30; tombstones of k-1..k-10; k-5 back; then within one batch
    # a value then a tombstone of k-40, a tombstone then a value of k-41.
    {
        for i in $(seq 1 30); do kv "k-$i" one; done
        for i in $(seq 1 10); do kv "k-$i"; done
        kv k-5 back
        kv k-40 gone; kv k-40; kv k-41; kv k-41 after
    } | produce "$topic" -p 0 -K '|' -Z
    # Batches of 30: the values, then the tombstones and what follows them.
    DEF=${KV_DEF/'"on_conflict"'/'"tombstones": "delete", "on_conflict"'} start_pipeline svc latest "$topic" \
        STORAGE_MAX_POLL_RECORDS_LATEST=30
    wait_committed "$(group_of latest)" "$topic" 0 45
    stop_clean svc
    assert_eq 0 "$(sql "SELECT count(*) FROM dead_letter_events")" "dead letters"
    assert_eq "22|back|after|" "$(sql "SELECT count(*) || '|' || max(v) FILTER (WHERE k = 'k-5') || '|' ||
        max(v) FILTER (WHERE k = 'k-41') || '|' || coalesce(max(v) FILTER (WHERE k IN ('k-1', 'k-10', 'k-40')), '')
        FROM latest")" "rows; k-5 and k-41 stored after their tombstones; k-1, k-10 and k-40 deleted"
    assert_eq "10|2" "$(batch_sum svc latest deleted)|$(batch_lines svc latest)" "rows the tombstones deleted, batches"
    local state
    state=$(latest_state)

    # A replay from before the deletes, in batches of at most 30: within a
    # batch the values before each tombstone are superseded by it and never
    # written; across batches a deleted key's value is stored again until
    # the tombstone after it is read. The first batch finds most of its
    # rows stored, so the next one would be probed for stored rows first:
    # there k-5's and k-41's values, stored, stand after their tombstones,
    # which delete the rows before the values are written again. Either
    # way, the same state at the end.
    OP_ENV=("STORAGE_PIPELINES_FILE=$WORK/def-$TEST_NAME.json" "STORAGE_TOPIC_LATEST=$topic" STORAGE_PIPELINES=latest)
    op replay replay latest --to earliest
    assert_eq 0 "$OP_RC" "replay's exit: $(err replay)"
    DEF=${KV_DEF/'"on_conflict"'/'"tombstones": "delete", "on_conflict"'} start_pipeline again latest "$topic" \
        STORAGE_MAX_POLL_RECORDS_LATEST=30
    wait_committed "$(group_of latest)" "$topic" 0 45
    stop_clean again
    assert_eq 45 "$(batch_sum again latest size)" "records the replay read"
    local first
    first=$(grep -m1 -E 'info +\[latest\] batch size=' "$(svc_log again)")
    [[ $first =~ inserted=([0-9]+).*skipped=([0-9]+) ]] && [ $((2 * BASH_REMATCH[2])) -gt $((BASH_REMATCH[1] + BASH_REMATCH[2])) ] ||
        fail "the replay's first batch did not find most of its rows stored: $first"
    assert_eq "$state" "$(latest_state)" "the table after the replay"
}

test_tombstones_mark_the_rows_of_their_keys_and_a_newer_value_clears_the_mark() {
    begin_test tombmark
    register_apps "$APP"
    local topic i
    latest_table_and_topic "deleted_at TIMESTAMPTZ"
    { for i in $(seq 1 20); do kv "k-$i" one; done; } | produce "$topic" -p 0 -K '|' -Z
    { for i in $(seq 1 5); do kv "k-$i"; done; } | produce "$topic" -p 0 -K '|' -Z
    kv k-1 again | produce "$topic" -p 0 -K '|' -Z
    local def=${KV_DEF/'"on_conflict"'/'"tombstones": {"mark": "deleted_at"}, "on_conflict"'}
    # Batches of 20: the values, then the tombstones and k-1's new value.
    DEF=$def start_pipeline svc latest "$topic" STORAGE_MAX_POLL_RECORDS_LATEST=20
    wait_committed "$(group_of latest)" "$topic" 0 26
    stop_clean svc
    assert_eq 0 "$(sql "SELECT count(*) FROM dead_letter_events")" "dead letters"
    assert_eq "20|4|again" "$(sql "SELECT count(*) || '|' || count(deleted_at) FILTER (WHERE k IN ('k-2', 'k-3', 'k-4', 'k-5')) || '|' ||
        max(v) FILTER (WHERE k = 'k-1' AND deleted_at IS NULL) FROM latest")" \
        "rows kept; marked; k-1 back with its newer value and no mark"
    assert_eq 4 "$(sql "SELECT count(*) FROM latest WHERE deleted_at IS NOT NULL")" "marked rows in all"
    # k-1's tombstone marks its row before the newer value after it clears
    # the mark, as the two applied one by one do: five marks in all.
    assert_eq "5|2" "$(batch_sum svc latest deleted)|$(batch_lines svc latest)" "rows the tombstones marked, batches"
    assert_eq 0 "$(sql "SELECT count(*) FROM latest WHERE deleted_at IS NOT NULL AND
        deleted_at < to_timestamp(seen_ms / 1000.0)")" "marks older than the value they mark"
    local state
    state=$(sql "SELECT string_agg(k || v || seen_ms || coalesce(deleted_at::text, '-'), ',' ORDER BY k) FROM latest")

    # A replay in batches of 5: every record read again, each value meets
    # the version guard (not newer than the row's) and is skipped. The
    # tombstones of k-2..k-5 mark their rows again, at the same time; k-1's
    # tombstone, read in a batch before the newer value that cleared its
    # mark, finds a row newer than itself and leaves it unmarked.
    OP_ENV=("STORAGE_PIPELINES_FILE=$WORK/def-$TEST_NAME.json" "STORAGE_TOPIC_LATEST=$topic" STORAGE_PIPELINES=latest)
    op replay replay latest --to earliest
    assert_eq 0 "$OP_RC" "replay's exit: $(err replay)"
    DEF=$def start_pipeline again latest "$topic" STORAGE_MAX_POLL_RECORDS_LATEST=5
    wait_committed "$(group_of latest)" "$topic" 0 26
    stop_clean again
    # k-1's tombstone (offset 20) and its newer value (offset 25) in two
    # batches: the first offset of the batch holding 25 is past 20.
    local from25
    from25=$(grep -E 'info +\[latest\] batch size=' "$(svc_log again)" | grep -oE 'offsets=p0:[0-9]+-[0-9]+' |
        awk -F'[:-]' '$2 <= 25 && 25 <= $3 { print $2 }')
    assert_eq "26|0|0|yes" "$(batch_sum again latest size)|$(batch_sum again latest inserted)|$(batch_sum again latest updated)|$([ "${from25:-0}" -gt 20 ] && echo yes || echo "no: $from25")" \
        "the replay's records, rows inserted, rows updated, k-1's value in a batch after its tombstone's"
    assert_eq "$state" "$(sql "SELECT string_agg(k || v || seen_ms || coalesce(deleted_at::text, '-'), ',' ORDER BY k) FROM latest")" \
        "the table after the replay"
}

# Fencing (DESIGN.md: Progress in the database). A member killed while its
# batch [v1(k)] waits on a lock inside PostgreSQL leaves that transaction
# behind (its whole query, COMMIT included, was sent); the next owner stores
# v1(k) and k's tombstone; then the orphaned transaction gets its lock. Its
# positions moved on meanwhile: it must roll back whole, or k is back for
# good although the topic's last word on it is a delete.
test_a_killed_members_late_transaction_never_brings_a_deleted_key_back() {
    begin_test fence
    register_apps "$APP"
    local topic
    latest_table_and_topic
    # A gate the test closes: a write of `latest` waits on advisory lock
    # 4242 while it is closed, which a session of the test holds.
    sql "CREATE TABLE gate (closed BOOLEAN NOT NULL); INSERT INTO gate VALUES (true);
         CREATE FUNCTION wait_at_gate() RETURNS trigger LANGUAGE plpgsql AS \$\$
         BEGIN
             IF (SELECT closed FROM gate) THEN PERFORM pg_advisory_xact_lock_shared(4242); END IF;
             RETURN NEW;
         END \$\$;
         CREATE TRIGGER wait_at_gate BEFORE INSERT OR UPDATE ON latest FOR EACH ROW EXECUTE FUNCTION wait_at_gate()" >/dev/null
    PGAPPNAME=gatekeeper psql "$DB" -X -q -At -c "SELECT pg_advisory_lock(4242), pg_sleep(3600)" >/dev/null 2>&1 &
    local GATE_LOCK="l.locktype = 'advisory' AND l.classid = 0 AND l.objid = 4242 AND l.objsubid = 1"
    wait_for_sql "SELECT count(*) FROM pg_locks l WHERE $GATE_LOCK AND l.granted" 1 "$STALL_S"
    kv k v1 | produce "$topic" -p 0 -K '|' -Z
    local def=${KV_DEF/'"on_conflict"'/'"tombstones": "delete", "on_conflict"'}
    DEF=$def start_pipeline first latest "$topic"
    # The first member's batch waits at the gate: its session holds no
    # granted advisory lock and waits for one.
    wait_for_sql "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE $GATE_LOCK
                  AND NOT l.granted AND a.application_name = 'storage-consumer'" 1 "$STALL_S"
    svc_kill first >/dev/null
    sql "UPDATE gate SET closed = false" >/dev/null
    kv k | produce "$topic" -p 0 -K '|' -Z
    DEF=$def start_pipeline second latest "$topic"
    # The second member owns the partition once the group has evicted the
    # first (its session timeout) and stores both records.
    wait_committed "$(group_of latest)" "$topic" 0 2 60
    assert_eq "0|2" "$(sql "SELECT (SELECT count(*) FROM latest) || '|' || (SELECT next_offset FROM consumer_offsets
                             WHERE group_id = '$(group_of latest)')")" "rows and the position after the second member"
    # The orphaned transaction gets the lock, and ends (and the lock with
    # it: held or waited for by nobody).
    sql "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'gatekeeper'" >/dev/null
    wait_for_sql "SELECT count(*) FROM pg_locks l WHERE $GATE_LOCK" 0 "$STALL_S"
    stop_clean second
    assert_eq "0|2" "$(sql "SELECT (SELECT count(*) FROM latest) || '|' || (SELECT next_offset FROM consumer_offsets
                             WHERE group_id = '$(group_of latest)')")" \
        "rows and the position once the first member's late transaction ended"
}

# Redrive gives what a replay would (DESIGN.md: Resolving dead letters): a
# value dead-lettered before its key's tombstone was applied is not stored
# over the delete once its cause is fixed; one of a key without a later
# tombstone is.
test_redrive_never_brings_back_a_key_deleted_after_its_dead_letter() {
    begin_test redrivegone
    local topic
    latest_table_and_topic
    # The app is not registered yet: both values are dead letters; then
    # k-1's tombstone, applied (to no row).
    { kv k-1 one; kv k-2 two; kv k-1; } | produce "$topic" -p 0 -K '|' -Z
    local def=${KV_DEF/'"on_conflict"'/'"tombstones": "delete", "on_conflict"'}
    DEF=$def start_pipeline svc latest "$topic"
    wait_committed "$(group_of latest)" "$topic" 0 3
    stop_clean svc
    assert_eq "2|0" "$(sql "SELECT (SELECT count(*) FROM dead_letter_events WHERE error_type = 'unregistered_app')
                            || '|' || (SELECT count(*) FROM latest)")" "dead letters, rows"
    register_apps "$APP"
    OP_ENV=("STORAGE_PIPELINES_FILE=$WORK/def-$TEST_NAME.json" "STORAGE_TOPIC_LATEST=$topic" STORAGE_PIPELINES=latest)
    op redrive dead-letters redrive --pipeline latest
    assert_eq 0 "$OP_RC" "redrive's exit: $(err redrive)"
    assert_contains "$(out redrive)" "stored=1 still_failing=0"
    assert_contains "$(out redrive)" "after_tombstone=1 resolved=2"
    assert_eq "k-2=two" "$(sql "SELECT string_agg(k || '=' || v, ',' ORDER BY k) FROM latest")" \
        "rows after the redrive: k-1 stays deleted"
    assert_contains "$(sql "SELECT resolution FROM dead_letter_events WHERE kafka_offset = 0")" \
        "a tombstone of its key at a later offset of its partition was applied after it"
}

# PostgreSQL checks a table's CHECK constraints before ON CONFLICT finds
# the stored row, so the upsert refused an older value that breaks one,
# while the probe (which never sends it) skipped it. Whether a value is
# judged refused or older must not depend on the probe: an older value
# the table refuses is skipped, as the guard skips it; a new one is a dead
# letter.
test_a_refused_value_older_than_its_stored_row_is_skipped_as_the_probe_skips_it() {
    begin_test oldbad
    register_apps "$APP"
    local topic
    sql "CREATE TABLE latest (application_id BIGINT NOT NULL, k TEXT NOT NULL UNIQUE,
                              v TEXT NOT NULL CHECK (v <> 'bad'), seen_ms BIGINT NOT NULL)" >/dev/null
    topic=latest-$TEST_NAME
    broker_ctl topic-create "$topic" 1 >/dev/null
    # k-1 stored far in the future: the record's timestamp is older.
    sql "INSERT INTO latest VALUES ($(app_id "$APP"), 'k-1', 'kept', 99999999999999)" >/dev/null
    { kv k-1 bad; kv k-2 bad; } | produce "$topic" -p 0 -K '|' -Z
    DEF=$KV_DEF start_pipeline svc latest "$topic"
    wait_committed "$(group_of latest)" "$topic" 0 2
    stop_clean svc
    assert_eq "k-1=kept" "$(sql "SELECT string_agg(k || '=' || v, ',' ORDER BY k) FROM latest")" "rows"
    assert_eq "1 database_rejected" "$(sql "SELECT string_agg(kafka_offset || ' ' || error_type, ',') FROM dead_letter_events")" \
        "dead letters: the new key's refused value alone"
    assert_eq 1 "$(batch_sum svc latest skipped)" "records skipped"
}

# A row the service did not write may hold no version: it is older than
# any, for the upsert's guard as for the mark's.
test_a_stored_row_without_a_version_is_older_than_any_value() {
    begin_test nullver
    register_apps "$APP"
    local topic
    sql "CREATE TABLE latest (application_id BIGINT NOT NULL, k TEXT NOT NULL UNIQUE, v TEXT NOT NULL, seen_ms BIGINT)" >/dev/null
    topic=latest-$TEST_NAME
    broker_ctl topic-create "$topic" 1 >/dev/null
    sql "INSERT INTO latest VALUES ($(app_id "$APP"), 'k-1', 'unversioned', NULL)" >/dev/null
    kv k-1 observed | produce "$topic" -p 0 -K '|' -Z
    DEF=$KV_DEF start_pipeline svc latest "$topic"
    wait_committed "$(group_of latest)" "$topic" 0 1
    stop_clean svc
    assert_eq "k-1=observed|t" "$(sql "SELECT k || '=' || v || '|' || CASE WHEN seen_ms IS NOT NULL THEN 't' ELSE 'f' END FROM latest")" "the row"
    assert_eq 1 "$(batch_sum svc latest updated)" "rows updated"
}

# The session's own stage (a temporary table named storage_stage) never
# shadows a user's table of that name: every statement names the user's
# table by its schema, and the stage by pg_temp.
test_a_users_table_named_like_the_stage_is_written_through_every_path() {
    begin_test stagename
    register_apps "$APP"
    local topic=stage-$TEST_NAME i
    sql "CREATE TABLE storage_stage (application_id BIGINT NOT NULL, k TEXT NOT NULL UNIQUE, v TEXT NOT NULL,
                                     seen_ms BIGINT NOT NULL)" >/dev/null
    broker_ctl topic-create "$topic" 1 >/dev/null
    # New keys (COPY into the table once predicted new), then newer values of
    # the same keys (the upsert through the stage: a later producer's
    # records, later timestamps) in batches of 10.
    for i in $(seq 1 30); do kv "k-$i" one; done | produce "$topic" -p 0 -K '|' -Z
    local first_done
    first_done=$(now_ms)
    until [ "$(now_ms)" -gt "$first_done" ]; do :; done
    for i in $(seq 1 30); do kv "k-$i" two; done | produce "$topic" -p 0 -K '|' -Z
    DEF=${KV_DEF/'"table": "latest"'/'"table": "storage_stage"'} start_pipeline svc latest "$topic" \
        STORAGE_MAX_POLL_RECORDS_LATEST=10
    wait_committed "$(group_of latest)" "$topic" 0 60
    stop_clean svc
    assert_eq "30|30" "$(sql "SELECT count(*) || '|' || count(*) FILTER (WHERE v = 'two') FROM public.storage_stage")" \
        "rows of the user's table, at their newest value"
    assert_eq 0 "$(sql "SELECT count(*) FROM dead_letter_events")" "dead letters"
}

test_a_tombstone_rule_without_a_key_of_the_records_own_is_refused() {
    begin_test tombrefused
    local topic
    latest_table_and_topic
    DEF='{"name": "latest", "table": "latest",
          "application": {"member": "package_name", "column": "application_id"},
          "fields": [{"member": "k", "required": true}, {"member": "v", "required": true},
                     {"record": "timestamp", "column": "seen_ms", "required": true}],
          "key": ["k"], "tombstones": "delete", "on_conflict": "nothing"}' start_pipeline svc latest "$topic"
    assert_eq 2 "$(svc_wait svc 60)" "exit"
    assert_contains "$(cat "$(svc_log svc)")" \
        "tombstones: a tombstone has no value: the natural key's column k must come from the record"
}

test_a_table_keyed_by_a_member_of_a_json_key_takes_its_values_and_its_tombstones() {
    begin_test jsonkey
    register_apps "$APP"
    sql "CREATE TABLE items (application_id BIGINT NOT NULL, id INT NOT NULL UNIQUE, v TEXT NOT NULL)" >/dev/null
    local topic=items-$TEST_NAME i
    broker_ctl topic-create "$topic" 1 >/dev/null
    {
        for i in $(seq 1 20); do printf '{"id": %s}|{"package_name":"%s","v":"v%s"}\n' "$i" "$APP" "$i"; done
        for i in $(seq 1 5); do printf '{"id": %s}|\n' "$i"; done
        printf 'id-6|{"package_name":"%s","v":"bad"}\n' "$APP"
        printf '{"id": "6"}|{"package_name":"%s","v":"bad"}\n' "$APP"
    } | produce "$topic" -p 0 -K '|' -Z
    DEF='{"name": "items", "batch_size": 10, "table": "items",
          "application": {"member": "package_name", "column": "application_id"},
          "fields": [{"record": "key", "member": "id", "required": true}, {"member": "v", "required": true}],
          "key": ["id"], "tombstones": "delete", "on_conflict": "nothing"}' start_pipeline svc items "$topic"
    wait_committed "$(group_of items)" "$topic" 0 27
    stop_clean svc
    assert_eq "15|6-20" "$(sql "SELECT count(*) || '|' || min(id) || '-' || max(id) FROM items")" "rows left, their ids"
    assert_eq 5 "$(batch_sum svc items deleted)" "rows the tombstones deleted"
    assert_eq "25 invalid_json|26 invalid_field" \
        "$(sql "SELECT string_agg(kafka_offset || ' ' || error_type, '|' ORDER BY kafka_offset) FROM dead_letter_events")" \
        "dead letters: a key that is not JSON, a member that is not an integer"
    assert_contains "$(sql "SELECT string_agg(error_detail, ' / ' ORDER BY kafka_offset) FROM dead_letter_events")" \
        "record key.id: the key is not JSON"
}

run_tests
