/* metrics — per-pipeline counters, and a Prometheus text endpoint at
 * /metrics when STORAGE_METRICS_ADDR is set (off by default).
 *
 * Each pipeline's counters are written by that pipeline's thread only and
 * read by the HTTP thread: relaxed atomics, no locks. */
#ifndef STORAGE_METRICS_H
#define STORAGE_METRICS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
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

/* What a pipeline's thread is doing, for /healthz and /readyz (DESIGN.md:
 * Probes and metrics). */
typedef enum {
    PIPELINE_STATE_STARTING = 0, /* its thread has not run its loop yet */
    PIPELINE_STATE_RUNNING,
    PIPELINE_STATE_STOPPED,      /* stopped cleanly (a requested stop) */
    PIPELINE_STATE_FAILED
} pipeline_state_t;

/* Seconds of per-second throughput kept for the status page (DESIGN.md:
 * Status page): in memory only, the oldest second overwritten. */
#define METRICS_THROUGHPUT_SECONDS 300
#define METRICS_LAST_ERROR_LEN 512

/* What the pipeline's last contact with PostgreSQL said. */
typedef enum { DB_STATE_UNKNOWN = 0, DB_STATE_OK, DB_STATE_FAILING } db_state_t;

typedef struct {
    atomic_uint_fast64_t consumed, inserted, updated, skipped, skipped_by_probe, inserted_by_copy, dead_lettered;
    atomic_uint_fast64_t deleted; /* rows deleted or marked by tombstones */
    atomic_uint_fast64_t dead_letters_by_type[METRICS_ERROR_TYPES];
    atomic_uint_fast64_t batches, db_retries, commit_failures, batches_fenced;
    atomic_uint_fast64_t heartbeat_failures; /* heartbeat file writes that failed */
    /* Records retention deleted before they were stored (DESIGN.md: Progress
     * in the database). */
    atomic_uint_fast64_t lost_to_retention;
    atomic_uint_fast64_t duration_bucket[METRICS_DURATION_BUCKETS + 1]; /* last: +Inf */
    atomic_uint_fast64_t duration_sum_us;
    atomic_int_fast64_t last_success_unix_ms; /* 0: none yet */
    /* Per partition p of the pipeline's topic t (settings order), at
     * t * METRICS_MAX_PARTITIONS + p; -1: not owned / unknown. */
    atomic_int_fast64_t lag[PIPELINE_MAX_TOPICS * METRICS_MAX_PARTITIONS];
    /* High watermark minus the position stored with the rows (the offset
     * after the last record whose batch committed), indexed like lag. */
    atomic_int_fast64_t committed_lag[PIPELINE_MAX_TOPICS * METRICS_MAX_PARTITIONS];
    /* The probes' inputs (DESIGN.md: Probes and metrics). */
    atomic_int state;                      /* pipeline_state_t */
    atomic_int_fast64_t loop_unix_ms;      /* last turn of the loop; 0: none yet */
    atomic_int_fast64_t partitions_owned;  /* -1: no assignment yet */
    atomic_int_fast64_t brokers_up;        /* brokers connected; -1: not known yet */
    atomic_int db_state;                   /* db_state_t */
    atomic_int_fast64_t db_state_unix_ms;  /* when db_state last changed */
    atomic_int_fast64_t db_heard_unix_ms;  /* when PostgreSQL last answered; 0: never */
    /* The schema registry, for pipelines of its formats (DESIGN.md: Formats). */
    atomic_uint_fast64_t registry_requests, registry_failures;
    atomic_int registry_state;                   /* db_state_t, of the registry */
    atomic_int_fast64_t registry_state_unix_ms;  /* when registry_state last changed */
    /* The status page's inputs (DESIGN.md: Status page). */
    atomic_bool backing_off;     /* waiting to retry after a transient database error */
    atomic_bool holding_commits; /* offset commits refused while the group rebalances */
    /* Records of committed batches per second: slot s % N holds second s
     * (unix time) when throughput_second[slot] says so. */
    atomic_int_fast64_t throughput_second[METRICS_THROUGHPUT_SECONDS];
    atomic_uint_fast64_t throughput_count[METRICS_THROUGHPUT_SECONDS];
    /* Unresolved dead letters of the pipeline's topic by error type, as the
     * pipeline last read them from the database (-1: not read yet). */
    atomic_int_fast64_t unresolved_dead_letters[METRICS_ERROR_TYPES];
    atomic_int_fast64_t unresolved_unix_ms; /* when they were read; 0: never */
    /* The last error the pipeline met, its first line only: text is no
     * atomic, so a lock of its own, held only to copy it. */
    pthread_mutex_t last_error_lock;
    char last_error[METRICS_LAST_ERROR_LEN];
    int64_t last_error_unix_ms; /* 0: none */
} pipeline_metrics_t;

/* Visible so that the HTTP side (metrics_http.c) can live apart from the
 * counters, which the core's unit tests link without libmicrohttpd. */
typedef struct metrics {
    const settings_t *settings;
    pipeline_metrics_t pipelines[PIPELINE_MAX];
    void *daemon; /* struct MHD_Daemon *, or NULL */
    int64_t started_unix_ms; /* metrics_new: a pipeline starting is alive until the max age */
    /* For storage_consumer_build_info (NULL: "unknown"); the library
     * versions are those loaded at run time. */
    const char *version, *librdkafka_version, *libpq_version;
    /* Where the process_* family is read (tests point them elsewhere). */
    const char *proc_self; /* "/proc/self" */
} metrics_t;

typedef enum { PROBE_LIVENESS, PROBE_READINESS } probe_t;

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

/* Judge a probe at `now_unix_ms` from the pipelines' recorded state (no
 * connection is opened): true when every enabled pipeline passes. *body
 * gets one line per enabled pipeline saying why (caller frees). Liveness:
 * not failed or stopped, and the loop turned within
 * STORAGE_HEALTH_MAX_AGE_SECONDS. Readiness: alive, partitions assigned,
 * PostgreSQL answering and a Kafka broker connected. */
bool metrics_probe(metrics_t *m, probe_t probe, int64_t now_unix_ms, char **body);

/* A pipeline's contact with PostgreSQL succeeded (ok) or failed. */
void metrics_db_state(pipeline_metrics_t *pm, bool ok);

/* A pipeline's request to the schema registry was answered (ok: 200 or
 * 404) or not; counted. */
void metrics_registry_request(pipeline_metrics_t *pm, bool ok);

int64_t metrics_now_unix_ms(void);

/* Remember `text` (its first line) as the pipeline's last error, dated now
 * (called by the pipeline's thread). */
void metrics_last_error(pipeline_metrics_t *pm, const char *text);

/* Copy the last error into buf[len] and return its time (0: none yet). */
int64_t metrics_last_error_get(pipeline_metrics_t *pm, char *buf, size_t len);

/* Store the unresolved dead letters of the pipeline's topic by error type
 * (indexes as decode_error_types, the last "other"), read just now. */
void metrics_unresolved_dead_letters(pipeline_metrics_t *pm, const int64_t counts[METRICS_ERROR_TYPES]);

/* Records of committed batches in each of the `seconds` seconds before
 * the second of now_unix_ms (oldest first) into out[seconds]. */
void metrics_throughput(const pipeline_metrics_t *pm, int64_t now_unix_ms, uint64_t *out, int seconds);

/* The name of error type slot i (decode_error_types, then "other"). */
const char *metrics_error_type_name(size_t i);

#endif
