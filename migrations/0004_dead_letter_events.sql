-- Records that can never be stored, written in the same transaction as the
-- good rows of their batch, so the offset can never pass a bad record while
-- the record of it is lost. A record's coordinates are its identity:
-- replaying a partition must not multiply rows. payload is BYTEA, not TEXT,
-- precisely so that invalid UTF-8 can be kept.
CREATE TABLE dead_letter_events (
    id               BIGSERIAL PRIMARY KEY,
    topic            VARCHAR(255) NOT NULL,
    partition        INTEGER NOT NULL,
    kafka_offset     BIGINT NOT NULL,
    kafka_timestamp  TIMESTAMPTZ,
    message_key      BYTEA,
    payload          BYTEA NOT NULL,
    payload_size     INTEGER NOT NULL,
    error_type       VARCHAR(64) NOT NULL,
    error_detail     TEXT NOT NULL,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT dead_letter_events_coordinates_key UNIQUE (topic, partition, kafka_offset)
);

CREATE INDEX dead_letter_events_error_type_idx ON dead_letter_events (error_type, created_at);
