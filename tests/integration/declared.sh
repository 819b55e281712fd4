#!/usr/bin/env bash
# Pipelines declared in a file, their checks read from the database
# (DESIGN.md: Pipelines are declared): a fourth pipeline made of one
# migration and one definition, and no C, gets everything the three have; a
# widened or narrowed column is honoured at the next start; a definition
# that disagrees with its table stops start-up naming the pipeline, the
# field and the column.
. "$(dirname "$0")/lib.sh"

pg_start
broker_start

APP=com.example.perms

# The crawler's app-permissions, as a user would add it: a migration of
# their own, and the built-in definitions plus one.
create_permissions_table() {
    sql "CREATE TABLE app_permissions (
           id               BIGSERIAL PRIMARY KEY,
           application_id   BIGINT NOT NULL REFERENCES apps_registry_application (id),
           permission       VARCHAR(255) NOT NULL,
           protection_level VARCHAR(32) NOT NULL,
           observed_at      TIMESTAMPTZ NOT NULL,
           first_seen_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
           CONSTRAINT app_permissions_key UNIQUE (application_id, permission))" >/dev/null
}

PERMISSIONS_DEF='{"name": "app-permissions", "batch_size": 100, "table": "app_permissions",
      "application": {"member": "package_name", "column": "application_id"},
      "fields": [{"member": "permission", "required": true},
                 {"member": "protection_level", "required": true},
                 {"member": "first_seen", "column": "observed_at", "required": true}],
      "key": ["application_id", "permission"],
      "on_conflict": {"update": ["protection_level", "observed_at"], "when_newer": "observed_at"},
      "never_writes": ["first_seen_at"]}'

perm() { # package permission level observed
    printf '{"package_name":"%s","permission":"%s","protection_level":"%s","first_seen":"%s"}\n' "$@"
}

permissions() { usql "SELECT permission || ' ' || protection_level || ' ' || observed_at FROM app_permissions ORDER BY permission"; }

test_a_fourth_pipeline_declared_in_a_file_gets_what_the_three_have() {
    begin_test fourth
    register_apps "$APP"
    create_permissions_table
    local topic=app-permissions-fourth port body
    broker_ctl topic-create "$topic" 3 >/dev/null
    definitions_with "$WORK/fourth.json" "$PERMISSIONS_DEF"
    OP_ENV=("STORAGE_PIPELINES_FILE=$WORK/fourth.json" "STORAGE_TOPIC_APP_PERMISSIONS=$topic")

    # --help lists its settings.
    op help --help
    assert_contains "$(out help)" "STORAGE_TOPIC_APP_PERMISSIONS"
    assert_contains "$(out help)" "STORAGE_MAX_POLL_RECORDS_APP_PERMISSIONS  batch size of app-permissions (beats the shared one) (default: 100)"

    # One batch: two permissions, one of them observed twice (the newer
    # wins), a level too long for its column, a missing permission, an
    # unregistered app.
    {
        perm "$APP" CAMERA dangerous 2026-11-29T10:00:00Z
        perm "$APP" INTERNET normal 2026-11-29T09:00:00Z
        perm "$APP" INTERNET signature 2026-11-29T11:00:00Z
        perm "$APP" LOCATION "$(printf 'x%.0s' $(seq 1 40))" 2026-11-29T10:00:00Z
        printf '{"package_name":"%s","protection_level":"normal","first_seen":"2026-11-29T10:00:00Z"}\n' "$APP"
        perm com.example.unknown CAMERA normal 2026-11-29T10:00:00Z
    } | produce "$topic" -p 0
    port=$(free_port)
    start_service svc STORAGE_PIPELINES=app-permissions "STORAGE_PIPELINES_FILE=$WORK/fourth.json" \
        "STORAGE_TOPIC_APP_PERMISSIONS=$topic" STORAGE_METRICS_ADDR="127.0.0.1:$port"
    wait_for_sql "SELECT count(*) FROM dead_letter_events" 3
    wait_for_sql "SELECT count(*) FROM app_permissions" 2
    assert_eq "CAMERA dangerous 2026-11-29 10:00:00+00
INTERNET signature 2026-11-29 11:00:00+00" "$(permissions)" "stored, de-duplicated to the newest observation"
    assert_eq "invalid_field|protection_level: 40 characters, longer than the column's 32
missing_field|permission: required field is missing
unregistered_app|package_name: com.example.unknown is not registered in apps_registry_application" \
        "$(sql "SELECT error_type || '|' || error_detail FROM dead_letter_events ORDER BY kafka_offset")" \
        "dead letters and their reasons"
    wait_committed "$GROUP_PREFIX.app-permissions" "$topic" 0 6
    assert_eq "0|6" "$(sql "SELECT partition || '|' || next_offset FROM consumer_offsets
                            WHERE group_id = '$GROUP_PREFIX.app-permissions' AND topic = '$topic' AND next_offset > 0")" \
        "the position in the database"

    # An older observation is skipped by the version guard; a newer one updates.
    { perm "$APP" CAMERA normal 2026-11-29T08:00:00Z; perm "$APP" INTERNET normal 2026-11-29T12:00:00Z; } |
        produce "$topic" -p 1
    wait_committed "$GROUP_PREFIX.app-permissions" "$topic" 1 2
    assert_eq "CAMERA dangerous 2026-11-29 10:00:00+00
INTERNET normal 2026-11-29 12:00:00+00" "$(permissions)" "the guard keeps the newer observation"
    # Counted as one update and one skip (in one batch or two).
    assert_eq "updated=1 skipped=1" "$(grep -E '\[app-permissions\] batch size=.* offsets=p1:' "$(svc_log svc)" |
        awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); c[kv[1]] += kv[2] } }
             END { printf "updated=%d skipped=%d", c["updated"], c["skipped"] }')" "the counts of partition 1's batches"

    # Metrics and the status page name it (the lag gauges move at the
    # pipeline's next idle turn, after the commit).
    body=$(wait_metrics "$port" "storage_consumer_lag{pipeline=\"app-permissions\",topic=\"$topic\",partition=\"0\"} 0")
    assert_contains "$body" 'storage_consumer_rows_inserted_total{pipeline="app-permissions"} 2'
    assert_contains "$body" 'storage_consumer_dead_letters_total{pipeline="app-permissions",error_type="invalid_field"} 1'
    assert_contains "$(http_get "$port" /)" "app-permissions"
    stop_clean svc

    # verify checks its topic, table and group.
    op verify verify
    assert_eq 0 "$OP_RC" "verify's exit: $(out verify)"
    assert_contains "$(out verify)" "$topic partitions=3"
    assert_contains "$(out verify)" "app_permissions=2"

    # Replay from the earliest offset rewrites nothing.
    local before
    before=$(usql "SELECT xmin, t::text FROM app_permissions t ORDER BY id")
    op replay replay app-permissions --to earliest
    assert_eq 0 "$OP_RC" "replay's exit: $(err replay)"
    start_service again STORAGE_PIPELINES=app-permissions "STORAGE_PIPELINES_FILE=$WORK/fourth.json" \
        "STORAGE_TOPIC_APP_PERMISSIONS=$topic"
    wait_for_log again 'app-permissions\] batch size=' 1 60
    wait_committed "$GROUP_PREFIX.app-permissions" "$topic" 1 2
    wait_committed "$GROUP_PREFIX.app-permissions" "$topic" 0 6
    stop_clean again
    # The replay read every record again, once: without that, the rows and
    # dead letters below would be unchanged whatever a replay does.
    assert_each_offset_stored_once app-permissions "$topic" again
    assert_eq "$before" "$(usql "SELECT xmin, t::text FROM app_permissions t ORDER BY id")" "rows after the replay"
    assert_eq 3 "$(sql "SELECT count(*) FROM dead_letter_events")" "dead letters after the replay"

    # The unregistered app's message is redriven once the app exists.
    register_apps com.example.unknown
    op redrive dead-letters redrive --pipeline app-permissions --type unregistered_app
    assert_eq 0 "$OP_RC" "redrive's exit: $(err redrive)"
    assert_contains "$(out redrive)" "redrive pipeline=app-permissions examined=1 stored=1"
    assert_eq "normal" "$(sql "SELECT protection_level FROM app_permissions WHERE application_id = $(app_id com.example.unknown)")" \
        "the redriven permission"
}

# A review whose user_name has N characters, with app_version V.
long_review() { # id chars app_version
    printf '{"package_name":"%s","review_id":"%s","user_name":"%s","score":4,"thumbs_up_count":1,"app_version":"%s","reviewed_at":"2026-11-01T00:00:00Z","last_synced_at":"2026-11-29T10:00:00Z"}\n' \
        "$APP" "$1" "$(printf 'u%.0s' $(seq 1 "$2"))" "$3"
}

test_a_widened_or_narrowed_column_is_honoured_at_the_next_start() {
    begin_test widen
    register_apps "$APP"
    long_review w1 300 1.0 | produce "$TOPIC_REVIEWS" -p 0
    start_service one STORAGE_PIPELINES=reviews
    wait_for_sql "SELECT error_type || '|' || error_detail FROM dead_letter_events" \
        "invalid_field|user_name: 300 characters, longer than the column's 255"
    stop_clean one

    # Widened: the same length is stored, and the old dead letter redriven.
    sql "ALTER TABLE reviews ALTER COLUMN user_name TYPE VARCHAR(400)" >/dev/null
    long_review w2 300 1.0 | produce "$TOPIC_REVIEWS" -p 0
    start_service two STORAGE_PIPELINES=reviews
    wait_for_sql "SELECT count(*) FROM reviews WHERE review_id = 'w2'" 1
    assert_eq 1 "$(sql "SELECT count(*) FROM dead_letter_events")" "dead letters after the widening"
    stop_clean two
    op redrive dead-letters redrive --pipeline reviews
    assert_eq 0 "$OP_RC" "redrive's exit: $(err redrive)"
    assert_eq "300 300" "$(sql "SELECT string_agg(length(user_name)::text, ' ' ORDER BY review_id) FROM reviews")" \
        "both long names stored"

    # Narrowed: a value the column cannot hold is refused at decoding,
    # naming the field, not by PostgreSQL after a bisection of the batch.
    sql "ALTER TABLE reviews ALTER COLUMN app_version TYPE VARCHAR(16)" >/dev/null
    { long_review n1 5 "$(printf 'v%.0s' $(seq 1 20))"; long_review n2 5 1.2.3; } | produce "$TOPIC_REVIEWS" -p 0
    start_service three STORAGE_PIPELINES=reviews
    wait_for_sql "SELECT count(*) FROM reviews WHERE review_id = 'n2'" 1
    assert_eq "invalid_field|app_version: 20 characters, longer than the column's 16" \
        "$(sql "SELECT error_type || '|' || error_detail FROM dead_letter_events WHERE NOT resolved_at IS NOT NULL")" \
        "the narrowed column's dead letter"
    stop_clean three
}

# A user's table NAME of their own: an id, the application, a key k of
# type KEY_TYPE, and COLUMNS.
user_table() { # name key_type columns
    sql "CREATE TABLE $1 (
           id             BIGSERIAL PRIMARY KEY,
           application_id BIGINT NOT NULL REFERENCES apps_registry_application (id),
           k              $2 NOT NULL,
           $3,
           UNIQUE (application_id, k))" >/dev/null
}

# Its pipeline NAME (fields k, required, and MEMBERS, each filling its
# column) stores the records on stdin from a topic of one partition; the
# service stops once all are committed.
store_through_own_pipeline() { # name members...
    local name=$1 topic=$1-own fields='{"member": "k", "required": true}' m n upper
    shift
    for m in "$@"; do fields="$fields, {\"member\": \"$m\"}"; done
    broker_ctl topic-create "$topic" 1 >/dev/null
    definitions_with "$WORK/$name.json" "{\"name\": \"$name\", \"batch_size\": 100, \"table\": \"$name\",
      \"application\": {\"member\": \"package_name\", \"column\": \"application_id\"},
      \"fields\": [$fields], \"key\": [\"application_id\", \"k\"], \"on_conflict\": \"nothing\"}"
    n=$(produce_counted "$topic")
    upper=$(tr '[:lower:]-' '[:upper:]_' <<<"$name")
    start_service "$name" "STORAGE_PIPELINES=$name" "STORAGE_PIPELINES_FILE=$WORK/$name.json" \
        "STORAGE_TOPIC_$upper=$topic"
    wait_committed "$GROUP_PREFIX.$name" "$topic" 0 "$n"
    stop_clean "$name"
}

# Produce stdin to TOPIC's partition 0; prints how many records.
produce_counted() { # topic
    local records
    records=$(cat)
    produce "$1" -p 0 <<<"$records"
    wc -l <<<"$records"
}

test_a_user_tables_unconstrained_numeric_stores_every_number_exactly_as_sent() {
    begin_test numeric
    register_apps "$APP"
    user_table measurements "VARCHAR(64)" "amount NUMERIC, ratio REAL"
    {
        printf '{"package_name":"%s","k":"a","amount":0.1}\n' "$APP"
        printf '{"package_name":"%s","k":"b","amount":12345678901234567}\n' "$APP"
        printf '{"package_name":"%s","k":"c","amount":123456789.123456789}\n' "$APP"
        printf '{"package_name":"%s","k":"d","amount":123456789012345678901234567890.5}\n' "$APP"
        printf '{"package_name":"%s","k":"e","ratio":3.4028235e38}\n' "$APP"
        printf '{"package_name":"%s","k":"f","ratio":1e-46}\n' "$APP"
    } | store_through_own_pipeline measurements amount ratio
    assert_eq "a 0.1
b 12345678901234567
c 123456789.123456789
d 123456789012345678901234567890.5
e 3.4028235e+38" "$(sql "SELECT k || ' ' || coalesce(amount::text, ratio::text) FROM measurements ORDER BY k")" \
        "each number stored as sent"
    # Refused at decoding, naming the field, as PostgreSQL would refuse it
    # (float4in: a nonzero value that underflows to zero).
    assert_eq "invalid_field|ratio: 1e-46 is out of range for type real" \
        "$(sql "SELECT error_type || '|' || error_detail FROM dead_letter_events")" "the underflow's dead letter"
}

test_a_domain_check_postgresql_refuses_is_that_rows_dead_letter_and_its_neighbours_are_stored() {
    begin_test domain
    register_apps "$APP"
    # A domain named like a built-in type: bound as its base type, bigint,
    # its CHECK left to PostgreSQL.
    sql "CREATE DOMAIN public.int8 AS pg_catalog.int8 CHECK (VALUE > 0);
         CREATE DOMAIN short_code AS varchar(4)" >/dev/null
    user_table stock short_code "qty public.int8"
    {
        printf '{"package_name":"%s","k":"a","qty":5}\n' "$APP"
        printf '{"package_name":"%s","k":"b","qty":-1}\n' "$APP"
        printf '{"package_name":"%s","k":"cdef  ","qty":7}\n' "$APP"
        printf '{"package_name":"%s","k":"toolong","qty":7}\n' "$APP"
    } | store_through_own_pipeline stock qty
    assert_eq "a 5
cdef 7" "$(sql "SELECT k || ' ' || qty FROM stock ORDER BY k")" "the neighbours stored, spaces beyond the length cut"
    assert_eq "3|invalid_field|k: 7 characters, longer than the column's 4" \
        "$(sql "SELECT kafka_offset || '|' || error_type || '|' || error_detail FROM dead_letter_events
                WHERE error_type <> 'database_rejected'")" "the base type's rule, at decoding"
    assert_contains "$(sql "SELECT kafka_offset || '|' || error_type || '|' || error_detail FROM dead_letter_events
                            WHERE error_type = 'database_rejected'")" \
        '1|database_rejected|' "the CHECK's refusal"
    assert_contains "$(sql "SELECT error_detail FROM dead_letter_events WHERE error_type = 'database_rejected'")" \
        'violates check constraint "int8_check"' "PostgreSQL's words"
}

test_types_postgresql_judges_reach_it_as_sent_and_a_value_it_refuses_is_that_rows_dead_letter() {
    begin_test judged
    register_apps "$APP"
    user_table events "VARCHAR(64)" "day DATE, doc JSON, tags TEXT[]"
    {
        printf '{"package_name":"%s","k":"a","day":"2026-11-29","doc":{"b": [1, 2.50], "a": "\\u00e9"},"tags":["x,y", null]}\n' "$APP"
        printf '{"package_name":"%s","k":"b","day":"2026-02-30"}\n' "$APP"
        printf '{"package_name":"%s","k":"c","day":"epoch","doc":1e400,"tags":"{p,q}"}\n' "$APP"
    } | store_through_own_pipeline events day doc tags
    assert_eq 'a|2026-11-29|{"b": [1, 2.50], "a": "\u00e9"}|{"x,y",NULL}
c|1970-01-01|1e400|{p,q}' "$(sql "SELECT k || '|' || day || '|' || doc::text || '|' || tags::text FROM events ORDER BY k")" \
        "stored as PostgreSQL reads the text sent, json byte for byte"
    assert_contains "$(sql "SELECT kafka_offset || '|' || error_type || '|' || error_detail FROM dead_letter_events")" \
        '1|database_rejected|the database refused the row: 22008' "the date PostgreSQL refuses"
}

test_a_definition_that_disagrees_with_the_database_stops_start_up() {
    begin_test mismatch
    # A field whose column the table lacks: exit 1 naming all three.
    create_permissions_table
    definitions_with "$WORK/missing.json" \
        "$(sed 's/"fields": \[/"fields": [{"member": "install_count", "min": 0}, /' <<<"$PERMISSIONS_DEF")"
    start_service missing "STORAGE_PIPELINES_FILE=$WORK/missing.json" STORAGE_PIPELINES=app-permissions
    assert_eq 1 "$(svc_wait missing 60)" "exit of a definition naming a missing column"
    assert_contains "$(cat "$(svc_log missing)")" \
        "the definition disagrees with the database: pipeline app-permissions, field install_count, column app_permissions.install_count: no such column"

    # A nullable field on a NOT NULL column of the service's own table.
    sql "UPDATE reviews SET user_name = '' WHERE user_name IS NULL; ALTER TABLE reviews ALTER COLUMN user_name SET NOT NULL" >/dev/null
    start_service notnull STORAGE_PIPELINES=reviews
    assert_eq 1 "$(svc_wait notnull 60)" "exit of an optional field on a NOT NULL column"
    assert_contains "$(cat "$(svc_log notnull)")" \
        "pipeline reviews, field user_name, column reviews.user_name: the column is NOT NULL and the field optional"
    sql "ALTER TABLE reviews ALTER COLUMN user_name DROP NOT NULL" >/dev/null

    # The natural key without its UNIQUE constraint.
    sql "ALTER TABLE app_permissions DROP CONSTRAINT app_permissions_key" >/dev/null
    definitions_with "$WORK/perm.json" "$PERMISSIONS_DEF"
    OP_ENV=("STORAGE_PIPELINES_FILE=$WORK/perm.json" "STORAGE_TOPIC_APP_PERMISSIONS=app-permissions-mismatch")
    op verify verify
    assert_eq 1 "$OP_RC" "verify's exit"
    assert_contains "$(out verify)" \
        "pipeline app-permissions, column app_permissions.permission: the natural key (application_id, permission) has no UNIQUE constraint"

    # A malformed file: exit 2 with its line, before anything is reached.
    printf '{"pipelines": [\n  {"name": "x",\n   "table" "t"}]}\n' >"$WORK/broken.json"
    OP_ENV=("STORAGE_PIPELINES_FILE=$WORK/broken.json")
    op broken run
    assert_eq 2 "$OP_RC" "exit of a malformed definitions file"
    assert_contains "$(err broken)" "invalid setting: STORAGE_PIPELINES_FILE=$WORK/broken.json: $WORK/broken.json:3:"
}

# A topic that has nothing to do with the App API, as a new user writes it
# from OPERATIONS.md: a database without its registry, a definitions file of
# their own with no "application", nested members reached by paths, an
# array into jsonb, the whole value into jsonb. `migrate` creates the
# service's own tables and leaves the built-in pipelines' tables, which
# reference the registry, waiting for it.
test_an_orders_topic_with_nested_members_stores_without_an_application_or_its_registry() {
    begin_test anytopic
    fresh_db test_anytopic_plain
    unset TOPIC_APP_STATS TOPIC_REVIEWS TOPIC_NETWORK_METRICS # names the user's file does not know
    local topic=orders-anytopic
    broker_ctl topic-create "$topic" 3 >/dev/null
    cat >"$WORK/orders.json" <<JSON
{"pipelines": [{"name": "orders", "topic": "$topic", "table": "orders",
  "fields": [{"member": "order_id", "required": true},
             {"path": "/customer/id", "column": "customer_id", "required": true},
             {"path": "/customer/email", "column": "customer_email"},
             {"member": "total"},
             {"path": "/lines"},
             {"path": "/lines/0/sku", "column": "first_sku"},
             {"path": "", "column": "record"},
             {"member": "updated_at", "required": true}],
  "key": ["order_id"],
  "on_conflict": {"update": ["customer_email", "total", "lines", "first_sku", "record", "updated_at"],
                  "when_newer": "updated_at"}}]}
JSON
    OP_ENV=("STORAGE_PIPELINES_FILE=$WORK/orders.json")
    op migrate migrate
    assert_eq 0 "$OP_RC" "migrate without the registry: $(err migrate)"
    assert_contains "$(err migrate)" "the built-in pipelines' tables are not created"
    assert_eq "t|t|t" "$(sql "SELECT to_regclass('reviews') IS NULL, to_regclass('dead_letter_events') IS NOT NULL,
                                     to_regclass('consumer_offsets') IS NOT NULL")" "tables after migrate"
    sql "CREATE TABLE orders (order_id BIGINT PRIMARY KEY, customer_id BIGINT NOT NULL, customer_email TEXT,
                              total NUMERIC(10, 2), lines JSONB, first_sku TEXT, record JSONB,
                              updated_at TIMESTAMPTZ NOT NULL)" >/dev/null
    {
        echo '{"order_id": 7, "customer": {"id": 5, "email": "a@b.example"}, "total": 12.50, "lines": [{"sku": "X1", "qty": 2}], "updated_at": "2026-12-01T10:00:00Z"}'
        echo '{"order_id": 8, "customer": {"id": 6, "email": null}, "total": 3, "updated_at": "2026-12-01T10:00:00Z"}'
        echo '{"order_id": 7, "customer": {"id": 5, "email": "c@d.example"}, "total": 14.00, "lines": [{"sku": "Z9", "qty": 1}, {"sku": "X1", "qty": 2}], "updated_at": "2026-12-01T11:00:00Z"}'
        echo '{"order_id": 9, "customer": {"email": "e@f.example"}, "updated_at": "2026-12-01T10:00:00Z"}'
        echo '{"order_id": 10, "customer": "e@f.example", "updated_at": "2026-12-01T10:00:00Z"}'
    } | produce "$topic" -p 0
    start_service svc STORAGE_PIPELINES=orders "STORAGE_PIPELINES_FILE=$WORK/orders.json" "STORAGE_TOPIC_ORDERS=$topic"
    wait_committed "$GROUP_PREFIX.orders" "$topic" 0 5
    assert_eq '7|5|c@d.example|14.00|[{"qty": 1, "sku": "Z9"}, {"qty": 2, "sku": "X1"}]|Z9|5
8|6||3.00|||6' "$(sql "SELECT order_id, customer_id, customer_email, total, lines, first_sku, record->'customer'->'id'
                         FROM orders ORDER BY order_id")" "the orders stored, the newer of 7"
    assert_eq '14.00' "$(sql "SELECT record->>'total' FROM orders WHERE order_id = 7")" "the whole value, as sent"
    assert_eq "missing_field|/customer/id: required field is missing
invalid_field|/customer/id: expected an object or an array on the way, got a string" \
        "$(sql "SELECT error_type || '|' || error_detail FROM dead_letter_events ORDER BY kafka_offset")" \
        "the orders without a customer id"
    stop_clean svc
    # The built-in pipelines need the registry, and say so.
    OP_ENV=()
    svc_start builtin STORAGE_PIPELINES=reviews
    assert_eq 1 "$(svc_wait builtin 60)" "the built-in reviews pipeline without the registry"
    assert_contains "$(cat "$(svc_log builtin)")" "table apps_registry_application does not exist: apply the App API migrations first"
}

# A lookup is an application of any table: a member's value resolved
# through a UNIQUE text column into an integer one, with the application's
# cache, and a value the table lacks dead-lettered as one.
test_a_lookup_resolves_a_member_through_a_unique_column_of_any_table() {
    begin_test lookup
    unset TOPIC_APP_STATS TOPIC_REVIEWS TOPIC_NETWORK_METRICS
    local topic=payments-lookup
    broker_ctl topic-create "$topic" 3 >/dev/null
    sql "CREATE SCHEMA crm;
         CREATE TABLE crm.customers (id BIGSERIAL PRIMARY KEY, email VARCHAR(64) NOT NULL UNIQUE);
         INSERT INTO crm.customers (email) VALUES ('a@b.example'), ('c@d.example');
         CREATE TABLE payments (payment_id TEXT PRIMARY KEY, customer_id BIGINT NOT NULL REFERENCES crm.customers (id),
                                amount BIGINT NOT NULL)" >/dev/null
    cat >"$WORK/payments.json" <<JSON
{"pipelines": [{"name": "payments", "topic": "$topic", "table": "payments",
  "lookup": {"member": "email", "table": "crm.customers", "match": "email", "take": "id", "column": "customer_id"},
  "fields": [{"member": "payment_id", "required": true}, {"member": "amount", "required": true}],
  "key": ["payment_id"], "on_conflict": "nothing"}]}
JSON
    {
        echo '{"payment_id": "p1", "email": "c@d.example", "amount": 10}'
        echo '{"payment_id": "p2", "email": "nobody@example", "amount": 20}'
        echo '{"payment_id": "p3", "email": "a@b.example", "amount": 30}'
        printf '{"payment_id": "p4", "email": "%s", "amount": 40}\n' "$(printf 'x%.0s' $(seq 1 70))"
    } | produce "$topic" -p 0
    start_service svc STORAGE_PIPELINES=payments "STORAGE_PIPELINES_FILE=$WORK/payments.json" "STORAGE_TOPIC_PAYMENTS=$topic"
    wait_committed "$GROUP_PREFIX.payments" "$topic" 0 4
    assert_eq "p1 c@d.example 10
p3 a@b.example 30" "$(sql "SELECT p.payment_id || ' ' || c.email || ' ' || p.amount FROM payments p
                             JOIN crm.customers c ON c.id = p.customer_id ORDER BY 1")" "payments with their customers' ids"
    assert_eq "unregistered_app|email: nobody@example is not registered in crm.customers
invalid_field|email: 70 characters, longer than the column's 64" \
        "$(sql "SELECT error_type || '|' || error_detail FROM dead_letter_events ORDER BY kafka_offset")" \
        "a value the table lacks, and one it could not hold"
    stop_clean svc
    # A match column that is not UNIQUE cannot name one row.
    sql "ALTER TABLE crm.customers DROP CONSTRAINT customers_email_key" >/dev/null
    svc_start nounique STORAGE_PIPELINES=payments "STORAGE_PIPELINES_FILE=$WORK/payments.json" "STORAGE_TOPIC_PAYMENTS=$topic"
    assert_eq 1 "$(svc_wait nounique 60)" "a lookup without a unique match column"
    assert_contains "$(cat "$(svc_log nounique)")" "the lookup's match column crm.customers.email has no UNIQUE constraint of its own"
}

# The same orders written two ways, as a JSON object and in Kafka Connect's
# JSON envelope (JsonConverter with schemas on: the Decimal as base64
# two's-complement bytes with its scale, the Date as days, the Timestamp
# as milliseconds), store two tables equal row for row.
test_the_same_orders_as_json_and_as_connect_json_store_equal_tables() {
    begin_test formats
    unset TOPIC_APP_STATS TOPIC_REVIEWS TOPIC_NETWORK_METRICS
    local t
    for t in json connect; do
        broker_ctl topic-create "orders-$t-formats" 3 >/dev/null
        sql "CREATE TABLE orders_$t (order_id BIGINT PRIMARY KEY, amount NUMERIC(38, 9), day DATE,
                                     placed_at TIMESTAMPTZ, customer_email TEXT)" >/dev/null
    done
    cat >"$WORK/formats.json" <<JSON
{"pipelines": [
 {"name": "orders-json", "topic": "orders-json-formats", "table": "orders_json",
  "fields": [{"member": "order_id", "required": true}, {"member": "amount"}, {"member": "day"},
             {"member": "placed_at"}, {"path": "/customer/email", "column": "customer_email"}],
  "key": ["order_id"], "on_conflict": "nothing"},
 {"name": "orders-connect", "topic": "orders-connect-formats", "table": "orders_connect", "format": "connect_json",
  "fields": [{"member": "order_id", "required": true}, {"member": "amount"}, {"member": "day"},
             {"member": "placed_at"}, {"path": "/customer/email", "column": "customer_email"}],
  "key": ["order_id"], "on_conflict": "nothing"}]}
JSON
    /usr/bin/python3 - "$WORK" <<'PY'
import base64, datetime, json, random, sys
from decimal import Context, Decimal
work = sys.argv[1]
rng = random.Random(43)
schema = {"type": "struct", "optional": False, "name": "orders", "fields": [
    {"type": "int64", "optional": False, "field": "order_id"},
    {"type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
     "parameters": {"scale": "9", "connect.decimal.precision": "38"}, "field": "amount"},
    {"type": "int32", "optional": True, "name": "org.apache.kafka.connect.data.Date", "version": 1, "field": "day"},
    {"type": "int64", "optional": True, "name": "org.apache.kafka.connect.data.Timestamp", "version": 1, "field": "placed_at"},
    {"type": "struct", "optional": True, "field": "customer", "fields": [
        {"type": "string", "optional": True, "field": "email"}]}]}
def decimal_bytes(unscaled):  # what BigInteger.toByteArray gives, base64 as JsonConverter writes it
    return base64.b64encode(unscaled.to_bytes((unscaled.bit_length() + 8) // 8, "big", signed=True)).decode()
with open(work + "/orders.json.txt", "w") as plain, open(work + "/orders.connect.txt", "w") as connect:
    for i in range(200):
        unscaled = rng.choice([0, 5, -5, 10**37 + rng.randrange(10**37), -rng.randrange(10**38)])
        days = rng.randrange(-719162, 2932896)  # the years 1 to 9999 Python's dates hold
        ms = rng.randrange(-62135596800000, 253402300799999)
        email = rng.choice([None, "a@b.example", "c+%d@d.example" % i])
        amount = Decimal(unscaled).scaleb(-9, Context(prec=50))  # every digit (the default keeps 28)
        day = datetime.date(1970, 1, 1) + datetime.timedelta(days=days)
        at = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(milliseconds=ms)
        customer = {"email": email} if email or rng.random() < 0.5 else None
        plain.write(json.dumps({"order_id": i, "amount": "AMOUNT", "day": day.isoformat(),
                                "placed_at": "%04d-%s" % (at.year, at.strftime("%m-%dT%H:%M:%S.%f")[:-3] + "Z"), "customer": customer})
                    .replace('"AMOUNT"', format(amount, "f")) + "\n")
        connect.write(json.dumps({"schema": schema, "payload": {"order_id": i, "amount": decimal_bytes(unscaled),
                                  "day": days, "placed_at": ms, "customer": customer}}) + "\n")
PY
    produce orders-json-formats -p 0 <"$WORK/orders.json.txt"
    produce orders-connect-formats -p 1 <"$WORK/orders.connect.txt"
    start_service svc STORAGE_PIPELINES=orders-json,orders-connect "STORAGE_PIPELINES_FILE=$WORK/formats.json"
    wait_committed "$GROUP_PREFIX.orders-json" orders-json-formats 0 200
    wait_committed "$GROUP_PREFIX.orders-connect" orders-connect-formats 1 200
    assert_eq 0 "$(sql "SELECT count(*) FROM dead_letter_events")" "dead letters"
    assert_eq 200 "$(sql "SELECT count(*) FROM orders_connect")" "rows from the envelope"
    assert_eq "" "$(sql "(SELECT 'json', * FROM orders_json EXCEPT SELECT 'json', * FROM orders_connect)
                          UNION ALL (SELECT 'connect', * FROM orders_connect EXCEPT SELECT 'connect', * FROM orders_json)
                          ORDER BY 2, 1 LIMIT 6")" "rows that differ between the two formats"
    assert_eq "$(sql "SELECT count(*) FROM orders_json WHERE amount::text ~ '^-?[0-9]{29}\.[0-9]{9}$'")" \
        "$(sql "SELECT count(*) FROM orders_connect WHERE amount::text ~ '^-?[0-9]{29}\.[0-9]{9}$'")" "38-digit amounts"
}

run_tests
