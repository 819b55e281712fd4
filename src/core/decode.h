/* decode — one Kafka record value to a typed event or a rejection (DESIGN.md: The message contract).
 *
 * Validation happens here, with the database's own limits, because the batch
 * is one transaction: one out-of-range value reaching SQL would abort it and
 * sacrifice its good messages. A rejected record goes to dead_letter_events
 * with `error_type` (a short stable code) and a detail that names the field
 * and the problem.
 *
 * Knows neither Kafka nor PostgreSQL: the event holds each column as the text
 * PostgreSQL reads, so any writer (COPY, parameters) can take it as is. */
#ifndef STORAGE_DECODE_H
#define STORAGE_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/json_value.h"
#include "core/pipeline.h"
#include "formats/schemas.h"

#define EVENT_NULL SIZE_MAX

/* A record's headers, as its reader holds them: at(opaque, i, ...) gives
 * the i-th header's name and value (value NULL: a null header) and
 * returns false past the last. */
typedef struct {
    const void *opaque;
    bool (*at)(const void *opaque, size_t i, const char **name, const void **value, size_t *len);
} record_headers_t;

/* One Kafka record. The bytes belong to the consumer that polled it and stay
 * valid until that consumer releases the batch. */
typedef struct {
    const char *topic;
    int32_t partition;
    int64_t offset;
    int64_t timestamp_ms; /* -1: none */
    int timestamp_type;   /* RECORD_TIMESTAMP_* */
    const void *key;      /* NULL: none */
    size_t key_len;
    const void *value; /* NULL: tombstone */
    size_t value_len;
    record_headers_t headers; /* at NULL: none known */
} record_t;

enum { RECORD_TIMESTAMP_NONE = 0, RECORD_TIMESTAMP_CREATE, RECORD_TIMESTAMP_LOG_APPEND };

/* Stable error_type codes: the same words in the table, the logs and docs. */
#define ERROR_EMPTY_PAYLOAD "empty_payload"
#define ERROR_INVALID_UTF8 "invalid_utf8"
#define ERROR_INVALID_JSON "invalid_json"
#define ERROR_MISSING_FIELD "missing_field"
#define ERROR_INVALID_FIELD "invalid_field"
#define ERROR_UNREGISTERED_APP "unregistered_app"
#define ERROR_DATABASE_REJECTED "database_rejected"
/* The schema registry's wire format (DESIGN.md: Formats). */
#define ERROR_NO_MAGIC_BYTE "no_magic_byte"   /* the first byte is not 0 */
#define ERROR_SHORT_HEADER "short_header"     /* fewer than the header's 5 bytes */
#define ERROR_UNKNOWN_SCHEMA "unknown_schema" /* the registry does not know the id (404) */
#define ERROR_UNDECODABLE "undecodable"       /* the bytes do not decode with the writer's schema */
#define ERROR_TRAILING_BYTES "trailing_bytes" /* bytes left after the record */

/* Every error_type above, in that order (the operator commands refuse a
 * --type that is none of them). */
#define DECODE_ERROR_TYPE_COUNT 12
extern const char *const decode_error_types[DECODE_ERROR_TYPE_COUNT];

/* The index of `type` in decode_error_types, or -1 when it is none of them. */
int decode_error_type_index(const char *type);

typedef struct {
    const char *error_type; /* one of the ERROR_* codes; static storage */
    char detail[512];
} rejection_t;

/* A decoded record. All column texts live in one buffer owned by the event;
 * col[i] is the offset of column i's NUL-terminated text, or EVENT_NULL. */
typedef struct {
    char *buf;
    size_t len, cap;
    size_t col[PIPELINE_MAX_FIELDS];
    size_t package_name;
    int64_t version; /* the pipeline's version_field: UTC microseconds, or the integer */
} event_t;

/* An event starts zeroed ({0}) or with event_init; event_free releases its
 * buffer. An event may be decoded into again: the buffer is reused. */
void event_init(event_t *ev);
void event_free(event_t *ev);

/* Column i's text, or NULL for SQL NULL. Valid until the event is reused. */
const char *event_column(const event_t *ev, size_t i);
const char *event_package_name(const event_t *ev);

/* Make `s` valid UTF-8 in place: every byte of an invalid or cut-off
 * sequence becomes '?'. A detail cut by a fixed buffer may end inside a
 * multi-byte character, and error_detail is TEXT: PostgreSQL would refuse
 * the dead letter, and a refused dead letter stops the pipeline. */
void decode_repair_utf8(char *s);

/* Decode `len` bytes at `value` (NULL means a tombstone) by the contract of
 * `def`. Returns 0 and fills *ev, or returns -1 and fills *rej; it never
 * fails in any other way (allocation failure aborts the process: a decoder
 * that cannot allocate cannot make progress either). */
int decode_record(const pipeline_def_t *def, const void *value, size_t len, event_t *ev,
                  rejection_t *rej);

/* decode_record of record `r`'s value, with the record's own fields a
 * definition may take as columns (its topic, partition, offset, timestamp,
 * key, headers). decode_record knows none of them: such a field is absent.
 * A tombstone (no value) of a pipeline with a tombstone rule decodes to its
 * natural key alone and returns DECODE_TOMBSTONE. */
#define DECODE_TOMBSTONE 1
int decode_record_of(const pipeline_def_t *def, const record_t *r, event_t *ev, rejection_t *rej);

/* decode_record_of for a pipeline whose value or key is in the schema
 * registry's wire format: the writer's schemas come from `schemas` (NULL:
 * none, as decode_record_of). Returns DECODE_UNAVAILABLE, with the reason
 * in rej->detail, when a schema cannot be had now (the registry is down,
 * or none is configured): not the record's fault, never a dead letter. */
#define DECODE_UNAVAILABLE 2
int decode_record_from(const pipeline_def_t *def, const record_t *r, const schema_source_t *schemas, event_t *ev,
                       rejection_t *rej);

/* decode_record with the reference JSON reader alone (jansson), never the
 * fast one: the outcome decode_record must equal for every input (DESIGN.md:
 * Two parsers, one outcome). For the differential fuzz target and tests. */
int decode_record_reference(const pipeline_def_t *def, const void *value, size_t len,
                            event_t *ev, rejection_t *rej);

/* Two events of `def` say the same: package name, version and every
 * column's text (or SQL NULL). */
bool event_equal(const pipeline_def_t *def, const event_t *a, const event_t *b);

#endif
