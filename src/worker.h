/* worker — the batch loop of one pipeline (DESIGN.md: The batch loop): poll → decode → resolve
 * → de-duplicate → write → database COMMIT → offset commit → one log line.
 *
 * It talks to its consumer and its store through the small interfaces
 * below, so the ordering rules (offsets move only after the rows are
 * committed; transient errors retry the same batch; fatal errors reach the
 * supervisor) are unit-tested with fakes. No state survives from one batch
 * to the next, so a rebalance between batches is harmless. */
#ifndef STORAGE_WORKER_H
#define STORAGE_WORKER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/batch.h"
#include "core/retry.h"
#include "metrics.h"
#include "settings.h"

typedef struct {
    void *ctx;
    /* Returns records (owned by the consumer until release), 0 on timeout,
     * -1 on a fatal error. */
    int (*poll)(void *ctx, size_t max, int timeout_ms, record_t **records, char *err, size_t errlen);
    void (*release)(void *ctx, record_t *records);
    /* Returns 0, 1 when the group is rebalancing (refused, retriable: a
     * later commit covers these offsets), or -1 (not fatal by itself: the
     * data is already durable). Waits at most timeout_ms for the answer. */
    int (*commit)(void *ctx, const record_t *records, size_t count, int timeout_ms, char *err,
                  size_t errlen);
    /* Optional: fill lag[p] and committed_lag[p] (from the read and from the
     * committed position) for every partition p < max (-1: not owned). */
    void (*lag)(void *ctx, atomic_int_fast64_t *lag, atomic_int_fast64_t *committed_lag, int max);
    /* Optional: commit offsets of earlier batches that a held, refused or
     * failed commit left behind; returns like commit (0: nothing pending). */
    int (*flush)(void *ctx, int timeout_ms, char *err, size_t errlen);
    /* Optional: read every owned partition again from where the database's
     * position says, after a batch was fenced (nothing taken is
     * unreleased). Returns 0, or -1 with `err` (the pipeline fails); without
     * it a fenced batch fails the pipeline. */
    int (*rewind)(void *ctx, char *err, size_t errlen);
} worker_consumer_t;

typedef struct {
    void *ctx;
    int (*resolve)(void *ctx, batch_t *b, char *err, size_t errlen, error_class_t *cls);
    int (*write)(void *ctx, batch_t *b, batch_counts_t *counts, char *err, size_t errlen,
                 error_class_t *cls);
    void (*disconnect)(void *ctx);
    /* Optional, both or neither: write in two halves (see store_write_start)
     * so the next batch is taken and decoded while PostgreSQL works. */
    int (*start)(void *ctx, batch_t *b, char *err, size_t errlen, error_class_t *cls);
    int (*finish)(void *ctx, batch_t *b, batch_counts_t *counts, char *err, size_t errlen,
                  error_class_t *cls);
    /* Optional: the database's positions of partitions 0..n-1 of `topic`
     * into next[p] (-1: none); one attempt (see worker_read_positions). */
    int (*positions)(void *ctx, const char *topic, int n, int64_t *next, char *err, size_t errlen,
                     error_class_t *cls);
    /* Optional, with positions: record next[p] (>= 0) where the database
     * has no position; one attempt (see worker_record_starts). */
    int (*record_starts)(void *ctx, const char *topic, int n, const int64_t *next, char *err, size_t errlen,
                         error_class_t *cls);
    /* Optional: whether PostgreSQL answers (one attempt); an idle pipeline
     * asks every SETTINGS_DB_PING_MS so that /readyz sees an outage. */
    int (*ping)(void *ctx, char *err, size_t errlen, error_class_t *cls);
    /* Optional: the unresolved dead letters of `topic` by error type into
     * counts[n] (see store_unresolved_dead_letters); one attempt. */
    int (*unresolved)(void *ctx, const char *topic, int64_t *counts, size_t n, char *err, size_t errlen,
                      error_class_t *cls);
    /* Optional, both or neither, with start: resolve and de-duplicate the
     * next batch while PostgreSQL writes the current one, without the
     * database (see store_prepare), and whether that still holds when the
     * batch's turn comes (store_prepared); if not, resolve runs. */
    bool (*prepare)(void *ctx, batch_t *b);
    bool (*prepared)(void *ctx, const batch_t *b);
} worker_store_t;

/* The status page's unresolved dead letters are read again this often, by
 * an idle pipeline and a busy one alike (DESIGN.md: Status page). */
#define WORKER_DEAD_LETTERS_REFRESH_MS 5000

typedef struct {
    const settings_t *settings;
    const pipeline_def_t *def;
    worker_consumer_t consumer;
    worker_store_t store;
    atomic_bool *stop;             /* set by the supervisor; seen at a poll boundary */
    pipeline_metrics_t *metrics;   /* optional */
    /* Where a registry format's writer schemas come from (DESIGN.md:
     * Formats); NULL for the other formats. */
    const schema_source_t *schemas;
    void (*heartbeat)(void *ctx);  /* optional: called every loop, rate-limited inside */
    void *heartbeat_ctx;
    /* Test-only fault points, NULL in production, given the batch's offsets
     * ("p0:17-41,p2:5-9"): before_db_write right before a batch is written
     * (tests freeze the process there), after_db_commit after its database
     * COMMIT and before its offset commit (tests kill the process there). */
    void (*before_db_write)(void *ctx, const char *offsets);
    void (*after_db_commit)(void *ctx, const char *offsets);
    void *fault_ctx;
    char failure[1024]; /* why the worker failed, for the supervisor */
} worker_t;

/* Where newly assigned partitions start: the store's positions, with the
 * batch's retry schedule for transient errors (DESIGN.md: Errors).
 * `worker` is the worker_t; the consumer calls this from its rebalance
 * callback, on the worker's thread. Returns 0, or -1 with `err` set
 * (retries exhausted, an error that is not transient, or a stop requested
 * during a back-off). */
int worker_read_positions(void *worker, const char *topic, int n, int64_t *next, char *err, size_t errlen);

/* Record where partitions without a position start (the store's
 * record_starts), with the same retries. Returns like
 * worker_read_positions. */
int worker_record_starts(void *worker, const char *topic, int n, const int64_t *next, char *err, size_t errlen);

/* Run until *stop is set (returns 0 after the in-flight batch is committed)
 * or a fatal error (returns -1 with the reason in w->failure). */
int worker_run(worker_t *w);

#endif
