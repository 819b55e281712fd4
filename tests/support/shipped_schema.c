#include "shipped_schema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COL(n, t, k, nn, def) {n, t, k, -1, -1, -1, nn, def}
#define VARCHAR(n, len, nn) {n, "character varying(" #len ")", COLUMN_VARCHAR, len, -1, -1, nn, false}

static column_fact_t app_stats[] = {
    COL("id", "bigint", COLUMN_INT8, true, true),
    COL("application_id", "bigint", COLUMN_INT8, true, false),
    COL("crawled_at", "timestamp with time zone", COLUMN_TIMESTAMPTZ, true, false),
    VARCHAR("title", 255, false),
    COL("score", "double precision", COLUMN_FLOAT8, false, false),
    COL("ratings_count", "bigint", COLUMN_INT8, false, false),
    COL("reviews_count", "bigint", COLUMN_INT8, false, false),
    COL("min_installs", "bigint", COLUMN_INT8, false, false),
    COL("real_installs", "bigint", COLUMN_INT8, false, false),
    COL("histogram", "bigint[]", COLUMN_INT8_ARRAY, false, false),
    {"price", "numeric(12,2)", COLUMN_NUMERIC, -1, 12, 2, false, false},
    COL("is_free", "boolean", COLUMN_BOOL, false, false),
    VARCHAR("version", 64, false),
    COL("app_updated_at", "timestamp with time zone", COLUMN_TIMESTAMPTZ, false, false),
    COL("ingested_at", "timestamp with time zone", COLUMN_TIMESTAMPTZ, true, true),
};

static column_fact_t reviews[] = {
    COL("id", "bigint", COLUMN_INT8, true, true),
    COL("application_id", "bigint", COLUMN_INT8, true, false),
    VARCHAR("review_id", 255, true),
    VARCHAR("user_name", 255, false),
    COL("content", "text", COLUMN_TEXT, false, false),
    COL("score", "smallint", COLUMN_INT2, true, false),
    COL("thumbs_up_count", "integer", COLUMN_INT4, true, false),
    VARCHAR("app_version", 64, false),
    COL("reviewed_at", "timestamp with time zone", COLUMN_TIMESTAMPTZ, true, false),
    COL("reply_content", "text", COLUMN_TEXT, false, false),
    COL("replied_at", "timestamp with time zone", COLUMN_TIMESTAMPTZ, false, false),
    COL("first_seen_at", "timestamp with time zone", COLUMN_TIMESTAMPTZ, true, true),
    COL("last_synced_at", "timestamp with time zone", COLUMN_TIMESTAMPTZ, true, false),
    VARCHAR("sentiment", 16, false),
    COL("sentiment_score", "real", COLUMN_FLOAT4, false, false),
};

static column_fact_t network_metrics[] = {
    COL("id", "bigint", COLUMN_INT8, true, true),
    COL("application_id", "bigint", COLUMN_INT8, true, false),
    COL("analysis_id", "uuid", COLUMN_UUID, true, false),
    COL("analyzed_at", "timestamp with time zone", COLUMN_TIMESTAMPTZ, true, false),
    COL("duration_seconds", "double precision", COLUMN_FLOAT8, true, false),
    COL("total_packets", "bigint", COLUMN_INT8, true, false),
    COL("total_bytes", "bigint", COLUMN_INT8, true, false),
    COL("unique_hosts", "integer", COLUMN_INT4, false, false),
    COL("dns_queries", "integer", COLUMN_INT4, false, false),
    COL("tls_handshakes", "integer", COLUMN_INT4, false, false),
    COL("avg_packet_size", "double precision", COLUMN_FLOAT8, false, false),
    COL("protocols", "jsonb", COLUMN_JSONB, false, false),
    COL("ingested_at", "timestamp with time zone", COLUMN_TIMESTAMPTZ, true, true),
};

static char *app_stats_keys[] = {"id", "application_id,crawled_at"};
static char *reviews_keys[] = {"id", "review_id"};
static char *network_metrics_keys[] = {"id", "analysis_id"};

#define N(a) (sizeof(a) / sizeof((a)[0]))

table_facts_t shipped_schema_table(const char *name)
{
    if (strcmp(name, "app_stats") == 0)
        return (table_facts_t){true, app_stats, N(app_stats), app_stats_keys, N(app_stats_keys)};
    if (strcmp(name, "reviews") == 0)
        return (table_facts_t){true, reviews, N(reviews), reviews_keys, N(reviews_keys)};
    if (strcmp(name, "network_metrics") == 0)
        return (table_facts_t){true, network_metrics, N(network_metrics), network_metrics_keys,
                               N(network_metrics_keys)};
    return (table_facts_t){0};
}

void shipped_schema_bind(void)
{
    char err[1024];
    if (pipelines_load(NULL, err, sizeof err)) {
        fprintf(stderr, "shipped_schema_bind: %s\n", err);
        abort();
    }
    for (int i = 0; i < pipeline_count(); i++) {
        table_facts_t t = shipped_schema_table(pipeline_get(i)->table);
        if (pipeline_bind(i, &t, err, sizeof err)) {
            fprintf(stderr, "shipped_schema_bind: %s\n", err);
            abort();
        }
    }
}
