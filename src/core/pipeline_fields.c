/* A definition's fields and rules as its file writes them (DESIGN.md:
 * Pipelines are declared): each field's source, member or path, column and
 * checks; the natural key; the conflict rule; the tombstone rule. */
#include "core/pipeline.h"
#include "core/pipeline_internal.h"
#include "core/pipeline_reader.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The names of the record's own fields ("record": ...), by source. */
static const char *const source_names[] = {
    [SOURCE_VALUE] = "value",         [SOURCE_KEY] = "key",
    [SOURCE_TOPIC] = "topic",         [SOURCE_PARTITION] = "partition",
    [SOURCE_OFFSET] = "offset",       [SOURCE_TIMESTAMP] = "timestamp",
    [SOURCE_TIMESTAMP_TYPE] = "timestamp_type", [SOURCE_HEADERS] = "headers",
    [SOURCE_HEADER] = "header",
};

/* A field's JSON Pointer (RFC 6901, DESIGN.md: Member paths), fs->name,
 * into its segments: "" is the whole value; otherwise "/" and each
 * segment after it, "~1" standing for "/" and "~0" for "~". */
static int read_path(reader_t *r, field_spec_t *fs)
{
    const char *p = fs->name;
    if (!*p) {
        fs->whole = true;
        return 0;
    }
    if (*p != '/')
        return def_fail(r, "path", "\"%s\" is not a JSON Pointer: it starts with \"/\" (\"/customer/email\", "
                               "\"/lines/0/sku\"), or is \"\" for the whole value", p);
    size_t n = 0;
    for (const char *c = p; *c; c++) n += *c == '/';
    fs->path = calloc(n, sizeof *fs->path);
    if (!fs->path) abort();
    for (const char *c = p + 1;; c++) {
        size_t len = strcspn(c, "/");
        char *seg = malloc(len + 1), *o = seg;
        if (!seg) abort();
        fs->path[fs->path_count++] = seg;
        for (size_t i = 0; i < len; i++) {
            if (c[i] != '~') {
                *o++ = c[i];
            } else if (i + 1 < len && (c[i + 1] == '0' || c[i + 1] == '1')) {
                *o++ = c[++i] == '0' ? '~' : '/';
            } else {
                *o = '\0';
                return def_fail(r, "path", "\"%s\": \"~\" stands for itself as \"~0\" and for \"/\" as \"~1\"", p);
            }
        }
        *o = '\0';
        c += len;
        if (!*c) break;
    }
    return 0;
}

/* A field's source: "record" absent or "value" is a member of the value;
 * anything else is one of the record's own fields, which has no member and
 * needs a "column" ("header" also the header's "header" name). Its name in
 * messages is "record <source>" ("record header <name>"). */
static int read_source(reader_t *r, json_t *f, field_spec_t *fs)
{
    json_t *v = json_object_get(f, "record");
    const char *s = json_is_string(v) ? json_string_value(v) : NULL;
    if (v && !s) return def_fail(r, "record", "expected a string");
    for (size_t k = 0; s && k < sizeof source_names / sizeof *source_names; k++)
        if (source_names[k] && strcmp(s, source_names[k]) == 0) fs->source = (field_source_t)k;
    if (s && fs->source == SOURCE_VALUE && strcmp(s, "value") != 0)
        return def_fail(r, "record", "\"%s\" is none of value, key, topic, partition, offset, timestamp, "
                                 "timestamp_type, headers, header", s);
    if (fs->source == SOURCE_VALUE) {
        if (json_object_get(f, "header")) return def_fail(r, "header", "only a field of \"record\": \"header\" names one");
        if (json_object_get(f, "path")) {
            if (json_object_get(f, "member")) return def_fail(r, "path", "a field has a \"member\" or a \"path\", not both");
            json_t *path = json_object_get(f, "path");
            if (!json_is_string(path)) return def_fail(r, "path", "expected a JSON Pointer (a string)");
            fs->name = def_dup(json_string_value(path));
            return read_path(r, fs);
        }
        return def_str(r, f, "member", true, &fs->name);
    }
    if (json_object_get(f, "path")) return def_fail(r, "path", "only a member of the value has a path");
    if (fs->source == SOURCE_KEY && json_object_get(f, "member")) {
        /* A member of the key, a JSON object: named "record key.MEMBER". */
        fs->source = SOURCE_KEY_MEMBER;
        if (def_str(r, f, "member", true, &fs->header)) return -1;
        if (json_object_get(f, "header")) return def_fail(r, "header", "only a field of \"record\": \"header\" names one");
        if (asprintf(&fs->name, "record key.%s", fs->header) < 0) abort();
        return 0;
    }
    if (json_object_get(f, "member"))
        return def_fail(r, "member", "a field of the record's %s has no member (it is not in the value)", s);
    if (!json_object_get(f, "column")) return def_fail(r, "column", "required for a field of the record's %s", s);
    if (fs->source == SOURCE_HEADER) {
        if (def_str(r, f, "header", true, &fs->header)) return -1;
        if (asprintf(&fs->name, "record header %s", fs->header) < 0) abort();
        return 0;
    }
    if (json_object_get(f, "header")) return def_fail(r, "header", "only a field of \"record\": \"header\" names one");
    if (asprintf(&fs->name, "record %s", s) < 0) abort();
    return 0;
}

int def_read_field(reader_t *r, json_t *f, size_t i, pipeline_def_t *d)
{
    static const char *const known[] = {"member", "path", "record", "header", "column", "required", "kind",
                                        "min",    "max",  "min_length", NULL};
    field_spec_t *fs = &d->fields[i];
    size_t at = strlen(r->where);
    char member[32];
    snprintf(member, sizeof member, "fields[%zu]", i);
    if (!json_is_object(f)) return def_fail(r, member, "expected an object");
    json_t *name = json_object_get(f, "member"), *record = json_object_get(f, "record");
    if (!name) name = json_object_get(f, "path");
    snprintf(r->where + at, sizeof r->where - at, ".%s (%s)", member,
             json_is_string(name)     ? json_string_value(name)
             : json_is_string(record) ? json_string_value(record)
                                      : "?");
    if (def_only_members(r, f, known) || read_source(r, f, fs) || def_column(r, f, "column", false, &fs->column))
        return -1;
    if (!fs->column) {
        /* The member's name (of the value, or of the key); a path's last
         * segment. */
        if (fs->whole) return def_fail(r, "column", "required for the whole value (\"path\": \"\")");
        const char *of = fs->source == SOURCE_KEY_MEMBER ? fs->header
                         : fs->path_count        ? fs->path[fs->path_count - 1]
                                                 : fs->name;
        if (!def_identifier(of))
            return def_fail(r, "member", "\"%s\" is not a column name (" NAME_RULE "): give the field a \"column\"", of);
        fs->column = def_dup(of);
    }
    json_t *v;
    if ((v = json_object_get(f, "required"))) {
        if (!json_is_boolean(v)) return def_fail(r, "required", "expected true or false");
        fs->required = json_is_true(v);
    }
    if ((v = json_object_get(f, "kind"))) {
        const char *k = json_is_string(v) ? json_string_value(v) : "";
        fs->declared.kind_set = true;
        if (strcmp(k, "histogram") == 0)
            fs->declared.kind = FIELD_HISTOGRAM;
        else if (strcmp(k, "counts") == 0)
            fs->declared.kind = FIELD_COUNTS;
        else
            return def_fail(r, "kind", "expected \"histogram\" (an array of 5 integer counts) or \"counts\" "
                                   "(an object of name -> integer count); any other kind comes from the column's type");
    }
    if ((v = json_object_get(f, "min"))) {
        if (!json_is_number(v)) return def_fail(r, "min", "expected a number");
        fs->declared.min_set = true;
        fs->declared.min = json_number_value(v);
    }
    if ((v = json_object_get(f, "max"))) {
        if (!json_is_number(v)) return def_fail(r, "max", "expected a number");
        fs->declared.max_set = true;
        fs->declared.max = json_number_value(v);
    }
    if (fs->declared.min_set && fs->declared.max_set && fs->declared.min > fs->declared.max)
        return def_fail(r, "max", "below min");
    if ((v = json_object_get(f, "min_length"))) {
        if (!json_is_integer(v) || json_integer_value(v) < 0) return def_fail(r, "min_length", "expected an integer >= 0");
        fs->declared.min_length = json_integer_value(v);
    }
    for (size_t j = 0; j < i; j++) {
        if (strcmp(d->fields[j].name, fs->name) == 0) return def_fail(r, "member", "\"%s\" is declared twice", fs->name);
        if (strcmp(d->fields[j].column, fs->column) == 0)
            return def_fail(r, "column", "%s is filled by two fields", fs->column);
    }
    if (d->app_member && strcmp(fs->name, d->app_member) == 0)
        return def_fail(r, "member", "\"%s\" is the application's member", fs->name);
    if (d->app_column && strcmp(fs->column, d->app_column) == 0)
        return def_fail(r, "column", "%s is the application's column", fs->column);
    r->where[at] = '\0';
    return 0;
}

int def_read_key(reader_t *r, json_t *p, pipeline_def_t *d)
{
    char **key = NULL;
    size_t n = 0;
    int rc = def_columns(r, p, "key", false, &key, &n);
    if (rc == 0 && n == 0) rc = def_fail(r, "key", "required: the natural key's columns");
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const field_spec_t *f = pipeline_field_by_column(d, key[i]);
        if (d->app_column && strcmp(key[i], d->app_column) == 0)
            d->key_includes_app = true;
        else if (!f)
            rc = def_fail(r, "key", d->app_column ? "%s is neither the application's column nor a field's"
                                              : "%s is not a field's column", key[i]);
        else if (d->key_count == PIPELINE_MAX_KEY)
            rc = def_fail(r, "key", "at most %d fields' columns", PIPELINE_MAX_KEY);
        else
            d->key_fields[d->key_count++] = (int)(f - d->fields);
        if (rc == 0 && f && !f->required) rc = def_fail(r, "key", "%s is a key column: its field must be required", key[i]);
    }
    if (rc == 0 && d->key_count == 0) rc = def_fail(r, "key", "needs a field's column");
    def_free_list(key, n);
    return rc;
}

int def_read_conflict(reader_t *r, json_t *p, pipeline_def_t *d)
{
    json_t *c = json_object_get(p, "on_conflict");
    if (!c) return def_fail(r, "on_conflict", "required: \"nothing\" or {\"update\": [...], \"when_newer\": \"column\"}");
    if (json_is_string(c) && strcmp(json_string_value(c), "nothing") == 0) return 0;
    static const char *const known[] = {"update", "when_newer", NULL};
    if (!json_is_object(c))
        return def_fail(r, "on_conflict", "expected \"nothing\" or {\"update\": [...], \"when_newer\": \"column\"}");
    size_t at = strlen(r->where);
    snprintf(r->where + at, sizeof r->where - at, ".on_conflict");
    char *version = NULL;
    if (def_only_members(r, c, known) || def_columns(r, c, "update", false, &d->update_columns, &d->update_count) ||
        def_column(r, c, "when_newer", true, &version))
        return free(version), -1;
    int rc = 0;
    const field_spec_t *vf = pipeline_field_by_column(d, version);
    if (d->update_count == 0)
        rc = def_fail(r, "update", "required: the columns a newer observation updates");
    else if (!vf)
        rc = def_fail(r, "when_newer", "%s is not a field's column", version);
    else if (!vf->required)
        rc = def_fail(r, "when_newer", "%s orders observations: its field must be required", version);
    else
        d->version_field = def_dup(vf->name);
    for (size_t i = 0; rc == 0 && i < d->update_count; i++) {
        const field_spec_t *f = pipeline_field_by_column(d, d->update_columns[i]);
        if (!f)
            rc = def_fail(r, "update", "%s is not a field's column", d->update_columns[i]);
        else if (pipeline_is_key_field(d, (int)(f - d->fields))) {
            char *key = pipeline_key_columns(d, ", ");
            rc = def_fail(r, "update", "%s is the natural key (%s)", d->update_columns[i], key);
            free(key);
        }
    }
    free(version);
    r->where[at] = '\0';
    return rc;
}

/* "tombstones": "dead_letter" (the default), "delete", or {"mark": column}.
 * A rule other than the dead letter needs a key the record alone gives. */
int def_read_tombstones(reader_t *r, json_t *p, pipeline_def_t *d)
{
    static const char *const known[] = {"mark", NULL};
    json_t *v = json_object_get(p, "tombstones");
    const char *rule = json_is_string(v) ? json_string_value(v) : "";
    if (!v || strcmp(rule, "dead_letter") == 0) return 0;
    if (strcmp(rule, "delete") == 0) {
        d->tombstones = TOMBSTONE_DELETE;
    } else if (json_is_object(v)) {
        size_t at = strlen(r->where);
        snprintf(r->where + at, sizeof r->where - at, ".tombstones");
        if (def_only_members(r, v, known) || def_column(r, v, "mark", true, &d->mark_column)) return -1;
        r->where[at] = '\0';
        d->tombstones = TOMBSTONE_MARK;
        if (pipeline_field_by_column(d, d->mark_column) || (d->app_column && strcmp(d->mark_column, d->app_column) == 0))
            return def_fail(r, "tombstones", "the mark column %s is written by a field", d->mark_column);
        if (!d->update_count)
            return def_fail(r, "tombstones", "a marked row comes back with a newer value, which sets the mark to NULL: "
                                         "the mark needs an \"on_conflict\" update rule (or \"tombstones\": "
                                         "\"delete\")");
    } else {
        return def_fail(r, "tombstones", "expected \"dead_letter\", \"delete\" or {\"mark\": \"column\"}");
    }
    if (d->key_includes_app)
        return def_fail(r, "tombstones", "a tombstone has no value, so no application: the natural key must not hold "
                                     "the application's column %s", d->app_column);
    for (size_t k = 0; k < d->key_count; k++)
        if (d->fields[d->key_fields[k]].source == SOURCE_VALUE)
            return def_fail(r, "tombstones", "a tombstone has no value: the natural key's column %s must come from the "
                                         "record (\"record\": \"key\", ...), not from the member %s",
                        d->fields[d->key_fields[k]].column, d->fields[d->key_fields[k]].name);
    return 0;
}
