#include "worker.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "log.h"

/* The first few rejects of a batch are logged in detail, then one summary
 * line grouped by reason: a batch may reject all 500 records, and the table
 * has the full detail anyway. */
#define REJECTS_LOGGED_IN_DETAIL 5

/* After a failed offset commit, an idle pipeline waits this long before it
 * commits the offsets left behind again. */
#define IDLE_FLUSH_PAUSE_MS 5000

static int fail(worker_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(worker_t *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->failure, sizeof w->failure, fmt, ap);
    va_end(ap);
    metrics_last_error(w->metrics, w->failure);
    LOG_ERROR(w->def->name, "pipeline failed: %s", w->failure);
    return -1;
}

/* The status page's last error (DESIGN.md: Status page): what, then why. */
static void note_error(worker_t *w, const char *what, const char *err)
{
    if (!w->metrics) return;
    char text[METRICS_LAST_ERROR_LEN];
    /* A long error is cut: the log line has it whole. */
    if (snprintf(text, sizeof text, "%s: %s", what, err) >= (int)sizeof text) text[sizeof text - 2] = '~';
    metrics_last_error(w->metrics, text);
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

/* The back-off after a transient database error: sleep_interruptible,
 * shown as "backing off" on the status page meanwhile (DESIGN.md: Status
 * page). */
static bool back_off(worker_t *w, long ms)
{
    if (w->metrics) atomic_store_explicit(&w->metrics->backing_off, true, memory_order_relaxed);
    bool stopped = sleep_interruptible(w, ms);
    if (w->metrics) atomic_store_explicit(&w->metrics->backing_off, false, memory_order_relaxed);
    return stopped;
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
            LOG_WARN_F(w->def->name,
                       LOG_FIELDS(LF_STR("topic", b->records[i].topic), LF_INT("partition", b->records[i].partition),
                                  LF_INT("offset", b->records[i].offset),
                                  LF_STR("error_type", e->rejection.error_type),
                                  LF_STR("detail", e->rejection.detail)),
                       "dead_letter");
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
        LOG_WARN_F(w->def->name,
                   LOG_FIELDS(LF_INT("total", logged), LF_INT("not_shown", logged - REJECTS_LOGGED_IN_DETAIL),
                              LF_STR("by_error_type", summary)),
                   "dead_letter summary");
    }
}

/* The batch's offsets as log ranges (DESIGN.md: Logs). Returns how many;
 * *out is allocated (free it). */
static size_t log_ranges_of(const worker_t *w, const batch_t *b, log_range_t **out)
{
    batch_range_t *ranges = malloc((b->count ? b->count : 1) * sizeof *ranges);
    log_range_t *lr = malloc((b->count ? b->count : 1) * sizeof *lr);
    if (!ranges || !lr) abort();
    size_t n = batch_ranges(b, ranges);
    /* The topic is named only where the pipeline reads more than one. */
    bool named = w->settings->topics[w->def->id].count > 1;
    for (size_t k = 0; k < n; k++)
        lr[k] = (log_range_t){ranges[k].partition, ranges[k].first, ranges[k].last, named ? ranges[k].topic : NULL};
    free(ranges);
    *out = lr;
    return n;
}

/* Describe the offsets committed, as the batch line's text shows them:
 * "p0:17-41,p2:5-9" (for the test fault points). */
static void describe_offsets(const worker_t *w, const batch_t *b, char *out, size_t len)
{
    log_range_t *ranges;
    size_t n = log_ranges_of(w, b, &ranges), used = 0;
    out[0] = '\0';
    for (size_t k = 0; k < n && used < len; k++)
        used += (size_t)snprintf(out + used, len - used, "%s%s%sp%d:%lld-%lld", k ? "," : "",
                                 ranges[k].topic ? ranges[k].topic : "", ranges[k].topic ? ":" : "",
                                 ranges[k].partition, (long long)ranges[k].first, (long long)ranges[k].last);
    free(ranges);
}

/* Call the test fault point `hook` (if set) with the batch's offsets. */
static void fault_point(worker_t *w, void (*hook)(void *ctx, const char *offsets), const batch_t *b)
{
    if (!hook) return;
    char offsets[512];
    describe_offsets(w, b, offsets, sizeof offsets);
    hook(w->fault_ctx, offsets);
}

/* One database step of an assignment (reading or recording positions),
 * with the batch's retry schedule for transient errors. */
static int assignment_step(worker_t *w, const char *what, const char *topic, int n, int64_t *next,
                           const int64_t *starts, char *err, size_t errlen)
{
    const settings_t *s = w->settings;
    for (int attempt = 1;; attempt++) {
        error_class_t cls = ERROR_CLASS_FATAL;
        int rc = starts ? w->store.record_starts(w->store.ctx, topic, n, starts, err, errlen, &cls)
                        : w->store.positions(w->store.ctx, topic, n, next, err, errlen, &cls);
        if (rc == 0 || cls == ERROR_CLASS_TRANSIENT) metrics_db_state(w->metrics, rc == 0);
        if (rc == 0) return 0;
        if (cls != ERROR_CLASS_TRANSIENT || attempt > s->db_retry_max_attempts) return -1;
        long delay = retry_backoff_ms(attempt, s->db_retry_base_ms);
        char state[6];
        note_error(w, "transient database error, retrying", err);
        LOG_WARN_F(w->def->name,
                   LOG_FIELDS(LF_STR("topic", topic), LF_INT("attempt", attempt),
                              LF_INT("max_attempts", s->db_retry_max_attempts), LF_INT("delay_ms", delay),
                              LF_STR("sqlstate", retry_sqlstate_of(err, state)), LF_STR("error", err)),
                   "transient database error %s, retrying", what);
        if (w->metrics) atomic_fetch_add_explicit(&w->metrics->db_retries, 1, memory_order_relaxed);
        if (back_off(w, delay)) {
            char why[512];
            snprintf(why, sizeof why, "%s", err);
            snprintf(err, errlen, "stop requested while retrying: %s", why);
            return -1;
        }
    }
}

int worker_read_positions(void *worker, const char *topic, int n, int64_t *next, char *err, size_t errlen)
{
    return assignment_step(worker, "reading where the assigned partitions start", topic, n, next, NULL, err,
                           errlen);
}

int worker_record_starts(void *worker, const char *topic, int n, const int64_t *next, char *err, size_t errlen)
{
    return assignment_step(worker, "recording where the assigned partitions start", topic, n, NULL, next, err,
                           errlen);
}

/* One polled batch on its way through the loop (DESIGN.md: The batch loop).
 * Its life: taken (polled and decoded); sent to PostgreSQL (send_batch: in
 * turn, or early, as soon as the batch before it is committed there);
 * finished (finish_batch: its results waited for, a failed attempt retried);
 * then its offsets committed, counted and logged. While it is in
 * PostgreSQL the next batch is taken into the other slot. */
typedef struct {
    batch_t batch;
    record_t *records; /* owned by the consumer until released */
    size_t n;
    int64_t start_us; /* clock_now_us when it was polled */
    /* How sending its first attempt ended, once send_batch ran. */
    struct {
        bool done;
        int rc;
        error_class_t cls;
        char err[1024];
    } sent;
} slot_t;

/* What store_batch and finish_batch return for a fenced batch. */
#define BATCH_FENCED 2

/* Store a decoded batch after `attempt` failed attempts (the last failed
 * with `err` and `cls`; attempt 0: nothing tried yet), retrying transient
 * errors with back-off and a fresh connection. Returns 0 (committed), 1
 * (stop requested during the back-off: not committed, will be redelivered),
 * BATCH_FENCED (rolled back: its partitions moved on in the database, with
 * the reason in `err`) or -1 (fatal, w->failure set). */
static int store_batch(worker_t *w, slot_t *sl, int attempt, char *err, size_t errlen,
                       error_class_t cls, batch_counts_t *counts)
{
    const settings_t *s = w->settings;
    for (;; attempt++) {
        if (attempt > 0) {
            if (cls == ERROR_CLASS_FENCED) return BATCH_FENCED;
            if (cls != ERROR_CLASS_TRANSIENT) return fail(w, "database error: %s", err);
            /* The batch waited for a writer's schema, not for PostgreSQL. */
            bool registry = sl->batch.unavailable;
            const char *what = registry ? "schema registry" : "database";
            if (!registry) metrics_db_state(w->metrics, false);
            if (attempt > s->db_retry_max_attempts)
                return fail(w, "%s unavailable: %d retries exhausted, last error: %s", what,
                            s->db_retry_max_attempts, err);
            long delay = retry_backoff_ms(attempt, s->db_retry_base_ms);
            /* Never dead-letter here: that would throw away healthy data
             * because PostgreSQL (or the registry) was restarting. */
            char state[6];
            note_error(w, registry ? "schema registry unavailable, retrying the batch"
                                   : "transient database error, retrying the batch",
                       err);
            LOG_WARN_F(w->def->name,
                       LOG_FIELDS(LF_INT("attempt", attempt), LF_INT("max_attempts", s->db_retry_max_attempts),
                                  LF_INT("delay_ms", delay),
                                  LF_STR("sqlstate", registry ? "" : retry_sqlstate_of(err, state)),
                                  LF_STR("error", err)),
                       "transient %s error, retrying the same batch", what);
            if (!registry) {
                w->store.disconnect(w->store.ctx);
                if (w->metrics) atomic_fetch_add_explicit(&w->metrics->db_retries, 1, memory_order_relaxed);
            }
            if (back_off(w, delay)) {
                /* Not "not stored": an attempt whose answer was lost may
                 * have been committed by PostgreSQL. */
                LOG_WARN(w->def->name, "stop requested during the back-off: batch of %zu not confirmed stored (last "
                         "attempt: %s); its offsets are not committed to Kafka: it is redelivered, and what PostgreSQL "
                         "stored of it is skipped", sl->n, err);
                return 1;
            }
            batch_decode(&sl->batch, sl->records, sl->n); /* fresh states for the retry */
        }
        if (sl->batch.unavailable) {
            snprintf(err, errlen, "schema registry: %s", sl->batch.unavailable_why);
            cls = ERROR_CLASS_TRANSIENT;
            continue;
        }
        memset(counts, 0, sizeof *counts);
        int rc = w->store.resolve(w->store.ctx, &sl->batch, err, errlen, &cls);
        if (rc == 0) {
            batch_deduplicate(&sl->batch);
            rc = w->store.write(w->store.ctx, &sl->batch, counts, err, errlen, &cls);
        }
        if (rc == 0) {
            metrics_db_state(w->metrics, true);
            return 0;
        }
    }
}

/* Send the batch's first attempt, when the store can send without waiting
 * (w->store.start): resolve and de-duplicate it unless it was prepared while
 * the batch before it was written, and send it. The outcome is kept in
 * sl->sent for finish_batch. */
static void send_batch(worker_t *w, slot_t *sl)
{
    fault_point(w, w->before_db_write, &sl->batch);
    if (!w->store.start) return;
    int rc = 0;
    sl->sent.cls = ERROR_CLASS_FATAL;
    if (sl->batch.unavailable) { /* nothing sent: finish_batch waits and decodes it again */
        snprintf(sl->sent.err, sizeof sl->sent.err, "schema registry: %s", sl->batch.unavailable_why);
        sl->sent.cls = ERROR_CLASS_TRANSIENT;
        sl->sent.rc = -1;
        sl->sent.done = true;
        return;
    }
    if (!w->store.prepared || !w->store.prepared(w->store.ctx, &sl->batch)) {
        rc = w->store.resolve(w->store.ctx, &sl->batch, sl->sent.err, sizeof sl->sent.err, &sl->sent.cls);
        if (rc == 0) batch_deduplicate(&sl->batch);
    }
    if (rc == 0) rc = w->store.start(w->store.ctx, &sl->batch, sl->sent.err, sizeof sl->sent.err, &sl->sent.cls);
    sl->sent.rc = rc;
    sl->sent.done = true;
}

/* While `sl` is in PostgreSQL, take the next batch into `spare` and decode
 * it (and resolve it from the application cache): the service's own cost,
 * done while PostgreSQL works, no longer adds to the batch time. Returns
 * the slot taken (NULL: nothing arrived), or sets *failed after a consumer
 * error, having finished and committed `sl` first: its rows are worth
 * committing. */
static slot_t *take_while_in_flight(worker_t *w, slot_t *sl, slot_t *spare, batch_counts_t *counts, int *failed)
{
    const settings_t *s = w->settings;
    char err[1024];
    error_class_t cls = ERROR_CLASS_FATAL;
    int m = w->consumer.poll(w->consumer.ctx, (size_t)s->max_poll_records[w->def->id], 0, &spare->records, err,
                             sizeof err);
    if (m > 0) {
        spare->start_us = clock_now_us();
        spare->n = (size_t)m;
        batch_decode(&spare->batch, spare->records, spare->n);
        if (w->store.prepare) w->store.prepare(w->store.ctx, &spare->batch);
        return spare;
    }
    if (m < 0) {
        char ferr[1024];
        if (w->store.finish(w->store.ctx, &sl->batch, counts, ferr, sizeof ferr, &cls) == 0)
            w->consumer.commit(w->consumer.ctx, sl->records, sl->n, s->commit_timeout_ms, ferr, sizeof ferr);
        *failed = fail(w, "Kafka consumer error: %s", err);
    }
    return NULL;
}

/* Wait for the batch's first attempt, retrying it (store_batch) when it
 * failed; a store that cannot send without waiting stores it here from the
 * start. Returns like store_batch; the reason of BATCH_FENCED in `err`. */
static int finish_batch(worker_t *w, slot_t *sl, batch_counts_t *counts, char *err, size_t errlen)
{
    error_class_t cls = ERROR_CLASS_FATAL;

    if (!sl->sent.done) return store_batch(w, sl, 0, err, errlen, cls, counts);
    sl->sent.done = false;
    if (sl->sent.rc != 0) {
        snprintf(err, errlen, "%s", sl->sent.err);
        return store_batch(w, sl, 1, err, errlen, sl->sent.cls, counts);
    }
    memset(counts, 0, sizeof *counts);
    if (w->store.finish(w->store.ctx, &sl->batch, counts, err, errlen, &cls) != 0)
        return store_batch(w, sl, 1, err, errlen, cls, counts);
    metrics_db_state(w->metrics, true);
    return 0;
}

/* A batch was fenced (DESIGN.md: Progress in the database): it rolled back
 * whole, because its partitions' positions moved on in the database since
 * this member read them — another member owns them now, or a replay reset
 * them. Neither it nor the batch taken after it is committed: both are
 * released, and every owned partition is read again from the database's
 * position (rewind), so this member goes on where the database says, or
 * stops writing partitions it lost until its next assignment. Returns 0,
 * or -1 when the pipeline must fail (w->failure set). */
static int after_fenced(worker_t *w, slot_t *cur, slot_t *next, const char *why)
{
    char offsets[512], err[1024];
    describe_offsets(w, &cur->batch, offsets, sizeof offsets);
    LOG_WARN_F(w->def->name, LOG_FIELDS(LF_STR("offsets", offsets), LF_STR("error", why)),
               "batch fenced: its partitions moved on in the database (another member owns them, or a replay reset "
               "them); rolled back, not committed, read again from the database's positions");
    if (w->metrics) atomic_fetch_add_explicit(&w->metrics->batches_fenced, 1, memory_order_relaxed);
    note_error(w, "batch fenced", why);
    w->consumer.release(w->consumer.ctx, cur->records);
    cur->records = NULL;
    if (next) {
        w->consumer.release(w->consumer.ctx, next->records);
        next->records = NULL;
        next->sent.done = false;
    }
    if (!w->consumer.rewind) return fail(w, "batch fenced: %s", why);
    if (w->consumer.rewind(w->consumer.ctx, err, sizeof err) != 0)
        return fail(w, "cannot read the partitions again after a fenced batch: %s", err);
    return 0;
}

/* Whether PostgreSQL answered an idle pipeline's question (rc 0), for
 * /readyz: the first silence is a warning, the return a note. */
static void note_db_answer(worker_t *w, int rc, const char *err)
{
    bool was_failing = w->metrics && atomic_load_explicit(&w->metrics->db_state, memory_order_relaxed) == DB_STATE_FAILING;
    if (rc != 0 && !was_failing) LOG_WARN(w->def->name, "PostgreSQL does not answer (the pipeline is not ready): %s", err);
    if (rc != 0) note_error(w, "PostgreSQL does not answer", err);
    if (rc == 0 && was_failing) LOG_INFO(w->def->name, "PostgreSQL answers again");
    metrics_db_state(w->metrics, rc == 0);
}

/* Read the unresolved dead letters of the pipeline's topic again when
 * due, for the status page (DESIGN.md: Status page): the HTTP thread
 * reads the snapshot and never opens a connection. A failure keeps the
 * last snapshot; one that is not the database refusing the query (a
 * connection lost, an attempt's deadline passed) is PostgreSQL not
 * answering, for /readyz as a failed ping is. Returns whether it asked and
 * heard nothing. */
static bool refresh_dead_letters(worker_t *w, int64_t *next_refresh)
{
    if (!w->metrics || !w->store.unresolved || clock_now_ms() < *next_refresh) return false;
    int64_t counts[METRICS_ERROR_TYPES];
    char err[1024];
    error_class_t cls = ERROR_CLASS_FATAL;
    int rc = w->store.unresolved(w->store.ctx, w->settings->topic[w->def->id], counts, METRICS_ERROR_TYPES, err,
                                 sizeof err, &cls);
    *next_refresh = clock_now_ms() + WORKER_DEAD_LETTERS_REFRESH_MS;
    if (rc == 0) {
        metrics_unresolved_dead_letters(w->metrics, counts);
        note_db_answer(w, 0, NULL);
        return false;
    }
    LOG_DEBUG(w->def->name, "unresolved dead letters not read: %s", err);
    if (cls != ERROR_CLASS_TRANSIENT) return false;
    note_db_answer(w, rc, err);
    return true;
}

/* An idle pipeline's turn: check PostgreSQL so that it is never left
 * unasked for longer than SETTINGS_DB_PING_MS, and refresh the lag gauges
 * (DESIGN.md: Probes and metrics). The next turn comes a poll later, so a
 * ping due before then is sent now: a healthy pipeline then hears from
 * PostgreSQL at least every ping period, well inside the silence /readyz
 * allows (settings_db_silence_ms). A refresh of the dead letters that heard nothing stands for the ping:
 * asking again would only wait another attempt. Never fails the pipeline:
 * a batch that meets the outage does that, after its retries. */
static void idle_checks(worker_t *w, int64_t *next_ping, int64_t *next_refresh)
{
    bool silent = refresh_dead_letters(w, next_refresh);
    if (w->metrics && w->consumer.lag)
        w->consumer.lag(w->consumer.ctx, w->metrics->lag, w->metrics->committed_lag, METRICS_MAX_PARTITIONS);
    if (silent) *next_ping = clock_now_ms() + SETTINGS_DB_PING_MS;
    if (silent || !w->store.ping || clock_now_ms() + w->settings->poll_timeout_ms < *next_ping) return;
    char err[1024];
    error_class_t cls = ERROR_CLASS_FATAL;
    int rc = w->store.ping(w->store.ctx, err, sizeof err, &cls);
    note_db_answer(w, rc, err);
    *next_ping = clock_now_ms() + SETTINGS_DB_PING_MS;
}

/* What the loop knows about its offset commits. */
typedef struct {
    int failures;             /* failed in a row (not refusals) */
    int64_t refused_since;    /* first refusal of the current rebalance, 0: none */
    int64_t next_flush;       /* idle flushes wait after a failure */
} commit_state_t;

/* Account for one commit (or flush) outcome. Returns -1 when the pipeline
 * must fail (w->failure set), else 0. `idle`: a flush of an idle pipeline,
 * which re-processes nothing and so is no livelock. */
static int commit_outcome(worker_t *w, commit_state_t *cs, int committed, const char *err, bool idle)
{
    const settings_t *s = w->settings;
    if (committed == 0) {
        if (cs->refused_since)
            LOG_INFO(w->def->name, "offset commits resumed after the rebalance (%lld ms)",
                     (long long)(clock_now_ms() - cs->refused_since));
        cs->failures = 0;
        cs->refused_since = 0;
        if (w->metrics) atomic_store_explicit(&w->metrics->holding_commits, false, memory_order_relaxed);
        return 0;
    }
    if (committed > 0) {
        /* A rebalance refuses commits until it completes; a busy member
         * makes many batches meanwhile. Not a livelock while it lasts less
         * than the max poll interval, the longest a legitimate rebalance
         * waits for its members. Logged and counted once per rebalance (the
         * commits held meanwhile are never sent). */
        if (cs->refused_since == 0) {
            cs->refused_since = clock_now_ms();
            if (w->metrics) atomic_store_explicit(&w->metrics->holding_commits, true, memory_order_relaxed);
            note_error(w, "offset commit refused while the group rebalances", err);
            if (w->metrics)
                atomic_fetch_add_explicit(&w->metrics->commit_failures, 1, memory_order_relaxed);
            LOG_WARN(w->def->name, "offset commit refused while the group rebalances (the rows are stored; commits are held until this member's next assignment, which covers them): %s",
                     err);
        }
        long long refused_for = clock_now_ms() - cs->refused_since;
        if (!idle && refused_for > s->max_poll_interval_ms)
            return fail(w, "commit livelock: offset commits refused for %lld ms, longer than STORAGE_MAX_POLL_INTERVAL_MS=%d: %s",
                        refused_for, s->max_poll_interval_ms, err);
        return 0;
    }
    if (w->metrics) atomic_fetch_add_explicit(&w->metrics->commit_failures, 1, memory_order_relaxed);
    /* A failure is not a refusal: a rebalance after it is timed from its own
     * first refusal. */
    cs->refused_since = 0;
    if (w->metrics) atomic_store_explicit(&w->metrics->holding_commits, false, memory_order_relaxed);
    note_error(w, "offset commit failed", err);
    /* An idle pipeline tries again after a pause, not at every poll. */
    cs->next_flush = clock_now_ms() + IDLE_FLUSH_PAUSE_MS;
    if (idle) {
        LOG_WARN(w->def->name, "offset commit of stored batches failed while idle (tried again in %d ms): %s",
                 IDLE_FLUSH_PAUSE_MS, err);
        return 0;
    }
    cs->failures++;
    LOG_WARN(w->def->name, "offset commit failed (%d/%d in a row; the rows are stored, the batch may be redelivered and skipped): %s",
             cs->failures, s->commit_failure_limit, err);
    /* A consumer that can never commit re-processes forever while lag never
     * falls: a livelock far harder to notice than a crash. */
    if (cs->failures >= s->commit_failure_limit)
        return fail(w, "commit livelock: %d offset commits failed in a row, last: %s", cs->failures, err);
    return 0;
}

/* At a stop, the offsets of what was stored are to be committed: a commit
 * refused while the group rebalances is tried again as the rebalance
 * completes (polling serves it; what arrives is dropped uncommitted). All of
 * it within one commit timeout, the share of the shutdown timeout that
 * settings_worst_case_stop_ms gives it. `records` NULL: only what is
 * pending. */
static int commit_at_stop(worker_t *w, const record_t *records, size_t n, char *err, size_t errlen)
{
    int64_t until = clock_now_ms() + w->settings->commit_timeout_ms;
    int committed;
    for (;;) {
        int64_t left = until - clock_now_ms();
        int timeout = left > 1 ? (int)left : 1;
        committed = records ? w->consumer.commit(w->consumer.ctx, records, n, timeout, err, errlen)
                            : w->consumer.flush(w->consumer.ctx, timeout, err, errlen);
        if (committed <= 0 || clock_now_ms() >= until) return committed;
        record_t *dropped = NULL;
        if (w->consumer.poll(w->consumer.ctx, 1, 100, &dropped, err, errlen) > 0)
            w->consumer.release(w->consumer.ctx, dropped);
    }
}

int worker_run(worker_t *w)
{
    const settings_t *s = w->settings;
    const pipeline_id_t id = w->def->id;
    slot_t slots[2];
    slot_t *cur = NULL, *next = NULL;
    commit_state_t cs = {0, 0, 0};
    int64_t next_ping = clock_now_ms() + SETTINGS_DB_PING_MS;
    int64_t next_refresh = 0; /* the dead letters are read at the first chance */
    bool committed_at_stop = false;
    int rc = 0;
    char err[1024];

    memset(slots, 0, sizeof slots);
    batch_init(&slots[0].batch, w->def);
    batch_init(&slots[1].batch, w->def);
    slots[0].batch.schemas = slots[1].batch.schemas = w->schemas;
    for (;;) {
        batch_counts_t counts;

        if (!cur) {
            if (atomic_load(w->stop)) break;
            if (w->heartbeat) w->heartbeat(w->heartbeat_ctx);
            cur = &slots[0];
            int n = w->consumer.poll(w->consumer.ctx, (size_t)s->max_poll_records[id], s->poll_timeout_ms,
                                     &cur->records, err, sizeof err);
            if (n < 0) {
                rc = fail(w, "Kafka consumer error: %s", err);
                cur = NULL;
                break;
            }
            if (n == 0) {
                cur = NULL;
                /* Idle: offsets a held or failed commit left behind are
                 * committed now, or lag never returns to 0 (at a stop, after
                 * the loop). */
                if (w->consumer.flush && !atomic_load(w->stop) && clock_now_ms() >= cs.next_flush) {
                    int committed = w->consumer.flush(w->consumer.ctx, s->commit_timeout_ms, err, sizeof err);
                    commit_outcome(w, &cs, committed, err, true);
                }
                if (!atomic_load(w->stop)) idle_checks(w, &next_ping, &next_refresh);
                continue;
            }
            cur->start_us = clock_now_us();
            cur->n = (size_t)n;
            batch_decode(&cur->batch, cur->records, cur->n);
        }
        if (w->heartbeat) w->heartbeat(w->heartbeat_ctx);

        /* Sent in turn, unless it was sent early. */
        if (!cur->sent.done) send_batch(w, cur);
        /* While it is in PostgreSQL, the next batch is taken; not after a
         * stop request: only the batches sent are finished. */
        if (cur->sent.done && cur->sent.rc == 0 && !atomic_load(w->stop)) {
            int failed = 0;
            next = take_while_in_flight(w, cur, cur == &slots[0] ? &slots[1] : &slots[0], &counts, &failed);
            if (failed) {
                rc = -1;
                break;
            }
        }
        int stored = finish_batch(w, cur, &counts, err, sizeof err);
        if (stored == BATCH_FENCED) {
            rc = after_fenced(w, cur, next, err);
            cur = next = NULL;
            if (rc != 0) break;
            continue;
        }
        if (stored != 0) {
            if (stored < 0) rc = -1;
            break; /* fatal, or a stop during the back-off */
        }
        next_ping = clock_now_ms() + SETTINGS_DB_PING_MS;
        /* The connection is free until the next batch is sent: that is at
         * once, before this one's offsets are committed and it is logged, so
         * PostgreSQL does not wait for those. */
        if (!atomic_load(w->stop)) refresh_dead_letters(w, &next_refresh);
        if (next && !atomic_load(w->stop)) send_batch(w, next);
        fault_point(w, w->after_db_commit, &cur->batch);
        log_rejects(w, &cur->batch);

        /* A stop finishes the batches sent to PostgreSQL (this one, and the
         * next if it was sent early), not one only taken meanwhile: that one
         * is released uncommitted and redelivered. */
        bool stopping = atomic_load(w->stop);
        if (stopping && next && !next->sent.done) {
            w->consumer.release(w->consumer.ctx, next->records);
            next->records = NULL;
            next = NULL;
        }
        bool last = stopping && !next;

        /* Only now, with the rows durable, may the offsets move. */
        int committed = last ? commit_at_stop(w, cur->records, cur->n, err, sizeof err)
                             : w->consumer.commit(w->consumer.ctx, cur->records, cur->n, s->commit_timeout_ms, err,
                                                  sizeof err);
        committed_at_stop = last;
        rc = commit_outcome(w, &cs, committed, err, false);
        double duration = (double)(clock_now_us() - cur->start_us) / 1e3;
        metrics_record_batch(w->metrics, &cur->batch, &counts, duration);
        if (w->metrics && w->consumer.lag)
            w->consumer.lag(w->consumer.ctx, w->metrics->lag, w->metrics->committed_lag, METRICS_MAX_PARTITIONS);
        if (log_current_level() <= LOG_LEVEL_INFO) {
            log_range_t *ranges;
            size_t nranges = log_ranges_of(w, &cur->batch, &ranges);
            LOG_INFO_F(w->def->name,
                       LOG_FIELDS(LF_INT("size", cur->n), LF_INT("inserted", counts.inserted),
                                  LF_INT("updated", counts.updated),
                                  LF_INT("skipped", counts.skipped + counts.superseded),
                                  LF_INT("dead_lettered", counts.dead_lettered), LF_RANGES("offsets", ranges, nranges),
                                  LF_FIXED("duration_ms", duration, 1), LF_STR("topic", w->settings->topic[id]),
                                  LF_INT("skipped_by_probe", counts.skipped_by_probe),
                                  LF_INT("inserted_by_copy", counts.inserted_by_copy),
                                  LF_INT("deleted", counts.deleted)),
                       "batch");
            free(ranges);
        }
        w->consumer.release(w->consumer.ctx, cur->records);
        cur->records = NULL;
        if (rc != 0) break; /* the batch is logged: it is stored */
        if (last) break;
        cur = next;
        next = NULL;
    }
    /* Batches taken but not committed are redelivered to whoever owns their
     * partitions next. Released first: the commit below may poll. */
    for (int k = 0; k < 2; k++) {
        if (slots[k].records) w->consumer.release(w->consumer.ctx, slots[k].records);
        slots[k].records = NULL;
        batch_free(&slots[k].batch);
    }
    /* A stop while idle or in a back-off: offsets an earlier held or failed
     * commit left behind. */
    if (rc == 0 && !committed_at_stop && w->consumer.flush) {
        int committed = commit_at_stop(w, NULL, 0, err, sizeof err);
        if (committed != 0)
            LOG_WARN(w->def->name, "offsets of stored batches not committed at the stop (they are redelivered and skipped): %s", err);
    }
    return rc;
}
