-- The model of one reliability scenario, kept beside the service's tables in
-- the scenario's own database (schema rel; the service never reads it).
--
-- rel.gen         every record the generator made (gen.awk's model.tsv)
-- rel.coord       where each record actually is on the broker (kcat -C)
-- rel.topics      which pipeline each of the scenario's topics feeds
-- rel.ckpt        checkpoints: the committed offset of each partition...
-- rel.snap_*      ...and what the database held right after it was read
--                 (snap_pos: the database's own positions, consumer_offsets,
--                 read before the rows)
-- rel.position_moves  every change of a consumer_offsets row (trigger)
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
CREATE TABLE rel.snap_pos (ck int, topic text, partition int, next_offset bigint);

-- Every change of the database's positions (DESIGN.md, Progress in the
-- database): a row never moves backwards, whoever writes it (a member that
-- lost its partitions and writes a late batch included).
CREATE TABLE rel.position_moves (
    group_id  text NOT NULL,
    topic     text NOT NULL,
    partition int NOT NULL,
    old_next  bigint,
    new_next  bigint NOT NULL,
    at        timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE FUNCTION rel.record_position_move() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO rel.position_moves (group_id, topic, partition, old_next, new_next)
    VALUES (NEW.group_id, NEW.topic, NEW.partition,
            CASE TG_OP WHEN 'UPDATE' THEN OLD.next_offset END, NEW.next_offset);
    RETURN NULL;
END $$;
CREATE TRIGGER rel_position_moves AFTER INSERT OR UPDATE ON public.consumer_offsets
    FOR EACH ROW EXECUTE FUNCTION rel.record_position_move();

CREATE TABLE rel.watermarks (topic text, partition int, lo bigint, hi bigint);

-- The registry's changes (the production scenario; empty elsewhere). The
-- checker judges each dead letter of an app the registry changed for by
-- this history: a change became visible at some instant between `began`
-- (clock_timestamp() inside its transaction, before the change) and
-- `committed` (clock_timestamp() once its COMMIT returned).
--
-- rel.registry_history  registered (a new id), soft_deleted, hard_deleted
-- rel.churn             the apps the registry changes for, and their fate
-- rel.deleted_rows      the rows a hard delete removed, and when
-- rel.produced          when each record was handed to the producer (it
--                       cannot have been consumed before)
-- rel.phases            the service processes, their cache TTL, and when
--                       each ran
-- rel.ckpt_at           when each checkpoint's snapshot was taken (no hard
--                       delete runs in between)
-- rel.params            bind_window_ms: the longest the scenario saw
--                       between a batch's resolve and the start of the
--                       transaction that wrote it
-- rel.registry_verdict  written by the checker: its registry counts...
-- rel.registry_misfiled  ...and the dead letters of apps registered when
--                       their batch was bound
CREATE TABLE rel.registry_history (
    seq           bigserial PRIMARY KEY,
    package_name  text NOT NULL,
    app_id        bigint NOT NULL,
    change        text NOT NULL CHECK (change IN ('registered', 'soft_deleted', 'hard_deleted')),
    began         timestamptz NOT NULL,
    committed     timestamptz
);
CREATE INDEX ON rel.registry_history (package_name);
CREATE TABLE rel.churn (package_name text PRIMARY KEY, fate text NOT NULL);
CREATE TABLE rel.deleted_rows (
    tbl             text NOT NULL,
    application_id  bigint NOT NULL,
    review_id       text,
    last_synced_at  timestamptz,
    crawled_at      timestamptz,
    analysis_id     uuid,
    deleted_at      timestamptz NOT NULL
);
CREATE TABLE rel.produced (key text PRIMARY KEY, at timestamptz NOT NULL);
CREATE TABLE rel.phases (name text PRIMARY KEY, ttl_seconds int NOT NULL, started timestamptz NOT NULL, stopped timestamptz);
CREATE TABLE rel.ckpt_at (ck int PRIMARY KEY, at timestamptz NOT NULL);
CREATE TABLE rel.params (name text PRIMARY KEY, value numeric NOT NULL);
CREATE TABLE rel.registry_verdict (what text PRIMARY KEY, n bigint NOT NULL);
CREATE TABLE rel.registry_misfiled (
    topic text, partition int, kafka_offset bigint, package_name text, changed boolean,
    error_type text, created_at timestamptz);
