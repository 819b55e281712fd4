/* pipeline_bind — a pipeline's definition bound to its table as PostgreSQL's
 * catalog describes it: the decoder's checks derived from the column types,
 * the definition refused where it disagrees with the table, and the SQL
 * built from both (DESIGN.md: Pipelines are declared). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/pipeline.h"
#include "core/pipeline_internal.h"

static const column_fact_t *column_of(const table_facts_t *t, const char *name)
{
    for (size_t i = 0; i < t->column_count; i++)
        if (strcmp(t->columns[i].name, name) == 0) return &t->columns[i];
    return NULL;
}

static int mismatch(char *err, size_t errlen, const pipeline_def_t *d, const field_spec_t *f, const char *column,
                    const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static int mismatch(char *err, size_t errlen, const pipeline_def_t *d, const field_spec_t *f, const char *column,
                    const char *fmt, ...)
{
    int n = snprintf(err, errlen, "pipeline %s%s%s, column %s.%s: ", d->name, f ? ", field " : "", f ? f->name : "",
                     d->table, column);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < errlen) vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

/* [lo, hi] of an integer column type. */
static void int_range(column_type_t t, int64_t *lo, int64_t *hi)
{
    switch (t) {
    case COLUMN_INT2:
    case COLUMN_INT2_ARRAY: *lo = INT16_MIN, *hi = INT16_MAX; return;
    case COLUMN_INT4:
    case COLUMN_INT4_ARRAY: *lo = INT32_MIN, *hi = INT32_MAX; return;
    default: *lo = INT64_MIN, *hi = INT64_MAX; return;
    }
}

/* Narrow [lo, hi] to the declared bounds (integers: the whole numbers
 * within them). Returns -1 when a bound lies beyond [lo, hi]: converting
 * it to an integer would be undefined, and it could only leave no value. */
static int narrow_int(const pipeline_def_t *d, const field_spec_t *f, const column_fact_t *c, int64_t *lo,
                      int64_t *hi, char *err, size_t errlen)
{
    /* (double)INT64_MAX is 2^63, itself beyond: compare with >= there. */
    if (f->declared.min_set && (ceil(f->declared.min) >= -(double)INT64_MIN || ceil(f->declared.min) > (double)*hi))
        return mismatch(err, errlen, d, f, c->name, "min %g is beyond the range of %s", f->declared.min, c->type);
    if (f->declared.max_set && (floor(f->declared.max) < (double)INT64_MIN || floor(f->declared.max) < (double)*lo))
        return mismatch(err, errlen, d, f, c->name, "max %g is beyond the range of %s", f->declared.max, c->type);
    if (f->declared.min_set && ceil(f->declared.min) > (double)*lo) *lo = (int64_t)ceil(f->declared.min);
    if (f->declared.max_set && floor(f->declared.max) < (double)*hi) *hi = (int64_t)floor(f->declared.max);
    return 0;
}

static void narrow_real(const field_spec_t *f, double *lo, double *hi)
{
    if (f->declared.min_set && f->declared.min > *lo) *lo = f->declared.min;
    if (f->declared.max_set && f->declared.max < *hi) *hi = f->declared.max;
}

static bool is_int(column_type_t t) { return t == COLUMN_INT2 || t == COLUMN_INT4 || t == COLUMN_INT8; }

static bool is_int_array(column_type_t t)
{
    return t == COLUMN_INT2_ARRAY || t == COLUMN_INT4_ARRAY || t == COLUMN_INT8_ARRAY;
}

/* Whether two values of a field of this kind that PostgreSQL holds equal
 * reach it as the same text (a number's text is as sent, PostgreSQL's
 * judged types as given): only such a column may hold a natural key, which
 * the batch compares by its text (core/batch.c). */
static bool written_in_one_form(field_kind_t k)
{
    return k == FIELD_STRING || k == FIELD_INTEGER || k == FIELD_UUID || k == FIELD_TIMESTAMP || k == FIELD_BOOLEAN;
}

/* The decoder's check of field `f` from its column `c`. */
static int bind_field(const pipeline_def_t *d, field_spec_t *f, const column_fact_t *c, char *err, size_t errlen)
{
    bool bounds = f->declared.min_set || f->declared.max_set;
    if (f->declared.kind_set) {
        bool fits = f->declared.kind == FIELD_HISTOGRAM ? is_int_array(c->kind) : c->kind == COLUMN_JSONB;
        if (!fits)
            return mismatch(err, errlen, d, f, c->name, "the kind %s needs a column of %s, not %s",
                            pipeline_kind_name(f->declared.kind),
                            f->declared.kind == FIELD_HISTOGRAM ? "an integer array type" : "type jsonb", c->type);
        f->kind = f->declared.kind;
        int_range(f->kind == FIELD_HISTOGRAM ? c->kind : COLUMN_INT8, &f->min, &f->max);
        return narrow_int(d, f, c, &f->min, &f->max, err, errlen);
    }
    if (bounds && !(is_int(c->kind) || c->kind == COLUMN_NUMERIC || c->kind == COLUMN_FLOAT4 || c->kind == COLUMN_FLOAT8))
        return mismatch(err, errlen, d, f, c->name, "min and max bound numbers, and the column is %s", c->type);
    if (f->declared.min_length && c->kind != COLUMN_VARCHAR && c->kind != COLUMN_CHAR && c->kind != COLUMN_TEXT)
        return mismatch(err, errlen, d, f, c->name, "min_length bounds strings, and the column is %s", c->type);
    switch (c->kind) {
    case COLUMN_VARCHAR:
    case COLUMN_CHAR:
    case COLUMN_TEXT:
        f->kind = FIELD_STRING;
        f->min = f->declared.min_length;
        f->max = c->kind != COLUMN_TEXT && c->length >= 0 ? c->length : INT32_MAX;
        f->pad = c->kind == COLUMN_CHAR && c->length >= 0;
        if (f->min > f->max)
            return mismatch(err, errlen, d, f, c->name, "min_length %lld is beyond the column's %s",
                            (long long)f->min, c->type);
        return 0;
    case COLUMN_INT2:
    case COLUMN_INT4:
    case COLUMN_INT8:
        f->kind = FIELD_INTEGER;
        int_range(c->kind, &f->min, &f->max);
        if (narrow_int(d, f, c, &f->min, &f->max, err, errlen)) return -1;
        if (f->min > f->max)
            return mismatch(err, errlen, d, f, c->name, "min and max leave no value of %s", c->type);
        return 0;
    case COLUMN_FLOAT4:
    case COLUMN_FLOAT8:
        /* The range is float4in's or float8in's, decided on the text. */
        f->kind = FIELD_NUMBER;
        f->single = c->kind == COLUMN_FLOAT4;
        f->dmin = -HUGE_VAL, f->dmax = HUGE_VAL;
        narrow_real(f, &f->dmin, &f->dmax);
        return 0;
    case COLUMN_NUMERIC:
        /* Any precision and scale: checked exactly on the number's text
         * (core/number_text.h); the declared bounds too. */
        f->kind = FIELD_DECIMAL;
        f->precision = c->precision;
        f->scale = c->precision < 0 ? 0 : c->scale;
        return 0;
    case COLUMN_BOOL: f->kind = FIELD_BOOLEAN; return 0;
    case COLUMN_UUID: f->kind = FIELD_UUID; return 0;
    case COLUMN_TIMESTAMPTZ: f->kind = FIELD_TIMESTAMP; return 0;
    /* PostgreSQL judges these from the text handed over: a row it refuses
     * is that row's dead letter (DESIGN.md: Pipelines are declared). */
    case COLUMN_TEXT_INPUT: f->kind = FIELD_TEXT; return 0;
    case COLUMN_JSON:
    case COLUMN_JSONB: f->kind = FIELD_JSON; return 0;
    case COLUMN_TEXT_ARRAY:
    case COLUMN_JSON_ARRAY:
        f->kind = FIELD_ARRAY;
        f->json_elements = c->kind == COLUMN_JSON_ARRAY;
        return 0;
    case COLUMN_INT2_ARRAY:
    case COLUMN_INT4_ARRAY:
    case COLUMN_INT8_ARRAY:
        return mismatch(err, errlen, d, f, c->name,
                        "an integer array is checked only as a declared kind: \"kind\": \"histogram\"");
    case COLUMN_OTHER: break;
    }
    return mismatch(err, errlen, d, f, c->name, "the decoder cannot check a column of type %s", c->type);
}

/* Which columns a field of the record's own can fill, and how (the value's
 * members take what bind_field says). Returns -1 with a message where the
 * column cannot take it. */
static int bind_source(const pipeline_def_t *d, field_spec_t *f, const column_fact_t *c, char *err, size_t errlen)
{
    bool text = c->kind == COLUMN_VARCHAR || c->kind == COLUMN_CHAR || c->kind == COLUMN_TEXT;
    bool bytea = strcmp(c->type, "bytea") == 0;
    const char *needs = NULL;
    f->bytes = false;
    switch (f->source) {
    case SOURCE_VALUE:
    case SOURCE_KEY_MEMBER: return 0;
    case SOURCE_TOPIC:
    case SOURCE_TIMESTAMP_TYPE:
        if (!text) needs = "a text, varchar or char column";
        break;
    case SOURCE_PARTITION:
    case SOURCE_OFFSET:
        if (!is_int(c->kind)) needs = "an integer column";
        break;
    case SOURCE_TIMESTAMP:
        if (c->kind != COLUMN_TIMESTAMPTZ && c->kind != COLUMN_INT8)
            needs = "a timestamptz column, or a bigint for its milliseconds";
        break;
    case SOURCE_KEY:
    case SOURCE_HEADER:
        if (!text && !bytea) needs = "a text, varchar or char column (UTF-8), or a bytea";
        f->bytes = bytea;
        break;
    case SOURCE_HEADERS:
        if (c->kind != COLUMN_JSON && c->kind != COLUMN_JSONB) needs = "a json or jsonb column";
        if (f->declared.kind_set) needs = "a json or jsonb column without a kind";
        break;
    }
    if (needs) return mismatch(err, errlen, d, f, c->name, "the %s needs %s, not %s", f->name, needs, c->type);
    return 0;
}

static bool is_update_column(const pipeline_def_t *d, const char *column)
{
    for (size_t i = 0; i < d->update_count; i++)
        if (strcmp(d->update_columns[i], column) == 0) return true;
    return false;
}

/* A column no row of the pipeline's can be written to: a generated one, an
 * identity GENERATED ALWAYS, or one the connected role may not INSERT (or
 * UPDATE, when the conflict rule sets it). */
static int check_writable(const pipeline_def_t *d, const field_spec_t *f, const column_fact_t *c, const char *role,
                          char *err, size_t errlen)
{
    if (c->generated)
        return mismatch(err, errlen, d, f, c->name, "a generated column cannot be written (PostgreSQL computes it)");
    if (c->identity_always)
        return mismatch(err, errlen, d, f, c->name,
                        "an identity column GENERATED ALWAYS cannot be written (make it BY DEFAULT, or leave it "
                        "to PostgreSQL)");
    if (c->insert_denied) return mismatch(err, errlen, d, f, c->name, "the role %s may not INSERT this column", role);
    if (c->update_denied && is_update_column(d, c->name))
        return mismatch(err, errlen, d, f, c->name, "the role %s may not UPDATE this column", role);
    return 0;
}

/* What the write path and the error classes take from the table. */
static void bind_table_rules(pipeline_def_t *d, const table_facts_t *t)
{
    d->partitioned = t->partitioned;
    d->row_security = t->row_security;
    d->deferrable = t->deferrable;
    for (size_t i = 0; i < d->app_foreign_count; i++) free(d->app_foreign_keys[i]);
    free(d->app_foreign_keys);
    d->app_foreign_keys = calloc(t->foreign_count + 1, sizeof *d->app_foreign_keys);
    if (!d->app_foreign_keys) abort();
    d->app_foreign_count = 0;
    for (size_t i = 0; d->app_column && i < t->foreign_count; i++) {
        if (strcmp(t->foreign_keys[i].columns, d->app_column) != 0) continue;
        d->app_foreign_keys[d->app_foreign_count] = strdup(t->foreign_keys[i].name);
        if (!d->app_foreign_keys[d->app_foreign_count++]) abort();
    }
}

/* Whether `key` (an index's columns joined by ",") is exactly the columns
 * cols[i] not yet `used`, in any order. Matched name by name, never split
 * at its commas: a name may hold a comma. */
static bool columns_are(const char *key, const char *const *cols, size_t n, bool *used, size_t left)
{
    if (left == 0) return *key == '\0';
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(cols[i]);
        if (used[i] || strncmp(key, cols[i], len) != 0) continue;
        if (left == 1 ? key[len] != '\0' : key[len] != ',') continue;
        used[i] = true;
        bool rest = columns_are(key + len + (left > 1), cols, n, used, left - 1);
        used[i] = false;
        if (rest) return true;
    }
    return false;
}

/* Whether `key` (an index's columns joined by ",") is exactly the natural
 * key's columns, in any order. */
static bool key_is(const char *key, const pipeline_def_t *d)
{
    const char *cols[PIPELINE_MAX_KEY + 1];
    bool used[PIPELINE_MAX_KEY + 1] = {false};
    size_t n = 0;
    if (d->key_includes_app) cols[n++] = d->app_column;
    for (size_t k = 0; k < d->key_count; k++) cols[n++] = d->fields[d->key_fields[k]].column;
    return columns_are(key, cols, n, used, n);
}

/* The SQL text `write` puts into a stream, as a new string. */
static char *sql_text(void (*write)(FILE *, const pipeline_def_t *, const table_facts_t *), const pipeline_def_t *d,
                      const table_facts_t *t)
{
    char *sql = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&sql, &len);
    if (!f) abort();
    write(f, d, t);
    if (fclose(f) != 0 || !sql) abort();
    return sql;
}

static void quote(FILE *f, const char *name) { pipeline_quote_name(f, name, strlen(name)); }

/* The written columns: the application's (if any), then each field's. */
static void write_columns(FILE *f, const pipeline_def_t *d, const table_facts_t *t)
{
    (void)t;
    if (d->app_column) quote(f, d->app_column);
    for (size_t i = 0; i < d->field_count; i++) {
        if (i || d->app_column) fputs(", ", f);
        quote(f, d->fields[i].column);
    }
}

/* The natural key's columns, each after `prefix` ("t."). */
static void write_key_of(FILE *f, const pipeline_def_t *d, const char *prefix)
{
    if (d->key_includes_app) {
        fputs(prefix, f);
        quote(f, d->app_column);
        fputs(", ", f);
    }
    for (size_t k = 0; k < d->key_count; k++) {
        fprintf(f, "%s%s", k ? ", " : "", prefix);
        quote(f, d->fields[d->key_fields[k]].column);
    }
}

/* The natural key's columns, the application's first. */
static void write_key(FILE *f, const pipeline_def_t *d, const table_facts_t *t)
{
    (void)t;
    write_key_of(f, d, "");
}

/* The conflict rule; the insert names its table `t`, so even a table
 * called "excluded" is told from the proposed row. */
static void write_conflict(FILE *f, const pipeline_def_t *d, const table_facts_t *t)
{
    (void)t;
    fputs("ON CONFLICT (", f);
    write_key(f, d, t);
    fprintf(f, ") DO %s", d->update_count ? "UPDATE SET " : "NOTHING");
    for (size_t i = 0; i < d->update_count; i++) {
        fputs(i ? ", " : "", f);
        quote(f, d->update_columns[i]);
        fputs(" = EXCLUDED.", f);
        quote(f, d->update_columns[i]);
    }
    if (d->mark_column) {
        fputs(", ", f);
        quote(f, d->mark_column);
        fputs(" = NULL", f);
    }
    if (d->update_count) {
        /* A row without a version (one the service did not write) is older
         * than any, as the mark's guard and the probe take it. */
        const char *v = d->fields[d->version_index].column;
        fputs(" WHERE t.", f);
        quote(f, v);
        fputs(" IS NULL OR EXCLUDED.", f);
        quote(f, v);
        fputs(" > t.", f);
        quote(f, v);
    }
}

/* The probe: the keys (and versions) unnested side by side, joined to the
 * table on the natural key's UNIQUE index. Each array is cast to its
 * column's own type, so the join uses that index. */
static void write_probe(FILE *f, const pipeline_def_t *d, const table_facts_t *t)
{
    const char *cols[PIPELINE_MAX_KEY + 2];
    size_t n = 0;
    if (d->key_includes_app) cols[n++] = d->app_column;
    for (size_t k = 0; k < d->key_count; k++) cols[n++] = d->fields[d->key_fields[k]].column;
    size_t keys = n;
    if (d->version_index >= 0) cols[n++] = d->fields[d->version_index].column;
    fputs("SELECT s.i FROM unnest(", f);
    for (size_t i = 0; i < n; i++) fprintf(f, "%s$%zu::%s[]", i ? ", " : "", i + 1, column_of(t, cols[i])->type);
    fputs(") WITH ORDINALITY AS s(", f);
    for (size_t i = 0; i < n; i++) fprintf(f, "c%zu, ", i);
    fprintf(f, "i) JOIN %s t ON ", d->table_sql);
    for (size_t i = 0; i < keys; i++) {
        fputs(i ? " AND t." : "t.", f);
        quote(f, cols[i]);
        fprintf(f, " = s.c%zu", i);
    }
    if (keys < n) {
        fputs(" WHERE t.", f);
        quote(f, cols[keys]);
        fprintf(f, " >= s.c%zu", keys);
    }
}

/* What the upsert selects from the stage: each column, or, for an optional
 * field on a NOT NULL column, the column's default where it is absent. */
static void write_select(FILE *f, const pipeline_def_t *d, const table_facts_t *t)
{
    (void)t;
    if (d->app_column) quote(f, d->app_column);
    for (size_t i = 0; i < d->field_count; i++) {
        const field_spec_t *fs = &d->fields[i];
        if (i || d->app_column) fputs(", ", f);
        if (fs->default_sql) fputs("COALESCE(", f);
        quote(f, fs->column);
        if (fs->default_sql) fprintf(f, ", %s)", fs->default_sql);
    }
}

/* A partitioned table with an update rule: the staged keys it holds
 * before the upsert, which write_returning reads. */
static void write_upsert_with(FILE *f, const pipeline_def_t *d, const table_facts_t *t)
{
    (void)t;
    if (!d->partitioned || !d->update_count) return;
    fputs("WITH storage_stored AS MATERIALIZED (SELECT ", f);
    write_key_of(f, d, "t.");
    fprintf(f, " FROM %s t JOIN pg_temp.storage_stage s ON (", d->table_sql);
    write_key_of(f, d, "t.");
    fputs(") = (", f);
    write_key_of(f, d, "s.");
    fputs(")) ", f);
}

/* Per row the upsert wrote, whether it inserted it (the insert names its
 * table `t`). */
static void write_returning(FILE *f, const pipeline_def_t *d, const table_facts_t *t)
{
    (void)t;
    if (!d->partitioned) {
        fputs("(xmax = 0)", f);
    } else if (!d->update_count) {
        fputs("true", f); /* DO NOTHING returns the rows it inserted, only */
    } else {
        fputs("NOT EXISTS (SELECT 1 FROM storage_stored o WHERE (", f);
        write_key_of(f, d, "o.");
        fputs(") = (", f);
        write_key_of(f, d, "t.");
        fputs("))", f);
    }
}

/* The keys of a tombstone statement, unnested side by side (each array
 * cast to its column's type, as the probe's), `extra` more arrays after
 * them (and their ordinality), named k(c0, ..., <names>). */
static void write_tombstone_keys(FILE *f, const pipeline_def_t *d, const table_facts_t *t, const char *extra,
                                 bool ordinality, const char *names)
{
    fputs("unnest(", f);
    for (size_t k = 0; k < d->key_count; k++)
        fprintf(f, "%s$%zu::%s[]", k ? ", " : "", k + 1, column_of(t, d->fields[d->key_fields[k]].column)->type);
    fputs(extra, f);
    fputs(ordinality ? ") WITH ORDINALITY AS k(" : ") AS k(", f);
    for (size_t k = 0; k < d->key_count; k++) fprintf(f, "%sc%zu", k ? ", " : "", k);
    fputs(names, f);
    fputs(")", f);
}

/* `alias`'s key columns equal k's: t.a = k.c0 AND ... */
static void write_key_join(FILE *f, const pipeline_def_t *d, const char *alias, const char *keys)
{
    for (size_t k = 0; k < d->key_count; k++) {
        fprintf(f, "%s%s.", k ? " AND " : "", alias);
        quote(f, d->fields[d->key_fields[k]].column);
        fprintf(f, " = %s.c%zu", keys, k);
    }
}

/* A tombstone rule's statement. Deletes: the rows of the keys deleted.
 * Marks: of each key's tombstones (in record order), the last one whose
 * guard lets it marks the row with its timestamp (now() where the record
 * has none), as applying them one by one would leave it. The guard, when
 * the version (when_newer) is the record's timestamp: a row newer than the
 * tombstone (a value after it, read in an earlier batch of a replay, or a
 * producer's later record) is left as it is; a row without a version is
 * older than any. */
static void write_tombstone(FILE *f, const pipeline_def_t *d, const table_facts_t *t)
{
    if (d->tombstones == TOMBSTONE_DEAD_LETTER) return;
    if (d->tombstones == TOMBSTONE_DELETE) {
        fprintf(f, "DELETE FROM %s t USING ", d->table_sql);
        write_tombstone_keys(f, d, t, "", false, "");
        fputs(" WHERE ", f);
        write_key_join(f, d, "t", "k");
        return;
    }
    char extra[32];
    snprintf(extra, sizeof extra, ", $%zu::bigint[]", d->key_count + 1);
    fprintf(f, "UPDATE %s t SET ", d->table_sql);
    quote(f, d->mark_column);
    fputs(" = CASE WHEN m.ts >= 0 THEN to_timestamp(m.ts / 1000.0) ELSE now() END FROM (SELECT DISTINCT ON (", f);
    for (size_t k = 0; k < d->key_count; k++) fprintf(f, "%sk.c%zu", k ? ", " : "", k);
    fputs(") k.* FROM ", f);
    write_tombstone_keys(f, d, t, extra, true, ", ts, i");
    fputs(" JOIN ", f);
    fprintf(f, "%s s ON ", d->table_sql);
    write_key_join(f, d, "s", "k");
    if (d->version_index >= 0 && d->fields[d->version_index].source == SOURCE_TIMESTAMP) {
        const char *v = d->fields[d->version_index].column;
        bool ms = column_of(t, v)->kind == COLUMN_INT8;
        fputs(" WHERE (k.ts < 0 OR s.", f);
        quote(f, v);
        fputs(" IS NULL OR s.", f);
        quote(f, v);
        /* Milliseconds added to the epoch: exact while k.ts times 1,000 µs
         * fits a double's 53 bits (any timestamp before the year 287,000). */
        fputs(ms ? " <= k.ts)" : " <= timestamptz 'epoch' + k.ts * interval '1 millisecond')", f);
    }
    fputs(" ORDER BY ", f);
    for (size_t k = 0; k < d->key_count; k++) fprintf(f, "k.c%zu, ", k);
    fputs("k.i DESC) m WHERE ", f);
    write_key_join(f, d, "t", "m");
}

/* Every statement's names, quoted (DESIGN.md: Pipelines are declared). */
static void build_sql(pipeline_def_t *d, const table_facts_t *t)
{
    pipeline_free_sql(d);
    d->columns_sql = sql_text(write_columns, d, t);
    d->key_sql = sql_text(write_key, d, t);
    d->conflict_sql = sql_text(write_conflict, d, t);
    d->probe_sql = sql_text(write_probe, d, t);
    d->select_sql = sql_text(write_select, d, t);
    d->upsert_with_sql = sql_text(write_upsert_with, d, t);
    d->returning_sql = sql_text(write_returning, d, t);
    if (d->tombstones != TOMBSTONE_DEAD_LETTER) d->tombstone_sql = sql_text(write_tombstone, d, t);
}

int pipeline_bind_lookup(pipeline_id_t id, const table_facts_t *t, char *err, size_t errlen)
{
    pipeline_def_t *d = pipeline_entry(id);
    d->bound = false;
    if (!d->app_member) return 0;
    bool registry = strcmp(d->lookup_table, "apps_registry_application") == 0;
    if (!t->exists)
        return snprintf(err, errlen,
                        registry ? "pipeline %s: table %s does not exist: apply the App API migrations first (the "
                                   "pipeline resolves its \"application\" through it), then storage-consumer migrate"
                                 : "pipeline %s: the lookup's table %s does not exist",
                        d->name, d->lookup_table),
               -1;
    const column_fact_t *m = column_of(t, d->lookup_match), *k = column_of(t, d->lookup_take);
    if (!m || (m->kind != COLUMN_VARCHAR && m->kind != COLUMN_TEXT && m->kind != COLUMN_CHAR))
        return snprintf(err, errlen, "pipeline %s: the lookup's match column %s.%s: %s", d->name, d->lookup_table,
                        d->lookup_match, m ? "needs a text column (text, varchar, char)" : "no such column"),
               -1;
    bool unique = false;
    for (size_t i = 0; i < t->unique_count && !unique; i++) unique = strcmp(t->unique_keys[i], d->lookup_match) == 0;
    if (!unique)
        return snprintf(err, errlen, "pipeline %s: the lookup's match column %s.%s has no UNIQUE constraint of its own "
                                     "(a value must name one row)", d->name, d->lookup_table, d->lookup_match),
               -1;
    if (!k || !is_int(k->kind))
        return snprintf(err, errlen, "pipeline %s: the lookup's take column %s.%s: %s", d->name, d->lookup_table,
                        d->lookup_take, k ? "needs an integer column" : "no such column"),
               -1;
    d->lookup_max_length = m->kind == COLUMN_TEXT ? -1 : m->length;
    return 0;
}

int pipeline_bind(pipeline_id_t id, const table_facts_t *t, char *err, size_t errlen)
{
    pipeline_def_t *d = pipeline_entry(id);
    d->bound = false;
    if (!t->exists)
        return snprintf(err, errlen,
                        "pipeline %s: table %s does not exist (the service migrates only its own tables: "
                        "create this one with a migration of your own)",
                        d->name, d->table),
               -1;
    const column_fact_t *app = d->app_column ? column_of(t, d->app_column) : NULL;
    if (d->app_column && !app)
        return mismatch(err, errlen, d, NULL, d->app_column, "no such column for the application's id");
    if (app && !is_int(app->kind))
        return mismatch(err, errlen, d, NULL, d->app_column, "the application's id needs an integer column, not %s",
                        app->type);
    if (app && app->insert_denied)
        return mismatch(err, errlen, d, NULL, app->name, "the role %s may not INSERT this column", t->role);
    for (size_t i = 0; i < d->field_count; i++) {
        field_spec_t *f = &d->fields[i];
        const column_fact_t *c = column_of(t, f->column);
        if (!c) return mismatch(err, errlen, d, f, f->column, "no such column");
        if (check_writable(d, f, c, t->role, err, errlen)) return -1;
        free(f->default_sql);
        f->default_sql = NULL;
        if (c->not_null && !f->required && !c->default_sql)
            return mismatch(err, errlen, d, f, c->name,
                            "the column is NOT NULL and the field optional, and the column has no default: declare "
                            "it \"required\": true, or give the column a DEFAULT");
        if (c->not_null && !f->required && !(f->default_sql = strdup(c->default_sql))) abort();
        if (bind_source(d, f, c, err, errlen) || bind_field(d, f, c, err, errlen)) return -1;
        if (f->whole && f->kind != FIELD_JSON)
            return mismatch(err, errlen, d, f, c->name, "the whole value (\"path\": \"\") goes into a json or jsonb "
                                                        "column, not %s", c->type);
        if (pipeline_is_key_field(d, (int)i) && !written_in_one_form(f->kind))
            return mismatch(err, errlen, d, f, c->name,
                            "a natural key needs a column the decoder writes in one form (text, varchar, char, an "
                            "integer, uuid, timestamptz, boolean), not %s: the batch compares keys by their text",
                            c->type);
    }
    for (size_t i = 0; i < d->never_count; i++)
        if (!column_of(t, d->never_writes[i]))
            return mismatch(err, errlen, d, NULL, d->never_writes[i], "listed in never_writes, and no such column");
    if (d->mark_column) {
        /* The tombstone sets it, every newer value sets it back to NULL. */
        const column_fact_t *c = column_of(t, d->mark_column);
        if (!c) return mismatch(err, errlen, d, NULL, d->mark_column, "the tombstones' mark column: no such column");
        if (c->kind != COLUMN_TIMESTAMPTZ || c->not_null)
            return mismatch(err, errlen, d, NULL, c->name, "the tombstones' mark needs a nullable timestamptz column, "
                                                           "not %s%s", c->type, c->not_null ? " NOT NULL" : "");
        if (c->generated || c->update_denied || c->insert_denied)
            return mismatch(err, errlen, d, NULL, c->name, "the tombstones' mark column cannot be written by the "
                                                           "role %s", t->role);
    }
    for (size_t i = 0; i < t->column_count; i++) {
        const column_fact_t *c = &t->columns[i];
        if (c->not_null && !c->has_default && !(d->app_column && strcmp(c->name, d->app_column) == 0) &&
            !pipeline_field_by_column(d, c->name))
            return mismatch(err, errlen, d, NULL, c->name, "NOT NULL without a default, and no field fills it");
    }
    bool unique = false;
    for (size_t i = 0; i < t->unique_count && !unique; i++) unique = key_is(t->unique_keys[i], d);
    if (!unique) {
        const char *key_col = d->fields[d->key_fields[0]].column;
        for (size_t i = 0; i < t->unusable_count; i++) {
            const unusable_key_t *u = &t->unusable_keys[i];
            if (!key_is(u->columns, d)) continue;
            if (u->invalid)
                return mismatch(err, errlen, d, NULL, key_col,
                                "the natural key's unique index %s is INVALID (a failed CREATE INDEX CONCURRENTLY: "
                                "ON CONFLICT cannot use it; rebuild it with REINDEX)", u->name);
            return mismatch(err, errlen, d, NULL, key_col,
                            "the natural key's UNIQUE constraint is DEFERRABLE (ON CONFLICT cannot use it; "
                            "make it NOT DEFERRABLE)");
        }
        char *key = pipeline_key_columns(d, ", ");
        mismatch(err, errlen, d, NULL, key_col, "the natural key (%s) has no UNIQUE constraint (ON CONFLICT needs one)",
                 key);
        free(key);
        return -1;
    }
    if (d->version_index >= 0) {
        const field_spec_t *v = &d->fields[d->version_index];
        if (v->kind != FIELD_TIMESTAMP && v->kind != FIELD_INTEGER)
            return mismatch(err, errlen, d, v, v->column, "a version must be a timestamptz or an integer column, not %s",
                            column_of(t, v->column)->type);
    }
    bind_table_rules(d, t);
    if (t->table_sql[0]) {
        free(d->table_sql);
        if (!(d->table_sql = strdup(t->table_sql))) abort();
    }
    build_sql(d, t);
    d->bound = true;
    return 0;
}
