#!/usr/bin/env bash
# A user's table works whatever its names (DESIGN.md: Pipelines are
# declared, Names): a pipeline declared in a file of its own, on a table
# made by a migration of its own, whose names are keywords, mixed case,
# non-ASCII, hold a double quote or a dot, or are as long as PostgreSQL
# allows (63 bytes), with 32 fields on a table of 100 columns. Every
# statement quotes them: the COPY into the table and into the staging table,
# the staging table itself, the guarded upsert and its order, the probe,
# the catalog lookup, verify's count and redrive's notes.
. "$(dirname "$0")/lib.sh"

pg_start
broker_start

APP=com.example.names
PIPE=observations
BATCH=10

# `name` as SQL writes it: between double quotes, a double quote doubled.
qi() { local n=${1//\"/\"\"}; printf '"%s"' "$n"; }

# PREFIX, then PAD repeated, then '_', to exactly 63 bytes.
name63() { # prefix pad
    local LC_ALL=C n=$1
    while [ $((${#n} + ${#2})) -le 63 ]; do n=$n$2; done
    while [ ${#n} -lt 63 ]; do n=${n}_; done
    printf '%s' "$n"
}

# The names of the table, set by quoted_names or lower_case_names:
# SCHEMA (may be empty), TABLE, FILE_TABLE (as the definitions file names it),
# APPCOL, KEYCOL, SIZECOL, SEENCOL (the version), the 28 more fields'
# FCOLS, and the columns no field fills, EXTRAS. The field `order` fills
# the column "order".
quoted_names() {
    SCHEMA=Crawl TABLE=Observations.V2 FILE_TABLE=Crawl.Observations.V2
    APPCOL=$(name63 ApplicationId_ x) KEYCOL=$(name63 ObservationKey_ x)
    SIZECOL=$(name63 Größe_ é) SEENCOL=$(name63 'Seen "At" ' x)
    FCOLS=() EXTRAS=()
    local i
    for i in $(seq 5 32); do FCOLS+=("$(name63 "Field $i Of" x)"); done
    for i in $(seq 1 66); do EXTRAS+=("Extra $i"); done
}

# Names the definitions file always accepted, but SQL needs quoted or whole:
# a keyword, and 63-byte columns.
lower_case_names() {
    SCHEMA="" TABLE=observations FILE_TABLE=observations
    APPCOL=$(name63 application_id_ x) KEYCOL=$(name63 observation_key_ x)
    SIZECOL=$(name63 size_ x) SEENCOL=$(name63 seen_at_ x)
    FCOLS=() EXTRAS=()
    local i
    for i in $(seq 5 32); do FCOLS+=("$(name63 "field_${i}_of" x)"); done
    for i in $(seq 1 66); do EXTRAS+=("extra_$i"); done
}

table_sql() { [ -n "$SCHEMA" ] && printf '%s.' "$(qi "$SCHEMA")"; qi "$TABLE"; }

# The user's migration: 100 columns (id, the application's, 32 fields'
# and 66 no field fills), the natural key UNIQUE.
create_table() {
    local ddl c
    [ -n "$SCHEMA" ] && sql "CREATE SCHEMA $(qi "$SCHEMA")" >/dev/null
    ddl="CREATE TABLE $(table_sql) (id BIGSERIAL PRIMARY KEY,
        $(qi "$APPCOL") BIGINT NOT NULL REFERENCES apps_registry_application (id),
        $(qi "$KEYCOL") VARCHAR(64) NOT NULL, \"order\" INTEGER NOT NULL, $(qi "$SIZECOL") TEXT,
        $(qi "$SEENCOL") TIMESTAMPTZ NOT NULL"
    for c in "${FCOLS[@]}"; do ddl="$ddl, $(qi "$c") TEXT"; done
    for c in "${EXTRAS[@]}"; do ddl="$ddl, $(qi "$c") INTEGER"; done
    sql "$ddl, UNIQUE ($(qi "$APPCOL"), $(qi "$KEYCOL")))" >/dev/null
    assert_eq 100 "$(sql "SELECT count(*) FROM pg_attribute WHERE attrelid = '$(table_sql)'::regclass AND attnum > 0")" \
        "the table's columns"
}

# The definitions file of its own: this one pipeline.
write_definitions() { # path topic
    jq -n --arg topic "$2" --argjson batch "$BATCH" --arg table "$FILE_TABLE" --arg app "$APPCOL" --arg key "$KEYCOL" \
        --arg size "$SIZECOL" --arg seen "$SEENCOL" --argjson f "$(printf '%s\n' "${FCOLS[@]}" | jq -R . | jq -sc .)" \
        --arg never "${EXTRAS[0]}" '{pipelines: [{
            name: "observations", topic: $topic, batch_size: $batch, table: $table,
            application: {member: "package_name", column: $app},
            fields: ([{member: "key", column: $key, required: true}, {member: "order", required: true},
                      {member: "size", column: $size}, {member: "seen", column: $seen, required: true}]
                     + [$f | to_entries[] | {member: "f\(.key + 5)", column: .value}]),
            key: [$app, $key],
            on_conflict: {update: ["order", $size, $f[0], $seen], when_newer: $seen},
            never_writes: [$never]}]}' >"$1"
}

# Observations FROM..TO of APP seen at SEEN; the first holds every character
# COPY's text format escapes, a quote and non-ASCII text.
observations() { # app from to seen
    jq -nc --arg app "$1" --argjson from "$2" --argjson to "$3" --arg seen "$4" '
        range($from; $to + 1) as $i
        | {package_name: $app, key: ("k" + ("00\($i)" | .[-3:])), order: $i, size: "größe \($i) ü", seen: $seen}
          + ([range(5; 33) | {key: "f\(.)", value: "v\($i)-\(.)"}] | from_entries)
        | if $i == 1 then .size = "tab\there \"q\" back\\slash\nline ü €" | .f5 = "\\N \r end" else . end'
}

# One message's row as the table should hold it: the fields, in order.
expected_rows() { jq -c '[.key, .order, .size, .seen] + [to_entries[] | select(.key | test("^f[0-9]")) | .value]'; }

# The rows stored, in key order, as expected_rows writes them.
stored_rows() {
    local cols="$(qi "$KEYCOL"), \"order\", $(qi "$SIZECOL"),
        to_char($(qi "$SEENCOL") AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')" c
    for c in "${FCOLS[@]}"; do cols="$cols, $(qi "$c")"; done
    sql "SELECT json_build_array($cols) FROM $(table_sql) ORDER BY $(qi "$KEYCOL") COLLATE \"C\"" | jq -c .
}

column_of() { sql "SELECT $(qi "$1") FROM $(table_sql) WHERE $(qi "$KEYCOL") = '$2'"; } # column key
every_row() { usql "SELECT xmin, t::text FROM $(table_sql) t ORDER BY id"; }

# The common part: a backlog of N new observations on partition 0 is stored
# exactly, most of it COPYed straight into the table; then a newer
# observation updates the columns the rule names and an older one is
# skipped by the version guard.
store_and_update() { # n
    local n=$1 copied
    # The file declares this pipeline alone: no topic of the three is a setting.
    unset TOPIC_APP_STATS TOPIC_REVIEWS TOPIC_NETWORK_METRICS
    register_apps "$APP"
    create_table
    TOPIC=$PIPE-$TEST_NAME
    broker_ctl topic-create "$TOPIC" 3 >/dev/null
    write_definitions "$WORK/$TEST_NAME.json" "$TOPIC"
    SVC_VARS=("STORAGE_PIPELINES_FILE=$WORK/$TEST_NAME.json")
    OP_ENV=("${SVC_VARS[@]}")
    observations "$APP" 1 "$n" 2026-11-29T10:00:00Z | produce "$TOPIC" -p 0
    start_service first "${SVC_VARS[@]}"
    wait_committed "$GROUP_PREFIX.$PIPE" "$TOPIC" 0 "$n"
    assert_eq "$(observations "$APP" 1 "$n" 2026-11-29T10:00:00Z | expected_rows)" "$(stored_rows)" "the rows stored"
    assert_eq "$n" "$(sql "SELECT count(*) FROM $(table_sql) WHERE $(qi "$APPCOL") = $(app_id "$APP")")" \
        "rows of the application"
    copied=$(batch_sum first $PIPE inserted_by_copy)
    [ "$copied" -ge $((n - 2 * BATCH)) ] || fail "only $copied of $n new rows were COPYed into the table"
    assert_eq "$n" "$(batch_sum first $PIPE inserted)" "rows inserted"
    # The session's staging table was made: no statement was refused.
    assert_eq 0 "$(grep -cE 'does not answer|database error' "$(svc_log first)")" "statements refused"

    # k002 seen earlier (skipped by the guard), k003 seen later: its order,
    # size, first F column and version updated, the next F column not (not in
    # the rule).
    { observations "$APP" 2 2 2026-11-29T09:00:00Z | jq -c '.order = 999'
      observations "$APP" 3 3 2026-11-29T11:00:00Z | jq -c '.order = 777 | .size = "neu" | .f5 = "neu-5" | .f6 = "not updated"'
    } | produce "$TOPIC" -p 1
    wait_committed "$GROUP_PREFIX.$PIPE" "$TOPIC" 1 2
    assert_eq "2|größe 2 ü|2026-11-29 10:00:00+00" \
        "$(PGTZ=UTC column_of order k002)|$(column_of "$SIZECOL" k002)|$(PGTZ=UTC column_of "$SEENCOL" k002)" \
        "the older observation skipped"
    assert_eq "777|neu|2026-11-29 11:00:00+00|neu-5|v3-6" \
        "$(column_of order k003)|$(column_of "$SIZECOL" k003)|$(PGTZ=UTC column_of "$SEENCOL" k003)|$(column_of "${FCOLS[0]}" k003)|$(column_of "${FCOLS[1]}" k003)" \
        "the newer observation updated the rule's columns"
    assert_eq "updated=1 skipped=1" \
        "updated=$(batch_sum first $PIPE updated) skipped=$(batch_sum first $PIPE skipped)" "the counts of the guard"
}

test_a_table_whose_every_name_needs_quoting_gets_what_the_three_have() {
    begin_test quoted
    quoted_names
    # A table of the same name in other case is not the one the file names.
    sql "CREATE SCHEMA crawl; CREATE TABLE crawl.\"observations.v2\" (id INTEGER)" >/dev/null
    store_and_update 45
    # A dead letter to redrive later.
    observations com.example.later 46 46 2026-11-29T10:00:00Z | produce "$TOPIC" -p 2
    wait_committed "$GROUP_PREFIX.$PIPE" "$TOPIC" 2 1
    assert_eq unregistered_app "$(sql "SELECT error_type FROM dead_letter_events")" "the dead letter"
    stop_clean first
    assert_eq 0 "$(sql 'SELECT count(*) FROM crawl."observations.v2"')" "rows in the table of the same name in lower case"

    # verify binds it and counts its rows by its name as the file writes it.
    op verify verify
    assert_eq 0 "$OP_RC" "verify's exit: $(out verify)"
    assert_contains "$(out verify)" "Crawl.Observations.V2=45"

    # A replay reads everything again and rewrites nothing: the batches
    # after the first are found stored by the probe.
    local before probed
    before=$(every_row)
    op replay replay $PIPE --to earliest
    assert_eq 0 "$OP_RC" "replay's exit: $(err replay)"
    start_service again "${SVC_VARS[@]}"
    wait_committed "$GROUP_PREFIX.$PIPE" "$TOPIC" 0 45
    wait_committed "$GROUP_PREFIX.$PIPE" "$TOPIC" 1 2
    wait_committed "$GROUP_PREFIX.$PIPE" "$TOPIC" 2 1
    stop_clean again
    # Every record read again, once, the dead letter's included: without
    # that, the rows and the one dead letter below would hold whatever a
    # replay does.
    assert_each_offset_stored_once $PIPE "$TOPIC" again
    assert_eq "$before" "$(every_row)" "rows after the replay"
    assert_eq "0/0" "$(batch_sum again $PIPE inserted)/$(batch_sum again $PIPE updated)" "inserted/updated by the replay"
    probed=$(batch_sum again $PIPE skipped_by_probe)
    [ "$probed" -ge $((45 - 2 * BATCH)) ] || fail "only $probed of 45 replayed records of partition 0 were found stored by the probe"
    assert_eq 1 "$(sql "SELECT count(*) FROM dead_letter_events")" "dead letters after the replay"

    # The dead letter is redriven once its app exists.
    register_apps com.example.later
    op redrive dead-letters redrive --pipeline $PIPE
    assert_eq 0 "$OP_RC" "redrive's exit: $(err redrive)"
    assert_contains "$(out redrive)" "redrive pipeline=$PIPE examined=1 stored=1"
    assert_eq "v46-32" "$(column_of "${FCOLS[27]}" k046)" "the redriven row"
    assert_contains "$(sql "SELECT resolution FROM dead_letter_events")" "upserted into Crawl.Observations.V2"
}

test_keywords_and_names_of_63_bytes_are_written_whole_and_quoted() {
    begin_test lower
    lower_case_names
    store_and_update 25
    stop_clean first
    op verify verify
    assert_eq 0 "$OP_RC" "verify's exit: $(out verify)"
    assert_contains "$(out verify)" "observations=25"
}

run_tests
