-- The checker: compares what the scenario's database holds with the model
-- (model.sql) and prints one line of counters:
--
--   published|rows_expected|rows_found|lost|duplicated|wrong|dl_expected|
--   dl_found|offset_violations|unconsumed|not_on_broker|detail
--
-- published          records on the broker (rel.coord joined with rel.gen)
-- rows_expected      natural keys among the good records
-- rows_found         rows in app_stats + reviews + network_metrics
-- lost               expected rows missing + bad records without their dead
--                    letter
-- duplicated         rows beyond one per natural key, rows nobody published,
--                    dead letters of good records or of unknown coordinates
-- wrong              rows that differ from the observation the model says
--                    wins (reviews: the greatest last_synced_at), dead
--                    letters with the wrong error_type
-- offset_violations  (checkpoint, record) pairs where the committed offset
--                    had passed the record while its effect was not in the
--                    database (the offset ahead of the database)
-- unconsumed         records above the last checkpoint's committed offsets
-- not_on_broker      generated records the broker does not hold (a failed
--                    produce, or retention: then the scenario says so)
-- detail             the first few problems, for the report
\set ON_ERROR_STOP 1
SET timezone = 'UTC';
SET client_min_messages = warning;

-- Every published record, with its natural key extracted once.
CREATE TEMP TABLE pub AS
SELECT c.topic, c.partition, c.kafka_offset, g.key, g.kind, g.error_type, g.v, t.pipeline,
       CASE t.pipeline WHEN 'reviews' THEN g.v->>'review_id' END AS review_id,
       CASE t.pipeline WHEN 'reviews' THEN (g.v->>'last_synced_at')::timestamptz END AS lsa,
       CASE t.pipeline WHEN 'app-stats' THEN a.id END AS app_id,
       CASE t.pipeline WHEN 'app-stats' THEN (g.v->>'crawled_at')::timestamptz END AS crawled_at,
       CASE t.pipeline WHEN 'network-metrics' THEN (g.v->>'analysis_id')::uuid END AS analysis_id
FROM rel.coord c
JOIN rel.gen g ON g.key = c.key
JOIN rel.topics t ON t.topic = c.topic
LEFT JOIN apps_registry_application a ON g.kind = 'good' AND a.package_name = g.v->>'package_name';
CREATE INDEX ON pub (topic, partition, kafka_offset);
ANALYZE pub;

-- The winners: per review the greatest last_synced_at (never tied between
-- different observations, by construction); app-stats and network-metrics
-- have one observation per key (redeliveries are byte-identical).
CREATE TEMP TABLE want_reviews AS
SELECT DISTINCT ON (review_id) review_id, v, key, app_id FROM (
    SELECT p.review_id, p.v, p.key, a.id AS app_id, p.lsa
    FROM pub p JOIN apps_registry_application a ON a.package_name = p.v->>'package_name'
    WHERE p.pipeline = 'reviews' AND p.kind = 'good') x
ORDER BY review_id, lsa DESC;
CREATE TEMP TABLE want_app AS
SELECT DISTINCT ON (app_id, crawled_at) app_id, crawled_at, v FROM pub
WHERE pipeline = 'app-stats' AND kind = 'good' ORDER BY app_id, crawled_at, key;
CREATE TEMP TABLE want_nm AS
SELECT DISTINCT ON (analysis_id) analysis_id, v, app_id FROM (
    SELECT p.analysis_id, p.v, p.key, a.id AS app_id
    FROM pub p JOIN apps_registry_application a ON a.package_name = p.v->>'package_name'
    WHERE p.pipeline = 'network-metrics' AND p.kind = 'good') x
ORDER BY analysis_id, key;

CREATE TEMP TABLE problems (what text);

-- Rows that differ from the winning observation.
INSERT INTO problems
SELECT 'wrong review ' || w.review_id || ': stored "' || left(r.content, 12) || '" synced ' || r.last_synced_at
       || ', model wants "' || left(w.v->>'content', 12) || '" synced ' || (w.v->>'last_synced_at')::timestamptz
FROM want_reviews w JOIN reviews r ON r.review_id = w.review_id
WHERE r.application_id <> w.app_id
   OR r.user_name IS DISTINCT FROM w.v->>'user_name'
   OR r.content IS DISTINCT FROM w.v->>'content'
   OR r.score <> (w.v->>'score')::int
   OR r.thumbs_up_count <> (w.v->>'thumbs_up_count')::int
   OR r.app_version IS DISTINCT FROM w.v->>'app_version'
   OR r.reviewed_at <> (w.v->>'reviewed_at')::timestamptz
   OR r.reply_content IS DISTINCT FROM w.v->>'reply_content'
   OR r.replied_at IS DISTINCT FROM (w.v->>'replied_at')::timestamptz
   OR r.last_synced_at <> (w.v->>'last_synced_at')::timestamptz
   OR r.sentiment IS NOT NULL OR r.sentiment_score IS NOT NULL;
INSERT INTO problems
SELECT 'wrong app_stats ' || s.application_id || '/' || s.crawled_at
FROM want_app w JOIN app_stats s ON s.application_id = w.app_id AND s.crawled_at = w.crawled_at
WHERE s.title IS DISTINCT FROM w.v->>'title'
   OR s.score IS DISTINCT FROM (w.v->>'score')::float8
   OR s.ratings_count IS DISTINCT FROM (w.v->>'ratings_count')::bigint
   OR s.reviews_count IS DISTINCT FROM (w.v->>'reviews_count')::bigint
   OR s.min_installs IS DISTINCT FROM (w.v->>'min_installs')::bigint
   OR s.real_installs IS DISTINCT FROM (w.v->>'real_installs')::bigint
   OR s.histogram IS DISTINCT FROM ARRAY(SELECT jsonb_array_elements_text(w.v->'histogram')::bigint)
   OR s.price IS DISTINCT FROM (w.v->>'price')::numeric
   OR s.is_free IS DISTINCT FROM (w.v->>'is_free')::boolean
   OR s.version IS DISTINCT FROM w.v->>'version'
   OR s.app_updated_at IS DISTINCT FROM (w.v->>'app_updated_at')::timestamptz;
INSERT INTO problems
SELECT 'wrong network_metrics ' || n.analysis_id
FROM want_nm w JOIN network_metrics n ON n.analysis_id = w.analysis_id
WHERE n.application_id <> w.app_id
   OR n.analyzed_at <> (w.v->>'analyzed_at')::timestamptz
   OR n.duration_seconds <> (w.v->>'duration_seconds')::float8
   OR n.total_packets <> (w.v->>'total_packets')::bigint
   OR n.total_bytes <> (w.v->>'total_bytes')::bigint
   OR n.unique_hosts IS DISTINCT FROM (w.v->>'unique_hosts')::int
   OR n.dns_queries IS DISTINCT FROM (w.v->>'dns_queries')::int
   OR n.tls_handshakes IS DISTINCT FROM (w.v->>'tls_handshakes')::int
   OR n.avg_packet_size IS DISTINCT FROM (w.v->>'avg_packet_size')::float8
   OR n.protocols IS DISTINCT FROM w.v->'protocols';
INSERT INTO problems
SELECT 'dead letter ' || d.topic || '[' || d.partition || ']@' || d.kafka_offset || ' has error_type '
       || d.error_type || ', model wants ' || p.error_type
FROM dead_letter_events d JOIN pub p USING (topic, partition, kafka_offset)
WHERE p.kind = 'bad' AND d.error_type <> p.error_type;
CREATE TEMP TABLE n_wrong AS SELECT count(*) AS n FROM problems;

-- Missing: expected rows absent, bad records without a dead letter.
CREATE TEMP TABLE lost (what text);
INSERT INTO lost SELECT 'review ' || w.review_id || ' missing'
FROM want_reviews w WHERE NOT EXISTS (SELECT 1 FROM reviews r WHERE r.review_id = w.review_id);
INSERT INTO lost SELECT 'app_stats ' || w.app_id || '/' || w.crawled_at || ' missing'
FROM want_app w WHERE NOT EXISTS (SELECT 1 FROM app_stats s WHERE s.application_id = w.app_id AND s.crawled_at = w.crawled_at);
INSERT INTO lost SELECT 'network_metrics ' || w.analysis_id || ' missing'
FROM want_nm w WHERE NOT EXISTS (SELECT 1 FROM network_metrics n WHERE n.analysis_id = w.analysis_id);
INSERT INTO lost SELECT 'dead letter of ' || p.topic || '[' || p.partition || ']@' || p.kafka_offset || ' (' || p.error_type || ') missing'
FROM pub p WHERE p.kind = 'bad' AND NOT EXISTS (
    SELECT 1 FROM dead_letter_events d WHERE (d.topic, d.partition, d.kafka_offset) = (p.topic, p.partition, p.kafka_offset));

-- In two places, or in one nobody asked for.
CREATE TEMP TABLE dup (what text);
INSERT INTO dup SELECT 'review ' || review_id || ' stored ' || count(*) || ' times' FROM reviews GROUP BY review_id HAVING count(*) > 1;
INSERT INTO dup SELECT 'app_stats ' || application_id || '/' || crawled_at || ' stored ' || count(*) || ' times' FROM app_stats GROUP BY application_id, crawled_at HAVING count(*) > 1;
INSERT INTO dup SELECT 'network_metrics ' || analysis_id || ' stored ' || count(*) || ' times' FROM network_metrics GROUP BY analysis_id HAVING count(*) > 1;
INSERT INTO dup SELECT 'review ' || r.review_id || ' was never published' FROM reviews r WHERE NOT EXISTS (SELECT 1 FROM want_reviews w WHERE w.review_id = r.review_id);
INSERT INTO dup SELECT 'app_stats ' || s.application_id || '/' || s.crawled_at || ' was never published' FROM app_stats s WHERE NOT EXISTS (SELECT 1 FROM want_app w WHERE w.app_id = s.application_id AND w.crawled_at = s.crawled_at);
INSERT INTO dup SELECT 'network_metrics ' || n.analysis_id || ' was never published' FROM network_metrics n WHERE NOT EXISTS (SELECT 1 FROM want_nm w WHERE w.analysis_id = n.analysis_id);
INSERT INTO dup SELECT 'dead letter ' || d.topic || '[' || d.partition || ']@' || d.kafka_offset || ' (' || d.error_type || ') for a '
       || coalesce(p.kind || ' record', 'record never published')
FROM dead_letter_events d LEFT JOIN pub p USING (topic, partition, kafka_offset)
WHERE p.kind IS DISTINCT FROM 'bad';
INSERT INTO dup SELECT 'dead letter ' || topic || '[' || partition || ']@' || kafka_offset || ' stored ' || count(*) || ' times'
FROM dead_letter_events GROUP BY topic, partition, kafka_offset HAVING count(*) > 1;

-- The committed offset never ahead of the database: at every checkpoint,
-- every record below the committed offset has its effect in the snapshot
-- taken right after the offsets were read (a review counts as stored when
-- the row holds that observation or a newer one).
CREATE INDEX ON rel.snap_reviews (ck, review_id);
CREATE INDEX ON rel.snap_app (ck, application_id, crawled_at);
CREATE INDEX ON rel.snap_nm (ck, analysis_id);
CREATE INDEX ON rel.snap_dl (ck, topic, partition, kafka_offset);
ANALYZE rel.snap_reviews; ANALYZE rel.snap_app; ANALYZE rel.snap_nm; ANALYZE rel.snap_dl;
CREATE TEMP TABLE ahead AS
SELECT c.ck, c.label, p.topic, p.partition, p.kafka_offset, c.committed, p.kind
FROM rel.ckpt c JOIN pub p ON p.topic = c.topic AND p.partition = c.partition AND p.kafka_offset < c.committed
WHERE NOT CASE
    WHEN p.kind = 'bad' THEN EXISTS (SELECT 1 FROM rel.snap_dl s WHERE s.ck = c.ck AND s.topic = p.topic AND s.partition = p.partition AND s.kafka_offset = p.kafka_offset)
    WHEN p.pipeline = 'reviews' THEN EXISTS (SELECT 1 FROM rel.snap_reviews s WHERE s.ck = c.ck AND s.review_id = p.review_id AND s.last_synced_at >= p.lsa)
    WHEN p.pipeline = 'app-stats' THEN EXISTS (SELECT 1 FROM rel.snap_app s WHERE s.ck = c.ck AND s.application_id = p.app_id AND s.crawled_at = p.crawled_at)
    ELSE EXISTS (SELECT 1 FROM rel.snap_nm s WHERE s.ck = c.ck AND s.analysis_id = p.analysis_id)
END;
INSERT INTO problems
SELECT 'checkpoint ' || ck || ' (' || label || '): ' || topic || '[' || partition || '] committed ' || committed
       || ' but ' || count(*) || ' record(s) below it not in the database, first at offset ' || min(kafka_offset)
FROM ahead GROUP BY ck, label, topic, partition, committed;

-- Left unconsumed at the last checkpoint (the scenario's end).
CREATE TEMP TABLE unconsumed AS
SELECT count(*) AS n FROM pub p
WHERE NOT EXISTS (SELECT 1 FROM rel.ckpt c WHERE c.ck = (SELECT max(ck) FROM rel.ckpt)
                  AND c.topic = p.topic AND c.partition = p.partition AND c.committed > p.kafka_offset);

SELECT (SELECT count(*) FROM pub)
    || '|' || ((SELECT count(*) FROM want_reviews) + (SELECT count(*) FROM want_app) + (SELECT count(*) FROM want_nm))
    || '|' || ((SELECT count(*) FROM reviews) + (SELECT count(*) FROM app_stats) + (SELECT count(*) FROM network_metrics))
    || '|' || (SELECT count(*) FROM lost)
    || '|' || (SELECT count(*) FROM dup)
    || '|' || (SELECT n FROM n_wrong)
    || '|' || (SELECT count(*) FROM pub WHERE kind = 'bad')
    || '|' || (SELECT count(*) FROM dead_letter_events)
    || '|' || (SELECT count(*) FROM ahead)
    || '|' || (SELECT n FROM unconsumed)
    || '|' || (SELECT count(*) FROM rel.gen g WHERE NOT EXISTS (SELECT 1 FROM rel.coord c WHERE c.key = g.key))
    || '|' || coalesce((SELECT string_agg(what, '; ') FROM (
            SELECT what FROM (SELECT what, 1 AS o FROM lost UNION ALL SELECT what, 2 FROM dup
                              UNION ALL SELECT what, 3 FROM problems) x ORDER BY o LIMIT 6) y), '');
