# The checker checks itself: after a clean ingest (all zeros), faults are
# planted in the database inside a transaction that is rolled back — a row
# deleted, a row changed, a row nobody published, a dead letter for a good
# record, a record missing from a checkpoint's snapshot — and check.sql must
# count every one of them. A checker that always says 0 would pass every
# scenario. Then the same for the registry's checks (selftest_registry).

scenario_checker_selftest() {
    scenario_begin checker_selftest reviews app-stats network-metrics
    gen_stream 61 3000 300 100
    produce_all
    assert_scenario_kept_everything
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
    # The database's own positions (consumer_offsets): with Kafka's
    # committed offsets taken out of the last checkpoint, a row missing from
    # its snapshot is below the database's position only.
    local pos
    pos=$(psql "$DB" -X -q -At -v ON_ERROR_STOP=1 \
        -c "BEGIN" \
        -c "UPDATE rel.ckpt SET committed = -1001 WHERE ck = (SELECT max(ck) FROM rel.ckpt)" \
        -c "DELETE FROM rel.snap_app WHERE ck = (SELECT max(ck) FROM rel.ckpt)
            AND (application_id, crawled_at) = (SELECT application_id, crawled_at FROM app_stats ORDER BY id LIMIT 1)" \
        -f "$HERE/check.sql" -c "ROLLBACK" 2>>"$SW/selftest.err" | grep '|' | tail -n 1 | cut -d'|' -f9)
    case $pos in
    [1-9]*) trace "ok: the checker counted a row missing below the database's position: $pos" ;;
    *) fail_check "the checker missed a row missing below the database's position (consumer_offsets): offsets [$pos]" ;;
    esac
    note "clean ingest: $clean; planted 1 lost, 2 duplicated, 1 wrong, 1 offset ahead: counted $got (lost|dup|wrong|offsets); 1 row missing below the database's position only: counted $pos"
    selftest_registry
}

# The registry's checks (the production scenario): com.rel.app1 never
# changed, so any unregistered_app or database_rejected dead letter of it is
# a registered app's message dead-lettered; com.rel.app2 is made an app that
# was hard-deleted an hour ago (history only), so a dead letter of it is
# judged by when it was written, and a row deleted with it is not lost.
selftest_registry() {
    local planted got verdict
    planted=$(psql "$DB" -X -q -At -v ON_ERROR_STOP=1 \
        -c "BEGIN" \
        -c "CREATE TEMP TABLE cand AS
            SELECT c.topic, c.partition, c.kafka_offset, g.v, t.pipeline,
                   row_number() OVER (PARTITION BY g.v->>'package_name' ORDER BY c.topic, c.partition, c.kafka_offset) AS rn
            FROM rel.coord c JOIN rel.gen g USING (key) JOIN rel.topics t ON t.topic = c.topic
            WHERE g.kind = 'good' AND g.v->>'package_name' IN ('com.rel.app1', 'com.rel.app2')
              AND (t.pipeline <> 'reviews' OR g.v->>'review_id' IN (
                  SELECT g2.v->>'review_id' FROM rel.gen g2 WHERE g2.kind = 'good' AND g2.v ? 'review_id'
                  GROUP BY 1 HAVING count(*) = 1))" \
        -c "CREATE TEMP TABLE h AS SELECT now() - interval '1 hour' AS t,
                   (SELECT id FROM apps_registry_application WHERE package_name = 'com.rel.app2') AS app2" \
        -c "INSERT INTO rel.churn VALUES ('com.rel.app2', 'hard_deleted')" \
        -c "INSERT INTO rel.registry_history (package_name, app_id, change, began, committed)
            SELECT 'com.rel.app2', app2, 'registered', '2000-01-01', '2000-01-01' FROM h
            UNION ALL SELECT 'com.rel.app2', app2, 'hard_deleted', t, t + interval '1 s' FROM h" \
        -c "INSERT INTO dead_letter_events (topic, partition, kafka_offset, payload, payload_size, error_type, error_detail, created_at)
            SELECT c.topic, c.partition, c.kafka_offset, '\\x00', 1, x.error_type, x.detail, x.at
            FROM cand c, h, LATERAL (VALUES
                -- app1, registered all along: two wrong dead letters
                ('com.rel.app1', 1, 'unregistered_app', 'planted', now()),
                ('com.rel.app1', 2, 'database_rejected', '23503: Key (application_id)=(1) is not present', now()),
                -- app2: absent since its delete (right), present before it (wrong)
                ('com.rel.app2', 1, 'unregistered_app', 'planted', h.t + interval '1 min'),
                ('com.rel.app2', 2, 'unregistered_app', 'planted', h.t - interval '10 min'),
                -- app2's id vanished under the write (right); an hour after
                -- the delete, with no cache TTL, it cannot have been bound (wrong)
                ('com.rel.app2', 3, 'database_rejected', '23503: Key (application_id)=(' || h.app2 || ') is not present', h.t + interval '500 ms'),
                ('com.rel.app2', 4, 'database_rejected', '23503: Key (application_id)=(' || h.app2 || ') is not present', now())
            ) AS x(pkg, rn, error_type, detail, at)
            WHERE c.v->>'package_name' = x.pkg AND c.rn = x.rn" \
        -c "CREATE TEMP TABLE gone AS
            SELECT v->>'review_id' AS review_id FROM cand
            WHERE pipeline = 'reviews' AND v->>'package_name' = 'com.rel.app2' AND rn > 4 ORDER BY rn LIMIT 2" \
        -c "INSERT INTO rel.deleted_rows (tbl, application_id, review_id, last_synced_at, deleted_at)
            SELECT 'reviews', r.application_id, r.review_id, r.last_synced_at, now() FROM reviews r
            WHERE r.review_id = (SELECT min(review_id) FROM gone)" \
        -c "DELETE FROM reviews WHERE review_id IN (SELECT review_id FROM gone)" \
        -f "$HERE/check.sql" \
        -c "SELECT 'verdict', string_agg(n::text, '|' ORDER BY what) FROM rel.registry_verdict
            WHERE what IN ('registered_dead_lettered', 'justified_unregistered_app', 'justified_database_rejected')" \
        -c "ROLLBACK" 2>"$SW/selftest-registry.err")
    got=$(echo "$planted" | grep -v '^verdict' | grep '|' | tail -n 1 | cut -d'|' -f4-6,9)
    verdict=$(echo "$planted" | grep '^verdict' | cut -d'|' -f2-)
    # lost 1 (the review deleted without a deleted_rows record), wrong 4
    # (the two of app1, the two of app2 the history contradicts); verdict:
    # database_rejected justified 1, unregistered_app justified 1,
    # registered apps dead-lettered 4.
    if [ "$got" = "1|0|4|0" ] && [ "$verdict" = "1|1|4" ]; then
        trace "ok: the checker judged every planted registry dead letter: $got, verdict $verdict"
    else
        fail_check "the checker misjudged planted registry dead letters: expected lost|duplicated|wrong|offsets 1|0|4|0 and justified database_rejected|unregistered_app|registered dead-lettered 1|1|4, got [$got] and [$verdict] $(head -c 300 "$SW/selftest-registry.err")"
    fi
    note "registry: planted 4 dead letters of registered apps, 2 justified by the history, 1 row deleted with its app, 1 lost: counted $got (lost|dup|wrong|offsets), $verdict (justified database_rejected|unregistered_app|registered dead-lettered)"
}
