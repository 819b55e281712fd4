/* Unit tests of settings_load (DESIGN.md: Settings and budgets; Operations): defaults, precedence, and every
 * invalid value stopping start-up with a message that names the variable.
 * The environment is always an explicit envp array: the process environment
 * is never read or touched. LeakSanitizer checks settings_free at exit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "settings.h"

#define ENV(...) ((char *const[]){__VA_ARGS__, NULL})
#define NO_ENV ((char *const[]){NULL})

static void load_ok(settings_t *s, char *const *envp)
{
    char err[1024] = "";
    if (settings_load(s, envp, err, sizeof err) != 0) fail_msg("rejected: %s", err);
}

static bool is_zeroed(const settings_t *s)
{
    static const settings_t zero;
    return memcmp(s, &zero, sizeof zero) == 0;
}

/* settings_load rejects `envp`; the message mentions `m1` and `m2` (either
 * may be NULL), and nothing is left to free. */
static void expect_error(char *const *envp, const char *m1, const char *m2)
{
    settings_t s;
    char err[1024] = "";
    memset(&s, 0x5a, sizeof s);
    int rc = settings_load(&s, envp, err, sizeof err);
    if (rc == 0) {
        settings_free(&s);
        fail_msg("accepted, expected an error mentioning \"%s\"", m1 ? m1 : "");
    }
    assert_int_equal(rc, -1);
    if (m1 && !strstr(err, m1)) fail_msg("message \"%s\" does not mention \"%s\"", err, m1);
    if (m2 && !strstr(err, m2)) fail_msg("message \"%s\" does not mention \"%s\"", err, m2);
    if (!is_zeroed(&s)) fail_msg("a failed load left data in the structure: %s", err);
}

/* "NAME=value": the variable named, with the value, e.g. "X=abc". */
static void expect_rejected_value(const char *name, const char *value)
{
    char entry[512];
    snprintf(entry, sizeof entry, "%s=%s", name, value);
    expect_error(ENV(entry), name, value);
}

/* ------------------------------------------------------------------------ */
/* Defaults                                                                 */

static void expect_defaults(const settings_t *s)
{
    assert_string_equal(s->database_url, "");
    assert_string_equal(s->bootstrap_servers, "localhost:9092");
    for (int i = 0; i < pipeline_count(); i++) assert_true(s->pipeline_enabled[i]);
    assert_string_equal(s->group_prefix, "storage-consumer");
    assert_string_equal(s->topic[PIPELINE_APP_STATS], "app-stats");
    assert_string_equal(s->topic[PIPELINE_REVIEWS], "reviews");
    assert_string_equal(s->topic[PIPELINE_NETWORK_METRICS], "network-metrics");
    assert_int_equal(s->max_poll_records[PIPELINE_APP_STATS], 200);
    assert_int_equal(s->max_poll_records[PIPELINE_REVIEWS], 500);
    assert_int_equal(s->max_poll_records[PIPELINE_NETWORK_METRICS], 50);
    assert_int_equal(s->poll_timeout_ms, 1000);
    assert_int_equal(s->max_poll_interval_ms, 300000);
    assert_int_equal(s->session_timeout_ms, 45000);
    assert_string_equal(s->auto_offset_reset, "earliest");
    assert_int_equal(s->db_retry_max_attempts, 5);
    assert_int_equal(s->db_retry_base_ms, 1000);
    assert_int_equal(s->application_cache_ttl_seconds, 300);
    assert_int_equal(s->shutdown_timeout_seconds, 30);
    assert_int_equal(s->commit_failure_limit, 5);
    assert_string_equal(s->heartbeat_dir, "/tmp/storage-consumer");
    assert_int_equal(s->health_max_age_seconds, 90);
    assert_int_equal(s->fetch_stall_seconds, 60);
    assert_int_equal(s->log_level, LOG_LEVEL_INFO);
    assert_int_equal(s->log_format, LOG_FORMAT_TEXT);
    assert_null(s->metrics_addr);
    assert_int_equal(s->kafka_property_count, 0);
}

static void defaults_apply_when_environment_is_empty(void **state)
{
    (void)state;
    settings_t s;
    load_ok(&s, NO_ENV);
    expect_defaults(&s);
    settings_free(&s);
}

static void null_environment_gives_defaults(void **state)
{
    (void)state;
    settings_t s;
    load_ok(&s, NULL);
    expect_defaults(&s);
    settings_free(&s);
}

static void unrelated_variables_are_ignored(void **state)
{
    (void)state;
    settings_t s;
    load_ok(&s, ENV("PATH=/usr/bin", "HOME=/root", "MY_STORAGE_PIPELINES=nonsense",
                    "STORAGEPIPELINES=x", "storage_pipelines=x", "KAFKA_STORAGE_X=1"));
    expect_defaults(&s);
    settings_free(&s);
}

static void empty_value_means_default(void **state)
{
    (void)state;
    settings_t s;
    load_ok(&s, ENV("STORAGE_POLL_TIMEOUT_MS=", "STORAGE_PIPELINES=",
                    "STORAGE_MAX_POLL_RECORDS=", "STORAGE_KAFKA_BOOTSTRAP_SERVERS=",
                    "STORAGE_LOG_LEVEL=", "STORAGE_METRICS_ADDR="));
    expect_defaults(&s);
    settings_free(&s);
}

static void worst_case_batch_of_defaults_fits_the_max_poll_interval(void **state)
{
    (void)state;
    settings_t s;
    load_ok(&s, NO_ENV);
    long long worst = settings_worst_case_batch_ms(&s);
    settings_free(&s);
    /* 31 s of back-off + 6 attempts of 16 s (a 15 s statement timeout and the
     * 1 s grace of the client's own deadline) + two 10 s commits. */
    assert_int_equal(worst, 147000);
    assert_true(worst <= 300000);
}

static void values_are_copied_out_of_the_environment(void **state)
{
    (void)state;
    char url[] = "STORAGE_DATABASE_URL=postgresql://u:p@db:5432/storage?sslmode=require";
    char servers[] = "STORAGE_KAFKA_BOOTSTRAP_SERVERS=k1:9092,k2:9092";
    char prefix[] = "STORAGE_GROUP_PREFIX=blue";
    char dir[] = "STORAGE_HEARTBEAT_DIR=/run/sc";
    char prop[] = "STORAGE_RDKAFKA_SASL_PASSWORD=pa=ss word";
    char *env[] = {url, servers, prefix, dir, prop, NULL};
    settings_t s;
    load_ok(&s, env);
    memset(url, 'x', sizeof url - 1);
    memset(servers, 'x', sizeof servers - 1);
    memset(prefix, 'x', sizeof prefix - 1);
    memset(dir, 'x', sizeof dir - 1);
    memset(prop, 'x', sizeof prop - 1);
    assert_string_equal(s.database_url, "postgresql://u:p@db:5432/storage?sslmode=require");
    assert_string_equal(s.bootstrap_servers, "k1:9092,k2:9092");
    assert_string_equal(s.group_prefix, "blue");
    assert_string_equal(s.heartbeat_dir, "/run/sc");
    assert_int_equal(s.kafka_property_count, 1);
    assert_string_equal(s.kafka_properties[0].name, "sasl.password");
    assert_string_equal(s.kafka_properties[0].value, "pa=ss word");
    settings_free(&s);
}

static void group_id_is_prefix_dot_pipeline(void **state)
{
    (void)state;
    settings_t s;
    char buf[128];
    load_ok(&s, NO_ENV);
    settings_group_id(&s, PIPELINE_REVIEWS, buf, sizeof buf);
    assert_string_equal(buf, "storage-consumer.reviews");
    settings_group_id(&s, PIPELINE_APP_STATS, buf, sizeof buf);
    assert_string_equal(buf, "storage-consumer.app-stats");
    settings_group_id(&s, PIPELINE_NETWORK_METRICS, buf, sizeof buf);
    assert_string_equal(buf, "storage-consumer.network-metrics");
    settings_free(&s);
    load_ok(&s, ENV("STORAGE_GROUP_PREFIX=staging"));
    settings_group_id(&s, PIPELINE_REVIEWS, buf, sizeof buf);
    settings_free(&s);
    assert_string_equal(buf, "staging.reviews");
}

/* ------------------------------------------------------------------------ */
/* Batch sizes: pipeline variable, then shared variable, then default       */

static void per_pipeline_batch_variable_beats_shared_variable(void **state)
{
    (void)state;
    settings_t s;
    load_ok(&s, ENV("STORAGE_MAX_POLL_RECORDS=100", "STORAGE_MAX_POLL_RECORDS_REVIEWS=2000"));
    assert_int_equal(s.max_poll_records[PIPELINE_REVIEWS], 2000);
    assert_int_equal(s.max_poll_records[PIPELINE_APP_STATS], 100);
    assert_int_equal(s.max_poll_records[PIPELINE_NETWORK_METRICS], 100);
    settings_free(&s);
    /* Order in the environment does not matter. */
    load_ok(&s, ENV("STORAGE_MAX_POLL_RECORDS_NETWORK_METRICS=1", "STORAGE_MAX_POLL_RECORDS=7"));
    assert_int_equal(s.max_poll_records[PIPELINE_NETWORK_METRICS], 1);
    assert_int_equal(s.max_poll_records[PIPELINE_REVIEWS], 7);
    settings_free(&s);
}

static void shared_batch_variable_beats_default(void **state)
{
    (void)state;
    settings_t s;
    load_ok(&s, ENV("STORAGE_MAX_POLL_RECORDS=300"));
    for (int i = 0; i < pipeline_count(); i++) assert_int_equal(s.max_poll_records[i], 300);
    settings_free(&s);
}

static void per_pipeline_batch_variable_alone_leaves_others_at_default(void **state)
{
    (void)state;
    settings_t s;
    load_ok(&s, ENV("STORAGE_MAX_POLL_RECORDS_APP_STATS=20"));
    assert_int_equal(s.max_poll_records[PIPELINE_APP_STATS], 20);
    assert_int_equal(s.max_poll_records[PIPELINE_REVIEWS], 500);
    assert_int_equal(s.max_poll_records[PIPELINE_NETWORK_METRICS], 50);
    settings_free(&s);
}

static void batch_size_limits_are_1_to_100000(void **state)
{
    (void)state;
    settings_t s;
    load_ok(&s, ENV("STORAGE_MAX_POLL_RECORDS_REVIEWS=100000", "STORAGE_MAX_POLL_RECORDS_APP_STATS=1"));
    assert_int_equal(s.max_poll_records[PIPELINE_REVIEWS], 100000);
    assert_int_equal(s.max_poll_records[PIPELINE_APP_STATS], 1);
    settings_free(&s);
    expect_rejected_value("STORAGE_MAX_POLL_RECORDS_REVIEWS", "100001");
    expect_rejected_value("STORAGE_MAX_POLL_RECORDS_REVIEWS", "0");
    expect_rejected_value("STORAGE_MAX_POLL_RECORDS", "0");
    expect_rejected_value("STORAGE_MAX_POLL_RECORDS", "-5");
}

/* ------------------------------------------------------------------------ */
/* Integer syntax and ranges                                                */

static void non_numeric_value_is_rejected_naming_variable_and_value(void **state)
{
    (void)state;
    expect_rejected_value("STORAGE_MAX_POLL_RECORDS_REVIEWS", "lots");
    expect_rejected_value("STORAGE_MAX_POLL_RECORDS", "five-hundred");
    expect_rejected_value("STORAGE_POLL_TIMEOUT_MS", "1s");
    expect_rejected_value("STORAGE_DB_RETRY_MAX_ATTEMPTS", "many");
    expect_rejected_value("STORAGE_APPLICATION_CACHE_TTL_SECONDS", "5m");
    expect_rejected_value("STORAGE_COMMIT_FAILURE_LIMIT", "none");
}

static void integer_with_unit_fraction_sign_or_space_is_rejected(void **state)
{
    (void)state;
    static const char *const bad[] = {"500ms", "1e3", "5.0", "0x10", " 5", "5 ", "+5", "-", "--5",
                                      "5_000", "٥"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_rejected_value("STORAGE_MAX_POLL_RECORDS", bad[i]);
}

static void integer_beyond_long_is_rejected(void **state)
{
    (void)state;
    expect_rejected_value("STORAGE_MAX_POLL_INTERVAL_MS", "99999999999999999999999");
    expect_rejected_value("STORAGE_MAX_POLL_INTERVAL_MS", "4294967296300000");
}

static void out_of_range_values_are_rejected(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"STORAGE_POLL_TIMEOUT_MS", "0"},
        {"STORAGE_POLL_TIMEOUT_MS", "60001"},
        {"STORAGE_MAX_POLL_INTERVAL_MS", "999"},
        {"STORAGE_MAX_POLL_INTERVAL_MS", "86400001"},
        {"STORAGE_SESSION_TIMEOUT_MS", "999"},
        {"STORAGE_DB_RETRY_MAX_ATTEMPTS", "-1"},
        {"STORAGE_DB_RETRY_MAX_ATTEMPTS", "21"},
        {"STORAGE_DB_RETRY_BASE_MS", "0"},
        {"STORAGE_DB_STATEMENT_TIMEOUT_MS", "0"},
        {"STORAGE_COMMIT_TIMEOUT_MS", "99"},
        {"STORAGE_APPLICATION_CACHE_TTL_SECONDS", "-1"},
        {"STORAGE_APPLICATION_CACHE_TTL_SECONDS", "86401"},
        {"STORAGE_SHUTDOWN_TIMEOUT_SECONDS", "0"},
        {"STORAGE_COMMIT_FAILURE_LIMIT", "0"},
        {"STORAGE_HEALTH_MAX_AGE_SECONDS", "0"},
        {"STORAGE_FETCH_STALL_SECONDS", "-1"},
        {"STORAGE_FETCH_STALL_SECONDS", "86401"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char entry[256];
        snprintf(entry, sizeof entry, "%s=%s", cases[i][0], cases[i][1]);
        expect_error(ENV(entry), entry, "out of range");
    }
}

static void values_inside_their_ranges_are_accepted(void **state)
{
    (void)state;
    settings_t s;
    load_ok(&s, ENV("STORAGE_POLL_TIMEOUT_MS=250", "STORAGE_DB_RETRY_MAX_ATTEMPTS=0",
                    "STORAGE_APPLICATION_CACHE_TTL_SECONDS=0", "STORAGE_SHUTDOWN_TIMEOUT_SECONDS=11",
                    "STORAGE_COMMIT_FAILURE_LIMIT=1", "STORAGE_HEALTH_MAX_AGE_SECONDS=30",
                    "STORAGE_DB_STATEMENT_TIMEOUT_MS=5000", "STORAGE_COMMIT_TIMEOUT_MS=2000",
                    "STORAGE_FETCH_STALL_SECONDS=0"));
    assert_int_equal(s.poll_timeout_ms, 250);
    assert_int_equal(s.db_retry_max_attempts, 0);
    assert_int_equal(s.application_cache_ttl_seconds, 0);
    assert_int_equal(s.shutdown_timeout_seconds, 11);
    assert_int_equal(s.commit_failure_limit, 1);
    assert_int_equal(s.health_max_age_seconds, 30);
    assert_int_equal(s.db_statement_timeout_ms, 5000);
    assert_int_equal(s.commit_timeout_ms, 2000);
    assert_int_equal(s.fetch_stall_seconds, 0);
    settings_free(&s);
}

/* ------------------------------------------------------------------------ */
/* Pipelines                                                                */

static void pipelines_variable_selects_the_pipelines_to_run(void **state)
{
    (void)state;
    settings_t s;
    load_ok(&s, ENV("STORAGE_PIPELINES=reviews"));
    assert_false(s.pipeline_enabled[PIPELINE_APP_STATS]);
    assert_true(s.pipeline_enabled[PIPELINE_REVIEWS]);
    assert_false(s.pipeline_enabled[PIPELINE_NETWORK_METRICS]);
    settings_free(&s);
    load_ok(&s, ENV("STORAGE_PIPELINES=network-metrics,app-stats"));
    assert_true(s.pipeline_enabled[PIPELINE_APP_STATS]);
    assert_false(s.pipeline_enabled[PIPELINE_REVIEWS]);
    assert_true(s.pipeline_enabled[PIPELINE_NETWORK_METRICS]);
    settings_free(&s);
}

static void pipeline_names_are_trimmed(void **state)
{
    (void)state;
    settings_t s;
    load_ok(&s, ENV("STORAGE_PIPELINES= reviews ,\tnetwork-metrics "));
    assert_false(s.pipeline_enabled[PIPELINE_APP_STATS]);
    assert_true(s.pipeline_enabled[PIPELINE_REVIEWS]);
    assert_true(s.pipeline_enabled[PIPELINE_NETWORK_METRICS]);
    settings_free(&s);
}

static void unknown_pipeline_name_is_rejected(void **state)
{
    (void)state;
    expect_error(ENV("STORAGE_PIPELINES=reviews,review"), "STORAGE_PIPELINES", "\"review\"");
    expect_error(ENV("STORAGE_PIPELINES=app_stats"), "STORAGE_PIPELINES", "\"app_stats\"");
    expect_error(ENV("STORAGE_PIPELINES=Reviews"), "STORAGE_PIPELINES", "\"Reviews\"");
    expect_error(ENV("STORAGE_PIPELINES=reviewsx"), "STORAGE_PIPELINES", "\"reviewsx\"");
}

static void duplicate_pipeline_is_rejected(void **state)
{
    (void)state;
    expect_error(ENV("STORAGE_PIPELINES=reviews,reviews"), "STORAGE_PIPELINES", "twice");
    expect_error(ENV("STORAGE_PIPELINES=reviews, app-stats ,reviews "), "STORAGE_PIPELINES",
                 "reviews");
}

static void empty_pipeline_list_is_rejected(void **state)
{
    (void)state;
    expect_error(ENV("STORAGE_PIPELINES=,"), "STORAGE_PIPELINES", NULL);
    expect_error(ENV("STORAGE_PIPELINES= "), "STORAGE_PIPELINES", NULL);
    expect_error(ENV("STORAGE_PIPELINES=,,"), "STORAGE_PIPELINES", NULL);
    expect_error(ENV("STORAGE_PIPELINES=reviews,,app-stats"), "STORAGE_PIPELINES", NULL);
}

/* ------------------------------------------------------------------------ */
/* Topics                                                                   */

static void topics_can_be_renamed(void **state)
{
    (void)state;
    settings_t s;
    load_ok(&s, ENV("STORAGE_TOPIC_REVIEWS=crawler.reviews_v2", "STORAGE_TOPIC_APP_STATS=A-b_c.9"));
    assert_string_equal(s.topic[PIPELINE_REVIEWS], "crawler.reviews_v2");
    assert_string_equal(s.topic[PIPELINE_APP_STATS], "A-b_c.9");
    assert_string_equal(s.topic[PIPELINE_NETWORK_METRICS], "network-metrics");
    settings_free(&s);
}

static void invalid_topic_name_is_rejected(void **state)
{
    (void)state;
    expect_rejected_value("STORAGE_TOPIC_REVIEWS", "my reviews");
    expect_rejected_value("STORAGE_TOPIC_APP_STATS", "app/stats");
    expect_rejected_value("STORAGE_TOPIC_NETWORK_METRICS", "network:metrics");
    expect_rejected_value("STORAGE_TOPIC_REVIEWS", "r\xc3\xa9views");
    expect_rejected_value("STORAGE_TOPIC_REVIEWS", "reviews*");
}

static void topic_named_dot_or_dot_dot_is_rejected(void **state)
{
    (void)state;
    /* Kafka refuses these two names although their characters are legal. */
    expect_rejected_value("STORAGE_TOPIC_REVIEWS", ".");
    expect_rejected_value("STORAGE_TOPIC_REVIEWS", "..");
    settings_t s;
    load_ok(&s, ENV("STORAGE_TOPIC_REVIEWS=..."));
    assert_string_equal(s.topic[PIPELINE_REVIEWS], "...");
    settings_free(&s);
}

static void topic_name_of_249_characters_is_accepted_250_rejected(void **state)
{
    (void)state;
    char ok[300], over[300];
    snprintf(ok, sizeof ok, "STORAGE_TOPIC_REVIEWS=%s", "");
    size_t n = strlen(ok);
    memset(ok + n, 't', 249);
    ok[n + 249] = '\0';
    memcpy(over, ok, n + 249);
    over[n + 249] = 't';
    over[n + 250] = '\0';
    settings_t s;
    load_ok(&s, ENV(ok));
    assert_int_equal(strlen(s.topic[PIPELINE_REVIEWS]), 249);
    settings_free(&s);
    expect_error(ENV(over), "STORAGE_TOPIC_REVIEWS", "not a valid Kafka topic name");
}

static void a_list_of_topics_is_read_in_order_and_each_name_checked(void **state)
{
    (void)state;
    settings_t s;
    load_ok(&s, ENV("STORAGE_TOPIC_REVIEWS=reviews-eu,reviews-us,reviews.asia"));
    assert_string_equal(s.topic[PIPELINE_REVIEWS], "reviews-eu,reviews-us,reviews.asia");
    assert_int_equal(s.topics[PIPELINE_REVIEWS].count, 3);
    assert_string_equal(s.topics[PIPELINE_REVIEWS].name[0], "reviews-eu");
    assert_string_equal(s.topics[PIPELINE_REVIEWS].name[2], "reviews.asia");
    assert_int_equal(s.topics[PIPELINE_APP_STATS].count, 1);
    settings_free(&s);
    expect_error(ENV("STORAGE_TOPIC_REVIEWS=reviews-eu,reviews-eu"), "STORAGE_TOPIC_REVIEWS",
                 "\"reviews-eu\" is named twice");
    expect_error(ENV("STORAGE_TOPIC_REVIEWS=reviews-eu,"), "STORAGE_TOPIC_REVIEWS", "\"\" is not a valid Kafka topic name");
    expect_error(ENV("STORAGE_TOPIC_REVIEWS=a,b c"), "STORAGE_TOPIC_REVIEWS", "\"b c\" is not a valid Kafka topic name");
    expect_error(ENV("STORAGE_TOPIC_REVIEWS=t1,t2,t3,t4,t5,t6,t7,t8,t9,t10,t11,t12,t13,t14,t15,t16,t17"),
                 "STORAGE_TOPIC_REVIEWS", "\"t17\" is one topic too many (at most 16 per pipeline)");
    /* A topic of one pipeline's list is no other's. */
    expect_error(ENV("STORAGE_TOPIC_REVIEWS=reviews-eu,app-stats"), "STORAGE_TOPIC_REVIEWS",
                 "topic app-stats is STORAGE_TOPIC_APP_STATS's too");
}

static void two_enabled_pipelines_on_one_topic_are_rejected(void **state)
{
    (void)state;
    expect_error(ENV("STORAGE_TOPIC_REVIEWS=app-stats"), "STORAGE_TOPIC_REVIEWS", "app-stats");
    expect_error(ENV("STORAGE_TOPIC_APP_STATS=shared", "STORAGE_TOPIC_NETWORK_METRICS=shared"),
                 "STORAGE_TOPIC_", "shared");
    /* Not when one of them does not run in this process. */
    settings_t s;
    load_ok(&s, ENV("STORAGE_TOPIC_REVIEWS=app-stats", "STORAGE_PIPELINES=reviews"));
    assert_string_equal(s.topic[PIPELINE_REVIEWS], "app-stats");
    settings_free(&s);
}

/* ------------------------------------------------------------------------ */
/* Timing constraints between settings                                      */

static void retry_schedule_that_cannot_fit_max_poll_interval_is_rejected(void **state)
{
    (void)state;
    /* 4095 s of back-off alone, against a 300 s max poll interval. */
    expect_error(ENV("STORAGE_DB_RETRY_MAX_ATTEMPTS=12"), "STORAGE_DB_RETRY_MAX_ATTEMPTS=12",
                 "STORAGE_MAX_POLL_INTERVAL_MS");
    expect_error(ENV("STORAGE_DB_RETRY_BASE_MS=10000"), "STORAGE_DB_RETRY_BASE_MS=10000",
                 "STORAGE_MAX_POLL_INTERVAL_MS");
    /* Statement timeouts count too: 6 x 60 s. */
    expect_error(ENV("STORAGE_DB_STATEMENT_TIMEOUT_MS=60000"), "STORAGE_DB_STATEMENT_TIMEOUT_MS",
                 "STORAGE_MAX_POLL_INTERVAL_MS");
    /* A shorter interval breaks the default schedule (147 s). */
    expect_error(ENV("STORAGE_MAX_POLL_INTERVAL_MS=146999"), "STORAGE_DB_RETRY_MAX_ATTEMPTS",
                 "STORAGE_MAX_POLL_INTERVAL_MS=146999");
}

static void retry_schedule_exactly_filling_max_poll_interval_is_accepted(void **state)
{
    (void)state;
    settings_t s;
    load_ok(&s, ENV("STORAGE_MAX_POLL_INTERVAL_MS=147000"));
    assert_int_equal(settings_worst_case_batch_ms(&s), 147000);
    settings_free(&s);
    /* 12 attempts: 4095 s back-off + 13 x 16 s + 2 x 10 s = 4323 s. */
    load_ok(&s, ENV("STORAGE_DB_RETRY_MAX_ATTEMPTS=12", "STORAGE_MAX_POLL_INTERVAL_MS=4323000"));
    assert_int_equal(s.db_retry_max_attempts, 12);
    assert_int_equal(settings_worst_case_batch_ms(&s), 4323000);
    settings_free(&s);
    expect_error(ENV("STORAGE_DB_RETRY_MAX_ATTEMPTS=12", "STORAGE_MAX_POLL_INTERVAL_MS=4322999"),
                 "STORAGE_DB_RETRY_MAX_ATTEMPTS=12", NULL);
}

static void a_clean_stop_of_the_defaults_fits_the_shutdown_timeout(void **state)
{
    (void)state;
    settings_t s;
    load_ok(&s, NO_ENV);
    /* A 1 s poll + a 16 s database attempt + a 10 s commit + 2 s to leave. */
    assert_int_equal(settings_worst_case_stop_ms(&s), 29000);
    assert_true(settings_worst_case_stop_ms(&s) <= s.shutdown_timeout_seconds * 1000LL);
    settings_free(&s);
}

static void a_stop_path_longer_than_the_shutdown_timeout_is_rejected_naming_it(void **state)
{
    (void)state;
    /* Accepted before: the in-flight statement alone outlasted the stop, so
     * a clean stop could exit 1. */
    expect_error(ENV("STORAGE_SHUTDOWN_TIMEOUT_SECONDS=2"), "STORAGE_SHUTDOWN_TIMEOUT_SECONDS=2",
                 "STORAGE_DB_STATEMENT_TIMEOUT_MS=15000");
    expect_error(ENV("STORAGE_DB_STATEMENT_TIMEOUT_MS=30000"), "STORAGE_SHUTDOWN_TIMEOUT_SECONDS=30",
                 "STORAGE_DB_STATEMENT_TIMEOUT_MS=30000");
    expect_error(ENV("STORAGE_COMMIT_TIMEOUT_MS=11001"), "STORAGE_SHUTDOWN_TIMEOUT_SECONDS=30",
                 "STORAGE_COMMIT_TIMEOUT_MS=11001");
    settings_t s;
    load_ok(&s, ENV("STORAGE_DB_STATEMENT_TIMEOUT_MS=30000", "STORAGE_SHUTDOWN_TIMEOUT_SECONDS=44"));
    assert_int_equal(settings_worst_case_stop_ms(&s), 44000);
    settings_free(&s);
}

static void session_timeout_above_max_poll_interval_is_rejected(void **state)
{
    (void)state;
    expect_error(ENV("STORAGE_SESSION_TIMEOUT_MS=300001"), "STORAGE_SESSION_TIMEOUT_MS=300001",
                 "STORAGE_MAX_POLL_INTERVAL_MS");
    settings_t s;
    load_ok(&s, ENV("STORAGE_SESSION_TIMEOUT_MS=300000"));
    assert_int_equal(s.session_timeout_ms, 300000);
    settings_free(&s);
}

static void poll_timeout_not_below_max_poll_interval_is_rejected(void **state)
{
    (void)state;
    expect_error(ENV("STORAGE_MAX_POLL_INTERVAL_MS=2000", "STORAGE_SESSION_TIMEOUT_MS=1000",
                     "STORAGE_DB_RETRY_MAX_ATTEMPTS=0", "STORAGE_DB_STATEMENT_TIMEOUT_MS=500",
                     "STORAGE_COMMIT_TIMEOUT_MS=100", "STORAGE_POLL_TIMEOUT_MS=2000"),
                 "STORAGE_POLL_TIMEOUT_MS=2000", "STORAGE_MAX_POLL_INTERVAL_MS");
}

/* ------------------------------------------------------------------------ */
/* Enumerations                                                             */

static void log_level_and_format_are_parsed(void **state)
{
    (void)state;
    settings_t s;
    load_ok(&s, ENV("STORAGE_LOG_LEVEL=debug", "STORAGE_LOG_FORMAT=json"));
    assert_int_equal(s.log_level, LOG_LEVEL_DEBUG);
    assert_int_equal(s.log_format, LOG_FORMAT_JSON);
    settings_free(&s);
    load_ok(&s, ENV("STORAGE_LOG_LEVEL=WARNING", "STORAGE_LOG_FORMAT=text"));
    assert_int_equal(s.log_level, LOG_LEVEL_WARN);
    assert_int_equal(s.log_format, LOG_FORMAT_TEXT);
    settings_free(&s);
    load_ok(&s, ENV("STORAGE_LOG_LEVEL=error"));
    assert_int_equal(s.log_level, LOG_LEVEL_ERROR);
    settings_free(&s);
}

static void unknown_log_level_is_rejected(void **state)
{
    (void)state;
    expect_rejected_value("STORAGE_LOG_LEVEL", "verbose");
    expect_rejected_value("STORAGE_LOG_LEVEL", "trace");
    expect_rejected_value("STORAGE_LOG_LEVEL", "off");
}

static void unknown_log_format_is_rejected(void **state)
{
    (void)state;
    expect_rejected_value("STORAGE_LOG_FORMAT", "xml");
    expect_rejected_value("STORAGE_LOG_FORMAT", "logfmt");
}

static void auto_offset_reset_is_earliest_or_latest(void **state)
{
    (void)state;
    settings_t s;
    load_ok(&s, ENV("STORAGE_AUTO_OFFSET_RESET=latest"));
    assert_string_equal(s.auto_offset_reset, "latest");
    settings_free(&s);
    expect_rejected_value("STORAGE_AUTO_OFFSET_RESET", "smallest");
    expect_rejected_value("STORAGE_AUTO_OFFSET_RESET", "none");
}

/* ------------------------------------------------------------------------ */
/* Unknown variables                                                        */

static void unknown_storage_variable_is_rejected_naming_it(void **state)
{
    (void)state;
    expect_error(ENV("STORAGE_MAX_POLL_RECORD=500"), "STORAGE_MAX_POLL_RECORD", "unknown");
    expect_error(ENV("STORAGE_PIPELINES=reviews", "STORAGE_PIPELINE=reviews"), "STORAGE_PIPELINE:",
                 NULL);
    expect_error(ENV("STORAGE_DATABASE_URI=postgres://"), "STORAGE_DATABASE_URI", NULL);
    expect_error(ENV("STORAGE_MAX_POLL_RECORDS_REVIEW=10"), "STORAGE_MAX_POLL_RECORDS_REVIEW", NULL);
    /* Even when empty: the operator meant to set something. */
    expect_error(ENV("STORAGE_TOPIC_REVIEW="), "STORAGE_TOPIC_REVIEW", NULL);
}

static void every_documented_variable_is_known(void **state)
{
    (void)state;
    settings_t s;
    load_ok(&s, ENV("STORAGE_DATABASE_URL=dbname=x", "STORAGE_KAFKA_BOOTSTRAP_SERVERS=k:9092",
                    "STORAGE_PIPELINES=app-stats,reviews,network-metrics",
                    "STORAGE_GROUP_PREFIX=p", "STORAGE_TOPIC_APP_STATS=a",
                    "STORAGE_TOPIC_REVIEWS=r", "STORAGE_TOPIC_NETWORK_METRICS=n",
                    "STORAGE_MAX_POLL_RECORDS=10", "STORAGE_MAX_POLL_RECORDS_APP_STATS=11",
                    "STORAGE_MAX_POLL_RECORDS_REVIEWS=12",
                    "STORAGE_MAX_POLL_RECORDS_NETWORK_METRICS=13", "STORAGE_POLL_TIMEOUT_MS=500",
                    "STORAGE_MAX_POLL_INTERVAL_MS=300000", "STORAGE_SESSION_TIMEOUT_MS=30000",
                    "STORAGE_AUTO_OFFSET_RESET=earliest", "STORAGE_DB_RETRY_MAX_ATTEMPTS=5",
                    "STORAGE_DB_RETRY_BASE_MS=1000", "STORAGE_APPLICATION_CACHE_TTL_SECONDS=60",
                    "STORAGE_SHUTDOWN_TIMEOUT_SECONDS=29", "STORAGE_COMMIT_FAILURE_LIMIT=3",
                    "STORAGE_HEARTBEAT_DIR=/tmp/hb", "STORAGE_HEALTH_MAX_AGE_SECONDS=60",
                    "STORAGE_LOG_LEVEL=info", "STORAGE_LOG_FORMAT=json",
                    "STORAGE_METRICS_ADDR=127.0.0.1:9100"));
    assert_string_equal(s.database_url, "dbname=x");
    assert_int_equal(s.max_poll_records[PIPELINE_APP_STATS], 11);
    assert_int_equal(s.max_poll_records[PIPELINE_REVIEWS], 12);
    assert_int_equal(s.max_poll_records[PIPELINE_NETWORK_METRICS], 13);
    assert_int_equal(s.session_timeout_ms, 30000);
    assert_int_equal(s.commit_failure_limit, 3);
    assert_string_equal(s.metrics_addr, "127.0.0.1:9100");
    settings_free(&s);
}

/* ------------------------------------------------------------------------ */
/* librdkafka pass-through                                                  */

static void rdkafka_variable_becomes_a_dotted_property(void **state)
{
    (void)state;
    settings_t s;
    load_ok(&s, ENV("STORAGE_RDKAFKA_SECURITY_PROTOCOL=ssl"));
    assert_int_equal(s.kafka_property_count, 1);
    assert_string_equal(s.kafka_properties[0].name, "security.protocol");
    assert_string_equal(s.kafka_properties[0].value, "ssl");
    settings_free(&s);
}

static void several_rdkafka_properties_are_all_kept(void **state)
{
    (void)state;
    settings_t s;
    load_ok(&s, ENV("STORAGE_RDKAFKA_SSL_CA_LOCATION=/etc/ssl/ca.pem", "PATH=/bin",
                    "STORAGE_RDKAFKA_SASL_MECHANISMS=SCRAM-SHA-512",
                    "STORAGE_RDKAFKA_STATISTICS_INTERVAL_MS=0"));
    assert_int_equal(s.kafka_property_count, 3);
    assert_string_equal(s.kafka_properties[0].name, "ssl.ca.location");
    assert_string_equal(s.kafka_properties[0].value, "/etc/ssl/ca.pem");
    assert_string_equal(s.kafka_properties[1].name, "sasl.mechanisms");
    assert_string_equal(s.kafka_properties[1].value, "SCRAM-SHA-512");
    assert_string_equal(s.kafka_properties[2].name, "statistics.interval.ms");
    assert_string_equal(s.kafka_properties[2].value, "0");
    settings_free(&s);
}

static void enable_auto_commit_cannot_be_set(void **state)
{
    (void)state;
    expect_error(ENV("STORAGE_RDKAFKA_ENABLE_AUTO_COMMIT=true"), "STORAGE_RDKAFKA_ENABLE_AUTO_COMMIT",
                 "enable.auto.commit");
    /* Not even to its own value: the service owns it. */
    expect_error(ENV("STORAGE_RDKAFKA_ENABLE_AUTO_COMMIT=false"),
                 "STORAGE_RDKAFKA_ENABLE_AUTO_COMMIT", NULL);
    expect_error(ENV("STORAGE_RDKAFKA_enable_auto_commit=true"), "enable.auto.commit", NULL);
}

static void properties_the_service_sets_itself_cannot_be_overridden(void **state)
{
    (void)state;
    static const char *const reserved[][2] = {
        {"STORAGE_RDKAFKA_GROUP_ID=x", "group.id"},
        {"STORAGE_RDKAFKA_BOOTSTRAP_SERVERS=k:9092", "bootstrap.servers"},
        {"STORAGE_RDKAFKA_AUTO_OFFSET_RESET=latest", "auto.offset.reset"},
        {"STORAGE_RDKAFKA_SESSION_TIMEOUT_MS=10000", "session.timeout.ms"},
        {"STORAGE_RDKAFKA_MAX_POLL_INTERVAL_MS=10000", "max.poll.interval.ms"},
        {"STORAGE_RDKAFKA_ENABLE_AUTO_OFFSET_STORE=true", "enable.auto.offset.store"},
    };
    for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
        expect_error(ENV((char *)reserved[i][0]), reserved[i][1], NULL);
}

static void rdkafka_variable_without_a_property_name_is_rejected(void **state)
{
    (void)state;
    expect_error(ENV("STORAGE_RDKAFKA_=x"), "STORAGE_RDKAFKA_", NULL);
}

/* Its value may be a secret: the message names only the variable. */
static void rdkafka_variable_without_a_property_name_is_rejected_without_its_value(void **state)
{
    (void)state;
    settings_t s;
    char err[1024] = "";
    assert_int_equal(settings_load(&s, ENV("STORAGE_RDKAFKA_=s3cret-value"), err, sizeof err), -1);
    if (strstr(err, "s3cret")) fail_msg("the value is shown: %s", err);
    assert_non_null(strstr(err, "STORAGE_RDKAFKA_"));
}

static void secret_librdkafka_properties_are_told_by_their_name(void **state)
{
    (void)state;
    static const char *const secret[] = {
        "sasl.password", "ssl.key.password", "ssl.keystore.password", "ssl.key.pem",
        "ssl.key.location", "sasl.oauthbearer.client.secret", "sasl.oauthbearer.config",
        "sasl.username", "ssl.ca.pem", "sasl.jaas.config", "sasl.kerberos.keytab",
        "ssl.truststore.password", "some.access.token", "aws.credentials", "SASL.PASSWORD",
    };
    static const char *const plain[] = {
        "security.protocol", "sasl.mechanisms", "ssl.ca.location", "ssl.certificate.location",
        "client.rack", "fetch.max.bytes", "debug",
    };
    for (size_t i = 0; i < sizeof secret / sizeof secret[0]; i++)
        if (!settings_kafka_property_is_secret(secret[i])) fail_msg("%s is not taken for a secret", secret[i]);
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        if (settings_kafka_property_is_secret(plain[i])) fail_msg("%s is taken for a secret", plain[i]);
}

/* ------------------------------------------------------------------------ */
/* Metrics address                                                          */

static void metrics_address_with_host_and_port_is_accepted(void **state)
{
    (void)state;
    static const char *const good[] = {"0.0.0.0:9100", "localhost:1", "[::1]:65535", "metrics:8080"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        char entry[128];
        settings_t s;
        snprintf(entry, sizeof entry, "STORAGE_METRICS_ADDR=%s", good[i]);
        load_ok(&s, ENV(entry));
        assert_string_equal(s.metrics_addr, good[i]);
        settings_free(&s);
    }
}

static void metrics_address_without_port_is_rejected(void **state)
{
    (void)state;
    static const char *const bad[] = {"localhost", "localhost:", "9100", "host:0", "host:65536",
                                      "host:http", "host:91x0", "host:-1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_rejected_value("STORAGE_METRICS_ADDR", bad[i]);
}

/* ------------------------------------------------------------------------ */
/* Memory                                                                   */

static void failed_load_leaves_nothing_to_free(void **state)
{
    (void)state;
    /* Failures late in loading, after strings and properties were copied:
     * LeakSanitizer reports anything not released. */
    expect_error(ENV("STORAGE_DATABASE_URL=dbname=x", "STORAGE_RDKAFKA_SSL_CA_LOCATION=/ca",
                     "STORAGE_RDKAFKA_CLIENT_ID=sc", "STORAGE_RDKAFKA_GROUP_ID=evil"),
                 "group.id", NULL);
    expect_error(ENV("STORAGE_HEARTBEAT_DIR=/x", "STORAGE_METRICS_ADDR=nowhere"),
                 "STORAGE_METRICS_ADDR", NULL);
    expect_error(ENV("STORAGE_TOPIC_REVIEWS=bad topic"), "STORAGE_TOPIC_REVIEWS", NULL);
    expect_error(ENV("STORAGE_LOG_FORMAT=xml", "STORAGE_AUTO_OFFSET_RESET=latest"),
                 "STORAGE_LOG_FORMAT", NULL);
}

static void settings_free_releases_everything_and_can_be_repeated(void **state)
{
    (void)state;
    settings_t s;
    load_ok(&s, ENV("STORAGE_DATABASE_URL=host=db", "STORAGE_METRICS_ADDR=0.0.0.0:9100",
                    "STORAGE_RDKAFKA_SECURITY_PROTOCOL=ssl", "STORAGE_RDKAFKA_SSL_KEY_PASSWORD=k",
                    "STORAGE_TOPIC_REVIEWS=r2", "STORAGE_HEARTBEAT_DIR=/hb"));
    settings_free(&s);
    assert_true(is_zeroed(&s));
    settings_free(&s); /* a second free is harmless */
    assert_true(is_zeroed(&s));
}

static void error_message_is_truncated_to_the_buffer(void **state)
{
    (void)state;
    settings_t s;
    char err[16];
    memset(err, 'x', sizeof err);
    assert_int_equal(settings_load(&s, ENV("STORAGE_POLL_TIMEOUT_MS=soon"), err, sizeof err), -1);
    assert_int_equal(strlen(err), sizeof err - 1);
    assert_string_equal(err, "STORAGE_POLL_TI");
}

/* ------------------------------------------------------------------------ */
/* The catalog, and the variables Kubernetes sets (DESIGN.md: Settings
 * catalog)                                                                 */

static void test_kubernetes_service_variables_are_ignored(void **state)
{
    (void)state;
    settings_t s;
    /* Services named "storage" and "storage-consumer", ports named and not. */
    load_ok(&s, ENV("STORAGE_SERVICE_HOST=10.96.0.12", "STORAGE_SERVICE_PORT=9100",
                    "STORAGE_SERVICE_PORT_METRICS=9100", "STORAGE_PORT=tcp://10.96.0.12:9100",
                    "STORAGE_PORT_9100_TCP=tcp://10.96.0.12:9100", "STORAGE_PORT_9100_TCP_PROTO=tcp",
                    "STORAGE_PORT_9100_TCP_PORT=9100", "STORAGE_PORT_9100_TCP_ADDR=10.96.0.12",
                    "STORAGE_CONSUMER_SERVICE_HOST=fd00::1", "STORAGE_CONSUMER_SERVICE_PORT=80",
                    "STORAGE_CONSUMER_SERVICE_PORT_HTTP_METRICS=80", "STORAGE_CONSUMER_PORT=udp://[fd00::1]:80",
                    "STORAGE_CONSUMER_PORT_80_UDP=udp://[fd00::1]:80", "STORAGE_CONSUMER_PORT_80_UDP_PROTO=udp",
                    "STORAGE_CONSUMER_PORT_80_UDP_PORT=80", "STORAGE_CONSUMER_PORT_80_UDP_ADDR=fd00::1",
                    "STORAGE_CONSUMER_PORT_5432_SCTP_ADDR=10.0.0.1"));
    assert_string_equal(s.bootstrap_servers, "localhost:9092");
    settings_free(&s);
}

static void test_a_misspelt_setting_still_stops_start_up(void **state)
{
    (void)state;
    expect_error(ENV("STORAGE_DATABSE_URL=host=db"), "STORAGE_DATABSE_URL", "unknown setting");
    /* Kubernetes' names with values of another shape: settings, misspelt. */
    expect_error(ENV("STORAGE_METRICS_PORT=9100"), "STORAGE_METRICS_PORT", "unknown setting");
    expect_error(ENV("STORAGE_DB_SERVICE_HOST=db.example.com"), "STORAGE_DB_SERVICE_HOST", "unknown setting");
    expect_error(ENV("STORAGE_PORT_9100_HTTP=tcp://10.0.0.1:9100"), "STORAGE_PORT_9100_HTTP", "unknown");
    expect_error(ENV("STORAGE_PORT_9100_TCP_HOST=10.0.0.1"), "STORAGE_PORT_9100_TCP_HOST", "unknown");
    expect_error(ENV("STORAGE_PORT_9100_TCP_PORT=9200"), "STORAGE_PORT_9100_TCP_PORT", "unknown");
    expect_error(ENV("STORAGE_SERVICE_PORT_metrics=9100"), "STORAGE_SERVICE_PORT_metrics", "unknown");
    expect_error(ENV("STORAGE_SERVICE_PORT="), NULL, NULL);
}

static void test_the_catalog_lists_each_pipelines_variables_with_their_defaults(void **state)
{
    (void)state;
    for (int p = 0; p < pipeline_count(); p++) {
        const pipeline_def_t *def = pipeline_get((pipeline_id_t)p);
        char topic[96], batch[96], size[16];
        snprintf(topic, sizeof topic, "STORAGE_TOPIC_%s", def->env_suffix);
        snprintf(batch, sizeof batch, "STORAGE_MAX_POLL_RECORDS_%s", def->env_suffix);
        snprintf(size, sizeof size, "%d", def->default_batch_size);
        int found = 0;
        size_t count;
        const settings_doc_t *catalog = settings_catalog(&count);
        for (size_t i = 0; i < count; i++) {
            if (strcmp(catalog[i].name, topic) == 0) {
                assert_string_equal(catalog[i].default_value, def->default_topic);
                found++;
            }
            if (strcmp(catalog[i].name, batch) == 0) {
                assert_string_equal(catalog[i].default_value, size);
                found++;
            }
        }
        if (found != 2) fail_msg("%s or %s is not in the catalog", topic, batch);
    }
}

static void test_the_catalog_prints_one_line_per_setting(void **state)
{
    (void)state;
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    settings_print_catalog(out);
    fclose(out);
    assert_true(strncmp(text, "settings:\n", 10) == 0);
    size_t count;
    const settings_doc_t *catalog = settings_catalog(&count);
    for (size_t i = 0; i < count; i++) {
        char line[128];
        snprintf(line, sizeof line, "\n  %s ", catalog[i].name);
        if (!strstr(text, line)) fail_msg("%s has no line of its own: %s", catalog[i].name, text);
    }
    assert_non_null(strstr(text, "\n  STORAGE_RDKAFKA_<PROPERTY> "));
    free(text);
}

static void test_storage_migrate_is_auto_or_off(void **state)
{
    (void)state;
    settings_t s;
    load_ok(&s, NO_ENV);
    assert_true(s.migrate);
    settings_free(&s);
    load_ok(&s, ENV("STORAGE_MIGRATE=off"));
    assert_false(s.migrate);
    settings_free(&s);
    load_ok(&s, ENV("STORAGE_MIGRATE=auto"));
    assert_true(s.migrate);
    settings_free(&s);
    expect_rejected_value("STORAGE_MIGRATE", "no");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kubernetes_service_variables_are_ignored),
        cmocka_unit_test(test_a_misspelt_setting_still_stops_start_up),
        cmocka_unit_test(test_the_catalog_lists_each_pipelines_variables_with_their_defaults),
        cmocka_unit_test(test_the_catalog_prints_one_line_per_setting),
        cmocka_unit_test(test_storage_migrate_is_auto_or_off),
        cmocka_unit_test(defaults_apply_when_environment_is_empty),
        cmocka_unit_test(null_environment_gives_defaults),
        cmocka_unit_test(unrelated_variables_are_ignored),
        cmocka_unit_test(empty_value_means_default),
        cmocka_unit_test(worst_case_batch_of_defaults_fits_the_max_poll_interval),
        cmocka_unit_test(values_are_copied_out_of_the_environment),
        cmocka_unit_test(group_id_is_prefix_dot_pipeline),
        cmocka_unit_test(per_pipeline_batch_variable_beats_shared_variable),
        cmocka_unit_test(shared_batch_variable_beats_default),
        cmocka_unit_test(per_pipeline_batch_variable_alone_leaves_others_at_default),
        cmocka_unit_test(batch_size_limits_are_1_to_100000),
        cmocka_unit_test(non_numeric_value_is_rejected_naming_variable_and_value),
        cmocka_unit_test(integer_with_unit_fraction_sign_or_space_is_rejected),
        cmocka_unit_test(integer_beyond_long_is_rejected),
        cmocka_unit_test(out_of_range_values_are_rejected),
        cmocka_unit_test(values_inside_their_ranges_are_accepted),
        cmocka_unit_test(pipelines_variable_selects_the_pipelines_to_run),
        cmocka_unit_test(pipeline_names_are_trimmed),
        cmocka_unit_test(unknown_pipeline_name_is_rejected),
        cmocka_unit_test(duplicate_pipeline_is_rejected),
        cmocka_unit_test(empty_pipeline_list_is_rejected),
        cmocka_unit_test(topics_can_be_renamed),
        cmocka_unit_test(invalid_topic_name_is_rejected),
        cmocka_unit_test(topic_named_dot_or_dot_dot_is_rejected),
        cmocka_unit_test(topic_name_of_249_characters_is_accepted_250_rejected),
        cmocka_unit_test(two_enabled_pipelines_on_one_topic_are_rejected),
        cmocka_unit_test(a_list_of_topics_is_read_in_order_and_each_name_checked),
        cmocka_unit_test(retry_schedule_that_cannot_fit_max_poll_interval_is_rejected),
        cmocka_unit_test(retry_schedule_exactly_filling_max_poll_interval_is_accepted),
        cmocka_unit_test(a_clean_stop_of_the_defaults_fits_the_shutdown_timeout),
        cmocka_unit_test(a_stop_path_longer_than_the_shutdown_timeout_is_rejected_naming_it),
        cmocka_unit_test(session_timeout_above_max_poll_interval_is_rejected),
        cmocka_unit_test(poll_timeout_not_below_max_poll_interval_is_rejected),
        cmocka_unit_test(log_level_and_format_are_parsed),
        cmocka_unit_test(unknown_log_level_is_rejected),
        cmocka_unit_test(unknown_log_format_is_rejected),
        cmocka_unit_test(auto_offset_reset_is_earliest_or_latest),
        cmocka_unit_test(unknown_storage_variable_is_rejected_naming_it),
        cmocka_unit_test(every_documented_variable_is_known),
        cmocka_unit_test(rdkafka_variable_becomes_a_dotted_property),
        cmocka_unit_test(several_rdkafka_properties_are_all_kept),
        cmocka_unit_test(enable_auto_commit_cannot_be_set),
        cmocka_unit_test(properties_the_service_sets_itself_cannot_be_overridden),
        cmocka_unit_test(rdkafka_variable_without_a_property_name_is_rejected),
        cmocka_unit_test(rdkafka_variable_without_a_property_name_is_rejected_without_its_value),
        cmocka_unit_test(secret_librdkafka_properties_are_told_by_their_name),
        cmocka_unit_test(metrics_address_with_host_and_port_is_accepted),
        cmocka_unit_test(metrics_address_without_port_is_rejected),
        cmocka_unit_test(failed_load_leaves_nothing_to_free),
        cmocka_unit_test(settings_free_releases_everything_and_can_be_repeated),
        cmocka_unit_test(error_message_is_truncated_to_the_buffer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
