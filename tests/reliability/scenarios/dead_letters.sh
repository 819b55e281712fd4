# The dead-letter write itself failing (DESIGN.md: Dead letters; Errors): a dead letter the
# database refuses is fatal by design. The batch holding it must not be
# committed (neither its rows nor its offsets), the process exits 1, and
# once the cause is gone a restarted process stores everything.

scenario_dead_letter_refused() {
    scenario_begin dead_letter_refused reviews
    gen_stream 51 500 0 0 single=1 bad=0 dup=0
    local kv=$SW/gen/$T_REVIEWS.kv
    # Partition 0: 250 good records, one invalid JSON at offset 250, 250 good.
    {
        head -n 250 "$kv"
        echo 'pbad1|{"package_name":"com.rel.app1","review_id":'
        tail -n +251 "$kv"
    } >"$SW/stream.kv"
    printf 'pbad1\t%s\tbad\tinvalid_json\t\n' "$T_REVIEWS" >"$SW/bad.tsv"
    psql "$DB" -X -q -v ON_ERROR_STOP=1 \
        -c "\\copy rel.gen FROM '$SW/bad.tsv' WITH (FORMAT csv, DELIMITER E'\\t', QUOTE E'\\x01')"
    kcat_produce "$T_REVIEWS" -p 0 <"$SW/stream.kv" || fail_check "kcat could not produce"
    sql "ALTER TABLE dead_letter_events ADD CONSTRAINT rel_refuse_invalid_json CHECK (error_type <> 'invalid_json')" >/dev/null
    svc_start s1 STORAGE_MAX_POLL_RECORDS_REVIEWS=100
    local rc
    # It stores the batches before the bad record, then fails on it.
    rc=$(svc_wait_progress s1)
    expect_eq "exit code when the database refuses a dead letter" 1 "$rc"
    expect_log s1 'writing dead letters: 23514' "the failure names the refused dead letter"
    expect_log s1 'stopped exit=1' "the supervisor stops with exit 1"
    checkpoint "after exit 1"
    local c rows dl
    c=$(committed reviews 0)
    rows=$(sql "SELECT count(*) FROM reviews")
    dl=$(sql "SELECT count(*) FROM dead_letter_events")
    # Committed offsets and rows form the same prefix of the partition: every
    # record below the committed offset is stored, nothing at or after it
    # (the refused batch rolled back whole, its good rows too).
    [ "$c" = -1001 ] && c=0
    if [ "$c" -gt 250 ]; then fail_check "the offset moved past the refused record: committed $c"; fi
    expect_eq "rows stored = records below the committed offset (the refused batch left nothing)" "$c" "$rows"
    expect_eq "dead letters after the refusal" 0 "$dl"
    sql "ALTER TABLE dead_letter_events DROP CONSTRAINT rel_refuse_invalid_json" >/dev/null
    assert_scenario_kept_everything
    svc_start s2 STORAGE_MAX_POLL_RECORDS_REVIEWS=100
    finish s2
    note "dead letter refused (CHECK constraint): exit $rc, committed offset $c, $rows rows (nothing of the refused batch); restarted without the constraint, all stored"
}
