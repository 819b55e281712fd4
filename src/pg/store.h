/* store — a pipeline's PostgreSQL side: resolve package names, write a
 * batch's rows and dead letters in one transaction.
 *
 * Each pipeline owns its store (its connection, its staging table, its
 * application cache); nothing here is shared between threads. */
#ifndef STORAGE_STORE_H
#define STORAGE_STORE_H

#include "pg/db_internal.h"
#include <stdbool.h>
#include <stddef.h>

#include "core/batch.h"
#include "core/retry.h"
#include "settings.h"

typedef struct store store_t;

/* A store for `def`. Does not connect yet. The settings must outlive it. */
store_t *store_new(const settings_t *s, const pipeline_def_t *def);
void store_free(store_t *st);

/* Resolve the batch's package names to application ids — one query for the
 * whole batch, through the per-thread TTL cache, never caching an absence —
 * and bind them (unregistered apps become dead letters). Connects first if
 * needed. Returns 0, or -1 with `err` and *cls set. */
int store_resolve(store_t *st, batch_t *b, char *err, size_t errlen, error_class_t *cls);

/* Write the batch in one transaction: dead letters, then the events with one
 * bulk upsert. A data-class error (SQLSTATE class 22/23, 54001) is narrowed
 * down to the offending record(s), which are dead-lettered with the
 * database's message while the rest are written. Fills *counts. Returns 0
 * once COMMIT succeeded, or -1 with `err` and *cls set (nothing committed,
 * or — when the connection broke during COMMIT — unknown: the upserts are
 * idempotent, so the caller retries). */
int store_write(store_t *st, batch_t *b, batch_counts_t *counts, char *err, size_t errlen,
                error_class_t *cls);

/* A step store_write_with runs inside the batch's transaction, after the
 * events and dead letters are written and before COMMIT, on the store's
 * connection. Every entry has its final state by then (a data error the store
 * isolated is ENTRY_REJECTED). It may run more than once for one batch (the
 * store rewrites the batch to isolate a data error), each time in a fresh
 * transaction. Returns 0, or -1 with `err` and *cls set: the transaction is
 * rolled back (a data-class error of the step is reported as fatal: it is not
 * a record to isolate). */
typedef int (*store_step_fn)(void *ctx, PGconn *conn, const batch_t *b, char *err, size_t errlen,
                             error_class_t *cls);

/* store_write, plus `step` (with `ctx`) in the same transaction; with
 * `commit` false the transaction is rolled back at the end instead of
 * committed (a dry run that still learns what the database would refuse and
 * fills *counts as if committed). Used by dead-letter redrive to mark its
 * dead letters resolved atomically with the rows it stores. */
int store_write_with(store_t *st, batch_t *b, store_step_fn step, void *ctx, bool commit,
                     batch_counts_t *counts, char *err, size_t errlen, error_class_t *cls);

/* store_write in two halves, so the caller can work while PostgreSQL does:
 * start sends BEGIN, the dead letters and the COPY of the events, then the
 * upsert and COMMIT without waiting; finish waits for them (and, on a
 * data-class error, isolates the offending records synchronously). Between
 * the two, nothing else may use the store. Same return conventions as
 * store_write; after a failed start, do not call finish. */
int store_write_start(store_t *st, batch_t *b, char *err, size_t errlen, error_class_t *cls);
int store_write_finish(store_t *st, batch_t *b, batch_counts_t *counts, char *err, size_t errlen,
                       error_class_t *cls);

/* Drop the connection (after a transient error); the next call reconnects. */
void store_disconnect(store_t *st);

#endif
