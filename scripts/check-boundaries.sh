#!/bin/sh
# The module boundaries of DESIGN.md: Architecture, checked rather than
# trusted. librdkafka is known only under src/kafka/, libpq only under
# src/pg/, libcurl only under src/registry/ (the schema registry's client:
# the one room that does HTTP as a client) and avro-c only under
# src/formats/: no other source file may include their headers, directly
# or through one of our headers. Everything else speaks to them through
# those directories' own types.
#
# Usage: scripts/check-boundaries.sh [CC [CFLAGS...]]
# Prints each offending file with the header it reaches; exits 1 if any.
set -eu
cd "$(dirname "$0")/.."
CC=${1:-cc}
[ $# -gt 0 ] && shift
if [ $# -eq 0 ]; then
    # shellcheck disable=SC2046
    set -- -std=c11 -D_GNU_SOURCE -Isrc $(pkg-config --cflags rdkafka libpq jansson libmicrohttpd avro-c libcurl)
fi

bad=0
# header (as the end of its path) : the directory that alone may reach it
rules="/librdkafka/rdkafka.h:src/kafka /libpq-fe.h:src/pg /curl/curl.h:src/registry /include/avro.h:src/formats"
for f in $(find src -name '*.c' | sort); do
    deps=$("$CC" "$@" -M "$f") || { echo "check-boundaries: cannot preprocess $f" >&2; exit 1; }
    for rule in $rules; do
        header=${rule%%:*}
        case $f in "${rule#*:}"/*) continue ;; esac
        if printf '%s\n' "$deps" | tr ' \\' '\n\n' | grep -q "$header\$"; then
            echo "check-boundaries: $f reaches <${header#/}>: only ${rule#*:}/ may include it" >&2
            bad=1
        fi
    done
done
[ "$bad" = 0 ] && echo "check-boundaries: librdkafka only under src/kafka/, libpq under src/pg/, libcurl under src/registry/, avro-c under src/formats/"
exit "$bad"
