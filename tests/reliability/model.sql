-- The model of one reliability scenario, kept beside the service's tables in
-- the scenario's own database (schema rel; the service never reads it).
--
-- rel.gen         every record the generator made (gen.awk's model.tsv)
-- rel.coord       where each record actually is on the broker (kcat -C)
-- rel.topics      which pipeline each of the scenario's topics feeds
-- rel.ckpt        checkpoints: the committed offset of each partition...
-- rel.snap_*      ...and what the database held right after it was read
-- rel.watermarks  each partition's low and high watermark at the end
CREATE SCHEMA rel;

CREATE TABLE rel.gen (
    key         text PRIMARY KEY,
    topic       text NOT NULL,
    kind        text NOT NULL CHECK (kind IN ('good', 'bad')),
    error_type  text,
    v           jsonb
);

CREATE TABLE rel.coord (
    topic         text NOT NULL,
    partition     int NOT NULL,
    kafka_offset  bigint NOT NULL,
    key           text NOT NULL,
    PRIMARY KEY (topic, partition, kafka_offset)
);

CREATE TABLE rel.topics (topic text PRIMARY KEY, pipeline text NOT NULL);

CREATE TABLE rel.ckpt (
    ck         int NOT NULL,
    label      text NOT NULL,
    topic      text NOT NULL,
    partition  int NOT NULL,
    committed  bigint NOT NULL
);

CREATE TABLE rel.snap_reviews (ck int, review_id text, last_synced_at timestamptz);
CREATE TABLE rel.snap_app (ck int, application_id bigint, crawled_at timestamptz);
CREATE TABLE rel.snap_nm (ck int, analysis_id uuid);
CREATE TABLE rel.snap_dl (ck int, topic text, partition int, kafka_offset bigint);

CREATE TABLE rel.watermarks (topic text, partition int, lo bigint, hi bigint);
