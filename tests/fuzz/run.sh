#!/usr/bin/env bash
# Runs each fuzz target for a bounded time, starting from its seed corpus
# (tests/fuzz/corpus for fuzz_decode, tests/fuzz/corpus-NAME for
# fuzz_NAME), and reports one TAP line each. A crash leaves its input in
# the work directory (crash-*): turn it into a regression test in
# tests/unit, and keep it in the target's corpus.
#
#   tests/fuzz/run.sh "FUZZ_BINARY..." SECONDS
set -uo pipefail
seconds=${2:-60}
here=$(cd "$(dirname "$0")" && pwd)
n=0
failed=0
for b in ${1:?usage: run.sh \"FUZZ_BINARY...\" SECONDS}; do
    bin=$(realpath "$b")
    name=$(basename "$bin")
    n=$((n + 1))
    corpus=$here/corpus
    [ "$name" = fuzz_decode ] || corpus=$here/corpus-${name#fuzz_}
    work=$(mktemp -d /tmp/storage-fuzz.XXXXXX)
    cp "$corpus"/* "$work/" 2>/dev/null
    # -max_len 4096: long enough for every field, short enough to go deep.
    (cd "$work" && "$bin" -max_total_time="$seconds" -max_len=4096 -print_final_stats=1 "$work" >fuzz.log 2>&1)
    rc=$?
    grep -E 'stat::number_of_executed_units|cov:' "$work/fuzz.log" | tail -2
    what=decoders_survive
    [ "$name" = fuzz_decode ] || what=${name#fuzz_}_decoder_survives
    if [ "$rc" -eq 0 ]; then
        echo "ok $n - ${what}_${seconds}_seconds_of_coverage_guided_fuzzing"
        rm -rf "$work"
    else
        tail -40 "$work/fuzz.log"
        echo "not ok $n - ${what}_${seconds}_seconds_of_coverage_guided_fuzzing (inputs kept in $work)"
        failed=1
    fi
done
echo "1..$n"
exit "$failed"
