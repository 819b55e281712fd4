/* avro — a record in Avro's binary encoding, read with the writer's schema
 * by Apache Avro's C library, as the JSON text the rest of the decoder
 * reads (DESIGN.md: Formats). A record becomes an object of its fields
 * (schema evolution needs nothing more: a field the writer's schema lacks
 * is absent), an enum its symbol, an array or a map a JSON array or
 * object, a union its branch's value, bytes and fixed "\\x<hex>" (bytea's
 * text); the logical types become the text PostgreSQL reads: decimal
 * (bytes or fixed) its exact digits as a JSON number, date, time-millis,
 * time-micros, timestamp-millis, timestamp-micros and local-timestamp-*
 * strings, uuid a string. avro-c parses no logical types: they are read
 * from the schema's JSON here. No I/O. */
#ifndef STORAGE_AVRO_H
#define STORAGE_AVRO_H

#include <stddef.h>

typedef struct avro_format avro_format_t;

/* A writer's schema, from its JSON text; NULL with the reason in why[len]
 * when it is not a schema avro-c reads. Not for two threads at once: it
 * keeps the value each record is read into. */
avro_format_t *avro_format_new(const char *schema, size_t len, char *why, size_t why_len);
void avro_format_free(avro_format_t *f);

#define AVRO_UNDECODABLE (-1) /* the bytes do not decode with the schema */
#define AVRO_TRAILING (-2)    /* they do, and bytes are left after the record */

/* The record of bytes[len] as JSON text, into a new string *json (*json_len
 * bytes, NUL-terminated; the caller frees it). Returns 0, or
 * AVRO_UNDECODABLE / AVRO_TRAILING with the reason in why[why_len]. */
int avro_format_json(avro_format_t *f, const void *bytes, size_t len, char **json, size_t *json_len, char *why,
                     size_t why_len);

/* Where a definition's member path leads in a writer's schema (the
 * schema's JSON text[len]): through a record's fields by name, an array's
 * items by index, a map's values by key, and into any branch of a union
 * that leads on. Returns 1 with the Avro type found there in type[len]
 * ("long", "union[null,string]", "record Customer"), 0 when the schema has
 * no such path, -1 when the text is not JSON. For verify and start-up: a
 * definition read against its subject's latest schema. */
int avro_schema_path(const char *text, size_t len, char *const *path, size_t n, char *type, size_t type_len);

#endif
