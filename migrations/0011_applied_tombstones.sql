-- What each pipeline's tombstones deleted or marked, per key and partition:
-- the offset of the last one applied. `dead-letters redrive` reads it, so
-- that a dead letter older than a delete or a mark of its key applied after
-- it is not stored over it, as a replay of the topic would not
-- (docs/DESIGN.md, Resolving dead letters). One row per key a tombstone ever
-- named on a partition; rows applied before the oldest unresolved dead
-- letter was written decide nothing and may be deleted (docs/OPERATIONS.md,
-- Tombstones).
CREATE TABLE applied_tombstones (
    pipeline     TEXT        NOT NULL,
    key          TEXT[]      NOT NULL,
    topic        TEXT        NOT NULL,
    partition    INTEGER     NOT NULL,
    kafka_offset BIGINT      NOT NULL,
    applied_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (pipeline, key, topic, partition)
);
