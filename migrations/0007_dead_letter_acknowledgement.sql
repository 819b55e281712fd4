-- A dead letter is resolved one of two ways (DESIGN.md: Dead letters,
-- Resolving dead letters): `redriven` (it stored once its cause was fixed)
-- or `acknowledged` (`storage-consumer dead-letters resolve`: an operator
-- decided it is garbage and will never store). Either records when
-- (resolved_at), how (resolution_kind), who (resolved_by: the login that ran
-- the command) and a note (resolution). Every dead letter resolved before
-- this migration was redriven: only redrive resolved them.
ALTER TABLE dead_letter_events
    ADD COLUMN resolution_kind TEXT,
    ADD COLUMN resolved_by     TEXT;

UPDATE dead_letter_events SET resolution_kind = 'redriven' WHERE resolved_at IS NOT NULL;

ALTER TABLE dead_letter_events
    ADD CONSTRAINT dead_letter_events_resolution_kind_check
        CHECK (resolution_kind IN ('redriven', 'acknowledged')),
    ADD CONSTRAINT dead_letter_events_resolution_complete_check
        CHECK ((resolved_at IS NULL) = (resolution_kind IS NULL));

-- Resolved dead letters can be purged once they are old enough
-- (`dead-letters purge --older-than AGE`); unresolved ones never are. The
-- purge finds its rows by resolved_at without reading the unresolved ones.
CREATE INDEX dead_letter_events_resolved_idx
    ON dead_letter_events (resolved_at)
    WHERE resolved_at IS NOT NULL;
