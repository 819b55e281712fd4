-- The only table that really updates: thumbs_up_count and the reply change
-- over time. review_id is the natural key; last_synced_at orders
-- observations so a replayed or late older one is a no-op.
-- first_seen_at is never updated; sentiment and sentiment_score belong to the
-- sentiment subsystem and are never written by storage-consumer.
CREATE TABLE reviews (
    id               BIGSERIAL PRIMARY KEY,
    application_id   BIGINT NOT NULL REFERENCES apps_registry_application (id),
    review_id        VARCHAR(255) NOT NULL,
    user_name        VARCHAR(255),
    content          TEXT,
    score            SMALLINT NOT NULL,
    thumbs_up_count  INTEGER NOT NULL,
    app_version      VARCHAR(64),
    reviewed_at      TIMESTAMPTZ NOT NULL,
    reply_content    TEXT,
    replied_at       TIMESTAMPTZ,
    first_seen_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_synced_at   TIMESTAMPTZ NOT NULL,
    sentiment        VARCHAR(16),
    sentiment_score  REAL,
    CONSTRAINT reviews_review_id_key UNIQUE (review_id)
);

CREATE INDEX reviews_application_id_idx ON reviews (application_id);
