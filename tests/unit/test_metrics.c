/* The Prometheus exposition of the per-pipeline counters. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "metrics.h"

static const char *review =
    "{\"package_name\":\"com.a\",\"review_id\":\"r1\",\"score\":4,\"thumbs_up_count\":1,"
    "\"reviewed_at\":\"2026-11-29T12:00:00Z\",\"last_synced_at\":\"2026-11-29T12:00:00Z\"}";

static int64_t known(void *ctx, const char *name)
{
    (void)ctx;
    return strcmp(name, "com.a") == 0 ? 1 : -1;
}

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
    batch_bind(&b, known, NULL);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(committed_batch_counts_appear_per_pipeline_and_error_type),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
