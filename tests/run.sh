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
#
# TEST_JOBS=N runs up to N integration suites (and the fuzzing) side by
# side: most of a suite's time is waiting (on a rebalance, a timeout, a
# restart), and each suite has its own PostgreSQL, broker, ports and work
# directory. Each test's line is then shown after its suite's name, and
# each suite's counts when it ends. The suites of ALONE_SUITES (default
# "bench resources": they measure throughput, memory and descriptors) run
# with nothing beside them, after the others.
set -uo pipefail

build=${1:?usage: tests/run.sh BUILD [FILTER]}
filter=${2:-}
top=$(cd "$(dirname "$0")/.." && pwd)
STORAGE_TEST_BUILD=$(cd "$build" 2>/dev/null && pwd) || { echo "tests/run.sh: no build directory $build" >&2; exit 2; }
export STORAGE_TEST_BUILD
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

jobs=${TEST_JOBS:-1}
# Not the suites': a run of tests/run.sh inside one (the runner suite)
# chooses its own.
export -n TEST_JOBS ALONE_SUITES 2>/dev/null || true
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "tests/run.sh: TEST_JOBS must be a number of 1 or more, not '$jobs'" >&2; exit 2; }
if [ "$jobs" -gt 1 ] && { [ "${BASH_VERSINFO[0]}" -lt 5 ] || { [ "${BASH_VERSINFO[0]}" = 5 ] && [ "${BASH_VERSINFO[1]}" -lt 1 ]; }; }; then
    echo "tests/run.sh: TEST_JOBS=$jobs needs bash 5.1 or newer (wait -n -p), this is $BASH_VERSION" >&2
    exit 2
fi

passed=0
failed=0
failures=
log_dir=$STORAGE_TEST_BUILD/test-logs
mkdir -p "$log_dir"

# Start suite NAME (its command after) in the background, its whole output
# into its log (not a pipe, which a daemon the suite left behind could hold
# open); SUITE_PID is its process.
suite_start() { # name cmd...
    local name=$1
    shift
    rm -f "$log_dir/$name".tsan.*
    : >"$log_dir/$name.log" # tail must not show the last run's lines
    TSAN_OPTIONS="$tsan_options:log_path=$log_dir/$name.tsan" "$@" >"$log_dir/$name.log" 2>&1 &
    SUITE_PID=$!
}

# Show each test's TAP line of suite NAME as it arrives in its log (tail
# follows the log until process PID has exited), after PREFIX: a long suite
# shows where it is.
follow_suite() { # name pid prefix
    tail -n +1 -s 0.2 --pid="$2" -f "$log_dir/$1.log" 2>/dev/null |
        grep --line-buffered -E '^(not )?ok [0-9]+' | sed -u "s/^/  $3/"
}

# One suite with nothing beside it.
run_suite() { # name cmd...
    echo "# suite $1"
    suite_start "$@"
    follow_suite "$1" "$SUITE_PID" ""
    wait "$SUITE_PID"
    suite_end "$1" $?
}

# Count the results of suite NAME, which exited with status RC; show why
# it failed, if it did.
suite_end() { # name rc
    local name=$1 rc=$2 out=$log_dir/$1.log p f r
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

# The integration suites (TEST_SUITES_DIR: another directory of them, the
# runner's own test), then the bounded coverage-guided fuzzing of the
# decoders (FUZZ_BIN, set by make test; SKIP_SUITES=fuzz leaves it out),
# queued as "NAME<TAB>FILE". Side by side, the largest suite file first, so
# that the run does not end with a long suite going on alone, and those of
# ALONE_SUITES after the others; one at a time, in the files' order.
alone=" ${ALONE_SUITES-bench resources} "
declare -a queue=() last=()
while read -r _ s; do
    name=$(basename "$s" .sh)
    [ "$name" = lib ] && continue
    [ -n "$filter" ] && [[ "$name" != *"$filter"* ]] && continue
    skipped "$name" && continue
    if [ "$jobs" -gt 1 ] && [[ $alone == *" $name "* ]]; then last+=("$name"$'\t'"$s"); else queue+=("$name"$'\t'"$s"); fi
done < <(if [ "$jobs" -gt 1 ]; then
    wc -c "${TEST_SUITES_DIR:-$top/tests/integration}"/*.sh | grep -v ' total$' | sort -k1,1nr -k2
else
    for s in "${TEST_SUITES_DIR:-$top/tests/integration}"/*.sh; do echo "0 $s"; done
fi)
if { [ -z "$filter" ] || [[ fuzz == *"$filter"* ]]; } && ! skipped fuzz; then
    fuzz_ok=${FUZZ_BIN:+yes}
    for b in ${FUZZ_BIN:-}; do [ -x "$b" ] || fuzz_ok=""; done
    if [ -n "$fuzz_ok" ]; then
        queue+=("fuzz"$'\t'"fuzz")
    else
        missing fuzz "no fuzz binaries [${FUZZ_BIN:-}] (make sanitize builds them: FUZZ_BIN=\"build/fuzz/fuzz_decode build/fuzz/fuzz_avro\"; SKIP_SUITES=fuzz leaves it out)"
    fi
fi

# The command of queued suite NAME (FILE), into the array cmd.
suite_command() { # name file
    if [ "$1" = fuzz ]; then
        cmd=("$top/tests/fuzz/run.sh" "$FUZZ_BIN" "${FUZZ_SECONDS:-60}")
    else
        cmd=(bash "$2")
    fi
}

declare -A running=() follower=() started=()
# Start suite NAME beside the others running.
lane_start() { # name file
    local cmd
    suite_command "$1" "$2"
    echo "# suite $1 started ($((${#running[@]} + 1)) running)"
    suite_start "$1" "${cmd[@]}"
    running[$1]=$SUITE_PID
    started[$1]=$SECONDS
    follow_suite "$1" "$SUITE_PID" "$1: " &
    follower[$1]=$!
}
# Wait for one of the running suites to end; count its results and say
# them.
lane_end() {
    local pid="" rc name="" n p0=$passed f0=$failed
    wait -n -p pid "${running[@]}"
    rc=$?
    for n in "${!running[@]}"; do [ "${running[$n]}" = "$pid" ] && name=$n; done
    if [ -z "$name" ]; then
        # Interrupted, or no such child: the run cannot say which suite ended.
        echo "tests/run.sh: wait -n returned $rc for no running suite [$pid]" >&2
        kill "${running[@]}" 2>/dev/null
        exit 2
    fi
    wait "${follower[$name]}"
    unset "running[$name]" "follower[$name]"
    suite_end "$name" "$rc"
    echo "# suite $name ended after $((SECONDS - started[$name])) s: $((passed - p0)) passed, $((failed - f0)) failed"
}

if [ "$jobs" -gt 1 ]; then
    for entry in ${queue[@]+"${queue[@]}"}; do
        [ "${#running[@]}" -lt "$jobs" ] || lane_end
        lane_start "${entry%%$'\t'*}" "${entry#*$'\t'}"
    done
    while [ "${#running[@]}" -gt 0 ]; do lane_end; done
    queue=()
fi
for entry in ${queue[@]+"${queue[@]}"} ${last[@]+"${last[@]}"}; do
    name=${entry%%$'\t'*}
    suite_command "$name" "${entry#*$'\t'}"
    run_suite "$name" "${cmd[@]}"
done

if [ -n "$failures" ]; then
    echo "# failed tests"
    printf '%s' "$failures"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
