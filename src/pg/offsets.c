#include "pg/offsets.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg/db_internal.h"

/* Topic and partition order: every transaction locks its rows in one
 * order. */
static int by_partition(const void *a, const void *b)
{
    const batch_range_t *x = a, *y = b;
    int c = strcmp(x->topic, y->topic);
    if (c) return c;
    return (x->partition > y->partition) - (x->partition < y->partition);
}

static const topic_epochs_t *known_of(const topic_epochs_t *epochs, int ntopics, const char *topic)
{
    for (int t = 0; t < ntopics; t++)
        if (strcmp(epochs[t].topic, topic) == 0) return &epochs[t];
    return NULL;
}

char *offsets_advance_sql(db_conn_t *conn, const char *group, const batch_t *b, const topic_epochs_t *epochs,
                          int ntopics)
{
    if (b->count == 0) return NULL;
    batch_range_t *pos = malloc(b->count * sizeof *pos);
    if (!pos) abort();
    size_t n = batch_ranges(b, pos);
    qsort(pos, n, sizeof *pos, by_partition);

    char *g = PQescapeLiteral(conn, group, strlen(group));
    if (!g) abort();
    char *moved = NULL, *created = NULL, *sql = NULL;
    size_t moved_len = 0, created_len = 0, nmoved = 0, ncreated = 0;
    FILE *m = open_memstream(&moved, &moved_len), *c = open_memstream(&created, &created_len);
    if (!m || !c) abort();
    for (size_t k = 0; k < n; k++) {
        int32_t p = pos[k].partition;
        char *t = PQescapeLiteral(conn, pos[k].topic, strlen(pos[k].topic));
        if (!t) abort();
        const topic_epochs_t *e = known_of(epochs, ntopics, pos[k].topic);
        bool known = e && p >= 0 && p < e->n && e->next && e->next[p] >= 0;
        long long epoch = e && p >= 0 && p < e->n ? (long long)e->epoch[p] : 0;
        if (known)
            fprintf(m, "%s(%s, %d, %lld::bigint, %lld::bigint, %lld::bigint)", nmoved++ ? ", " : "", t, (int)p,
                    (long long)e->next[p], (long long)pos[k].last + 1, epoch);
        else
            fprintf(c, "%s(%s, %s, %d, %lld, %lld)", ncreated++ ? ", " : "", g, t, (int)p, (long long)pos[k].last + 1,
                    epoch);
        PQfreemem(t);
    }
    if (fclose(m) != 0 || fclose(c) != 0) abort();
    /* Fenced (DESIGN.md: Progress in the database): each row moves only
     * from where this member knows it to stand, within its epoch, and a
     * partition without a row gets one only if nobody wrote it meanwhile;
     * any other outcome fails the statement, and the batch's transaction
     * rolls back whole, rows included. A position moves to where the
     * batch's records end even when that is below it: fenced, only this
     * member's reading got there (a topic recreated below the position,
     * read again from its start), and above them, a restart would skip
     * records never stored. */
    if (asprintf(&sql,
                 "WITH storage_moved AS (%s%s%s%s%s), storage_created AS (%s%s%s%s) "
                 "SELECT storage_consumer_fence((SELECT count(*) FROM storage_moved) + "
                 "(SELECT count(*) FROM storage_created), %zu) AS " OFFSETS_FENCE_COLUMN,
                 nmoved ? "UPDATE consumer_offsets AS o SET next_offset = v.next_offset, "
                          "updated_at = now() FROM (VALUES " : "SELECT 1 WHERE false",
                 nmoved ? moved : "",
                 nmoved ? ") AS v(topic, partition, expected, next_offset, epoch) WHERE o.group_id = " : "",
                 nmoved ? g : "",
                 nmoved ? " AND o.topic = v.topic AND o.partition = v.partition AND o.next_offset = v.expected "
                          "AND o.epoch = v.epoch RETURNING 1" : "",
                 ncreated ? "INSERT INTO consumer_offsets (group_id, topic, partition, next_offset, epoch) VALUES "
                          : "SELECT 1 WHERE false",
                 ncreated ? created : "",
                 ncreated ? " ON CONFLICT (group_id, topic, partition) DO NOTHING" : "",
                 ncreated ? " RETURNING 1" : "", n) < 0)
        abort();
    free(moved);
    free(created);
    PQfreemem(g);
    free(pos);
    return sql;
}

void offsets_advanced(const batch_t *b, topic_epochs_t *epochs, int ntopics)
{
    if (b->count == 0) return;
    batch_range_t *pos = malloc(b->count * sizeof *pos);
    if (!pos) abort();
    size_t n = batch_ranges(b, pos);
    for (size_t k = 0; k < n; k++) {
        topic_epochs_t *e = (topic_epochs_t *)known_of(epochs, ntopics, pos[k].topic);
        int32_t p = pos[k].partition;
        if (e && e->next && p >= 0 && p < e->n && pos[k].last + 1 > e->next[p]) e->next[p] = pos[k].last + 1;
    }
    free(pos);
}

int offsets_read(db_conn_t *conn, int64_t deadline_ms, const char *group, const char *topic, int n,
                 int64_t *next, int64_t *epoch, char *err, size_t errlen, error_class_t *cls)
{
    for (int p = 0; p < n; p++) {
        next[p] = -1;
        if (epoch) epoch[p] = 0;
    }
    const char *params[2] = {group, topic};
    PGresult *res = db_query(conn,
                             "SELECT partition, next_offset, epoch FROM consumer_offsets "
                             "WHERE group_id = $1 AND topic = $2",
                             2, params, NULL, NULL, deadline_ms, err, errlen, cls);
    if (!res) return -1;
    for (int r = 0; r < PQntuples(res); r++) {
        long p = strtol(PQgetvalue(res, r, 0), NULL, 10);
        if (p < 0 || p >= n) continue;
        next[p] = strtoll(PQgetvalue(res, r, 1), NULL, 10);
        if (epoch) epoch[p] = strtoll(PQgetvalue(res, r, 2), NULL, 10);
    }
    PQclear(res);
    return 0;
}

/* A connection of its own for one step of an assignment, or NULL with
 * `err` and *cls set: connect-time failures carry no SQLSTATE (too many
 * connections, the server starting up) and are transient, as the store's. */
static db_conn_t *own_connection(const char *conninfo, int statement_timeout_ms, int64_t deadline_ms, char *err,
                                 size_t errlen, error_class_t *cls)
{
    db_conn_t *conn = db_connect(conninfo, statement_timeout_ms, deadline_ms, err, errlen);
    if (!conn) *cls = ERROR_CLASS_TRANSIENT;
    return conn;
}

int offsets_record_starts(const char *conninfo, int statement_timeout_ms, int64_t deadline_ms,
                          const char *group, const char *topic, int n, const int64_t *next, char *err,
                          size_t errlen, error_class_t *cls)
{
    db_conn_t *conn = own_connection(conninfo, statement_timeout_ms, deadline_ms, err, errlen, cls);
    if (!conn) return -1;
    char *starts = db_array_literal(NULL, next, (size_t)n);
    const char *params[3] = {group, topic, starts};
    PGresult *res = db_query(conn,
                             "INSERT INTO consumer_offsets (group_id, topic, partition, next_offset) "
                             "SELECT $1, $2, (p - 1)::integer, t FROM unnest($3::bigint[]) WITH ORDINALITY AS u(t, p) "
                             "WHERE t >= 0 ORDER BY p ON CONFLICT (group_id, topic, partition) DO NOTHING",
                             3, params, NULL, NULL, deadline_ms, err, errlen, cls);
    free(starts);
    if (res) PQclear(res);
    db_close(conn);
    return res ? 0 : -1;
}

int offsets_load(const char *conninfo, int statement_timeout_ms, int64_t deadline_ms, const char *group,
                 const char *topic, int n, int64_t *next, int64_t *epoch, char *err, size_t errlen,
                 error_class_t *cls)
{
    db_conn_t *conn = own_connection(conninfo, statement_timeout_ms, deadline_ms, err, errlen, cls);
    if (!conn) return -1;
    int rc = offsets_read(conn, deadline_ms, group, topic, n, next, epoch, err, errlen, cls);
    db_close(conn);
    return rc;
}

int offsets_table_exists(db_conn_t *conn, char *err, size_t errlen)
{
    PGresult *res = db_select(conn, "SELECT to_regclass('consumer_offsets') IS NOT NULL", 0, NULL, 0, err, errlen);
    if (!res) return -1;
    int exists = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    return exists;
}

int offsets_reset_begin(db_conn_t *conn, char *err, size_t errlen)
{
    return db_command(conn, "BEGIN", 0, err, errlen, NULL) ? -1 : 0;
}

int offsets_reset_topic(db_conn_t *conn, const char *group, const char *topic, int n, const int64_t *target,
                        int64_t *before, char *err, size_t errlen)
{
    /* The positions it had, locked until the end: nothing moves them
     * between this read and the COMMIT that replaces them. */
    for (int p = 0; p < n; p++) before[p] = -1;
    const char *params[3] = {group, topic, NULL};
    PGresult *res = db_select(conn,
                              "SELECT partition, next_offset FROM consumer_offsets "
                              "WHERE group_id = $1 AND topic = $2 ORDER BY partition FOR UPDATE",
                              2, params, 0, err, errlen);
    if (!res) goto fail;
    for (int r = 0; r < PQntuples(res); r++) {
        long p = strtol(PQgetvalue(res, r, 0), NULL, 10);
        if (p >= 0 && p < n) before[p] = strtoll(PQgetvalue(res, r, 1), NULL, 10);
    }
    PQclear(res);

    /* Exactly the targets, backwards too: that is the point of a replay
     * (a batch only ever raises them, see offsets_advance_sql). */
    char *targets = db_array_literal(NULL, target, (size_t)n);
    params[2] = targets;
    res = db_query(conn,
                   "INSERT INTO consumer_offsets AS o (group_id, topic, partition, next_offset, epoch) "
                   "SELECT $1, $2, (p - 1)::integer, t, 1 FROM unnest($3::bigint[]) WITH ORDINALITY AS u(t, p) "
                   "ON CONFLICT (group_id, topic, partition) DO UPDATE SET next_offset = EXCLUDED.next_offset, "
                   "epoch = o.epoch + 1, updated_at = now()",
                   3, params, NULL, NULL, 0, err, errlen, NULL);
    free(targets);
    if (!res) goto fail;
    PQclear(res);
    return 0;
fail:;
    char ignored[256];
    db_command(conn, "ROLLBACK", 0, ignored, sizeof ignored, NULL);
    return -1;
}

int offsets_reset_end(db_conn_t *conn, bool commit, char *err, size_t errlen)
{
    PGresult *res = db_query(conn, commit ? "COMMIT" : "ROLLBACK", 0, NULL, NULL, NULL, 0, err, errlen, NULL);
    if (!res) return -1;
    /* A COMMIT of a transaction that failed meanwhile answers ROLLBACK. */
    int rc = commit && strcmp(PQcmdStatus(res), "COMMIT") != 0 ? -1 : 0;
    if (rc) snprintf(err, errlen, "the transaction was rolled back (%s)", PQcmdStatus(res));
    PQclear(res);
    return rc;
}
