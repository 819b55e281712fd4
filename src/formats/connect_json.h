/* connect_json — Kafka Connect's JSON envelope, as its JsonConverter writes
 * it with schemas on: {"schema": {...}, "payload": {...}} (DESIGN.md:
 * Formats). The payload is read as any JSON value is (members, paths); the
 * schema says which members hold a logical type whose JSON form is not
 * what PostgreSQL reads: a Decimal's base64 bytes, a Date's days, a Time's
 * and a Timestamp's milliseconds. This turns them into the text PostgreSQL
 * reads. Knows neither Kafka nor PostgreSQL; no I/O. */
#ifndef STORAGE_CONNECT_JSON_H
#define STORAGE_CONNECT_JSON_H

#include <jansson.h>
#include <stddef.h>

#include "core/json_value.h"

typedef enum {
    CONNECT_PLAIN = 0,  /* no logical type: the value as it is */
    CONNECT_DECIMAL,    /* org.apache.kafka.connect.data.Decimal: bytes, scale */
    CONNECT_DATE,       /* org.apache.kafka.connect.data.Date: int32 days since 1970-01-01 */
    CONNECT_TIME,       /* org.apache.kafka.connect.data.Time: int32 ms since midnight */
    CONNECT_TIMESTAMP   /* org.apache.kafka.connect.data.Timestamp: int64 ms since the epoch */
} connect_logical_t;

typedef struct {
    connect_logical_t type;
    int scale; /* CONNECT_DECIMAL */
} connect_type_t;

/* The logical type of the member at path[0..n) of the payload, as the
 * envelope's `schema` (a struct schema) declares it: through a struct's
 * fields by name, an array's items by index, a map's values by key.
 * CONNECT_PLAIN where the schema declares none or does not reach there.
 * `scale` that is not an integer is CONNECT_PLAIN too: the value is then
 * judged as it is sent. */
connect_type_t connect_type_at(const json_t *schema, char *const *path, size_t n);

/* The text of `v` (as the payload holds it) for logical type `t`, into a
 * new string *out (the caller frees it): a Decimal's base64 bytes as the
 * exact number ("-12.50"), a Date as "2026-12-01", a Time as
 * "10:00:00.123", a Timestamp as "2026-12-01T10:00:00.123Z". A Decimal
 * sent as a JSON number (JsonConverter's decimal.format=NUMERIC) is left
 * as it is: returns 1 and *out NULL. Returns 0, or -1 with the reason in
 * why[len] (not base64, a number out of its type's range). */
int connect_text(connect_type_t t, const jv_t *v, char **out, char *why, size_t len);

#endif
