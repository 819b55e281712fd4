-- Fencing (docs/DESIGN.md, Progress in the database): a batch commits only
-- if its partitions' positions are still where its member found them, in
-- the batch's own transaction; otherwise the whole transaction rolls back,
-- its rows with it. "Never backwards" alone kept a late batch of a member
-- that lost its partitions from moving a position back, but still
-- committed its rows: a deleted key came back. The batch's statement
-- counts the positions it moved and calls this with how many it meant to.
CREATE FUNCTION storage_consumer_fence(moved BIGINT, expected BIGINT) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF moved IS DISTINCT FROM expected THEN
        RAISE EXCEPTION 'fenced: % of the batch''s % partition position(s) moved on since this member read them (another member owns the partition now, or a replay reset it)',
            expected - moved, expected
            USING ERRCODE = 'SC001';
    END IF;
END
$$;
