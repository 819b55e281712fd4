#!/usr/bin/env bash
# Runs every test: the unit test binaries in BUILD/unit, then every
# tests/integration/*.sh suite. Each prints TAP lines ("ok N - name",
# "not ok N - name"); this script shows each as its test ends, counts them
# and ends with one summary line "N passed, N failed". Exit status: 0 only
# if nothing failed and something ran.
#
#   tests/run.sh BUILD [SUITE-FILTER]
#
# SKIP_SUITES="NAME..." leaves those suites out, saying so (make tsan: the
# resources suite measures memory, under LeakSanitizer and in the release
# build; "unit" the unit test binaries, "fuzz" the fuzzing).
set -uo pipefail

build=${1:?usage: tests/run.sh BUILD [FILTER]}
filter=${2:-}
top=$(cd "$(dirname "$0")/.." && pwd)
export STORAGE_TEST_BUILD=$(cd "$build" && pwd)
export STORAGE_TEST_TOP=$top
# LeakSanitizer: leaks are failures. Integration suites run the sanitizer
# build of the service too.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# ThreadSanitizer (build/tsan): a report stops the process that made it
# (exit 66) and goes to a file of its own, BUILD/test-logs/SUITE.tsan.PID,
# which fails the suite whichever process it came from, one whose exit
# status no test reads included. tests/tsan.supp holds the reports proven to
# be inside the uninstrumented libraries.
tsan_options=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$top/tests/tsan.supp}
export CMOCKA_MESSAGE_OUTPUT=TAP

passed=0
failed=0
failures=
log_dir=$STORAGE_TEST_BUILD/test-logs
mkdir -p "$log_dir"

run_suite() {
    local name=$1
    shift
    local out="$log_dir/$name.log"
    echo "# suite $name"
    rm -f "$log_dir/$name".tsan.*
    # The full output goes to the log; each test's TAP line is shown as it
    # arrives (tail follows the log until the suite has exited), so a long
    # suite shows where it is. The suite writes to the file, not to a pipe: a
    # daemon it leaves behind cannot hold the run open.
    : >"$out" # tail must not show the last run's lines
    TSAN_OPTIONS="$tsan_options:log_path=$log_dir/$name.tsan" "$@" >"$out" 2>&1 &
    local pid=$!
    tail -n +1 -s 0.2 --pid="$pid" -f "$out" 2>/dev/null |
        grep --line-buffered -E '^(not )?ok [0-9]+' | sed -u 's/^/  /'
    wait "$pid"
    local rc=$?
    local p f r
    p=$(grep -cE '^ok [0-9]+' "$out")
    f=$(grep -cE '^not ok [0-9]+' "$out")
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        # A crash or a sanitizer report outside any test still fails the run.
        echo "  not ok - suite $name exited with status $rc"
        failures+="  $name: exited with status $rc"$'\n'
        f=1
    fi
    for r in "$log_dir/$name".tsan.*; do
        [ -f "$r" ] || continue
        echo "  not ok - ThreadSanitizer report $r"
        sed -n '1,60p' "$r" | sed 's/^/  | /'
        f=$((f + 1))
    done
    if [ "$f" -ne 0 ]; then
        echo "  --- last lines of $out ---"
        tail -n 40 "$out" | sed 's/^/  | /'
        r=$(failed_tests "$name" "$out")
        [ -z "$r" ] || failures+="$r"$'\n'
    fi
    passed=$((passed + p))
    failed=$((failed + f))
}

# Each failed test of a suite's log, with what its own output (the lines
# after the TAP line before it) says from its first "# FAIL" line on: at most
# 15 lines, each cut to 300 characters; a test that failed without one shows
# its last 3 lines. They are repeated just before the counts: a long run's
# output may be shortened in the middle, its end is what a reader sees.
failed_tests() { # suite log
    awk -v suite="$1" '
        /^(not )?ok [0-9]+/ {
            if ($1 == "not") {
                print "  " suite ": " $0
                for (s = 1; s <= nb && block[s] !~ /^# FAIL/; s++) {}
                if (s > nb) s = nb > 3 ? nb - 2 : 1
                for (i = s; i <= nb && i < s + 15; i++) print "  | " substr(block[i], 1, 300)
            }
            nb = 0
            next
        }
        { block[++nb] = $0 }' "$2"
}

# A suite left out on purpose is said so; one that should run and cannot
# (a unit binary not built, no fuzz binary) fails: neither passes unseen.
skipped() { [[ " ${SKIP_SUITES:-} " == *" $1 "* ]] && echo "# suite $1 left out (SKIP_SUITES)"; }
missing() { # name what
    echo "# suite $1"
    echo "  not ok - suite $1: $2"
    failed=$((failed + 1))
}

# Every tests/unit/test_*.c has its binary in BUILD/unit (SKIP_SUITES=unit:
# none of them, as in a build of the service alone).
if ! skipped unit; then
    for src in "$top"/tests/unit/test_*.c; do
        name=$(basename "$src" .c)
        [ -n "$filter" ] && [[ "$name" != *"$filter"* ]] && continue
        t=$STORAGE_TEST_BUILD/unit/$name
        if [ -x "$t" ]; then
            run_suite "$name" "$t"
        else
            missing "$name" "no unit test binary $t (make sanitize builds it)"
        fi
    done
fi

# TEST_SUITES_DIR: another directory of suites (the runner's own test).
for s in "${TEST_SUITES_DIR:-$top/tests/integration}"/*.sh; do
    name=$(basename "$s" .sh)
    [ "$name" = lib ] && continue
    [ -n "$filter" ] && [[ "$name" != *"$filter"* ]] && continue
    skipped "$name" && continue
    run_suite "$name" bash "$s"
done

# Bounded coverage-guided fuzzing of the decoders (FUZZ_BIN, set by make
# test; SKIP_SUITES=fuzz leaves it out).
if { [ -z "$filter" ] || [[ fuzz == *"$filter"* ]]; } && ! skipped fuzz; then
    if [ -n "${FUZZ_BIN:-}" ] && [ -x "$FUZZ_BIN" ]; then
        run_suite fuzz "$top/tests/fuzz/run.sh" "$FUZZ_BIN" "${FUZZ_SECONDS:-60}"
    else
        missing fuzz "no fuzz binary [${FUZZ_BIN:-}] (make sanitize builds build/fuzz/fuzz_decode: FUZZ_BIN=build/fuzz/fuzz_decode; SKIP_SUITES=fuzz leaves it out)"
    fi
fi

if [ -n "$failures" ]; then
    echo "# failed tests"
    printf '%s' "$failures"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
