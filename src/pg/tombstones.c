#include "pg/tombstones.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg/db_internal.h"

/* The arrays of the entries idx[0..n): each key column's text, then the
 * topics, partitions and offsets, into params[1..]; params[0] is the
 * pipeline's name. Returns how many params. */
static int entry_arrays(const batch_t *b, const size_t *idx, size_t n, char **params)
{
    const pipeline_def_t *def = b->def;
    const char **texts = calloc(n ? n : 1, sizeof *texts);
    int64_t *nums = calloc(n ? n : 1, sizeof *nums);
    if (!texts || !nums) abort();
    int np = 1;
    for (size_t k = 0; k < def->key_count; k++) {
        for (size_t j = 0; j < n; j++) texts[j] = event_column(&b->entries[idx[j]].event, (size_t)def->key_fields[k]);
        params[np++] = db_array_literal(texts, NULL, n);
    }
    for (size_t j = 0; j < n; j++) texts[j] = b->records[idx[j]].topic;
    params[np++] = db_array_literal(texts, NULL, n);
    for (size_t j = 0; j < n; j++) nums[j] = b->records[idx[j]].partition;
    params[np++] = db_array_literal(NULL, nums, n);
    for (size_t j = 0; j < n; j++) nums[j] = b->records[idx[j]].offset;
    params[np++] = db_array_literal(NULL, nums, n);
    free(texts);
    free(nums);
    return np;
}

/* "unnest($2::text[], ..., $K::text[], $K+1::text[], $K+2::int[],
 * $K+3::bigint[]) AS u(c0, ..., topic, partition, o)" and the key's array
 * "ARRAY[u.c0, ...]", for a pipeline of `keys` key columns. */
static void write_unnest(FILE *f, size_t keys, bool ordinality)
{
    fputs("unnest(", f);
    for (size_t k = 0; k < keys; k++) fprintf(f, "$%zu::text[], ", k + 2);
    fprintf(f, "$%zu::text[], $%zu::int[], $%zu::bigint[])%s AS u(", keys + 2, keys + 3, keys + 4,
            ordinality ? " WITH ORDINALITY" : "");
    for (size_t k = 0; k < keys; k++) fprintf(f, "c%zu, ", k);
    fputs(ordinality ? "topic, partition, o, i)" : "topic, partition, o)", f);
}

static void write_key_array(FILE *f, size_t keys)
{
    fputs("ARRAY[", f);
    for (size_t k = 0; k < keys; k++) fprintf(f, "%su.c%zu", k ? ", " : "", k);
    fputs("]", f);
}

static char *statement(const batch_t *b, bool remember)
{
    size_t keys = b->def->key_count, len = 0;
    char *sql = NULL;
    FILE *f = open_memstream(&sql, &len);
    if (!f) abort();
    if (remember) {
        fputs("INSERT INTO applied_tombstones AS a (pipeline, key, topic, partition, kafka_offset) SELECT $1, ", f);
        write_key_array(f, keys);
        fputs(", u.topic, u.partition, max(u.o) FROM ", f);
        write_unnest(f, keys, false);
        /* In one order: two transactions never wait on each other's rows
         * the other way round. */
        fputs(" GROUP BY 2, 3, 4 ORDER BY 2, 3, 4 ON CONFLICT (pipeline, key, topic, partition) DO UPDATE SET "
              "kafka_offset = greatest(a.kafka_offset, EXCLUDED.kafka_offset), applied_at = now()",
              f);
    } else {
        fputs("SELECT u.i, a.kafka_offset FROM ", f);
        write_unnest(f, keys, true);
        fputs(" JOIN applied_tombstones a ON a.pipeline = $1 AND a.key = ", f);
        write_key_array(f, keys);
        fputs(" AND a.topic = u.topic AND a.partition = u.partition AND a.kafka_offset > u.o", f);
    }
    if (fclose(f) != 0 || !sql) abort();
    return sql;
}

int tombstones_remember(db_conn_t *conn, int64_t deadline_ms, const batch_t *b, const size_t *idx, size_t n,
                        char *err, size_t errlen, error_class_t *cls)
{
    if (n == 0) return 0;
    char *params[PIPELINE_MAX_KEY + 4] = {(char *)b->def->name};
    int np = entry_arrays(b, idx, n, params);
    char *sql = statement(b, true);
    PGresult *res = db_query(conn, sql, np, (const char *const *)params, NULL, NULL, deadline_ms, err, errlen, cls);
    for (int i = 1; i < np; i++) free(params[i]);
    free(sql);
    if (!res) return -1;
    PQclear(res);
    return 0;
}

long tombstones_after(db_conn_t *conn, int64_t deadline_ms, const batch_t *b, bool *after, int64_t *at, char *err,
                      size_t errlen, error_class_t *cls)
{
    size_t n = 0, *idx = malloc((b->count ? b->count : 1) * sizeof *idx);
    if (!idx) abort();
    for (size_t i = 0; i < b->count; i++)
        if (b->entries[i].state == ENTRY_EVENT) idx[n++] = i;
    long found = 0;
    if (n > 0) {
        char *params[PIPELINE_MAX_KEY + 4] = {(char *)b->def->name};
        int np = entry_arrays(b, idx, n, params);
        char *sql = statement(b, false);
        PGresult *res =
            db_query(conn, sql, np, (const char *const *)params, NULL, NULL, deadline_ms, err, errlen, cls);
        for (int i = 1; i < np; i++) free(params[i]);
        free(sql);
        if (!res) {
            free(idx);
            return -1;
        }
        for (int r = 0; r < PQntuples(res); r++) {
            size_t k = strtoul(PQgetvalue(res, r, 0), NULL, 10) - 1;
            if (k >= n) continue;
            after[idx[k]] = true;
            at[idx[k]] = strtoll(PQgetvalue(res, r, 1), NULL, 10);
            found++;
        }
        PQclear(res);
    }
    free(idx);
    return found;
}
