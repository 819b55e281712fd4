/* metrics — per-pipeline counters, and a Prometheus text endpoint at
 * /metrics when STORAGE_METRICS_ADDR is set (off by default).
 *
 * Each pipeline's counters are written by that pipeline's thread only and
 * read by the HTTP thread: relaxed atomics, no locks. */
#ifndef STORAGE_METRICS_H
#define STORAGE_METRICS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "core/batch.h"
#include "core/decode.h"
#include "core/pipeline.h"
#include "settings.h"

/* Upper bounds (seconds) of the batch duration histogram buckets. */
#define METRICS_DURATION_BUCKETS 12
#define METRICS_MAX_PARTITIONS 256
/* The error types (core/decode.h), then "other". */
#define METRICS_ERROR_TYPES (DECODE_ERROR_TYPE_COUNT + 1)

typedef struct {
    atomic_uint_fast64_t consumed, inserted, updated, skipped, dead_lettered;
    atomic_uint_fast64_t dead_letters_by_type[METRICS_ERROR_TYPES];
    atomic_uint_fast64_t batches, db_retries, commit_failures;
    /* Records retention deleted before they were stored (DESIGN.md: Progress
     * in the database). */
    atomic_uint_fast64_t lost_to_retention;
    atomic_uint_fast64_t duration_bucket[METRICS_DURATION_BUCKETS + 1]; /* last: +Inf */
    atomic_uint_fast64_t duration_sum_us;
    atomic_int_fast64_t last_success_unix_ms; /* 0: none yet */
    atomic_int_fast64_t lag[METRICS_MAX_PARTITIONS]; /* -1: not owned / unknown */
} pipeline_metrics_t;

/* Visible so that the HTTP side (metrics_http.c) can live apart from the
 * counters, which the core's unit tests link without libmicrohttpd. */
typedef struct metrics {
    const settings_t *settings;
    pipeline_metrics_t pipelines[PIPELINE_COUNT];
    void *daemon; /* struct MHD_Daemon *, or NULL */
} metrics_t;

/* Counters for every pipeline, all zero. The caller owns the result. */
metrics_t *metrics_new(const settings_t *s);
/* Frees the counters; stop the endpoint first (metrics_http_stop). */
void metrics_free(metrics_t *m);

/* Serve GET /metrics on `addr` (host:port) from a thread of its own.
 * Returns 0, or -1 with `err` naming STORAGE_METRICS_ADDR. */
int metrics_http_start(metrics_t *m, const char *addr, char *err, size_t errlen);
void metrics_http_stop(metrics_t *m);

pipeline_metrics_t *metrics_pipeline(metrics_t *m, pipeline_id_t id);

/* Record one committed batch (called by the pipeline's thread). */
void metrics_record_batch(pipeline_metrics_t *pm, const batch_t *b, const batch_counts_t *c,
                          double duration_ms);

/* Render the Prometheus text exposition into a string the caller frees. */
char *metrics_render(metrics_t *m);

#endif
