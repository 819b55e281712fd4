/* timestamp — ISO 8601 strings of the message contract (DESIGN.md: The message contract) to exact UTC
 * microseconds, and back to the text PostgreSQL reads.
 *
 * Accepted: YYYY-MM-DDTHH:MM:SS[.f{1,6}][Z|±HH:MM|±HHMM]. A time without an
 * offset is UTC by explicit policy (the Python crawler emits naive times), so
 * no ambiguity reaches the database. Up to six fractional digits are kept
 * exactly; further digits are accepted only when they are zeros (nothing is
 * silently rounded). The result must lie in 0001-01-01 .. 9999-12-31 UTC. */
#ifndef STORAGE_TIMESTAMP_H
#define STORAGE_TIMESTAMP_H

#include <stddef.h>
#include <stdint.h>

/* Length of the text written by timestamp_format, including the NUL. */
#define TIMESTAMP_TEXT_SIZE 40

/* Parse `s` (`len` bytes). On success stores microseconds since
 * 1970-01-01T00:00:00Z in *out and returns 0. On failure returns -1 and
 * writes a human-readable reason ("day 30 is not in February 2026", ...) to
 * `err` (up to `errlen` bytes). */
int timestamp_parse(const char *s, size_t len, int64_t *out, char *err, size_t errlen);

/* Format micros as "YYYY-MM-DD HH:MM:SS.ffffff+00". `out` must hold
 * TIMESTAMP_TEXT_SIZE bytes. This function can't fail for values produced by
 * timestamp_parse. */
void timestamp_format(int64_t micros, char *out);

/* Format a Kafka record timestamp (milliseconds since the epoch) like
 * timestamp_format. Returns -1, writing nothing, when there is none (< 0)
 * or it lies beyond INT64_MAX microseconds: producers may set any 64-bit
 * value, and a dead letter must keep what PostgreSQL can hold. */
int timestamp_format_kafka_ms(int64_t ms, char *out);

/* Days since 1970-01-01 of a proleptic Gregorian date. */
int64_t timestamp_days_from_civil(int64_t y, unsigned m, unsigned d);

#endif
