#include "pg/catalog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg/db_internal.h"

/* The column kinds the decoder knows, by pg_type's name. */
static column_type_t column_type(const char *typname)
{
    static const struct {
        const char *name;
        column_type_t type;
    } known[] = {
        {"varchar", COLUMN_VARCHAR},       {"bpchar", COLUMN_CHAR},     {"text", COLUMN_TEXT},       {"int2", COLUMN_INT2},
        {"int4", COLUMN_INT4},             {"int8", COLUMN_INT8},       {"numeric", COLUMN_NUMERIC},
        {"float4", COLUMN_FLOAT4},         {"float8", COLUMN_FLOAT8},   {"bool", COLUMN_BOOL},
        {"uuid", COLUMN_UUID},             {"timestamptz", COLUMN_TIMESTAMPTZ}, {"jsonb", COLUMN_JSONB},
        {"date", COLUMN_TEXT_INPUT},       {"time", COLUMN_TEXT_INPUT}, {"timestamp", COLUMN_TEXT_INPUT},
        {"bytea", COLUMN_TEXT_INPUT},      {"json", COLUMN_JSON},
        {"_date", COLUMN_TEXT_ARRAY},      {"_time", COLUMN_TEXT_ARRAY}, {"_timestamp", COLUMN_TEXT_ARRAY},
        {"_bytea", COLUMN_TEXT_ARRAY},     {"_bpchar", COLUMN_TEXT_ARRAY}, {"_varchar", COLUMN_TEXT_ARRAY},
        {"_text", COLUMN_TEXT_ARRAY},      {"_json", COLUMN_JSON_ARRAY}, {"_jsonb", COLUMN_JSON_ARRAY},
        {"_int8", COLUMN_INT8_ARRAY},      {"_int4", COLUMN_INT4_ARRAY}, {"_int2", COLUMN_INT2_ARRAY},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(known[i].name, typname) == 0) return known[i].type;
    return COLUMN_OTHER;
}

void catalog_table_free(table_facts_t *t)
{
    for (size_t i = 0; i < t->column_count; i++) free(t->columns[i].default_sql);
    free(t->columns);
    for (size_t i = 0; i < t->unique_count; i++) free(t->unique_keys[i]);
    free(t->unique_keys);
    for (size_t i = 0; i < t->unusable_count; i++) {
        free(t->unusable_keys[i].name);
        free(t->unusable_keys[i].columns);
    }
    free(t->unusable_keys);
    for (size_t i = 0; i < t->foreign_count; i++) {
        free(t->foreign_keys[i].name);
        free(t->foreign_keys[i].columns);
    }
    free(t->foreign_keys);
    memset(t, 0, sizeof *t);
}

static char *dup(const char *s)
{
    char *d = strdup(s);
    if (!d) abort();
    return d;
}

static bool is_true(const PGresult *res, int row, int col) { return strcmp(PQgetvalue(res, row, col), "t") == 0; }

/* The table-level facts the write path adapts to, the UNIQUE indexes (those
 * ON CONFLICT can use, and those it cannot) and the foreign keys. */
static int read_table_rules(db_conn_t *conn, const char *const *params, table_facts_t *t, char *err, size_t errlen)
{
    PGresult *res = db_select(conn,
                              "SELECT c.relkind = 'p', c.relrowsecurity, current_user, "
                              "EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conrelid = c.oid AND k.condeferrable), "
                              "quote_ident(n.nspname) || '.' || quote_ident(c.relname) "
                              "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass($1)",
                              1, params, 0, err, errlen);
    if (!res) return -1;
    if (PQntuples(res) == 1) {
        t->partitioned = is_true(res, 0, 0);
        t->row_security = is_true(res, 0, 1);
        snprintf(t->role, sizeof t->role, "%s", PQgetvalue(res, 0, 2));
        t->deferrable = is_true(res, 0, 3);
        snprintf(t->table_sql, sizeof t->table_sql, "%s", PQgetvalue(res, 0, 4));
    }
    PQclear(res);
    res = db_select(conn,
                    "SELECT string_agg(a.attname, ',' ORDER BY k.ord), i.indexrelid::regclass::text, "
                    "i.indisvalid, i.indimmediate "
                    "FROM pg_index i CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) "
                    "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum "
                    "WHERE i.indrelid = to_regclass($1) AND i.indisunique AND i.indpred IS NULL "
                    "AND i.indexprs IS NULL GROUP BY i.indexrelid, i.indisvalid, i.indimmediate",
                    1, params, 0, err, errlen);
    if (!res) return -1;
    int n = PQntuples(res);
    t->unique_keys = calloc((size_t)n + 1, sizeof *t->unique_keys);
    t->unusable_keys = calloc((size_t)n + 1, sizeof *t->unusable_keys);
    if (!t->unique_keys || !t->unusable_keys) abort();
    for (int i = 0; i < n; i++) {
        bool valid = is_true(res, i, 2), immediate = is_true(res, i, 3);
        if (valid && immediate) {
            t->unique_keys[t->unique_count++] = dup(PQgetvalue(res, i, 0));
            continue;
        }
        unusable_key_t *u = &t->unusable_keys[t->unusable_count++];
        u->columns = dup(PQgetvalue(res, i, 0));
        u->name = dup(PQgetvalue(res, i, 1));
        u->deferrable = !immediate;
        u->invalid = !valid;
    }
    PQclear(res);
    res = db_select(conn,
                    "SELECT k.conname, (SELECT string_agg(a.attname, ',' ORDER BY c.ord) "
                    "FROM unnest(k.conkey) WITH ORDINALITY AS c(attnum, ord) "
                    "JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = c.attnum) "
                    "FROM pg_constraint k WHERE k.conrelid = to_regclass($1) AND k.contype = 'f' ORDER BY k.conname",
                    1, params, 0, err, errlen);
    if (!res) return -1;
    n = PQntuples(res);
    t->foreign_keys = calloc((size_t)n + 1, sizeof *t->foreign_keys);
    if (!t->foreign_keys) abort();
    for (int i = 0; i < n; i++)
        t->foreign_keys[i] = (foreign_key_t){dup(PQgetvalue(res, i, 0)), dup(PQgetvalue(res, i, 1))};
    t->foreign_count = (size_t)n;
    PQclear(res);
    return 0;
}

int catalog_read_table(db_conn_t *conn, const char *table, table_facts_t *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    const char *params[] = {table};
    /* A column's type is judged by its base type: a domain (of a domain...)
     * is bound as the built-in type it stands on, with that type's typmod,
     * and its NOT NULL and default count as the column's; its CHECKs are
     * PostgreSQL's to judge (a row it refuses is that row's dead letter).
     * Only a type of pg_catalog is known by its name: a user's type named
     * like a built-in one is not that type. */
    PGresult *res = db_select(conn,
                              "SELECT a.attname, format_type(a.atttypid, a.atttypmod), "
                              "CASE WHEN bt.typnamespace = 'pg_catalog'::regnamespace THEN bt.typname END, b.typmod, "
                              "a.attnotnull OR b.not_null, "
                              "a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> '' OR b.default_sql IS NOT NULL, "
                              "a.attgenerated <> '', a.attidentity = 'a', "
                              "has_column_privilege(a.attrelid, a.attnum, 'INSERT'), "
                              "has_column_privilege(a.attrelid, a.attnum, 'UPDATE'), "
                              "CASE WHEN a.attidentity = 'd' THEN format('nextval(%L::regclass)', "
                              "pg_get_serial_sequence(a.attrelid::regclass::text, a.attname)) "
                              "WHEN a.attgenerated = '' THEN coalesce(pg_get_expr(ad.adbin, ad.adrelid), b.default_sql) END "
                              "FROM pg_attribute a "
                              "LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum "
                              "CROSS JOIN LATERAL ("
                              "  WITH RECURSIVE d(oid, typmod, not_null, default_sql, depth) AS ("
                              "    SELECT a.atttypid, a.atttypmod, false, NULL::text COLLATE \"C\", 0"
                              "    UNION ALL SELECT t.typbasetype, CASE WHEN d.typmod >= 0 THEN d.typmod ELSE t.typtypmod END,"
                              "      d.not_null OR t.typnotnull, coalesce(d.default_sql, t.typdefault), d.depth + 1"
                              "    FROM d JOIN pg_type t ON t.oid = d.oid WHERE t.typtype = 'd')"
                              "  SELECT * FROM d ORDER BY depth DESC LIMIT 1) b "
                              "JOIN pg_type bt ON bt.oid = b.oid "
                              "WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped "
                              "ORDER BY a.attnum",
                              1, params, 0, err, errlen);
    if (!res) return -1;
    int n = PQntuples(res);
    t->exists = n > 0;
    t->columns = calloc((size_t)n + 1, sizeof *t->columns);
    if (!t->columns) abort();
    for (int i = 0; i < n; i++) {
        column_fact_t *c = &t->columns[i];
        int typmod = atoi(PQgetvalue(res, i, 3));
        snprintf(c->name, sizeof c->name, "%s", PQgetvalue(res, i, 0));
        snprintf(c->type, sizeof c->type, "%s", PQgetvalue(res, i, 1));
        c->kind = PQgetisnull(res, i, 2) ? COLUMN_OTHER : column_type(PQgetvalue(res, i, 2));
        c->length = c->precision = c->scale = -1;
        /* typmod: varchar's n + 4; numeric's ((p << 16) | s) + 4, the
         * scale in 11 bits with its sign (PostgreSQL 15 allows -1000..1000);
         * char's n + 4; -1 for none. */
        if ((c->kind == COLUMN_VARCHAR || c->kind == COLUMN_CHAR) && typmod >= 4) c->length = typmod - 4;
        if (c->kind == COLUMN_NUMERIC && typmod >= 4) {
            c->precision = ((typmod - 4) >> 16) & 0xffff;
            c->scale = (((typmod - 4) & 0x7ff) ^ 1024) - 1024;
        }
        c->not_null = strcmp(PQgetvalue(res, i, 4), "t") == 0;
        c->has_default = strcmp(PQgetvalue(res, i, 5), "t") == 0;
        c->generated = is_true(res, i, 6);
        c->identity_always = is_true(res, i, 7);
        c->insert_denied = !is_true(res, i, 8);
        c->update_denied = !is_true(res, i, 9);
        if (!PQgetisnull(res, i, 10)) c->default_sql = dup(PQgetvalue(res, i, 10));
    }
    t->column_count = (size_t)n;
    PQclear(res);
    if (!t->exists) return 0;
    if (read_table_rules(conn, params, t, err, errlen)) {
        catalog_table_free(t);
        return -1;
    }
    return 0;
}

int catalog_bind_pipeline(db_conn_t *conn, pipeline_id_t id, char *err, size_t errlen)
{
    table_facts_t t;
    const pipeline_def_t *def = pipeline_get(id);
    if (def->app_member) {
        if (catalog_read_table(conn, def->lookup_table_sql, &t, err, errlen)) return -1;
        int rc = pipeline_bind_lookup(id, &t, err, errlen);
        catalog_table_free(&t);
        if (rc) return 1;
    }
    if (catalog_read_table(conn, pipeline_get(id)->table_sql, &t, err, errlen)) return -1;
    int rc = pipeline_bind(id, &t, err, errlen);
    catalog_table_free(&t);
    return rc ? 1 : 0;
}

int catalog_bind_pipelines(db_conn_t *conn, const bool *enabled, char *err, size_t errlen)
{
    for (int i = 0; i < pipeline_count(); i++) {
        int rc = enabled && !enabled[i] ? 0 : catalog_bind_pipeline(conn, i, err, errlen);
        if (rc) return rc;
    }
    return 0;
}
