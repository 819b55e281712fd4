#include "metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/decode.h"

static const double duration_bounds_s[METRICS_DURATION_BUCKETS] = {
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};

/* Indexes of dead_letters_by_type: the stable error_type codes, then
 * "other". */
static const char *error_type_name(size_t i)
{
    return i < DECODE_ERROR_TYPE_COUNT ? decode_error_types[i] : "other";
}


static size_t error_type_index(const char *type)
{
    for (size_t i = 0; i < DECODE_ERROR_TYPE_COUNT; i++)
        if (strcmp(type, decode_error_types[i]) == 0) return i;
    return METRICS_ERROR_TYPES - 1;
}

static int64_t now_unix_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void metrics_record_batch(pipeline_metrics_t *pm, const batch_t *b, const batch_counts_t *c,
                          double duration_ms)
{
    if (!pm) return;
    atomic_fetch_add_explicit(&pm->consumed, b->count, memory_order_relaxed);
    atomic_fetch_add_explicit(&pm->inserted, c->inserted, memory_order_relaxed);
    atomic_fetch_add_explicit(&pm->updated, c->updated, memory_order_relaxed);
    atomic_fetch_add_explicit(&pm->skipped, c->skipped + c->superseded, memory_order_relaxed);
    atomic_fetch_add_explicit(&pm->dead_lettered, c->dead_lettered, memory_order_relaxed);
    atomic_fetch_add_explicit(&pm->batches, 1, memory_order_relaxed);
    for (size_t i = 0; i < b->count; i++)
        if (b->entries[i].state == ENTRY_REJECTED)
            atomic_fetch_add_explicit(&pm->dead_letters_by_type[error_type_index(b->entries[i].rejection.error_type)],
                                      1, memory_order_relaxed);
    size_t k = 0;
    while (k < METRICS_DURATION_BUCKETS && duration_ms / 1000.0 > duration_bounds_s[k]) k++;
    atomic_fetch_add_explicit(&pm->duration_bucket[k], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&pm->duration_sum_us, (uint_fast64_t)(duration_ms * 1000.0), memory_order_relaxed);
    atomic_store_explicit(&pm->last_success_unix_ms, now_unix_ms(), memory_order_relaxed);
}

typedef struct {
    char *data;
    size_t len, cap;
} out_t;

static void out(out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void out(out_t *o, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(o->data + o->len, o->cap - o->len, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < o->cap - o->len) {
            o->len += (size_t)n;
            return;
        }
        o->cap = o->cap * 2 + (size_t)(n > 0 ? n : 0);
        o->data = realloc(o->data, o->cap);
        if (!o->data) abort();
    }
}

#define LOAD(x) ((unsigned long long)atomic_load_explicit(&(x), memory_order_relaxed))

static void counter(out_t *o, metrics_t *m, const char *name, const char *help, size_t offset)
{
    out(o, "# HELP storage_consumer_%s %s\n# TYPE storage_consumer_%s counter\n", name, help, name);
    for (int i = 0; i < PIPELINE_COUNT; i++) {
        if (!m->settings->pipeline_enabled[i]) continue;
        atomic_uint_fast64_t *v = (atomic_uint_fast64_t *)((char *)&m->pipelines[i] + offset);
        out(o, "storage_consumer_%s{pipeline=\"%s\"} %llu\n", name, pipeline_get((pipeline_id_t)i)->name,
            (unsigned long long)atomic_load_explicit(v, memory_order_relaxed));
    }
}

char *metrics_render(metrics_t *m)
{
    out_t o = {malloc(8192), 0, 8192};
    if (!o.data) abort();
    o.data[0] = '\0';
    counter(&o, m, "messages_consumed_total", "Records polled and processed in committed batches.",
            offsetof(pipeline_metrics_t, consumed));
    counter(&o, m, "rows_inserted_total", "Rows inserted.", offsetof(pipeline_metrics_t, inserted));
    counter(&o, m, "rows_updated_total", "Rows updated (reviews with a newer observation).",
            offsetof(pipeline_metrics_t, updated));
    counter(&o, m, "rows_skipped_total", "Records already stored (redelivery, older observation).",
            offsetof(pipeline_metrics_t, skipped));
    counter(&o, m, "batches_total", "Batches committed.", offsetof(pipeline_metrics_t, batches));
    counter(&o, m, "db_retries_total", "Batch retries after a transient database error.",
            offsetof(pipeline_metrics_t, db_retries));
    counter(&o, m, "commit_failures_total", "Offset commits that failed, and rebalances that refused them (the rows were already stored).",
            offsetof(pipeline_metrics_t, commit_failures));
    counter(&o, m, "messages_lost_to_retention_total", "Records the broker deleted (retention) before they were stored: the database's position of a partition was below its first offset.",
            offsetof(pipeline_metrics_t, lost_to_retention));

    out(&o, "# HELP storage_consumer_dead_letters_total Records written to dead_letter_events.\n"
            "# TYPE storage_consumer_dead_letters_total counter\n");
    for (int i = 0; i < PIPELINE_COUNT; i++) {
        if (!m->settings->pipeline_enabled[i]) continue;
        for (size_t t = 0; t < METRICS_ERROR_TYPES; t++)
            out(&o, "storage_consumer_dead_letters_total{pipeline=\"%s\",error_type=\"%s\"} %llu\n",
                pipeline_get((pipeline_id_t)i)->name, error_type_name(t),
                LOAD(m->pipelines[i].dead_letters_by_type[t]));
    }

    out(&o, "# HELP storage_consumer_batch_duration_seconds Time from decode to the database commit of a batch.\n"
            "# TYPE storage_consumer_batch_duration_seconds histogram\n");
    for (int i = 0; i < PIPELINE_COUNT; i++) {
        if (!m->settings->pipeline_enabled[i]) continue;
        const char *name = pipeline_get((pipeline_id_t)i)->name;
        pipeline_metrics_t *pm = &m->pipelines[i];
        unsigned long long cumulative = 0;
        for (size_t k = 0; k <= METRICS_DURATION_BUCKETS; k++) {
            cumulative += LOAD(pm->duration_bucket[k]);
            if (k < METRICS_DURATION_BUCKETS)
                out(&o, "storage_consumer_batch_duration_seconds_bucket{pipeline=\"%s\",le=\"%g\"} %llu\n", name,
                    duration_bounds_s[k], cumulative);
            else
                out(&o, "storage_consumer_batch_duration_seconds_bucket{pipeline=\"%s\",le=\"+Inf\"} %llu\n", name,
                    cumulative);
        }
        out(&o, "storage_consumer_batch_duration_seconds_sum{pipeline=\"%s\"} %.6f\n", name,
            (double)LOAD(pm->duration_sum_us) / 1e6);
        out(&o, "storage_consumer_batch_duration_seconds_count{pipeline=\"%s\"} %llu\n", name, cumulative);
    }

    out(&o, "# HELP storage_consumer_last_success_timestamp_seconds Unix time of the last committed batch (0: none).\n"
            "# TYPE storage_consumer_last_success_timestamp_seconds gauge\n");
    for (int i = 0; i < PIPELINE_COUNT; i++) {
        if (!m->settings->pipeline_enabled[i]) continue;
        out(&o, "storage_consumer_last_success_timestamp_seconds{pipeline=\"%s\"} %.3f\n",
            pipeline_get((pipeline_id_t)i)->name,
            (double)atomic_load_explicit(&m->pipelines[i].last_success_unix_ms, memory_order_relaxed) / 1e3);
    }

    out(&o, "# HELP storage_consumer_lag Messages behind the high watermark, per owned partition.\n"
            "# TYPE storage_consumer_lag gauge\n");
    for (int i = 0; i < PIPELINE_COUNT; i++) {
        if (!m->settings->pipeline_enabled[i]) continue;
        for (int p = 0; p < METRICS_MAX_PARTITIONS; p++) {
            int64_t lag = atomic_load_explicit(&m->pipelines[i].lag[p], memory_order_relaxed);
            if (lag >= 0)
                out(&o, "storage_consumer_lag{pipeline=\"%s\",topic=\"%s\",partition=\"%d\"} %lld\n",
                    pipeline_get((pipeline_id_t)i)->name, m->settings->topic[i], p, (long long)lag);
        }
    }
    return o.data;
}

metrics_t *metrics_new(const settings_t *s)
{
    metrics_t *m = calloc(1, sizeof *m);
    if (!m) abort();
    m->settings = s;
    for (int i = 0; i < PIPELINE_COUNT; i++)
        for (int p = 0; p < METRICS_MAX_PARTITIONS; p++) atomic_init(&m->pipelines[i].lag[p], -1);
    return m;
}

void metrics_free(metrics_t *m) { free(m); }

pipeline_metrics_t *metrics_pipeline(metrics_t *m, pipeline_id_t id) { return m ? &m->pipelines[id] : NULL; }
