-- One row per app per crawl. The natural key (application_id, crawled_at)
-- makes a redelivered message a no-op: the same app at the same crawl
-- instant (microseconds) is by definition the same observation.
CREATE TABLE app_stats (
    id              BIGSERIAL PRIMARY KEY,
    application_id  BIGINT NOT NULL REFERENCES apps_registry_application (id),
    crawled_at      TIMESTAMPTZ NOT NULL,
    title           VARCHAR(255),
    score           DOUBLE PRECISION,
    ratings_count   BIGINT,
    reviews_count   BIGINT,
    min_installs    BIGINT,
    real_installs   BIGINT,
    histogram       BIGINT[],
    price           NUMERIC(12, 2),
    is_free         BOOLEAN,
    version         VARCHAR(64),
    app_updated_at  TIMESTAMPTZ,
    ingested_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT app_stats_application_crawled_key UNIQUE (application_id, crawled_at)
);

-- The unique key above leads with application_id, so it already serves as
-- the foreign key's index; this one states the intent and keeps lookups by
-- app cheap should the key ever change. PostgreSQL does not index foreign
-- keys by itself.
CREATE INDEX app_stats_application_id_idx ON app_stats (application_id);
