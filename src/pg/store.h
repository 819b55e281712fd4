/* store — a pipeline's PostgreSQL side: resolve package names, write a
 * batch's rows and dead letters in one transaction.
 *
 * Each pipeline owns its store (its connection, its staging table, its
 * application cache); nothing here is shared between threads. */
#ifndef STORAGE_STORE_H
#define STORAGE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/batch.h"
#include "core/retry.h"
#include "pg/db.h"
#include "settings.h"

typedef struct store store_t;

/* A store for `def`. Does not connect yet. The settings must outlive it. */
store_t *store_new(const settings_t *s, const pipeline_def_t *def);
void store_free(store_t *st);

/* Record, in every batch's transaction that commits, the next offset of
 * each partition the batch covers for consumer group `group`
 * (pg/offsets.h): the pipeline's stores do, redrive's does not. */
void store_record_progress(store_t *st, const char *group);

/* The database's positions of partitions 0..n-1 of `topic` for the group
 * store_record_progress named into next[p] (-1: none), on a connection of
 * its own (this may run in a rebalance callback while the store's
 * connection waits for a COMMIT), within one database attempt. Returns 0,
 * or -1 with `err` and *cls set. */
int store_read_progress(store_t *st, const char *topic, int n, int64_t *next, char *err, size_t errlen,
                        error_class_t *cls);

/* Record the positions a member starts at where the database had none
 * (offsets_record_starts, for the store_record_progress group), within one
 * database attempt. Returns 0, or -1 with `err` and *cls set. */
int store_record_starts(store_t *st, const char *topic, int n, const int64_t *next, char *err, size_t errlen,
                        error_class_t *cls);

/* Resolve the batch's package names to application ids — one query for the
 * whole batch, through the per-thread TTL cache, never caching an absence —
 * and bind them (unregistered apps become dead letters). Connects first if
 * needed. Returns 0, or -1 with `err` and *cls set. */
int store_resolve(store_t *st, batch_t *b, char *err, size_t errlen, error_class_t *cls);

/* What store_resolve and the de-duplication do, and the COPY text of the
 * events written ahead, while the store's connection may be busy with
 * another batch (the one in flight): possible only when every package name
 * of the batch is fresh in the application cache, which never asks the
 * database. Returns true when the batch is resolved and de-duplicated (its
 * first store_write_start then sends the text written here), false when the
 * registry must be asked. */
bool store_prepare(store_t *st, batch_t *b);

/* Whether `b` (as decoded now) is still prepared: a store_resolve of any
 * batch since (the in-flight one's retry may have learnt that a cached id
 * is gone) or an attempt to write it ends that. When false, resolve and
 * de-duplicate it as any batch. */
bool store_prepared(const store_t *st, const batch_t *b);

/* Run inside a batch's transaction, on the store's connection, by the
 * attempt's deadline (`deadline_ms`, which the store's own statements keep
 * too), after the dead letters and the COPY of the events and before the
 * upsert and the end of the transaction are sent; `commit` false ends it with ROLLBACK instead
 * of COMMIT (a dry run that still learns what the database would refuse and
 * fills the counts as if committed). fn sees every entry in the state it is
 * stored in if the transaction succeeds; when the database refuses a record,
 * the store rolls back, rejects the record and runs fn again in a fresh
 * transaction. fn returns 0, or -1 with `err` and *cls set: the transaction
 * is rolled back (a data-class error of fn is reported as fatal: it is not a
 * record to isolate). Dead-letter redrive marks its dead letters resolved
 * with one (pg/dead_letters.h). */
typedef struct {
    int (*fn)(void *ctx, db_conn_t *conn, int64_t deadline_ms, const batch_t *b, char *err, size_t errlen,
              error_class_t *cls);
    void *ctx;
    bool commit;
} store_hook_t;

/* Write the batch in one transaction: BEGIN, its dead letters, the COPY of
 * its events into the stage, `hook` (NULL: none, and COMMIT), then one bulk
 * upsert and COMMIT. A data-class error (SQLSTATE class 22/23, 54001) is
 * narrowed down to the offending record(s): the transaction is rolled back
 * and a second one upserts the events first, under savepoints, so the
 * records the database refuses join the dead letters written after them
 * (with the database's message) while the rest are written. Fills *counts. Returns 0 once COMMIT succeeded, or -1
 * with `err` and *cls set (nothing committed, or — when the connection broke
 * during COMMIT — unknown: the upserts are idempotent, so the caller
 * retries). */
int store_write(store_t *st, batch_t *b, const store_hook_t *hook, batch_counts_t *counts, char *err,
                size_t errlen, error_class_t *cls);

/* store_write in two halves, so the caller can work while PostgreSQL does:
 * start sends BEGIN, the dead letters and the COPY of the events, runs the
 * hook, then sends the upsert and COMMIT without waiting; finish waits for
 * them (and, on a data-class error, isolates the offending records
 * synchronously). Between the two, nothing else may use the store. Same
 * return conventions as store_write; after a failed start, do not call
 * finish. */
int store_write_start(store_t *st, batch_t *b, const store_hook_t *hook, char *err, size_t errlen,
                      error_class_t *cls);
int store_write_finish(store_t *st, batch_t *b, batch_counts_t *counts, char *err, size_t errlen,
                       error_class_t *cls);

/* Whether PostgreSQL answers on the store's connection (connecting first
 * if needed): `SELECT 1` within one database attempt. For an idle
 * pipeline, so /readyz knows PostgreSQL went away before a batch finds out
 * (DESIGN.md: Probes and metrics). Returns 0, or -1 with `err` and *cls set
 * and the connection dropped. */
int store_ping(store_t *st, char *err, size_t errlen, error_class_t *cls);

/* The unresolved dead letters of `topic` by error type into counts[n]:
 * counts[i] for decode_error_types[i], counts[n - 1] for any other type
 * (n is DECODE_ERROR_TYPE_COUNT + 1). On the store's connection, within
 * one database attempt: the status page's snapshot (DESIGN.md: Status
 * page). Returns 0, or -1 with `err` and *cls set and the connection
 * dropped. */
int store_unresolved_dead_letters(store_t *st, const char *topic, int64_t *counts, size_t n, char *err,
                                  size_t errlen, error_class_t *cls);

/* Drop the connection (after a transient error); the next call reconnects. */
void store_disconnect(store_t *st);

#endif
