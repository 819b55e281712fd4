#!/usr/bin/env bash
# Records as Kafka producers write them (DESIGN.md: Formats): the same
# orders as JSON, Kafka Connect's JSON, Avro and JSON Schema in the schema
# registry's wire format store four equal tables; records of three writer's
# schemas interleaved in one topic all store; a registry that goes away
# makes the batch wait, never dead-letter; bad bytes are dead letters of
# their own class, and a redrive stores them once their schema is known;
# an Avro key's members delete by tombstone. Records are encoded by
# Confluent's own serializer (tests/support/registry_records.py); the
# registry is tests/support/schema_registry.py.
. "$(dirname "$0")/lib.sh"

pg_start
broker_start

PY=/usr/bin/python3
RECORDS=$TOP/tests/support/registry_records.py
REGISTRY_PID=""
REGISTRY_URL=""

# Start the test's registry (again, after registry_stop: same port, same
# schemas) and export REGISTRY_URL.
registry_start() { # [port]
    rm -f "$WORK/registry.port"
    $PY "$TOP/tests/support/schema_registry.py" --state "$WORK/registry-$TEST_NAME.json" \
        --port-file "$WORK/registry.port" --port "${1:-0}" 2>>"$WORK/registry-$TEST_NAME.log" &
    REGISTRY_PID=$!
    track "$REGISTRY_PID"
    wait_until "the schema registry listens" "[ -s '$WORK/registry.port' ]"
    REGISTRY_URL=http://127.0.0.1:$(cat "$WORK/registry.port")
}

registry_stop() {
    kill "$REGISTRY_PID" 2>/dev/null || true
    wait "$REGISTRY_PID" 2>/dev/null || true
}

# Encode with Confluent's serializer (registering the schemas), then produce.
records() { # file generator args...
    local file=$1
    shift
    $PY "$RECORDS" "$@" --registry "$REGISTRY_URL" >"$WORK/$file"
}
produce_records() { # file topic [partition]
    $PY "$RECORDS" produce --bootstrap "$BOOTSTRAP" --topic "$2" --partition "${3:-0}" <"$WORK/$1"
}

# A test with a registry of its own, one topic of one partition (none when
# TOPIC is empty) and a table (CREATE TABLE ..., if given).
begin_registry_test() { # name topic [create-table-sql]
    begin_test "$1"
    unset TOPIC_APP_STATS TOPIC_REVIEWS TOPIC_NETWORK_METRICS
    registry_start
    [ -z "$2" ] || broker_ctl topic-create "$2" 1 >/dev/null
    [ -z "${3:-}" ] || sql "$3" >/dev/null
}
ITEMS_TABLE="CREATE TABLE items (id BIGINT PRIMARY KEY, name TEXT NOT NULL, note TEXT, score INTEGER)"

pipelines_file() { # json
    echo "{\"pipelines\": [$1]}" >"$WORK/pipelines-$TEST_NAME.json"
    echo "$WORK/pipelines-$TEST_NAME.json"
}

order_pipeline() { # name format
    cat <<JSON
{"name": "orders-$1", "topic": "orders-$1-$TEST_NAME", "table": "orders_${1//-/_}", "format": "$2",
  "fields": [{"member": "order_id", "required": true}, {"member": "amount"}, {"member": "day"},
             {"member": "placed_at"}, {"path": "/customer/email", "column": "customer_email"},
             {"member": "lines", "required": true}],
  "key": ["order_id"], "on_conflict": "nothing"}
JSON
}

test_the_same_orders_in_four_formats_store_four_equal_tables() {
    begin_registry_test four ""
    local f defs="" sep=""
    for f in json connect avro json-schema; do
        broker_ctl topic-create "orders-$f-$TEST_NAME" 1 >/dev/null
        sql "CREATE TABLE orders_${f//-/_} (order_id BIGINT PRIMARY KEY, amount NUMERIC(38, 9), day DATE,
                                           placed_at TIMESTAMPTZ, customer_email TEXT, lines JSONB NOT NULL)" >/dev/null
        local format=${f//-/_}
        [ "$f" = connect ] && format=connect_json
        defs="$defs$sep$(order_pipeline "$f" "$format")"
        sep=,
        records "$f.txt" orders "$([ "$f" = connect ] && echo connect || echo "$format")" --topic "orders-$f-$TEST_NAME"
        produce_records "$f.txt" "orders-$f-$TEST_NAME"
    done
    start_service svc STORAGE_PIPELINES=orders-json,orders-connect,orders-avro,orders-json-schema \
        "STORAGE_PIPELINES_FILE=$(pipelines_file "$defs")" "STORAGE_SCHEMA_REGISTRY_URL=$REGISTRY_URL"
    for f in json connect avro json-schema; do
        wait_committed "$GROUP_PREFIX.orders-$f" "orders-$f-$TEST_NAME" 0 200
    done
    assert_eq 0 "$(sql "SELECT count(*) FROM dead_letter_events")" "dead letters"
    for f in connect avro json_schema; do
        assert_eq 200 "$(sql "SELECT count(*) FROM orders_$f")" "rows from $f"
        assert_eq "" "$(sql "(SELECT 'json', * FROM orders_json EXCEPT SELECT 'json', * FROM orders_$f)
                              UNION ALL (SELECT '$f', * FROM orders_$f EXCEPT SELECT '$f', * FROM orders_json)
                              ORDER BY 2, 1 LIMIT 6")" "rows that differ between JSON and $f"
    done
    # Decimals of 38 digits with scale 9, every digit kept.
    local exact
    exact=$(sql "SELECT count(*) FROM orders_avro WHERE amount::text ~ '^-?[0-9]{29}\.[0-9]{9}$'")
    [ "$exact" -gt 20 ] || fail "only $exact amounts of 38 digits among the Avro orders"
    assert_eq "$exact" "$(sql "SELECT count(*) FROM orders_json WHERE amount::text ~ '^-?[0-9]{29}\.[0-9]{9}$'")" \
        "38-digit amounts, Avro and JSON"
}

item_pipeline() { # topic [extra members]
    cat <<JSON
{"name": "items", "topic": "$1", "table": "items", "format": "avro",
  "fields": [{"member": "id", "required": true}, {"member": "name", "required": true}, {"member": "note"},
             {"member": "score"}${2:-}],
  "key": ["id"], "on_conflict": "nothing"}
JSON
}

# v1, v2 (a field added, with a default) and v3 (an optional field dropped)
# of one subject, interleaved in one topic: each record is read with its
# own writer's schema, and a field its schema lacks is absent (NULL).
test_records_of_three_writer_schemas_in_one_topic_all_store() {
    begin_registry_test evolve items-evolve "$ITEMS_TABLE"
    records items.txt evolving --topic "items-$TEST_NAME" --count 300
    produce_records items.txt "items-$TEST_NAME"
    assert_eq 3 "$(curl -sf "$REGISTRY_URL/subjects/items-$TEST_NAME-value/versions/latest" | jq .version)" \
        "versions of the subject"
    start_service svc STORAGE_PIPELINES=items "STORAGE_PIPELINES_FILE=$(pipelines_file "$(item_pipeline "items-$TEST_NAME")")" \
        "STORAGE_SCHEMA_REGISTRY_URL=$REGISTRY_URL"
    wait_committed "$GROUP_PREFIX.items" "items-$TEST_NAME" 0 300
    assert_eq 0 "$(sql "SELECT count(*) FROM dead_letter_events")" "dead letters"
    assert_eq "100|100|100|0|100
100|100|100|100|100
100|100|0|100|100" "$(sql "SELECT count(*), count(name), count(note), count(score),
                                 count(*) FILTER (WHERE name = 'item ' || id) FROM items GROUP BY id % 3 ORDER BY id % 3")" \
        "per writer's schema (v1, v2, v3): rows, names, notes, scores, names as sent"
    assert_eq "3|item 3|note 3|
4|item 4|note 4|40
5|item 5||50" "$(sql "SELECT id, name, note, score FROM items WHERE id BETWEEN 3 AND 5 ORDER BY id")" "one of each"
    # Three schemas asked for once each, then kept.
    assert_eq 3 "$(grep -c 'GET /schemas/ids/' "$WORK/registry-$TEST_NAME.log")" "schema requests to the registry"
    # v3 dropped the optional note: said, not refused.
    assert_contains "$(cat "$(svc_log svc)")" "warn  [items] schema registry: pipeline items, field note: not found in items-$TEST_NAME-value's latest schema (version 3, id 3)"

    # verify reads the definition against the subject's latest schema.
    OP_ENV=("STORAGE_PIPELINES=items" "STORAGE_SCHEMA_REGISTRY_URL=$REGISTRY_URL"
            "STORAGE_PIPELINES_FILE=$WORK/pipelines-$TEST_NAME.json")
    op verify verify
    assert_eq 0 "$OP_RC" "verify: $(out verify)"
    assert_contains "$(out verify)" "pipeline items, field note: not found in items-$TEST_NAME-value's latest schema (version 3, id 3)"
    pipelines_file "$(item_pipeline "items-$TEST_NAME" ', {"path": "/extra/rank", "column": "rank", "required": true}')" >/dev/null
    sql "ALTER TABLE items ADD COLUMN rank INTEGER" >/dev/null
    op verify-missing verify
    assert_eq 1 "$OP_RC" "verify with a required field the schema lacks"
    assert_contains "$(out verify-missing)" "pipeline items, field /extra/rank: not found in items-$TEST_NAME-value's latest schema (version 3, id 3): records written with it are missing_field dead letters"
    assert_contains "$(out verify-missing)" "verify: broken at stage registry"
}

# Bad bytes are dead letters of their own class, keeping the bytes; once
# the unknown id is registered, a redrive decodes and stores its record.
test_bad_bytes_are_dead_letters_of_their_own_class_and_redrive_once_the_schema_exists() {
    local topic=items-bad
    begin_registry_test bad "$topic" "$ITEMS_TABLE"
    records bad.txt bad --topic "$topic" --unknown-id 2
    produce_records bad.txt "$topic"
    local defs
    defs=$(pipelines_file "$(item_pipeline "$topic")")
    start_service svc STORAGE_PIPELINES=items "STORAGE_PIPELINES_FILE=$defs" "STORAGE_SCHEMA_REGISTRY_URL=$REGISTRY_URL"
    wait_committed "$GROUP_PREFIX.items" "$topic" 0 7
    assert_eq "1|good" "$(sql "SELECT id, name FROM items")" "the good record"
    assert_eq "1|no_magic_byte|the value does not start with the schema registry's magic byte 0 (first byte 0x7b)
2|short_header|the value is 3 bytes, shorter than the schema registry's header (magic byte and 4-byte id)
3|unknown_schema|the value's schema id 2 is not in the schema registry: HTTP 404: Schema 2 not found
4|undecodable|the value (schema id 1): the bytes do not decode with the writer's schema: Cannot read string value: Cannot read 4 bytes from memory buffer
5|trailing_bytes|the value (schema id 1): bytes are left after the record the writer's schema reads
6|undecodable|the value (schema id 1): the bytes do not decode with the writer's schema: Cannot read string value: Cannot allocate buffer for string value" \
        "$(sql "SELECT kafka_offset, error_type, error_detail FROM dead_letter_events ORDER BY kafka_offset")" \
        "the dead letters, each its own class"
    assert_eq "$(sed -n 4p "$WORK/bad.txt" | cut -d' ' -f2)" \
        "$(sql "SELECT encode(payload, 'hex') FROM dead_letter_events WHERE kafka_offset = 3")" "the bytes kept as sent"
    stop_clean svc

    assert_eq 2 "$($PY "$RECORDS" register-later --registry "$REGISTRY_URL" --topic "$topic")" "the id registered"
    OP_ENV=("STORAGE_PIPELINES=items" "STORAGE_PIPELINES_FILE=$defs" "STORAGE_SCHEMA_REGISTRY_URL=$REGISTRY_URL")
    op redrive dead-letters redrive --pipeline items
    assert_eq 0 "$OP_RC" "redrive: $(err redrive)"
    assert_contains "$(out redrive)" "examined=6 stored=1 still_failing=5"
    assert_eq "1|good
4|later" "$(sql "SELECT id, name FROM items ORDER BY id")" "the redriven record"
    assert_eq "unknown_schema" "$(sql "SELECT error_type FROM dead_letter_events WHERE resolved_at IS NOT NULL")" \
        "the dead letter resolved"
}

# Registry down: nothing dead-lettered, nothing lost. The records of a
# schema the pipeline has not fetched wait, /readyz and the metrics say
# why, and once the registry answers again every record is stored.
test_a_registry_that_goes_away_mid_ingest_makes_the_batch_wait_and_loses_nothing() {
    local topic=items-outage port port_registry
    begin_registry_test outage "$topic" "$ITEMS_TABLE"
    port=$(free_port)
    port_registry=$(cat "$WORK/registry.port")
    # v1, v2 and v3 records, encoded while the registry is up; the first
    # 30 are v1 only.
    records all.txt evolving --topic "$topic" --count 300
    awk 'NR % 3 == 1' "$WORK/all.txt" | head -n 30 >"$WORK/first.txt"
    awk '!(NR % 3 == 1 && ++n <= 30)' "$WORK/all.txt" >"$WORK/rest.txt"
    produce_records first.txt "$topic"
    start_service svc STORAGE_PIPELINES=items "STORAGE_PIPELINES_FILE=$(pipelines_file "$(item_pipeline "$topic")")" \
        "STORAGE_SCHEMA_REGISTRY_URL=$REGISTRY_URL" STORAGE_METRICS_ADDR="127.0.0.1:$port" \
        STORAGE_DB_RETRY_MAX_ATTEMPTS=8 STORAGE_DB_RETRY_BASE_MS=100
    wait_committed "$GROUP_PREFIX.items" "$topic" 0 30
    registry_stop
    produce_records rest.txt "$topic"
    wait_until "the pipeline retried for want of the registry" \
        "[ \"\$(metric_value $port 'storage_consumer_schema_registry_failures_total{pipeline=\"items\"}')\" -ge 2 ]"
    local ready
    ready=$(http_get "$port" /readyz || true)
    assert_contains "$ready" "items: not ready: the schema registry does not answer"
    assert_eq "0|30" "$(sql "SELECT (SELECT count(*) FROM dead_letter_events), (SELECT count(*) FROM items)")" \
        "dead letters and rows while the registry is away"
    assert_contains "$(cat "$(svc_log svc)")" "transient schema registry error, retrying the same batch"
    registry_start "$port_registry"
    wait_committed "$GROUP_PREFIX.items" "$topic" 0 300
    assert_eq "0|300" "$(sql "SELECT (SELECT count(*) FROM dead_letter_events), (SELECT count(*) FROM items)")" \
        "dead letters and rows after the registry came back"
    assert_running svc
    wait_until "ready again" "http_get $port /readyz | grep -q 'items: ready'"
}

# Every Avro type and logical type, each into the column type it belongs in.
test_every_avro_type_stores_into_its_column_type() {
    local topic=types-types
    begin_registry_test types "$topic" "CREATE TABLE everything (id INTEGER PRIMARY KEY, flag BOOLEAN, ratio DOUBLE PRECISION, small REAL,
           color TEXT, raw BYTEA, mac BYTEA, price NUMERIC(38, 9), uid UUID, at_us TIMESTAMPTZ, local_ms TIMESTAMP,
           tick_us TIME, tick_ms TIME, tags TEXT[], attrs JSONB, also TEXT, record JSONB)"
    records types.txt types --topic "$topic"
    produce_records types.txt "$topic"
    local m f members=""
    members='{"member": "id", "required": true}, '
    for m in flag ratio small color raw mac price uid at_us local_ms tick_us tick_ms tags attrs also; do
        members="$members{\"member\": \"$m\"}, "
    done
    f=$(pipelines_file '{"name": "everything", "topic": "'"$topic"'", "table": "everything", "format": "avro",
  "fields": ['"$members"'{"path": "", "column": "record"}], "key": ["id"], "on_conflict": "nothing"}')
    start_service svc STORAGE_PIPELINES=everything "STORAGE_PIPELINES_FILE=$f" "STORAGE_SCHEMA_REGISTRY_URL=$REGISTRY_URL"
    wait_committed "$GROUP_PREFIX.everything" "$topic" 0 1
    assert_eq 0 "$(sql "SELECT count(*) FROM dead_letter_events")" "dead letters: $(sql "SELECT error_detail FROM dead_letter_events")"
    assert_eq "1|t|0.1|1.5|GREEN|\\x0001ff|\\x001b213c4d5e|-12345678901234567890123456789.123456789|1b4e28ba-2fa1-11d2-883f-0016d3cca427|2026-12-01 10:00:00.123456+00|2026-12-01 10:00:00.123|23:59:59.999999|00:00:01.5|{a,\"b,c\",\"d\\\"e\"}|{\"x\": 1, \"y\": -2}|RED" \
        "$(usql "SELECT id, flag, ratio, small, color, raw, mac, price, uid, at_us, local_ms, tick_us, tick_ms, tags,
                        attrs, also FROM everything")" "every type"
    assert_eq 'GREEN|-12345678901234567890123456789.123456789|["a", "b,c", "d\"e"]' \
        "$(sql "SELECT record->>'color', record->'price', record->'tags' FROM everything")" "the whole value, as JSON"
}

# An Avro key's members are key columns, and its tombstones delete by them.
test_an_avro_keys_members_key_the_rows_and_its_tombstones_delete_them() {
    local topic=keyed-keyed
    begin_registry_test keyed "$topic" "CREATE TABLE keyed (shop TEXT, id BIGINT, name TEXT NOT NULL, PRIMARY KEY (shop, id))"
    records keyed.txt keyed --topic "$topic"
    produce_records keyed.txt "$topic"
    local defs
    defs=$(pipelines_file '{"name": "keyed", "topic": "'"$topic"'", "table": "keyed", "format": "avro", "key_format": "avro",
  "fields": [{"record": "key", "member": "shop", "required": true}, {"record": "key", "member": "id", "required": true},
             {"member": "name", "required": true}],
  "key": ["shop", "id"], "tombstones": "delete", "on_conflict": "nothing"}')
    start_service svc STORAGE_PIPELINES=keyed "STORAGE_PIPELINES_FILE=$defs" "STORAGE_SCHEMA_REGISTRY_URL=$REGISTRY_URL"
    wait_committed "$GROUP_PREFIX.keyed" "$topic" 0 13
    assert_eq 0 "$(sql "SELECT count(*) FROM dead_letter_events")" "dead letters"
    assert_eq "s0 0 item 0,s0 2 item 2,s1 3 item 3,s1 5 item 5,s0 6 item 6,s0 8 item 8,s1 9 item 9" \
        "$(sql "SELECT string_agg(shop || ' ' || id || ' ' || name, ',' ORDER BY id) FROM keyed")" "rows left after the tombstones"
}

run_tests
