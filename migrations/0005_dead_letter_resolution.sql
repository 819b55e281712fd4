-- Dead letters can be redriven (`storage-consumer dead-letters redrive`):
-- once a message stores (its app was registered, a producer bug was fixed),
-- its dead letter is marked resolved with a note saying how, never deleted:
-- the table stays the history of what went wrong. NULL resolved_at means
-- unresolved.
ALTER TABLE dead_letter_events
    ADD COLUMN resolved_at TIMESTAMPTZ,
    ADD COLUMN resolution  TEXT;

-- Redrive reads the unresolved dead letters of one topic in id order; once
-- most are resolved, this index stays as small as what is left to do.
CREATE INDEX dead_letter_events_unresolved_idx
    ON dead_letter_events (topic, id)
    WHERE resolved_at IS NULL;
