#include "core/pipeline.h"

#include <stdio.h>
#include <string.h>

#define INT16_RANGE INT16_MIN, INT16_MAX
#define INT32_NONNEG 0, INT32_MAX
#define INT64_NONNEG 0, INT64_MAX
#define LEN(n) 0, (n)
#define NONEMPTY_LEN(n) 1, (n)

/* VARCHAR(n) lengths are characters, as PostgreSQL counts them. */
static const field_spec_t app_stats_fields[] = {
    {"crawled_at", FIELD_TIMESTAMP, true, 0, 0, 0, 0},
    {"title", FIELD_STRING, false, LEN(255), 0, 0},
    {"score", FIELD_NUMBER, false, 0, 0, 0.0, 5.0},
    {"ratings_count", FIELD_INTEGER, false, INT64_NONNEG, 0, 0},
    {"reviews_count", FIELD_INTEGER, false, INT64_NONNEG, 0, 0},
    {"min_installs", FIELD_INTEGER, false, INT64_NONNEG, 0, 0},
    {"real_installs", FIELD_INTEGER, false, INT64_NONNEG, 0, 0},
    {"histogram", FIELD_HISTOGRAM, false, INT64_NONNEG, 0, 0},
    {"price", FIELD_PRICE, false, 0, 0, 0.0, 9999999999.99},
    {"is_free", FIELD_BOOLEAN, false, 0, 0, 0, 0},
    {"version", FIELD_STRING, false, LEN(64), 0, 0},
    {"app_updated_at", FIELD_TIMESTAMP, false, 0, 0, 0, 0},
};

static const field_spec_t reviews_fields[] = {
    {"review_id", FIELD_STRING, true, NONEMPTY_LEN(255), 0, 0},
    {"user_name", FIELD_STRING, false, LEN(255), 0, 0},
    {"content", FIELD_STRING, false, LEN(INT32_MAX), 0, 0},
    {"score", FIELD_INTEGER, true, 1, 5, 0, 0},
    {"thumbs_up_count", FIELD_INTEGER, true, INT32_NONNEG, 0, 0},
    {"app_version", FIELD_STRING, false, LEN(64), 0, 0},
    {"reviewed_at", FIELD_TIMESTAMP, true, 0, 0, 0, 0},
    {"reply_content", FIELD_STRING, false, LEN(INT32_MAX), 0, 0},
    {"replied_at", FIELD_TIMESTAMP, false, 0, 0, 0, 0},
    {"last_synced_at", FIELD_TIMESTAMP, true, 0, 0, 0, 0},
};

static const field_spec_t network_metrics_fields[] = {
    {"analysis_id", FIELD_UUID, true, 0, 0, 0, 0},
    {"analyzed_at", FIELD_TIMESTAMP, true, 0, 0, 0, 0},
    {"duration_seconds", FIELD_NUMBER, true, 0, 0, 0.0, 1.7976931348623157e308},
    {"total_packets", FIELD_INTEGER, true, INT64_NONNEG, 0, 0},
    {"total_bytes", FIELD_INTEGER, true, INT64_NONNEG, 0, 0},
    {"unique_hosts", FIELD_INTEGER, false, INT32_NONNEG, 0, 0},
    {"dns_queries", FIELD_INTEGER, false, INT32_NONNEG, 0, 0},
    {"tls_handshakes", FIELD_INTEGER, false, INT32_NONNEG, 0, 0},
    {"avg_packet_size", FIELD_NUMBER, false, 0, 0, 0.0, 1.7976931348623157e308},
    {"protocols", FIELD_COUNTS, false, INT64_NONNEG, 0, 0},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const pipeline_def_t pipelines[PIPELINE_COUNT] = {
    [PIPELINE_APP_STATS] =
        {
            .id = PIPELINE_APP_STATS,
            .name = "app-stats",
            .env_suffix = "APP_STATS",
            .default_topic = "app-stats",
            .default_batch_size = 200,
            .table = "app_stats",
            .fields = app_stats_fields,
            .field_count = COUNT(app_stats_fields),
            .key_field = "crawled_at",
            .key_includes_app = true,
            .version_field = NULL,
            /* Same app and same crawl instant is by definition a redelivery. */
            .conflict_sql = "ON CONFLICT (application_id, crawled_at) DO NOTHING",
        },
    [PIPELINE_REVIEWS] =
        {
            .id = PIPELINE_REVIEWS,
            .name = "reviews",
            .env_suffix = "REVIEWS",
            .default_topic = "reviews",
            .default_batch_size = 500,
            .table = "reviews",
            .fields = reviews_fields,
            .field_count = COUNT(reviews_fields),
            .key_field = "review_id",
            .key_includes_app = false,
            .version_field = "last_synced_at",
            /* The only table that really updates (thumbs_up_count changes).
             * The guard makes a replayed or late older observation a no-op;
             * first_seen_at and the sentiment columns are never touched. */
            .conflict_sql =
                "ON CONFLICT (review_id) DO UPDATE SET "
                "thumbs_up_count = EXCLUDED.thumbs_up_count, score = EXCLUDED.score, "
                "content = EXCLUDED.content, reply_content = EXCLUDED.reply_content, "
                "replied_at = EXCLUDED.replied_at, app_version = EXCLUDED.app_version, "
                "last_synced_at = EXCLUDED.last_synced_at "
                "WHERE EXCLUDED.last_synced_at > reviews.last_synced_at",
        },
    [PIPELINE_NETWORK_METRICS] =
        {
            .id = PIPELINE_NETWORK_METRICS,
            .name = "network-metrics",
            .env_suffix = "NETWORK_METRICS",
            .default_topic = "network-metrics",
            .default_batch_size = 50,
            .table = "network_metrics",
            .fields = network_metrics_fields,
            .field_count = COUNT(network_metrics_fields),
            .key_field = "analysis_id",
            .key_includes_app = false,
            .version_field = NULL,
            /* A capture is analysed once; a real re-run gets a new UUID. */
            .conflict_sql = "ON CONFLICT (analysis_id) DO NOTHING",
        },
};

const pipeline_def_t *pipeline_get(pipeline_id_t id) { return &pipelines[id]; }

const pipeline_def_t *pipeline_find(const char *name, size_t len)
{
    for (int i = 0; i < PIPELINE_COUNT; i++)
        if (strlen(pipelines[i].name) == len && memcmp(pipelines[i].name, name, len) == 0)
            return &pipelines[i];
    return NULL;
}

const char *pipeline_names(char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < PIPELINE_COUNT && used < len; i++) {
        int n = snprintf(buf + used, len - used, "%s%s", i ? ", " : "", pipelines[i].name);
        if (n < 0) break;
        used += (size_t)n;
    }
    return buf;
}

int pipeline_field_index(const pipeline_def_t *def, const char *name)
{
    if (!name) return -1;
    for (size_t i = 0; i < def->field_count; i++)
        if (strcmp(def->fields[i].name, name) == 0) return (int)i;
    return -1;
}

const char *pipeline_key_columns(const pipeline_def_t *def, const char *sep, char *buf, size_t len)
{
    snprintf(buf, len, "%s%s%s", def->key_includes_app ? "application_id" : "",
             def->key_includes_app ? sep : "", def->key_field);
    return buf;
}
