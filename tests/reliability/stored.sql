-- How many published records (rel.coord joined with rel.gen) do not have
-- their effect in the database yet: a good record's row (a review: that
-- observation or a newer one), a bad record's dead letter. 0: everything
-- the broker holds is stored. A good record that went to dead letters has
-- had its effect too (its row will never come; check.sql judges whether
-- the dead letter was right), and so has a record of an app the registry
-- changed for (rel.churn) that was stored and then deleted with its app.
SET timezone = 'UTC';
WITH pub AS (
    SELECT c.topic, c.partition, c.kafka_offset, g.kind, g.v, t.pipeline,
           g.kind = 'good' AND EXISTS (SELECT 1 FROM rel.churn ch WHERE ch.package_name = g.v->>'package_name') AS churn
    FROM rel.coord c JOIN rel.gen g ON g.key = c.key JOIN rel.topics t ON t.topic = c.topic)
SELECT count(*) FROM pub p
WHERE NOT EXISTS (
        SELECT 1 FROM dead_letter_events d
        WHERE d.topic = p.topic AND d.partition = p.partition AND d.kafka_offset = p.kafka_offset)
  AND NOT CASE
    WHEN p.kind = 'bad' THEN false
    WHEN p.pipeline = 'reviews' THEN EXISTS (
        SELECT 1 FROM reviews r
        WHERE r.review_id = p.v->>'review_id' AND r.last_synced_at >= (p.v->>'last_synced_at')::timestamptz)
      OR p.churn AND EXISTS (
        SELECT 1 FROM rel.deleted_rows x
        WHERE x.tbl = 'reviews' AND x.review_id = p.v->>'review_id'
          AND x.last_synced_at >= (p.v->>'last_synced_at')::timestamptz)
    WHEN p.pipeline = 'app-stats' THEN EXISTS (
        SELECT 1 FROM app_stats s JOIN apps_registry_application a ON a.id = s.application_id
        WHERE a.package_name = p.v->>'package_name' AND s.crawled_at = (p.v->>'crawled_at')::timestamptz)
      OR p.churn AND EXISTS (
        SELECT 1 FROM rel.deleted_rows x JOIN rel.registry_history h ON h.app_id = x.application_id
        WHERE h.package_name = p.v->>'package_name' AND h.change = 'registered'
          AND x.tbl = 'app_stats' AND x.crawled_at = (p.v->>'crawled_at')::timestamptz)
    ELSE EXISTS (
        SELECT 1 FROM network_metrics n WHERE n.analysis_id = (p.v->>'analysis_id')::uuid)
      OR p.churn AND EXISTS (
        SELECT 1 FROM rel.deleted_rows x
        WHERE x.tbl = 'network_metrics' AND x.analysis_id = (p.v->>'analysis_id')::uuid)
END;
