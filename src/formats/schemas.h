/* schemas — the writer's schemas of the schema registry's wire format, and
 * where the decoder gets them (DESIGN.md: Formats). A record in that format
 * is byte 0, the schema's id (4 bytes, big-endian), then the record encoded
 * with that schema. The decoder knows no HTTP: it asks a schema_source_t
 * for an id, and the registry's client (src/registry/) answers from its
 * cache or the registry. No I/O here. */
#ifndef STORAGE_SCHEMAS_H
#define STORAGE_SCHEMAS_H

#include <stddef.h>
#include <stdint.h>

#include "formats/avro.h"

#define WIRE_HEADER 5 /* magic byte and id */

typedef enum { SCHEMA_AVRO = 0, SCHEMA_JSON, SCHEMA_PROTOBUF, SCHEMA_OTHER } schema_kind_t;

typedef struct {
    int32_t id;
    schema_kind_t kind;
    avro_format_t *avro; /* SCHEMA_AVRO, when avro-c reads it */
    char *unusable;      /* why the schema cannot be used (an Avro schema avro-c refuses), or NULL */
} format_schema_t;

/* The schema `id` of registry type `type` ("AVRO", "JSON", "PROTOBUF";
 * NULL or "": AVRO, as the registry omits it) and text[len]. Never NULL. */
format_schema_t *format_schema_new(int32_t id, const char *type, const char *text, size_t len);
void format_schema_free(format_schema_t *s);

typedef enum {
    SCHEMA_FOUND = 0,   /* *schema set */
    SCHEMA_UNKNOWN,     /* the registry does not know the id: the record's fault */
    SCHEMA_UNAVAILABLE  /* the registry cannot be asked now: nobody's fault, wait */
} schema_answer_t;

/* Where the writer's schemas come from. begin() is called as a batch's
 * decoding starts: an answer "unknown" or "unavailable" holds until the
 * next batch, so a batch asks for a missing id once. get() fills why[len]
 * for an answer other than SCHEMA_FOUND. Not for two threads at once. */
typedef struct {
    void *ctx;
    void (*begin)(void *ctx);
    schema_answer_t (*get)(void *ctx, int32_t id, const format_schema_t **schema, char *why, size_t len);
} schema_source_t;

/* The id in a wire-format header: 0, -1 when bytes[len] is shorter than
 * the header, -2 when its first byte is not the magic byte 0. */
int wire_header(const void *bytes, size_t len, int32_t *id);

#endif
