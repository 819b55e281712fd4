/* A pipeline's batch written: its attempts, each one transaction ending with
 * the batch's positions and COMMIT, sent before they are waited for
 * (DESIGN.md: The batch loop, The write path). The connection, resolving and
 * the batch prepared ahead are store.c's. */
#include "pg/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/app_cache.h"
#include "core/clock.h"
#include "log.h"
#include "pg/dead_letters.h"
#include "pg/offsets.h"
#include "pg/probe.h"
#include "pg/tombstones.h"
#include "pg/store_internal.h"

/* The COPY text of the entries pending[0..n), into st->copy. */
static void copy_text(store_t *st, const batch_t *b, const size_t *pending, size_t n)
{
    st->copy.len = 0;
    for (size_t k = 0; k < n; k++) copy_row_text(&st->copy, b, &b->entries[pending[k]]);
}

/* COPY the entries pending[0..n) into the stage. Returns 0 or -1 with
 * err/cls. */
static int copy_chunk(store_t *st, batch_t *b, const size_t *pending, size_t n, char *err,
                      size_t errlen, error_class_t *cls)
{
    copy_text(st, b, pending, n);
    return db_copy_in(st->conn, st->copy_sql, st->copy.data, st->copy.len, st->deadline, err, errlen,
                      cls);
}

/* COPY the events pending[0..n) into the stage: the text store_prepare
 * wrote if it is this batch's (the buffers trade places), else written now.
 * `fused` (NULL: none) is the query that carries the COPY with statements
 * around it, whose results are left for the caller to collect. */
static int copy_events(store_t *st, batch_t *b, size_t n, const char *fused, char *err, size_t errlen,
                       error_class_t *cls)
{
    if (store_prepared(st, b) && st->prepared.rows == n) {
        copy_buf_t text = st->prepared.copy;
        st->prepared.copy = st->copy;
        st->copy = text;
    } else {
        /* In key order, as store_prepare writes it (DESIGN.md: The write path). */
        batch_sort_by_key(b, st->pending, n);
        copy_text(st, b, st->pending, n);
    }
    if (fused) return db_copy_send(st->conn, fused, st->copy.data, st->copy.len, st->deadline, err, errlen, cls);
    /* Only the fused query COPYs straight into the table (send_one_query). */
    return db_copy_in(st->conn, st->copy_sql, st->copy.data, st->copy.len, st->deadline, err, errlen, cls);
}

/* Count the upsert's RETURNING (xmax = 0) rows: inserted or updated; the
 * rest of the n staged rows were skipped — a redelivery (DO NOTHING) or an
 * older observation (the last_synced_at guard). */
static void count_upsert(const PGresult *res, size_t n, batch_counts_t *counts)
{
    size_t returned = (size_t)PQntuples(res);
    for (size_t r = 0; r < returned; r++) {
        if (PQgetvalue(res, (int)r, 0)[0] == 't') counts->inserted++;
        else counts->updated++;
    }
    counts->skipped += n - returned;
}

/* COPY the entries pending[0..n) into the stage and upsert them. Adds to
 * *counts. Returns 0 or -1 with err/cls. */
static int write_chunk(store_t *st, batch_t *b, const size_t *pending, size_t n,
                       batch_counts_t *counts, char *err, size_t errlen, error_class_t *cls)
{
    if (copy_chunk(st, b, pending, n, err, errlen, cls)) return -1;
    PGresult *res = db_query(st->conn, st->insert_sql, 0, NULL, NULL, NULL, st->deadline, err, errlen, cls);
    if (!res) return -1;
    count_upsert(res, n, counts);
    PQclear(res);
    return 0;
}

static int exec_simple(store_t *st, const char *sql, char *err, size_t errlen, error_class_t *cls)
{
    return db_command(st->conn, sql, st->deadline, err, errlen, cls);
}

/* A batch's transaction begins. A table with a DEFERRABLE constraint has
 * it fire at each statement, not at COMMIT, so that the isolation of a
 * refused row can find the row (DESIGN.md: Errors). */
static const char *begin_sql(const store_t *st)
{
    return st->def->deferrable ? "BEGIN; SET CONSTRAINTS ALL IMMEDIATE" : "BEGIN";
}

/* On a table with row-level security, 42501 is a policy's WITH CHECK
 * refusing one row's values as well as a privilege revoked from the role:
 * taken for data, it is isolated, and policy_refused then tells the two
 * apart for the one row (DESIGN.md: Errors). */
static void class_of_policy(const store_t *st, const char *err, error_class_t *cls)
{
    char state[6];
    const char *sqlstate = retry_sqlstate_of(err, state);
    if (st->def->row_security && sqlstate && strcmp(sqlstate, "42501") == 0) *cls = ERROR_CLASS_DATA;
}

/* After one row alone met 42501 on a table with row-level security: 1 when
 * the role may still INSERT every column the pipeline writes (a policy
 * refused the row), 0 when it may not (a privilege was revoked: no row
 * could be stored, so the pipeline fails), -1 with err/cls. */
static int policy_refused(store_t *st, char *err, size_t errlen, error_class_t *cls)
{
    const char **cols = calloc(st->def->field_count + 1, sizeof *cols);
    if (!cols) abort();
    size_t n = 0;
    if (st->def->app_column) cols[n++] = st->def->app_column;
    for (size_t i = 0; i < st->def->field_count; i++) cols[n++] = st->def->fields[i].column;
    char *names = db_array_literal(cols, NULL, n);
    const char *params[] = {st->def->table_sql, names};
    PGresult *res = db_query(st->conn,
                             "SELECT bool_and(has_column_privilege(a.attrelid, a.attnum, 'INSERT')) "
                             "FROM pg_attribute a WHERE a.attrelid = to_regclass($1) AND a.attname = ANY($2::text[])",
                             2, params, NULL, NULL, st->deadline, err, errlen, cls);
    free(names);
    free(cols);
    if (!res) return -1;
    int refused = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    return refused;
}

/* Whether the constraint the last error named is a foreign key on the
 * application's column: the application was deleted under the batch. */
static bool names_app_foreign_key(const pipeline_def_t *def, const char *constraint)
{
    for (size_t i = 0; i < def->app_foreign_count; i++)
        if (strcmp(def->app_foreign_keys[i], constraint) == 0) return true;
    return false;
}

/* Whether event i is stored at its version or a newer one (for a pipeline
 * without a version: stored at all), asked by the probe under a savepoint
 * of its own (a key the probe's casts refuse is not stored). Returns 1, 0,
 * or -1 with err/cls. */
static int stored_at_its_version(store_t *st, const batch_t *b, size_t i, char *err, size_t errlen,
                                 error_class_t *cls)
{
    char why[1024];
    bool stored[1] = {false};
    size_t one = 0;
    if (exec_simple(st, "SAVEPOINT storage_probe_one", err, errlen, cls)) return -1;
    long found = -1;
    if (probe_send(st->conn, &st->probe_prepared, st->deadline, b, &i, 1, why, sizeof why, cls) == 0)
        found = probe_collect(st->conn, st->deadline, &one, 1, stored, why, sizeof why, cls);
    if (found < 0 && *cls != ERROR_CLASS_DATA) {
        snprintf(err, errlen, "%s", why);
        return -1;
    }
    if (exec_simple(st, found < 0 ? "ROLLBACK TO SAVEPOINT storage_probe_one; RELEASE SAVEPOINT storage_probe_one"
                                  : "RELEASE SAVEPOINT storage_probe_one",
                    err, errlen, cls))
        return -1;
    return found > 0;
}

/* The database refused event i's row alone, with `why` (the savepoint
 * rolled back). A row whose key is stored at its version or a newer one
 * is skipped, as the guard (or DO NOTHING) would have skipped it had
 * PostgreSQL not checked the table's constraints first: whether a value
 * is judged refused or older must not depend on whether the probe asked
 * (DESIGN.md: The write path). Any other is dead-lettered with the
 * database's words; *rejected says which. Returns 0, or -1 with err/cls. */
static int refused_row(store_t *st, batch_t *b, size_t i, const char *why, const char *constraint,
                       batch_counts_t *counts, bool *rejected, char *err, size_t errlen, error_class_t *cls)
{
    char detail[1200];
    *rejected = false;
    if (strncmp(why, "23503:", 6) == 0 && names_app_foreign_key(st->def, constraint)) {
        /* The row's application_id is gone: the app was deleted after
         * the batch was resolved (or its cached id is older than a
         * delete and a new registration). Not the record's fault: the
         * batch is resolved again, and then stored under the app's new
         * id, or dead-lettered as unregistered_app. Any other foreign
         * key (the table's own) is the row's: a dead letter below. */
        const char *name = event_package_name(&b->entries[i].event);
        app_cache_forget(st->apps, name);
        snprintf(err, errlen, "the application registry changed under the batch (%s was resolved to an id that no longer exists): resolving it again",
                 name);
        *cls = ERROR_CLASS_TRANSIENT;
        return -1;
    }
    if (strncmp(why, "42501:", 6) == 0) {
        int refused = policy_refused(st, err, errlen, cls);
        if (refused < 0) return -1;
        if (!refused) {
            snprintf(err, errlen, "%s", why);
            *cls = ERROR_CLASS_FATAL;
            return -1;
        }
    }
    int stored = stored_at_its_version(st, b, i, err, errlen, cls);
    if (stored < 0) return -1;
    if (stored) {
        counts->skipped++;
        return 0;
    }
    snprintf(detail, sizeof detail, "the database refused the row: %s", why);
    batch_reject(b, i, ERROR_DATABASE_REJECTED, detail);
    *rejected = true;
    return 0;
}

/* Narrow a data error down: write halves under savepoints until the
 * offending records stand alone, then reject them with the database's
 * message. Returns 0, or -1 on a non-data error. */
static int isolate(store_t *st, batch_t *b, const size_t *pending, size_t n, batch_counts_t *counts,
                   char *err, size_t errlen, error_class_t *cls)
{
    char why[1024], constraint[64];
    batch_counts_t part = {0};

    if (n == 0) return 0;
    if (exec_simple(st, "SAVEPOINT storage_isolate", err, errlen, cls)) return -1;
    int rc = write_chunk(st, b, pending, n, &part, why, sizeof why, cls);
    snprintf(constraint, sizeof constraint, "%s", db_error_constraint());
    if (rc) class_of_policy(st, why, cls);
    if (rc == 0) {
        counts->inserted += part.inserted;
        counts->updated += part.updated;
        counts->skipped += part.skipped;
        return exec_simple(st, "RELEASE SAVEPOINT storage_isolate; TRUNCATE pg_temp.storage_stage", err,
                           errlen, cls);
    }
    if (*cls != ERROR_CLASS_DATA) {
        snprintf(err, errlen, "%s", why);
        return -1;
    }
    /* After an error PostgreSQL refuses every statement (25P02) until the
     * savepoint is rolled back. */
    if (exec_simple(st, "ROLLBACK TO SAVEPOINT storage_isolate; RELEASE SAVEPOINT storage_isolate",
                    err, errlen, cls))
        return -1;
    if (n == 1) {
        bool rejected;
        if (refused_row(st, b, pending[0], why, constraint, counts, &rejected, err, errlen, cls)) return -1;
        /* The observations of its key it superseded take its place, one at
         * a time, until one is stored or all are dead-lettered. */
        size_t promoted;
        if (rejected && batch_promote(b, pending[0], &promoted))
            return isolate(st, b, &promoted, 1, counts, err, errlen, cls);
        return 0;
    }
    size_t half = n / 2;
    if (isolate(st, b, pending, half, counts, err, errlen, cls)) return -1;
    return isolate(st, b, pending + half, n - half, counts, err, errlen, cls);
}

/* After a failure: leave the transaction, if the connection can still be
 * used before the deadline (else it is dropped before the retry anyway). */
static void roll_back(store_t *st)
{
    char why[1024];
    if (PQstatus(st->conn) == CONNECTION_OK && clock_now_ms() < st->deadline)
        db_command(st->conn, "ROLLBACK", st->deadline, why, sizeof why, NULL);
}

/* The entries to upsert, in batch order, into st->pending: the events the
 * probe did not find stored. Returns how many. */
static size_t fill_pending(store_t *st, const batch_t *b)
{
    size_t n = 0;
    for (size_t i = 0; i < b->count; i++)
        if (b->entries[i].state == ENTRY_EVENT && !st->stored[i]) st->pending[n++] = i;
    return n;
}

/* Whether one of the n pending events lacks a member whose column takes
 * its default (field_spec_t: default_sql): COPY would write NULL there. */
static bool needs_defaults(const store_t *st, const batch_t *b, size_t n)
{
    if (!st->has_defaults) return false;
    for (size_t k = 0; k < n; k++)
        for (size_t i = 0; i < st->def->field_count; i++)
            if (st->def->fields[i].default_sql && !event_column(&b->entries[st->pending[k]].event, i)) return true;
    return false;
}

static bool has_state(const batch_t *b, entry_state_t state)
{
    for (size_t i = 0; i < b->count; i++)
        if (b->entries[i].state == state) return true;
    return false;
}

/* Apply the tombstones idx[0..n) (DESIGN.md: Pipelines are declared,
 * tombstones): one statement deletes, or marks, the rows of their keys.
 * Adds the rows it changed to *changed. Returns 0, or -1 with err/cls. */
static int apply_tombstones(store_t *st, const batch_t *b, const size_t *idx, size_t n, size_t *changed, char *err,
                            size_t errlen, error_class_t *cls)
{
    const pipeline_def_t *def = st->def;
    char *params[PIPELINE_MAX_KEY + 1] = {NULL};
    const char **texts = calloc(n ? n : 1, sizeof *texts);
    int64_t *ts = calloc(n ? n : 1, sizeof *ts);
    int np = 0;
    if (!texts || !ts) abort();
    for (size_t k = 0; k < def->key_count; k++) {
        for (size_t j = 0; j < n; j++) texts[j] = event_column(&b->entries[idx[j]].event, (size_t)def->key_fields[k]);
        params[np++] = db_array_literal(texts, NULL, n);
    }
    if (def->tombstones == TOMBSTONE_MARK) {
        for (size_t j = 0; j < n; j++) ts[j] = b->records[idx[j]].timestamp_ms;
        params[np++] = db_array_literal(NULL, ts, n);
    }
    PGresult *res = db_query(st->conn, def->tombstone_sql, np, (const char *const *)params, NULL, NULL, st->deadline,
                             err, errlen, cls);
    for (int i = 0; i < np; i++) free(params[i]);
    free(texts);
    free(ts);
    if (!res) return -1;
    *changed += strtoul(PQcmdTuples(res), NULL, 10);
    PQclear(res);
    /* Remembered with the rows they changed, for redrive (DESIGN.md:
     * Resolving dead letters). */
    return tombstones_remember(st->conn, st->deadline, b, idx, n, err, errlen, cls);
}

/* Which standing tombstones a statement applies: all (deletes), or the
 * marks before or after their keys' values are written (entry_t:
 * mark_first). */
typedef enum { TOMBSTONES_ALL, MARKS_FIRST, MARKS_AFTER } tombstone_phase_t;

/* The standing tombstones of the batch that `phase` names, in one
 * statement. Returns 0, or -1 with err/cls. */
static int tombstones(store_t *st, batch_t *b, tombstone_phase_t phase, char *err, size_t errlen, error_class_t *cls)
{
    size_t n = 0, *idx = malloc((b->count ? b->count : 1) * sizeof *idx);
    if (!idx) abort();
    for (size_t i = 0; i < b->count; i++) {
        const entry_t *e = &b->entries[i];
        if (e->state == ENTRY_TOMBSTONE && (phase == TOMBSTONES_ALL || e->mark_first == (phase == MARKS_FIRST)))
            idx[n++] = i;
    }
    int rc = n ? apply_tombstones(st, b, idx, n, &st->done.deleted, err, errlen, cls) : 0;
    free(idx);
    return rc;
}

/* After the database refused a record of a key with a tombstone in the
 * batch: that key's records, each alone under a savepoint, in record
 * order, as the documented rules apply them one by one (DESIGN.md:
 * Pipelines are declared, tombstones) — the in-batch reduction cannot know
 * what a refusal gives back. A record the table refuses is dead-lettered
 * with the database's words (a value whose key is stored at its version or
 * a newer one is skipped: refused_row), and the next record of its key
 * meets the row as that refusal left it. Returns 0, or -1 with err/cls. */
static int apply_one_by_one(store_t *st, batch_t *b, char *err, size_t errlen, error_class_t *cls)
{
    for (size_t i = 0; i < b->count; i++) {
        entry_t *e = &b->entries[i];
        if (!e->with_tombstone || e->state == ENTRY_REJECTED) continue;
        char why[1024], constraint[64];
        bool tomb = e->tombstone;
        if (st->stored[i]) {
            /* Probed stored: judged again here, counted once. */
            st->stored[i] = false;
            st->done.skipped--;
            st->done.skipped_by_probe--;
        }
        e->state = tomb ? ENTRY_TOMBSTONE : ENTRY_EVENT;
        if (exec_simple(st, "SAVEPOINT storage_one", err, errlen, cls)) return -1;
        int rc = tomb ? apply_tombstones(st, b, &i, 1, &st->done.deleted, why, sizeof why, cls)
                      : write_chunk(st, b, &i, 1, &st->done, why, sizeof why, cls);
        snprintf(constraint, sizeof constraint, "%s", db_error_constraint());
        if (rc == 0) {
            if (exec_simple(st, tomb ? "RELEASE SAVEPOINT storage_one"
                                     : "RELEASE SAVEPOINT storage_one; TRUNCATE pg_temp.storage_stage",
                            err, errlen, cls))
                return -1;
            continue;
        }
        if (!tomb) class_of_policy(st, why, cls);
        if (*cls != ERROR_CLASS_DATA) {
            snprintf(err, errlen, "%s", why);
            return -1;
        }
        if (exec_simple(st, "ROLLBACK TO SAVEPOINT storage_one; RELEASE SAVEPOINT storage_one", err, errlen, cls))
            return -1;
        if (tomb) {
            /* Another table's foreign key pointing at the row, a
             * trigger: the row stays as it was. */
            char detail[1200];
            snprintf(detail, sizeof detail, "the database refused the tombstone: %s", why);
            batch_reject(b, i, ERROR_DATABASE_REJECTED, detail);
            continue;
        }
        bool rejected;
        if (refused_row(st, b, i, why, constraint, &st->done, &rejected, err, errlen, cls)) return -1;
    }
    return 0;
}

/* The end of an attempt's transaction: the upsert of the n staged events
 * (if any), then the batch's position — after the rows, so every
 * transaction takes its row locks in one order: dead letters, rows,
 * positions — then COMMIT, or ROLLBACK for a hook that does not commit. */
static char *end_sql(store_t *st, const batch_t *b, const store_hook_t *hook, size_t n)
{
    char *advance = hook->commit && st->progress_group
                        ? offsets_advance_sql(st->conn, st->progress_group, b, st->epochs, st->epoch_topics)
                        : NULL;
    char *sql;
    if (asprintf(&sql, "%s%s%s%s%s", n ? st->insert_sql : "", n ? "; " : "", advance ? advance : "",
                 advance ? "; " : "", hook->commit ? "COMMIT" : "ROLLBACK") < 0)
        abort();
    free(advance);
    return sql;
}

/* An attempt is sent one of three ways, each a transaction ending with the
 * batch's position and COMMIT, whose last part wait_attempt collects (the
 * state kept between the two: st->in_flight, and the counts in st->done).
 * Each returns 0, or -1 with err/cls, the transaction left to roll back. */

/* The usual batch, events alone: one query, BEGIN; COPY into the stage; the
 * upsert; the position; COMMIT (DESIGN.md: The batch loop). Only the COPY's
 * start is waited for. A batch predicted new (st->direct) is COPYed straight
 * into the table instead, with no upsert. */
static int send_one_query(store_t *st, batch_t *b, const store_hook_t *hook, size_t n, char *err, size_t errlen,
                          error_class_t *cls)
{
    char *end = end_sql(st, b, hook, st->direct ? 0 : n), *query;
    if (asprintf(&query, "%s; %s%s%s", begin_sql(st), n ? (st->direct ? st->direct_sql : st->copy_sql) : "",
                 n ? "; " : "", end) < 0)
        abort();
    /* With every event found stored, only the position is left to commit. */
    int rc = n ? copy_events(st, b, n, query, err, errlen, cls)
               : db_send(st->conn, query, st->deadline, err, errlen, cls);
    free(query);
    free(end);
    return rc;
}

/* The hook (a redrive's resolutions), then the end of the transaction
 * (the upsert of the n staged events first), sent without waiting. */
static int send_end(store_t *st, batch_t *b, const store_hook_t *hook, size_t n, char *err, size_t errlen,
                    error_class_t *cls)
{
    if (hook->fn && hook->fn(hook->ctx, st->conn, st->deadline, b, err, errlen, cls) != 0) {
        if (*cls == ERROR_CLASS_DATA) *cls = ERROR_CLASS_FATAL;
        return -1;
    }
    char *end = end_sql(st, b, hook, n);
    int rc = db_send(st->conn, end, st->deadline, err, errlen, cls);
    free(end);
    return rc;
}

/* A batch with dead letters, tombstones, or a hook: step by step, BEGIN;
 * the dead letters (an extended-protocol query, which cannot join a simple
 * one); the tombstones that delete, before the values after them; the
 * COPY; then send_end — or, for tombstones that mark, the marks that go
 * before their keys' values, the upsert waited for, the marks after them,
 * then send_end (batch_deduplicate: what applying each key's records one
 * by one would leave). */
static int send_step_by_step(store_t *st, batch_t *b, const store_hook_t *hook, size_t n, char *err,
                             size_t errlen, error_class_t *cls)
{
    bool mark = st->def->tombstones == TOMBSTONE_MARK && has_state(b, ENTRY_TOMBSTONE);
    if (exec_simple(st, begin_sql(st), err, errlen, cls) ||
        dead_letters_write(st->conn, st->deadline, b, &st->done.dead_lettered, err, errlen, cls) ||
        tombstones(st, b, mark ? MARKS_FIRST : TOMBSTONES_ALL, err, errlen, cls) ||
        (n && copy_events(st, b, n, NULL, err, errlen, cls)))
        return -1;
    if (!mark) return send_end(st, b, hook, n, err, errlen, cls);
    /* Marks after the values they mark: the upsert waited for here. */
    if (n) {
        PGresult *res = db_query(st->conn, st->insert_sql, 0, NULL, NULL, NULL, st->deadline, err, errlen, cls);
        if (!res) return -1;
        count_upsert(res, n, &st->done);
        PQclear(res);
    }
    if (tombstones(st, b, MARKS_AFTER, err, errlen, cls)) return -1;
    return send_end(st, b, hook, 0, err, errlen, cls);
}

/* After the database refused a record: BEGIN; the keys with a tombstone
 * in the batch record by record (apply_one_by_one); the events of the
 * other keys upserted in halves under savepoints (isolate); so the records
 * it refuses join the dead letters written after them; the dead letters;
 * then send_end with nothing left to upsert. */
static int send_isolating(store_t *st, batch_t *b, const store_hook_t *hook, size_t n, char *err, size_t errlen,
                          error_class_t *cls)
{
    size_t values = 0;
    for (size_t k = 0; k < n; k++)
        if (!b->entries[st->pending[k]].with_tombstone) st->pending[values++] = st->pending[k];
    if (exec_simple(st, begin_sql(st), err, errlen, cls) || apply_one_by_one(st, b, err, errlen, cls) ||
        isolate(st, b, st->pending, values, &st->done, err, errlen, cls) ||
        dead_letters_write(st->conn, st->deadline, b, &st->done.dead_lettered, err, errlen, cls))
        return -1;
    return send_end(st, b, hook, 0, err, errlen, cls);
}

/* One attempt, sent the way the batch needs; `isolating`: after a data error. */
static int send_attempt(store_t *st, batch_t *b, const store_hook_t *hook, bool isolating, char *err,
                        size_t errlen, error_class_t *cls)
{
    size_t n = fill_pending(st, b), upserted_at_the_end = isolating ? 0 : n;
    int rc;

    memset(&st->done, 0, sizeof st->done);
    st->done.skipped = st->done.skipped_by_probe = st->probed;
    st->direct = false;
    if (isolating) {
        rc = send_isolating(st, b, hook, n, err, errlen, cls);
    } else if (!hook->fn && !has_state(b, ENTRY_REJECTED) && !has_state(b, ENTRY_TOMBSTONE)) {
        st->direct = st->direct_next && !st->copy_refused && !st->def->row_security && n > 0 && st->probed == 0 &&
                     !needs_defaults(st, b, n);
        if (st->direct) upserted_at_the_end = 0;
        rc = send_one_query(st, b, hook, n, err, errlen, cls);
    } else {
        /* Marks are written after the upsert, which is then waited for. */
        if (st->def->tombstones == TOMBSTONE_MARK && has_state(b, ENTRY_TOMBSTONE)) upserted_at_the_end = 0;
        rc = send_step_by_step(st, b, hook, n, err, errlen, cls);
    }
    /* Only a first attempt uses the text prepared ahead: a later one may have
     * rejected records meanwhile. */
    if (st->prepared.batch == b) st->prepared.batch = NULL;
    if (rc == 0) {
        st->in_flight.active = true;
        st->in_flight.rows = upserted_at_the_end;
        st->in_flight.hook = *hook;
        st->in_flight.left_ms = st->deadline - clock_now_ms();
    }
    return rc;
}

/* Wait for what send_attempt sent: the upsert's rows are counted into
 * st->done. Returns 0 once the transaction ended, or -1 with err/cls. */
static int wait_attempt(store_t *st, char *err, size_t errlen, error_class_t *cls)
{
    PGresult *res;
    bool failed = false, timed_out;

    st->in_flight.active = false;
    while ((res = db_result(st->conn, st->deadline, &timed_out, err, errlen))) {
        ExecStatusType status = PQresultStatus(res);
        if (!failed && status == PGRES_TUPLES_OK && PQnfields(res) == 1 &&
            strcmp(PQfname(res, 0), OFFSETS_FENCE_COLUMN) == 0) {
            /* The positions moved, fenced (offsets_advance_sql). */
        } else if (!failed && status == PGRES_TUPLES_OK) {
            count_upsert(res, st->in_flight.rows, &st->done);
        } else if (!failed && status == PGRES_COMMAND_OK && st->direct && strncmp(PQcmdStatus(res), "COPY ", 5) == 0) {
            size_t copied = strtoul(PQcmdTuples(res), NULL, 10);
            st->done.inserted += copied;
            st->done.inserted_by_copy += copied;
        } else if (!failed && status != PGRES_COMMAND_OK) {
            db_describe(st->conn, res, err, errlen);
            *cls = db_classify(st->conn, res);
            class_of_policy(st, err, cls);
            failed = true;
        }
        PQclear(res);
    }
    if (timed_out) {
        /* Outcome unknown, as below. */
        *cls = ERROR_CLASS_TRANSIENT;
        return -1;
    }
    if (!failed && PQstatus(st->conn) != CONNECTION_OK) {
        /* The connection broke before COMMIT answered: outcome unknown, and
         * the idempotent upsert makes the retry safe. */
        db_describe(st->conn, NULL, err, errlen);
        *cls = ERROR_CLASS_TRANSIENT;
        return -1;
    }
    return failed ? -1 : 0;
}

/* After a failed attempt: leave its transaction and, when the database
 * refused a value (a data-class error), isolate the offending records in a
 * second attempt, waited for at once. Returns 0, or -1 with err/cls. */
static int isolate_and_retry(store_t *st, batch_t *b, const store_hook_t *hook, char *err, size_t errlen,
                             error_class_t *cls)
{
    roll_back(st);
    if (*cls != ERROR_CLASS_DATA) return -1;
    char state[6];
    LOG_WARN_F(st->def->name, LOG_FIELDS(LF_STR("sqlstate", retry_sqlstate_of(err, state)), LF_STR("error", err)),
               "batch refused by the database: isolating the offending records");
    int rc = send_attempt(st, b, hook, true, err, errlen, cls);
    if (rc == 0) rc = wait_attempt(st, err, errlen, cls);
    if (rc != 0) roll_back(st);
    return rc;
}

/* After a failed attempt. One that COPYed straight into the table met a
 * stored key, or one a concurrent writer stored first (23505, or a deadlock
 * with it), or a value the table refuses: the batch is written again at once
 * by the guarded upsert, which judges every row, and isolates refused values
 * if it must; the next batches earn COPY back more slowly. A table that
 * refuses COPY FROM itself (0A000: row-level security the catalog did not
 * show, as a policy added while the service runs) is written by the upsert
 * from then on. Any other attempt: isolate_and_retry. Returns 0, or -1 with
 * err/cls. */
static int retry_after(store_t *st, batch_t *b, const store_hook_t *hook, char *err, size_t errlen,
                       error_class_t *cls)
{
    if (!st->direct) return isolate_and_retry(st, b, hook, err, errlen, cls);
    st->direct = st->direct_next = false;
    st->copy_streak = 0;
    st->copy_need = st->copy_need * 2 > STORE_COPY_NEED_MAX ? STORE_COPY_NEED_MAX : st->copy_need * 2;
    char state[6];
    const char *sqlstate = retry_sqlstate_of(err, state);
    roll_back(st);
    bool refused = sqlstate && strcmp(sqlstate, "0A000") == 0;
    if (*cls != ERROR_CLASS_DATA && !refused && !(sqlstate && strcmp(sqlstate, "40P01") == 0)) return -1;
    if (refused) {
        st->copy_refused = true;
        LOG_WARN_F(st->def->name, LOG_FIELDS(LF_STR("error", err)),
                   "the table refuses COPY: writing every batch by the upsert");
    }
    LOG_DEBUG_F(st->def->name, LOG_FIELDS(LF_STR("error", err)),
                "a batch predicted new was refused by the table: writing it by the upsert");
    int rc = send_attempt(st, b, hook, false, err, errlen, cls);
    if (rc == 0) rc = wait_attempt(st, err, errlen, cls);
    if (rc != 0) rc = isolate_and_retry(st, b, hook, err, errlen, cls);
    return rc;
}

/* Ask which events of the batch are stored (probe_send), so the attempt
 * sends only the others; the answer is taken by collect_probe when the
 * batch is waited for, and the worker takes the next batch meanwhile
 * (DESIGN.md: The batch loop). Sets st->in_flight.probing when sent.
 * Returns 0, or -1 with err/cls. */
static int send_probe(store_t *st, batch_t *b, const store_hook_t *hook, char *err, size_t errlen,
                      error_class_t *cls)
{
    /* An event standing in a batch with a delete of its key stands after
     * it (batch_deduplicate): found stored now, its row is gone once the
     * delete runs, and skipping it would lose it. Such a batch is written
     * whole. */
    if (st->def->tombstones == TOMBSTONE_DELETE && has_state(b, ENTRY_TOMBSTONE)) return 0;
    size_t n = fill_pending(st, b);
    if (n == 0) return 0;
    if (probe_send(st->conn, &st->probe_prepared, st->deadline, b, st->pending, n, err, errlen, cls) != 0)
        return -1;
    st->in_flight.active = st->in_flight.probing = true;
    st->in_flight.hook = *hook;
    st->in_flight.left_ms = st->deadline - clock_now_ms();
    return 0;
}

/* The probe's answer, for the events send_probe asked about (nothing is
 * marked stored before it: fill_pending lists them again). One the
 * database refuses (a data-class error: nothing of the batch is at fault)
 * only costs the batch its shortcut. Returns 0, or -1 with err/cls. */
static int collect_probe(store_t *st, const batch_t *b, char *err, size_t errlen, error_class_t *cls)
{
    st->in_flight.active = st->in_flight.probing = false;
    long found = probe_collect(st->conn, st->deadline, st->pending, fill_pending(st, b), st->stored, err, errlen, cls);
    if (found >= 0) {
        st->probed = (size_t)found;
        return 0;
    }
    if (*cls != ERROR_CLASS_DATA) return -1;
    LOG_WARN_F(st->def->name, LOG_FIELDS(LF_STR("error", err)), "the probe of stored rows failed: writing every row");
    st->probe_next = false;
    return 0;
}

/* After an attempt failed because the batch's positions had moved on
 * (fenced: offsets_advance_sql). Where the database now holds exactly the
 * positions this batch would have moved them to, within the epochs this
 * member read, its records are stored: an earlier attempt of it committed
 * and its answer was lost (a connection broken during COMMIT), or another
 * member's batch of the same records committed first; the batch counts as
 * stored, its records skipped, and 0 returned. Otherwise the batch is not this
 * member's to write (another member owns its partitions now, or a replay
 * reset them): what this member knows of the positions becomes what the
 * database holds, and -1 returns with *cls ERROR_CLASS_FENCED, for the
 * worker to start again there (DESIGN.md: Progress in the database). */
static int after_fence(store_t *st, batch_t *b, const char *err, error_class_t *cls)
{
    char why[1024];
    error_class_t read_cls;
    batch_range_t *pos = malloc((b->count ? b->count : 1) * sizeof *pos);
    if (!pos) abort();
    size_t n = batch_ranges(b, pos);
    bool ours = true;
    int64_t deadline = clock_now_ms() + settings_db_attempt_ms(st->settings);
    for (int t = 0; t < st->epoch_topics; t++) {
        topic_epochs_t *e = &st->epochs[t];
        int64_t *next = malloc((size_t)(e->n ? e->n : 1) * sizeof *next);
        int64_t *epoch = malloc((size_t)(e->n ? e->n : 1) * sizeof *epoch);
        if (!next || !epoch) abort();
        if (store_connect(st, why, sizeof why, &read_cls) != 0 ||
            offsets_read(st->conn, deadline, st->progress_group, e->topic, e->n, next, epoch, why, sizeof why,
                         &read_cls) != 0) {
            /* Not known: the worker starts again where the database says,
             * which reads them again. */
            ours = false;
        } else {
            for (size_t k = 0; k < n; k++)
                if (strcmp(pos[k].topic, e->topic) == 0 && pos[k].partition < e->n &&
                    (next[pos[k].partition] != pos[k].last + 1 || epoch[pos[k].partition] != e->epoch[pos[k].partition]))
                    ours = false;
            memcpy(e->next, next, (size_t)e->n * sizeof *next);
            memcpy(e->epoch, epoch, (size_t)e->n * sizeof *epoch);
        }
        free(next);
        free(epoch);
    }
    free(pos);
    if (ours) {
        LOG_WARN_F(st->def->name, LOG_FIELDS(LF_STR("error", err)),
                   "the batch's positions are already where it would have moved them: its records were committed "
                   "by an earlier attempt of it, or by another member's batch of the same records");
        memset(&st->done, 0, sizeof st->done);
        st->done.skipped = b->count - batch_superseded(b);
        st->in_flight.active = false;
        return 0;
    }
    *cls = ERROR_CLASS_FENCED;
    return -1;
}

/* The first attempt, once the probe (if any) answered. */
static int send_first(store_t *st, batch_t *b, const store_hook_t *hook, char *err, size_t errlen,
                      error_class_t *cls)
{
    if (send_attempt(st, b, hook, false, err, errlen, cls) == 0) return 0;
    return retry_after(st, b, hook, err, errlen, cls);
}

int store_write_start(store_t *st, batch_t *b, const store_hook_t *hook, char *err, size_t errlen,
                      error_class_t *cls)
{
    static const store_hook_t none = {.commit = true};
    if (!hook) hook = &none;

    st->pending = realloc(st->pending, (b->count ? b->count : 1) * sizeof *st->pending);
    st->stored = realloc(st->stored, (b->count ? b->count : 1) * sizeof *st->stored);
    if (!st->pending || !st->stored) abort();
    memset(st->stored, 0, b->count * sizeof *st->stored);
    st->probed = 0;
    st->in_flight.active = st->in_flight.probing = false;
    /* The attempt began with store_resolve, which armed its deadline. */
    if (!st->deadline) store_arm_deadline(st);
    int rc = store_connect(st, err, errlen, cls);
    if (rc == 0 && st->probe_next && !hook->fn) rc = send_probe(st, b, hook, err, errlen, cls);
    if (rc == 0 && !st->in_flight.probing) rc = send_first(st, b, hook, err, errlen, cls);
    if (rc != 0 && *cls == ERROR_CLASS_FENCED) rc = after_fence(st, b, err, cls);
    if (rc != 0) st->deadline = 0;
    return rc;
}

int store_write_finish(store_t *st, batch_t *b, batch_counts_t *counts, char *err, size_t errlen,
                       error_class_t *cls)
{
    int rc = 0;
    /* The wait has what sending left of the attempt's time, from now: a
     * batch sent early waits while the one before it is committed to Kafka. */
    if (st->in_flight.active) st->deadline = clock_now_ms() + (st->in_flight.left_ms > 1 ? st->in_flight.left_ms : 1);
    store_hook_t hook = st->in_flight.hook;
    if (st->in_flight.probing) {
        rc = collect_probe(st, b, err, errlen, cls);
        if (rc == 0) rc = send_first(st, b, &hook, err, errlen, cls);
    }
    if (rc == 0 && st->in_flight.active && wait_attempt(st, err, errlen, cls) != 0)
        rc = retry_after(st, b, &hook, err, errlen, cls);
    if (rc != 0 && *cls == ERROR_CLASS_FENCED) rc = after_fence(st, b, err, cls);
    if (rc == 0 && hook.commit && st->progress_group) offsets_advanced(b, st->epochs, st->epoch_topics);
    if (rc == 0) {
        st->done.superseded = batch_superseded(b);
        *counts = st->done;
        /* Probe the next batch when this one found most of its rows stored;
         * COPY it straight into the table once enough batches in a row
         * inserted every row (struct store: copy_need). */
        st->probe_next = 2 * counts->skipped > counts->inserted + counts->updated + counts->skipped;
        bool all_new = counts->inserted > 0 && counts->updated == 0 && counts->skipped == 0;
        st->copy_streak = all_new ? st->copy_streak + 1 : 0;
        if (st->direct && st->copy_need > 1) st->copy_need--;
        st->direct_next = st->copy_streak >= st->copy_need;
    }
    st->deadline = 0; /* the attempt is over */
    return rc;
}

int store_write(store_t *st, batch_t *b, const store_hook_t *hook, batch_counts_t *counts, char *err,
                size_t errlen, error_class_t *cls)
{
    if (store_write_start(st, b, hook, err, errlen, cls)) return -1;
    return store_write_finish(st, b, counts, err, errlen, cls);
}
