# The checker checks itself: after a clean ingest (all zeros), each failure
# it claims to catch is planted in the database, one at a time, inside a
# transaction that is rolled back, and check.sql must report it by its own
# check: exactly the counts it should add (lost|duplicated|wrong|offsets)
# and only lines of that check's message. A checker that always says 0
# would pass every scenario. Then the registry's checks (selftest_registry),
# and the end of a scenario whose offsets stay behind (selftest_drain).

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
    PLANTED=0
    PLANT_MISSED=0
    # A review published as exactly two records (two observations, or one
    # and its redelivery): losing its row loses both.
    local rv2="(SELECT g.v->>'review_id' FROM rel.gen g JOIN rel.coord c USING (key)
                WHERE g.kind = 'good' AND g.v ? 'review_id' GROUP BY 1 HAVING count(*) = 2 ORDER BY 1 LIMIT 1)"
    # A bad record's dead letter.
    local bad_dl="(SELECT min(d.id) FROM dead_letter_events d JOIN rel.coord c USING (topic, partition, kafka_offset)
                   JOIN rel.gen g USING (key) WHERE g.kind = 'bad')"
    selftest_plant "a review's row deleted" '2|0|0|0' '^review rv-[0-9]+ missing: record p[0-9]+ ' \
        "DELETE FROM reviews WHERE review_id = $rv2"
    selftest_plant "a bad record's dead letter deleted" '1|0|0|0' '^dead letter of .*\[[0-9]\]@[0-9]+ \([a-z_0-9]+\) missing$' \
        "DELETE FROM dead_letter_events WHERE id = $bad_dl"
    selftest_plant "a dead letter with the wrong error_type" '0|0|1|0' '^dead letter .* has error_type [a-z_0-9]+, model wants [a-z_0-9]+$' \
        "UPDATE dead_letter_events SET error_type = CASE error_type WHEN 'invalid_json' THEN 'missing_field' ELSE 'invalid_json' END
         WHERE id = $bad_dl"
    selftest_plant "a dead letter holding another record" '0|1|0|0' '^dead letter .* holds the record of key p0, published there: p[0-9]+$' \
        "UPDATE dead_letter_events SET message_key = convert_to('p0', 'UTF8') WHERE id = $bad_dl"
    selftest_plant "a good record stored and also dead-lettered" '0|1|0|0' '^good record p[0-9]+ \(.*\) stored and also dead-lettered as invalid_json$' \
        "INSERT INTO dead_letter_events (topic, partition, kafka_offset, message_key, payload, payload_size, error_type, error_detail)
         SELECT c.topic, c.partition, c.kafka_offset, convert_to(c.key, 'UTF8'), '\\x00', 1, 'invalid_json', 'planted'
         FROM rel.coord c JOIN rel.gen g USING (key) JOIN rel.topics t ON t.topic = c.topic
         WHERE g.kind = 'good' AND t.pipeline = 'app-stats' ORDER BY c.key LIMIT 1"
    selftest_plant "a dead letter at coordinates nothing was published at" '0|1|0|0' '^dead letter .* of a record never published$' \
        "INSERT INTO dead_letter_events (topic, partition, kafka_offset, message_key, payload, payload_size, error_type, error_detail)
         VALUES ('$T_REVIEWS', 0, 1000000, convert_to('p0', 'UTF8'), '\\x00', 1, 'invalid_json', 'planted')"
    # The same record stored a second time under a key of its own making:
    # a review under a review_id nobody published, an app-stats message
    # under a crawled_at an hour off (a time zone read wrong).
    selftest_plant "a review stored twice, under two keys" '0|1|0|0' '^review rv-planted holds record p[0-9]+ .*: a record stored under a key not its own$' \
        "INSERT INTO reviews (application_id, review_id, user_name, content, score, thumbs_up_count, app_version,
                              reviewed_at, reply_content, replied_at, last_synced_at)
         SELECT application_id, 'rv-planted', user_name, content, score, thumbs_up_count, app_version,
                reviewed_at, reply_content, replied_at, last_synced_at
         FROM reviews WHERE id = (SELECT min(id) FROM reviews)"
    selftest_plant "an app-stats message stored twice, under two keys" '0|1|0|0' '^app_stats .* holds record p[0-9]+ .*: a record stored under a key not its own$' \
        "INSERT INTO app_stats (application_id, crawled_at, title, score, ratings_count, reviews_count, min_installs,
                                real_installs, histogram, price, is_free, version, app_updated_at)
         SELECT application_id, crawled_at + interval '1 hour', title, score, ratings_count, reviews_count, min_installs,
                real_installs, histogram, price, is_free, version, app_updated_at
         FROM app_stats WHERE id = (SELECT min(id) FROM app_stats)"
    # An older observation written over the newest one of its review.
    selftest_plant "a stale write" '0|0|1|0' '^stale review rv-[0-9]+: holds record p[0-9]+ .* over the newest, record p[0-9]+ ' \
        "UPDATE reviews r SET user_name = o.v->>'user_name', content = o.v->>'content', score = (o.v->>'score')::int,
                thumbs_up_count = (o.v->>'thumbs_up_count')::int, app_version = o.v->>'app_version',
                reviewed_at = (o.v->>'reviewed_at')::timestamptz, reply_content = o.v->>'reply_content',
                replied_at = (o.v->>'replied_at')::timestamptz, last_synced_at = (o.v->>'last_synced_at')::timestamptz
         FROM (SELECT g.v FROM rel.gen g JOIN rel.coord c USING (key)
               WHERE g.kind = 'good' AND g.v ? 'review_id' AND g.v->>'review_id' IN (
                   SELECT v->>'review_id' FROM rel.gen WHERE kind = 'good' AND v ? 'review_id'
                   GROUP BY 1 HAVING count(DISTINCT v->>'last_synced_at') > 1)
               ORDER BY g.v->>'review_id', (g.v->>'last_synced_at')::timestamptz LIMIT 1) o
         WHERE r.review_id = o.v->>'review_id'"
    selftest_plant "a review's field changed" '0|0|1|0' '^wrong review rv-[0-9]+: ' \
        "UPDATE reviews SET thumbs_up_count = thumbs_up_count + 1 WHERE id = (SELECT max(id) FROM reviews)"
    selftest_plant "a row nobody published" '0|1|0|0' '^network_metrics 11111111-1111-4111-8111-111111111111 was never published$' \
        "INSERT INTO network_metrics (application_id, analysis_id, analyzed_at, duration_seconds, total_packets, total_bytes)
         SELECT min(id), '11111111-1111-4111-8111-111111111111', now(), 1, 1, 1 FROM apps_registry_application"
    # A row missing from the last checkpoint's snapshot: below Kafka's
    # committed offset (and the database's position); then, with Kafka's
    # committed offsets taken out of that checkpoint, below the database's
    # own position (consumer_offsets) only. (The record may have been
    # published twice: each copy below the offset counts.)
    local gone="DELETE FROM rel.snap_app WHERE ck = (SELECT max(ck) FROM rel.ckpt)
                AND (application_id, crawled_at) = (SELECT application_id, crawled_at FROM app_stats ORDER BY id LIMIT 1)"
    selftest_plant "a row missing below the committed offset" '0|0|0|[1-9]*' '^checkpoint [0-9]+ \(end\): .*\[[0-9]\] (committed|database position) [0-9]+ but [0-9]+ record\(s\) below it not in the database' \
        "$gone"
    selftest_plant "a row missing below the database's position only" '0|0|0|[1-9]*' '^checkpoint [0-9]+ \(end\): .*\[[0-9]\] database position [0-9]+ but ' \
        "UPDATE rel.ckpt SET committed = -1001 WHERE ck = (SELECT max(ck) FROM rel.ckpt)" "$gone"
    note "clean ingest: $clean (lost|dup|wrong|offsets); $PLANTED failures planted one at a time, $PLANT_MISSED not reported by their own check"
    selftest_registry
    selftest_drain
}

# Plant one failure (SQL statements) in a transaction rolled back and run
# the checker: it must count exactly WANT (lost|duplicated|wrong|offsets, a
# bash pattern) and report it only in lines matching REGEX (the check's own
# message), at least one.
selftest_plant() { # what want regex sql...
    local what=$1 want=$2 re=$3 out got msgs args=() q
    shift 3
    for q in "$@"; do args+=(-c "$q"); done
    PLANTED=$((PLANTED + 1))
    out=$(psql "$DB" -X -q -At -v ON_ERROR_STOP=1 -c "BEGIN" "${args[@]}" -f "$HERE/check.sql" \
        -c "SELECT 'problem: ' || what FROM (SELECT what FROM lost UNION ALL SELECT what FROM dup
                                             UNION ALL SELECT what FROM problems) x" \
        -c "ROLLBACK" 2>>"$SW/selftest.err")
    got=$(echo "$out" | grep -v '^problem: ' | grep '|' | tail -n 1 | cut -d'|' -f4-6,9)
    msgs=$(echo "$out" | sed -n 's/^problem: //p')
    # shellcheck disable=SC2053 # WANT is a pattern
    if [[ $got == $want ]] && [ -n "$msgs" ] && ! echo "$msgs" | grep -qvE -- "$re"; then
        trace "ok: planted $what: counted $got, reported: $(echo "$msgs" | head -n 1 | cut -c1-200)"
    else
        PLANT_MISSED=$((PLANT_MISSED + 1))
        fail_check "the checker did not report a planted failure by its own check ($what): expected lost|duplicated|wrong|offsets $want and lines matching /$re/, got [$got]: $(echo "$msgs" | head -n 3 | cut -c1-200 | paste -sd';') $(tail -c 300 "$SW/selftest.err")"
    fi
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
            SELECT c.topic, c.partition, c.kafka_offset, c.key, g.v, t.pipeline,
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
        -c "INSERT INTO dead_letter_events (topic, partition, kafka_offset, message_key, payload, payload_size, error_type, error_detail, created_at)
            SELECT c.topic, c.partition, c.kafka_offset, convert_to(c.key, 'UTF8'), '\\x00', 1, x.error_type, x.detail, x.at
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

# The end of a scenario whose committed offsets stay behind the high
# watermarks fails it (finish): a record published after the end, which no
# process is left to consume, must make finish fail a check. Run in a
# subshell with a work directory of its own, so that the failure is read
# here and is not this scenario's; nothing runs that could move an offset,
# so the wait's stall bound only decides how soon it gives up.
selftest_drain() {
    local d=$SW/drain
    mkdir -p "$d"
    echo 'pdrain|{"planted":"behind"}' | kcat_produce "$T_NETWORK_METRICS" -p 0 ||
        fail_check "kcat could not produce the record left unconsumed"
    (
        SW=$d
        STALL_S=1
        finish
    ) >"$d/trace.log" 2>&1 3>/dev/null
    local why
    why=$(grep -m1 'behind the high watermarks' "$d/failures" 2>/dev/null)
    if [ -n "$why" ]; then
        trace "ok: offsets behind the high watermarks fail the scenario: $why"
    else
        fail_check "a scenario whose committed offsets stay behind the high watermarks did not fail: $(head -c 300 "$d/failures" 2>/dev/null)"
    fi
    note "offsets left behind the high watermarks at the end: ${why:-not reported}"
}
