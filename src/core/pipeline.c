#include "core/pipeline.h"
#include "core/pipeline_internal.h"
#include "core/pipeline_reader.h"

#include <ctype.h>
#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pipeline_def_t registry[PIPELINE_MAX];
static int registry_count;
static char *registry_source; /* the path loaded, "" for the built-in file; NULL: none */

char *def_dup(const char *s)
{
    char *d = strdup(s);
    if (!d) abort();
    return d;
}

void def_free_list(char **list, size_t n)
{
    for (size_t i = 0; i < n; i++) free(list[i]);
    free(list);
}

void pipeline_free_sql(pipeline_def_t *d)
{
    char **sql[] = {&d->columns_sql,     &d->key_sql,       &d->conflict_sql, &d->probe_sql, &d->select_sql,
                    &d->upsert_with_sql, &d->returning_sql, &d->tombstone_sql};
    for (size_t i = 0; i < sizeof sql / sizeof *sql; i++) {
        free(*sql[i]);
        *sql[i] = NULL;
    }
}

static void def_free(pipeline_def_t *d)
{
    free(d->name);
    free(d->env_suffix);
    free(d->default_topic);
    free(d->group);
    free(d->table);
    free(d->table_sql);
    for (size_t i = 0; i < d->field_count; i++) {
        free(d->fields[i].name);
        free(d->fields[i].column);
        free(d->fields[i].default_sql);
        free(d->fields[i].header);
        def_free_list(d->fields[i].path, d->fields[i].path_count);
    }
    free(d->fields);
    free(d->app_member);
    free(d->app_column);
    free(d->lookup_table);
    free(d->lookup_table_sql);
    free(d->lookup_match);
    free(d->lookup_take);
    free(d->lookup_sql);
    free(d->version_field);
    def_free_list(d->update_columns, d->update_count);
    def_free_list(d->never_writes, d->never_count);
    free(d->mark_column);
    pipeline_free_sql(d);
    def_free_list(d->app_foreign_keys, d->app_foreign_count);
    memset(d, 0, sizeof *d);
}

void pipelines_free(void)
{
    for (int i = 0; i < registry_count; i++) def_free(&registry[i]);
    registry_count = 0;
    free(registry_source);
    registry_source = NULL;
}

/* ---- Reading the file ------------------------------------------------- */

int def_fail(reader_t *r, const char *member, const char *fmt, ...)
{
    int n = snprintf(r->err, r->errlen, "%s%s%s: ", r->where, *r->where && member ? "." : "", member ? member : "");
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < r->errlen) vsnprintf(r->err + n, r->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

/* A name as PostgreSQL keeps it (DESIGN.md: Pipelines are declared): 1 to
 * 63 bytes (a longer one PostgreSQL would cut), without control
 * characters (so every message and log line can show it); keywords, case,
 * spaces, quotes and any other UTF-8 character are taken literally, since
 * every statement quotes it. The file is UTF-8 and has no NUL (jansson
 * refuses both otherwise). */
static bool name_ok(const char *s, size_t len)
{
    if (len == 0 || len > 63) return false;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) return false;
    return true;
}

bool def_identifier(const char *s) { return name_ok(s, strlen(s)); }

/* A table, optionally schema-qualified: the name split at its first dot
 * (a table whose own name has a dot is named with its schema). */
static bool table_name(const char *s)
{
    const char *dot = strchr(s, '.');
    if (!dot) return def_identifier(s);
    return name_ok(s, (size_t)(dot - s)) && def_identifier(dot + 1);
}

void pipeline_quote_name(FILE *f, const char *name, size_t len)
{
    fputc('"', f);
    for (size_t i = 0; i < len; i++) {
        if (name[i] == '"') fputc('"', f);
        fputc(name[i], f);
    }
    fputc('"', f);
}

/* The table in SQL: each part of table_name() quoted. */
static char *table_sql(const char *table)
{
    char *sql = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&sql, &len);
    if (!f) abort();
    const char *dot = strchr(table, '.');
    if (dot) {
        pipeline_quote_name(f, table, (size_t)(dot - table));
        fputc('.', f);
        table = dot + 1;
    }
    pipeline_quote_name(f, table, strlen(table));
    if (fclose(f) != 0 || !sql) abort();
    return sql;
}

bool pipeline_topic_ok(const char *t)
{
    size_t n = strlen(t);
    if (n == 0 || n > 249 || strcmp(t, ".") == 0 || strcmp(t, "..") == 0) return false;
    for (; *t; t++)
        if (!isalnum((unsigned char)*t) && *t != '.' && *t != '_' && *t != '-') return false;
    return true;
}

void topic_list_free(topic_list_t *l)
{
    for (int i = 0; i < l->count; i++) free(l->name[i]);
    l->count = 0;
}

int topic_list_index(const topic_list_t *l, const char *topic)
{
    for (int i = 0; i < l->count; i++)
        if (strcmp(l->name[i], topic) == 0) return i;
    return -1;
}

int topic_list_parse(const char *text, topic_list_t *out, char *err, size_t errlen)
{
    out->count = 0;
    for (const char *at = text;;) {
        size_t n = strcspn(at, ",");
        char *name = strndup(at, n);
        if (!name) abort();
        const char *why = NULL;
        if (!pipeline_topic_ok(name))
            why = "is not a valid Kafka topic name ([a-zA-Z0-9._-], 1..249 characters)";
        else if (topic_list_index(out, name) >= 0)
            why = "is named twice";
        else if (out->count == PIPELINE_MAX_TOPICS)
            why = "is one topic too many (at most 16 per pipeline)";
        _Static_assert(PIPELINE_MAX_TOPICS == 16, "the message above names the limit");
        if (why) {
            snprintf(err, errlen, "\"%s\" %s", name, why);
            free(name);
            topic_list_free(out);
            return -1;
        }
        out->name[out->count++] = name;
        if (!at[n]) return 0;
        at += n + 1;
    }
}

static bool pipeline_name_ok(const char *s)
{
    if (!*s || strlen(s) > 48 || !islower((unsigned char)*s)) return false;
    for (; *s; s++)
        if (!(islower((unsigned char)*s) || isdigit((unsigned char)*s) || *s == '-')) return false;
    return true;
}

/* Every member of `obj` is one of `known` (a typo is an error, never a
 * setting silently not applied). */
int def_only_members(reader_t *r, json_t *obj, const char *const *known)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v)
    {
        bool ok = false;
        for (const char *const *k = known; *k && !ok; k++) ok = strcmp(*k, key) == 0;
        if (!ok) {
            char list[256] = "";
            for (const char *const *k = known; *k; k++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", k == known ? "" : ", ", *k);
            return def_fail(r, key, "unknown member (known: %s)", list);
        }
    }
    return 0;
}

int def_str(reader_t *r, json_t *obj, const char *member, bool required, char **out)
{
    json_t *v = json_object_get(obj, member);
    if (!v) return required ? def_fail(r, member, "required") : 0;
    if (!json_is_string(v) || json_string_length(v) == 0) return def_fail(r, member, "expected a non-empty string");
    *out = def_dup(json_string_value(v));
    return 0;
}

int def_column(reader_t *r, json_t *obj, const char *member, bool required, char **out)
{
    if (def_str(r, obj, member, required, out)) return -1;
    if (*out && !def_identifier(*out))
        return def_fail(r, member, "\"%s\" is not a column name (" NAME_RULE ")", *out);
    return 0;
}

/* A list of column names; `may_be_empty`: [] says "none" (never_writes). */
int def_columns(reader_t *r, json_t *obj, const char *member, bool may_be_empty, char ***out, size_t *n)
{
    json_t *v = json_object_get(obj, member);
    if (!v) return 0;
    if (!json_is_array(v) || (json_array_size(v) == 0 && !may_be_empty))
        return def_fail(r, member, "expected a non-empty array of column names");
    *out = calloc(json_array_size(v) + 1, sizeof **out);
    if (!*out) abort();
    for (size_t i = 0; i < json_array_size(v); i++) {
        json_t *c = json_array_get(v, i);
        if (!json_is_string(c) || !def_identifier(json_string_value(c)))
            return def_fail(r, member, "item %zu is not a column name (" NAME_RULE ")", i);
        for (size_t j = 0; j < *n; j++)
            if (strcmp((*out)[j], json_string_value(c)) == 0)
                return def_fail(r, member, "column %s is listed twice", json_string_value(c));
        (*out)[(*n)++] = def_dup(json_string_value(c));
    }
    return 0;
}

const field_spec_t *pipeline_field_by_column(const pipeline_def_t *d, const char *column)
{
    for (size_t i = 0; i < d->field_count; i++)
        if (strcmp(d->fields[i].column, column) == 0) return &d->fields[i];
    return NULL;
}

/* "topic": a name, or a list of names (many topics into one table), kept
 * as one text joined by commas, as a STORAGE_TOPIC_ variable writes it;
 * absent: the pipeline's name. */
static int get_topics(reader_t *r, json_t *p, pipeline_def_t *d)
{
    json_t *v = json_object_get(p, "topic");
    if (!v) {
        d->default_topic = def_dup(d->name);
        return 0;
    }
    size_t n = json_is_array(v) ? json_array_size(v) : 1, len = 0;
    if (!json_is_string(v) && (!json_is_array(v) || n == 0))
        return def_fail(r, "topic", "expected a topic name or a non-empty list of topic names");
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_is_array(v) ? json_array_get(v, i) : v;
        if (!json_is_string(t)) return def_fail(r, "topic", "expected a topic name or a non-empty list of topic names");
        /* Each name alone: "b,c" would otherwise pass as two. */
        if (!pipeline_topic_ok(json_string_value(t)))
            return def_fail(r, "topic", "\"%s\" is not a valid Kafka topic name ([a-zA-Z0-9._-], 1..249 characters)",
                        json_string_value(t));
        len += json_string_length(t) + 1;
    }
    d->default_topic = calloc(1, len);
    if (!d->default_topic) abort();
    for (size_t i = 0; i < n; i++) {
        if (i) strcat(d->default_topic, ",");
        strcat(d->default_topic, json_string_value(json_is_array(v) ? json_array_get(v, i) : v));
    }
    topic_list_t l;
    char why[400];
    if (topic_list_parse(d->default_topic, &l, why, sizeof why)) return def_fail(r, "topic", "%s", why);
    topic_list_free(&l);
    return 0;
}

/* The lookup's query: the values found, as text, and their ids. A text
 * array compares with a text column's own operator, so its UNIQUE index
 * serves the lookup. */
static void lookup_query(pipeline_def_t *d)
{
    size_t len = 0;
    FILE *f = open_memstream(&d->lookup_sql, &len);
    if (!f) abort();
    fputs("SELECT ", f);
    pipeline_quote_name(f, d->lookup_match, strlen(d->lookup_match));
    fputs("::text, ", f);
    pipeline_quote_name(f, d->lookup_take, strlen(d->lookup_take));
    fprintf(f, " FROM %s WHERE ", d->lookup_table_sql);
    pipeline_quote_name(f, d->lookup_match, strlen(d->lookup_match));
    fputs(" = ANY($1::text[])", f);
    if (fclose(f) != 0 || !d->lookup_sql) abort();
}

/* "format" or "key_format" (DESIGN.md: Formats); absent: JSON. */
static int read_format(reader_t *r, json_t *p, const char *name, value_format_t *out)
{
    static const struct {
        const char *name;
        value_format_t format;
    } formats[] = {{"json", FORMAT_JSON},
                   {"connect_json", FORMAT_CONNECT_JSON},
                   {"avro", FORMAT_AVRO},
                   {"json_schema", FORMAT_JSON_SCHEMA}};
    json_t *v = json_object_get(p, name);
    *out = FORMAT_JSON;
    if (!v) return 0;
    const char *fmt = json_is_string(v) ? json_string_value(v) : "";
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
        if (strcmp(fmt, formats[i].name) == 0) {
            *out = formats[i].format;
            return 0;
        }
    return def_fail(r, name,
                    "expected \"json\" (the default), \"connect_json\" (Kafka Connect's JsonConverter with schemas "
                    "on), \"avro\" or \"json_schema\" (the schema registry's wire format; Protobuf is not read)");
}

static int read_pipeline(reader_t *r, json_t *p, pipeline_def_t *d)
{
    static const char *const known[] = {"name",        "topic",        "group",      "batch_size",
                                        "table",       "application",  "lookup",     "fields",     "key",
                                        "format",      "key_format",
                                        "on_conflict", "never_writes", "tombstones", NULL};
    static const char *const app_known[] = {"member", "column", NULL};
    static const char *const lookup_known[] = {"member", "table", "match", "take", "column", NULL};
    if (!json_is_object(p)) return def_fail(r, NULL, "expected an object");
    if (def_str(r, p, "name", true, &d->name)) return -1;
    size_t at = strlen(r->where);
    snprintf(r->where + at, sizeof r->where - at, " (%s)", d->name);
    if (def_only_members(r, p, known)) return -1;
    if (!pipeline_name_ok(d->name))
        return def_fail(r, "name", "\"%s\" is not a pipeline name ([a-z][a-z0-9-]*, at most 48)", d->name);
    d->env_suffix = def_dup(d->name);
    for (char *c = d->env_suffix; *c; c++) *c = *c == '-' ? '_' : (char)toupper((unsigned char)*c);
    if (get_topics(r, p, d) || def_str(r, p, "group", false, &d->group) || def_str(r, p, "table", true, &d->table))
        return -1;
    if (!table_name(d->table))
        return def_fail(r, "table", "\"%s\" is not a table name ([schema.]table, each " NAME_RULE ")", d->table);
    d->table_sql = table_sql(d->table);
    json_t *v;
    if (read_format(r, p, "format", &d->format) || read_format(r, p, "key_format", &d->key_format)) return -1;
    v = json_object_get(p, "batch_size");
    d->default_batch_size = 500;
    if (v) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 100000)
            return def_fail(r, "batch_size", "expected an integer of 1..100000");
        d->default_batch_size = (int)json_integer_value(v);
    }
    /* Optional: a pipeline of any topic stores its fields alone. An
     * application is the lookup through the App API's registry. */
    json_t *app = json_object_get(p, "application"), *lookup = json_object_get(p, "lookup");
    if (app && lookup) return def_fail(r, "lookup", "a pipeline has an \"application\" or a \"lookup\", not both");
    if (app && !json_is_object(app))
        return def_fail(r, "application", "expected {\"member\": \"package_name\", \"column\": \"application_id\"}");
    if (lookup && !json_is_object(lookup))
        return def_fail(r, "lookup", "expected {\"member\": ..., \"table\": ..., \"match\": ..., \"take\": ..., "
                                 "\"column\": ...}");
    if (app || lookup) {
        snprintf(r->where + strlen(r->where), sizeof r->where - strlen(r->where), app ? ".application" : ".lookup");
        if (def_only_members(r, app ? app : lookup, app ? app_known : lookup_known) ||
            def_str(r, app ? app : lookup, "member", true, &d->app_member) ||
            def_column(r, app ? app : lookup, "column", true, &d->app_column))
            return -1;
        if (app) {
            d->lookup_table = def_dup("apps_registry_application");
            d->lookup_match = def_dup("package_name");
            d->lookup_take = def_dup("id");
            d->lookup_max_length = 255; /* its VARCHAR(255), until the catalog says */
        } else if (def_str(r, lookup, "table", true, &d->lookup_table) ||
                   def_column(r, lookup, "match", true, &d->lookup_match) ||
                   def_column(r, lookup, "take", true, &d->lookup_take)) {
            return -1;
        } else if (!table_name(d->lookup_table)) {
            return def_fail(r, "table", "\"%s\" is not a table name ([schema.]table, each " NAME_RULE ")", d->lookup_table);
        }
        if (lookup) d->lookup_max_length = -1; /* until the catalog says */
        d->lookup_table_sql = table_sql(d->lookup_table);
        lookup_query(d);
        snprintf(r->where + at, sizeof r->where - at, " (%s)", d->name);
    }
    json_t *fields = json_object_get(p, "fields");
    if (!json_is_array(fields) || json_array_size(fields) == 0 || json_array_size(fields) > PIPELINE_MAX_FIELDS)
        return def_fail(r, "fields", "expected an array of 1..%d fields", PIPELINE_MAX_FIELDS);
    d->fields = calloc(json_array_size(fields), sizeof *d->fields);
    if (!d->fields) abort();
    for (size_t i = 0; i < json_array_size(fields); i++) {
        d->field_count = i + 1;
        if (def_read_field(r, json_array_get(fields, i), i, d)) return -1;
    }
    if (def_read_key(r, p, d) || def_read_conflict(r, p, d) || def_read_tombstones(r, p, d) ||
        def_columns(r, p, "never_writes", true, &d->never_writes, &d->never_count))
        return -1;
    for (size_t i = 0; i < d->never_count; i++)
        if (pipeline_field_by_column(d, d->never_writes[i]) ||
            (d->app_column && strcmp(d->never_writes[i], d->app_column) == 0) ||
            (d->mark_column && strcmp(d->never_writes[i], d->mark_column) == 0))
            return def_fail(r, "never_writes", "%s is written by this pipeline", d->never_writes[i]);
    d->version_index = pipeline_field_index(d, d->version_field);
    /* Without an application, members[0] is never read (decode_with). */
    d->members[0] = d->app_member ? (jv_key_t){d->app_member, strlen(d->app_member)} : (jv_key_t){"", 0};
    d->member_count = 1;
    for (size_t i = 0; i < d->field_count; i++) {
        field_spec_t *fs = &d->fields[i];
        fs->slot = -1;
        if (fs->source != SOURCE_VALUE || fs->whole) continue;
        const char *top = fs->path_count ? fs->path[0] : fs->name;
        for (size_t m = 1; m < d->member_count && fs->slot < 0; m++)
            if (d->members[m].len == strlen(top) && memcmp(d->members[m].str, top, strlen(top)) == 0) fs->slot = (int)m;
        if (fs->slot < 0) {
            fs->slot = (int)d->member_count;
            d->members[d->member_count++] = (jv_key_t){top, strlen(top)};
        }
    }
    return 0;
}

bool topics_shared(const char *a, const char *b, char *name, size_t len)
{
    topic_list_t la, lb;
    char why[400];
    bool found = false;
    if (topic_list_parse(a, &la, why, sizeof why)) return false;
    if (topic_list_parse(b, &lb, why, sizeof why) == 0) {
        for (int i = 0; i < la.count && !found; i++)
            if (topic_list_index(&lb, la.name[i]) >= 0) found = snprintf(name, len, "%s", la.name[i]) >= 0;
        topic_list_free(&lb);
    }
    topic_list_free(&la);
    return found;
}

static int read_all(reader_t *r, json_t *root)
{
    static const char *const known[] = {"pipelines", NULL};
    if (!json_is_object(root)) return def_fail(r, NULL, "expected an object {\"pipelines\": [...]}");
    if (def_only_members(r, root, known)) return -1;
    json_t *list = json_object_get(root, "pipelines");
    if (!json_is_array(list) || json_array_size(list) == 0 || json_array_size(list) > PIPELINE_MAX)
        return def_fail(r, "pipelines", "expected an array of 1..%d pipelines", PIPELINE_MAX);
    for (size_t i = 0; i < json_array_size(list); i++) {
        pipeline_def_t *d = &registry[i];
        registry_count = (int)i + 1;
        d->id = i;
        d->version_index = -1;
        snprintf(r->where, sizeof r->where, "pipelines[%zu]", i);
        if (read_pipeline(r, json_array_get(list, i), d)) return -1;
        for (size_t j = 0; j < i; j++) {
            if (strcmp(registry[j].name, d->name) == 0) return def_fail(r, "name", "a second pipeline called %s", d->name);
            char shared[256];
            if (topics_shared(registry[j].default_topic, d->default_topic, shared, sizeof shared))
                return def_fail(r, "topic", "%s is a topic of pipeline %s too", shared, registry[j].name);
        }
    }
    return 0;
}

int pipelines_load(const char *path, char *err, size_t errlen)
{
    const char *source = path && *path ? path : "";
    if (registry_source && strcmp(registry_source, source) == 0) return 0;
    pipelines_free();
    json_error_t jerr;
    json_t *root = *source ? json_load_file(source, JSON_REJECT_DUPLICATES, &jerr)
                           : json_loads(pipelines_builtin_json, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        if (jerr.line > 0)
            snprintf(err, errlen, "%s:%d:%d: %s", *source ? source : "(built-in)", jerr.line, jerr.column, jerr.text);
        else
            snprintf(err, errlen, "%s", jerr.text);
        return -1;
    }
    reader_t r = {.err = err, .errlen = errlen, .where = ""};
    char why[1024];
    r.err = why;
    r.errlen = sizeof why;
    int rc = read_all(&r, root);
    json_decref(root);
    if (rc) {
        snprintf(err, errlen, "%s: %s", *source ? source : "(built-in)", why);
        pipelines_free();
        return -1;
    }
    registry_source = def_dup(source);
    return 0;
}

static void ensure_loaded(void)
{
    char err[1024];
    if (registry_source) return;
    if (pipelines_load(NULL, err, sizeof err)) {
        fprintf(stderr, "the built-in pipeline definitions do not load: %s\n", err);
        abort();
    }
}

int pipeline_count(void)
{
    ensure_loaded();
    return registry_count;
}

pipeline_def_t *pipeline_entry(pipeline_id_t id)
{
    ensure_loaded();
    if (id < 0 || id >= registry_count) abort(); /* a caller bug */
    return &registry[id];
}

const pipeline_def_t *pipeline_get(pipeline_id_t id) { return pipeline_entry(id); }

const pipeline_def_t *pipeline_find(const char *name, size_t len)
{
    ensure_loaded();
    for (int i = 0; i < registry_count; i++)
        if (strlen(registry[i].name) == len && memcmp(registry[i].name, name, len) == 0) return &registry[i];
    return NULL;
}

const char *pipeline_names(char *buf, size_t len)
{
    size_t used = 0;
    ensure_loaded();
    buf[0] = '\0';
    for (int i = 0; i < registry_count && used < len; i++) {
        int n = snprintf(buf + used, len - used, "%s%s", i ? ", " : "", registry[i].name);
        if (n < 0) break;
        used += (size_t)n;
    }
    return buf;
}

int pipeline_field_index(const pipeline_def_t *def, const char *name)
{
    if (!name) return -1;
    for (size_t i = 0; i < def->field_count; i++)
        if (strcmp(def->fields[i].name, name) == 0) return (int)i;
    return -1;
}

bool pipeline_reads_record_metadata(const pipeline_def_t *def)
{
    for (size_t i = 0; i < def->field_count; i++) {
        field_source_t s = def->fields[i].source;
        if (s == SOURCE_TIMESTAMP_TYPE || s == SOURCE_HEADERS || s == SOURCE_HEADER) return true;
    }
    return false;
}

bool pipeline_is_key_field(const pipeline_def_t *def, int index)
{
    for (size_t k = 0; k < def->key_count; k++)
        if (def->key_fields[k] == index) return true;
    return false;
}

char *pipeline_key_columns(const pipeline_def_t *def, const char *sep)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    if (!f) abort();
    if (def->key_includes_app) fputs(def->app_column, f);
    for (size_t k = 0; k < def->key_count; k++)
        fprintf(f, "%s%s", k || def->key_includes_app ? sep : "", def->fields[def->key_fields[k]].column);
    if (fclose(f) != 0 || !out) abort();
    return out;
}

const char *pipeline_kind_name(field_kind_t kind)
{
    static const char *const names[] = {
        [FIELD_STRING] = "string",     [FIELD_INTEGER] = "integer",     [FIELD_NUMBER] = "number",
        [FIELD_TIMESTAMP] = "timestamp", [FIELD_BOOLEAN] = "boolean",   [FIELD_UUID] = "uuid",
        [FIELD_HISTOGRAM] = "histogram", [FIELD_DECIMAL] = "decimal",   [FIELD_COUNTS] = "counts",
        [FIELD_TEXT] = "text",           [FIELD_JSON] = "json",         [FIELD_ARRAY] = "array",
    };
    return names[kind];
}
