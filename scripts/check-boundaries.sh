#!/bin/sh
# The module boundaries of DESIGN.md: Architecture, checked rather than
# trusted. librdkafka is known only under src/kafka/ and libpq only under
# src/pg/: no other source file may include <librdkafka/rdkafka.h> or
# <libpq-fe.h>, directly or through one of our headers. Everything else
# speaks to Kafka and PostgreSQL through those two directories' own types.
#
# Usage: scripts/check-boundaries.sh [CC [CFLAGS...]]
# Prints each offending file with the header it reaches; exits 1 if any.
set -eu
cd "$(dirname "$0")/.."
CC=${1:-cc}
[ $# -gt 0 ] && shift
if [ $# -eq 0 ]; then
    # shellcheck disable=SC2046
    set -- -std=c11 -D_GNU_SOURCE -Isrc $(pkg-config --cflags rdkafka libpq jansson libmicrohttpd)
fi

bad=0
for f in $(find src -name '*.c' -not -path 'src/kafka/*' -not -path 'src/pg/*' | sort); do
    deps=$("$CC" "$@" -M "$f") || { echo "check-boundaries: cannot preprocess $f" >&2; exit 1; }
    for rule in librdkafka/rdkafka.h:src/kafka libpq-fe.h:src/pg; do
        header=${rule%%:*}
        if printf '%s\n' "$deps" | tr ' \\' '\n\n' | grep -q "/$header\$"; then
            echo "check-boundaries: $f reaches <$header>: only ${rule#*:}/ may include it" >&2
            bad=1
        fi
    done
done
[ "$bad" = 0 ] && echo "check-boundaries: librdkafka only under src/kafka/, libpq only under src/pg/"
exit "$bad"
