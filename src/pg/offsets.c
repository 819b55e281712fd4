#include "pg/offsets.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg/db_internal.h"

/* The partitions a batch covers, each with its next offset, in partition
 * order: every transaction locks its rows in one order. */
typedef struct {
    int32_t partition;
    int64_t next;
} position_t;

static int by_partition(const void *a, const void *b)
{
    int32_t x = ((const position_t *)a)->partition, y = ((const position_t *)b)->partition;
    return (x > y) - (x < y);
}

char *offsets_advance_sql(db_conn_t *conn, const char *group, const batch_t *b)
{
    if (b->count == 0) return NULL;
    position_t *pos = malloc(b->count * sizeof *pos);
    size_t n = 0;
    if (!pos) abort();
    for (size_t i = 0; i < b->count; i++) {
        const record_t *r = &b->records[i];
        size_t k = 0;
        while (k < n && pos[k].partition != r->partition) k++;
        if (k == n) pos[n++] = (position_t){r->partition, r->offset + 1};
        else if (r->offset + 1 > pos[k].next) pos[k].next = r->offset + 1;
    }
    qsort(pos, n, sizeof *pos, by_partition);

    char *g = PQescapeLiteral(conn, group, strlen(group));
    char *t = PQescapeLiteral(conn, b->records[0].topic, strlen(b->records[0].topic));
    if (!g || !t) abort();
    size_t cap = 512 + n * (strlen(g) + strlen(t) + 48), len = 0;
    char *sql = malloc(cap);
    if (!sql) abort();
    len += (size_t)snprintf(sql, cap, "INSERT INTO consumer_offsets AS o (group_id, topic, partition, next_offset) VALUES ");
    for (size_t k = 0; k < n; k++)
        len += (size_t)snprintf(sql + len, cap - len, "%s(%s, %s, %d, %lld)", k ? ", " : "", g, t,
                                (int)pos[k].partition, (long long)pos[k].next);
    /* Never backwards: a late write of a member that lost the partition
     * leaves the new owner's position as it is. */
    snprintf(sql + len, cap - len,
             " ON CONFLICT (group_id, topic, partition) DO UPDATE SET next_offset = EXCLUDED.next_offset, "
             "updated_at = now() WHERE o.next_offset < EXCLUDED.next_offset");
    PQfreemem(g);
    PQfreemem(t);
    free(pos);
    return sql;
}

int offsets_read(db_conn_t *conn, int64_t deadline_ms, const char *group, const char *topic, int n,
                 int64_t *next, char *err, size_t errlen, error_class_t *cls)
{
    for (int p = 0; p < n; p++) next[p] = -1;
    const char *params[2] = {group, topic};
    PGresult *res = db_query(conn,
                             "SELECT partition, next_offset FROM consumer_offsets "
                             "WHERE group_id = $1 AND topic = $2",
                             2, params, NULL, NULL, deadline_ms, err, errlen, cls);
    if (!res) return -1;
    for (int r = 0; r < PQntuples(res); r++) {
        long p = strtol(PQgetvalue(res, r, 0), NULL, 10);
        if (p >= 0 && p < n) next[p] = strtoll(PQgetvalue(res, r, 1), NULL, 10);
    }
    PQclear(res);
    return 0;
}

int offsets_load(const char *conninfo, int statement_timeout_ms, int64_t deadline_ms, const char *group,
                 const char *topic, int n, int64_t *next, char *err, size_t errlen, error_class_t *cls)
{
    db_conn_t *conn = db_connect(conninfo, statement_timeout_ms, deadline_ms, err, errlen);
    if (!conn) {
        /* As the store's connect: no SQLSTATE, transient. */
        *cls = ERROR_CLASS_TRANSIENT;
        return -1;
    }
    int rc = offsets_read(conn, deadline_ms, group, topic, n, next, err, errlen, cls);
    db_close(conn);
    return rc;
}
