/* pipeline — the three pipelines as data.
 *
 * The pipelines differ only in topic, group, batch size, message contract,
 * table, natural key and conflict clause. Everything else (the batch loop,
 * the decoder, the writer) is written once and reads this table. */
#ifndef STORAGE_PIPELINE_H
#define STORAGE_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    PIPELINE_APP_STATS = 0,
    PIPELINE_REVIEWS,
    PIPELINE_NETWORK_METRICS,
    PIPELINE_COUNT
} pipeline_id_t;

/* How a JSON field is validated and turned into the text of its column. */
typedef enum {
    FIELD_STRING,    /* JSON string, length in characters within [min, max] */
    FIELD_INTEGER,   /* integer within [min, max] (the column's own range) */
    FIELD_NUMBER,    /* finite number within [min, max] */
    FIELD_TIMESTAMP, /* ISO 8601 string, see core/timestamp.h */
    FIELD_BOOLEAN,   /* true / false */
    FIELD_UUID,      /* canonical 8-4-4-4-12 hex, stored lower-case */
    FIELD_HISTOGRAM, /* array of exactly 5 integers >= 0 */
    FIELD_PRICE,     /* number >= 0, at most 2 decimals, fits NUMERIC(12,2) */
    FIELD_COUNTS     /* object of name -> integer count >= 0, stored as JSON */
} field_kind_t;

typedef struct {
    const char *name; /* the JSON key, and the column it fills */
    field_kind_t kind;
    bool required;
    int64_t min, max; /* FIELD_INTEGER range; FIELD_STRING length in characters */
    double dmin, dmax; /* FIELD_NUMBER range */
} field_spec_t;

typedef struct {
    pipeline_id_t id;
    const char *name;          /* "reviews": the pipeline's name everywhere */
    const char *env_suffix;    /* "REVIEWS": STORAGE_MAX_POLL_RECORDS_REVIEWS */
    const char *default_topic; /* "reviews" */
    int default_batch_size;
    const char *table;         /* "reviews" */
    const field_spec_t *fields; /* columns in order, application_id excluded */
    size_t field_count;
    /* Natural key: application_id (when key_includes_app) plus this field. */
    const char *key_field;
    bool key_includes_app;
    /* The field whose greatest value wins when one batch holds the same key
     * twice (reviews: "last_synced_at"), or NULL: the first occurrence wins,
     * as ON CONFLICT DO NOTHING would decide. */
    const char *version_field;
    /* Everything after the VALUES/SELECT of the insert; its conflict target
     * is the natural key (a unit test holds them together). */
    const char *conflict_sql;
} pipeline_def_t;

/* The static definition of a pipeline. This function can't fail for a valid id. */
const pipeline_def_t *pipeline_get(pipeline_id_t id);

/* Look a pipeline up by name ("app-stats", "reviews", "network-metrics").
 * Returns NULL when the name is unknown. */
const pipeline_def_t *pipeline_find(const char *name, size_t len);

/* The pipelines' names, in table order, joined by ", " into `buf`, for
 * messages and usage texts ("known: app-stats, reviews, network-metrics"). */
const char *pipeline_names(char *buf, size_t len);

/* The index in def->fields of the field called `name`, or -1 (also for
 * NULL). */
int pipeline_field_index(const pipeline_def_t *def, const char *name);

/* The natural key's columns joined by `sep` into `buf`: with ", " the
 * conflict target ("application_id, crawled_at"), with " and " prose. */
const char *pipeline_key_columns(const pipeline_def_t *def, const char *sep, char *buf, size_t len);

#endif
