#include "pg/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/app_cache.h"
#include "core/clock.h"
#include "pg/copy_text.h"
#include "pg/dead_letters.h"
#include "pg/members.h"
#include "pg/db_internal.h"
#include "pg/offsets.h"
#include "pg/store_internal.h"

store_t *store_new(const settings_t *s, const pipeline_def_t *def)
{
    store_t *st = calloc(1, sizeof *st);
    if (!st) abort();
    st->settings = s;
    st->def = def;
    /* Every name quoted, built by pipeline_bind (DESIGN.md: Pipelines are
     * declared). Rows are upserted in natural-key order: two members whose
     * batches share keys (a review observed on two partitions) then lock
     * those rows in the same order and wait for each other instead of
     * deadlocking. The conflict rule names the table `t`. What the upsert
     * selects and returns adapts to the table (pipeline_def_t: select_sql,
     * upsert_with_sql, returning_sql). */
    const char *cols = def->columns_sql;
    if (asprintf(&st->copy_sql, "COPY pg_temp.storage_stage (%s) FROM STDIN", cols) < 0 ||
        asprintf(&st->direct_sql, "COPY %s (%s) FROM STDIN", def->table_sql, cols) < 0 ||
        asprintf(&st->insert_sql, "%sINSERT INTO %s AS t (%s) SELECT %s FROM pg_temp.storage_stage ORDER BY %s %s RETURNING %s",
                 def->upsert_with_sql, def->table_sql, cols, def->select_sql, def->key_sql, def->conflict_sql,
                 def->returning_sql) < 0 ||
        asprintf(&st->stage_sql, "CREATE TEMP TABLE storage_stage ON COMMIT DELETE ROWS AS SELECT %s FROM %s WITH NO DATA",
                 cols, def->table_sql) < 0)
        abort();
    st->copy_need = 1;
    for (size_t i = 0; i < def->field_count; i++) st->has_defaults |= def->fields[i].default_sql != NULL;
    st->apps = app_cache_new((int64_t)s->application_cache_ttl_seconds * 1000);
    return st;
}

void store_disconnect(store_t *st)
{
    if (st->conn) PQfinish(st->conn);
    st->conn = NULL;
    st->probe_prepared = false;
}

static void free_epochs(store_t *st)
{
    for (int t = 0; t < st->epoch_topics; t++) {
        free(st->epochs[t].topic);
        free(st->epochs[t].epoch);
        free(st->epochs[t].next);
    }
    st->epoch_topics = 0;
}

void store_free(store_t *st)
{
    if (!st) return;
    store_disconnect(st);
    app_cache_free(st->apps);
    free(st->stage_sql);
    free(st->copy_sql);
    free(st->insert_sql);
    free(st->direct_sql);
    free(st->progress_group);
    free_epochs(st);
    free(st->copy.data);
    free(st->prepared.copy.data);
    free(st->pending);
    free(st->order);
    free(st->stored);
    free(st->names.list);
    free(st->names.of);
    free(st->names.ids);
    free(st->names.stale);
    free(st);
}

void store_record_progress(store_t *st, const char *group)
{
    free(st->progress_group);
    free_epochs(st);
    st->progress_group = strdup(group);
    if (!st->progress_group) abort();
}

/* What this member knows of `topic`'s positions, with room for n
 * partitions (new ones: nothing known). */
static topic_epochs_t *known_positions(store_t *st, const char *topic, int n)
{
    topic_epochs_t *e = NULL;
    for (int t = 0; t < st->epoch_topics && !e; t++)
        if (strcmp(st->epochs[t].topic, topic) == 0) e = &st->epochs[t];
    if (!e) {
        if (st->epoch_topics == PIPELINE_MAX_TOPICS) abort(); /* a caller bug: more topics than a pipeline has */
        e = &st->epochs[st->epoch_topics++];
        *e = (topic_epochs_t){strdup(topic), NULL, NULL, 0};
        if (!e->topic) abort();
    }
    if (n > e->n) {
        e->epoch = realloc(e->epoch, (size_t)n * sizeof *e->epoch);
        e->next = realloc(e->next, (size_t)n * sizeof *e->next);
        if (!e->epoch || !e->next) abort();
        for (int p = e->n; p < n; p++) e->epoch[p] = 0, e->next[p] = -1;
        e->n = n;
    }
    return e;
}

int store_read_progress(store_t *st, const char *topic, int n, int64_t *next, char *err, size_t errlen,
                        error_class_t *cls)
{
    if (!st->progress_group) abort(); /* a caller bug */
    topic_epochs_t *e = known_positions(st, topic, n);
    /* Read straight into the epochs: a read that fails fails the
     * assignment (after its retries), and a retry reads them again. */
    int rc = offsets_load(st->settings->database_url, st->settings->db_statement_timeout_ms,
                          clock_now_ms() + settings_db_attempt_ms(st->settings), st->progress_group, topic, n, next,
                          e->epoch, err, errlen, cls);
    /* Where each batch's positions move from (fencing: DESIGN.md,
     * Progress in the database). */
    if (rc == 0) memcpy(e->next, next, (size_t)n * sizeof *next);
    return rc;
}

int store_record_starts(store_t *st, const char *topic, int n, const int64_t *next, char *err, size_t errlen,
                        error_class_t *cls)
{
    if (!st->progress_group) abort(); /* a caller bug */
    int rc = offsets_record_starts(st->settings->database_url, st->settings->db_statement_timeout_ms,
                                   clock_now_ms() + settings_db_attempt_ms(st->settings), st->progress_group, topic,
                                   n, next, err, errlen, cls);
    /* A start recorded is where the first batch moves the position from; a
     * row another member wrote meanwhile fences that batch, and the member
     * then starts where the database says. */
    topic_epochs_t *e = known_positions(st, topic, n);
    for (int p = 0; rc == 0 && p < n; p++)
        if (next[p] >= 0 && e->next[p] < 0) e->next[p] = next[p];
    return rc;
}

int store_connect(store_t *st, char *err, size_t errlen, error_class_t *cls)
{
    if (st->conn && PQstatus(st->conn) == CONNECTION_OK) return 0;
    store_disconnect(st);
    st->conn = db_connect(st->settings->database_url, st->settings->db_statement_timeout_ms, st->deadline,
                          err, errlen);
    if (!st->conn) {
        /* libpq reports connect-time failures (too many connections, the
         * server starting up) without a SQLSTATE: all transient. */
        *cls = ERROR_CLASS_TRANSIENT;
        return -1;
    }
    /* A staging table per session, same column types as the target: COPY
     * into it, then one INSERT ... SELECT ... ON CONFLICT per batch. A
     * pipeline's session says it runs the group (pg/members.h). */
    if (db_command(st->conn, st->stage_sql, st->deadline, err, errlen, cls) ||
        (st->progress_group && members_announce(st->conn, st->progress_group, st->deadline, err, errlen, cls))) {
        store_disconnect(st);
        return -1;
    }
    return 0;
}

/* A new attempt: resolving and writing a batch end by its deadline. */
void store_arm_deadline(store_t *st)
{
    st->deadline = clock_now_ms() + settings_db_attempt_ms(st->settings);
}

int store_ping(store_t *st, char *err, size_t errlen, error_class_t *cls)
{
    store_arm_deadline(st);
    int rc = store_connect(st, err, errlen, cls);
    if (rc == 0) {
        PGresult *res = db_query(st->conn, "SELECT 1", 0, NULL, NULL, NULL, st->deadline, err, errlen, cls);
        if (res) PQclear(res);
        else rc = -1;
    }
    if (rc) store_disconnect(st);
    st->deadline = 0;
    return rc;
}

int store_unresolved_dead_letters(store_t *st, const char *topic, int64_t *counts, size_t n, char *err,
                                  size_t errlen, error_class_t *cls)
{
    store_arm_deadline(st);
    int rc = store_connect(st, err, errlen, cls);
    if (rc == 0) rc = dead_letters_unresolved(st->conn, st->deadline, topic, counts, n, err, errlen, cls);
    if (rc) store_disconnect(st);
    st->deadline = 0;
    return rc;
}

/* Find the batch's distinct package names (*n of them) and their ids in
 * the cache, into st->names. Returns how many must be asked of the
 * registry. */
static size_t begin_resolve(store_t *st, const batch_t *b, size_t *n)
{
    size_t need = b->count ? b->count : 1;
    if (st->names.cap < need) {
        st->names.list = realloc(st->names.list, 2 * need * sizeof *st->names.list);
        st->names.of = realloc(st->names.of, need * sizeof *st->names.of);
        st->names.ids = realloc(st->names.ids, need * sizeof *st->names.ids);
        st->names.stale = realloc(st->names.stale, need * sizeof *st->names.stale);
        if (!st->names.list || !st->names.of || !st->names.ids || !st->names.stale) abort();
        st->names.cap = need;
    }
    *n = batch_package_names(b, st->names.list, st->names.of);
    return app_cache_begin(st->apps, st->names.list, *n, clock_now_ms(), st->names.ids, st->names.stale);
}

int store_resolve(store_t *st, batch_t *b, char *err, size_t errlen, error_class_t *cls)
{
    char *literal = NULL;
    int rc = -1;
    size_t n;

    /* A resolve (of this batch or the one in flight, whose retry may have
     * learnt new ids) ends any batch prepared ahead: it is resolved again. */
    st->prepared.batch = NULL;
    store_arm_deadline(st);
    size_t k = begin_resolve(st, b, &n);

    if (k > 0) {
        if (store_connect(st, err, errlen, cls)) goto out;
        const char **asked = st->names.list + n;
        for (size_t i = 0; i < k; i++) asked[i] = st->names.list[st->names.stale[i]];
        literal = db_array_literal(asked, NULL, k);
        const char *params[1] = {literal};
        /* No is_active filter: a soft-deleted app still gets its
         * already-produced data stored. */
        PGresult *res = db_query(st->conn, st->def->lookup_sql,
                                 1, params, NULL, NULL, st->deadline, err, errlen, cls);
        if (!res) goto out;
        /* Stamped with the time of the answer: the TTL counts from when the
         * registry said so, however long the query waited. */
        int64_t answered = clock_now_ms();
        for (int r = 0; r < PQntuples(res); r++)
            app_cache_answer(st->apps, PQgetvalue(res, r, 0), strtoll(PQgetvalue(res, r, 1), NULL, 10),
                             answered);
        PQclear(res);
        /* What the registry did not answer is absent: unregistered_app. */
        for (size_t i = 0; i < k; i++) st->names.ids[st->names.stale[i]] = app_cache_lookup(st->apps, asked[i]);
    }
    batch_bind(b, st->names.of, st->names.ids);
    rc = 0;
out:
    if (rc) st->deadline = 0;
    free(literal);
    return rc;
}

bool store_prepared(const store_t *st, const batch_t *b)
{
    return st->prepared.batch == b && st->prepared.generation == b->generation;
}

bool store_prepare(store_t *st, batch_t *b)
{
    st->prepared.batch = NULL;
    size_t n;
    if (begin_resolve(st, b, &n) > 0) return false; /* the registry is asked in turn, by store_resolve */
    batch_bind(b, st->names.of, st->names.ids);
    batch_deduplicate(b);
    st->prepared.batch = b;
    st->prepared.generation = b->generation;
    st->prepared.rows = 0;
    st->prepared.copy.len = 0;
    st->order = realloc(st->order, (b->count ? b->count : 1) * sizeof *st->order);
    if (!st->order) abort();
    for (size_t i = 0; i < b->count; i++)
        if (b->entries[i].state == ENTRY_EVENT) st->order[st->prepared.rows++] = i;
    batch_sort_by_key(b, st->order, st->prepared.rows);
    for (size_t k = 0; k < st->prepared.rows; k++) copy_row_text(&st->prepared.copy, b, &b->entries[st->order[k]]);
    return true;
}
