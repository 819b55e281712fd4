#include "pg/probe.h"

#include <stdlib.h>

#include "pg/db_internal.h"

/* The session's name of the probe: one pipeline per session. */
#define PROBE_STATEMENT "storage_probe"

int probe_send(db_conn_t *conn, bool *prepared, int64_t deadline_ms, const batch_t *b, const size_t *pending,
               size_t n, char *err, size_t errlen, error_class_t *cls)
{
    const pipeline_def_t *def = b->def;
    const char **texts = malloc((n ? n : 1) * sizeof *texts);
    char *params[PIPELINE_MAX_KEY + 2];
    int np = 0;
    if (!texts) abort();
    /* One array per column, in the probe's order: the application's id
     * (when the key has it), each key field, the version. */
    if (def->key_includes_app) {
        int64_t *ids = malloc((n ? n : 1) * sizeof *ids);
        if (!ids) abort();
        for (size_t k = 0; k < n; k++) ids[k] = b->entries[pending[k]].application_id;
        params[np++] = db_array_literal(NULL, ids, n);
        free(ids);
    }
    int columns[PIPELINE_MAX_KEY + 1];
    size_t nc = 0;
    for (size_t k = 0; k < def->key_count; k++) columns[nc++] = def->key_fields[k];
    if (def->version_index >= 0) columns[nc++] = def->version_index;
    for (size_t c = 0; c < nc; c++) {
        /* Key and version fields are required: never NULL in an event. */
        for (size_t k = 0; k < n; k++) texts[k] = event_column(&b->entries[pending[k]].event, (size_t)columns[c]);
        params[np++] = db_array_literal(texts, NULL, n);
    }
    /* Prepared once per session: a batch's probe is then neither parsed nor
     * planned again (DESIGN.md: The write path). */
    int rc = -1;
    if (*prepared || db_prepare(conn, PROBE_STATEMENT, def->probe_sql, np, deadline_ms, err, errlen, cls) == 0) {
        *prepared = true;
        rc = db_send_prepared(conn, PROBE_STATEMENT, np, (const char *const *)params, deadline_ms, err, errlen, cls);
    }
    for (int i = 0; i < np; i++) free(params[i]);
    free(texts);
    return rc;
}

long probe_collect(db_conn_t *conn, int64_t deadline_ms, const size_t *pending, size_t n, bool *stored, char *err,
                   size_t errlen, error_class_t *cls)
{
    PGresult *res = db_collect(conn, deadline_ms, err, errlen, cls);
    if (!res) return -1;
    long found = 0;
    for (int r = 0; r < PQntuples(res); r++) {
        long i = strtol(PQgetvalue(res, r, 0), NULL, 10) - 1; /* WITH ORDINALITY counts from 1 */
        if (i >= 0 && (size_t)i < n && !stored[pending[i]]) {
            stored[pending[i]] = true;
            found++;
        }
    }
    PQclear(res);
    return found;
}
