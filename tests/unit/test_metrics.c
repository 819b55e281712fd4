/* The Prometheus exposition of the per-pipeline counters. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "shipped_schema.h"
#include "bind_apps.h"
#include "metrics.h"

static const char *review =
    "{\"package_name\":\"com.a\",\"review_id\":\"r1\",\"score\":4,\"thumbs_up_count\":1,"
    "\"reviewed_at\":\"2026-11-29T12:00:00Z\",\"last_synced_at\":\"2026-11-29T12:00:00Z\"}";


static void assert_line(const char *text, const char *line)
{
    if (!strstr(text, line)) fail_msg("missing line [%s] in:\n%s", line, text);
}

static void committed_batch_counts_appear_per_pipeline_and_error_type(void **state)
{
    (void)state;
    static char *env[] = {"STORAGE_PIPELINES=reviews,network-metrics", NULL};
    settings_t s;
    char err[256];
    assert_int_equal(settings_load(&s, env, err, sizeof err), 0);
    metrics_t *m = metrics_new(&s);

    record_t r[3] = {{.topic = "reviews", .value = review, .value_len = strlen(review)},
                     {.topic = "reviews", .value = "{", .value_len = 1},
                     {.topic = "reviews", .value = NULL}};
    batch_t b;
    batch_init(&b, pipeline_get(PIPELINE_REVIEWS));
    batch_decode(&b, r, 3);
    bind_apps(&b, "com.a", 1);
    /* Both dead letters were inserted by this batch's transaction. */
    b.entries[1].dead_letter_new = b.entries[2].dead_letter_new = true;
    batch_counts_t c = {.inserted = 1, .dead_lettered = 2};
    metrics_record_batch(metrics_pipeline(m, PIPELINE_REVIEWS), &b, &c, 30.0);
    atomic_store(&metrics_pipeline(m, PIPELINE_REVIEWS)->lag[2], 17);

    char *text = metrics_render(m);
    assert_line(text, "storage_consumer_messages_consumed_total{pipeline=\"reviews\"} 3\n");
    assert_line(text, "storage_consumer_rows_inserted_total{pipeline=\"reviews\"} 1\n");
    assert_line(text, "storage_consumer_rows_inserted_total{pipeline=\"network-metrics\"} 0\n");
    assert_line(text, "storage_consumer_dead_letters_total{pipeline=\"reviews\",error_type=\"invalid_json\"} 1\n");
    assert_line(text, "storage_consumer_dead_letters_total{pipeline=\"reviews\",error_type=\"empty_payload\"} 1\n");
    assert_line(text, "storage_consumer_batch_duration_seconds_bucket{pipeline=\"reviews\",le=\"0.025\"} 0\n");
    assert_line(text, "storage_consumer_batch_duration_seconds_bucket{pipeline=\"reviews\",le=\"0.05\"} 1\n");
    assert_line(text, "storage_consumer_batch_duration_seconds_count{pipeline=\"reviews\"} 1\n");
    assert_line(text, "storage_consumer_lag{pipeline=\"reviews\",topic=\"reviews\",partition=\"2\"} 17\n");
    /* Pipelines this process does not run are not reported. */
    if (strstr(text, "pipeline=\"app-stats\"")) fail_msg("app-stats reported though not enabled");
    free(text);
    batch_free(&b);
    metrics_free(m);
    settings_free(&s);
}

static void refuse_line(const char *text, const char *line)
{
    if (strstr(text, line)) fail_msg("unexpected line [%s] in:\n%s", line, text);
}

typedef struct {
    settings_t s;
    metrics_t *m;
    pipeline_metrics_t *reviews, *stats;
} fixture_t;

static int fixture_setup(void **state, char **env)
{
    fixture_t *f = calloc(1, sizeof *f);
    char err[256];
    assert_non_null(f);
    assert_int_equal(settings_load(&f->s, env, err, sizeof err), 0);
    f->m = metrics_new(&f->s);
    f->reviews = metrics_pipeline(f->m, PIPELINE_REVIEWS);
    f->stats = metrics_pipeline(f->m, PIPELINE_APP_STATS);
    *state = f;
    return 0;
}

static int two_pipelines(void **state)
{
    static char *env[] = {"STORAGE_PIPELINES=reviews,app-stats", "STORAGE_HEALTH_MAX_AGE_SECONDS=30", NULL};
    return fixture_setup(state, env);
}

static int fixture_teardown(void **state)
{
    fixture_t *f = *state;
    metrics_free(f->m);
    settings_free(&f->s);
    free(f);
    return 0;
}

/* A running pipeline with everything a ready one has, as of `now`. */
static void running(pipeline_metrics_t *pm, int64_t now)
{
    atomic_store(&pm->state, PIPELINE_STATE_RUNNING);
    atomic_store(&pm->loop_unix_ms, now);
    atomic_store(&pm->partitions_owned, 3);
    atomic_store(&pm->brokers_up, 2);
    metrics_db_state(pm, true);
}

static bool probe(fixture_t *f, probe_t kind, int64_t now, const char *needle)
{
    char *body;
    bool ok = metrics_probe(f->m, kind, now, &body);
    if (needle && !strstr(body, needle)) fail_msg("missing [%s] in probe body:\n%s", needle, body);
    free(body);
    return ok;
}

static void a_replayed_dead_letter_already_stored_is_not_counted(void **state)
{
    fixture_t *f = *state;
    record_t r[2] = {{.topic = "reviews", .partition = 0, .offset = 7, .value = "{", .value_len = 1},
                     {.topic = "reviews", .partition = 0, .offset = 8, .value = "{", .value_len = 1}};
    batch_t b;
    batch_init(&b, pipeline_get(PIPELINE_REVIEWS));
    batch_decode(&b, r, 2);
    bind_apps(&b, "com.a", 1);
    /* The database had the first already: only the second was inserted. */
    b.entries[1].dead_letter_new = true;
    batch_counts_t c = {.dead_lettered = 1};
    metrics_record_batch(metrics_pipeline(f->m, PIPELINE_REVIEWS), &b, &c, 1.0);
    char *text = metrics_render(f->m);
    assert_line(text, "storage_consumer_dead_letters_total{pipeline=\"reviews\",error_type=\"invalid_json\"} 1\n");
    free(text);
    batch_free(&b);
}

static void healthz_passes_while_every_loop_turns_and_fails_for_a_failed_or_stopped_pipeline(void **state)
{
    fixture_t *f = *state;
    pipeline_metrics_t *reviews = f->reviews, *stats = f->stats;
    int64_t now = metrics_now_unix_ms();
    /* Starting: alive until the max age has passed since the start. */
    assert_true(probe(f, PROBE_LIVENESS, now, "reviews: alive\n"));
    assert_false(probe(f, PROBE_LIVENESS, now + 31000, "reviews: not alive: its loop last ran 31s ago (limit STORAGE_HEALTH_MAX_AGE_SECONDS=30)\n"));
    running(reviews, now);
    running(stats, now);
    assert_true(probe(f, PROBE_LIVENESS, now + 30000, "app-stats: alive\n"));
    assert_false(probe(f, PROBE_LIVENESS, now + 30001, "reviews: not alive: its loop last ran 30s ago"));
    atomic_store(&stats->state, PIPELINE_STATE_FAILED);
    assert_false(probe(f, PROBE_LIVENESS, now, "app-stats: not alive: the pipeline failed\n"));
    assert_false(probe(f, PROBE_LIVENESS, now, "reviews: alive\n"));
    atomic_store(&stats->state, PIPELINE_STATE_STOPPED);
    assert_false(probe(f, PROBE_LIVENESS, now, "app-stats: not alive: the pipeline stopped\n"));
}

static void readyz_needs_partitions_postgresql_and_a_broker(void **state)
{
    fixture_t *f = *state;
    int64_t now = metrics_now_unix_ms();
    assert_false(probe(f, PROBE_READINESS, now, "reviews: not ready: no partitions assigned\n"));
    running(f->reviews, now);
    running(f->stats, now);
    assert_true(probe(f, PROBE_READINESS, now, "reviews: ready: 3 partition(s) assigned\n"));
    atomic_store(&f->stats->partitions_owned, 0);
    assert_false(probe(f, PROBE_READINESS, now, "app-stats: not ready: no partitions assigned\n"));
    running(f->stats, now);
    metrics_db_state(f->reviews, false);
    /* The clock read after the failure was recorded: `now` is older than
     * it by up to the milliseconds the test took so far, which made this
     * "for 4s" now and then. */
    int64_t down = metrics_now_unix_ms();
    assert_false(probe(f, PROBE_READINESS, down + 5000, "reviews: not ready: PostgreSQL unreachable (for 5s)\n"));
    metrics_db_state(f->reviews, true);
    atomic_store(&f->reviews->brokers_up, 0);
    assert_false(probe(f, PROBE_READINESS, now, "reviews: not ready: no Kafka broker reachable\n"));
    atomic_store(&f->reviews->brokers_up, 1);
    assert_true(probe(f, PROBE_READINESS, now, NULL));
    atomic_store(&f->reviews->state, PIPELINE_STATE_FAILED);
    assert_false(probe(f, PROBE_READINESS, now, "reviews: not ready: the pipeline failed\n"));
}

/* A pipeline whose loop is busy elsewhere (a slow offset commit, a turn
 * run late) cannot ask PostgreSQL when its ping is due: /readyz judges the
 * silence itself, so it says not ready once PostgreSQL has not answered
 * for the ping period and one attempt, however late the loop is. */
static void readyz_is_not_ready_once_postgresql_has_been_silent_past_its_bound(void **state)
{
    fixture_t *f = *state;
    running(f->reviews, metrics_now_unix_ms());
    running(f->stats, metrics_now_unix_ms());
    /* Both answered by now, so no later than `heard`. */
    int64_t heard = metrics_now_unix_ms();
    long long bound = settings_db_silence_ms(&f->s);
    assert_int_equal(bound, SETTINGS_DB_PING_MS + settings_db_attempt_ms(&f->s));
    assert_true(probe(f, PROBE_READINESS, heard, "reviews: ready"));
    assert_false(probe(f, PROBE_READINESS, heard + bound + 1000,
                       "reviews: not ready: PostgreSQL has not answered for 19s (limit 18000 ms)\n"));
    /* Each pipeline's silence is its own: reviews last heard 1 s before
     * app-stats did. */
    atomic_store(&f->reviews->db_heard_unix_ms, heard - 1000);
    metrics_db_state(f->stats, true);
    int64_t later = heard + bound;
    assert_false(probe(f, PROBE_READINESS, later, "app-stats: ready"));
    assert_false(probe(f, PROBE_READINESS, later, "reviews: not ready: PostgreSQL has not answered for 19s"));
}

static void build_info_names_the_versions_and_committed_lag_is_its_own_gauge(void **state)
{
    fixture_t *f = *state;
    f->m->version = "1.2.3";
    f->m->librdkafka_version = "2.0.2";
    f->m->libpq_version = "15.18";
    atomic_store(&f->reviews->lag[1], 4);
    atomic_store(&f->reviews->committed_lag[1], 9);
    char *text = metrics_render(f->m);
    assert_line(text, "# TYPE storage_consumer_build_info gauge\n"
                      "storage_consumer_build_info{version=\"1.2.3\",librdkafka=\"2.0.2\",libpq=\"15.18\"} 1\n");
    assert_line(text, "# TYPE storage_consumer_committed_lag gauge\n");
    assert_line(text, "storage_consumer_lag{pipeline=\"reviews\",topic=\"reviews\",partition=\"1\"} 4\n");
    assert_line(text, "storage_consumer_committed_lag{pipeline=\"reviews\",topic=\"reviews\",partition=\"1\"} 9\n");
    refuse_line(text, "storage_consumer_committed_lag{pipeline=\"reviews\",topic=\"reviews\",partition=\"0\"}");
    free(text);
}

/* A /proc/PID directory of our own making: the values are known. */
static void process_metrics_are_read_from_proc_stat_fd_and_the_fd_limit(void **state)
{
    fixture_t *f = *state;
    char dir[] = "/tmp/test_metrics_procXXXXXX", path[256];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/stat", dir);
    FILE *st = fopen(path, "w");
    assert_non_null(st);
    long ticks = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    /* utime 3 s + stime 2 s of ticks, starttime 10 s after boot, vsize, rss 5 pages;
     * the name holds a space and a ')'. */
    fprintf(st, "42 (odd )name) S 1 42 42 0 -1 4194560 100 0 0 0 %ld %ld 0 0 20 0 5 0 %ld 123456789 5 "
                "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n",
            3 * ticks, 2 * ticks, 10 * ticks);
    fclose(st);
    snprintf(path, sizeof path, "%s/fd", dir);
    assert_int_equal(mkdir(path, 0700), 0);
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/fd/%d", dir, i);
        FILE *fd = fopen(path, "w");
        assert_non_null(fd);
        fclose(fd);
    }
    f->m->proc_self = dir;
    char *text = metrics_render(f->m), line[128];
    assert_line(text, "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 5.00\n");
    snprintf(line, sizeof line, "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes %ld\n", 5 * page);
    assert_line(text, line);
    assert_line(text, "# TYPE process_virtual_memory_bytes gauge\nprocess_virtual_memory_bytes 123456789\n");
    assert_line(text, "# TYPE process_open_fds gauge\nprocess_open_fds 3\n");
    assert_line(text, "# TYPE process_max_fds gauge\nprocess_max_fds ");
    assert_line(text, "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds ");
    free(text);
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/fd/%d", dir, i);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/fd", dir);
    rmdir(path);
    snprintf(path, sizeof path, "%s/stat", dir);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    shipped_schema_bind();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(committed_batch_counts_appear_per_pipeline_and_error_type),
        cmocka_unit_test_setup_teardown(a_replayed_dead_letter_already_stored_is_not_counted, two_pipelines,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(healthz_passes_while_every_loop_turns_and_fails_for_a_failed_or_stopped_pipeline,
                                        two_pipelines, fixture_teardown),
        cmocka_unit_test_setup_teardown(readyz_is_not_ready_once_postgresql_has_been_silent_past_its_bound,
                                        two_pipelines, fixture_teardown),
        cmocka_unit_test_setup_teardown(readyz_needs_partitions_postgresql_and_a_broker, two_pipelines,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(build_info_names_the_versions_and_committed_lag_is_its_own_gauge,
                                        two_pipelines, fixture_teardown),
        cmocka_unit_test_setup_teardown(process_metrics_are_read_from_proc_stat_fd_and_the_fd_limit, two_pipelines,
                                        fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
