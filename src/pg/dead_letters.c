#include "pg/dead_letters.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/timestamp.h"
#include "pg/db_internal.h"

/* Payloads over 64 KiB are truncated in dead_letter_events; the truncation
 * is stated in error_detail and payload_size keeps the original size. */
#define DEAD_LETTER_MAX_PAYLOAD 65536
#define DEAD_LETTER_PARAMS 9
/* A statement has at most 65,535 bind parameters. */
#define DEAD_LETTER_ROWS_PER_STATEMENT (65535 / DEAD_LETTER_PARAMS)

/* Ids per statement of resolve --type and purge: each chunk commits on its
 * own, so no statement holds locks on, or writes WAL for, months of dead
 * letters at once (DESIGN.md: Resolving dead letters). */
#define DEAD_LETTER_CHUNK 10000

/* Timestamps printed in UTC whatever the server's or session's time zone. */
#define SQL_UTC(col) "to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) abort();
    return p;
}

/* A column's text, NULL for SQL null. */
static const char *value_or_null(const PGresult *res, int row, int col)
{
    return PQgetisnull(res, row, col) ? NULL : PQgetvalue(res, row, col);
}

/* ------------------------------------------------------------------------ */
/* The store's insert. */

/* Mark the entries of one statement's rows that the database inserted
 * (RETURNING partition, kafka_offset): `idx` holds the statement's k entry
 * indexes. The rows come back in the order they were sent, so the search
 * resumes where the last match was. */
static void mark_inserted(batch_t *b, const size_t *idx, size_t k, const PGresult *res)
{
    size_t cursor = 0;
    for (int row = 0; row < PQntuples(res); row++) {
        int32_t partition = (int32_t)strtol(PQgetvalue(res, row, 0), NULL, 10);
        int64_t offset = strtoll(PQgetvalue(res, row, 1), NULL, 10);
        for (size_t n = 0; n < k; n++) {
            size_t j = (cursor + n) % k;
            entry_t *e = &b->entries[idx[j]];
            const record_t *r = &b->records[idx[j]];
            if (!e->dead_letter_new && r->partition == partition && r->offset == offset) {
                e->dead_letter_new = true;
                cursor = (j + 1) % k;
                break;
            }
        }
    }
}

int dead_letters_unresolved(db_conn_t *conn, int64_t deadline_ms, const char *topic, int64_t *counts, size_t n,
                            char *err, size_t errlen, error_class_t *cls)
{
    const char *params[1] = {topic};
    for (size_t i = 0; i < n; i++) counts[i] = 0;
    PGresult *res = db_query(conn,
                             "SELECT error_type, count(*) FROM dead_letter_events "
                             "WHERE topic = ANY(string_to_array($1, ',')) AND resolved_at IS NULL GROUP BY error_type",
                             1, params, NULL, NULL, deadline_ms, err, errlen, cls);
    if (!res) return -1;
    for (int row = 0; row < PQntuples(res); row++) {
        int i = decode_error_type_index(PQgetvalue(res, row, 0));
        counts[i >= 0 && (size_t)i < n - 1 ? (size_t)i : n - 1] += strtoll(PQgetvalue(res, row, 1), NULL, 10);
    }
    PQclear(res);
    return 0;
}

int dead_letters_write(db_conn_t *conn, int64_t deadline_ms, batch_t *b, size_t *written, char *err,
                       size_t errlen, error_class_t *cls)
{
    size_t total = 0;
    for (size_t i = 0; i < b->count; i++) {
        b->entries[i].dead_letter_new = false;
        total += b->entries[i].state == ENTRY_REJECTED;
    }
    *written = total;
    if (total == 0) return 0;

    size_t rows = total < DEAD_LETTER_ROWS_PER_STATEMENT ? total : DEAD_LETTER_ROWS_PER_STATEMENT;
    const char **values = calloc(rows * DEAD_LETTER_PARAMS, sizeof *values);
    int *lengths = calloc(rows * DEAD_LETTER_PARAMS, sizeof *lengths);
    int *formats = calloc(rows * DEAD_LETTER_PARAMS, sizeof *formats);
    char (*text)[4][40] = calloc(rows, sizeof *text);
    char(*details)[sizeof(((rejection_t *)0)->detail) + 96] = calloc(rows, sizeof *details);
    size_t *idx = calloc(rows, sizeof *idx);
    char *sql = NULL;
    size_t sql_len = 0;
    int rc = 0;
    if (!values || !lengths || !formats || !text || !details || !idx) abort();

    size_t i = 0;
    while (i < b->count && rc == 0) {
        size_t k = 0;
        FILE *f = open_memstream(&sql, &sql_len);
        if (!f) abort();
        fputs("INSERT INTO dead_letter_events (topic, partition, kafka_offset, kafka_timestamp, "
              "message_key, payload, payload_size, error_type, error_detail) VALUES ",
              f);
        for (; i < b->count && k < rows; i++) {
            const entry_t *e = &b->entries[i];
            const record_t *r = &b->records[i];
            if (e->state != ENTRY_REJECTED) continue;
            idx[k] = i;
            size_t p = k * DEAD_LETTER_PARAMS;
            size_t payload_len = r->value ? r->value_len : 0;
            size_t stored = payload_len > DEAD_LETTER_MAX_PAYLOAD ? DEAD_LETTER_MAX_PAYLOAD : payload_len;
            snprintf(text[k][0], sizeof text[k][0], "%d", r->partition);
            snprintf(text[k][1], sizeof text[k][1], "%lld", (long long)r->offset);
            snprintf(text[k][2], sizeof text[k][2], "%zu", payload_len);
            /* Any int64 may come from a producer: outside what the column
             * can hold, the dead letter keeps no timestamp rather than fail. */
            bool has_ts = timestamp_format_kafka_ms(r->timestamp_ms, text[k][3]) == 0;
            if (stored < payload_len)
                snprintf(details[k], sizeof details[k], "%s (payload truncated to %zu of %zu bytes)",
                         e->rejection.detail, stored, payload_len);
            else
                snprintf(details[k], sizeof details[k], "%s", e->rejection.detail);
            values[p + 0] = r->topic;
            values[p + 1] = text[k][0];
            values[p + 2] = text[k][1];
            values[p + 3] = has_ts ? text[k][3] : NULL;
            /* bytea in binary format: the bytes exactly, invalid UTF-8 too. */
            values[p + 4] = r->key;
            lengths[p + 4] = (int)r->key_len;
            formats[p + 4] = 1;
            values[p + 5] = r->value ? r->value : "";
            lengths[p + 5] = (int)stored;
            formats[p + 5] = 1;
            values[p + 6] = text[k][2];
            values[p + 7] = e->rejection.error_type;
            values[p + 8] = details[k];
            fprintf(f, "%s($%zu, $%zu, $%zu, $%zu, $%zu, $%zu, $%zu, $%zu, $%zu)", k ? ", " : "", p + 1,
                    p + 2, p + 3, p + 4, p + 5, p + 6, p + 7, p + 8, p + 9);
            k++;
        }
        /* A record is its coordinates and what it holds (record_digest,
         * computed by the database from the row: migration 0009): a
         * redelivery adds nothing, another record at the same coordinates
         * (a topic recreated) is kept too, and only the rows inserted are
         * counted. */
        fputs(" ON CONFLICT (topic, partition, kafka_offset, record_digest) DO NOTHING"
              " RETURNING partition, kafka_offset",
              f);
        if (fclose(f) != 0 || !sql) abort();
        if (k == 0) break;
        char why[1024];
        PGresult *res = db_query(conn, sql, (int)(k * DEAD_LETTER_PARAMS), values, lengths, formats,
                                 deadline_ms, why, sizeof why, cls);
        if (!res) {
            snprintf(err, errlen, "writing dead letters: %s", why);
            /* A dead letter the database refuses is not a record to isolate:
             * the batch must not be committed without it. */
            if (*cls == ERROR_CLASS_DATA) *cls = ERROR_CLASS_FATAL;
            rc = -1;
        } else {
            mark_inserted(b, idx, k, res);
            PQclear(res);
        }
        free(sql);
        sql = NULL;
    }
    free(sql);
    free(idx);
    free(values);
    free(lengths);
    free(formats);
    free(text);
    free(details);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* The commands' reads. */

int dead_letters_resolvable(db_conn_t *conn, char *err, size_t errlen)
{
    PGresult *res = db_select(conn,
                              "SELECT count(*) FROM pg_attribute "
                              "WHERE attrelid = to_regclass('dead_letter_events') AND NOT attisdropped "
                              "AND attname IN ('resolved_at', 'resolution', 'resolution_kind', 'resolved_by')",
                              0, NULL, 0, err, errlen);
    if (!res) return -1;
    int current = strcmp(PQgetvalue(res, 0, 0), "4") == 0;
    PQclear(res);
    return current;
}

int dead_letters_list(db_conn_t *conn, const char *topic, const char *type, long long limit,
                      bool unresolved_only, dead_letter_list_t *out, char *err, size_t errlen)
{
    char limit_text[24];
    snprintf(limit_text, sizeof limit_text, "%lld", limit);
    const char *params[4] = {topic, type, limit_text, unresolved_only ? "t" : "f"};
    PGresult **results = xcalloc(2, sizeof *results);

    memset(out, 0, sizeof *out);
    out->results = results;
    results[0] = db_select(conn,
                           "SELECT topic, error_type, count(*) FILTER (WHERE resolved_at IS NULL),"
                           " count(*) FILTER (WHERE resolved_at IS NOT NULL), " SQL_UTC("max(created_at)")
                           " FROM dead_letter_events"
                           " WHERE ($1::text IS NULL OR topic = ANY(string_to_array($1, ','))) AND ($2::text IS NULL OR error_type = $2)"
                           " GROUP BY topic, error_type ORDER BY topic, error_type",
                           2, params, 0, err, errlen);
    if (!results[0]) return -1;
    results[1] = db_select(conn,
                           "SELECT id, topic, partition, kafka_offset, error_type, payload_size,"
                           " octet_length(payload), resolved_at IS NOT NULL, " SQL_UTC("created_at") ", error_detail, "
                           SQL_UTC("resolved_at") ", resolution_kind, resolved_by, resolution"
                           " FROM dead_letter_events"
                           " WHERE ($1::text IS NULL OR topic = ANY(string_to_array($1, ','))) AND ($2::text IS NULL OR error_type = $2)"
                           " AND NOT ($4::boolean AND resolved_at IS NOT NULL)"
                           " ORDER BY id DESC LIMIT $3::bigint",
                           4, params, 0, err, errlen);
    if (!results[1]) return -1;

    const PGresult *c = results[0], *r = results[1];
    out->count_n = (size_t)PQntuples(c);
    out->counts = xcalloc(out->count_n, sizeof *out->counts);
    for (int i = 0; i < PQntuples(c); i++)
        out->counts[i] = (dead_letter_count_t){
            .topic = PQgetvalue(c, i, 0),
            .error_type = PQgetvalue(c, i, 1),
            .unresolved = strtoll(PQgetvalue(c, i, 2), NULL, 10),
            .resolved = strtoll(PQgetvalue(c, i, 3), NULL, 10),
            .newest = PQgetvalue(c, i, 4),
        };
    out->row_n = (size_t)PQntuples(r);
    out->rows = xcalloc(out->row_n, sizeof *out->rows);
    for (int i = 0; i < PQntuples(r); i++)
        out->rows[i] = (dead_letter_row_t){
            .id = PQgetvalue(r, i, 0),
            .topic = PQgetvalue(r, i, 1),
            .partition = PQgetvalue(r, i, 2),
            .offset = PQgetvalue(r, i, 3),
            .error_type = PQgetvalue(r, i, 4),
            .payload_size = strtoll(PQgetvalue(r, i, 5), NULL, 10),
            .stored_bytes = strtoll(PQgetvalue(r, i, 6), NULL, 10),
            .resolved = PQgetvalue(r, i, 7)[0] == 't',
            .created_at = PQgetvalue(r, i, 8),
            .detail = PQgetvalue(r, i, 9),
            .resolved_at = value_or_null(r, i, 10),
            .resolution_kind = value_or_null(r, i, 11),
            .resolved_by = value_or_null(r, i, 12),
            .resolution = value_or_null(r, i, 13),
        };
    return 0;
}

void dead_letters_list_free(dead_letter_list_t *l)
{
    PGresult **results = l->results;
    if (results) {
        PQclear(results[0]);
        PQclear(results[1]);
    }
    free(results);
    free(l->counts);
    free(l->rows);
    memset(l, 0, sizeof *l);
}

int dead_letters_get(db_conn_t *conn, const char *id, dead_letter_t *out, char *err, size_t errlen)
{
    const char *params[1] = {id};
    memset(out, 0, sizeof *out);
    /* Binary results: bytea arrives as its exact bytes; every other column is
     * text (a text column's binary form is its bytes). */
    PGresult *res = db_select(conn,
                              "SELECT id::text, topic::text, partition::text, kafka_offset::text, "
                              SQL_UTC("kafka_timestamp") ", message_key, payload, payload_size::text,"
                              " error_type::text, error_detail, "
                              SQL_UTC("created_at") ", " SQL_UTC("resolved_at") ", resolution,"
                              " resolution_kind, resolved_by"
                              " FROM dead_letter_events WHERE id = $1::bigint",
                              1, params, 1, err, errlen);
    if (!res) return -1;
    out->result = res;
    if (PQntuples(res) == 0) return 0;
    out->id = PQgetvalue(res, 0, 0);
    out->topic = PQgetvalue(res, 0, 1);
    out->partition = PQgetvalue(res, 0, 2);
    out->kafka_offset = PQgetvalue(res, 0, 3);
    out->kafka_timestamp = value_or_null(res, 0, 4);
    out->key = value_or_null(res, 0, 5);
    out->key_len = (size_t)PQgetlength(res, 0, 5);
    out->payload = value_or_null(res, 0, 6);
    out->payload_len = (size_t)PQgetlength(res, 0, 6);
    out->payload_size = strtoll(PQgetvalue(res, 0, 7), NULL, 10);
    out->error_type = PQgetvalue(res, 0, 8);
    out->error_detail = value_or_null(res, 0, 9);
    out->created_at = PQgetvalue(res, 0, 10);
    out->resolved_at = value_or_null(res, 0, 11);
    out->resolution = value_or_null(res, 0, 12);
    out->resolution_kind = value_or_null(res, 0, 13);
    out->resolved_by = value_or_null(res, 0, 14);
    return 1;
}

void dead_letters_get_free(dead_letter_t *d)
{
    PQclear(d->result);
    memset(d, 0, sizeof *d);
}

/* ------------------------------------------------------------------------ */
/* Redrive. */

int dead_letters_fetch(db_conn_t *conn, const char *topic, const char *type, int64_t after, int limit,
                       stored_letters_t *out, char *err, size_t errlen)
{
    char after_text[24], limit_text[24];
    snprintf(after_text, sizeof after_text, "%" PRId64, after);
    snprintf(limit_text, sizeof limit_text, "%d", limit);
    const char *params[4] = {topic, type, after_text, limit_text};
    memset(out, 0, sizeof *out);
    /* Binary results: bytea as its exact bytes; the other columns are text.
     * ORDER BY names the table's id: a bare `id` would be the output column
     * id::text, sorted as text (1, 10, 100, 1000, 11, ...), and the pages,
     * which continue after the last id, would skip and repeat dead letters.
     * The timestamp is truncated to the millisecond, as record_digest
     * truncates it: a record that still fails is then written back with the
     * digest of its dead letter, and adds no row. */
    PGresult *res = db_select(conn,
                              "SELECT id::text, partition::text, kafka_offset::text,"
                              " COALESCE(floor(extract(epoch FROM kafka_timestamp) * 1000)::bigint, -1)::text,"
                              " message_key, payload, payload_size::text, octet_length(payload)::text, topic::text"
                              " FROM dead_letter_events"
                              " WHERE topic = ANY(string_to_array($1, ',')) AND resolved_at IS NULL AND ($2::text IS NULL OR error_type = $2)"
                              " AND id > $3::bigint ORDER BY dead_letter_events.id LIMIT $4::int",
                              4, params, 1, err, errlen);
    if (!res) return -1;
    out->result = res;
    out->n = (size_t)PQntuples(res);
    out->letters = xcalloc(out->n, sizeof *out->letters);
    for (int r = 0; r < PQntuples(res); r++) {
        stored_letter_t *l = &out->letters[r];
        record_t *rec = &l->record;
        l->id = strtoll(PQgetvalue(res, r, 0), NULL, 10);
        l->payload_size = strtoll(PQgetvalue(res, r, 6), NULL, 10);
        l->stored_bytes = strtoll(PQgetvalue(res, r, 7), NULL, 10);
        rec->topic = PQgetvalue(res, r, 8);
        rec->partition = (int32_t)strtol(PQgetvalue(res, r, 1), NULL, 10);
        rec->offset = strtoll(PQgetvalue(res, r, 2), NULL, 10);
        rec->timestamp_ms = strtoll(PQgetvalue(res, r, 3), NULL, 10);
        rec->key = value_or_null(res, r, 4);
        rec->key_len = rec->key ? (size_t)PQgetlength(res, r, 4) : 0;
        rec->value = PQgetvalue(res, r, 5);
        rec->value_len = (size_t)PQgetlength(res, r, 5);
    }
    return 0;
}

void dead_letters_fetch_free(stored_letters_t *l)
{
    PQclear(l->result);
    free(l->letters);
    memset(l, 0, sizeof *l);
}

/* Run one UPDATE with text parameters within the batch's deadline; *changed
 * gets the rows it touched. */
static int exec_update(PGconn *conn, int64_t deadline_ms, const char *sql, int nparams,
                       const char *const *params, size_t *changed, char *err, size_t errlen,
                       error_class_t *cls)
{
    char why[1024];
    PGresult *res = db_query(conn, sql, nparams, params, NULL, NULL, deadline_ms, why, sizeof why, cls);
    if (!res) {
        snprintf(err, errlen, "updating dead_letter_events: %s", why);
        return -1;
    }
    *changed = (size_t)strtoull(PQcmdTuples(res), NULL, 10);
    PQclear(res);
    return 0;
}

/* The one statement that resolves dead letters, whoever resolves them
 * (DESIGN.md: Resolving dead letters): the unresolved ones among ids[0..n)
 * get resolved_at, `kind`, `by` and the note `resolution`; one already
 * resolved keeps its first resolution. Adds how many changed to *resolved. */
static int resolve_ids(PGconn *conn, int64_t deadline_ms, const int64_t *ids, size_t n, const char *kind,
                       const char *by, const char *resolution, size_t *resolved, char *err, size_t errlen,
                       error_class_t *cls)
{
    size_t changed;
    if (n == 0) return 0;
    char *literal = db_array_literal(NULL, ids, n);
    const char *params[4] = {literal, kind, by, resolution};
    int rc = exec_update(conn, deadline_ms,
                         "UPDATE dead_letter_events SET resolved_at = now(), resolution_kind = $2,"
                         " resolved_by = $3, resolution = $4"
                         " WHERE id = ANY($1::bigint[]) AND resolved_at IS NULL",
                         4, params, &changed, err, errlen, cls);
    if (rc == 0) *resolved += changed;
    free(literal);
    return rc;
}

/* The resolve hook: inside the batch's transaction, before its upsert and
 * COMMIT (every entry has its state by then: one the database refuses makes
 * the store roll back and run it again once the entry is rejected). Stored
 * and superseded entries resolve their dead letters; rejected ones refresh
 * the reason, only where it changed, so a second run touches nothing. A
 * reason changed when its error_type or the first line of its detail did:
 * the database's DETAIL line (database_rejected) quotes the failing row with
 * a fresh sequence value on every attempt, and would rewrite the row on
 * every run. */
static int mark(void *ctx, db_conn_t *conn, int64_t deadline_ms, const batch_t *b, char *err, size_t errlen,
                error_class_t *cls)
{
    dead_letter_marks_t *m = ctx;
    const pipeline_def_t *def = m->def;
    int64_t *stored = xcalloc(b->count, sizeof *stored);
    int64_t *superseded = xcalloc(b->count, sizeof *superseded);
    int64_t *failing = xcalloc(b->count, sizeof *failing);
    const char **types = xcalloc(b->count, sizeof *types);
    const char **details = xcalloc(b->count, sizeof *details);
    size_t ns = 0, nx = 0, nf = 0, changed;
    char *ids_lit = NULL, *types_lit = NULL, *details_lit = NULL, *note = NULL, *note_superseded = NULL;
    char *key = pipeline_key_columns(def, " and ");
    int rc = -1;

    for (size_t i = 0; i < b->count; i++) {
        const entry_t *e = &b->entries[i];
        if (e->state == ENTRY_EVENT || e->state == ENTRY_TOMBSTONE) stored[ns++] = m->ids[i];
        else if (e->state == ENTRY_SUPERSEDED) superseded[nx++] = m->ids[i];
        else if (e->state == ENTRY_REJECTED) {
            failing[nf] = m->ids[i];
            types[nf] = e->rejection.error_type;
            details[nf++] = e->rejection.detail;
        }
    }
    m->resolved = m->refreshed = 0;
    /* Per row the upsert's outcome is not known (a newer stored row may
     * have been kept by the ON CONFLICT rule): the note says what was done. */
    if (asprintf(&note, "redriven: decoded and upserted into %s by the pipeline's ON CONFLICT rule", def->table) < 0 ||
        asprintf(&note_superseded, "redriven: another dead letter with the same %s was upserted into %s in the same batch",
                 key, def->table) < 0)
        abort();

    if (resolve_ids(conn, deadline_ms, stored, ns, DEAD_LETTER_REDRIVEN, m->by, note, &m->resolved, err, errlen,
                    cls) ||
        resolve_ids(conn, deadline_ms, superseded, nx, DEAD_LETTER_REDRIVEN, m->by, note_superseded, &m->resolved,
                    err, errlen, cls))
        goto out;
    if (nf > 0) {
        ids_lit = db_array_literal(NULL, failing, nf);
        types_lit = db_array_literal(types, NULL, nf);
        details_lit = db_array_literal(details, NULL, nf);
        const char *params[3] = {ids_lit, types_lit, details_lit};
        if (exec_update(conn, deadline_ms,
                        "UPDATE dead_letter_events d SET error_type = v.error_type, error_detail = v.error_detail"
                        " FROM unnest($1::bigint[], $2::text[], $3::text[]) AS v(id, error_type, error_detail)"
                        " WHERE d.id = v.id AND d.resolved_at IS NULL"
                        " AND (d.error_type::text, split_part(d.error_detail, E'\\n', 1))"
                        " IS DISTINCT FROM (v.error_type, split_part(v.error_detail, E'\\n', 1))",
                        3, params, &changed, err, errlen, cls))
            goto out;
        m->refreshed = changed;
    }
    rc = 0;
out:
    free(ids_lit);
    free(types_lit);
    free(details_lit);
    free(key);
    free(note);
    free(note_superseded);
    free(stored);
    free(superseded);
    free(failing);
    free(types);
    free(details);
    return rc;
}

store_hook_t dead_letters_resolve_hook(dead_letter_marks_t *marks, bool commit)
{
    return (store_hook_t){.fn = mark, .ctx = marks, .commit = commit};
}

/* ------------------------------------------------------------------------ */
/* resolve and purge: one-shot statements, each committed on its own. */

int dead_letters_acknowledge_ids(db_conn_t *conn, const int64_t *ids, size_t n, const char *by, const char *note,
                                 int64_t *missing, size_t *missing_n, size_t *acknowledged, char *err,
                                 size_t errlen)
{
    char *literal = db_array_literal(NULL, ids, n);
    const char *params[1] = {literal};
    error_class_t cls;
    int rc = -1;
    *missing_n = *acknowledged = 0;
    PGresult *res = db_select(conn,
                              "SELECT w.id FROM unnest($1::bigint[]) WITH ORDINALITY AS w(id, pos)"
                              " WHERE NOT EXISTS (SELECT 1 FROM dead_letter_events d WHERE d.id = w.id)"
                              " ORDER BY w.pos",
                              1, params, 0, err, errlen);
    if (!res) goto out;
    for (int r = 0; r < PQntuples(res); r++) missing[(*missing_n)++] = strtoll(PQgetvalue(res, r, 0), NULL, 10);
    PQclear(res);
    /* Purge deletes only resolved dead letters: an id that exists now and
     * is unresolved still exists when the UPDATE runs. */
    rc = *missing_n ? 0
                    : resolve_ids(conn, 0, ids, n, DEAD_LETTER_ACKNOWLEDGED, by, note, acknowledged, err, errlen,
                                  &cls);
out:
    free(literal);
    return rc;
}

int dead_letters_resolve_after_tombstone(db_conn_t *conn, const int64_t *ids, size_t n, const char *by,
                                         size_t *resolved, char *err, size_t errlen)
{
    error_class_t cls;
    return resolve_ids(conn, 0, ids, n, DEAD_LETTER_REDRIVEN, by,
                       "redriven: not stored: a tombstone of its key at a later offset of its partition was applied "
                       "after it (a replay of the topic would not store it either)",
                       resolved, err, errlen, &cls);
}

int dead_letters_acknowledge_matching(db_conn_t *conn, const char *topic, const char *type, const char *by,
                                      const char *note, size_t *acknowledged, char *err, size_t errlen)
{
    char after[24] = "0", limit[24];
    int64_t *ids = xcalloc(DEAD_LETTER_CHUNK, sizeof *ids);
    error_class_t cls;
    int rc = -1;
    snprintf(limit, sizeof limit, "%d", DEAD_LETTER_CHUNK);
    *acknowledged = 0;
    for (;;) {
        const char *params[4] = {topic, type, after, limit};
        PGresult *res = db_select(conn,
                                  "SELECT id FROM dead_letter_events"
                                  " WHERE resolved_at IS NULL AND ($1::text IS NULL OR topic = ANY(string_to_array($1, ',')))"
                                  " AND error_type = $2 AND id > $3::bigint ORDER BY id LIMIT $4::int",
                                  4, params, 0, err, errlen);
        if (!res) break;
        size_t n = (size_t)PQntuples(res);
        for (size_t r = 0; r < n; r++) ids[r] = strtoll(PQgetvalue(res, (int)r, 0), NULL, 10);
        if (n > 0) snprintf(after, sizeof after, "%s", PQgetvalue(res, (int)n - 1, 0));
        PQclear(res);
        if (n == 0) {
            rc = 0;
            break;
        }
        if (resolve_ids(conn, 0, ids, n, DEAD_LETTER_ACKNOWLEDGED, by, note, acknowledged, err, errlen, &cls))
            break;
    }
    free(ids);
    return rc;
}

int dead_letters_purge(db_conn_t *conn, long long age_seconds, bool dry_run, long long *count, char *cutoff,
                       size_t cutoff_len, char *err, size_t errlen)
{
    char age[24], limit[24];
    snprintf(age, sizeof age, "%lld", age_seconds);
    snprintf(limit, sizeof limit, "%d", DEAD_LETTER_CHUNK);
    const char *age_param[1] = {age};
    *count = 0;
    /* One cutoff for every chunk: what was resolved while the purge runs is
     * never old enough. */
    PGresult *res = db_select(conn, "SELECT " SQL_UTC("(now() - make_interval(secs => $1::bigint))"), 1, age_param, 0,
                              err, errlen);
    if (!res) return -1;
    snprintf(cutoff, cutoff_len, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    const char *params[2] = {cutoff, limit};
    if (dry_run) {
        res = db_select(conn,
                        "SELECT count(*) FROM dead_letter_events"
                        " WHERE resolved_at IS NOT NULL AND resolved_at < $1::timestamptz",
                        1, params, 0, err, errlen);
        if (!res) return -1;
        *count = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
        PQclear(res);
        return 0;
    }
    for (;;) {
        res = db_select(conn,
                        "WITH purged AS (DELETE FROM dead_letter_events WHERE id IN"
                        " (SELECT id FROM dead_letter_events"
                        " WHERE resolved_at IS NOT NULL AND resolved_at < $1::timestamptz"
                        " ORDER BY resolved_at LIMIT $2::int)"
                        " AND resolved_at IS NOT NULL RETURNING 1)"
                        " SELECT count(*) FROM purged",
                        2, params, 0, err, errlen);
        if (!res) return -1;
        long long n = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
        PQclear(res);
        *count += n;
        if (n == 0) return 0;
    }
}

int dead_letters_other_topics(db_conn_t *conn, const char *const *topics, size_t n, const char *type,
                              dead_letter_topics_t *out, char *err, size_t errlen)
{
    char *literal = db_array_literal(topics, NULL, n);
    const char *params[2] = {literal, type};
    memset(out, 0, sizeof *out);
    PGresult *res = db_select(conn,
                              "SELECT topic, count(*) FROM dead_letter_events"
                              " WHERE resolved_at IS NULL AND topic <> ALL($1::text[])"
                              " AND ($2::text IS NULL OR error_type = $2)"
                              " GROUP BY topic ORDER BY topic",
                              2, params, 0, err, errlen);
    free(literal);
    if (!res) return -1;
    out->result = res;
    out->n = (size_t)PQntuples(res);
    out->topics = xcalloc(out->n, sizeof *out->topics);
    out->unresolved = xcalloc(out->n, sizeof *out->unresolved);
    for (int r = 0; r < PQntuples(res); r++) {
        out->topics[r] = PQgetvalue(res, r, 0);
        out->unresolved[r] = PQgetvalue(res, r, 1);
    }
    return 0;
}

void dead_letters_other_topics_free(dead_letter_topics_t *t)
{
    PQclear(t->result);
    free(t->topics);
    free(t->unresolved);
    memset(t, 0, sizeof *t);
}

/* ------------------------------------------------------------------------ */
/* verify. */

int dead_letters_summary(db_conn_t *conn, const char *const *topics, size_t n, dead_letter_summary_t *out,
                         char *err, size_t errlen)
{
    char *literal = db_array_literal(topics, NULL, n);
    const char *params[1] = {literal};
    int rc = -1;
    memset(out, 0, sizeof *out);

    /* Only the unresolved ones ask anything of anyone (DESIGN.md:
     * Resolving dead letters); the resolved ones are counted alongside. */
    PGresult *res = db_select(conn,
                              "SELECT error_type, count(*) FILTER (WHERE resolved_at IS NULL) AS unresolved,"
                              " count(*) FILTER (WHERE resolved_at IS NOT NULL)"
                              " FROM dead_letter_events WHERE topic = ANY($1::text[])"
                              " GROUP BY error_type ORDER BY unresolved DESC, error_type",
                              1, params, 0, err, errlen);
    if (!res) goto out;
    out->results[0] = res;
    out->counted = true;
    out->types = xcalloc((size_t)PQntuples(res), sizeof *out->types);
    out->type_counts = xcalloc((size_t)PQntuples(res), sizeof *out->type_counts);
    for (int r = 0; r < PQntuples(res); r++) {
        long long unresolved = strtoll(PQgetvalue(res, r, 1), NULL, 10);
        out->resolved += strtoll(PQgetvalue(res, r, 2), NULL, 10);
        if (unresolved == 0) continue;
        out->types[out->type_n] = PQgetvalue(res, r, 0);
        out->type_counts[out->type_n++] = PQgetvalue(res, r, 1);
        out->total += unresolved;
    }
    if (out->total == 0) {
        rc = 0;
        goto out;
    }
    res = db_select(conn,
                    "SELECT id, topic, partition, kafka_offset, error_type,"
                    " to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),"
                    " left(error_detail, 200)"
                    " FROM dead_letter_events WHERE topic = ANY($1::text[]) AND resolved_at IS NULL"
                    " ORDER BY id DESC LIMIT 1",
                    1, params, 0, err, errlen);
    if (!res) goto out;
    out->results[1] = res;
    if (PQntuples(res) == 1) {
        out->id = PQgetvalue(res, 0, 0);
        out->topic = PQgetvalue(res, 0, 1);
        out->partition = PQgetvalue(res, 0, 2);
        out->offset = PQgetvalue(res, 0, 3);
        out->error_type = PQgetvalue(res, 0, 4);
        out->created_at = PQgetvalue(res, 0, 5);
        out->detail = PQgetvalue(res, 0, 6);
    }
    rc = 0;
out:
    free(literal);
    return rc;
}

void dead_letters_summary_free(dead_letter_summary_t *s)
{
    PQclear(s->results[0]);
    PQclear(s->results[1]);
    free(s->types);
    free(s->type_counts);
    memset(s, 0, sizeof *s);
}
