-- The one record of how far each consumer group got: the next offset to read
-- of every partition, written in the same transaction as the rows of the
-- batch that got it there (docs/DESIGN.md, Progress in the database). Kafka's
-- committed offsets are a copy for lag tools; on assignment the database's
-- position wins, so a crash between the two commits does not redeliver a
-- batch, and a database restored from a backup reads the gap again from
-- Kafka.
CREATE TABLE consumer_offsets (
    group_id    TEXT        NOT NULL,
    topic       TEXT        NOT NULL,
    partition   INTEGER     NOT NULL CHECK (partition >= 0),
    next_offset BIGINT      NOT NULL CHECK (next_offset >= 0),
    -- Bumped by every replay. A member raises a position only within the
    -- epoch it read when the partition was assigned to it: a member paused
    -- across a replay cannot undo the replay with its late batch.
    epoch       BIGINT      NOT NULL DEFAULT 0,
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (group_id, topic, partition)
);
