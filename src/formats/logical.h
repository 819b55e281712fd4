/* logical — the texts PostgreSQL reads for the logical types the record
 * formats share (DESIGN.md: Formats): an exact decimal from its unscaled
 * two's-complement bytes, a date from days since 1970-01-01, a time of day
 * and a timestamp from units since midnight or the epoch. Kafka Connect's
 * JSON and Avro write them the same way. No I/O. */
#ifndef STORAGE_LOGICAL_H
#define STORAGE_LOGICAL_H

#include <stddef.h>
#include <stdint.h>

/* The unscaled two's-complement big-endian integer b[n] (n >= 1) with
 * `scale` decimals, as exact decimal text ("-12.50"): a new string the
 * caller frees. b is left as it was. */
char *logical_decimal_text(const unsigned char *b, size_t n, int scale);

/* Into buf[len] (64 is enough), returning 0, or -1 with the reason in
 * why[why_len] for a value PostgreSQL's types cannot hold:
 * - a date of `days` since 1970-01-01: "2026-12-01";
 * - a time of day of `units` since midnight, `digits` 3 (ms) or 6 (µs):
 *   "10:00:00.123";
 * - a timestamp of `units` since the epoch, `digits` 3 or 6, "Z" after it
 *   when `utc` (a local timestamp has none): "2026-12-01T10:00:00.123Z",
 *   years 1 to 9999. */
int logical_date_text(int64_t days, char *buf, size_t len, char *why, size_t why_len);
int logical_time_text(int64_t units, int digits, char *buf, size_t len, char *why, size_t why_len);
int logical_timestamp_text(int64_t units, int digits, int utc, char *buf, size_t len, char *why, size_t why_len);

#endif
