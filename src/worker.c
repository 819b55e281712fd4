#include "worker.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "log.h"

/* The first few rejects of a batch are logged in detail, then one summary
 * line grouped by reason: a batch may reject all 500 records, and the table
 * has the full detail anyway. */
#define REJECTS_LOGGED_IN_DETAIL 5

static double elapsed_ms(const struct timespec *start)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - start->tv_sec) * 1e3 + (double)(now.tv_nsec - start->tv_nsec) / 1e6;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int fail(worker_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(worker_t *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->failure, sizeof w->failure, fmt, ap);
    va_end(ap);
    LOG_ERROR(w->def->name, "pipeline failed: %s", w->failure);
    return -1;
}

/* Sleep `ms`, in slices, returning early (true) when a stop is requested:
 * a stop request interrupts the back-off. */
static bool sleep_interruptible(worker_t *w, long ms)
{
    while (ms > 0 && !atomic_load(w->stop)) {
        long slice = ms < 100 ? ms : 100;
        struct timespec ts = {slice / 1000, (slice % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        ms -= slice;
        if (w->heartbeat) w->heartbeat(w->heartbeat_ctx);
    }
    return atomic_load(w->stop);
}

static void log_rejects(const worker_t *w, const batch_t *b)
{
    size_t logged = 0;
    const char *types[16];
    size_t counts[16];
    size_t ntypes = 0;

    if (log_current_level() > LOG_LEVEL_WARN) return;
    for (size_t i = 0; i < b->count; i++) {
        const entry_t *e = &b->entries[i];
        if (e->state != ENTRY_REJECTED) continue;
        if (logged++ < REJECTS_LOGGED_IN_DETAIL)
            LOG_WARN(w->def->name, "dead_letter topic=%s partition=%d offset=%lld error_type=%s detail=\"%s\"",
                     b->records[i].topic, b->records[i].partition, (long long)b->records[i].offset,
                     e->rejection.error_type, e->rejection.detail);
        size_t t = 0;
        while (t < ntypes && strcmp(types[t], e->rejection.error_type) != 0) t++;
        if (t == ntypes && ntypes < 16) {
            types[ntypes] = e->rejection.error_type;
            counts[ntypes++] = 0;
        }
        if (t < ntypes) counts[t]++;
    }
    if (logged > REJECTS_LOGGED_IN_DETAIL) {
        char summary[512];
        size_t n = 0;
        for (size_t t = 0; t < ntypes && n < sizeof summary; t++)
            n += (size_t)snprintf(summary + n, sizeof summary - n, "%s%s=%zu", t ? " " : "", types[t],
                                  counts[t]);
        LOG_WARN(w->def->name, "dead_letter summary total=%zu (%zu more not shown) %s", logged,
                 logged - REJECTS_LOGGED_IN_DETAIL, summary);
    }
}

/* Describe the offsets committed: "p0:17-41 p2:5-9". */
static void describe_offsets(const batch_t *b, char *out, size_t len)
{
    int32_t parts[64];
    int64_t lo[64], hi[64];
    size_t n = 0, used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < b->count; i++) {
        const record_t *r = &b->records[i];
        size_t k = 0;
        while (k < n && parts[k] != r->partition) k++;
        if (k == n) {
            if (n == 64) continue;
            parts[n] = r->partition;
            lo[n] = hi[n] = r->offset;
            n++;
        }
        if (r->offset < lo[k]) lo[k] = r->offset;
        if (r->offset > hi[k]) hi[k] = r->offset;
    }
    for (size_t k = 0; k < n && used < len; k++)
        used += (size_t)snprintf(out + used, len - used, "%sp%d:%lld-%lld", k ? "," : "", parts[k],
                                 (long long)lo[k], (long long)hi[k]);
}

/* Store one decoded batch, retrying transient errors with back-off. Returns
 * 0 (committed), 1 (stop requested during the back-off: not committed, will
 * be redelivered) or -1 (fatal, w->failure set). */
static int store_batch(worker_t *w, batch_t *b, record_t *records, size_t n, batch_counts_t *counts)
{
    const settings_t *s = w->settings;
    char err[1024];
    error_class_t cls = ERROR_CLASS_FATAL;

    for (int attempt = 0;; attempt++) {
        if (attempt > 0) batch_decode(b, records, n); /* fresh states for the retry */
        memset(counts, 0, sizeof *counts);
        int rc = w->store.resolve(w->store.ctx, b, err, sizeof err, &cls);
        if (rc == 0) {
            counts->superseded = batch_deduplicate(b);
            rc = w->store.write(w->store.ctx, b, counts, err, sizeof err, &cls);
        }
        if (rc == 0) return 0;
        if (cls != ERROR_CLASS_TRANSIENT) return fail(w, "database error: %s", err);
        if (attempt >= s->db_retry_max_attempts) {
            return fail(w, "database unavailable: %d retries exhausted, last error: %s",
                        s->db_retry_max_attempts, err);
        }
        long delay = retry_backoff_ms(attempt + 1, s->db_retry_base_ms);
        /* Never dead-letter here: that would throw away healthy data
         * because PostgreSQL was restarting. */
        LOG_WARN(w->def->name, "transient database error, retrying the same batch attempt=%d/%d in_ms=%ld error=\"%s\"",
                 attempt + 1, s->db_retry_max_attempts, delay, err);
        w->store.disconnect(w->store.ctx);
        if (w->metrics) atomic_fetch_add_explicit(&w->metrics->db_retries, 1, memory_order_relaxed);
        if (sleep_interruptible(w, delay)) {
            LOG_WARN(w->def->name, "stop requested during the back-off: batch of %zu left uncommitted, it will be redelivered", n);
            return 1;
        }
    }
}

int worker_run(worker_t *w)
{
    const settings_t *s = w->settings;
    const pipeline_id_t id = w->def->id;
    batch_t batch;
    int commit_failures = 0;
    long long rebalancing_since_ms = 0;
    int rc = 0;
    char err[1024];

    batch_init(&batch, w->def);
    while (!atomic_load(w->stop)) {
        record_t *records = NULL;
        struct timespec start;
        batch_counts_t counts;

        if (w->heartbeat) w->heartbeat(w->heartbeat_ctx);
        int n = w->consumer.poll(w->consumer.ctx, (size_t)s->max_poll_records[id], s->poll_timeout_ms,
                                 &records, err, sizeof err);
        if (n < 0) {
            rc = fail(w, "Kafka consumer error: %s", err);
            break;
        }
        if (n == 0) continue;
        clock_gettime(CLOCK_MONOTONIC, &start);

        batch_decode(&batch, records, (size_t)n);
        int stored = store_batch(w, &batch, records, (size_t)n, &counts);
        if (stored < 0) {
            rc = -1;
            break;
        }
        if (stored > 0) break; /* stop during back-off */
        if (w->after_db_commit) w->after_db_commit(w->fault_ctx);
        log_rejects(w, &batch);

        /* Only now, with the rows durable, may the offsets move. */
        int committed = w->consumer.commit(w->consumer.ctx, records, (size_t)n, err, sizeof err);
        if (committed == 0) {
            commit_failures = 0;
            rebalancing_since_ms = 0;
        } else if (committed > 0) {
            /* A rebalance refuses commits until it completes; a busy member
             * makes many batches meanwhile. Not a livelock while it lasts
             * less than the max poll interval, the longest a legitimate
             * rebalance waits for its members. */
            if (w->metrics) atomic_fetch_add_explicit(&w->metrics->commit_failures, 1, memory_order_relaxed);
            if (rebalancing_since_ms == 0) rebalancing_since_ms = now_ms();
            long long refused_for = now_ms() - rebalancing_since_ms;
            LOG_WARN(w->def->name, "offset commit refused while the group rebalances (for %lld ms; the rows are stored, a later commit covers them): %s",
                     refused_for, err);
            if (refused_for > s->max_poll_interval_ms)
                rc = fail(w, "commit livelock: offset commits refused for %lld ms, longer than STORAGE_MAX_POLL_INTERVAL_MS=%d: %s",
                          refused_for, s->max_poll_interval_ms, err);
        } else {
            commit_failures++;
            if (w->metrics) atomic_fetch_add_explicit(&w->metrics->commit_failures, 1, memory_order_relaxed);
            LOG_WARN(w->def->name, "offset commit failed (%d/%d in a row; the rows are stored, the batch may be redelivered and skipped): %s",
                     commit_failures, s->commit_failure_limit, err);
            /* A consumer that can never commit re-processes forever while
             * lag never falls: a livelock far harder to notice than a crash. */
            if (commit_failures >= s->commit_failure_limit)
                rc = fail(w, "commit livelock: %d offset commits failed in a row, last: %s",
                          commit_failures, err);
        }
        double duration = elapsed_ms(&start);
        metrics_record_batch(w->metrics, &batch, &counts, duration);
        if (w->metrics && w->consumer.lag) w->consumer.lag(w->consumer.ctx, w->metrics->lag, METRICS_MAX_PARTITIONS);
        if (log_current_level() <= LOG_LEVEL_INFO) {
            char offsets[512];
            describe_offsets(&batch, offsets, sizeof offsets);
            LOG_INFO(w->def->name,
                     "batch size=%d inserted=%zu updated=%zu skipped=%zu dead_lettered=%zu offsets=%s duration_ms=%.1f",
                     n, counts.inserted, counts.updated, counts.skipped + counts.superseded,
                     counts.dead_lettered, offsets, duration);
        }
        if (rc != 0) break; /* the batch is logged: it is stored */
        w->consumer.release(w->consumer.ctx);
    }
    w->consumer.release(w->consumer.ctx);
    batch_free(&batch);
    return rc;
}
