/* pipeline — the pipelines as data (DESIGN.md: Pipelines are declared).
 *
 * The pipelines differ only in topic, group, batch size, message contract,
 * table, natural key and conflict rule. Everything else (the batch loop,
 * the decoder, the writer) is written once and reads these definitions.
 *
 * A definition has two sources, each saying what only it can say:
 *   - the definitions file (pipelines/default.json, built in; or the file
 *     STORAGE_PIPELINES_FILE names): which message member fills which
 *     column, which are required, what a column's type cannot say (a score
 *     of 1..5, a histogram of five counts), the natural key, the conflict
 *     rule, the columns never written;
 *   - PostgreSQL's catalog, read at start: each column's type, length,
 *     precision and scale, NOT NULL, and the UNIQUE index of the key.
 * pipelines_load reads the first; pipeline_bind joins the second into the
 * checks the decoder applies. Both happen before any pipeline thread starts;
 * afterwards the definitions are only read. */
#ifndef STORAGE_PIPELINE_H
#define STORAGE_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/json_value.h"

/* A pipeline's index among the loaded definitions. */
typedef int pipeline_id_t;

/* The built-in definitions, in their file's order (tests and benchmarks
 * name them; the service itself never assumes which pipelines exist). */
enum { PIPELINE_APP_STATS = 0, PIPELINE_REVIEWS, PIPELINE_NETWORK_METRICS };

/* At most this many pipelines in one file, and fields in one pipeline. */
#define PIPELINE_MAX 16
#define PIPELINE_MAX_FIELDS 32
/* At most this many field columns in a natural key. */
#define PIPELINE_MAX_KEY 8
/* Topics one pipeline reads (DESIGN.md: Declared pipelines). */
#define PIPELINE_MAX_TOPICS 16

/* How a JSON field is validated and turned into the text of its column. */
typedef enum {
    FIELD_STRING,    /* JSON string, length in characters within [min, max] (spaces beyond max cut; pad: CHAR(n)) */
    FIELD_INTEGER,   /* integer within [min, max] (the column's own range) */
    FIELD_NUMBER,    /* REAL (single) or DOUBLE PRECISION: the number's text, within [dmin, dmax] */
    FIELD_TIMESTAMP, /* ISO 8601 string, see core/timestamp.h */
    FIELD_BOOLEAN,   /* true / false */
    FIELD_UUID,      /* canonical 8-4-4-4-12 hex, stored lower-case */
    FIELD_HISTOGRAM, /* array of exactly 5 integers within [min, max] */
    FIELD_DECIMAL,   /* NUMERIC (precision -1) or NUMERIC(precision, scale): the number's text */
    FIELD_COUNTS,    /* object of name -> integer count within [min, max], stored as JSON */
    /* Judged by PostgreSQL (DESIGN.md: Pipelines are declared): */
    FIELD_TEXT,      /* a JSON string, its characters handed over as the type's text input */
    FIELD_JSON,      /* any JSON value, its text as sent (json, or jsonb without a kind) */
    FIELD_ARRAY      /* a JSON array of strings (json_elements: of any values) as an array literal, or a string holding one */
} field_kind_t;

/* Where a field's value comes from (DESIGN.md: Pipelines are declared):
 * the record's value, as every field of the built-in pipelines, or the
 * record's own fields. */
typedef enum {
    SOURCE_VALUE = 0,      /* a member of the record's value (a JSON object) */
    SOURCE_KEY,            /* the record's key, whole: text (UTF-8) or bytea */
    SOURCE_TOPIC,          /* the topic's name */
    SOURCE_PARTITION,      /* the partition's number */
    SOURCE_OFFSET,         /* the record's offset */
    SOURCE_TIMESTAMP,      /* the record's timestamp: timestamptz, or milliseconds in an integer */
    SOURCE_TIMESTAMP_TYPE, /* "create" or "log_append" */
    SOURCE_HEADERS,        /* every header, in order, as JSON: [{"key": k, "value": v or null}, ...] */
    SOURCE_HEADER,         /* one header's value, by name (the last of that name): text (UTF-8) or bytea */
    SOURCE_KEY_MEMBER      /* a member of the record's key (a JSON object), checked as a value's member */
} field_source_t;

/* How a record's value is written (DESIGN.md: Formats). */
typedef enum {
    FORMAT_JSON = 0,     /* a JSON object */
    FORMAT_CONNECT_JSON, /* Kafka Connect's JSON envelope: {"schema": ..., "payload": {...}} */
    FORMAT_AVRO,         /* Avro in the schema registry's wire format */
    FORMAT_JSON_SCHEMA   /* JSON in the schema registry's wire format (a JSON Schema's id) */
} value_format_t;

/* Whether records of format `f` carry a schema registry's id. */
#define FORMAT_NEEDS_REGISTRY(f) ((f) == FORMAT_AVRO || (f) == FORMAT_JSON_SCHEMA)

/* What a tombstone (a record with a key and no value) does (DESIGN.md:
 * Pipelines are declared). */
typedef enum {
    TOMBSTONE_DEAD_LETTER = 0, /* an empty_payload dead letter */
    TOMBSTONE_DELETE,          /* deletes the row of its key */
    TOMBSTONE_MARK             /* sets the row's mark column to the record's timestamp */
} tombstone_rule_t;

/* The column facts PostgreSQL's catalog gives (pg/catalog.c reads them). */
typedef enum {
    COLUMN_OTHER = 0, /* a type the decoder cannot check: `type` names it */
    COLUMN_VARCHAR,   /* length: characters, or -1 for no limit */
    COLUMN_CHAR,      /* CHAR(n), blank-padded: length n, or -1 for no limit */
    COLUMN_TEXT,
    COLUMN_INT2,
    COLUMN_INT4,
    COLUMN_INT8,
    COLUMN_NUMERIC,   /* precision, scale; -1 for an unconstrained numeric */
    COLUMN_FLOAT4,
    COLUMN_FLOAT8,
    COLUMN_BOOL,
    COLUMN_UUID,
    COLUMN_TIMESTAMPTZ,
    COLUMN_JSONB,
    COLUMN_INT8_ARRAY,
    COLUMN_INT4_ARRAY,
    COLUMN_INT2_ARRAY,
    /* Judged by PostgreSQL from the text handed over: */
    COLUMN_TEXT_INPUT,   /* date, time, timestamp, bytea: the type's own text input */
    COLUMN_JSON,
    COLUMN_TEXT_ARRAY,   /* an array of text input: date[], time[], timestamp[], bytea[], char[], varchar[], text[] */
    COLUMN_JSON_ARRAY    /* json[], jsonb[] */
} column_type_t;

typedef struct {
    char name[64];
    char type[64]; /* as PostgreSQL writes it: "character varying(255)" */
    column_type_t kind;
    int length;    /* COLUMN_VARCHAR, COLUMN_CHAR */
    int precision, scale; /* COLUMN_NUMERIC */
    bool not_null, has_default;
    /* The SQL of the column's default (pg_get_expr of pg_attrdef; an
     * identity BY DEFAULT's nextval of its sequence), or NULL: what an
     * optional field on a NOT NULL column takes when its member is absent. */
    char *default_sql;
    /* What no INSERT may set: a generated column, or an identity GENERATED
     * ALWAYS (an identity BY DEFAULT takes a value). */
    bool generated, identity_always;
    /* What the connected role may not do to the column
     * (has_column_privilege): false, the default, allows. */
    bool insert_denied, update_denied;
} column_fact_t;

/* A UNIQUE index ON CONFLICT cannot use (its columns as in unique_keys). */
typedef struct {
    char *name;
    char *columns;
    bool deferrable; /* a DEFERRABLE constraint's index (not indimmediate) */
    bool invalid;    /* not indisvalid: a failed CREATE INDEX CONCURRENTLY */
} unusable_key_t;

/* A foreign key of the table: its name and its columns joined by ",". */
typedef struct {
    char *name;
    char *columns;
} foreign_key_t;

/* A table as the catalog describes it. */
typedef struct {
    bool exists;
    column_fact_t *columns;
    size_t column_count;
    /* Each UNIQUE index without a predicate or expression: its columns'
     * names joined by "," in index order. */
    char **unique_keys;
    size_t unique_count;
    /* What the write path adapts to (DESIGN.md: The write path): a
     * partitioned table (relkind 'p': no system column in RETURNING),
     * row-level security (no COPY FROM where a policy applies), a
     * DEFERRABLE constraint (made to fire at its statement). */
    bool partitioned, row_security, deferrable;
    unusable_key_t *unusable_keys;
    size_t unusable_count;
    foreign_key_t *foreign_keys;
    size_t foreign_count;
    char role[64]; /* the connected role the privileges are the facts of */
    /* The table in SQL with its schema, as the catalog found it (empty:
     * unknown): every statement names it so, and nothing of the session's
     * own (its temporary stage) can shadow it (DESIGN.md: The write path). */
    char table_sql[272];
} table_facts_t;

typedef struct {
    /* The message member ("user_name"), or for a record's own field how
     * messages name it ("record topic", "record header trace-id"). */
    char *name;
    char *column; /* the column it fills (the member's name unless declared) */
    bool required;
    field_source_t source;
    char *header; /* SOURCE_HEADER: the header's name; SOURCE_KEY_MEMBER: the key's member */
    /* A member of the value named by a JSON Pointer ("path": "/customer/email",
     * DESIGN.md: Member paths): its segments, unescaped (path[0] the
     * top-level member the readers find), and `name` the pointer as
     * written; path_count 0 with `whole`: the value itself ("path": ""). A
     * field named by "member" has path_count 0 and reads member `name`. */
    char **path;
    size_t path_count;
    bool whole;
    /* Set at load: the index in the pipeline's members[] of the top-level
     * member this field reads (fields of one member share it), -1 for none
     * (the record's own fields, the whole value). */
    int slot;
    /* Declared in the file: what the column type cannot say. */
    struct {
        bool kind_set, min_set, max_set;
        field_kind_t kind; /* FIELD_HISTOGRAM or FIELD_COUNTS */
        double min, max;   /* a value's bounds (a count's, for the two kinds above) */
        int64_t min_length;
    } declared;
    /* Derived by pipeline_bind: what the decoder checks. */
    field_kind_t kind;
    int64_t min, max;  /* FIELD_INTEGER and counts: range; FIELD_STRING: length in characters */
    double dmin, dmax; /* FIELD_NUMBER: range (the declared bounds) */
    bool single;       /* FIELD_NUMBER: REAL, read as float4in reads it */
    bool pad;          /* FIELD_STRING: CHAR(n), stored padded with spaces to max characters */
    bool json_elements; /* FIELD_ARRAY: elements are JSON values, each written as sent */
    int precision, scale; /* FIELD_DECIMAL: precision -1 for an unconstrained NUMERIC */
    bool bytes;        /* SOURCE_KEY, SOURCE_HEADER into a bytea (FIELD_TEXT): its bytes as bytea's hex text */
    /* An optional field on a NOT NULL column with a default: the default's
     * SQL, which the upsert writes where the member is absent (or null),
     * and a batch with such a row is not COPYed straight into the table
     * (DESIGN.md: The write path). NULL otherwise. */
    char *default_sql;
} field_spec_t;

typedef struct {
    pipeline_id_t id;
    char *name;                /* "reviews": the pipeline's name everywhere */
    char *env_suffix;          /* "REVIEWS": STORAGE_MAX_POLL_RECORDS_REVIEWS */
    char *default_topic;       /* "reviews"; a list joined by commas (topic_list_t) */
    char *group;               /* the consumer group, or NULL: STORAGE_GROUP_PREFIX + "." + name */
    int default_batch_size;
    /* The table as the file names it ("reviews", "crawler.Permissions"):
     * for messages and logs. */
    char *table;
    /* The same in SQL, each part quoted ("\"crawler\".\"Permissions\""):
     * every statement on the table, and its catalog lookup (to_regclass). */
    char *table_sql;
    field_spec_t *fields;      /* in the file's order; application column excluded */
    size_t field_count;
    /* The lookup (DESIGN.md: Lookups): member app_member's value (a string)
     * is resolved through the UNIQUE text column lookup_match of table
     * lookup_table into its integer column lookup_take, which fills
     * app_column. "application" is the lookup of "package_name" through
     * the App API's registry (apps_registry_application.package_name into
     * its id). NULL for a pipeline without one (then app_column and the
     * lookup's names are NULL too, and no column but the fields' is
     * written). */
    char *app_member;
    char *lookup_table;     /* as written: "apps_registry_application", "crm.customers" */
    char *lookup_table_sql; /* quoted, as table_sql */
    char *lookup_match, *lookup_take;
    /* Built at load: the lookup's query, $1 a text array of values; returns
     * (value, id) for those the table holds. */
    char *lookup_sql;
    /* Bound from the lookup table: the longest value its match column
     * holds, in characters (-1: no limit); a longer value cannot be found
     * and is the record's invalid_field. */
    int lookup_max_length;
    /* The top-level members a record is read for, set at load, each once:
     * members[0] is app_member ("" without one: never read), then each
     * field's member (a path's first segment) in the fields' order;
     * member_count of them. A field finds its value at its `slot`. */
    jv_key_t members[PIPELINE_MAX_FIELDS + 1];
    size_t member_count;
    char *app_column;          /* "application_id": the column that id fills */
    /* Natural key: app_column (when key_includes_app) plus these fields'
     * columns (indices in fields, in the key's declared order). */
    int key_fields[PIPELINE_MAX_KEY];
    size_t key_count;
    bool key_includes_app;
    /* The field whose greatest value wins when one batch holds the same key
     * twice, and which guards the update (reviews: "last_synced_at"), or
     * NULL: the first occurrence wins, as ON CONFLICT DO NOTHING would
     * decide. A timestamp or an integer. */
    char *version_field;
    int version_index;         /* its index in fields, or -1 */
    char **update_columns;     /* the conflict rule's SET; none: DO NOTHING */
    size_t update_count;
    char **never_writes;       /* columns the service never writes */
    size_t never_count;
    /* What a tombstone does; TOMBSTONE_MARK: the timestamptz column it
     * sets, which every write of a value sets back to NULL. A rule other
     * than the dead letter needs a key of the record's own fields alone:
     * a tombstone has no value to read a member from. */
    tombstone_rule_t tombstones;
    value_format_t format;     /* "format": how the value is written */
    value_format_t key_format; /* "key_format": how the key is, for its members */
    char *mark_column;
    /* Built by pipeline_bind, every name quoted (DESIGN.md: Pipelines are
     * declared): the written columns, the application's first, then each
     * field's, in the file's order ("\"application_id\", \"review_id\", ...");
     * the natural key's columns ("\"application_id\", \"crawled_at\""), the
     * conflict target and the upsert's order; everything after the SELECT
     * of the insert, which names the table `t` (INSERT INTO table AS t):
     * its conflict target is the natural key. */
    char *columns_sql;
    char *key_sql;
    char *conflict_sql;
    /* Built by pipeline_bind: the probe of a batch's keys (and versions)
     * before it is written (DESIGN.md: The write path). Parameters: an
     * array literal per key column, then one of the versions (if any);
     * returns the 1-based positions of the rows the table already holds
     * at that version or a newer one. */
    char *probe_sql;
    /* What the upsert selects from the stage: the columns, an absent
     * member's default where a field has one (COALESCE); what it returns per
     * row written, whether it inserted it: (xmax = 0), or on a partitioned
     * table (no system column there) whether its key was not among those
     * stored before the statement, read by upsert_with_sql ("WITH … ", or
     * ""); DESIGN.md: The write path. */
    char *select_sql;
    char *upsert_with_sql;
    char *returning_sql;
    /* Built by pipeline_bind for a tombstone rule: the DELETE (or the
     * UPDATE of the mark) of the keys given as one array literal per key
     * column (and, for the mark, one of the records' timestamps in
     * milliseconds, -1: none); NULL without one. */
    char *tombstone_sql;
    /* Bound from the table (DESIGN.md: The write path, Errors). */
    bool partitioned, row_security, deferrable;
    /* The foreign keys on the application's column alone: a row that
     * violates one names an application deleted under the batch; any other
     * foreign key is the row's own. */
    char **app_foreign_keys;
    size_t app_foreign_count;
    bool bound;
} pipeline_def_t;

/* Whether a field of `def` reads the record's headers or its timestamp's
 * type: what a dead letter does not keep (dead-letters redrive refuses). */
bool pipeline_reads_record_metadata(const pipeline_def_t *def);

/* Load the definitions from the JSON file at `path`, or the built-in ones
 * when `path` is NULL or empty. Loading the source already loaded keeps
 * the definitions (and what was bound to them). Returns 0, or -1 with a
 * message in err: a syntax error names its line and column, any other
 * names the member ("pipelines[1] (reviews).fields[3] (score).max: ..."). */
int pipelines_load(const char *path, char *err, size_t errlen);

/* The built-in definitions file's text. */
extern const char pipelines_builtin_json[];

/* Release the loaded definitions. */
void pipelines_free(void);

/* How many pipelines are loaded (the built-in ones when none were). */
int pipeline_count(void);

/* The definition of pipeline `id` (0 <= id < pipeline_count()). */
const pipeline_def_t *pipeline_get(pipeline_id_t id);

/* Look a pipeline up by name. Returns NULL when the name is unknown. */
const pipeline_def_t *pipeline_find(const char *name, size_t len);

/* Kafka's legal topic names: [a-zA-Z0-9._-], 1..249 characters, except "."
 * and "..", which the broker refuses (a definition's topic, a
 * STORAGE_TOPIC_ variable). */
bool pipeline_topic_ok(const char *topic);

/* The topics of a pipeline, in the order given: a definition's "topic" (a
 * name or a list of names) or a STORAGE_TOPIC_ variable, written as one
 * text with the names joined by commas (a comma is never part of a topic
 * name). */
typedef struct {
    int count;
    char *name[PIPELINE_MAX_TOPICS];
} topic_list_t;

/* Split `text` ("reviews-eu,reviews-us") into `out` (topic_list_free):
 * 1..PIPELINE_MAX_TOPICS legal names, none twice. Returns 0, or -1 with the
 * reason in `err` (out is then empty). */
int topic_list_parse(const char *text, topic_list_t *out, char *err, size_t errlen);
void topic_list_free(topic_list_t *l);

/* The index of `topic` in `l`, or -1. */
int topic_list_index(const topic_list_t *l, const char *topic);

/* Whether two lists (texts as topic_list_parse reads them; an invalid one
 * shares nothing) name a topic in common, written into `name`. */
bool topics_shared(const char *a, const char *b, char *name, size_t len);

/* The pipelines' names, in file order, joined by ", " into `buf`, for
 * messages and usage texts ("known: app-stats, reviews, network-metrics"). */
const char *pipeline_names(char *buf, size_t len);

/* The index in def->fields of the field called `name`, or -1 (also for
 * NULL). */
int pipeline_field_index(const pipeline_def_t *def, const char *name);

/* Whether field `index` is one of the natural key's. */
bool pipeline_is_key_field(const pipeline_def_t *def, int index);

/* The natural key's columns as written, joined by `sep`, for messages
 * ("application_id and crawled_at"); the caller frees it. */
char *pipeline_key_columns(const pipeline_def_t *def, const char *sep);

/* Derive pipeline `id`'s checks from its table's facts. Returns 0, or -1
 * with a message naming the pipeline, the field and the column where the
 * definition and the table disagree. Binding again replaces the checks. */
int pipeline_bind(pipeline_id_t id, const table_facts_t *table, char *err, size_t errlen);

/* Bind pipeline `id`'s lookup (if any) to its table's facts, before
 * pipeline_bind: the match column a text column with a UNIQUE constraint of
 * its own, the take column an integer. Returns 0, or -1 with a message
 * naming the pipeline, the table and the column. */
int pipeline_bind_lookup(pipeline_id_t id, const table_facts_t *lookup, char *err, size_t errlen);

/* The readable name of a column type ("character varying(255)"). */
const char *pipeline_kind_name(field_kind_t kind);

#endif
