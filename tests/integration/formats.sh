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
    begin_test four
    unset TOPIC_APP_STATS TOPIC_REVIEWS TOPIC_NETWORK_METRICS
    registry_start
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

run_tests
