-- A record's coordinates alone are not its identity. A topic deleted and
-- created again numbers its records from 0 again, and a bad record at the
-- offset of an old dead letter is another record: ON CONFLICT on
-- (topic, partition, kafka_offset) DO NOTHING dropped it while its batch's
-- position moved past it. A dead letter is now identified by its
-- coordinates and a digest of the record it holds (DESIGN.md: Tables and
-- natural keys): a redelivery of the same record is still a no-op, another
-- record at the same coordinates is kept beside the old one.
--
-- The digest covers what the row holds of the record: its timestamp (to
-- the millisecond, as Kafka gives it), its key and its payload as stored
-- (the first 64 KiB) with the payload's size. Each part is tagged or
-- prefixed by its length, so no two different records hash the same bytes.
-- The database computes it from the row (a stored generated column): every
-- writer, the store's insert or an operator's, gets the same digest, and
-- the existing rows get theirs here (the table is rewritten once).
ALTER TABLE dead_letter_events
    ADD COLUMN record_digest BYTEA NOT NULL GENERATED ALWAYS AS (sha256(
        CASE WHEN kafka_timestamp IS NULL THEN '\x00'::bytea
             ELSE '\x01'::bytea || timestamp_send(date_trunc('milliseconds', kafka_timestamp AT TIME ZONE 'UTC'))
        END
        || CASE WHEN message_key IS NULL THEN '\x00'::bytea
                ELSE '\x01'::bytea || int4send(octet_length(message_key)) || message_key
           END
        || int4send(payload_size) || payload)) STORED;

ALTER TABLE dead_letter_events
    DROP CONSTRAINT dead_letter_events_coordinates_key,
    ADD CONSTRAINT dead_letter_events_record_key UNIQUE (topic, partition, kafka_offset, record_digest);
