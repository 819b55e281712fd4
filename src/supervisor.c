#include "supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "exit_code.h"
#include "kafka/conf.h"
#include "kafka/consumer.h"
#include "log.h"
#include "metrics.h"
#include "pg/store.h"
#include "registry/registry.h"
#include "worker.h"

/* A heartbeat is at most this often: not a system call per poll. */
#define HEARTBEAT_INTERVAL_S 1
#define HEARTBEAT_PATH_MAX 4096

typedef struct {
    worker_t worker;
    consumer_t *consumer;
    store_t *store;
    registry_t *registry; /* a registry format's pipeline: its own client */
    pthread_t thread;
    bool started;
    atomic_bool done;
    int result;
    char heartbeat_path[HEARTBEAT_PATH_MAX];
    time_t last_heartbeat;
    bool heartbeat_warned;
    bool marked_stopped; /* its heartbeat file says it stopped */
    long fault_countdown; /* test-only: kill -9 after this many batches; 0 = off */
    long stop_countdown;  /* test-only: SIGSTOP before this many batches; 0 = off */
} pipeline_run_t;

/* The heartbeat file of a running pipeline is empty and touched every
 * loop; a pipeline that stops writes "stopped <UTC time> <result>" into it
 * (heartbeat_mark_stopped), because a stopped process is not healthy although
 * its file stays fresh for up to the health max age. A process killed
 * outright writes nothing: its file just goes stale. */
#define HEARTBEAT_STOPPED "stopped"

static void registry_said(void *ctx, int level, const char *text)
{
    if (level == REGISTRY_OK) LOG_INFO((const char *)ctx, "schema registry: %s", text);
    else LOG_WARN((const char *)ctx, "schema registry: %s", text);
}

static void heartbeat(void *ctx)
{
    pipeline_run_t *p = ctx;
    /* /healthz: the loop turned (DESIGN.md: Probes and metrics). */
    if (p->worker.metrics)
        atomic_store_explicit(&p->worker.metrics->loop_unix_ms, metrics_now_unix_ms(), memory_order_relaxed);
    time_t now = time(NULL);
    if (now - p->last_heartbeat < HEARTBEAT_INTERVAL_S) return;
    p->last_heartbeat = now;
    /* O_TRUNC: the first heartbeat of a restarted process clears the stop
     * mark of the previous one. */
    int fd = open(p->heartbeat_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || futimens(fd, NULL) != 0) {
        /* A full /tmp is a monitoring problem, not an ingestion outage:
         * warned once, counted every time. */
        if (p->worker.metrics)
            atomic_fetch_add_explicit(&p->worker.metrics->heartbeat_failures, 1, memory_order_relaxed);
        if (!p->heartbeat_warned)
            LOG_WARN(p->worker.def->name, "cannot write heartbeat file %s: %s (health checks will report this pipeline stale)",
                     p->heartbeat_path, strerror(errno));
        p->heartbeat_warned = true;
    }
    if (fd >= 0) close(fd);
}

/* Write the stop mark into the heartbeat file at `path`: written whole
 * under another name and renamed over the file, so `health` never reads
 * half of it. Warns, unless *warned, if it cannot. */
static void heartbeat_mark_stopped(const char *path, const char *pipeline, bool failed, bool *warned)
{
    char tmp[HEARTBEAT_PATH_MAX + 16];
    char text[96], when[32];
    time_t now = time(NULL);
    struct tm tm;
    bool ok;

    gmtime_r(&now, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    int n = snprintf(text, sizeof text, HEARTBEAT_STOPPED " %s %s\n", when, failed ? "failed" : "clean");
    snprintf(tmp, sizeof tmp, "%s.stopping", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ok = fd >= 0 && write(fd, text, (size_t)n) == n;
    if (fd >= 0 && close(fd) != 0) ok = false;
    if (ok && rename(tmp, path) != 0) ok = false;
    if (!ok) {
        int e = errno;
        if (fd >= 0) unlink(tmp);
        if (!*warned)
            LOG_WARN(pipeline, "cannot mark heartbeat file %s stopped: %s (health checks will report this pipeline stale once it is older than STORAGE_HEALTH_MAX_AGE_SECONDS)",
                     path, strerror(e));
        *warned = true;
    }
}

/* Test-only fault points: at the Nth call (*countdown = N; 0: never), say
 * so with the batch's offsets and raise `sig` on the whole process. */
static void fault_point(const pipeline_run_t *p, long *countdown, int sig, const char *what,
                        const char *offsets)
{
    if (*countdown > 0 && --*countdown == 0) {
        LOG_WARN(p->worker.def->name, "test fault point: %s offsets=%s", what, offsets);
        raise(sig);
    }
}

/* SC_TEST_KILL_AFTER_DB_COMMIT=N: die like kill -9 after the Nth database
 * commit, before its offsets are committed. */
static void fault_after_db_commit(void *ctx, const char *offsets)
{
    pipeline_run_t *p = ctx;
    fault_point(p, &p->fault_countdown, SIGKILL, "killing the process after the database commit", offsets);
}

/* SC_TEST_STOP_BEFORE_DB_WRITE=N: freeze the whole process (SIGSTOP) right
 * before the Nth batch is written, so that a test resumes it (SIGCONT) as a
 * member that lost its partitions meanwhile and writes that batch late. */
static void fault_before_db_write(void *ctx, const char *offsets)
{
    pipeline_run_t *p = ctx;
    fault_point(p, &p->stop_countdown, SIGSTOP, "stopping the process before writing the batch", offsets);
}

static int poll_adapter(void *ctx, size_t max, int timeout_ms, record_t **records, char *err, size_t errlen)
{
    return consumer_poll(ctx, max, timeout_ms, records, err, errlen);
}
static void release_adapter(void *ctx, record_t *records) { consumer_release(ctx, records); }
static void lag_adapter(void *ctx, atomic_int_fast64_t *lag, atomic_int_fast64_t *committed_lag, int max)
{
    consumer_lag(ctx, lag, committed_lag, max);
}
static int commit_adapter(void *ctx, const record_t *r, size_t n, int timeout_ms, char *err, size_t errlen)
{
    return consumer_commit(ctx, r, n, timeout_ms, err, errlen);
}
static int flush_adapter(void *ctx, int timeout_ms, char *err, size_t errlen)
{
    return consumer_flush(ctx, timeout_ms, err, errlen);
}
static int rewind_adapter(void *ctx, char *err, size_t errlen) { return consumer_rewind(ctx, err, errlen); }
static int resolve_adapter(void *ctx, batch_t *b, char *err, size_t errlen, error_class_t *cls)
{
    return store_resolve(ctx, b, err, errlen, cls);
}
static int write_adapter(void *ctx, batch_t *b, batch_counts_t *c, char *err, size_t errlen,
                         error_class_t *cls)
{
    return store_write(ctx, b, NULL, c, err, errlen, cls);
}
static void disconnect_adapter(void *ctx) { store_disconnect(ctx); }
static int ping_adapter(void *ctx, char *err, size_t errlen, error_class_t *cls)
{
    return store_ping(ctx, err, errlen, cls);
}
static int unresolved_adapter(void *ctx, const char *topic, int64_t *counts, size_t n, char *err, size_t errlen,
                              error_class_t *cls)
{
    return store_unresolved_dead_letters(ctx, topic, counts, n, err, errlen, cls);
}
static int start_adapter(void *ctx, batch_t *b, char *err, size_t errlen, error_class_t *cls)
{
    return store_write_start(ctx, b, NULL, err, errlen, cls);
}
static int finish_adapter(void *ctx, batch_t *b, batch_counts_t *c, char *err, size_t errlen,
                          error_class_t *cls)
{
    return store_write_finish(ctx, b, c, err, errlen, cls);
}
static bool prepare_adapter(void *ctx, batch_t *b) { return store_prepare(ctx, b); }
static bool prepared_adapter(void *ctx, const batch_t *b) { return store_prepared(ctx, b); }

static int positions_adapter(void *ctx, const char *topic, int n, int64_t *next, char *err, size_t errlen,
                             error_class_t *cls)
{
    return store_read_progress(ctx, topic, n, next, err, errlen, cls);
}

static int record_starts_adapter(void *ctx, const char *topic, int n, const int64_t *next, char *err,
                                 size_t errlen, error_class_t *cls)
{
    return store_record_starts(ctx, topic, n, next, err, errlen, cls);
}

static void *pipeline_thread(void *arg)
{
    pipeline_run_t *p = arg;
    LOG_INFO_F(p->worker.def->name,
               LOG_FIELDS(LF_STR("topic", p->worker.settings->topic[p->worker.def->id]),
                          LF_INT("max_poll_records", p->worker.settings->max_poll_records[p->worker.def->id])),
               "pipeline started");
    atomic_store(&p->worker.metrics->state, PIPELINE_STATE_RUNNING);
    p->result = worker_run(&p->worker);
    atomic_store(&p->worker.metrics->state, p->result == 0 ? PIPELINE_STATE_STOPPED : PIPELINE_STATE_FAILED);
    /* Close here, on the pipeline's own thread: leaving the group at once
     * lets the others take over the partitions within seconds. */
    consumer_close(p->consumer);
    p->consumer = NULL;
    store_free(p->store);
    p->store = NULL;
    registry_free(p->registry);
    p->registry = NULL;
    heartbeat_mark_stopped(p->heartbeat_path, p->worker.def->name, p->result != 0, &p->heartbeat_warned);
    p->marked_stopped = true;
    LOG_INFO_F(p->worker.def->name, LOG_FIELDS(LF_STR("result", p->result == 0 ? "clean" : "failed")),
               "pipeline stopped");
    atomic_store(&p->done, true);
    return NULL;
}

static double seconds_since(const struct timespec *t)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t->tv_sec) + (double)(now.tv_nsec - t->tv_nsec) / 1e9;
}

/* Mark the enabled pipelines that never ran (the start-up failed) stopped,
 * with result=failed. Only once no pipeline thread runs. */
static void mark_unstarted_stopped(const settings_t *s, pipeline_run_t *runs)
{
    for (int i = 0; i < pipeline_count(); i++) {
        pipeline_run_t *p = &runs[i];
        if (!s->pipeline_enabled[i] || p->marked_stopped) continue;
        heartbeat_mark_stopped(p->heartbeat_path, pipeline_get(i)->name, true,
                               &p->heartbeat_warned);
        p->marked_stopped = true;
    }
}

int supervisor_run(const settings_t *s, const char *version)
{
    static pipeline_run_t runs[PIPELINE_MAX];
    atomic_bool stop = false;
    bool failed = false, stopping = false;
    struct timespec stop_time = {0, 0};
    sigset_t sigs;
    char err[1024];
    const char *fault = getenv("SC_TEST_KILL_AFTER_DB_COMMIT");
    const char *freeze = getenv("SC_TEST_STOP_BEFORE_DB_WRITE");

    /* Signals go to the supervisor only: block them before any thread
     * (ours or librdkafka's) exists, and take them with sigtimedwait. */
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);

    for (int i = 0; i < pipeline_count(); i++) {
        pipeline_run_t *p = &runs[i];
        memset(p, 0, sizeof *p);
        snprintf(p->heartbeat_path, sizeof p->heartbeat_path, "%s/%s", s->heartbeat_dir,
                 pipeline_get(i)->name);
    }

    if (mkdir(s->heartbeat_dir, 0755) != 0 && errno != EEXIST)
        LOG_WARN("supervisor", "cannot create STORAGE_HEARTBEAT_DIR=%s: %s", s->heartbeat_dir, strerror(errno));

    metrics_t *metrics = metrics_new(s);
    metrics->version = version;
    metrics->librdkafka_version = kafka_library_version();
    metrics->libpq_version = db_library_version();
    if (s->metrics_addr) {
        if (metrics_http_start(metrics, s->metrics_addr, err, sizeof err)) {
            LOG_ERROR("supervisor", "%s", err);
            metrics_free(metrics);
            mark_unstarted_stopped(s, runs);
            return EXIT_FAILED;
        }
        LOG_INFO("supervisor", "metrics at http://%s/metrics, probes at /healthz and /readyz", s->metrics_addr);
    }

    for (int i = 0; i < pipeline_count(); i++) {
        pipeline_run_t *p = &runs[i];
        if (!s->pipeline_enabled[i]) continue;
        pipeline_metrics_t *pm = metrics_pipeline(metrics, i);
        consumer_positions_t positions = {worker_read_positions, worker_record_starts, &p->worker,
                                          &pm->lost_to_retention};
        p->consumer = consumer_new(s, i, &positions, err, sizeof err);
        if (!p->consumer) {
            LOG_ERROR(pipeline_get(i)->name, "%s", err);
            atomic_store(&pm->state, PIPELINE_STATE_FAILED);
            failed = true;
            break;
        }
        consumer_observe(p->consumer, &pm->partitions_owned, &pm->brokers_up);
        char group[512];
        settings_group_id(s, i, group, sizeof group);
        p->store = store_new(s, pipeline_get(i));
        store_record_progress(p->store, group);
        const pipeline_def_t *def = pipeline_get(i);
        if (FORMAT_NEEDS_REGISTRY(def->format) || FORMAT_NEEDS_REGISTRY(def->key_format)) {
            p->registry = registry_new(s, pm);
            /* What verify checks, said as warnings: a registry away or a
             * field not in the latest schema does not stop the start
             * (its batches wait, or its records are dead letters). */
            for (int k = 0; FORMAT_NEEDS_REGISTRY(def->format) && k < s->topics[i].count; k++)
                if (registry_compare(p->registry, def, s->topics[i].name[k], registry_said, (void *)def->name) ==
                    REGISTRY_BROKEN)
                    break;
        }
        p->fault_countdown = fault ? strtol(fault, NULL, 10) : 0;
        p->stop_countdown = freeze ? strtol(freeze, NULL, 10) : 0;
        p->worker = (worker_t){
            .settings = s,
            .def = pipeline_get(i),
            .consumer = {p->consumer, poll_adapter, release_adapter, commit_adapter, lag_adapter, flush_adapter,
                         rewind_adapter},
            .store = {.ctx = p->store,
                      .resolve = resolve_adapter,
                      .write = write_adapter,
                      .disconnect = disconnect_adapter,
                      .start = start_adapter,
                      .finish = finish_adapter,
                      .positions = positions_adapter,
                      .record_starts = record_starts_adapter,
                      .ping = ping_adapter,
                      .unresolved = unresolved_adapter,
                      .prepare = prepare_adapter,
                      .prepared = prepared_adapter},
            .stop = &stop,
            .metrics = pm,
            .schemas = p->registry ? registry_source(p->registry) : NULL,
            .heartbeat = heartbeat,
            .heartbeat_ctx = p,
            .before_db_write = freeze ? fault_before_db_write : NULL,
            .after_db_commit = fault ? fault_after_db_commit : NULL,
            .fault_ctx = p,
        };
    }
    for (int i = 0; i < pipeline_count() && !failed; i++) {
        pipeline_run_t *p = &runs[i];
        if (!p->consumer) continue;
        if (pthread_create(&p->thread, NULL, pipeline_thread, p) != 0) {
            LOG_ERROR("supervisor", "cannot start the %s thread", p->worker.def->name);
            failed = true;
            break;
        }
        p->started = true;
    }
    if (failed) atomic_store(&stop, true);

    for (;;) {
        struct timespec wait = {0, 200 * 1000000L};
        int sig = sigtimedwait(&sigs, NULL, &wait);
        if (sig > 0 && !stopping) {
            LOG_INFO("supervisor", "received %s: finishing the in-flight batches, then stopping", strsignal(sig));
            atomic_store(&stop, true);
        }
        bool all_done = true;
        for (int i = 0; i < pipeline_count(); i++) {
            pipeline_run_t *p = &runs[i];
            if (!p->started) continue;
            if (!atomic_load(&p->done)) {
                all_done = false;
            } else if (p->result != 0 && !failed) {
                /* All or nothing: one failed pipeline stops the others. */
                failed = true;
                LOG_ERROR("supervisor", "pipeline %s failed: %s; stopping all pipelines", p->worker.def->name,
                          p->worker.failure);
                atomic_store(&stop, true);
            }
        }
        if (atomic_load(&stop) && !stopping) {
            stopping = true;
            clock_gettime(CLOCK_MONOTONIC, &stop_time);
        }
        if (all_done) break;
        if (stopping && seconds_since(&stop_time) > s->shutdown_timeout_seconds) {
            LOG_ERROR("supervisor", "pipelines did not stop within STORAGE_SHUTDOWN_TIMEOUT_SECONDS=%d: exiting",
                      s->shutdown_timeout_seconds);
            /* The stuck pipelines never mark their heartbeat files: the
             * process does, as it goes (their threads still run: nothing of
             * theirs is written here). */
            for (int i = 0; i < pipeline_count(); i++) {
                bool warned = false;
                if (runs[i].started && !atomic_load(&runs[i].done))
                    heartbeat_mark_stopped(runs[i].heartbeat_path, runs[i].worker.def->name, true, &warned);
            }
            /* Threads still hold librdkafka and libpq state: no orderly
             * teardown is possible, and uncommitted batches are redelivered. */
            _exit(EXIT_FAILED);
        }
    }
    for (int i = 0; i < pipeline_count(); i++) {
        pipeline_run_t *p = &runs[i];
        if (p->started) pthread_join(p->thread, NULL);
        /* Pipelines that never started still own their consumer and store. */
        if (p->consumer) consumer_close(p->consumer);
        if (p->store) store_free(p->store);
        registry_free(p->registry);
    }
    /* Pipelines that never started (the start-up failed) are stopped too. */
    mark_unstarted_stopped(s, runs);
    metrics_http_stop(metrics);
    metrics_free(metrics);
    LOG_INFO_F("supervisor", LOG_FIELDS(LF_INT("exit", failed ? 1 : 0)), "stopped");
    return failed ? EXIT_FAILED : EXIT_OK;
}

/* Whether the heartbeat file at `path` holds a stop mark; if so, its time
 * into when[32] and its result into result[16]. */
static bool read_stop_mark(const char *path, char *when, char *result)
{
    char text[96];
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    return sscanf(text, HEARTBEAT_STOPPED " %31s %15s", when, result) == 2;
}

int supervisor_health(const settings_t *s)
{
    int healthy = 1;
    time_t now = time(NULL);
    for (int i = 0; i < pipeline_count(); i++) {
        if (!s->pipeline_enabled[i]) continue;
        const char *name = pipeline_get(i)->name;
        char path[HEARTBEAT_PATH_MAX];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", s->heartbeat_dir, name);
        if (stat(path, &st) != 0) {
            printf("%s: unhealthy (no heartbeat file %s)\n", name, path);
            healthy = 0;
            continue;
        }
        char when[32], result[16];
        if (read_stop_mark(path, when, result)) {
            printf("%s: unhealthy (stopped at %s, result=%s)\n", name, when, result);
            healthy = 0;
            continue;
        }
        long age = (long)(now - st.st_mtime);
        if (age > s->health_max_age_seconds) {
            printf("%s: unhealthy (heartbeat stale: last %lds ago, limit %ds)\n", name, age,
                   s->health_max_age_seconds);
            healthy = 0;
        } else {
            printf("%s: healthy (last heartbeat %lds ago)\n", name, age);
        }
    }
    return healthy ? EXIT_OK : EXIT_FAILED;
}
