#!/usr/bin/env bash
# Runs the decoder fuzz target for a bounded time, starting from the seed
# corpus, and reports one TAP line. A crash leaves its input in the work
# directory (crash-*): turn it into a regression test in tests/unit.
#
#   tests/fuzz/run.sh FUZZ_BINARY SECONDS
set -uo pipefail
bin=$(realpath "${1:?usage: run.sh FUZZ_BINARY SECONDS}")
seconds=${2:-60}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/storage-fuzz.XXXXXX)
cp "$here"/corpus/* "$work/" 2>/dev/null
cd "$work" || exit 1
# -max_len 4096: long enough for every field, short enough to go deep.
"$bin" -max_total_time="$seconds" -max_len=4096 -print_final_stats=1 "$work" >fuzz.log 2>&1
rc=$?
grep -E 'stat::number_of_executed_units|cov:' fuzz.log | tail -2
if [ "$rc" -eq 0 ]; then
    echo "ok 1 - decoders_survive_${seconds}_seconds_of_coverage_guided_fuzzing"
    rm -rf "$work"
else
    tail -40 fuzz.log
    echo "not ok 1 - decoders_survive_${seconds}_seconds_of_coverage_guided_fuzzing (inputs kept in $work)"
fi
echo "1..1"
exit "$rc"
