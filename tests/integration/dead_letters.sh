#!/usr/bin/env bash
# `storage-consumer dead-letters list|show|redrive|resolve|purge` (DESIGN.md: Dead letters;
# Resolving dead letters; Operations; Output for scripts) against a
# real PostgreSQL, the sanitizer build. One test goes through the running
# service and the Kafka-protocol broker (a real dead letter, then a redrive);
# the others write dead letters with SQL, exactly as the store writes them.
#
# Every test has its own database, so tests never see each other's rows.

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

pg_start
broker_start
# Dead letters name the default topics; a test that needs its own calls
# fresh_topics.
DEFAULT_TOPICS=1

# ---------------------------------------------------------------------------
# Helpers of this suite.

# The exit trap of a test (begin_test): lib.sh's, and the output of
# `storage-consumer dead-letters` if it failed.
end_test() {
    local rc=$?
    end_services "$rc"
    if [ -n "${RECREATED_BROKER_DIR:-}" ]; then "$BROKER" stop "$RECREATED_BROKER_DIR" >/dev/null 2>&1 || true; fi
    if [ "$rc" -ne 0 ] && [ -f "$WORK/$TEST_NAME.out" ]; then
        echo "# --- last output of storage-consumer dead-letters ---" >&2
        sed 's/^/# | /' "$WORK/$TEST_NAME.out" "$WORK/$TEST_NAME.err" >&2
    fi
    exit "$rc"
}

# Run `storage-consumer dead-letters ARGS` against $DB (with the test's
# topics, if it has its own). stdout in $WORK/TEST.out, stderr in
# $WORK/TEST.err; returns the exit status. Nothing STORAGE_* from the
# caller's environment reaches it.
dl() {
    local unset=() v
    for v in $(compgen -e | grep '^STORAGE_' || true); do unset+=(-u "$v"); done
    env "${unset[@]}" STORAGE_DATABASE_URL="$DB" \
        ${TOPIC_APP_STATS:+STORAGE_TOPIC_APP_STATS=$TOPIC_APP_STATS} \
        ${TOPIC_REVIEWS:+STORAGE_TOPIC_REVIEWS=$TOPIC_REVIEWS} \
        ${TOPIC_NETWORK_METRICS:+STORAGE_TOPIC_NETWORK_METRICS=$TOPIC_NETWORK_METRICS} \
        timeout 120 "$BIN" dead-letters "$@" >"$WORK/$TEST_NAME.out" 2>"$WORK/$TEST_NAME.err"
}

# dl that must exit 0; prints its stdout.
dl_ok() {
    local rc=0
    dl "$@" || rc=$?
    [ "$rc" -eq 0 ] || fail "dead-letters $* exited $rc: $(cat "$WORK/$TEST_NAME.err")"
    cat "$WORK/$TEST_NAME.out"
}

# The exit status of dl ARGS (never fails the test by itself).
dl_rc() {
    local rc=0
    dl "$@" || rc=$?
    echo "$rc"
}

# Insert a dead letter as the store writes it; prints its id.
#   dead_letter TOPIC PARTITION OFFSET ERROR_TYPE DETAIL PAYLOAD [PAYLOAD_SIZE]
# PAYLOAD is text; PAYLOAD_SIZE defaults to its length in bytes (not
# truncated).
dead_letter() {
    psql "$DB" -X -q -v ON_ERROR_STOP=1 -At -v topic="$1" -v part="$2" -v off="$3" -v et="$4" \
        -v det="$5" -v payload="$6" -v size="${7:-}" <<'EOF'
INSERT INTO dead_letter_events (topic, partition, kafka_offset, kafka_timestamp, message_key,
                                payload, payload_size, error_type, error_detail)
VALUES (:'topic', :'part', :'off', '2026-11-29T12:00:00Z', convert_to('key-' || :'off', 'UTF8'),
        convert_to(:'payload', 'UTF8'),
        COALESCE(NULLIF(:'size', '')::int, octet_length(convert_to(:'payload', 'UTF8'))),
        :'et', :'det')
RETURNING id;
EOF
}

# The same with the payload and key given in hex (any bytes at all).
#   dead_letter_hex TOPIC PARTITION OFFSET ERROR_TYPE DETAIL PAYLOAD_HEX KEY_HEX
dead_letter_hex() {
    psql "$DB" -X -q -v ON_ERROR_STOP=1 -At -v topic="$1" -v part="$2" -v off="$3" -v et="$4" \
        -v det="$5" -v payload="$6" -v key="$7" <<'EOF'
INSERT INTO dead_letter_events (topic, partition, kafka_offset, kafka_timestamp, message_key,
                                payload, payload_size, error_type, error_detail)
VALUES (:'topic', :'part', :'off', NULL, decode(:'key', 'hex'), decode(:'payload', 'hex'),
        octet_length(decode(:'payload', 'hex')), :'et', :'det')
RETURNING id;
EOF
}

# A review message: review PACKAGE ID THUMBS LAST_SYNCED_AT [CONTENT]
review() {
    printf '{"package_name":"%s","review_id":"%s","user_name":"u-%s","content":"%s","score":4,"thumbs_up_count":%s,"app_version":"1.0","reviewed_at":"2026-11-01T00:00:00Z","last_synced_at":"%s"}' \
        "$1" "$2" "$2" "${5:-c $2}" "$3" "$4"
}

app_stats() { # PACKAGE CRAWLED_AT
    printf '{"package_name":"%s","crawled_at":"%s","title":"T","score":4.5}' "$1" "$2"
}

UNREGISTERED_DETAIL() { echo "package_name: $1 is not registered in apps_registry_application"; }

# Every row of the consumer's tables with its row version (xmin): equal
# dumps mean no row was inserted, deleted or even rewritten in place.
dump_all() {
    local t
    for t in dead_letter_events app_stats reviews network_metrics; do
        echo "== $t"
        usql "SELECT xmin, t::text FROM $t t ORDER BY id"
    done
}

# A line of the output that starts with PREFIX (e.g. "redrive pipeline=reviews ").
line_of() { # output prefix
    grep -F -- "$2" <<<"$1" | head -n 1
}

resolved_of() { # id: "t|note" or "f|"
    sql "SELECT resolved_at IS NOT NULL, coalesce(resolution, '') FROM dead_letter_events WHERE id = $1"
}

# How a dead letter was resolved: "kind|by|note" ("||" while unresolved).
resolution_of() { # id
    sql "SELECT coalesce(resolution_kind, ''), coalesce(resolved_by, ''), coalesce(resolution, '')
           FROM dead_letter_events WHERE id = $1"
}

# The ids in a JSON array of dead letters, space-separated.
json_ids() { # json jq-path
    jq -r "[$2[].id] | map(tostring) | join(\" \")" <<<"$1"
}

# ---------------------------------------------------------------------------
# Redrive: the pipeline's own path, for dead letters that can now be stored.

test_redrive_stores_a_message_once_its_app_is_registered() {
    begin_test registered
    fresh_topics registered
    start_service svc "STORAGE_DATABASE_URL=$DB" STORAGE_PIPELINES=reviews
    { review com.example.late gp:late 7 "2026-11-29T10:00:00Z"; echo; } | produce "$TOPIC_REVIEWS" -p 1
    wait_for_sql "SELECT error_type || ' ' || partition || ' ' || kafka_offset FROM dead_letter_events" \
        "unregistered_app 1 0" 60
    # The offset moved past the message: Kafka will never deliver it again.
    wait_committed "$GROUP_PREFIX.reviews" "$TOPIC_REVIEWS" 1 1 30
    stop_clean svc
    assert_eq 0 "$(sql "SELECT count(*) FROM reviews")" "reviews before the app is registered"

    register_apps com.example.late
    local out id
    id=$(sql "SELECT id FROM dead_letter_events")
    out=$(dl_ok redrive)
    assert_contains "$out" "redrive pipeline=reviews examined=1 stored=1 still_failing=0 not_redrivable=0 inserted=1 updated=0 skipped=0"
    assert_contains "$out" "changed: 1 dead letters resolved, 0 reasons refreshed"
    assert_eq "$(app_id com.example.late)|7|u-gp:late|2026-11-29 10:00:00+00" \
        "$(usql "SELECT application_id, thumbs_up_count, user_name, last_synced_at FROM reviews WHERE review_id = 'gp:late'")" \
        "the redriven review"
    # Resolved with a note, never deleted; what went wrong stays on record.
    assert_eq "t|redriven: decoded and upserted into reviews by the pipeline's ON CONFLICT rule" \
        "$(resolved_of "$id")" "dead letter resolution"
    assert_eq "redriven|$(id -un)" "$(sql "SELECT resolution_kind, resolved_by FROM dead_letter_events WHERE id = $id")" \
        "how and by whom it was resolved"
    assert_eq "1|unregistered_app|$(UNREGISTERED_DETAIL com.example.late)" \
        "$(sql "SELECT count(*), min(error_type), min(error_detail) FROM dead_letter_events")" \
        "the dead letter is kept with its original reason"
    # Offsets are irrelevant to a redrive: nothing was asked of Kafka.
    assert_eq 1 "$(broker_committed "$GROUP_PREFIX.reviews" "$TOPIC_REVIEWS" 1)" "committed offset after the redrive"
}

# A topic deleted and created again numbers its records from 0 again: a new
# bad record at an offset where a dead letter of the old topic sits is
# another record, and must be dead-lettered too (DESIGN.md: Dead letters),
# never dropped as if it were a redelivery while the position moves past it.
# The suite's broker cannot delete a topic; a new broker process has none,
# so the same topic name there is the topic recreated. The operator does
# what the manual says after recreating a topic: replay from the earliest.
test_a_recreated_topic_dead_letters_new_records_at_reused_offsets() {
    begin_test recreated
    fresh_topics recreated
    start_service old STORAGE_PIPELINES=reviews
    printf '{"old":%d\n' 0 1 2 | produce "$TOPIC_REVIEWS" -p 0
    wait_committed "$GROUP_PREFIX.reviews" "$TOPIC_REVIEWS" 0 3 60
    stop_clean old
    assert_eq "0 {\"old\":0|1 {\"old\":1|2 {\"old\":2" \
        "$(sql "SELECT string_agg(kafka_offset || ' ' || convert_from(payload, 'UTF8'), '|' ORDER BY id) FROM dead_letter_events")" \
        "dead letters of the old topic"

    RECREATED_BROKER_DIR=$WORK/kafka-recreated
    BOOTSTRAP=$("$BROKER" start "$RECREATED_BROKER_DIR" 1 "$TOPIC_REVIEWS:3")
    BROKER_DIR=$RECREATED_BROKER_DIR
    op replay replay reviews --to earliest
    [ "$OP_RC" = 0 ] || fail "replay exited $OP_RC: $(out replay) $(err replay)"
    assert_contains "$(out replay)" "$TOPIC_REVIEWS [0] database 3, " "the old topic's position, reset"
    assert_eq "0 0 0" "$(sql "SELECT string_agg(next_offset::text, ' ' ORDER BY partition) FROM consumer_offsets WHERE topic = '$TOPIC_REVIEWS'")" \
        "positions after the replay"

    # Other bad records at the old ones' offsets 0-2, and one past them.
    printf '{"new":%d\n' 0 1 2 3 | produce "$TOPIC_REVIEWS" -p 0
    start_service new STORAGE_PIPELINES=reviews
    wait_committed "$GROUP_PREFIX.reviews" "$TOPIC_REVIEWS" 0 4 60
    stop_clean new
    assert_eq "4 4" "$(batch_sum new reviews size) $(batch_sum new reviews dead_lettered)" "records read and rejected"
    assert_eq "4" "$(sql "SELECT next_offset FROM consumer_offsets WHERE topic = '$TOPIC_REVIEWS' AND partition = 0")" \
        "the position past them"
    assert_eq "0 {\"old\":0|1 {\"old\":1|2 {\"old\":2|0 {\"new\":0|1 {\"new\":1|2 {\"new\":2|3 {\"new\":3" \
        "$(sql "SELECT string_agg(kafka_offset || ' ' || convert_from(payload, 'UTF8'), '|' ORDER BY id) FROM dead_letter_events")" \
        "dead letters: the old topic's kept, and every new bad record's, those at reused offsets too"
    assert_eq "7" "$(dl_ok list --json | jq -r '.total.unresolved')" "unresolved dead letters listed"

    # A redelivery of the same records is still a no-op: the table unchanged
    # to the row version.
    local before
    before=$(dump_all)
    op replay_again replay reviews --to earliest
    [ "$OP_RC" = 0 ] || fail "replay exited $OP_RC: $(out replay_again) $(err replay_again)"
    start_service again STORAGE_PIPELINES=reviews
    wait_committed "$GROUP_PREFIX.reviews" "$TOPIC_REVIEWS" 0 4 60
    stop_clean again
    assert_eq "4 4" "$(batch_sum again reviews size) $(batch_sum again reviews dead_lettered)" "records read again"
    assert_eq "$before" "$(dump_all)" "tables after the records were read again"
}

# A dead letter that still fails is written back through the store's insert
# with the timestamp redrive read from its row: to the millisecond, as its
# digest has it, so no second row appears, whatever the row's precision.
test_a_still_failing_redrive_adds_no_dead_letter() {
    begin_test refail
    sql "INSERT INTO dead_letter_events (topic, partition, kafka_offset, kafka_timestamp, message_key, payload,
                                         payload_size, error_type, error_detail)
         VALUES ('reviews', 0, 1, '2026-11-29T12:00:00.123789Z', 'k', '\\x7b', 1, 'invalid_json', 'bad'),
                ('reviews', 0, 2, NULL, NULL, '\\x', 0, 'empty_payload', 'empty')"
    local before
    assert_contains "$(dl_ok redrive)" "redrive pipeline=reviews examined=2 stored=0 still_failing=2"
    assert_eq "1 2" "$(sql "SELECT string_agg(kafka_offset::text, ' ' ORDER BY id) FROM dead_letter_events")" \
        "dead letters after the redrive (their reasons refreshed)"
    before=$(dump_all)
    assert_contains "$(dl_ok redrive)" "redrive pipeline=reviews examined=2 stored=0 still_failing=2"
    assert_eq "$before" "$(dump_all)" "tables after a second redrive"
}

# DESIGN.md: Progress of long work. Piped (as every other test runs it),
# not a byte of progress; on a terminal (script(1) gives it a pty), the
# line with done/total, rewritten with \r.
test_redrive_shows_progress_only_on_a_terminal() {
    begin_test redrive_progress
    register_apps com.example.progress
    local out tty
    plant_reviews_of_progress 1 1200
    out=$(dl_ok redrive)
    assert_contains "$out" "redrive pipeline=reviews examined=1200 stored=1200"
    assert_eq "" "$(cat "$WORK/$TEST_NAME.err")" "stderr of a piped redrive"
    case "$out" in *"dead letters ("* | *$'\r'*) fail "progress on a pipe: $out" ;; esac

    plant_reviews_of_progress 1201 2400
    tty=$(timeout 120 script -qec "$(printf '%q ' env STORAGE_DATABASE_URL="$DB" "$BIN" dead-letters redrive)" /dev/null)
    assert_contains "$tty" "redrive pipeline=reviews examined=1200 stored=1200" "the redrive ran"
    assert_contains "$tty" $'\r''redrive reviews: ' "a progress line rewritten in place"
    assert_contains "$tty" "redrive reviews: 1200/1200 dead letters (100%)" "done/total at the end"
    assert_eq 0 "$(sql "SELECT count(*) FROM dead_letter_events WHERE resolved_at IS NULL")" "unresolved left"
}

# Ids 1..1200 in batches of 500: the pages must follow the ids' numeric
# order (a page sorted as text, 1, 10, 100, 1000, ..., ended at an id that
# skipped a hundred dead letters, and a dry run read some twice).
test_redrive_pages_through_the_dead_letters_in_id_order() {
    begin_test redrive_pages
    register_apps com.example.progress
    plant_reviews_of_progress 1 1200
    assert_eq "1 1200" "$(sql "SELECT min(id), max(id) FROM dead_letter_events" | tr '|' ' ')" "planted ids"
    assert_contains "$(dl_ok redrive --dry-run)" "redrive pipeline=reviews examined=1200 stored=1200" "dry run"
    assert_contains "$(dl_ok redrive)" "redrive pipeline=reviews examined=1200 stored=1200"
    assert_eq 0 "$(sql "SELECT count(*) FROM dead_letter_events WHERE resolved_at IS NULL")" "unresolved left"
}

# Dead letters of reviews FIRST..LAST (offsets on partition 0) whose app is
# com.example.progress.
plant_reviews_of_progress() { # first last
    sql "INSERT INTO dead_letter_events (topic, partition, kafka_offset, payload, payload_size, error_type, error_detail)
         SELECT 'reviews', 0, o, p, octet_length(p), 'unregistered_app', 'not registered'
         FROM (SELECT o, convert_to(format('{\"package_name\":\"com.example.progress\",\"review_id\":\"p%s\",\"score\":4,\"thumbs_up_count\":1,\"reviewed_at\":\"2026-11-01T00:00:00Z\",\"last_synced_at\":\"2026-11-01T00:00:00Z\"}', o), 'UTF8') p
               FROM generate_series($1, $2) o) planted"
}

test_redrive_twice_changes_nothing() {
    begin_test twice
    register_apps com.example.a
    dead_letter reviews 0 10 unregistered_app "$(UNREGISTERED_DETAIL com.example.a)" \
        "$(review com.example.a r1 3 2026-11-29T10:00:00Z)" >/dev/null
    dead_letter app-stats 0 11 unregistered_app "$(UNREGISTERED_DETAIL com.example.a)" \
        "$(app_stats com.example.a 2026-11-29T10:00:00Z)" >/dev/null
    dead_letter reviews 1 12 unregistered_app "$(UNREGISTERED_DETAIL com.example.nobody)" \
        "$(review com.example.nobody r2 3 2026-11-29T10:00:00Z)" >/dev/null
    dead_letter reviews 2 13 invalid_json "stale reason" '{"broken' >/dev/null
    dead_letter reviews 2 14 invalid_json "x (payload truncated to 4 of 99999 bytes)" '{"a"' 99999 >/dev/null

    local first second before
    first=$(dl_ok redrive)
    assert_contains "$first" "redrive total examined=5 stored=2 still_failing=2 not_redrivable=1 resolved=2 reasons_refreshed=1 dry_run=no"
    before=$(dump_all)

    second=$(dl_ok redrive)
    assert_contains "$second" "redrive pipeline=reviews examined=3 stored=0 still_failing=2 not_redrivable=1 inserted=0 updated=0 skipped=0"
    assert_contains "$second" "redrive pipeline=app-stats examined=0 stored=0"
    assert_contains "$second" "redrive total examined=3 stored=0 still_failing=2 not_redrivable=1 resolved=0 reasons_refreshed=0 dry_run=no"
    assert_contains "$second" "nothing changed: no unresolved dead letter stores now"
    assert_eq "$before" "$(dump_all)" "tables (rows and row versions) after the second redrive"
}

test_still_failing_dead_letter_keeps_its_reason_refreshed() {
    begin_test refreshed
    register_apps com.example.known
    # Dead-lettered for a reason that no longer holds (say, by an older
    # decoder); now it decodes but its app is not registered.
    local stale fixed
    stale=$(dead_letter reviews 0 1 invalid_field "score: old decoder said no" \
        "$(review com.example.unknown r1 3 2026-11-29T10:00:00Z)")
    fixed=$(dead_letter reviews 0 2 invalid_field "score: old decoder said no" \
        "$(review com.example.known r2 3 2026-11-29T10:00:00Z)")

    local out
    out=$(dl_ok redrive --pipeline reviews)
    assert_contains "$out" "redrive pipeline=reviews examined=2 stored=1 still_failing=1 not_redrivable=0"
    assert_contains "$out" "reasons_refreshed=1"
    assert_contains "$out" "still_failing id=$stale pipeline=reviews error_type=unregistered_app detail=\"$(UNREGISTERED_DETAIL com.example.unknown)\""
    assert_eq "f||unregistered_app|$(UNREGISTERED_DETAIL com.example.unknown)" \
        "$(sql "SELECT resolved_at IS NOT NULL, coalesce(resolution, ''), error_type, error_detail FROM dead_letter_events WHERE id = $stale")" \
        "the still-failing dead letter: unresolved, reason refreshed"
    assert_eq "t|invalid_field|score: old decoder said no" \
        "$(sql "SELECT resolved_at IS NOT NULL, error_type, error_detail FROM dead_letter_events WHERE id = $fixed")" \
        "the stored one: resolved, its original reason kept"
    assert_eq "r2" "$(sql "SELECT string_agg(review_id, ',') FROM reviews")" "reviews"
}

test_database_rejected_row_does_not_stop_the_others_in_a_redrive() {
    begin_test dbreject
    register_apps com.example.a
    # A rule the decoder does not know: the database refuses the row, with a
    # data-class error the store isolates.
    sql "ALTER TABLE reviews ADD CONSTRAINT no_forbidden CHECK (content <> 'forbidden')"
    local i bad
    for i in 1 2 3 4 5 6 7; do
        dead_letter reviews 0 "$i" unregistered_app "$(UNREGISTERED_DETAIL com.example.a)" \
            "$(review com.example.a "r$i" "$i" 2026-11-29T10:00:00Z)" >/dev/null
    done
    bad=$(dead_letter reviews 0 8 unregistered_app "$(UNREGISTERED_DETAIL com.example.a)" \
        "$(review com.example.a r8 8 2026-11-29T10:00:00Z forbidden)")

    local out
    out=$(dl_ok redrive)
    assert_contains "$out" "redrive pipeline=reviews examined=8 stored=7 still_failing=1 not_redrivable=0 inserted=7"
    assert_contains "$out" "still_failing id=$bad pipeline=reviews error_type=database_rejected"
    assert_eq "r1 r2 r3 r4 r5 r6 r7" "$(sql "SELECT string_agg(review_id, ' ' ORDER BY review_id) FROM reviews")" "stored reviews"
    assert_eq "f|database_rejected" "$(sql "SELECT resolved_at IS NOT NULL, error_type FROM dead_letter_events WHERE id = $bad")" \
        "the refused row's dead letter"
    assert_contains "$(sql "SELECT error_detail FROM dead_letter_events WHERE id = $bad")" "no_forbidden"
    assert_eq 7 "$(sql "SELECT count(*) FROM dead_letter_events WHERE resolved_at IS NOT NULL")" "resolved dead letters"
    assert_eq 8 "$(sql "SELECT count(*) FROM dead_letter_events")" "no dead letter added or deleted"

    # The database's DETAIL quotes the failing row with a new id each time:
    # still, a second run must not rewrite the dead letter.
    local before
    before=$(dump_all)
    out=$(dl_ok redrive)
    assert_contains "$out" "redrive pipeline=reviews examined=1 stored=0 still_failing=1 not_redrivable=0"
    assert_contains "$out" "nothing changed"
    assert_eq "$before" "$(dump_all)" "tables after a second redrive"
}

test_a_failed_redrive_batch_stores_nothing_and_exits_1() {
    begin_test rollback
    register_apps com.example.a
    dead_letter reviews 0 1 unregistered_app "$(UNREGISTERED_DETAIL com.example.a)" \
        "$(review com.example.a r1 3 2026-11-29T10:00:00Z)" >/dev/null
    # Marking the dead letter resolved fails: the row stored in the same
    # transaction must go with it.
    sql "CREATE FUNCTION refuse_update() RETURNS trigger LANGUAGE plpgsql AS
           \$\$ BEGIN RAISE EXCEPTION 'refused by the test'; END \$\$"
    sql "CREATE TRIGGER refuse BEFORE UPDATE ON dead_letter_events FOR EACH ROW EXECUTE FUNCTION refuse_update()"
    local before
    before=$(dump_all)
    assert_eq 1 "$(dl_rc redrive)" "exit status"
    assert_contains "$(cat "$WORK/$TEST_NAME.err")" "refused by the test"
    assert_contains "$(cat "$WORK/$TEST_NAME.out")" "(interrupted by an error)"
    assert_eq "$before" "$(dump_all)" "tables after the failed redrive"

    sql "DROP TRIGGER refuse ON dead_letter_events"
    assert_contains "$(dl_ok redrive)" "redrive pipeline=reviews examined=1 stored=1"
    assert_eq 1 "$(sql "SELECT count(*) FROM reviews")" "reviews after the retry"
}

test_a_dead_letter_superseded_by_a_refused_one_is_stored_in_its_place() {
    begin_test heldback
    register_apps com.example.a
    sql "ALTER TABLE reviews ADD CONSTRAINT no_forbidden CHECK (content <> 'forbidden')"
    local newer older out
    newer=$(dead_letter reviews 0 1 unregistered_app "$(UNREGISTERED_DETAIL com.example.a)" \
        "$(review com.example.a r1 9 2026-11-29T13:00:00Z forbidden)")
    older=$(dead_letter reviews 1 1 unregistered_app "$(UNREGISTERED_DETAIL com.example.a)" \
        "$(review com.example.a r1 2 2026-11-29T10:00:00Z fine)")
    out=$(dl_ok redrive)
    # The older message lost to the newer one, which the database refused:
    # the older one takes its place and is stored; the newer stays failing.
    assert_contains "$out" "redrive pipeline=reviews examined=2 stored=1 still_failing=1"
    assert_contains "$out" "still_failing id=$newer pipeline=reviews error_type=database_rejected"
    assert_eq "f|database_rejected|t|unregistered_app" \
        "$(sql "SELECT string_agg((resolved_at IS NOT NULL)::text::char(1) || '|' || error_type, '|' ORDER BY id) FROM dead_letter_events")" \
        "the refused dead letter unresolved, the stored one resolved"
    assert_eq "r1|2" "$(sql "SELECT review_id, thumbs_up_count FROM reviews")" "the older observation stored"
    assert_eq "$older" "$(sql "SELECT id FROM dead_letter_events WHERE resolved_at IS NOT NULL")" "resolved"
}

test_truncated_payload_is_reported_not_redrivable() {
    begin_test truncated
    register_apps com.example.a
    # The stored bytes even decode; but they are not the whole message (the
    # store keeps 64 KiB), so storing them would store something never sent.
    local id before out
    id=$(dead_letter reviews 2 40 invalid_json "x (payload truncated to 65536 of 70000 bytes)" \
        "$(review com.example.a r1 3 2026-11-29T10:00:00Z)" 70000)
    before=$(dump_all)
    out=$(dl_ok redrive)
    assert_contains "$out" "not_redrivable id=$id pipeline=reviews payload_size=70000 stored_bytes="
    assert_contains "$out" "redrive pipeline=reviews examined=1 stored=0 still_failing=0 not_redrivable=1"
    assert_eq "$before" "$(dump_all)" "tables after the redrive"
    assert_contains "$(dl_ok show "$id")" "redrivable: no (payload truncated:"
}

test_dry_run_changes_nothing() {
    begin_test dryrun
    register_apps com.example.a
    dead_letter reviews 0 1 unregistered_app "$(UNREGISTERED_DETAIL com.example.a)" \
        "$(review com.example.a r1 3 2026-11-29T10:00:00Z)" >/dev/null
    dead_letter network-metrics 0 2 unregistered_app "$(UNREGISTERED_DETAIL com.example.a)" \
        '{"package_name":"com.example.a","analysis_id":"11111111-2222-3333-4444-555555555555","analyzed_at":"2026-11-29T10:00:00Z","duration_seconds":1.5,"total_packets":10,"total_bytes":1000}' >/dev/null
    dead_letter reviews 0 3 invalid_json "stale" '{"broken' >/dev/null

    local before out
    before=$(dump_all)
    out=$(dl_ok redrive --dry-run)
    assert_contains "$out" "redrive pipeline=reviews examined=2 stored=1 still_failing=1 not_redrivable=0 inserted=1"
    assert_contains "$out" "dry_run=yes"
    assert_contains "$out" "redrive pipeline=network-metrics examined=1 stored=1 still_failing=0 not_redrivable=0 inserted=1"
    assert_contains "$out" "dry run: rolled back, nothing changed (without --dry-run: 2 would be resolved, 1 reasons refreshed)"
    assert_eq "$before" "$(dump_all)" "tables after the dry run"

    # And the real run then does what the dry run announced.
    out=$(dl_ok redrive)
    assert_contains "$out" "redrive total examined=3 stored=2 still_failing=1 not_redrivable=0 resolved=2 reasons_refreshed=1 dry_run=no"
}

test_redrive_filters_by_pipeline_and_type() {
    begin_test filters
    register_apps com.example.a
    local rev_unreg rev_field stats_unreg out
    rev_unreg=$(dead_letter reviews 0 1 unregistered_app "$(UNREGISTERED_DETAIL com.example.a)" \
        "$(review com.example.a r1 3 2026-11-29T10:00:00Z)")
    rev_field=$(dead_letter reviews 0 2 invalid_field "old reason" \
        "$(review com.example.a r2 3 2026-11-29T10:00:00Z)")
    stats_unreg=$(dead_letter app-stats 0 3 unregistered_app "$(UNREGISTERED_DETAIL com.example.a)" \
        "$(app_stats com.example.a 2026-11-29T10:00:00Z)")

    out=$(dl_ok redrive --pipeline reviews --type unregistered_app)
    assert_contains "$out" "redrive pipeline=reviews examined=1 stored=1"
    case "$out" in
    *"pipeline=app-stats"* | *"pipeline=network-metrics"*) fail "another pipeline was redriven: [$out]" ;;
    esac
    assert_eq "t f f" "$(sql "SELECT string_agg((resolved_at IS NOT NULL)::text::char(1), ' ' ORDER BY id) FROM dead_letter_events")" \
        "resolved: only the reviews unregistered_app one"
    assert_eq "r1|0" "$(sql "SELECT string_agg(review_id, ','), (SELECT count(*) FROM app_stats) FROM reviews")" "stored rows"

    out=$(dl_ok redrive --type unregistered_app)
    assert_contains "$out" "redrive pipeline=app-stats examined=1 stored=1"
    assert_contains "$out" "redrive pipeline=reviews examined=0 stored=0"
    assert_eq "t|f|t" "$(sql "SELECT string_agg((resolved_at IS NOT NULL)::text::char(1), '|' ORDER BY id) FROM dead_letter_events")" \
        "resolved after --type unregistered_app"

    out=$(dl_ok redrive --pipeline reviews)
    assert_contains "$out" "redrive pipeline=reviews examined=1 stored=1"
    assert_eq 3 "$(sql "SELECT count(*) FROM dead_letter_events WHERE resolved_at IS NOT NULL")" "all resolved"
    : "$rev_unreg $rev_field $stats_unreg"
}

test_redriven_older_review_does_not_overwrite_a_newer_row() {
    begin_test older
    register_apps com.example.a
    # The stored row is a newer observation than the dead-lettered message.
    sql "INSERT INTO reviews (application_id, review_id, user_name, content, score, thumbs_up_count,
                              reviewed_at, last_synced_at)
         VALUES ($(app_id com.example.a), 'r1', 'newer', 'newer content', 5, 50,
                 '2026-11-01T00:00:00Z', '2026-11-29T12:00:00Z')"
    local row id out
    row=$(usql "SELECT t::text FROM reviews t")
    id=$(dead_letter reviews 0 1 unregistered_app "$(UNREGISTERED_DETAIL com.example.a)" \
        "$(review com.example.a r1 5 2026-11-29T10:00:00Z older)")
    out=$(dl_ok redrive)
    assert_contains "$out" "redrive pipeline=reviews examined=1 stored=1 still_failing=0 not_redrivable=0 inserted=0 updated=0 skipped=1"
    assert_eq "$row" "$(usql "SELECT t::text FROM reviews t")" "the newer review row"
    assert_eq t "$(sql "SELECT resolved_at IS NOT NULL FROM dead_letter_events WHERE id = $id")" \
        "the dead letter is resolved: the message's effect is already in the table"

    # A newer dead-lettered observation does update the row.
    dead_letter reviews 0 2 unregistered_app "$(UNREGISTERED_DETAIL com.example.a)" \
        "$(review com.example.a r1 60 2026-11-29T13:00:00Z newest)" >/dev/null
    out=$(dl_ok redrive)
    assert_contains "$out" "inserted=0 updated=1 skipped=0"
    assert_eq "60|newest" "$(sql "SELECT thumbs_up_count, content FROM reviews")" "the review after a newer redrive"
}

test_dead_letters_of_the_same_key_redrive_to_the_newest() {
    begin_test samekey
    register_apps com.example.a
    local a b
    a=$(dead_letter reviews 0 1 unregistered_app "$(UNREGISTERED_DETAIL com.example.a)" \
        "$(review com.example.a r1 9 2026-11-29T13:00:00Z newest)")
    b=$(dead_letter reviews 1 1 unregistered_app "$(UNREGISTERED_DETAIL com.example.a)" \
        "$(review com.example.a r1 2 2026-11-29T10:00:00Z older)")
    local out
    out=$(dl_ok redrive)
    assert_contains "$out" "redrive pipeline=reviews examined=2 stored=2 still_failing=0 not_redrivable=0 inserted=1 updated=0 skipped=0 superseded=1 after_tombstone=0 resolved=2"
    assert_eq "9|newest" "$(sql "SELECT thumbs_up_count, content FROM reviews")" "the stored review"
    assert_contains "$(resolved_of "$b")" "t|redriven: another dead letter with the same review_id was upserted into reviews"
    assert_contains "$(resolved_of "$a")" "t|redriven: decoded and upserted into reviews"
}

test_dead_letters_of_a_topic_no_pipeline_reads_are_skipped_with_a_note() {
    begin_test unknown
    register_apps com.example.a
    local before out
    dead_letter legacy-topic 0 1 invalid_json "x" "$(review com.example.a r1 3 2026-11-29T10:00:00Z)" >/dev/null
    before=$(dump_all)
    out=$(dl_ok redrive)
    assert_contains "$out" 'redrive skipped topic="legacy-topic" unresolved=1 note="no pipeline reads this topic'
    assert_contains "$out" "redrive total examined=0 stored=0"
    assert_eq "$before" "$(dump_all)" "tables after the redrive"
}

# ---------------------------------------------------------------------------
# show and list.

test_show_escapes_a_payload_that_is_not_utf8() {
    begin_test show
    # {"a":"<ESC>[31mred<0xff><0xfe>\n</>"} and a key with an invalid byte.
    local id out
    id=$(dead_letter_hex reviews 2 77 invalid_utf8 "not valid UTF-8 at byte 14" \
        7b2261223a221b5b33316d726564fffe0a3c2f3e227d 6b6579ff)
    out=$(dl_ok show "$id")
    assert_contains "$out" "id: $id"
    assert_contains "$out" 'topic: "reviews"'
    assert_contains "$out" "pipeline: reviews"
    assert_contains "$out" "partition: 2"
    assert_contains "$out" "kafka_offset: 77"
    assert_contains "$out" "kafka_timestamp: null"
    assert_contains "$out" "error_type: invalid_utf8"
    assert_contains "$out" 'error_detail: "not valid UTF-8 at byte 14"'
    assert_contains "$out" "status: unresolved"
    assert_contains "$out" "resolved_at: null"
    assert_contains "$out" "payload_size: 22"
    assert_contains "$out" "payload_bytes: 22"
    assert_contains "$out" "payload_utf8: no"
    assert_contains "$out" 'payload: "{\"a\":\"\x1b[31mred\xff\xfe\n</>\"}"'
    assert_contains "$out" "payload_hex: 7b2261223a221b5b33316d726564fffe0a3c2f3e227d"
    assert_contains "$out" 'message_key: "key\xff"'
    assert_contains "$out" "message_key_hex: 6b6579ff"
    assert_contains "$out" "created_at: "
    assert_contains "$out" "redrivable: yes"
    # Nothing raw reaches the terminal: no ESC, no invalid byte, no CR.
    if LC_ALL=C grep -q $'[\x1b\xff\xfe\r]' "$WORK/$TEST_NAME.out"; then
        fail "show printed a raw control or invalid byte"
    fi
    iconv -f UTF-8 -t UTF-8 "$WORK/$TEST_NAME.out" >/dev/null || fail "show's output is not valid UTF-8"

    # Valid UTF-8 is shown as text (control characters still escaped), with
    # no hex dump.
    id=$(dead_letter reviews 0 5 invalid_json "bad" $'{"t":"Ünï\tcode 😀"\x07')
    out=$(dl_ok show "$id")
    assert_contains "$out" "payload_utf8: yes"
    assert_contains "$out" 'payload: "{\"t\":\"Ünï\tcode 😀\"\x07"'
    assert_contains "$out" 'message_key: "key-5"'
    case "$out" in *payload_hex*) fail "hex dump for a UTF-8 payload: [$out]" ;; esac
}

test_list_counts_by_pipeline_and_error_type() {
    begin_test list
    register_apps com.example.a
    dead_letter reviews 0 1 unregistered_app "$(UNREGISTERED_DETAIL com.example.a)" \
        "$(review com.example.a r1 3 2026-11-29T10:00:00Z)" >/dev/null
    dead_letter reviews 0 2 unregistered_app "$(UNREGISTERED_DETAIL com.example.b)" \
        "$(review com.example.b r2 3 2026-11-29T10:00:00Z)" >/dev/null
    dead_letter reviews 0 3 invalid_json "bad" '{' >/dev/null
    dead_letter app-stats 1 4 missing_field "crawled_at: required" '{"package_name":"x"}' >/dev/null
    dead_letter legacy 0 5 invalid_json $'line one\nline two \x1b[2J' 'x' >/dev/null
    dl_ok redrive --pipeline reviews --type unregistered_app >/dev/null

    local out
    out=$(dl_ok list)
    assert_contains "$out" "total unresolved=4 resolved=1"
    assert_contains "$out" "count pipeline=reviews error_type=unregistered_app unresolved=1 resolved=1 topic=\"reviews\""
    assert_contains "$out" "count pipeline=reviews error_type=invalid_json unresolved=1 resolved=0"
    assert_contains "$out" "count pipeline=app-stats error_type=missing_field unresolved=1 resolved=0"
    assert_contains "$out" "count pipeline=- error_type=invalid_json unresolved=1 resolved=0 topic=\"legacy\""
    assert_eq 4 "$(grep -c '^count ' <<<"$out")" "count lines"
    # Recent unresolved rows, newest first; details escaped.
    assert_eq "5 4 3 2" "$(grep '^row ' <<<"$out" | sed -E 's/^row id=([0-9]+).*/\1/' | tr '\n' ' ' | sed 's/ $//')" \
        "recent unresolved rows, newest first"
    assert_contains "$out" 'row id=5 pipeline=- partition=0 offset=5'
    assert_contains "$out" 'detail="line one\nline two \x1b[2J"'
    assert_contains "$(line_of "$out" "row id=2 ")" "status=unresolved"
    # --all: the resolved ones too, with how they were resolved.
    out=$(dl_ok list --all)
    assert_eq "5 4 3 2 1" "$(grep '^row ' <<<"$out" | sed -E 's/^row id=([0-9]+).*/\1/' | tr '\n' ' ' | sed 's/ $//')" \
        "recent rows with --all, newest first"
    assert_contains "$(line_of "$out" "row id=1 ")" "status=resolved resolution=redriven"

    out=$(dl_ok list --pipeline reviews --limit 2 --unresolved)
    assert_contains "$out" "total unresolved=2 resolved=1"
    assert_eq 2 "$(grep -c '^count ' <<<"$out")" "count lines of reviews"
    assert_eq "3 2" "$(grep '^row ' <<<"$out" | sed -E 's/^row id=([0-9]+).*/\1/' | tr '\n' ' ' | sed 's/ $//')" \
        "recent unresolved rows of reviews, limited to 2"

    out=$(dl_ok list --type invalid_json)
    assert_contains "$out" "total unresolved=2 resolved=0"
}

# ---------------------------------------------------------------------------
# Interface: help, usage errors, runtime failures (DESIGN.md: Operations exit codes).

test_help_exits_0_and_usage_errors_exit_2() {
    begin_test usage
    local sub
    for sub in "" list show redrive resolve purge; do
        # shellcheck disable=SC2086
        assert_eq 0 "$(dl_rc $sub --help)" "dead-letters $sub --help"
        assert_contains "$(cat "$WORK/$TEST_NAME.out")" "usage: storage-consumer dead-letters"
    done
    assert_eq 2 "$(dl_rc)" "no subcommand"
    assert_eq 2 "$(dl_rc frobnicate)" "unknown subcommand"
    assert_eq 2 "$(dl_rc show)" "show without an id"
    assert_eq 2 "$(dl_rc show abc)" "show with a non-numeric id"
    assert_eq 2 "$(dl_rc show 1 2)" "show with two ids"
    assert_eq 2 "$(dl_rc redrive --pipeline nope)" "unknown pipeline"
    assert_contains "$(cat "$WORK/$TEST_NAME.err")" "unknown pipeline nope"
    assert_eq 2 "$(dl_rc redrive --pipeline)" "--pipeline without a value"
    assert_eq 2 "$(dl_rc redrive --now)" "unknown option"
    assert_eq 2 "$(dl_rc list --limit 0)" "--limit 0"
    assert_contains "$("$BIN" --help)" "dead-letters list|show ID|redrive|resolve|purge"
}

test_bogus_type_is_a_usage_error() {
    begin_test bogus_type
    dead_letter reviews 0 1 invalid_json "bad" '{' >/dev/null
    local before args
    before=$(dump_all)
    for args in "list --type bogus" "redrive --type bogus" "resolve --type bogus --note x" \
        "list --type INVALID_JSON"; do
        # shellcheck disable=SC2086
        assert_eq 2 "$(dl_rc $args)" "dead-letters $args"
        assert_contains "$(cat "$WORK/$TEST_NAME.err")" \
            "unknown error type $(awk '{print $3}' <<<"$args") (known: empty_payload, invalid_utf8, invalid_json, missing_field, invalid_field, unregistered_app, database_rejected, no_magic_byte, short_header, unknown_schema, undecodable, trailing_bytes)"
    done
    assert_eq "$before" "$(dump_all)" "tables after the usage errors"
    # And a known type is taken.
    assert_contains "$(dl_ok list --type invalid_json)" "total unresolved=1 resolved=0"
}

test_runtime_failures_exit_1() {
    begin_test runtime
    assert_eq 1 "$(dl_rc show 999)" "show of a missing id"
    assert_contains "$(cat "$WORK/$TEST_NAME.err")" "no dead letter with id 999"
    # A schema from before migration 0007: a clear message, not a SQL error.
    sql "ALTER TABLE dead_letter_events DROP COLUMN resolution_kind, DROP COLUMN resolved_by"
    assert_eq 1 "$(dl_rc resolve 1 --note x)" "resolve on a schema without migration 0007"
    assert_contains "$(cat "$WORK/$TEST_NAME.err")" "0007_dead_letter_acknowledgement.sql): run \`storage-consumer migrate\` first"
    # ... and from before migration 0005.
    sql "ALTER TABLE dead_letter_events DROP COLUMN resolution, DROP COLUMN resolved_at"
    assert_eq 1 "$(dl_rc redrive)" "redrive on an old schema"
    assert_contains "$(cat "$WORK/$TEST_NAME.err")" "run \`storage-consumer migrate\` first"
    assert_eq 1 "$(DB="host=/nonexistent-dir port=1 dbname=x user=x" dl_rc list)" "list without a database"
}

test_migration_adds_resolution_columns() {
    begin_test migration
    assert_eq "resolved_at timestamp with time zone|resolution text|resolution_kind text|resolved_by text" \
        "$(sql "SELECT string_agg(column_name || ' ' || data_type, '|' ORDER BY ordinal_position)
                  FROM information_schema.columns
                 WHERE table_name = 'dead_letter_events'
                   AND column_name IN ('resolved_at', 'resolution', 'resolution_kind', 'resolved_by')")" \
        "resolution columns"
    assert_eq "t" "$(sql "SELECT indpred IS NOT NULL FROM pg_index WHERE indexrelid = 'dead_letter_events_unresolved_idx'::regclass")" \
        "partial index on unresolved dead letters"
    # A resolution is whole: no resolved_at without its kind, no other kind.
    # Each refused by its own CHECK, not by any error.
    local id out
    id=$(dead_letter reviews 0 1 invalid_json "bad" '{')
    if out=$(sql "UPDATE dead_letter_events SET resolved_at = now() WHERE id = $id" 2>&1); then
        fail "resolved_at was set without a resolution_kind"
    fi
    assert_contains "$out" 'violates check constraint "dead_letter_events_resolution_complete_check"' "the refusal"
    if out=$(sql "UPDATE dead_letter_events SET resolved_at = now(), resolution_kind = 'deleted' WHERE id = $id" 2>&1); then
        fail "a resolution_kind other than redriven or acknowledged was accepted"
    fi
    assert_contains "$out" 'violates check constraint "dead_letter_events_resolution_kind_check"' "the refusal"
    # The same row takes a whole resolution.
    sql "UPDATE dead_letter_events SET resolved_at = now(), resolution_kind = 'acknowledged' WHERE id = $id"
}

test_migration_0007_marks_earlier_resolutions_redriven() {
    begin_test backfill
    # The schema as migration 0006 left it, with a dead letter redrive
    # resolved then, and one unresolved.
    sql "DROP INDEX dead_letter_events_resolved_idx;
         ALTER TABLE dead_letter_events DROP COLUMN resolution_kind, DROP COLUMN resolved_by;
         DELETE FROM storage_consumer_migrations WHERE name LIKE '0007%'"
    local resolved unresolved rc=0
    resolved=$(dead_letter reviews 0 1 unregistered_app "x" '{}')
    unresolved=$(dead_letter reviews 0 2 unregistered_app "x" '{}')
    sql "UPDATE dead_letter_events SET resolved_at = now(), resolution = 'redriven: decoded' WHERE id = $resolved"
    env -u STORAGE_PIPELINES STORAGE_DATABASE_URL="$DB" "$BIN" migrate >"$WORK/$TEST_NAME.out" 2>"$WORK/$TEST_NAME.err" || rc=$?
    assert_eq 0 "$rc" "migrate exit status: $(cat "$WORK/$TEST_NAME.err")"
    assert_eq "redriven||redriven: decoded" "$(resolution_of "$resolved")" "the dead letter resolved before 0007"
    assert_eq "||" "$(resolution_of "$unresolved")" "the unresolved one"
}

# A schema from before migration 0009, whose dead letters are keyed by
# their coordinates alone: each gets the digest of the record it holds, a
# redelivery of that record still adds nothing, another record at the same
# coordinates is kept.
test_migration_0009_keys_existing_dead_letters_by_their_record() {
    begin_test identity
    sql "ALTER TABLE dead_letter_events DROP CONSTRAINT dead_letter_events_record_key, DROP COLUMN record_digest,
           ADD CONSTRAINT dead_letter_events_coordinates_key UNIQUE (topic, partition, kafka_offset);
         DELETE FROM storage_consumer_migrations WHERE name LIKE '0009%'"
    local old rc=0
    old=$(dead_letter reviews 0 7 invalid_json "bad" '{"old')
    dead_letter_hex reviews 0 8 empty_payload "empty" "" "" >/dev/null
    env -u STORAGE_PIPELINES STORAGE_DATABASE_URL="$DB" "$BIN" migrate >"$WORK/$TEST_NAME.out" 2>"$WORK/$TEST_NAME.err" || rc=$?
    assert_eq 0 "$rc" "migrate exit status: $(cat "$WORK/$TEST_NAME.err")"
    assert_eq 0 "$(sql "SELECT count(*) FROM dead_letter_events WHERE octet_length(record_digest) <> 32")" "rows without a digest"
    # The store's insert, as pg/dead_letters.c writes it: the same records
    # add nothing; another one at offset 7 is kept beside the old one.
    assert_eq "0 7" "$(sql "INSERT INTO dead_letter_events (topic, partition, kafka_offset, kafka_timestamp, message_key,
                                                           payload, payload_size, error_type, error_detail)
                            VALUES ('reviews', 0, 7, '2026-11-29T12:00:00Z', convert_to('key-7', 'UTF8'), '\\x7b226f6c64', 5, 'invalid_json', 'again'),
                                   ('reviews', 0, 8, NULL, '\\x', '\\x', 0, 'empty_payload', 'again'),
                                   ('reviews', 0, 7, '2026-11-29T12:00:00Z', convert_to('key-7', 'UTF8'), '\\x7b226e6577', 5, 'invalid_json', 'new')
                            ON CONFLICT (topic, partition, kafka_offset, record_digest) DO NOTHING
                            RETURNING partition, kafka_offset" | tr '|' ' ')" \
        "rows the store's insert adds"
    assert_eq "$old bad {\"old|new {\"new" \
        "$(sql "SELECT string_agg(concat_ws(' ', CASE WHEN id = $old THEN id END, error_detail, convert_from(payload, 'UTF8')), '|' ORDER BY id)
                  FROM dead_letter_events WHERE kafka_offset = 7")" \
        "the dead letters at offset 7: the old one as it was, and the other record's"
    assert_eq 3 "$(sql "SELECT count(*) FROM dead_letter_events")" "dead letters"
}

# ---------------------------------------------------------------------------
# resolve: acknowledge dead letters that will never store.

test_resolve_by_id_acknowledges_without_storing() {
    begin_test resolve_ids
    # It would store now (its app is registered): resolve must not store it.
    register_apps com.example.a
    local a b other before out
    a=$(dead_letter reviews 0 1 unregistered_app "$(UNREGISTERED_DETAIL com.example.a)" \
        "$(review com.example.a r1 3 2026-11-29T10:00:00Z)")
    b=$(dead_letter app-stats 0 2 invalid_json "bad" '{')
    other=$(dead_letter reviews 0 3 invalid_json "bad" '{')

    out=$(dl_ok resolve "$a" "$b" "$a" --note "test traffic from the staging crawler")
    assert_contains "$out" "resolve acknowledged=2 already_resolved=0 by=\"$(id -un)\""
    assert_eq "acknowledged|$(id -un)|test traffic from the staging crawler" "$(resolution_of "$a")" "resolution of $a"
    assert_eq "acknowledged|$(id -un)|test traffic from the staging crawler" "$(resolution_of "$b")" "resolution of $b"
    assert_eq "||" "$(resolution_of "$other")" "the one not named"
    assert_eq 0 "$(sql "SELECT count(*) FROM reviews")" "reviews: nothing stored"
    assert_eq 3 "$(sql "SELECT count(*) FROM dead_letter_events")" "nothing deleted"
    # Redrive leaves an acknowledged dead letter alone.
    assert_contains "$(dl_ok redrive)" "redrive pipeline=reviews examined=1 stored=0 still_failing=1"
    assert_eq 0 "$(sql "SELECT count(*) FROM reviews")" "reviews after a redrive"

    # Again: the first resolution stands.
    before=$(dump_all)
    out=$(dl_ok resolve "$a" --note "another reason")
    assert_contains "$out" "resolve acknowledged=0 already_resolved=1"
    assert_eq "$before" "$(dump_all)" "tables after resolving a resolved dead letter"

    # An id that does not exist: nothing changes, not even the others.
    assert_eq 1 "$(dl_rc resolve "$other" 999 --note "x")" "exit status with a missing id"
    assert_contains "$(cat "$WORK/$TEST_NAME.err")" "no dead letter with id 999: nothing changed"
    assert_eq "||" "$(resolution_of "$other")" "the existing id after a refused resolve"
}

test_resolve_by_type_needs_a_note() {
    begin_test resolve_type
    local rev1 rev2 stats unreg before out
    rev1=$(dead_letter reviews 0 1 invalid_json "bad" '{')
    rev2=$(dead_letter reviews 1 2 invalid_json "bad" '[')
    stats=$(dead_letter app-stats 0 3 invalid_json "bad" '{')
    unreg=$(dead_letter reviews 0 4 unregistered_app "x" '{}')
    before=$(dump_all)
    assert_eq 2 "$(dl_rc resolve --type invalid_json --pipeline reviews)" "resolve --type without --note"
    assert_contains "$(cat "$WORK/$TEST_NAME.err")" "--note TEXT is required"
    assert_eq 2 "$(dl_rc resolve --type invalid_json --note "")" "resolve with an empty note"
    assert_contains "$(cat "$WORK/$TEST_NAME.err")" "--note needs a value"
    assert_eq 2 "$(dl_rc resolve "$rev1" --type invalid_json --note x)" "ids and --type together"
    assert_eq 2 "$(dl_rc resolve --note x)" "neither ids nor --type"
    assert_eq 2 "$(dl_rc resolve "$rev1" --pipeline reviews --note x)" "--pipeline without --type"
    assert_eq "$before" "$(dump_all)" "tables after the refused resolves"

    out=$(dl_ok resolve --type invalid_json --pipeline reviews --note "a producer bug, fixed in 2.4")
    assert_contains "$out" "resolve error_type=invalid_json pipeline=reviews acknowledged=2"
    assert_eq "acknowledged|$(id -un)|a producer bug, fixed in 2.4" "$(resolution_of "$rev1")" "reviews invalid_json 1"
    assert_eq "acknowledged|$(id -un)|a producer bug, fixed in 2.4" "$(resolution_of "$rev2")" "reviews invalid_json 2"
    assert_eq "||" "$(resolution_of "$stats")" "app-stats' invalid_json: another pipeline"
    assert_eq "||" "$(resolution_of "$unreg")" "reviews' unregistered_app: another type"

    # Without --pipeline: every topic.
    out=$(dl_ok resolve --type invalid_json --note "garbage")
    assert_contains "$out" "resolve error_type=invalid_json pipeline=all acknowledged=1"
    assert_eq "acknowledged|$(id -un)|garbage" "$(resolution_of "$stats")" "app-stats' invalid_json"
    assert_eq "acknowledged|$(id -un)|a producer bug, fixed in 2.4" "$(resolution_of "$rev1")" \
        "a resolved one keeps its first note"
}

test_resolve_by_type_takes_more_than_one_chunk() {
    begin_test resolve_many
    # More than one statement's chunk (10,000 ids) of garbage.
    sql "INSERT INTO dead_letter_events (topic, partition, kafka_offset, payload, payload_size, error_type, error_detail)
         SELECT 'reviews', 0, o, '\\x7b', 1, 'invalid_json', 'bad' FROM generate_series(1, 10005) o"
    assert_contains "$(dl_ok resolve --type invalid_json --note "bulk garbage")" "acknowledged=10005"
    assert_eq 0 "$(sql "SELECT count(*) FROM dead_letter_events WHERE resolved_at IS NULL")" "unresolved left"
}

# ---------------------------------------------------------------------------
# purge: resolved dead letters, once old enough.

test_purge_deletes_only_resolved_dead_letters_older_than_the_age() {
    begin_test purge
    local old_unresolved old_resolved recent_resolved fresh_resolved before out
    old_unresolved=$(dead_letter reviews 0 1 invalid_json "bad" '{')
    old_resolved=$(dead_letter reviews 0 2 invalid_json "bad" '{')
    recent_resolved=$(dead_letter reviews 0 3 invalid_json "bad" '{')
    fresh_resolved=$(dead_letter reviews 0 4 invalid_json "bad" '{')
    dl_ok resolve "$old_resolved" "$recent_resolved" "$fresh_resolved" --note "garbage" >/dev/null
    sql "UPDATE dead_letter_events SET created_at = now() - interval '400 days' WHERE id = $old_unresolved;
         UPDATE dead_letter_events SET resolved_at = now() - interval '40 days' WHERE id = $old_resolved;
         UPDATE dead_letter_events SET resolved_at = now() - interval '10 days' WHERE id = $recent_resolved"

    before=$(dump_all)
    out=$(dl_ok purge --older-than 30d --dry-run)
    assert_contains "$out" "purge older_than=30d resolved_before="
    assert_contains "$out" "would_delete=1 dry_run=yes"
    assert_eq "$before" "$(dump_all)" "tables after the dry run"

    out=$(dl_ok purge --older-than 30d)
    assert_contains "$out" "deleted=1"
    assert_eq "$old_unresolved $recent_resolved $fresh_resolved" \
        "$(sql "SELECT string_agg(id::text, ' ' ORDER BY id) FROM dead_letter_events")" "left after --older-than 30d"
    out=$(dl_ok purge --older-than 1w)
    assert_contains "$out" "deleted=1"
    assert_contains "$(dl_ok purge --older-than 12h)" "deleted=0"
    assert_eq "$old_unresolved $fresh_resolved" \
        "$(sql "SELECT string_agg(id::text, ' ' ORDER BY id) FROM dead_letter_events")" "left after --older-than 1w"

    # More than one statement's chunk (10,000 rows): every one goes.
    sql "INSERT INTO dead_letter_events (topic, partition, kafka_offset, payload, payload_size, error_type,
                                         error_detail, resolved_at, resolution_kind, resolution)
         SELECT 'reviews', 1, o, '\\x7b', 1, 'invalid_json', 'bad', now() - interval '90 days', 'acknowledged', 'x'
           FROM generate_series(1, 10005) o"
    assert_contains "$(dl_ok purge --older-than 30d)" "deleted=10005"
    assert_eq "$old_unresolved $fresh_resolved" \
        "$(sql "SELECT string_agg(id::text, ' ' ORDER BY id) FROM dead_letter_events")" "left after the bulk purge"

    # AGE is required and must say its unit.
    local age
    for age in "" 30 0d -3d 30m 1.5d 99999999w; do
        assert_eq 2 "$(dl_rc purge ${age:+--older-than "$age"})" "purge --older-than [$age]"
    done
    assert_contains "$(cat "$WORK/$TEST_NAME.err")" "--older-than 99999999w: expected a number and a unit"
    assert_eq "$old_unresolved $fresh_resolved" \
        "$(sql "SELECT string_agg(id::text, ' ' ORDER BY id) FROM dead_letter_events")" "left after the usage errors"
}

# ---------------------------------------------------------------------------
# --json: one document for scripts (docs/OPERATIONS.md: Output for scripts).

test_dead_letters_list_json_lists_unresolved_ones() {
    begin_test list_json
    local unresolved resolved legacy out
    unresolved=$(dead_letter reviews 0 1 invalid_json $'bad \x1b[2J\n"quoted"' '{')
    resolved=$(dead_letter reviews 0 2 invalid_json "bad" '{')
    legacy=$(dead_letter legacy 0 3 missing_field "x" '{}')
    dl_ok resolve "$resolved" --note "garbage" >/dev/null

    out=$(dl_ok list --json)
    assert_eq 1 "$(wc -l <"$WORK/$TEST_NAME.out")" "one line"
    jq -e . >/dev/null <<<"$out" || fail "list --json is not JSON: $out"
    assert_eq "2 1" "$(jq -r '"\(.total.unresolved) \(.total.resolved)"' <<<"$out")" "totals"
    assert_eq "$legacy $unresolved" "$(json_ids "$out" .dead_letters)" "rows: the unresolved ones, newest first"
    assert_eq "reviews|reviews|invalid_json|1|1" \
        "$(jq -r '.counts[] | select(.topic == "reviews") | [.pipeline, .topic, .error_type, .unresolved, .resolved] | join("|")' <<<"$out")" \
        "the count of reviews' invalid_json"
    assert_eq "null" "$(jq -c '.counts[] | select(.topic == "legacy") | .pipeline' <<<"$out")" "a topic no pipeline reads"
    local row
    row=$(jq -c ".dead_letters[] | select(.id == $unresolved)" <<<"$out")
    assert_eq "reviews|0|1|invalid_json|false|null|1|1|false" \
        "$(jq -r '[.pipeline, .partition, .kafka_offset, .error_type, .resolved, (.resolution | tostring), .payload_size, .stored_bytes, .truncated] | map(tostring) | join("|")' <<<"$row")" \
        "the unresolved row"
    assert_eq $'bad \x1b[2J\n"quoted"' "$(jq -r '.error_detail' <<<"$row")" "error_detail, exactly"
    if LC_ALL=C grep -q $'[\x1b\x80-\xff]' "$WORK/$TEST_NAME.out"; then fail "raw control or non-ASCII byte in --json"; fi

    out=$(dl_ok list --json --all --limit 2)
    assert_eq "$legacy $resolved" "$(json_ids "$out" .dead_letters)" "--all --limit 2"
    assert_eq "true|2|true" "$(jq -r '[.all, .limit, .dead_letters[1].resolved] | map(tostring) | join("|")' <<<"$out")" "--all"
    assert_eq "acknowledged|$(id -un)|garbage|true" \
        "$(jq -r '.dead_letters[1].resolution | [.kind, .resolved_by, .note, (.resolved_at | test("^[0-9-]+T[0-9:.]+Z$"))] | map(tostring) | join("|")' <<<"$out")" \
        "the resolution of the resolved row"

    # show --json: every column; bytes that are not UTF-8 escaped, and exact in hex.
    local id
    id=$(dead_letter_hex reviews 2 77 invalid_utf8 "not valid UTF-8" 7b22ff7d 6b6579)
    out=$(dl_ok show "$id" --json)
    jq -e . >/dev/null <<<"$out" || fail "show --json is not JSON: $out"
    assert_eq "$id|reviews|reviews|2|77|invalid_utf8|false|null|true|7b22ff7d|false|{\"\\xff}|key|6b6579|true" \
        "$(jq -r '[.id, .pipeline, .topic, .partition, .kafka_offset, .error_type, .resolved, (.resolution | tostring), .redrivable, .payload_hex, .payload_utf8, .payload, .message_key, .message_key_hex, .message_key_utf8] | map(tostring) | join("|")' <<<"$out")" \
        "show --json"
    out=$(dl_ok show "$resolved" --json)
    assert_eq "acknowledged|false" "$(jq -r '[.resolution.kind, .redrivable] | map(tostring) | join("|")' <<<"$out")" \
        "show --json of a resolved one"
}

run_tests
