#include "metrics.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "core/decode.h"

static const double duration_bounds_s[METRICS_DURATION_BUCKETS] = {
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};

/* Indexes of dead_letters_by_type: the stable error_type codes, then
 * "other". */
const char *metrics_error_type_name(size_t i)
{
    return i < DECODE_ERROR_TYPE_COUNT ? decode_error_types[i] : "other";
}


/* The counter slot of an error type; the last one ("other") for none. */
static size_t error_type_index(const char *type)
{
    int i = decode_error_type_index(type);
    return i >= 0 ? (size_t)i : METRICS_ERROR_TYPES - 1;
}

int64_t metrics_now_unix_ms(void)
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
    atomic_fetch_add_explicit(&pm->skipped_by_probe, c->skipped_by_probe, memory_order_relaxed);
    atomic_fetch_add_explicit(&pm->inserted_by_copy, c->inserted_by_copy, memory_order_relaxed);
    atomic_fetch_add_explicit(&pm->deleted, c->deleted, memory_order_relaxed);
    atomic_fetch_add_explicit(&pm->dead_lettered, c->dead_lettered, memory_order_relaxed);
    atomic_fetch_add_explicit(&pm->batches, 1, memory_order_relaxed);
    /* Only dead letters this batch inserted: a replay re-reads records
     * whose dead letters are already stored (DESIGN.md: Probes and metrics). */
    for (size_t i = 0; i < b->count; i++)
        if (b->entries[i].state == ENTRY_REJECTED && b->entries[i].dead_letter_new)
            atomic_fetch_add_explicit(&pm->dead_letters_by_type[error_type_index(b->entries[i].rejection.error_type)],
                                      1, memory_order_relaxed);
    size_t k = 0;
    while (k < METRICS_DURATION_BUCKETS && duration_ms / 1000.0 > duration_bounds_s[k]) k++;
    atomic_fetch_add_explicit(&pm->duration_bucket[k], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&pm->duration_sum_us, (uint_fast64_t)(duration_ms * 1000.0), memory_order_relaxed);
    int64_t now = metrics_now_unix_ms();
    atomic_store_explicit(&pm->last_success_unix_ms, now, memory_order_relaxed);
    /* The throughput ring (DESIGN.md: Status page): only this thread
     * writes; a slot of an older second is reset before it is re-dated, so
     * a reader that sees the new date sees no old count. */
    int64_t sec = now / 1000;
    size_t slot = (size_t)(sec % METRICS_THROUGHPUT_SECONDS);
    if (atomic_load_explicit(&pm->throughput_second[slot], memory_order_relaxed) != sec) {
        atomic_store_explicit(&pm->throughput_count[slot], 0, memory_order_relaxed);
        atomic_store_explicit(&pm->throughput_second[slot], sec, memory_order_release);
    }
    atomic_fetch_add_explicit(&pm->throughput_count[slot], b->count, memory_order_relaxed);
}

void metrics_throughput(const pipeline_metrics_t *pm, int64_t now_unix_ms, uint64_t *out, int seconds)
{
    int64_t now_sec = now_unix_ms / 1000;
    for (int k = 0; k < seconds; k++) {
        int64_t sec = now_sec - seconds + k;
        size_t slot = (size_t)(((sec % METRICS_THROUGHPUT_SECONDS) + METRICS_THROUGHPUT_SECONDS) %
                               METRICS_THROUGHPUT_SECONDS);
        out[k] = 0;
        if (sec >= 0 && atomic_load_explicit(&pm->throughput_second[slot], memory_order_acquire) == sec)
            out[k] = atomic_load_explicit(&pm->throughput_count[slot], memory_order_relaxed);
    }
}

void metrics_last_error(pipeline_metrics_t *pm, const char *text)
{
    if (!pm) return;
    pthread_mutex_lock(&pm->last_error_lock);
    /* The first line only: a PostgreSQL DETAIL line may quote a value. */
    snprintf(pm->last_error, sizeof pm->last_error, "%.*s", (int)strcspn(text, "\n"), text);
    pm->last_error_unix_ms = metrics_now_unix_ms();
    pthread_mutex_unlock(&pm->last_error_lock);
}

int64_t metrics_last_error_get(pipeline_metrics_t *pm, char *buf, size_t len)
{
    pthread_mutex_lock(&pm->last_error_lock);
    snprintf(buf, len, "%s", pm->last_error);
    int64_t at = pm->last_error_unix_ms;
    pthread_mutex_unlock(&pm->last_error_lock);
    return at;
}

void metrics_unresolved_dead_letters(pipeline_metrics_t *pm, const int64_t counts[METRICS_ERROR_TYPES])
{
    if (!pm) return;
    for (size_t t = 0; t < METRICS_ERROR_TYPES; t++)
        atomic_store_explicit(&pm->unresolved_dead_letters[t], counts[t], memory_order_relaxed);
    atomic_store_explicit(&pm->unresolved_unix_ms, metrics_now_unix_ms(), memory_order_release);
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
    for (int i = 0; i < pipeline_count(); i++) {
        if (!m->settings->pipeline_enabled[i]) continue;
        atomic_uint_fast64_t *v = (atomic_uint_fast64_t *)((char *)&m->pipelines[i] + offset);
        out(o, "storage_consumer_%s{pipeline=\"%s\"} %llu\n", name, pipeline_get(i)->name,
            (unsigned long long)atomic_load_explicit(v, memory_order_relaxed));
    }
}

/* A gauge per owned partition, from the array at `offset` of each
 * pipeline's counters (-1: not reported). */
static void partition_gauge(out_t *o, metrics_t *m, const char *name, const char *help, size_t offset)
{
    out(o, "# HELP storage_consumer_%s %s\n# TYPE storage_consumer_%s gauge\n", name, help, name);
    for (int i = 0; i < pipeline_count(); i++) {
        if (!m->settings->pipeline_enabled[i]) continue;
        atomic_int_fast64_t *v = (atomic_int_fast64_t *)((char *)&m->pipelines[i] + offset);
        const topic_list_t *topics = &m->settings->topics[i];
        for (int t = 0; t < topics->count; t++)
            for (int p = 0; p < METRICS_MAX_PARTITIONS; p++) {
                int64_t lag = atomic_load_explicit(&v[t * METRICS_MAX_PARTITIONS + p], memory_order_relaxed);
                if (lag >= 0)
                    out(o, "storage_consumer_%s{pipeline=\"%s\",topic=\"%s\",partition=\"%d\"} %lld\n", name,
                        pipeline_get(i)->name, topics->name[t], p, (long long)lag);
            }
    }
}

/* The process_* family as Prometheus client libraries export it on Linux,
 * read from `self` (/proc/self): /proc/PID/stat for CPU time, memory and
 * start time (in ticks since boot), the fd directory, and the
 * RLIMIT_NOFILE soft limit. A file that cannot be read leaves its metrics
 * out rather than report a wrong 0. */
static void process_metrics(out_t *o, const char *self)
{
    char path[512];
    long ticks = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    unsigned long utime = 0, stime = 0, vsize = 0;
    unsigned long long start = 0;
    long rss = 0;
    bool stat_ok = false;

    snprintf(path, sizeof path, "%s/stat", self);
    FILE *f = fopen(path, "r");
    if (f) {
        char text[2048];
        size_t n = fread(text, 1, sizeof text - 1, f);
        fclose(f);
        text[n] = '\0';
        /* The command name may hold spaces and parentheses: fields count
         * from the last ')'. Field 3 is the state. */
        char *rest = strrchr(text, ')');
        stat_ok = rest && sscanf(rest + 2,
                                 "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu %*d %*d %*d %*d %*d %*d "
                                 "%llu %lu %ld",
                                 &utime, &stime, &start, &vsize, &rss) == 5;
    }
    if (stat_ok && ticks > 0) {
        out(o, "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n"
               "# TYPE process_cpu_seconds_total counter\n"
               "process_cpu_seconds_total %.2f\n",
            (double)(utime + stime) / (double)ticks);
        out(o, "# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
               "# TYPE process_resident_memory_bytes gauge\n"
               "process_resident_memory_bytes %lld\n",
            (long long)rss * page);
        out(o, "# HELP process_virtual_memory_bytes Virtual memory size in bytes.\n"
               "# TYPE process_virtual_memory_bytes gauge\n"
               "process_virtual_memory_bytes %lu\n",
            vsize);
        /* The start is in ticks since boot; the boot time is the clock now
         * less the time since boot (CLOCK_BOOTTIME), not /proc/stat's btime,
         * which a sandbox such as systemd's ProcSubset=pid hides. */
        struct timespec real, boot;
        if (clock_gettime(CLOCK_REALTIME, &real) == 0 && clock_gettime(CLOCK_BOOTTIME, &boot) == 0) {
            double booted = (double)(real.tv_sec - boot.tv_sec) + (double)(real.tv_nsec - boot.tv_nsec) / 1e9;
            out(o, "# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.\n"
                   "# TYPE process_start_time_seconds gauge\n"
                   "process_start_time_seconds %.2f\n",
                booted + (double)start / (double)ticks);
        }
    }
    snprintf(path, sizeof path, "%s/fd", self);
    DIR *d = opendir(path);
    if (d) {
        long fds = 0;
        struct dirent *e;
        while ((e = readdir(d)))
            if (e->d_name[0] != '.') fds++;
        closedir(d);
        out(o, "# HELP process_open_fds Number of open file descriptors.\n"
               "# TYPE process_open_fds gauge\n"
               "process_open_fds %ld\n",
            fds);
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        out(o, "# HELP process_max_fds Maximum number of open file descriptors.\n"
               "# TYPE process_max_fds gauge\n"
               "process_max_fds %.0f\n",
            rl.rlim_cur == RLIM_INFINITY ? 9.223372036854775807e18 : (double)rl.rlim_cur);
}

char *metrics_render(metrics_t *m)
{
    out_t o = {malloc(8192), 0, 8192};
    if (!o.data) abort();
    o.data[0] = '\0';
    counter(&o, m, "messages_consumed_total", "Records polled and processed in committed batches.",
            offsetof(pipeline_metrics_t, consumed));
    counter(&o, m, "rows_inserted_total", "Rows inserted.", offsetof(pipeline_metrics_t, inserted));
    counter(&o, m, "rows_inserted_by_copy_total",
            "Of the inserted rows, those of a batch predicted new, COPYed straight into the table.",
            offsetof(pipeline_metrics_t, inserted_by_copy));
    counter(&o, m, "rows_deleted_total",
            "Rows the pipeline's tombstones deleted, or marked deleted (its tombstone rule).",
            offsetof(pipeline_metrics_t, deleted));
    counter(&o, m, "rows_updated_total", "Rows updated (reviews with a newer observation).",
            offsetof(pipeline_metrics_t, updated));
    counter(&o, m, "rows_skipped_total", "Records already stored (redelivery, older observation).",
            offsetof(pipeline_metrics_t, skipped));
    counter(&o, m, "rows_skipped_by_probe_total",
            "Of the skipped records, those a probe of their keys found stored before the batch was written: never sent.",
            offsetof(pipeline_metrics_t, skipped_by_probe));
    counter(&o, m, "batches_total", "Batches committed.", offsetof(pipeline_metrics_t, batches));
    counter(&o, m, "db_retries_total", "Batch retries after a transient database error.",
            offsetof(pipeline_metrics_t, db_retries));
    counter(&o, m, "schema_registry_requests_total",
            "Requests to the schema registry for writer's schemas (a schema is asked for once, then cached).",
            offsetof(pipeline_metrics_t, registry_requests));
    counter(&o, m, "schema_registry_failures_total",
            "Of those, the ones not answered: unreachable, timed out, or an answer other than 200 or 404 (the "
            "batch waits and retries).",
            offsetof(pipeline_metrics_t, registry_failures));
    counter(&o, m, "batches_fenced_total",
            "Batches rolled back because their partitions' positions moved on in the database (another member owns "
            "them, or a replay reset them): read again from the database's positions.",
            offsetof(pipeline_metrics_t, batches_fenced));
    counter(&o, m, "commit_failures_total", "Offset commits that failed, and rebalances that refused them (the rows were already stored).",
            offsetof(pipeline_metrics_t, commit_failures));
    counter(&o, m, "heartbeat_failures_total",
            "Heartbeat file writes that failed (STORAGE_HEARTBEAT_DIR): `health` reports the pipeline stale while they fail.",
            offsetof(pipeline_metrics_t, heartbeat_failures));
    counter(&o, m, "messages_lost_to_retention_total", "Records the broker deleted (retention) before they were stored: the database's position of a partition was below its first offset.",
            offsetof(pipeline_metrics_t, lost_to_retention));

    out(&o, "# HELP storage_consumer_dead_letters_total Dead letters newly inserted into dead_letter_events (a replayed record already stored there is not counted again).\n"
            "# TYPE storage_consumer_dead_letters_total counter\n");
    for (int i = 0; i < pipeline_count(); i++) {
        if (!m->settings->pipeline_enabled[i]) continue;
        for (size_t t = 0; t < METRICS_ERROR_TYPES; t++)
            out(&o, "storage_consumer_dead_letters_total{pipeline=\"%s\",error_type=\"%s\"} %llu\n",
                pipeline_get(i)->name, metrics_error_type_name(t),
                LOAD(m->pipelines[i].dead_letters_by_type[t]));
    }

    out(&o, "# HELP storage_consumer_batch_duration_seconds Time from decode to the database commit of a batch.\n"
            "# TYPE storage_consumer_batch_duration_seconds histogram\n");
    for (int i = 0; i < pipeline_count(); i++) {
        if (!m->settings->pipeline_enabled[i]) continue;
        const char *name = pipeline_get(i)->name;
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
    for (int i = 0; i < pipeline_count(); i++) {
        if (!m->settings->pipeline_enabled[i]) continue;
        out(&o, "storage_consumer_last_success_timestamp_seconds{pipeline=\"%s\"} %.3f\n",
            pipeline_get(i)->name,
            (double)atomic_load_explicit(&m->pipelines[i].last_success_unix_ms, memory_order_relaxed) / 1e3);
    }

    partition_gauge(&o, m, "lag",
                    "Messages behind the high watermark from the read position (what the consumer has "
                    "fetched and is processing), per owned partition.",
                    offsetof(pipeline_metrics_t, lag));
    partition_gauge(&o, m, "committed_lag",
                    "Messages behind the high watermark from the committed position (the offset after the "
                    "last record whose batch the database committed), per owned partition: what a restart "
                    "would read again.",
                    offsetof(pipeline_metrics_t, committed_lag));

    out(&o, "# HELP storage_consumer_build_info The version of the service and of the libraries it runs with (always 1).\n"
            "# TYPE storage_consumer_build_info gauge\n"
            "storage_consumer_build_info{version=\"%s\",librdkafka=\"%s\",libpq=\"%s\"} 1\n",
        m->version ? m->version : "unknown", m->librdkafka_version ? m->librdkafka_version : "unknown",
        m->libpq_version ? m->libpq_version : "unknown");
    process_metrics(&o, m->proc_self ? m->proc_self : "/proc/self");
    return o.data;
}

metrics_t *metrics_new(const settings_t *s)
{
    metrics_t *m = calloc(1, sizeof *m);
    if (!m) abort();
    m->settings = s;
    m->started_unix_ms = metrics_now_unix_ms();
    for (int i = 0; i < pipeline_count(); i++) {
        pipeline_metrics_t *pm = &m->pipelines[i];
        for (int p = 0; p < PIPELINE_MAX_TOPICS * METRICS_MAX_PARTITIONS; p++) {
            atomic_init(&pm->lag[p], -1);
            atomic_init(&pm->committed_lag[p], -1);
        }
        atomic_init(&pm->partitions_owned, -1);
        for (size_t t = 0; t < METRICS_ERROR_TYPES; t++) atomic_init(&pm->unresolved_dead_letters[t], -1);
        pthread_mutex_init(&pm->last_error_lock, NULL);
        atomic_init(&pm->brokers_up, -1);
    }
    return m;
}

void metrics_db_state(pipeline_metrics_t *pm, bool ok)
{
    if (!pm) return;
    int now = ok ? DB_STATE_OK : DB_STATE_FAILING;
    int64_t at = metrics_now_unix_ms();
    /* Only this pipeline's thread writes: the time of the change is stored
     * before the state that it dates, and the state is published with
     * release, so a reader that acquires the new state sees its time. An
     * answer is dated before it is published too: a reader that sees OK
     * never judges a silence by an older answer than the one it made. */
    if (ok) atomic_store_explicit(&pm->db_heard_unix_ms, at, memory_order_relaxed);
    if (atomic_load_explicit(&pm->db_state, memory_order_relaxed) == now) return;
    atomic_store_explicit(&pm->db_state_unix_ms, at, memory_order_relaxed);
    atomic_store_explicit(&pm->db_state, now, memory_order_release);
}

void metrics_registry_request(pipeline_metrics_t *pm, bool ok)
{
    if (!pm) return;
    atomic_fetch_add_explicit(&pm->registry_requests, 1, memory_order_relaxed);
    if (!ok) atomic_fetch_add_explicit(&pm->registry_failures, 1, memory_order_relaxed);
    int now = ok ? DB_STATE_OK : DB_STATE_FAILING;
    if (atomic_load_explicit(&pm->registry_state, memory_order_relaxed) == now) return;
    atomic_store_explicit(&pm->registry_state_unix_ms, metrics_now_unix_ms(), memory_order_relaxed);
    atomic_store_explicit(&pm->registry_state, now, memory_order_release);
}

/* Why pipeline `pm` is not alive at `now` (NULL: it is), into why[len]. */
static const char *not_alive(const metrics_t *m, const pipeline_metrics_t *pm, int64_t now, char *why, size_t len)
{
    int state = atomic_load_explicit(&pm->state, memory_order_relaxed);
    if (state == PIPELINE_STATE_FAILED) return "the pipeline failed";
    if (state == PIPELINE_STATE_STOPPED) return "the pipeline stopped";
    int64_t last = atomic_load_explicit(&pm->loop_unix_ms, memory_order_relaxed);
    if (last == 0) last = m->started_unix_ms; /* starting: alive until the max age */
    int64_t age_ms = now - last;
    if (age_ms > (int64_t)m->settings->health_max_age_seconds * 1000) {
        snprintf(why, len, "its loop last ran %llds ago (limit STORAGE_HEALTH_MAX_AGE_SECONDS=%d)",
                 (long long)(age_ms / 1000), m->settings->health_max_age_seconds);
        return why;
    }
    return NULL;
}

bool metrics_probe(metrics_t *m, probe_t probe, int64_t now, char **body)
{
    out_t o = {malloc(1024), 0, 1024};
    bool all = true;
    if (!o.data) abort();
    o.data[0] = '\0';
    for (int i = 0; i < pipeline_count(); i++) {
        if (!m->settings->pipeline_enabled[i]) continue;
        const pipeline_metrics_t *pm = &m->pipelines[i];
        const char *name = pipeline_get(i)->name;
        char why[256];
        const char *dead = not_alive(m, pm, now, why, sizeof why);
        if (probe == PROBE_LIVENESS) {
            if (dead) out(&o, "%s: not alive: %s\n", name, dead);
            else out(&o, "%s: alive\n", name);
            all = all && !dead;
            continue;
        }
        int64_t owned = atomic_load_explicit(&pm->partitions_owned, memory_order_relaxed);
        int64_t brokers = atomic_load_explicit(&pm->brokers_up, memory_order_relaxed);
        int db = atomic_load_explicit(&pm->db_state, memory_order_acquire);
        const char *reason = dead;
        if (!reason && db == DB_STATE_FAILING) {
            int64_t since = atomic_load_explicit(&pm->db_state_unix_ms, memory_order_relaxed);
            snprintf(why, sizeof why, "PostgreSQL unreachable (for %llds)",
                     (long long)(now > since ? (now - since) / 1000 : 0));
            reason = why;
        }
        /* The loop asks PostgreSQL between its other waits (DESIGN.md:
         * Probes and metrics); a silence past the bound is judged here, so
         * a loop running late cannot keep the pipeline ready. */
        int64_t heard = atomic_load_explicit(&pm->db_heard_unix_ms, memory_order_relaxed);
        long long silence = settings_db_silence_ms(m->settings);
        if (!reason && db == DB_STATE_OK && heard > 0 && now - heard > silence) {
            snprintf(why, sizeof why, "PostgreSQL has not answered for %llds (limit %lld ms)",
                     (long long)((now - heard) / 1000), silence);
            reason = why;
        }
        if (!reason && atomic_load_explicit(&pm->registry_state, memory_order_acquire) == DB_STATE_FAILING) {
            int64_t since = atomic_load_explicit(&pm->registry_state_unix_ms, memory_order_relaxed);
            snprintf(why, sizeof why, "the schema registry does not answer (for %llds)",
                     (long long)(now > since ? (now - since) / 1000 : 0));
            reason = why;
        }
        if (!reason && brokers == 0) reason = "no Kafka broker reachable";
        if (!reason && owned <= 0) reason = "no partitions assigned";
        if (reason) out(&o, "%s: not ready: %s\n", name, reason);
        else out(&o, "%s: ready: %lld partition(s) assigned\n", name, (long long)owned);
        all = all && !reason;
    }
    *body = o.data;
    return all;
}

void metrics_free(metrics_t *m)
{
    if (!m) return;
    for (int i = 0; i < pipeline_count(); i++) pthread_mutex_destroy(&m->pipelines[i].last_error_lock);
    free(m);
}

pipeline_metrics_t *metrics_pipeline(metrics_t *m, pipeline_id_t id) { return m ? &m->pipelines[id] : NULL; }
