-- The checker: compares what the scenario's database holds with the model
-- (model.sql) and prints one line of counters:
--
--   published|rows_expected|rows_found|lost|duplicated|wrong|dl_expected|
--   dl_found|offset_violations|unconsumed|not_on_broker|detail
--
-- published          records on the broker (rel.coord joined with rel.gen)
-- rows_expected      natural keys among the good records (of an app the
--                    registry changed for: those stored, the others are
--                    judged record by record, see "The registry" below)
-- rows_found         rows in app_stats + reviews + network_metrics
-- lost               published records without their effect: a good record
--                    whose key has no row (each record of it counts), a bad
--                    record without its dead letter
-- duplicated         rows holding a record of another key (one record
--                    stored under two keys; each row is traced to the record
--                    it holds by its content), rows nobody published, dead
--                    letters of good records (stored or not; for a reason
--                    other than the registry's: those count under wrong) or
--                    of unknown coordinates, dead letters holding another
--                    record than the one published at their coordinates
-- wrong              reviews holding an older observation than their newest
--                    (a stale write), rows that differ from the observation
--                    the model says wins (reviews: the greatest
--                    last_synced_at), dead letters with the wrong
--                    error_type, messages of apps registered when their
--                    batch was bound dead-lettered as unregistered_app or
--                    database_rejected
-- dl_expected        bad records, plus the dead letters of good records the
--                    registry's history justifies
-- dl_found           rows in dead_letter_events
-- offset_violations  (checkpoint, record) pairs where the committed offset,
--                    or the database's own position (consumer_offsets), had
--                    passed the record while its effect (its row, or a dead
--                    letter) was not in the database (the offset ahead of
--                    the database)
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
       CASE t.pipeline WHEN 'network-metrics' THEN (g.v->>'analysis_id')::uuid END AS analysis_id,
       CASE g.kind WHEN 'good' THEN g.v->>'package_name' END AS pkg,
       -- an app the registry changed for during the scenario (rel.churn)
       g.kind = 'good' AND EXISTS (SELECT 1 FROM rel.churn ch WHERE ch.package_name = g.v->>'package_name') AS churn
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

-- Which published record each stored row holds, found by the row's
-- content, not by its key: every observation has its own "obs N" in
-- reviews.content and app_stats.title, and a network-metrics record's
-- measurements are drawn at random, so no two records of different keys
-- share them. A row is then judged by the record it holds: written under a
-- key not that record's own (one record stored twice, under two keys: a
-- unique constraint cannot see it), or a review holding an observation
-- older than its newest (a stale write). A redelivery has its original's
-- content and key: either is the row's record. A row no record's content
-- matches is judged against its key's winner (below).
CREATE TEMP TABLE obs_rv AS
SELECT md5(v->>'content') AS h, v->>'content' AS content, lsa, review_id, key, topic, partition, kafka_offset
FROM pub WHERE pipeline = 'reviews' AND kind = 'good';
CREATE INDEX ON obs_rv (h);
ANALYZE obs_rv;
CREATE TEMP TABLE newest_rv AS
SELECT DISTINCT ON (review_id) review_id, lsa, key FROM obs_rv ORDER BY review_id, lsa DESC, key;
CREATE INDEX ON newest_rv (review_id);
CREATE TEMP TABLE held_rv AS
SELECT r.review_id, o.review_id AS src_id, o.key, o.topic, o.partition, o.kafka_offset, o.lsa,
       n.lsa AS newest_lsa, n.key AS newest_key
FROM reviews r
CROSS JOIN LATERAL (SELECT * FROM obs_rv o
                    WHERE o.h = md5(r.content) AND o.content = r.content AND o.lsa = r.last_synced_at
                    ORDER BY o.review_id = r.review_id DESC, o.key LIMIT 1) o
LEFT JOIN newest_rv n ON n.review_id = r.review_id;
CREATE TEMP TABLE obs_app AS
SELECT v->>'title' AS title, pkg, crawled_at, key, topic, partition, kafka_offset
FROM pub WHERE pipeline = 'app-stats' AND kind = 'good';
CREATE INDEX ON obs_app (title);
ANALYZE obs_app;
CREATE TEMP TABLE held_app AS
SELECT s.application_id, s.crawled_at, a.package_name AS pkg, o.pkg AS src_pkg, o.crawled_at AS src_crawled_at,
       o.key, o.topic, o.partition, o.kafka_offset
FROM app_stats s JOIN apps_registry_application a ON a.id = s.application_id
CROSS JOIN LATERAL (SELECT * FROM obs_app o WHERE o.title = s.title
                    ORDER BY o.pkg = a.package_name AND o.crawled_at = s.crawled_at DESC, o.key LIMIT 1) o;
CREATE TEMP TABLE obs_nm AS
SELECT (v->>'analyzed_at')::timestamptz AS analyzed_at, (v->>'total_bytes')::bigint AS total_bytes,
       analysis_id, key, topic, partition, kafka_offset
FROM pub WHERE pipeline = 'network-metrics' AND kind = 'good';
CREATE INDEX ON obs_nm (analyzed_at, total_bytes);
ANALYZE obs_nm;
CREATE TEMP TABLE held_nm AS
SELECT n.analysis_id, o.analysis_id AS src_id, o.key, o.topic, o.partition, o.kafka_offset
FROM network_metrics n
CROSS JOIN LATERAL (SELECT * FROM obs_nm o WHERE o.analyzed_at = n.analyzed_at AND o.total_bytes = n.total_bytes
                    ORDER BY o.analysis_id = n.analysis_id DESC, o.key LIMIT 1) o;
-- Rows holding a record of another key (counted under duplicated).
CREATE TEMP TABLE foreign_rows (tbl text, row_key text, what text);
INSERT INTO foreign_rows
SELECT 'reviews', review_id, 'review ' || review_id || ' holds record ' || key || ' (' || topic || '[' || partition || ']@'
       || kafka_offset || '), an observation of review ' || src_id || ': a record stored under a key not its own'
FROM held_rv WHERE src_id <> review_id;
INSERT INTO foreign_rows
SELECT 'app_stats', application_id || '/' || crawled_at, 'app_stats ' || pkg || '/' || crawled_at || ' holds record ' || key
       || ' (' || topic || '[' || partition || ']@' || kafka_offset || ') of ' || src_pkg || '/' || src_crawled_at
       || ': a record stored under a key not its own'
FROM held_app WHERE (src_pkg, src_crawled_at) IS DISTINCT FROM (pkg, crawled_at);
INSERT INTO foreign_rows
SELECT 'network_metrics', analysis_id::text, 'network_metrics ' || analysis_id || ' holds record ' || key || ' ('
       || topic || '[' || partition || ']@' || kafka_offset || ') of analysis ' || src_id
       || ': a record stored under a key not its own'
FROM held_nm WHERE src_id <> analysis_id;

CREATE TEMP TABLE problems (what text);

-- A review holding one of its own observations older than its newest: a
-- late older observation written over the newer one.
INSERT INTO problems
SELECT 'stale review ' || review_id || ': holds record ' || key || ' (' || topic || '[' || partition || ']@' || kafka_offset
       || ', synced ' || lsa || ') over the newest, record ' || newest_key || ' synced ' || newest_lsa
FROM held_rv WHERE src_id = review_id AND lsa < newest_lsa;

-- Rows that differ from the winning observation (other than the rows
-- judged by the record they hold, above).
INSERT INTO problems
SELECT 'wrong review ' || w.review_id || ': stored "' || left(r.content, 12) || '" synced ' || r.last_synced_at
       || ', model wants "' || left(w.v->>'content', 12) || '" synced ' || (w.v->>'last_synced_at')::timestamptz
FROM want_reviews w JOIN reviews r ON r.review_id = w.review_id
WHERE (r.application_id <> w.app_id
   OR r.user_name IS DISTINCT FROM w.v->>'user_name'
   OR r.content IS DISTINCT FROM w.v->>'content'
   OR r.score <> (w.v->>'score')::int
   OR r.thumbs_up_count <> (w.v->>'thumbs_up_count')::int
   OR r.app_version IS DISTINCT FROM w.v->>'app_version'
   OR r.reviewed_at <> (w.v->>'reviewed_at')::timestamptz
   OR r.reply_content IS DISTINCT FROM w.v->>'reply_content'
   OR r.replied_at IS DISTINCT FROM (w.v->>'replied_at')::timestamptz
   OR r.last_synced_at <> (w.v->>'last_synced_at')::timestamptz
   OR r.sentiment IS NOT NULL OR r.sentiment_score IS NOT NULL)
  AND NOT EXISTS (SELECT 1 FROM held_rv h WHERE h.review_id = r.review_id AND (h.src_id <> h.review_id OR h.lsa < h.newest_lsa));
INSERT INTO problems
SELECT 'wrong app_stats ' || s.application_id || '/' || s.crawled_at
FROM want_app w JOIN app_stats s ON s.application_id = w.app_id AND s.crawled_at = w.crawled_at
WHERE (s.title IS DISTINCT FROM w.v->>'title'
   OR s.score IS DISTINCT FROM (w.v->>'score')::float8
   OR s.ratings_count IS DISTINCT FROM (w.v->>'ratings_count')::bigint
   OR s.reviews_count IS DISTINCT FROM (w.v->>'reviews_count')::bigint
   OR s.min_installs IS DISTINCT FROM (w.v->>'min_installs')::bigint
   OR s.real_installs IS DISTINCT FROM (w.v->>'real_installs')::bigint
   OR s.histogram IS DISTINCT FROM ARRAY(SELECT jsonb_array_elements_text(w.v->'histogram')::bigint)
   OR s.price IS DISTINCT FROM (w.v->>'price')::numeric
   OR s.is_free IS DISTINCT FROM (w.v->>'is_free')::boolean
   OR s.version IS DISTINCT FROM w.v->>'version'
   OR s.app_updated_at IS DISTINCT FROM (w.v->>'app_updated_at')::timestamptz)
  AND NOT EXISTS (SELECT 1 FROM foreign_rows f WHERE f.tbl = 'app_stats' AND f.row_key = s.application_id || '/' || s.crawled_at);
INSERT INTO problems
SELECT 'wrong network_metrics ' || n.analysis_id
FROM want_nm w JOIN network_metrics n ON n.analysis_id = w.analysis_id
WHERE (n.application_id <> w.app_id
   OR n.analyzed_at <> (w.v->>'analyzed_at')::timestamptz
   OR n.duration_seconds <> (w.v->>'duration_seconds')::float8
   OR n.total_packets <> (w.v->>'total_packets')::bigint
   OR n.total_bytes <> (w.v->>'total_bytes')::bigint
   OR n.unique_hosts IS DISTINCT FROM (w.v->>'unique_hosts')::int
   OR n.dns_queries IS DISTINCT FROM (w.v->>'dns_queries')::int
   OR n.tls_handshakes IS DISTINCT FROM (w.v->>'tls_handshakes')::int
   OR n.avg_packet_size IS DISTINCT FROM (w.v->>'avg_packet_size')::float8
   OR n.protocols IS DISTINCT FROM w.v->'protocols')
  AND NOT EXISTS (SELECT 1 FROM foreign_rows f WHERE f.tbl = 'network_metrics' AND f.row_key = n.analysis_id::text);
INSERT INTO problems
SELECT 'dead letter ' || d.topic || '[' || d.partition || ']@' || d.kafka_offset || ' has error_type '
       || d.error_type || ', model wants ' || p.error_type
FROM dead_letter_events d JOIN pub p USING (topic, partition, kafka_offset)
WHERE p.kind = 'bad' AND d.error_type <> p.error_type;

-- The registry. A dead letter of a good record saying its app is not
-- registered (unregistered_app), or that the app vanished under the write
-- (database_rejected with the foreign-key violation 23503), must be true of
-- the registry when the record's batch was bound. For an app the registry
-- never changed for it never is: every such dead letter is a message of a
-- registered app dead-lettered. For the apps in rel.churn, the history
-- (rel.registry_history) decides:
-- - unregistered_app: the app was possibly absent at some instant between
--   the bind and the dead letter's created_at (its transaction's start; the
--   batch was resolved at most bind_window_ms before, and never before the
--   record was produced);
-- - database_rejected: the id the write used (the DETAIL names it) was
--   deleted by a hard delete that had begun by created_at, and had been
--   registered at some instant since the bind (the bind window, plus the
--   cache TTL of the process then running: a cached id is that old).
CREATE TEMP TABLE bind_window AS
SELECT coalesce((SELECT value FROM rel.params WHERE name = 'bind_window_ms'), 0) * interval '1 ms' AS w;
-- Each registration: certainly visible from its commit until its hard
-- delete's transaction began; possibly from its own transaction's start
-- until that hard delete committed.
CREATE TEMP TABLE reg_spans AS
SELECT r.package_name, r.app_id, r.began AS reg_began,
       coalesce(r.committed, 'infinity') AS reg_committed,
       d.began AS del_began, coalesce(d.committed, 'infinity') AS del_committed
FROM rel.registry_history r
LEFT JOIN rel.registry_history d ON d.app_id = r.app_id AND d.change = 'hard_deleted'
WHERE r.change = 'registered';
CREATE INDEX ON reg_spans (package_name);
ANALYZE reg_spans;
CREATE TEMP TABLE registry_dl AS
SELECT p.topic, p.partition, p.kafka_offset, p.key, p.pkg, p.churn, d.error_type, d.error_detail,
       d.created_at, pr.at AS produced_at,
       substring(d.error_detail from '\(application_id\)=\((\d+)\)')::bigint AS bound_id,
       false AS justified
FROM dead_letter_events d
JOIN pub p USING (topic, partition, kafka_offset)
LEFT JOIN rel.produced pr ON pr.key = p.key
WHERE p.kind = 'good' AND d.error_type IN ('unregistered_app', 'database_rejected');
UPDATE registry_dl x SET justified = NOT EXISTS (
    SELECT 1 FROM reg_spans s, bind_window b
    WHERE s.package_name = x.pkg
      AND s.reg_committed <= least(greatest(x.created_at - b.w, coalesce(x.produced_at, '-infinity')), x.created_at)
      AND (s.del_began IS NULL OR s.del_began >= x.created_at))
WHERE x.churn AND x.error_type = 'unregistered_app';
UPDATE registry_dl x SET justified = x.error_detail LIKE '%23503%' AND EXISTS (
    SELECT 1 FROM reg_spans s, bind_window b
    WHERE s.package_name = x.pkg AND s.app_id = x.bound_id AND s.del_began <= x.created_at
      AND s.del_committed >= x.created_at - b.w - interval '1 s' * (
          SELECT coalesce(max(ph.ttl_seconds), 0) FROM rel.phases ph
          WHERE ph.started <= x.created_at AND coalesce(ph.stopped, 'infinity') >= x.created_at))
WHERE x.churn AND x.error_type = 'database_rejected';
INSERT INTO problems
SELECT 'dead letter ' || topic || '[' || partition || ']@' || kafka_offset || ' (' || error_type || ' at '
       || created_at || ') of ' || pkg || ', registered when its batch was bound'
FROM registry_dl WHERE NOT justified;
CREATE TEMP TABLE n_wrong AS SELECT count(*) AS n FROM problems;

-- Missing, record by record: a good record whose key has no row (a review
-- whose row holds another of its observations is not lost: that row is
-- judged above), a bad record without its dead letter. A review of three
-- observations lost counts 3.
CREATE TEMP TABLE lost (what text);
INSERT INTO lost
SELECT CASE p.pipeline WHEN 'reviews' THEN 'review ' || p.review_id
                       WHEN 'app-stats' THEN 'app_stats ' || p.pkg || '/' || p.crawled_at
                       ELSE 'network_metrics ' || p.analysis_id END
       || ' missing: record ' || p.key || ' (' || p.topic || '[' || p.partition || ']@' || p.kafka_offset || ')'
FROM pub p
WHERE p.kind = 'good' AND NOT p.churn AND NOT CASE p.pipeline
    WHEN 'reviews' THEN EXISTS (SELECT 1 FROM reviews r WHERE r.review_id = p.review_id)
    WHEN 'app-stats' THEN EXISTS (SELECT 1 FROM app_stats s WHERE s.application_id = p.app_id AND s.crawled_at = p.crawled_at)
    ELSE EXISTS (SELECT 1 FROM network_metrics n WHERE n.analysis_id = p.analysis_id)
END;
-- A record of an app the registry changed for: stored, or stored and then
-- deleted with its app (rel.deleted_rows), or dead-lettered for a reason
-- the history gives (above).
INSERT INTO lost
SELECT p.pipeline || ' record ' || p.key || ' of ' || p.pkg || ' (' || p.topic || '[' || p.partition || ']@'
       || p.kafka_offset || ') neither stored, nor deleted with its app, nor dead-lettered for a reason the registry gives'
FROM pub p
WHERE p.churn AND NOT CASE p.pipeline
    WHEN 'reviews' THEN
        EXISTS (SELECT 1 FROM reviews r WHERE r.review_id = p.review_id AND r.last_synced_at >= p.lsa)
        OR EXISTS (SELECT 1 FROM rel.deleted_rows x
                   WHERE x.tbl = 'reviews' AND x.review_id = p.review_id AND x.last_synced_at >= p.lsa)
    WHEN 'app-stats' THEN
        EXISTS (SELECT 1 FROM app_stats s JOIN apps_registry_application a ON a.id = s.application_id
                WHERE a.package_name = p.pkg AND s.crawled_at = p.crawled_at)
        OR EXISTS (SELECT 1 FROM rel.deleted_rows x
                   JOIN rel.registry_history h ON h.app_id = x.application_id AND h.change = 'registered'
                   WHERE x.tbl = 'app_stats' AND h.package_name = p.pkg AND x.crawled_at = p.crawled_at)
    ELSE
        EXISTS (SELECT 1 FROM network_metrics n WHERE n.analysis_id = p.analysis_id)
        OR EXISTS (SELECT 1 FROM rel.deleted_rows x WHERE x.tbl = 'network_metrics' AND x.analysis_id = p.analysis_id)
END
AND NOT EXISTS (SELECT 1 FROM registry_dl x
                WHERE (x.topic, x.partition, x.kafka_offset) = (p.topic, p.partition, p.kafka_offset) AND x.justified);
INSERT INTO lost SELECT 'dead letter of ' || p.topic || '[' || p.partition || ']@' || p.kafka_offset || ' (' || p.error_type || ') missing'
FROM pub p WHERE p.kind = 'bad' AND NOT EXISTS (
    SELECT 1 FROM dead_letter_events d WHERE (d.topic, d.partition, d.kafka_offset) = (p.topic, p.partition, p.kafka_offset));

-- In two places, or in one nobody asked for. A second row of a key is
-- what the tables' unique constraints refuse; a record stored twice gets
-- past them under another key (foreign_rows, above), or as a row and a
-- dead letter. Each dead letter must be the record published at its
-- coordinates (its message key; the unique constraint on the coordinates
-- cannot tell whose record a dead letter holds).
CREATE TEMP TABLE dup (what text);
INSERT INTO dup SELECT what FROM foreign_rows;
INSERT INTO dup SELECT 'review ' || r.review_id || ' was never published' FROM reviews r
WHERE NOT EXISTS (SELECT 1 FROM want_reviews w WHERE w.review_id = r.review_id)
  AND NOT EXISTS (SELECT 1 FROM foreign_rows f WHERE f.tbl = 'reviews' AND f.row_key = r.review_id);
INSERT INTO dup SELECT 'app_stats ' || s.application_id || '/' || s.crawled_at || ' was never published' FROM app_stats s
WHERE NOT EXISTS (SELECT 1 FROM want_app w WHERE w.app_id = s.application_id AND w.crawled_at = s.crawled_at)
  AND NOT EXISTS (SELECT 1 FROM foreign_rows f WHERE f.tbl = 'app_stats' AND f.row_key = s.application_id || '/' || s.crawled_at);
INSERT INTO dup SELECT 'network_metrics ' || n.analysis_id || ' was never published' FROM network_metrics n
WHERE NOT EXISTS (SELECT 1 FROM want_nm w WHERE w.analysis_id = n.analysis_id)
  AND NOT EXISTS (SELECT 1 FROM foreign_rows f WHERE f.tbl = 'network_metrics' AND f.row_key = n.analysis_id::text);
INSERT INTO dup
SELECT CASE WHEN p.kind IS NULL THEN 'dead letter ' || d.topic || '[' || d.partition || ']@' || d.kafka_offset
                                     || ' (' || d.error_type || ') of a record never published'
            ELSE 'good record ' || p.key || ' (' || d.topic || '[' || d.partition || ']@' || d.kafka_offset || ') '
                 || CASE WHEN CASE p.pipeline
                     WHEN 'reviews' THEN EXISTS (SELECT 1 FROM reviews r WHERE r.review_id = p.review_id AND r.last_synced_at >= p.lsa)
                     WHEN 'app-stats' THEN EXISTS (SELECT 1 FROM app_stats s WHERE s.application_id = p.app_id AND s.crawled_at = p.crawled_at)
                     ELSE EXISTS (SELECT 1 FROM network_metrics n WHERE n.analysis_id = p.analysis_id)
                 END THEN 'stored and also dead-lettered' ELSE 'dead-lettered' END || ' as ' || d.error_type
       END
FROM dead_letter_events d LEFT JOIN pub p USING (topic, partition, kafka_offset)
WHERE p.kind IS DISTINCT FROM 'bad'
  -- judged by the registry (above)
  AND NOT (p.kind = 'good' AND d.error_type IN ('unregistered_app', 'database_rejected'));
INSERT INTO dup
SELECT 'dead letter ' || d.topic || '[' || d.partition || ']@' || d.kafka_offset || ' holds the record of key '
       || coalesce(encode(d.message_key, 'escape'), '(none)') || ', published there: ' || p.key
FROM dead_letter_events d JOIN pub p USING (topic, partition, kafka_offset)
WHERE d.message_key IS DISTINCT FROM convert_to(p.key, 'UTF8');

-- The committed offset never ahead of the database: at every checkpoint,
-- every record below the committed offset has its effect in the snapshot
-- taken right after the offsets were read (a review counts as stored when
-- the row holds that observation or a newer one). The same of the
-- database's own positions (consumer_offsets, read right before the rows):
-- every record below next_offset has its effect (DESIGN.md, Progress in the
-- database).
CREATE INDEX ON rel.snap_reviews (ck, review_id);
CREATE INDEX ON rel.snap_app (ck, application_id, crawled_at);
CREATE INDEX ON rel.snap_nm (ck, analysis_id);
CREATE INDEX ON rel.snap_dl (ck, topic, partition, kafka_offset);
ANALYZE rel.snap_reviews; ANALYZE rel.snap_app; ANALYZE rel.snap_nm; ANALYZE rel.snap_dl;
CREATE TEMP TABLE marks AS
SELECT ck, label, 'committed' AS what, topic, partition, committed FROM rel.ckpt
UNION ALL
SELECT s.ck, l.label, 'database position', s.topic, s.partition, s.next_offset
FROM rel.snap_pos s JOIN (SELECT DISTINCT ck, label FROM rel.ckpt) l USING (ck);
CREATE TEMP TABLE ahead AS
SELECT c.ck, c.label, c.what, p.topic, p.partition, p.kafka_offset, c.committed, p.kind
FROM marks c JOIN pub p ON p.topic = c.topic AND p.partition = c.partition AND p.kafka_offset < c.committed
WHERE NOT CASE
    -- An app the registry changed for: its row under any of the app's ids,
    -- or deleted with the app before the snapshot, or a dead letter.
    WHEN p.churn THEN EXISTS (SELECT 1 FROM rel.snap_dl s WHERE s.ck = c.ck AND s.topic = p.topic AND s.partition = p.partition AND s.kafka_offset = p.kafka_offset)
        OR CASE p.pipeline
        WHEN 'reviews' THEN
            EXISTS (SELECT 1 FROM rel.snap_reviews s WHERE s.ck = c.ck AND s.review_id = p.review_id AND s.last_synced_at >= p.lsa)
            OR EXISTS (SELECT 1 FROM rel.deleted_rows x JOIN rel.ckpt_at a ON a.ck = c.ck AND x.deleted_at <= a.at
                       WHERE x.tbl = 'reviews' AND x.review_id = p.review_id AND x.last_synced_at >= p.lsa)
        WHEN 'app-stats' THEN
            EXISTS (SELECT 1 FROM rel.snap_app s JOIN rel.registry_history h ON h.app_id = s.application_id AND h.change = 'registered'
                    WHERE s.ck = c.ck AND h.package_name = p.pkg AND s.crawled_at = p.crawled_at)
            OR EXISTS (SELECT 1 FROM rel.deleted_rows x JOIN rel.ckpt_at a ON a.ck = c.ck AND x.deleted_at <= a.at
                       JOIN rel.registry_history h ON h.app_id = x.application_id AND h.change = 'registered'
                       WHERE x.tbl = 'app_stats' AND h.package_name = p.pkg AND x.crawled_at = p.crawled_at)
        ELSE
            EXISTS (SELECT 1 FROM rel.snap_nm s WHERE s.ck = c.ck AND s.analysis_id = p.analysis_id)
            OR EXISTS (SELECT 1 FROM rel.deleted_rows x JOIN rel.ckpt_at a ON a.ck = c.ck AND x.deleted_at <= a.at
                       WHERE x.tbl = 'network_metrics' AND x.analysis_id = p.analysis_id)
        END
    WHEN p.kind = 'bad' THEN EXISTS (SELECT 1 FROM rel.snap_dl s WHERE s.ck = c.ck AND s.topic = p.topic AND s.partition = p.partition AND s.kafka_offset = p.kafka_offset)
    -- A good record dead-lettered had its effect too (whether the dead
    -- letter was right is counted above, not here).
    WHEN EXISTS (SELECT 1 FROM rel.snap_dl s WHERE s.ck = c.ck AND s.topic = p.topic AND s.partition = p.partition AND s.kafka_offset = p.kafka_offset) THEN true
    WHEN p.pipeline = 'reviews' THEN EXISTS (SELECT 1 FROM rel.snap_reviews s WHERE s.ck = c.ck AND s.review_id = p.review_id AND s.last_synced_at >= p.lsa)
    WHEN p.pipeline = 'app-stats' THEN EXISTS (SELECT 1 FROM rel.snap_app s WHERE s.ck = c.ck AND s.application_id = p.app_id AND s.crawled_at = p.crawled_at)
    ELSE EXISTS (SELECT 1 FROM rel.snap_nm s WHERE s.ck = c.ck AND s.analysis_id = p.analysis_id)
END;
INSERT INTO problems
SELECT 'checkpoint ' || ck || ' (' || label || '): ' || topic || '[' || partition || '] ' || what || ' ' || committed
       || ' but ' || count(*) || ' record(s) below it not in the database, first at offset ' || min(kafka_offset)
FROM ahead GROUP BY ck, label, what, topic, partition, committed;

-- Left unconsumed at the last checkpoint (the scenario's end).
CREATE TEMP TABLE unconsumed AS
SELECT count(*) AS n FROM pub p
WHERE NOT EXISTS (SELECT 1 FROM rel.ckpt c WHERE c.ck = (SELECT max(ck) FROM rel.ckpt)
                  AND c.topic = p.topic AND c.partition = p.partition AND c.committed > p.kafka_offset);

-- The registry's figures, for the scenario's report.
DELETE FROM rel.registry_verdict;
INSERT INTO rel.registry_verdict
SELECT 'registered_dead_lettered', count(*) FROM registry_dl WHERE NOT justified
UNION ALL SELECT 'registered_dead_lettered_unchanged_apps', count(*) FROM registry_dl WHERE NOT justified AND NOT churn
UNION ALL SELECT 'registered_dead_lettered_unregistered_app', count(*) FROM registry_dl WHERE NOT justified AND error_type = 'unregistered_app'
UNION ALL SELECT 'registered_dead_lettered_database_rejected', count(*) FROM registry_dl WHERE NOT justified AND error_type = 'database_rejected'
UNION ALL SELECT 'justified_unregistered_app', count(*) FROM registry_dl WHERE justified AND error_type = 'unregistered_app'
UNION ALL SELECT 'justified_database_rejected', count(*) FROM registry_dl WHERE justified AND error_type = 'database_rejected'
UNION ALL SELECT 'churn_records', count(*) FROM pub WHERE churn
UNION ALL SELECT 'deleted_rows', count(*) FROM rel.deleted_rows;
DELETE FROM rel.registry_misfiled;
INSERT INTO rel.registry_misfiled
SELECT topic, partition, kafka_offset, pkg, churn, error_type, created_at FROM registry_dl WHERE NOT justified;

-- Rows expected: of an app the registry changed for, only those stored
-- (its other records are judged one by one above).
CREATE TEMP TABLE n_expected AS
SELECT (SELECT count(*) FROM want_reviews w
        WHERE NOT EXISTS (SELECT 1 FROM rel.churn ch WHERE ch.package_name = w.v->>'package_name')
           OR EXISTS (SELECT 1 FROM reviews r WHERE r.review_id = w.review_id))
     + (SELECT count(*) FROM want_app w
        WHERE NOT EXISTS (SELECT 1 FROM rel.churn ch WHERE ch.package_name = w.v->>'package_name')
           OR EXISTS (SELECT 1 FROM app_stats s WHERE s.application_id = w.app_id AND s.crawled_at = w.crawled_at))
     + (SELECT count(*) FROM want_nm w
        WHERE NOT EXISTS (SELECT 1 FROM rel.churn ch WHERE ch.package_name = w.v->>'package_name')
           OR EXISTS (SELECT 1 FROM network_metrics n WHERE n.analysis_id = w.analysis_id)) AS n;

SELECT (SELECT count(*) FROM pub)
    || '|' || (SELECT n FROM n_expected)
    || '|' || ((SELECT count(*) FROM reviews) + (SELECT count(*) FROM app_stats) + (SELECT count(*) FROM network_metrics))
    || '|' || (SELECT count(*) FROM lost)
    || '|' || (SELECT count(*) FROM dup)
    || '|' || (SELECT n FROM n_wrong)
    || '|' || ((SELECT count(*) FROM pub WHERE kind = 'bad') + (SELECT count(*) FROM registry_dl WHERE justified))
    || '|' || (SELECT count(*) FROM dead_letter_events)
    || '|' || (SELECT count(*) FROM ahead)
    || '|' || (SELECT n FROM unconsumed)
    || '|' || (SELECT count(*) FROM rel.gen g WHERE NOT EXISTS (SELECT 1 FROM rel.coord c WHERE c.key = g.key))
    || '|' || coalesce((SELECT string_agg(what, '; ') FROM (
            SELECT what FROM (SELECT what, 1 AS o FROM lost UNION ALL SELECT what, 2 FROM dup
                              UNION ALL SELECT what, 3 FROM problems
                              UNION ALL SELECT count(*) || ' message(s) of apps registered when their batch was bound were dead-lettered ('
                                               || string_agg(DISTINCT error_type, ', ') || ')', 0
                                        FROM registry_dl WHERE NOT justified HAVING count(*) > 0) x
                        ORDER BY o LIMIT 6) y), '');
