/* The batch loop's ordering rules, with a fake consumer and a fake store:
 * offsets move only after the database commit, transient errors retry the
 * same batch, fatal errors reach the supervisor, commit failures are counted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "shipped_schema.h"
#include "settings.h"
#include "bind_apps.h"
#include "core/clock.h"
#include "worker.h"

#define MAX_CALLS 64

typedef struct {
    /* script */
    int batches;           /* how many non-empty polls to serve */
    int write_fail_times;  /* how many writes fail before one succeeds (-1: always) */
    error_class_t write_fail_class;
    int commit_fail_times; /* -1: always */
    int commit_rebalancing_times; /* commits answered "group rebalancing" (-1: always) */
    int finish_fail_times;         /* pipelined writes failing at finish (transient) */
    int start_fail_on;             /* the pipelined start that fails (transient; 0: none) */
    int stop_on_start;             /* the pipelined start during which a stop is requested (0: none) */
    int starts;
    bool prepare_fails;            /* prepare leaves the batch to resolve */
    const batch_t *prepared;       /* as the store: the batch prepared ahead, until any resolve */
    uint64_t prepared_generation;
    int finishes;
    int64_t committed_first_offsets[8]; /* first offset of each committed batch */
    int ncommitted;
    bool stop_during_poll; /* request a stop while serving the first batch */
    bool stop_during_write_failure;
    int idle_polls;                /* empty polls served after the batches, before the stop */
    int flush_rebalancing_times;   /* flushes answered "group rebalancing" */
    int flushes_done;              /* flushes that committed pending offsets */
    bool pending;                  /* a commit was refused: offsets wait for a flush */
    int last_commit_timeout_ms;    /* the deadline the worker gave the last commit or flush */
    int unreleased;                /* polls whose records were not released yet */
    int positions_fail_times;      /* position reads failing before one succeeds (-1: always) */
    error_class_t positions_fail_class;
    int position_reads;
    bool idle_polls_wait;          /* an idle poll waits its timeout, as the real one does */
    /* observations */
    int64_t answered_ms;           /* clock_now_ms of the last write or ping answered */
    int pings;
    int64_t ping_gap_ms[8];        /* each ping's time since the answer before it */
    char calls[MAX_CALLS][16];
    int ncalls;
    int polls_served, writes, commits, disconnects;
    size_t committed_count;
    int64_t committed_last_offset;
    record_t records[2][3]; /* alternate: two polls may be alive at once */
    atomic_bool *stop;
} fake_t;

static void note(fake_t *f, const char *what)
{
    if (f->ncalls < MAX_CALLS) snprintf(f->calls[f->ncalls++], sizeof f->calls[0], "%s", what);
}

static const char *valid_review =
    "{\"package_name\":\"com.a\",\"review_id\":\"r1\",\"score\":4,\"thumbs_up_count\":1,"
    "\"reviewed_at\":\"2026-11-29T12:00:00Z\",\"last_synced_at\":\"2026-11-29T12:00:00Z\"}";

static int fake_poll(void *ctx, size_t max, int timeout_ms, record_t **records, char *err, size_t errlen)
{
    fake_t *f = ctx;
    (void)max, (void)timeout_ms, (void)err, (void)errlen;
    note(f, "poll");
    /* The real consumer aborts the process on a third unreleased poll. */
    if (f->unreleased >= 2) fail_msg("a poll while two polls are unreleased");
    if (f->polls_served >= f->batches) {
        if (f->idle_polls > 0) {
            f->idle_polls--;
            if (f->idle_polls_wait) nanosleep(&(struct timespec){timeout_ms / 1000, (timeout_ms % 1000) * 1000000L}, NULL);
            return 0;
        }
        /* Nothing more to serve: end the test like a SIGTERM would. */
        atomic_store(f->stop, true);
        return 0;
    }
    f->unreleased++;
    f->polls_served++;
    record_t *recs = f->records[f->polls_served % 2];
    for (int i = 0; i < 3; i++) {
        recs[i] = (record_t){.topic = "reviews", .partition = 0,
                                   .offset = f->polls_served * 10 + i, .timestamp_ms = -1,
                                   .value = valid_review, .value_len = strlen(valid_review)};
    }
    if (f->stop_during_poll) atomic_store(f->stop, true);
    *records = recs;
    return 3;
}

static void fake_release(void *ctx, record_t *records)
{
    fake_t *f = ctx;
    if (records) f->unreleased--;
}

static int fake_commit(void *ctx, const record_t *records, size_t count, int timeout_ms, char *err,
                       size_t errlen)
{
    fake_t *f = ctx;
    f->last_commit_timeout_ms = timeout_ms;
    note(f, "commit");
    f->commits++;
    if (f->commit_rebalancing_times < 0 || f->commits <= f->commit_rebalancing_times) {
        snprintf(err, errlen, "injected: group rebalance in progress");
        f->pending = true;
        return 1;
    }
    if (f->commit_fail_times < 0 || f->commits <= f->commit_fail_times) {
        snprintf(err, errlen, "injected commit failure");
        return -1;
    }
    f->committed_count = count;
    f->committed_last_offset = records[count - 1].offset;
    if (f->ncommitted < 8) f->committed_first_offsets[f->ncommitted++] = records[0].offset;
    return 0;
}

static int fake_flush(void *ctx, int timeout_ms, char *err, size_t errlen)
{
    fake_t *f = ctx;
    f->last_commit_timeout_ms = timeout_ms;
    note(f, "flush");
    if (!f->pending) return 0;
    if (f->flush_rebalancing_times-- > 0) {
        snprintf(err, errlen, "injected: group rebalance in progress");
        return 1;
    }
    f->pending = false;
    f->flushes_done++;
    return 0;
}


static int fake_resolve(void *ctx, batch_t *b, char *err, size_t errlen, error_class_t *cls)
{
    fake_t *f = ctx;
    (void)err, (void)errlen, (void)cls;
    note(f, "resolve");
    f->prepared = NULL;
    bind_apps(b, "com.a", 7);
    return 0;
}

static int fake_write(void *ctx, batch_t *b, batch_counts_t *counts, char *err, size_t errlen,
                      error_class_t *cls)
{
    fake_t *f = ctx;
    (void)b;
    note(f, "write");
    f->writes++;
    if (f->write_fail_times < 0 || f->writes <= f->write_fail_times) {
        snprintf(err, errlen, "injected write failure");
        *cls = f->write_fail_class;
        if (f->stop_during_write_failure) atomic_store(f->stop, true);
        return -1;
    }
    counts->inserted = 1;
    f->answered_ms = clock_now_ms();
    return 0;
}

static int fake_ping(void *ctx, char *err, size_t errlen, error_class_t *cls)
{
    fake_t *f = ctx;
    (void)err, (void)errlen, (void)cls;
    note(f, "ping");
    int64_t now = clock_now_ms();
    if (f->pings < 8) f->ping_gap_ms[f->pings] = now - f->answered_ms;
    f->pings++;
    f->answered_ms = now;
    return 0;
}

static int fake_start(void *ctx, batch_t *b, char *err, size_t errlen, error_class_t *cls)
{
    fake_t *f = ctx;
    note(f, "start");
    /* Every batch is written resolved: bound to its application. */
    for (size_t i = 0; i < b->count; i++)
        if (b->entries[i].state == ENTRY_EVENT && b->entries[i].application_id != 7)
            fail_msg("batch started unresolved");
    if (f->starts + 1 == f->stop_on_start) atomic_store(f->stop, true);
    if (++f->starts == f->start_fail_on) {
        snprintf(err, errlen, "injected: connection lost");
        *cls = ERROR_CLASS_TRANSIENT;
        return -1;
    }
    return 0;
}

static bool fake_prepare(void *ctx, batch_t *b)
{
    fake_t *f = ctx;
    note(f, "prepare");
    if (f->prepare_fails) return false;
    bind_apps(b, "com.a", 7);
    f->prepared = b;
    f->prepared_generation = b->generation;
    return true;
}

static bool fake_prepared(void *ctx, const batch_t *b)
{
    const fake_t *f = ctx;
    return f->prepared == b && f->prepared_generation == b->generation;
}

static int fake_finish(void *ctx, batch_t *b, batch_counts_t *counts, char *err, size_t errlen,
                       error_class_t *cls)
{
    fake_t *f = ctx;
    (void)b;
    note(f, "finish");
    if (++f->finishes <= f->finish_fail_times) {
        snprintf(err, errlen, "injected: connection lost");
        *cls = ERROR_CLASS_TRANSIENT;
        if (f->stop_during_write_failure) atomic_store(f->stop, true);
        return -1;
    }
    counts->inserted = 1;
    return 0;
}

static void fake_disconnect(void *ctx)
{
    fake_t *f = ctx;
    note(f, "disconnect");
    f->disconnects++;
}

static int fake_positions(void *ctx, const char *topic, int n, int64_t *next, char *err, size_t errlen,
                          error_class_t *cls)
{
    fake_t *f = ctx;
    (void)topic;
    note(f, "positions");
    f->position_reads++;
    if (f->stop_during_write_failure) atomic_store(f->stop, true);
    if (f->positions_fail_times != 0) {
        if (f->positions_fail_times > 0) f->positions_fail_times--;
        snprintf(err, errlen, "injected position read failure");
        *cls = f->positions_fail_class;
        return -1;
    }
    for (int p = 0; p < n; p++) next[p] = 100 + p;
    return 0;
}

static int fake_record_starts(void *ctx, const char *topic, int n, const int64_t *next, char *err,
                              size_t errlen, error_class_t *cls)
{
    fake_t *f = ctx;
    (void)topic;
    (void)n;
    (void)next;
    note(f, "record");
    f->position_reads++;
    if (f->positions_fail_times != 0) {
        if (f->positions_fail_times > 0) f->positions_fail_times--;
        snprintf(err, errlen, "injected record failure");
        *cls = f->positions_fail_class;
        return -1;
    }
    return 0;
}

typedef struct {
    settings_t settings;
    atomic_bool stop;
    fake_t fake;
    worker_t worker;
} fixture_t;

static int setup(void **state)
{
    static char *env[] = {"STORAGE_DB_RETRY_BASE_MS=1", "STORAGE_DB_RETRY_MAX_ATTEMPTS=3",
                          "STORAGE_COMMIT_FAILURE_LIMIT=5", "STORAGE_LOG_LEVEL=error", NULL};
    char err[512];
    fixture_t *fx = calloc(1, sizeof *fx);
    assert_non_null(fx);
    assert_int_equal(settings_load(&fx->settings, env, err, sizeof err), 0);
    log_configure(LOG_LEVEL_OFF, LOG_FORMAT_TEXT);
    atomic_init(&fx->stop, false);
    fx->fake.stop = &fx->stop;
    fx->fake.batches = 1;
    fx->worker = (worker_t){
        .settings = &fx->settings,
        .def = pipeline_get(PIPELINE_REVIEWS),
        .consumer = {&fx->fake, fake_poll, fake_release, fake_commit},
        .store = {&fx->fake, fake_resolve, fake_write, fake_disconnect, NULL, NULL, fake_positions,
                  fake_record_starts},
        .stop = &fx->stop,
    };
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *fx = *state;
    settings_free(&fx->settings);
    free(fx);
    return 0;
}

/* The calls the worker made, joined: "poll resolve write commit poll". */
static const char *trace(const fake_t *f)
{
    static char out[MAX_CALLS * 16];
    size_t n = 0;
    out[0] = '\0';
    for (int i = 0; i < f->ncalls; i++)
        n += (size_t)snprintf(out + n, sizeof out - n, "%s%s", i ? " " : "", f->calls[i]);
    return out;
}

static void offsets_are_committed_only_after_the_database_commit(void **state)
{
    fixture_t *fx = *state;
    assert_int_equal(worker_run(&fx->worker), 0);
    assert_string_equal(trace(&fx->fake), "poll resolve write commit poll");
    assert_int_equal(fx->fake.committed_count, 3);
    assert_int_equal(fx->fake.committed_last_offset, 12);
}

static void fatal_database_error_commits_nothing_and_fails_the_pipeline(void **state)
{
    fixture_t *fx = *state;
    fx->fake.write_fail_times = -1;
    fx->fake.write_fail_class = ERROR_CLASS_FATAL;
    assert_int_equal(worker_run(&fx->worker), -1);
    assert_int_equal(fx->fake.commits, 0);
    assert_int_equal(fx->fake.writes, 1);
    assert_non_null(strstr(fx->worker.failure, "injected write failure"));
}

static int fake_rewind(void *ctx, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    note(ctx, "rewind");
    return 0;
}

/* DESIGN.md: Progress in the database, fencing. A batch whose partitions
 * moved on in the database rolled back: it is neither retried nor
 * committed to Kafka, and the member reads its partitions again from the
 * database's positions before it takes another batch. */
static void a_fenced_batch_is_dropped_and_the_partitions_read_again_from_the_database(void **state)
{
    fixture_t *fx = *state;
    fx->fake.batches = 2;
    fx->fake.write_fail_times = 1;
    fx->fake.write_fail_class = ERROR_CLASS_FENCED;
    fx->worker.consumer.rewind = fake_rewind;
    assert_int_equal(worker_run(&fx->worker), 0);
    assert_string_equal(trace(&fx->fake), "poll resolve write rewind poll resolve write commit poll");
    assert_int_equal(fx->fake.commits, 1);
    assert_int_equal(fx->fake.unreleased, 0);
}

/* Without a way to read the partitions again, going on would write the
 * next batch from a position the database no longer holds. */
static void a_fenced_batch_fails_a_pipeline_that_cannot_read_its_partitions_again(void **state)
{
    fixture_t *fx = *state;
    fx->fake.write_fail_times = 1;
    fx->fake.write_fail_class = ERROR_CLASS_FENCED;
    assert_int_equal(worker_run(&fx->worker), -1);
    assert_int_equal(fx->fake.commits, 0);
    assert_non_null(strstr(fx->worker.failure, "fenced"));
}

static void transient_error_retries_the_same_batch_then_commits(void **state)
{
    fixture_t *fx = *state;
    fx->fake.write_fail_times = 2;
    fx->fake.write_fail_class = ERROR_CLASS_TRANSIENT;
    assert_int_equal(worker_run(&fx->worker), 0);
    assert_string_equal(trace(&fx->fake),
                        "poll resolve write disconnect resolve write disconnect resolve write commit poll");
    assert_int_equal(fx->fake.polls_served, 1); /* the same batch, not a new poll */
    assert_int_equal(fx->fake.committed_count, 3);
}

static void exhausted_retries_fail_the_pipeline_without_commit(void **state)
{
    fixture_t *fx = *state;
    fx->fake.write_fail_times = -1;
    fx->fake.write_fail_class = ERROR_CLASS_TRANSIENT;
    assert_int_equal(worker_run(&fx->worker), -1);
    assert_int_equal(fx->fake.writes, 4); /* the first try and 3 retries */
    assert_int_equal(fx->fake.commits, 0);
    assert_non_null(strstr(fx->worker.failure, "retries exhausted"));
}

static void stop_request_interrupts_the_backoff_without_commit(void **state)
{
    fixture_t *fx = *state;
    static char *slow[] = {"STORAGE_DB_RETRY_BASE_MS=600000", "STORAGE_DB_RETRY_MAX_ATTEMPTS=1",
                           "STORAGE_MAX_POLL_INTERVAL_MS=86400000", NULL};
    char err[512];
    settings_free(&fx->settings);
    assert_int_equal(settings_load(&fx->settings, slow, err, sizeof err), 0);
    fx->fake.write_fail_times = -1;
    fx->fake.write_fail_class = ERROR_CLASS_TRANSIENT;
    fx->fake.stop_during_write_failure = true;
    /* Would sleep ten minutes if the stop request did not interrupt it. */
    assert_int_equal(worker_run(&fx->worker), 0);
    assert_int_equal(fx->fake.commits, 0);
    assert_int_equal(fx->fake.writes, 1);
}

static void stop_request_finishes_and_commits_the_in_flight_batch(void **state)
{
    fixture_t *fx = *state;
    fx->fake.batches = 5;
    fx->fake.stop_during_poll = true;
    assert_int_equal(worker_run(&fx->worker), 0);
    assert_string_equal(trace(&fx->fake), "poll resolve write commit");
}

static void commit_failures_below_the_limit_keep_the_pipeline_running(void **state)
{
    fixture_t *fx = *state;
    fx->fake.batches = 6;
    fx->fake.commit_fail_times = 4; /* limit is 5 in a row */
    assert_int_equal(worker_run(&fx->worker), 0);
    assert_int_equal(fx->fake.commits, 6);
    assert_int_equal(fx->fake.polls_served, 6);
}

static void commit_failures_at_the_limit_fail_the_pipeline(void **state)
{
    fixture_t *fx = *state;
    fx->fake.batches = 10;
    fx->fake.commit_fail_times = -1;
    assert_int_equal(worker_run(&fx->worker), -1);
    assert_int_equal(fx->fake.commits, 5);
    assert_non_null(strstr(fx->worker.failure, "commit livelock"));
}

static void commits_refused_during_a_rebalance_do_not_count_toward_the_limit(void **state)
{
    fixture_t *fx = *state;
    fx->fake.batches = 12;
    fx->fake.commit_rebalancing_times = 10; /* twice the limit, then the rebalance is over */
    assert_int_equal(worker_run(&fx->worker), 0);
    assert_int_equal(fx->fake.commits, 12);
}

/* The status page's inputs (DESIGN.md: Status page), as the heartbeat sees
 * them at each turn of the loop and each slice of a back-off. */
typedef struct {
    pipeline_metrics_t *pm;
    int backing_off_seen, holding_seen;
} observer_t;

static void observe(void *ctx)
{
    observer_t *o = ctx;
    o->backing_off_seen += atomic_load(&o->pm->backing_off);
    o->holding_seen += atomic_load(&o->pm->holding_commits);
}

static int fake_unresolved(void *ctx, const char *topic, int64_t *counts, size_t n, char *err, size_t errlen,
                           error_class_t *cls)
{
    (void)ctx, (void)topic, (void)err, (void)errlen, (void)cls;
    for (size_t i = 0; i < n; i++) counts[i] = (int64_t)i;
    return 0;
}

/* Runs the worker with metrics and an observer; returns the metrics (free
 * them) and fills *o. */
static metrics_t *run_observed(fixture_t *fx, observer_t *o, int expected_rc)
{
    metrics_t *m = metrics_new(&fx->settings);
    o->pm = metrics_pipeline(m, PIPELINE_REVIEWS);
    fx->worker.metrics = o->pm;
    fx->worker.heartbeat = observe;
    fx->worker.heartbeat_ctx = o;
    assert_int_equal(worker_run(&fx->worker), expected_rc);
    return m;
}

static void a_transient_error_shows_as_backing_off_and_is_the_last_error(void **state)
{
    fixture_t *fx = *state;
    observer_t o = {0};
    char error[METRICS_LAST_ERROR_LEN];
    fx->fake.write_fail_times = 1;
    fx->fake.write_fail_class = ERROR_CLASS_TRANSIENT;
    metrics_t *m = run_observed(fx, &o, 0);
    assert_true(o.backing_off_seen > 0);
    assert_false(atomic_load(&o.pm->backing_off)); /* over once the batch is stored */
    assert_true(metrics_last_error_get(o.pm, error, sizeof error) > 0);
    assert_string_equal(error, "transient database error, retrying the batch: injected write failure");
    metrics_free(m);
}

static void commits_refused_by_a_rebalance_show_as_holding_until_one_succeeds(void **state)
{
    fixture_t *fx = *state;
    observer_t o = {0};
    fx->fake.batches = 3;
    fx->fake.commit_rebalancing_times = 1;
    metrics_t *m = run_observed(fx, &o, 0);
    assert_true(o.holding_seen > 0);
    assert_false(atomic_load(&o.pm->holding_commits));
    assert_int_equal(o.backing_off_seen, 0);
    metrics_free(m);
}

static void a_pipeline_reads_the_unresolved_dead_letters_for_the_status_page(void **state)
{
    fixture_t *fx = *state;
    observer_t o = {0};
    fx->worker.store.unresolved = fake_unresolved;
    metrics_t *m = run_observed(fx, &o, 0);
    assert_true(atomic_load(&o.pm->unresolved_unix_ms) > 0);
    for (int i = 0; i < METRICS_ERROR_TYPES; i++)
        assert_int_equal(atomic_load(&o.pm->unresolved_dead_letters[i]), i);
    metrics_free(m);
}

/* The fixture's settings with STORAGE_POLL_TIMEOUT_MS=`poll_ms`, and the
 * idle polls waiting it out. */
static void idle_polls_of(fixture_t *fx, const char *poll_ms)
{
    char poll[64], err[512];
    char *env[] = {poll, "STORAGE_LOG_LEVEL=error", NULL};
    snprintf(poll, sizeof poll, "STORAGE_POLL_TIMEOUT_MS=%s", poll_ms);
    settings_free(&fx->settings);
    assert_int_equal(settings_load(&fx->settings, env, err, sizeof err), 0);
    fx->worker.store.ping = fake_ping;
    fx->fake.idle_polls_wait = true;
}

/* /readyz may say ready for at most SETTINGS_DB_PING_MS and one attempt after
 * PostgreSQL last answered (DESIGN.md: Probes and metrics): an idle
 * pipeline asks at the last turn of its loop before the ping period ends,
 * not at the first one after it, a poll timeout later. */
static void an_idle_pipeline_asks_postgresql_before_a_poll_could_outlast_the_ping_period(void **state)
{
    fixture_t *fx = *state;
    idle_polls_of(fx, "1200"); /* the turn after 1.2 s is the last before 2 s */
    fx->fake.idle_polls = 1;
    assert_int_equal(worker_run(&fx->worker), 0);
    if (fx->fake.pings == 0)
        fail_msg("PostgreSQL was not asked at the turn 1.2 s after it answered: the next turn is 2.4 s after, past "
                 "SETTINGS_DB_PING_MS=%d", SETTINGS_DB_PING_MS);
    assert_string_equal(trace(&fx->fake), "poll resolve write commit poll ping poll");
    assert_in_range(fx->fake.ping_gap_ms[0], 0, SETTINGS_DB_PING_MS);
}

/* Asking early by up to a poll is all: short polls do not each ping. */
static void an_idle_pipeline_does_not_ask_postgresql_at_every_poll(void **state)
{
    fixture_t *fx = *state;
    idle_polls_of(fx, "200");
    fx->fake.idle_polls = 3;
    assert_int_equal(worker_run(&fx->worker), 0);
    assert_string_equal(trace(&fx->fake), "poll resolve write commit poll poll poll poll");
    assert_int_equal(fx->fake.pings, 0);
}

static void at_a_stop_a_commit_refused_by_a_rebalance_is_retried(void **state)
{
    fixture_t *fx = *state;
    fx->fake.batches = 1;
    fx->fake.stop_during_poll = true;
    fx->fake.commit_rebalancing_times = 2;
    assert_int_equal(worker_run(&fx->worker), 0);
    /* Polling between the tries lets the rebalance complete. */
    assert_string_equal(trace(&fx->fake), "poll resolve write commit poll commit poll commit");
    assert_int_equal(fx->fake.ncommitted, 1);
}

/* The stop's commit has one commit timeout in all, which is what the
 * shutdown budget (settings_worst_case_stop_ms) gives it: refusals are
 * retried within it, and each try is given only what is left of it. */
static void a_stop_whose_commit_is_refused_for_good_ends_within_one_commit_timeout(void **state)
{
    fixture_t *fx = *state;
    static char *env[] = {"STORAGE_COMMIT_TIMEOUT_MS=300", "STORAGE_LOG_LEVEL=error", NULL};
    char err[512];
    settings_free(&fx->settings);
    assert_int_equal(settings_load(&fx->settings, env, err, sizeof err), 0);
    fx->fake.batches = 1;
    fx->fake.stop_during_poll = true;
    fx->fake.commit_rebalancing_times = -1;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(worker_run(&fx->worker), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long long ms = (t1.tv_sec - t0.tv_sec) * 1000LL + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    /* 300 ms, and the last 100 ms poll between tries. */
    if (ms > 300 + 100 + 200) fail_msg("the stop's commit took %lld ms, its budget is 300 ms", ms);
    assert_true(fx->fake.commits > 1);
    assert_in_range(fx->fake.last_commit_timeout_ms, 1, 300);
    assert_int_equal(fx->fake.ncommitted, 0);
}

static void an_idle_pipeline_commits_what_a_refused_commit_left_behind(void **state)
{
    fixture_t *fx = *state;
    fx->worker.consumer.flush = fake_flush;
    fx->fake.batches = 1;
    fx->fake.commit_rebalancing_times = 1;
    fx->fake.idle_polls = 2;
    assert_int_equal(worker_run(&fx->worker), 0);
    /* No new records would ever carry these offsets: the first idle poll
     * commits them, or the group's offset stays behind the stored rows. */
    assert_string_equal(trace(&fx->fake), "poll resolve write commit poll flush poll flush poll flush");
    assert_int_equal(fx->fake.flushes_done, 1);
}

static void a_stop_while_idle_waits_for_the_rebalance_to_commit_held_offsets(void **state)
{
    fixture_t *fx = *state;
    fx->worker.consumer.flush = fake_flush;
    fx->fake.batches = 1;
    fx->fake.commit_rebalancing_times = 1;
    fx->fake.flush_rebalancing_times = 2;
    assert_int_equal(worker_run(&fx->worker), 0);
    /* The stop arrives at the empty poll; polling lets the rebalance end. */
    assert_string_equal(trace(&fx->fake), "poll resolve write commit poll flush poll flush poll flush");
    assert_int_equal(fx->fake.flushes_done, 1);
}

static void a_stop_in_a_back_off_releases_its_batches_before_committing_what_is_pending(void **state)
{
    fixture_t *fx = *state;
    fx->worker.consumer.flush = fake_flush;
    fx->worker.store.start = fake_start;
    fx->worker.store.finish = fake_finish;
    fx->fake.batches = 2; /* the second is taken while the first is written */
    fx->fake.finish_fail_times = 1;
    fx->fake.stop_during_write_failure = true;
    fx->fake.pending = true; /* an earlier batch's commit was held */
    fx->fake.flush_rebalancing_times = 1;
    assert_int_equal(worker_run(&fx->worker), 0);
    /* Both batches go back uncommitted; the held offsets are committed,
     * polling (with both batches released) while the rebalance ends. */
    assert_string_equal(trace(&fx->fake), "poll resolve start poll finish disconnect flush poll flush");
    assert_int_equal(fx->fake.flushes_done, 1);
    assert_int_equal(fx->fake.unreleased, 0);
}

static void a_rebalance_that_never_ends_fails_the_pipeline(void **state)
{
    fixture_t *fx = *state;
    static char *env[] = {"STORAGE_MAX_POLL_INTERVAL_MS=1500", "STORAGE_SESSION_TIMEOUT_MS=1000",
                          "STORAGE_POLL_TIMEOUT_MS=10", "STORAGE_DB_RETRY_MAX_ATTEMPTS=0",
                          "STORAGE_DB_STATEMENT_TIMEOUT_MS=100", "STORAGE_COMMIT_TIMEOUT_MS=100", NULL};
    char err[512];
    settings_free(&fx->settings);
    if (settings_load(&fx->settings, env, err, sizeof err)) fail_msg("%s", err);
    fx->fake.batches = 1000000;
    fx->fake.commit_rebalancing_times = -1;
    /* Every commit refused for longer than the max poll interval: no
     * legitimate rebalance lasts that long. */
    assert_int_equal(worker_run(&fx->worker), -1);
    assert_non_null(strstr(fx->worker.failure, "commit livelock"));
    assert_true(fx->fake.polls_served < 1000000);
}

static void pipelined(fixture_t *fx)
{
    fx->worker.store.start = fake_start;
    fx->worker.store.finish = fake_finish;
}

static void pipelined_batch_commits_its_offsets_only_after_its_write_finished(void **state)
{
    fixture_t *fx = *state;
    pipelined(fx);
    fx->fake.batches = 2;
    assert_int_equal(worker_run(&fx->worker), 0);
    /* The second batch is taken while the first is written, and sent as
     * soon as the first is finished, but each batch's offsets move only
     * after its own finish. */
    assert_string_equal(trace(&fx->fake),
                        "poll resolve start poll finish resolve start commit poll finish commit");
    assert_int_equal(fx->fake.ncommitted, 2);
    assert_int_equal(fx->fake.committed_first_offsets[0], 10);
    assert_int_equal(fx->fake.committed_first_offsets[1], 20);
}

static void transient_error_at_finish_retries_the_same_batch_before_the_next(void **state)
{
    fixture_t *fx = *state;
    pipelined(fx);
    fx->fake.batches = 2;
    fx->fake.finish_fail_times = 1;
    assert_int_equal(worker_run(&fx->worker), 0);
    assert_string_equal(trace(&fx->fake),
                        "poll resolve start poll finish disconnect resolve write resolve start commit "
                        "poll finish commit");
    assert_int_equal(fx->fake.committed_first_offsets[0], 10);
    assert_int_equal(fx->fake.committed_first_offsets[1], 20);
}

/* Pipelined, and the next batch resolved ahead as the store does. */
static void prepared_ahead(fixture_t *fx)
{
    pipelined(fx);
    fx->worker.store.prepare = fake_prepare;
    fx->worker.store.prepared = fake_prepared;
}

static void a_batch_resolved_from_the_cache_while_another_is_written_is_not_resolved_again(void **state)
{
    fixture_t *fx = *state;
    prepared_ahead(fx);
    fx->fake.batches = 3;
    assert_int_equal(worker_run(&fx->worker), 0);
    assert_string_equal(trace(&fx->fake), "poll resolve start poll prepare finish start commit "
                                          "poll prepare finish start commit poll finish commit");
    assert_int_equal(fx->fake.ncommitted, 3);
}

static void a_batch_the_cache_cannot_resolve_ahead_is_resolved_in_its_turn(void **state)
{
    fixture_t *fx = *state;
    prepared_ahead(fx);
    fx->fake.prepare_fails = true;
    fx->fake.batches = 2;
    assert_int_equal(worker_run(&fx->worker), 0);
    assert_string_equal(trace(&fx->fake),
                        "poll resolve start poll prepare finish resolve start commit poll finish commit");
}

static void a_prepared_batch_whose_write_fails_is_decoded_and_resolved_again(void **state)
{
    fixture_t *fx = *state;
    prepared_ahead(fx);
    fx->fake.batches = 2;
    fx->fake.start_fail_on = 2; /* the prepared batch's */
    assert_int_equal(worker_run(&fx->worker), 0);
    assert_string_equal(trace(&fx->fake), "poll resolve start poll prepare finish start commit "
                                          "disconnect resolve write commit poll");
    assert_int_equal(fx->fake.committed_first_offsets[1], 20);
}

static void a_prepared_batch_is_resolved_again_after_the_one_before_it_was_retried(void **state)
{
    fixture_t *fx = *state;
    prepared_ahead(fx);
    fx->fake.batches = 2;
    fx->fake.finish_fail_times = 1; /* the first batch's: its retry may learn new ids */
    assert_int_equal(worker_run(&fx->worker), 0);
    assert_string_equal(trace(&fx->fake), "poll resolve start poll prepare finish disconnect resolve write "
                                          "resolve start commit poll finish commit");
}

/* PostgreSQL need not wait for the Kafka commit and the log line: the next
 * batch is sent first, its own offsets still only after its finish. */
static void the_next_batch_is_sent_before_the_offsets_of_the_one_before_are_committed(void **state)
{
    fixture_t *fx = *state;
    prepared_ahead(fx);
    fx->fake.batches = 2;
    assert_int_equal(worker_run(&fx->worker), 0);
    assert_string_equal(trace(&fx->fake), "poll resolve start poll prepare finish start commit poll finish commit");
    assert_int_equal(fx->fake.ncommitted, 2);
    assert_int_equal(fx->fake.committed_first_offsets[0], 10);
    assert_int_equal(fx->fake.committed_first_offsets[1], 20);
}

/* A stop after the next batch was sent: that batch is in PostgreSQL's hands
 * (its COMMIT went with it), so it is finished and committed too, and nothing
 * more is taken. */
static void a_stop_after_the_next_batch_was_sent_finishes_and_commits_it(void **state)
{
    fixture_t *fx = *state;
    prepared_ahead(fx);
    fx->fake.batches = 5;
    fx->fake.stop_on_start = 2;
    assert_int_equal(worker_run(&fx->worker), 0);
    assert_string_equal(trace(&fx->fake), "poll resolve start poll prepare finish start commit finish commit");
    assert_int_equal(fx->fake.ncommitted, 2);
    assert_int_equal(fx->fake.committed_first_offsets[1], 20);
    assert_int_equal(fx->fake.unreleased, 0);
}

static void stop_request_takes_no_new_batch_while_the_last_one_is_written(void **state)
{
    fixture_t *fx = *state;
    pipelined(fx);
    fx->fake.batches = 5;
    fx->fake.stop_during_poll = true;
    assert_int_equal(worker_run(&fx->worker), 0);
    assert_string_equal(trace(&fx->fake), "poll resolve start finish commit");
}

static void unregistered_app_is_dead_lettered_not_retried(void **state)
{
    fixture_t *fx = *state;
    batch_t b;
    record_t r = {.topic = "reviews", .value = valid_review, .value_len = strlen(valid_review)};
    (void)fx;
    batch_init(&b, pipeline_get(PIPELINE_REVIEWS));
    batch_decode(&b, &r, 1);
    bind_apps(&b, "com.a", 7);
    assert_int_equal(b.entries[0].state, ENTRY_EVENT);
    assert_int_equal(b.entries[0].application_id, 7);

    static const char *other =
        "{\"package_name\":\"com.unknown\",\"review_id\":\"r1\",\"score\":4,\"thumbs_up_count\":1,"
        "\"reviewed_at\":\"2026-11-29T12:00:00Z\",\"last_synced_at\":\"2026-11-29T12:00:00Z\"}";
    r.value = other;
    r.value_len = strlen(other);
    batch_decode(&b, &r, 1);
    bind_apps(&b, "com.a", 7);
    assert_int_equal(b.entries[0].state, ENTRY_REJECTED);
    assert_string_equal(b.entries[0].rejection.error_type, "unregistered_app");
    assert_non_null(strstr(b.entries[0].rejection.detail, "com.unknown"));
    batch_free(&b);
}

static void unregistered_multibyte_name_gives_a_valid_utf8_detail(void **state)
{
    (void)state;
    /* 255 three-byte characters: the name alone is longer than the detail. */
    char name[255 * 3 + 1] = {0};
    for (int i = 0; i < 255; i++) strcat(name, "\xe2\x82\xac");
    char value[1200];
    snprintf(value, sizeof value,
             "{\"package_name\":\"%s\",\"review_id\":\"r1\",\"score\":4,\"thumbs_up_count\":1,"
             "\"reviewed_at\":\"2026-11-29T12:00:00Z\",\"last_synced_at\":\"2026-11-29T12:00:00Z\"}",
             name);
    record_t r = {.topic = "reviews", .value = value, .value_len = strlen(value)};
    batch_t b;
    batch_init(&b, pipeline_get(PIPELINE_REVIEWS));
    batch_decode(&b, &r, 1);
    bind_apps(&b, "com.a", 7);
    assert_int_equal(b.entries[0].state, ENTRY_REJECTED);
    const unsigned char *p = (const unsigned char *)b.entries[0].rejection.detail;
    while (*p) { /* only ASCII and whole euro signs */
        if (*p < 0x80) p++;
        else if (p[0] == 0xe2 && p[1] == 0x82 && p[2] == 0xac) p += 3;
        else fail_msg("detail is not valid UTF-8 at byte %td", p - (const unsigned char *)b.entries[0].rejection.detail);
    }
    batch_free(&b);
}

static void review_with_latest_last_synced_at_wins_inside_a_batch(void **state)
{
    (void)state;
#define REVIEW_FMT \
        "{\"package_name\":\"com.a\",\"review_id\":\"%s\",\"score\":4,\"thumbs_up_count\":%d," \
        "\"reviewed_at\":\"2026-11-29T12:00:00Z\",\"last_synced_at\":\"%s\"}"
    char v[4][512];
    record_t r[4];
    snprintf(v[0], sizeof v[0], REVIEW_FMT, "r1", 5, "2026-11-29T13:00:00Z");
    snprintf(v[1], sizeof v[1], REVIEW_FMT, "r1", 9, "2026-11-29T15:00:00Z"); /* newest */
    snprintf(v[2], sizeof v[2], REVIEW_FMT, "r1", 7, "2026-11-29T14:00:00Z");
    snprintf(v[3], sizeof v[3], REVIEW_FMT, "r2", 1, "2026-11-29T14:00:00Z");
    for (int i = 0; i < 4; i++) r[i] = (record_t){.topic = "reviews", .value = v[i], .value_len = strlen(v[i])};
    batch_t b;
    batch_init(&b, pipeline_get(PIPELINE_REVIEWS));
    batch_decode(&b, r, 4);
    bind_apps(&b, "com.a", 7);
    assert_int_equal(batch_deduplicate(&b), 2);
    assert_int_equal(b.entries[0].state, ENTRY_SUPERSEDED);
    assert_int_equal(b.entries[1].state, ENTRY_EVENT);
    assert_int_equal(b.entries[2].state, ENTRY_SUPERSEDED);
    assert_int_equal(b.entries[3].state, ENTRY_EVENT);
    batch_free(&b);
}

static void app_stats_redelivery_inside_a_batch_keeps_the_first(void **state)
{
    (void)state;
    static const char *v = "{\"package_name\":\"com.a\",\"crawled_at\":\"2026-11-29T12:00:00Z\"}";
    /* The same instant written with an offset: the same natural key. */
    static const char *w = "{\"package_name\":\"com.a\",\"crawled_at\":\"2026-11-29T15:30:00+03:30\"}";
    record_t r[2] = {{.topic = "app-stats", .value = v, .value_len = strlen(v)},
                     {.topic = "app-stats", .value = w, .value_len = strlen(w)}};
    batch_t b;
    batch_init(&b, pipeline_get(PIPELINE_APP_STATS));
    batch_decode(&b, r, 2);
    bind_apps(&b, "com.a", 7);
    assert_int_equal(batch_deduplicate(&b), 1);
    assert_int_equal(b.entries[0].state, ENTRY_EVENT);
    assert_int_equal(b.entries[1].state, ENTRY_SUPERSEDED);
    batch_free(&b);
}

static void assigned_partitions_start_at_the_database_positions(void **state)
{
    fixture_t *fx = *state;
    int64_t next[3];
    char err[256];
    assert_int_equal(worker_read_positions(&fx->worker, "reviews", 3, next, err, sizeof err), 0);
    assert_int_equal(next[0], 100);
    assert_int_equal(next[2], 102);
    assert_int_equal(fx->fake.position_reads, 1);
}

static void a_transient_error_reading_positions_is_retried(void **state)
{
    fixture_t *fx = *state;
    int64_t next[1];
    char err[256];
    fx->fake.positions_fail_times = 2;
    fx->fake.positions_fail_class = ERROR_CLASS_TRANSIENT;
    assert_int_equal(worker_read_positions(&fx->worker, "reviews", 1, next, err, sizeof err), 0);
    assert_int_equal(fx->fake.position_reads, 3);
    assert_int_equal(next[0], 100);
}

static void positions_that_cannot_be_read_fail_the_assignment(void **state)
{
    fixture_t *fx = *state;
    int64_t next[1];
    char err[256];
    /* Transient, until the retries run out: the first try and 3 retries. */
    fx->fake.positions_fail_times = -1;
    fx->fake.positions_fail_class = ERROR_CLASS_TRANSIENT;
    assert_int_equal(worker_read_positions(&fx->worker, "reviews", 1, next, err, sizeof err), -1);
    assert_int_equal(fx->fake.position_reads, 4);
    assert_non_null(strstr(err, "injected position read failure"));
    /* Not transient (a missing privilege): at once. */
    fx->fake.position_reads = 0;
    fx->fake.positions_fail_class = ERROR_CLASS_FATAL;
    assert_int_equal(worker_read_positions(&fx->worker, "reviews", 1, next, err, sizeof err), -1);
    assert_int_equal(fx->fake.position_reads, 1);
}

static void a_stop_interrupts_the_back_off_of_a_position_read(void **state)
{
    fixture_t *fx = *state;
    static char *slow[] = {"STORAGE_DB_RETRY_BASE_MS=600000", "STORAGE_DB_RETRY_MAX_ATTEMPTS=1",
                           "STORAGE_MAX_POLL_INTERVAL_MS=86400000", NULL};
    int64_t next[1];
    char err[256];
    settings_free(&fx->settings);
    assert_int_equal(settings_load(&fx->settings, slow, err, sizeof err), 0);
    fx->fake.positions_fail_times = -1;
    fx->fake.positions_fail_class = ERROR_CLASS_TRANSIENT;
    fx->fake.stop_during_write_failure = true;
    /* Would sleep ten minutes if the stop did not interrupt it. */
    assert_int_equal(worker_read_positions(&fx->worker, "reviews", 1, next, err, sizeof err), -1);
    assert_int_equal(fx->fake.position_reads, 1);
    assert_non_null(strstr(err, "stop requested"));
}

static void recording_where_partitions_start_is_retried_like_a_read(void **state)
{
    fixture_t *fx = *state;
    const int64_t starts[2] = {-1, 7};
    char err[256];
    fx->fake.positions_fail_times = 1;
    fx->fake.positions_fail_class = ERROR_CLASS_TRANSIENT;
    assert_int_equal(worker_record_starts(&fx->worker, "reviews", 2, starts, err, sizeof err), 0);
    assert_string_equal(trace(&fx->fake), "record record");
    fx->fake.ncalls = 0;
    fx->fake.positions_fail_times = -1;
    fx->fake.positions_fail_class = ERROR_CLASS_FATAL;
    assert_int_equal(worker_record_starts(&fx->worker, "reviews", 2, starts, err, sizeof err), -1);
    assert_string_equal(trace(&fx->fake), "record");
    assert_non_null(strstr(err, "injected record failure"));
}

int main(void)
{
    shipped_schema_bind();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(offsets_are_committed_only_after_the_database_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(fatal_database_error_commits_nothing_and_fails_the_pipeline, setup, teardown),
        cmocka_unit_test_setup_teardown(transient_error_retries_the_same_batch_then_commits, setup, teardown),
        cmocka_unit_test_setup_teardown(a_fenced_batch_is_dropped_and_the_partitions_read_again_from_the_database,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(a_fenced_batch_fails_a_pipeline_that_cannot_read_its_partitions_again, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(exhausted_retries_fail_the_pipeline_without_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(stop_request_interrupts_the_backoff_without_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(stop_request_finishes_and_commits_the_in_flight_batch, setup, teardown),
        cmocka_unit_test_setup_teardown(commit_failures_below_the_limit_keep_the_pipeline_running, setup, teardown),
        cmocka_unit_test_setup_teardown(commit_failures_at_the_limit_fail_the_pipeline, setup, teardown),
        cmocka_unit_test_setup_teardown(commits_refused_during_a_rebalance_do_not_count_toward_the_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(an_idle_pipeline_commits_what_a_refused_commit_left_behind, setup, teardown),
        cmocka_unit_test_setup_teardown(a_stop_while_idle_waits_for_the_rebalance_to_commit_held_offsets, setup, teardown),
        cmocka_unit_test_setup_teardown(a_stop_whose_commit_is_refused_for_good_ends_within_one_commit_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(a_stop_in_a_back_off_releases_its_batches_before_committing_what_is_pending, setup, teardown),
        cmocka_unit_test_setup_teardown(a_rebalance_that_never_ends_fails_the_pipeline, setup, teardown),
        cmocka_unit_test_setup_teardown(at_a_stop_a_commit_refused_by_a_rebalance_is_retried, setup, teardown),
        cmocka_unit_test_setup_teardown(a_transient_error_shows_as_backing_off_and_is_the_last_error, setup, teardown),
        cmocka_unit_test_setup_teardown(commits_refused_by_a_rebalance_show_as_holding_until_one_succeeds, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_pipeline_reads_the_unresolved_dead_letters_for_the_status_page, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(an_idle_pipeline_asks_postgresql_before_a_poll_could_outlast_the_ping_period,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(an_idle_pipeline_does_not_ask_postgresql_at_every_poll, setup, teardown),
        cmocka_unit_test_setup_teardown(pipelined_batch_commits_its_offsets_only_after_its_write_finished, setup, teardown),
        cmocka_unit_test_setup_teardown(transient_error_at_finish_retries_the_same_batch_before_the_next, setup, teardown),
        cmocka_unit_test_setup_teardown(a_batch_resolved_from_the_cache_while_another_is_written_is_not_resolved_again, setup, teardown),
        cmocka_unit_test_setup_teardown(a_batch_the_cache_cannot_resolve_ahead_is_resolved_in_its_turn, setup, teardown),
        cmocka_unit_test_setup_teardown(a_prepared_batch_whose_write_fails_is_decoded_and_resolved_again, setup, teardown),
        cmocka_unit_test_setup_teardown(a_prepared_batch_is_resolved_again_after_the_one_before_it_was_retried, setup, teardown),
        cmocka_unit_test_setup_teardown(the_next_batch_is_sent_before_the_offsets_of_the_one_before_are_committed,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(a_stop_after_the_next_batch_was_sent_finishes_and_commits_it, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(stop_request_takes_no_new_batch_while_the_last_one_is_written, setup, teardown),
        cmocka_unit_test_setup_teardown(unregistered_app_is_dead_lettered_not_retried, setup, teardown),
        cmocka_unit_test_setup_teardown(unregistered_multibyte_name_gives_a_valid_utf8_detail, setup, teardown),
        cmocka_unit_test_setup_teardown(review_with_latest_last_synced_at_wins_inside_a_batch, setup, teardown),
        cmocka_unit_test_setup_teardown(app_stats_redelivery_inside_a_batch_keeps_the_first, setup, teardown),
        cmocka_unit_test_setup_teardown(assigned_partitions_start_at_the_database_positions, setup, teardown),
        cmocka_unit_test_setup_teardown(a_transient_error_reading_positions_is_retried, setup, teardown),
        cmocka_unit_test_setup_teardown(positions_that_cannot_be_read_fail_the_assignment, setup, teardown),
        cmocka_unit_test_setup_teardown(a_stop_interrupts_the_back_off_of_a_position_read, setup, teardown),
        cmocka_unit_test_setup_teardown(recording_where_partitions_start_is_retried_like_a_read, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
