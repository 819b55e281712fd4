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
 * within them). */
static void narrow_int(const field_spec_t *f, int64_t *lo, int64_t *hi)
{
    if (f->declared.min_set && ceil(f->declared.min) > (double)*lo) *lo = (int64_t)ceil(f->declared.min);
    if (f->declared.max_set && floor(f->declared.max) < (double)*hi) *hi = (int64_t)floor(f->declared.max);
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
        narrow_int(f, &f->min, &f->max);
        return 0;
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
        narrow_int(f, &f->min, &f->max);
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

/* Whether `key` ("a,b") holds exactly the natural key's columns. */
static bool key_is(const char *key, const pipeline_def_t *d)
{
    const char *field_col = d->fields[pipeline_field_index(d, d->key_field)].column;
    size_t want = d->key_includes_app ? 2 : 1, have = 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", key);
    for (char *save = NULL, *c = strtok_r(buf, ",", &save); c; c = strtok_r(NULL, ",", &save)) {
        if (strcmp(c, field_col) != 0 && !(d->key_includes_app && strcmp(c, d->app_column) == 0)) return false;
        have++;
    }
    return have == want;
}

static void build_conflict(pipeline_def_t *d)
{
    char key[256];
    size_t cap = 256;
    for (size_t i = 0; i < d->update_count; i++) cap += 2 * strlen(d->update_columns[i]) + 16;
    if (d->version_field) cap += strlen(d->table) + 2 * strlen(d->fields[d->version_index].column);
    char *sql = malloc(cap);
    if (!sql) abort();
    pipeline_key_columns(d, ", ", key, sizeof key);
    size_t n = (size_t)snprintf(sql, cap, "ON CONFLICT (%s) DO %s", key, d->update_count ? "UPDATE SET " : "NOTHING");
    for (size_t i = 0; i < d->update_count; i++)
        n += (size_t)snprintf(sql + n, cap - n, "%s%s = EXCLUDED.%s", i ? ", " : "", d->update_columns[i],
                              d->update_columns[i]);
    if (d->update_count) {
        const char *v = d->fields[d->version_index].column;
        snprintf(sql + n, cap - n, " WHERE EXCLUDED.%s > %s.%s", v, strchr(d->table, '.') ? strchr(d->table, '.') + 1 : d->table, v);
    }
    free(d->conflict_sql);
    d->conflict_sql = sql;
}

/* The probe: the keys (and versions) unnested side by side, joined to the
 * table on the natural key's UNIQUE index. Each array is cast to its
 * column's own type, so the join uses that index. */
static void build_probe(pipeline_def_t *d, const table_facts_t *t)
{
    const char *cols[3];
    size_t n = 0;
    if (d->key_includes_app) cols[n++] = d->app_column;
    cols[n++] = d->fields[pipeline_field_index(d, d->key_field)].column;
    size_t keys = n;
    if (d->version_index >= 0) cols[n++] = d->fields[d->version_index].column;
    char *sql = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&sql, &len);
    if (!f) abort();
    fputs("SELECT s.i FROM unnest(", f);
    for (size_t i = 0; i < n; i++) fprintf(f, "%s$%zu::%s[]", i ? ", " : "", i + 1, column_of(t, cols[i])->type);
    fputs(") WITH ORDINALITY AS s(", f);
    for (size_t i = 0; i < n; i++) fprintf(f, "c%zu, ", i);
    fprintf(f, "i) JOIN %s t ON ", d->table);
    for (size_t i = 0; i < keys; i++) fprintf(f, "%st.%s = s.c%zu", i ? " AND " : "", cols[i], i);
    if (keys < n) fprintf(f, " WHERE t.%s >= s.c%zu", cols[keys], keys);
    if (fclose(f) != 0 || !sql) abort();
    free(d->probe_sql);
    d->probe_sql = sql;
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
    const column_fact_t *app = column_of(t, d->app_column);
    if (!app) return mismatch(err, errlen, d, NULL, d->app_column, "no such column for the application's id");
    if (!is_int(app->kind))
        return mismatch(err, errlen, d, NULL, d->app_column, "the application's id needs an integer column, not %s",
                        app->type);
    for (size_t i = 0; i < d->field_count; i++) {
        field_spec_t *f = &d->fields[i];
        const column_fact_t *c = column_of(t, f->column);
        if (!c) return mismatch(err, errlen, d, f, f->column, "no such column");
        if (c->not_null && !f->required)
            return mismatch(err, errlen, d, f, c->name,
                            "the column is NOT NULL and the field optional: declare it \"required\": true");
        if (bind_field(d, f, c, err, errlen)) return -1;
        if (strcmp(f->name, d->key_field) == 0 && !written_in_one_form(f->kind))
            return mismatch(err, errlen, d, f, c->name,
                            "a natural key needs a column the decoder writes in one form (text, varchar, char, an "
                            "integer, uuid, timestamptz, boolean), not %s: the batch compares keys by their text",
                            c->type);
    }
    for (size_t i = 0; i < d->never_count; i++)
        if (!column_of(t, d->never_writes[i]))
            return mismatch(err, errlen, d, NULL, d->never_writes[i], "listed in never_writes, and no such column");
    for (size_t i = 0; i < t->column_count; i++) {
        const column_fact_t *c = &t->columns[i];
        if (c->not_null && !c->has_default && strcmp(c->name, d->app_column) != 0 && !pipeline_field_by_column(d, c->name))
            return mismatch(err, errlen, d, NULL, c->name, "NOT NULL without a default, and no field fills it");
    }
    bool unique = false;
    for (size_t i = 0; i < t->unique_count && !unique; i++) unique = key_is(t->unique_keys[i], d);
    if (!unique) {
        char key[256];
        return mismatch(err, errlen, d, NULL, d->fields[pipeline_field_index(d, d->key_field)].column,
                        "the natural key (%s) has no UNIQUE constraint (ON CONFLICT needs one)",
                        pipeline_key_columns(d, ", ", key, sizeof key));
    }
    if (d->version_index >= 0) {
        const field_spec_t *v = &d->fields[d->version_index];
        if (v->kind != FIELD_TIMESTAMP && v->kind != FIELD_INTEGER)
            return mismatch(err, errlen, d, v, v->column, "a version must be a timestamptz or an integer column, not %s",
                            column_of(t, v->column)->type);
    }
    build_conflict(d);
    build_probe(d, t);
    d->bound = true;
    return 0;
}
