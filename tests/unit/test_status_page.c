/* The status page (DESIGN.md: Status page), rendered from recorded state. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "shipped_schema.h"
#include "status_page.h"

static void assert_has(const char *page, const char *part)
{
    if (!strstr(page, part)) fail_msg("missing [%s] in:\n%s", part, page);
}

static void assert_lacks(const char *page, const char *part)
{
    if (strstr(page, part)) fail_msg("unexpected [%s] in:\n%s", part, page);
}

static int two_pipelines(void **state)
{
    static char *env[] = {"STORAGE_PIPELINES=reviews,app-stats", NULL};
    static settings_t s;
    char err[256];
    if (settings_load(&s, env, err, sizeof err) != 0) return -1;
    metrics_t *m = metrics_new(&s);
    m->version = "1.2.3";
    *state = m;
    return 0;
}

static int free_metrics(void **state)
{
    metrics_t *m = *state;
    settings_free((settings_t *)m->settings);
    metrics_free(m);
    return 0;
}

static pipeline_metrics_t *pipeline_named(metrics_t *m, const char *name)
{
    for (int i = 0; i < pipeline_count(); i++)
        if (strcmp(pipeline_get((pipeline_id_t)i)->name, name) == 0) return &m->pipelines[i];
    fail_msg("no pipeline %s", name);
    return NULL;
}

static void every_string_the_page_prints_is_html_escaped(void **state)
{
    metrics_t *m = *state;
    m->version = "<b>1</b>";
    metrics_last_error(pipeline_named(m, "reviews"),
                       "database error: <script>alert('x')</script> & \"quoted\"\nDETAIL: Key (id)=(secret)");
    char *page = status_page_render(m, metrics_now_unix_ms());
    assert_has(page, "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;quoted&quot;");
    assert_has(page, "&lt;b&gt;1&lt;/b&gt;");
    assert_lacks(page, "<script");
    assert_lacks(page, "<b>1");
    /* Only the first line: a DETAIL line may quote a stored value. */
    assert_lacks(page, "secret");
    free(page);
}

/* The page says `text` as the state of pipeline `name`. */
static void assert_state(metrics_t *m, const char *name, const char *text)
{
    char part[128];
    snprintf(part, sizeof part, "id=\"state-%s\">%s<", name, text);
    char *page = status_page_render(m, metrics_now_unix_ms());
    assert_has(page, part);
    free(page);
}

static void the_state_says_backing_off_holding_commits_or_failed(void **state)
{
    metrics_t *m = *state;
    pipeline_metrics_t *pm = pipeline_named(m, "reviews");
    assert_state(m, "reviews", "starting");
    atomic_store(&pm->state, PIPELINE_STATE_RUNNING);
    assert_state(m, "reviews", "consuming");
    atomic_store(&pm->holding_commits, true);
    assert_state(m, "reviews", "holding commits during a rebalance");
    atomic_store(&pm->backing_off, true);
    assert_state(m, "reviews", "backing off after a database error");
    atomic_store(&pm->state, PIPELINE_STATE_FAILED);
    assert_state(m, "reviews", "failed");
    assert_state(m, "app-stats", "starting");
}

static void dead_letters_lag_throughput_and_uptime_come_from_the_recorded_state(void **state)
{
    metrics_t *m = *state;
    pipeline_metrics_t *pm = pipeline_named(m, "reviews");
    int64_t now = metrics_now_unix_ms();
    m->started_unix_ms = now - (3600 + 120 + 5) * 1000LL;
    char *page = status_page_render(m, now);
    assert_has(page, "<meta http-equiv=\"refresh\" content=\"5\">");
    assert_has(page, "id=\"uptime\">1h 2m 5s<");
    assert_has(page, "not read from the database yet");
    assert_has(page, "id=\"error-reviews\">none<");
    assert_has(page, "no partition owned");
    free(page);

    int64_t counts[METRICS_ERROR_TYPES] = {0};
    counts[decode_error_type_index("invalid_json")] = 4;
    counts[METRICS_ERROR_TYPES - 1] = 1;
    metrics_unresolved_dead_letters(pm, counts);
    atomic_store(&pm->committed_lag[2], 17);
    atomic_store(&pm->partitions_owned, 1);
    /* 30 records 10 s ago, 12 in the previous second. */
    int64_t sec = now / 1000;
    atomic_store(&pm->throughput_second[(sec - 10) % METRICS_THROUGHPUT_SECONDS], sec - 10);
    atomic_store(&pm->throughput_count[(sec - 10) % METRICS_THROUGHPUT_SECONDS], 30);
    atomic_store(&pm->throughput_second[(sec - 1) % METRICS_THROUGHPUT_SECONDS], sec - 1);
    atomic_store(&pm->throughput_count[(sec - 1) % METRICS_THROUGHPUT_SECONDS], 12);
    /* A slot dated 301 s ago is not in the window. */
    atomic_store(&pm->throughput_second[(sec - 300) % METRICS_THROUGHPUT_SECONDS], sec - 600);
    atomic_store(&pm->throughput_count[(sec - 300) % METRICS_THROUGHPUT_SECONDS], 1000);
    page = status_page_render(m, now);
    assert_has(page, "<tr id=\"dl-reviews-invalid_json\"><td>invalid_json</td><td>4</td></tr>");
    assert_has(page, "<tr id=\"dl-reviews-other\"><td>other</td><td>1</td></tr>");
    assert_has(page, "id=\"dl-reviews-total\">5<");
    assert_has(page, "storage-consumer dead-letters list --pipeline reviews");
    assert_has(page, "<tr id=\"lag-reviews-reviews-2\"><td>reviews</td><td>2</td><td>17</td></tr>");
    assert_has(page, "id=\"owned-reviews\">1<");
    assert_has(page, "id=\"throughput-reviews\">42<");
    assert_has(page, "<svg");
    assert_has(page, "id=\"throughput-app-stats\">0<");
    free(page);
}

int main(void)
{
    shipped_schema_bind();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(every_string_the_page_prints_is_html_escaped, two_pipelines, free_metrics),
        cmocka_unit_test_setup_teardown(the_state_says_backing_off_holding_commits_or_failed, two_pipelines,
                                        free_metrics),
        cmocka_unit_test_setup_teardown(dead_letters_lag_throughput_and_uptime_come_from_the_recorded_state,
                                        two_pipelines, free_metrics),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
