#!/usr/bin/env bash
# tests/run.sh itself (DESIGN.md: Progress of long work): each test's TAP
# line is shown as the test ends, not when its suite ends, the full output
# stays in BUILD/test-logs, each failed test's own reason is repeated at the
# end (a shortened output keeps its end), and the last line keeps its format.
. "$(dirname "$0")/lib.sh"

test_run_sh_shows_each_test_as_it_ends_and_ends_with_the_counts() {
    local suites=$WORK/suites build=$WORK/build start line first=-1 second=-1 last
    mkdir -p "$suites" "$build"
    cat >"$suites/slow.sh" <<'SUITE'
echo "ok 1 - test_quick"
echo "some diagnostic output"
sleep 4
echo "the slow test's own output"
echo "# FAIL: the slow test's reason"
echo "not ok 2 - test_slow"
echo "1..2"
SUITE
    start=$(now_ms)
    while IFS= read -r line; do
        echo "$(($(now_ms) - start)) $line" >>"$WORK/seen"
        [ "$line" = "  ok 1 - test_quick" ] && first=$(($(now_ms) - start))
        [ "$line" = "  not ok 2 - test_slow" ] && second=$(($(now_ms) - start))
    done < <(TEST_SUITES_DIR=$suites "$TOP/tests/run.sh" "$build" slow || true)
    [ "$first" -ge 0 ] || fail "no 'ok 1' line: $(cat "$WORK/seen")"
    [ "$second" -ge 0 ] || fail "no 'not ok 2' line: $(cat "$WORK/seen")"
    # The suite sleeps 4 s between its two tests: shown as they end, their
    # lines are seconds apart; shown at the suite's end, together.
    [ $((second - first)) -ge 2500 ] ||
        fail "the first test's line came only $((second - first)) ms before the second's: $(cat "$WORK/seen")"
    last=$(tail -n 1 "$WORK/seen" | cut -d' ' -f2-)
    assert_eq "1 passed, 1 failed" "$last" "the last line"
    assert_contains "$(cat "$WORK/seen")" "  not ok 2 - test_slow"
    assert_eq 1 "$(grep -cE '^[0-9]+   ok 1 - test_quick$' "$WORK/seen")" "each line shown once"
    assert_contains "$(cat "$build/test-logs/slow.log")" "some diagnostic output" "the full log is kept"
    # The failed test and its reason, again just before the counts; nothing
    # of the test that passed.
    assert_eq "# failed tests|  slow: not ok 2 - test_slow|  | # FAIL: the slow test's reason" \
        "$(tail -n 4 "$WORK/seen" | head -n 3 | cut -d' ' -f2- | paste -sd'|')" "the summary of failures"
}

# TEST_JOBS=2: two suites that can each pass only if the other runs at the
# same time (each waits for the other's mark), and a suite of ALONE_SUITES
# that passes only if it starts after both ended.
test_test_jobs_runs_suites_side_by_side_and_alone_suites_by_themselves() {
    local suites=$WORK/lanes build=$WORK/build-lanes marks=$WORK/marks out x y
    mkdir -p "$suites" "$build" "$marks"
    for x in a b; do
        y=$([ "$x" = a ] && echo b || echo a)
        cat >"$suites/$x.sh" <<SUITE
touch "$marks/$x.running"
end=\$((SECONDS + \${STALL_S:-30}))
until [ -f "$marks/$y.running" ] || [ "\$SECONDS" -ge "\$end" ]; do sleep 0.1; done
if [ -f "$marks/$y.running" ] && [ ! -f "$marks/c.started" ]; then echo "ok 1 - test_${x}_ran_beside_$y"; else echo "not ok 1 - test_${x}_ran_beside_$y"; fi
touch "$marks/$x.done"
echo "1..1"
SUITE
    done
    cat >"$suites/c.sh" <<SUITE
touch "$marks/c.started"
if [ -f "$marks/a.done" ] && [ -f "$marks/b.done" ]; then echo "ok 1 - test_c_ran_alone"; else echo "not ok 1 - test_c_ran_alone"; fi
echo "1..1"
SUITE
    out=$(TEST_SUITES_DIR=$suites TEST_JOBS=2 ALONE_SUITES=c SKIP_SUITES="unit fuzz" "$TOP/tests/run.sh" "$build" 2>&1) ||
        fail "the run failed: $out"
    assert_eq "3 passed, 0 failed" "$(tail -n 1 <<<"$out")" "the last line"
    assert_contains "$out" "  a: ok 1 - test_a_ran_beside_b"
    assert_contains "$out" "  b: ok 1 - test_b_ran_beside_a"
    assert_contains "$out" "  ok 1 - test_c_ran_alone"
    # A suite that fails side by side is counted once, with its reason: a
    # test that fails, and a suite that exits non-zero after its tests.
    local failing=$WORK/lanes-failing
    mkdir -p "$failing" "$WORK/build-failing"
    printf '%s\n' 'echo "ok 1 - test_fine"' 'echo "# FAIL: the reason of d"' 'echo "not ok 2 - test_d_fails"' 'echo "1..2"' >"$failing/d.sh"
    printf '%s\n' 'echo "ok 1 - test_e_passes"' 'echo "1..1"' 'exit 3' >"$failing/e.sh"
    printf '%s\n' 'echo "ok 1 - test_f_passes"' 'echo "1..1"' >"$failing/f.sh"
    out=$(TEST_SUITES_DIR=$failing TEST_JOBS=2 SKIP_SUITES="unit fuzz" "$TOP/tests/run.sh" "$WORK/build-failing" 2>&1) &&
        fail "side by side, a run with a failed test and a failed suite passed: $out"
    assert_eq "3 passed, 2 failed" "$(tail -n 1 <<<"$out")" "the last line, side by side with failures"
    assert_eq 1 "$(grep -c '^  not ok - suite e exited with status 3$' <<<"$out")" "the suite that exited 3, said once"
    assert_contains "$out" "# suite d ended after "
    assert_contains "$(sed -n '/^# failed tests$/,$p' <<<"$out")" "  d: not ok 2 - test_d_fails
  | # FAIL: the reason of d" "the summary of failures"
    assert_contains "$(sed -n '/^# failed tests$/,$p' <<<"$out")" "  e: exited with status 3" "the summary of failures"

    # Run one at a time, neither a nor b sees the other.
    rm -f "$marks"/*
    out=$(TEST_SUITES_DIR=$suites STALL_S=1 TEST_JOBS=1 ALONE_SUITES=c SKIP_SUITES="unit fuzz" "$TOP/tests/run.sh" "$build" 2>&1) &&
        fail "one suite at a time, a suite that needs another beside it passed: $out"
    assert_eq "2 passed, 1 failed" "$(tail -n 1 <<<"$out")" "the last line, one suite at a time"
}

run_tests
