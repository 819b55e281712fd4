# The checker checks itself: after a clean ingest (all zeros), faults are
# planted in the database inside a transaction that is rolled back — a row
# deleted, a row changed, a row nobody published, a dead letter for a good
# record, a record missing from a checkpoint's snapshot — and check.sql must
# count every one of them. A checker that always says 0 would pass every
# scenario.

scenario_checker_selftest() {
    scenario_begin checker_selftest reviews app-stats network-metrics
    gen_stream 61 3000 300 100
    produce_all
    assert_broker_kept_everything
    svc_start s1
    finish s1
    local clean
    clean=$(cut -d'|' -f4-6,9 "$SW/check")
    expect_eq "lost|duplicated|wrong|offset violations after a clean ingest" "0|0|0|0" "$clean"
    local planted
    planted=$(psql "$DB" -X -q -At -v ON_ERROR_STOP=1 \
        -c "BEGIN" \
        -c "DELETE FROM reviews WHERE id = (SELECT min(id) FROM reviews)" \
        -c "UPDATE reviews SET thumbs_up_count = thumbs_up_count + 1 WHERE id = (SELECT max(id) FROM reviews)" \
        -c "INSERT INTO network_metrics (application_id, analysis_id, analyzed_at, duration_seconds, total_packets, total_bytes)
            SELECT min(id), '11111111-1111-4111-8111-111111111111', now(), 1, 1, 1 FROM apps_registry_application" \
        -c "INSERT INTO dead_letter_events (topic, partition, kafka_offset, payload, payload_size, error_type, error_detail)
            SELECT c.topic, c.partition, c.kafka_offset, '\\x00', 1, 'invalid_json', 'planted'
            FROM rel.coord c JOIN rel.gen g USING (key) JOIN rel.topics t ON t.topic = c.topic
            WHERE g.kind = 'good' AND t.pipeline = 'app-stats' LIMIT 1" \
        -c "DELETE FROM rel.snap_app WHERE ck = (SELECT max(ck) FROM rel.ckpt)
            AND (application_id, crawled_at) = (SELECT application_id, crawled_at FROM app_stats ORDER BY id LIMIT 1)" \
        -f "$HERE/check.sql" -c "ROLLBACK" 2>"$SW/selftest.err" | grep '|' | tail -n 1)
    # lost 1 (the deleted review), duplicated 2 (the unpublished row, the
    # dead letter of a good record), wrong 1 (the changed review), offsets
    # >= 1 (the app_stats row missing from the last checkpoint's snapshot).
    # (The planted app-stats record may have been published twice: each copy
    # below the committed offset counts.)
    local got
    got=$(echo "$planted" | cut -d'|' -f4-6,9)
    case $got in
    1\|2\|1\|[1-9]*) trace "ok: the checker counted every planted fault: $got" ;;
    *) fail_check "the checker missed planted faults: expected lost|duplicated|wrong|offsets 1|2|1|>=1, got [$got]" ;;
    esac
    [ -s "$SW/selftest.err" ] && trace "selftest stderr: $(head -c 300 "$SW/selftest.err")"
    note "clean ingest: $clean; planted 1 lost, 2 duplicated, 1 wrong, 1 offset ahead: counted $got (lost|dup|wrong|offsets)"
}
