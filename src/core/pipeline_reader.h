/* pipeline_reader — the definitions file's reader, shared by its halves:
 * the pipeline as a whole (pipeline.c) and its fields and rules
 * (pipeline_fields.c). Nothing else includes this. */
#ifndef STORAGE_PIPELINE_READER_H
#define STORAGE_PIPELINE_READER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/pipeline.h"

/* Where the reader is in the file, for its messages, and where they go. */
typedef struct {
    char *err;
    size_t errlen;
    char where[160]; /* "pipelines[1] (reviews)" */
} reader_t;

/* A message naming where the reader is and `member` there; returns -1. */
__attribute__((format(printf, 3, 4))) int def_fail(reader_t *r, const char *member, const char *fmt, ...);

/* A copy of `s` (allocation failure aborts). */
char *def_dup(const char *s);

/* Free the n strings of `list`, and it. */
void def_free_list(char **list, size_t n);

/* A name as PostgreSQL keeps it (DESIGN.md: Pipelines are declared). */
#define NAME_RULE "1 to 63 bytes, no control characters"
bool def_identifier(const char *s);

/* Every member of `obj` is one of `known` (a typo is an error). */
int def_only_members(reader_t *r, json_t *obj, const char *const *known);

/* Member `member` of `obj` as a non-empty string, a column name, or a
 * list of column names, into *out (absent: left as it is, unless
 * required). Returns 0, or -1 with the message. */
int def_str(reader_t *r, json_t *obj, const char *member, bool required, char **out);
int def_column(reader_t *r, json_t *obj, const char *member, bool required, char **out);
int def_columns(reader_t *r, json_t *obj, const char *member, bool may_be_empty, char ***out, size_t *n);

/* A definition's field i, its natural key, its conflict rule and its
 * tombstone rule (pipeline_fields.c), in that order. Each returns 0, or
 * -1 with the message. */
int def_read_field(reader_t *r, json_t *f, size_t i, pipeline_def_t *d);
int def_read_key(reader_t *r, json_t *p, pipeline_def_t *d);
int def_read_conflict(reader_t *r, json_t *p, pipeline_def_t *d);
int def_read_tombstones(reader_t *r, json_t *p, pipeline_def_t *d);

#endif
