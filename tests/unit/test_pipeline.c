/* Unit tests of core/pipeline: definitions read from a file, checks derived
 * from the table's columns, and a definition that disagrees with its table
 * refused with a message naming the pipeline, the field and the column
 * (DESIGN.md: Pipelines are declared). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "shipped_schema.h"
#include "core/batch.h"
#include "core/decode.h"

static const char review_head[] = "{\"package_name\":\"com.example.a\",\"review_id\":\"r1\",\"score\":4,"
                                   "\"thumbs_up_count\":1,\"reviewed_at\":\"2026-11-01T00:00:00Z\","
                                   "\"last_synced_at\":\"2026-11-29T10:00:00Z\"";

/* A review whose member `name` holds a string of `chars` x's. */
static char *review_with(const char *name, size_t chars)
{
    size_t len = sizeof review_head + strlen(name) + chars + 16;
    char *json = malloc(len);
    assert_non_null(json);
    int n = snprintf(json, len, "%s,\"%s\":\"", review_head, name);
    memset(json + n, 'x', chars);
    snprintf(json + n + chars, len - (size_t)n - chars, "\"}");
    return json;
}

/* Decode a review; returns the rejection's detail ("" when accepted). */
static const char *decode_review(char *json)
{
    static rejection_t rej;
    event_t ev = {0};
    int rc = decode_record(pipeline_get(PIPELINE_REVIEWS), json, strlen(json), &ev, &rej);
    event_free(&ev);
    free(json);
    return rc == 0 ? "" : rej.detail;
}

/* The shipped reviews table with column `name` changed to `type`. */
static int bind_reviews_with(const char *name, column_fact_t changed, char *err, size_t errlen)
{
    table_facts_t t = shipped_schema_table("reviews");
    column_fact_t cols[32];
    memcpy(cols, t.columns, t.column_count * sizeof *cols);
    for (size_t i = 0; i < t.column_count; i++)
        if (strcmp(cols[i].name, name) == 0) cols[i] = changed;
    t.columns = cols;
    return pipeline_bind(PIPELINE_REVIEWS, &t, err, errlen);
}

static column_fact_t varchar(const char *name, int n, bool not_null)
{
    column_fact_t c = {.kind = COLUMN_VARCHAR, .length = n, .not_null = not_null, .precision = -1, .scale = -1};
    snprintf(c.name, sizeof c.name, "%s", name);
    snprintf(c.type, sizeof c.type, "character varying(%d)", n);
    return c;
}

static column_fact_t typed(const char *name, column_type_t kind, const char *type, bool not_null)
{
    column_fact_t c = {.kind = kind, .length = -1, .not_null = not_null, .precision = -1, .scale = -1};
    snprintf(c.name, sizeof c.name, "%s", name);
    snprintf(c.type, sizeof c.type, "%s", type);
    return c;
}

static int rebind(void **state)
{
    (void)state;
    shipped_schema_bind();
    return 0;
}

static void a_widened_column_stores_what_the_old_limit_refused(void **state)
{
    (void)state;
    char err[512];
    assert_string_equal(decode_review(review_with("user_name", 300)),
                        "user_name: 300 characters, longer than the column's 255");
    assert_int_equal(0, bind_reviews_with("user_name", varchar("user_name", 400, false), err, sizeof err));
    assert_string_equal(decode_review(review_with("user_name", 300)), "");
    assert_string_equal(decode_review(review_with("user_name", 400)), "");
    assert_string_equal(decode_review(review_with("user_name", 401)),
                        "user_name: 401 characters, longer than the column's 400");
}

static void a_narrowed_column_is_refused_at_decoding_naming_the_field(void **state)
{
    (void)state;
    char err[512];
    assert_string_equal(decode_review(review_with("app_version", 20)), "");
    assert_int_equal(0, bind_reviews_with("app_version", varchar("app_version", 16, false), err, sizeof err));
    assert_string_equal(decode_review(review_with("app_version", 20)),
                        "app_version: 20 characters, longer than the column's 16");
    assert_string_equal(decode_review(review_with("app_version", 16)), "");
}

static void a_column_of_text_takes_any_length(void **state)
{
    (void)state;
    char err[512];
    assert_int_equal(0, bind_reviews_with("user_name", typed("user_name", COLUMN_TEXT, "text", false), err, sizeof err));
    assert_string_equal(decode_review(review_with("user_name", 5000)), "");
}

static void integer_ranges_are_the_column_types_narrowed_by_the_definition(void **state)
{
    (void)state;
    char err[512];
    const pipeline_def_t *def = pipeline_get(PIPELINE_REVIEWS);
    const field_spec_t *thumbs = &def->fields[pipeline_field_index(def, "thumbs_up_count")];
    const field_spec_t *score = &def->fields[pipeline_field_index(def, "score")];
    assert_int_equal(thumbs->min, 0);
    assert_int_equal(thumbs->max, INT32_MAX);
    assert_int_equal(score->min, 1); /* the definition's 1..5 within smallint */
    assert_int_equal(score->max, 5);
    assert_int_equal(0, bind_reviews_with("thumbs_up_count", typed("thumbs_up_count", COLUMN_INT8, "bigint", true),
                                          err, sizeof err));
    thumbs = &def->fields[pipeline_field_index(def, "thumbs_up_count")];
    assert_int_equal(thumbs->max, INT64_MAX);
    assert_int_equal(0, bind_reviews_with("thumbs_up_count", typed("thumbs_up_count", COLUMN_INT2, "smallint", true),
                                          err, sizeof err));
    assert_int_equal(def->fields[pipeline_field_index(def, "thumbs_up_count")].max, INT16_MAX);
}

static void a_numeric_column_sets_the_precision_and_the_decimals(void **state)
{
    (void)state;
    const pipeline_def_t *def = pipeline_get(PIPELINE_APP_STATS);
    const field_spec_t *price = &def->fields[pipeline_field_index(def, "price")];
    assert_int_equal(price->kind, FIELD_DECIMAL);
    assert_int_equal(price->precision, 12);
    assert_int_equal(price->scale, 2);
    assert_true(price->declared.min_set && price->declared.min == 0.0);
}

/* Each kind of disagreement, and the words start-up says for it. */
static void expect_mismatch(const char *name, column_fact_t changed, const char *expected)
{
    char err[512];
    assert_int_equal(-1, bind_reviews_with(name, changed, err, sizeof err));
    if (!strstr(err, expected)) fail_msg("\"%s\" does not say \"%s\"", err, expected);
    assert_false(pipeline_get(PIPELINE_REVIEWS)->bound);
}

static void a_definition_that_disagrees_with_its_table_is_refused_naming_field_and_column(void **state)
{
    (void)state;
    expect_mismatch("user_name", typed("user_name_old", COLUMN_TEXT, "text", false),
                    "pipeline reviews, field user_name, column reviews.user_name: no such column");
    expect_mismatch("user_name", varchar("user_name", 255, true),
                    "pipeline reviews, field user_name, column reviews.user_name: the column is NOT NULL and the "
                    "field optional");
    expect_mismatch("user_name", typed("user_name", COLUMN_OTHER, "inet", false),
                    "field user_name, column reviews.user_name: the decoder cannot check a column of type inet");

    expect_mismatch("score", typed("score", COLUMN_TEXT, "text", true),
                    "field score, column reviews.score: min and max bound numbers, and the column is text");
    expect_mismatch("last_synced_at", varchar("last_synced_at", 64, true),
                    "field last_synced_at, column reviews.last_synced_at: a version must be a timestamptz or an "
                    "integer column, not character varying(64)");
    expect_mismatch("sentiment", varchar("sentiment", 16, true),
                    "pipeline reviews, column reviews.sentiment: NOT NULL without a default, and no field fills it");
    expect_mismatch("application_id", typed("application_id", COLUMN_TEXT, "text", true),
                    "column reviews.application_id: the application's id needs an integer column, not text");
}

/* Two values PostgreSQL holds equal must reach the batch as one text: a
 * number goes as sent ("1.0", "1"), a judged type as given. */
static void a_natural_key_on_a_column_whose_text_has_many_forms_is_refused(void **state)
{
    (void)state;
    static const column_fact_t many_forms[] = {
        {"analysis_id", "numeric", COLUMN_NUMERIC, -1, -1, -1, true, false},
        {"analysis_id", "double precision", COLUMN_FLOAT8, -1, -1, -1, true, false},
        {"analysis_id", "date", COLUMN_TEXT_INPUT, -1, -1, -1, true, false},
        {"analysis_id", "jsonb", COLUMN_JSONB, -1, -1, -1, true, false},
    };
    for (size_t k = 0; k < sizeof many_forms / sizeof many_forms[0]; k++) {
        table_facts_t t = shipped_schema_table("network_metrics");
        column_fact_t cols[32];
        char err[512];
        memcpy(cols, t.columns, t.column_count * sizeof *cols);
        for (size_t i = 0; i < t.column_count; i++)
            if (strcmp(cols[i].name, "analysis_id") == 0) cols[i] = many_forms[k];
        t.columns = cols;
        assert_int_equal(-1, pipeline_bind(PIPELINE_NETWORK_METRICS, &t, err, sizeof err));
        if (!strstr(err, "field analysis_id, column network_metrics.analysis_id: a natural key needs a column the "
                         "decoder writes in one form"))
            fail_msg("%s", err);
    }
}

static void a_natural_key_without_a_unique_constraint_is_refused(void **state)
{
    (void)state;
    char err[512];
    table_facts_t t = shipped_schema_table("reviews");
    char *keys[] = {"id", "review_id,application_id"};
    t.unique_keys = keys;
    t.unique_count = 2;
    assert_int_equal(-1, pipeline_bind(PIPELINE_REVIEWS, &t, err, sizeof err));
    assert_string_equal(err, "pipeline reviews, column reviews.review_id: the natural key (review_id) has no UNIQUE "
                             "constraint (ON CONFLICT needs one)");
    t = (table_facts_t){0};
    assert_int_equal(-1, pipeline_bind(PIPELINE_REVIEWS, &t, err, sizeof err));
    assert_non_null(strstr(err, "pipeline reviews: table reviews does not exist"));
}

/* Write `text` to a file of its own; returns its path (the caller frees). */
static char *write_file(const char *text)
{
    char *path = strdup("/tmp/storage-consumer-pipelines-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal((ssize_t)strlen(text), write(fd, text, strlen(text)));
    close(fd);
    return path;
}

static void expect_load_error(const char *text, const char *expected)
{
    char err[1024], *path = write_file(text);
    int rc = pipelines_load(path, err, sizeof err);
    unlink(path);
    free(path);
    if (rc != -1) fail_msg("loaded, expected \"%s\"", expected);
    if (!strstr(err, expected)) fail_msg("\"%s\" does not say \"%s\"", err, expected);
}

/* Load the definitions `text`, which must load. */
static void load_definitions(const char *text)
{
    char err[1024], *path = write_file(text);
    int rc = pipelines_load(path, err, sizeof err);
    unlink(path);
    free(path);
    if (rc) fail_msg("%s", err);
}

#define ONE(body)                                                                                  \
    "{\"pipelines\": [{\"name\": \"app-permissions\", \"table\": \"app_permissions\",\n"            \
    " \"application\": {\"member\": \"package_name\", \"column\": \"application_id\"},\n" body "}]}"
#define FIELDS "\"fields\": [{\"member\": \"permission\", \"required\": true}, {\"member\": \"seen_at\", \"required\": true}]"

static void a_malformed_file_is_refused_with_its_line_or_member(void **state)
{
    (void)state;
    expect_load_error("{\"pipelines\": [\n  {\"name\": \"x\",\n   \"table\" \"t\"}]}", ":3:");
    expect_load_error(ONE(FIELDS ", \"key\": [\"permission\"], \"on_conflict\": \"nothing\", \"batchsize\": 5"),
                      "pipelines[0] (app-permissions).batchsize: unknown member");
    expect_load_error(ONE("\"fields\": [{\"member\": \"permission\", \"kind\": \"enum\"}], \"key\": [\"permission\"], "
                          "\"on_conflict\": \"nothing\""),
                      "pipelines[0] (app-permissions).fields[0] (permission).kind: expected \"histogram\"");
    expect_load_error(ONE(FIELDS ", \"key\": [\"nope\"], \"on_conflict\": \"nothing\""),
                      "key: nope is neither the application's column nor a field's");
    expect_load_error(ONE(FIELDS ", \"key\": [\"permission\"], \"on_conflict\": {\"update\": [\"seen_at\"]}"),
                      "on_conflict.when_newer: required");
    expect_load_error(ONE(FIELDS ", \"key\": [\"permission\"]"), "on_conflict: required");
    expect_load_error(ONE(FIELDS ", \"key\": [\"permission\"], \"on_conflict\": {\"update\": [\"permission\"], "
                                 "\"when_newer\": \"seen_at\"}"),
                      "on_conflict.update: permission is the natural key");
    /* A topic Kafka would refuse is the file's, named by its member, not a
     * STORAGE_TOPIC_ variable nobody set. */
    expect_load_error(ONE("\"topic\": \"bad topic\", " FIELDS ", \"key\": [\"permission\"], \"on_conflict\": \"nothing\""),
                      "pipelines[0] (app-permissions).topic: \"bad topic\" is not a valid Kafka topic name");
}

/* "topic" takes a list: many topics into one table. */
static void a_definition_reads_a_list_of_topics(void **state)
{
    (void)state;
    char err[1024], *path = write_file(ONE("\"topic\": [\"perm-eu\", \"perm-us\"], " FIELDS
                                           ", \"key\": [\"permission\"], \"on_conflict\": \"nothing\""));
    int rc = pipelines_load(path, err, sizeof err);
    unlink(path);
    free(path);
    if (rc) fail_msg("%s", err);
    assert_string_equal(pipeline_get(0)->default_topic, "perm-eu,perm-us");
    expect_load_error(ONE("\"topic\": [], " FIELDS ", \"key\": [\"permission\"], \"on_conflict\": \"nothing\""),
                      "topic: expected a topic name or a non-empty list of topic names");
    expect_load_error(ONE("\"topic\": [\"a\", 7], " FIELDS ", \"key\": [\"permission\"], \"on_conflict\": \"nothing\""),
                      "topic: expected a topic name or a non-empty list of topic names");
    expect_load_error(ONE("\"topic\": [\"a\", \"a\"], " FIELDS ", \"key\": [\"permission\"], \"on_conflict\": \"nothing\""),
                      "topic: \"a\" is named twice");
    expect_load_error(ONE("\"topic\": [\"a\", \"b,c\"], " FIELDS ", \"key\": [\"permission\"], \"on_conflict\": \"nothing\""),
                      "is not a valid Kafka topic name");
    expect_load_error("{\"pipelines\": [{\"name\": \"one\", \"table\": \"t1\", \"topic\": [\"x\", \"shared\"],\n"
                      " \"application\": {\"member\": \"package_name\", \"column\": \"application_id\"},\n" FIELDS
                      ", \"key\": [\"permission\"], \"on_conflict\": \"nothing\"},\n"
                      "{\"name\": \"two\", \"table\": \"t2\", \"topic\": \"shared\",\n"
                      " \"application\": {\"member\": \"package_name\", \"column\": \"application_id\"},\n" FIELDS
                      ", \"key\": [\"permission\"], \"on_conflict\": \"nothing\"}]}",
                      "pipelines[1] (two).topic: shared is a topic of pipeline one too");
}

/* never_writes is optional, and [] says the same as leaving it out. */
static void an_empty_never_writes_says_none(void **state)
{
    (void)state;
    char err[1024];
    char *path = write_file(ONE(FIELDS ", \"key\": [\"permission\"], \"on_conflict\": \"nothing\", \"never_writes\": []"));
    int rc = pipelines_load(path, err, sizeof err);
    unlink(path);
    free(path);
    if (rc != 0) fail_msg("refused: %s", err);
    assert_int_equal(0, pipeline_get(0)->never_count);
}

/* A declared bound beyond the column type's range is refused at start
 * (converting 1e19 to a 64-bit integer is undefined: the bound vanished). */
static void a_bound_beyond_the_column_types_range_is_refused(void **state)
{
    (void)state;
    char err[1024];
    char *path = write_file(ONE("\"fields\": [{\"member\": \"permission\", \"required\": true}, "
                                "{\"member\": \"count\", \"min\": 1e19}], \"key\": [\"permission\"], "
                                "\"on_conflict\": \"nothing\""));
    assert_int_equal(0, pipelines_load(path, err, sizeof err));
    unlink(path);
    free(path);
    column_fact_t cols[] = {
        typed("application_id", COLUMN_INT8, "bigint", true),
        varchar("permission", 255, true),
        typed("count", COLUMN_INT8, "bigint", false),
    };
    char *keys[] = {"permission"};
    table_facts_t t = {true, cols, 3, keys, 1};
    assert_int_equal(-1, pipeline_bind(0, &t, err, sizeof err));
    assert_string_equal(err, "pipeline app-permissions, field count, column app_permissions.count: min 1e+19 is "
                             "beyond the range of bigint");
    cols[2].kind = COLUMN_INT4;
    snprintf(cols[2].type, sizeof cols[2].type, "integer");
    assert_int_equal(-1, pipeline_bind(0, &t, err, sizeof err));
    assert_non_null(strstr(err, "min 1e+19 is beyond the range of integer"));
}

static void a_declared_pipeline_builds_its_conflict_rule_and_key_probe(void **state)
{
    (void)state;
    char err[1024];
    char *path = write_file(ONE("\"fields\": [{\"member\": \"permission\", \"required\": true},\n"
                                " {\"member\": \"level\", \"column\": \"protection_level\"},\n"
                                " {\"member\": \"seen_at\", \"required\": true}],\n"
                                " \"key\": [\"application_id\", \"permission\"],\n"
                                " \"on_conflict\": {\"update\": [\"protection_level\", \"seen_at\"], \"when_newer\": \"seen_at\"},\n"
                                " \"never_writes\": [\"first_seen_at\"]"));
    assert_int_equal(0, pipelines_load(path, err, sizeof err));
    unlink(path);
    free(path);
    assert_int_equal(1, pipeline_count());
    const pipeline_def_t *def = pipeline_get(0);
    assert_string_equal(def->env_suffix, "APP_PERMISSIONS");
    assert_string_equal(def->default_topic, "app-permissions");
    assert_string_equal(def->fields[1].column, "protection_level");
    column_fact_t cols[] = {
        typed("id", COLUMN_INT8, "bigint", true),
        typed("application_id", COLUMN_INT8, "bigint", true),
        varchar("permission", 255, true),
        varchar("protection_level", 32, false),
        typed("seen_at", COLUMN_TIMESTAMPTZ, "timestamp with time zone", true),
        typed("first_seen_at", COLUMN_TIMESTAMPTZ, "timestamp with time zone", true),
    };
    cols[0].has_default = cols[5].has_default = true;
    char *keys[] = {"permission,application_id"};
    table_facts_t t = {true, cols, 6, keys, 1};
    assert_int_equal(0, pipeline_bind(0, &t, err, sizeof err));
    assert_string_equal(def->table_sql, "\"app_permissions\"");
    assert_string_equal(def->columns_sql, "\"application_id\", \"permission\", \"protection_level\", \"seen_at\"");
    assert_string_equal(def->key_sql, "\"application_id\", \"permission\"");
    assert_string_equal(def->conflict_sql, "ON CONFLICT (\"application_id\", \"permission\") DO UPDATE SET "
                                           "\"protection_level\" = EXCLUDED.\"protection_level\", "
                                           "\"seen_at\" = EXCLUDED.\"seen_at\" WHERE t.\"seen_at\" IS NULL OR "
                                           "EXCLUDED.\"seen_at\" > t.\"seen_at\"");
    /* Each array cast to its column's type, so the join takes the UNIQUE index. */
    assert_string_equal(def->probe_sql,
                        "SELECT s.i FROM unnest($1::bigint[], $2::character varying(255)[], "
                        "$3::timestamp with time zone[]) WITH ORDINALITY AS s(c0, c1, c2, i) "
                        "JOIN \"app_permissions\" t ON t.\"application_id\" = s.c0 AND t.\"permission\" = s.c1 "
                        "WHERE t.\"seen_at\" >= s.c2");
    const char *json = "{\"package_name\":\"com.example.a\",\"permission\":\"CAMERA\",\"level\":\"dangerous\","
                       "\"seen_at\":\"2026-11-29T10:00:00Z\"}";
    event_t ev = {0};
    rejection_t rej;
    assert_int_equal(0, decode_record(def, json, strlen(json), &ev, &rej));
    assert_string_equal(event_column(&ev, 1), "dangerous");
    event_free(&ev);
}

/* A topic that has nothing to do with applications: no "application", so
 * no column but the fields' is written, no member but theirs is read
 * (not even one named "", which a document may hold), and a record without
 * a package name is no dead letter. */
static void a_pipeline_without_an_application_writes_its_fields_alone(void **state)
{
    (void)state;
    char err[1024];
    load_definitions("{\"pipelines\": [{\"name\": \"orders\", \"table\": \"orders\",\n"
                     " \"fields\": [{\"member\": \"order_id\", \"required\": true}, {\"member\": \"total\"}],\n"
                     " \"key\": [\"order_id\"], \"on_conflict\": \"nothing\"}]}");
    const pipeline_def_t *def = pipeline_get(0);
    assert_null(def->app_member);
    assert_null(def->app_column);
    column_fact_t cols[] = {typed("order_id", COLUMN_INT8, "bigint", true), typed("total", COLUMN_INT4, "integer", false)};
    char *keys[] = {"order_id"};
    table_facts_t t = {true, cols, 2, keys, 1};
    assert_int_equal(0, pipeline_bind(0, &t, err, sizeof err));
    assert_string_equal(def->columns_sql, "\"order_id\", \"total\"");
    assert_string_equal(def->select_sql, "\"order_id\", \"total\"");
    assert_string_equal(def->key_sql, "\"order_id\"");
    const char *docs[] = {"{\"order_id\": 7, \"total\": 3}", "{\"\": \"x\", \"order_id\": 7, \"total\": 3}",
                          "{\"order_id\": 7, \"\": null, \"total\": 3, \"pad\": \"\\u0000\"}"};
    for (size_t i = 0; i < sizeof docs / sizeof *docs; i++) {
        event_t ev = {0};
        rejection_t rej;
        if (decode_record(def, docs[i], strlen(docs[i]), &ev, &rej)) fail_msg("%s: %s", docs[i], rej.detail);
        assert_string_equal(event_column(&ev, 0), "7");
        assert_string_equal(event_column(&ev, 1), "3");
        assert_string_equal(event_package_name(&ev), "");
        event_free(&ev);
        if (decode_record_reference(def, docs[i], strlen(docs[i]), &ev, &rej)) fail_msg("%s: %s", docs[i], rej.detail);
        assert_string_equal(event_column(&ev, 0), "7");
        event_free(&ev);
    }
    expect_load_error("{\"pipelines\": [{\"name\": \"orders\", \"table\": \"orders\", " FIELDS
                      ", \"key\": [\"nope\"], \"on_conflict\": \"nothing\"}]}",
                      "key: nope is not a field's column");
    expect_load_error("{\"pipelines\": [{\"name\": \"orders\", \"table\": \"orders\", \"application\": \"x\", " FIELDS
                      ", \"key\": [\"permission\"], \"on_conflict\": \"nothing\"}]}",
                      "application: expected {\"member\": \"package_name\", \"column\": \"application_id\"}");
}

/* DESIGN.md: Lookups. "application" is the lookup through the App API's
 * registry; "lookup" names any table's UNIQUE text column and integer one. */
static void a_lookup_names_any_tables_unique_column_and_application_is_one(void **state)
{
    (void)state;
    char err[1024];
    load_definitions("{\"pipelines\": [{\"name\": \"payments\", \"table\": \"payments\",\n"
                     " \"lookup\": {\"member\": \"email\", \"table\": \"crm.Customers\", \"match\": \"email\","
                     " \"take\": \"id\", \"column\": \"customer_id\"},\n"
                     " \"fields\": [{\"member\": \"payment_id\", \"required\": true}],\n"
                     " \"key\": [\"payment_id\"], \"on_conflict\": \"nothing\"}]}");
    const pipeline_def_t *def = pipeline_get(0);
    assert_string_equal(def->lookup_sql, "SELECT \"email\"::text, \"id\" FROM \"crm\".\"Customers\" WHERE \"email\" = "
                                         "ANY($1::text[])");
    column_fact_t cols[] = {varchar("email", 64, true), typed("id", COLUMN_INT8, "bigint", true)};
    char *unique[] = {"email"};
    table_facts_t t = {true, cols, 2, unique, 1};
    assert_int_equal(0, pipeline_bind_lookup(0, &t, err, sizeof err));
    assert_int_equal(def->lookup_max_length, 64);
    t.unique_count = 0;
    assert_int_equal(-1, pipeline_bind_lookup(0, &t, err, sizeof err));
    assert_string_equal(err, "pipeline payments: the lookup's match column crm.Customers.email has no UNIQUE constraint "
                             "of its own (a value must name one row)");
    t.unique_count = 1;
    cols[1] = typed("id", COLUMN_TEXT, "text", true);
    assert_int_equal(-1, pipeline_bind_lookup(0, &t, err, sizeof err));
    assert_string_equal(err, "pipeline payments: the lookup's take column crm.Customers.id: needs an integer column");
    t.exists = false;
    assert_int_equal(-1, pipeline_bind_lookup(0, &t, err, sizeof err));
    assert_string_equal(err, "pipeline payments: the lookup's table crm.Customers does not exist");

    load_definitions(ONE(FIELDS ", \"key\": [\"permission\"], \"on_conflict\": \"nothing\""));
    assert_string_equal(pipeline_get(0)->lookup_sql,
                        "SELECT \"package_name\"::text, \"id\" FROM \"apps_registry_application\" WHERE "
                        "\"package_name\" = ANY($1::text[])");
    expect_load_error("{\"pipelines\": [{\"name\": \"o\", \"table\": \"o\", "
                      "\"application\": {\"member\": \"package_name\", \"column\": \"application_id\"}, "
                      "\"lookup\": {\"member\": \"e\", \"table\": \"c\", \"match\": \"e\", \"take\": \"id\", \"column\": \"c_id\"}, "
                      FIELDS ", \"key\": [\"permission\"], \"on_conflict\": \"nothing\"}]}",
                      "a pipeline has an \"application\" or a \"lookup\", not both");
}

/* Decode `json` with both readers into one outcome: 0 and the event in
 * *ev (the caller frees it), or -1 and the rejection's "type|detail" in
 * why[len]. */
static int decode_both(const pipeline_def_t *def, const char *json, event_t *ev, char *why, size_t len)
{
    event_t ref = {0};
    rejection_t rej, rej_ref;
    int rc = decode_record(def, json, strlen(json), ev, &rej);
    int rc_ref = decode_record_reference(def, json, strlen(json), &ref, &rej_ref);
    if (rc != rc_ref) fail_msg("%s: the readers disagree (%d, %d)", json, rc, rc_ref);
    if (rc == 0 && !event_equal(def, ev, &ref)) fail_msg("%s: the readers' events differ", json);
    if (rc != 0 && strcmp(rej.detail, rej_ref.detail) != 0)
        fail_msg("%s: the readers' details differ: [%s] [%s]", json, rej.detail, rej_ref.detail);
    if (rc != 0) snprintf(why, len, "%s|%s", rej.error_type, rej.detail);
    event_free(&ref);
    return rc;
}

/* DESIGN.md: Member paths. A JSON Pointer reaches nested objects and array
 * elements; an object or array goes into jsonb as sent, "" is the whole
 * value; a path through an absent or null parent is absent, through a
 * scalar the record's error; "~1" is a "/" in a key. */
static void a_member_path_reaches_nested_members_and_the_whole_value(void **state)
{
    (void)state;
    char err[1024], why[600];
    load_definitions(
        "{\"pipelines\": [{\"name\": \"orders\", \"table\": \"orders\",\n"
        " \"fields\": [{\"member\": \"order_id\", \"required\": true},\n"
        "  {\"path\": \"/customer/email\", \"column\": \"customer_email\"},\n"
        "  {\"path\": \"/customer/id\", \"column\": \"customer_id\", \"required\": true},\n"
        "  {\"path\": \"/customer/score\"},\n"
        "  {\"path\": \"/lines\"},\n"
        "  {\"path\": \"/lines/0/sku\", \"column\": \"first_sku\"},\n"
        "  {\"path\": \"/a~1b\", \"column\": \"slash\"},\n"
        "  {\"path\": \"\", \"column\": \"doc\"}],\n"
        " \"key\": [\"order_id\"], \"on_conflict\": \"nothing\"}]}");
    const pipeline_def_t *def = pipeline_get(0);
    /* customer is read once for the three fields below it. */
    assert_int_equal(def->member_count, 5);
    column_fact_t cols[] = {typed("order_id", COLUMN_INT8, "bigint", true),
                            typed("customer_email", COLUMN_TEXT, "text", false),
                            typed("customer_id", COLUMN_INT8, "bigint", false),
                            typed("score", COLUMN_NUMERIC, "numeric", false),
                            typed("lines", COLUMN_JSONB, "jsonb", false),
                            typed("first_sku", COLUMN_TEXT, "text", false),
                            typed("slash", COLUMN_TEXT, "text", false),
                            typed("doc", COLUMN_JSONB, "jsonb", false)};
    char *keys[] = {"order_id"};
    table_facts_t t = {true, cols, 8, keys, 1};
    assert_int_equal(0, pipeline_bind(0, &t, err, sizeof err));

    const char *full = " {\"order_id\": 7, \"customer\": {\"id\": 5, \"email\": \"a@b.example\", \"score\": 12.50},"
                       " \"lines\": [{\"sku\": \"X1\", \"qty\": 2}, {\"sku\": \"Y\"}], \"a/b\": \"slash\"}\n";
    event_t ev = {0};
    if (decode_both(def, full, &ev, why, sizeof why)) fail_msg("%s", why);
    assert_string_equal(event_column(&ev, 1), "a@b.example");
    assert_string_equal(event_column(&ev, 2), "5");
    assert_string_equal(event_column(&ev, 3), "12.50"); /* every digit as sent */
    assert_string_equal(event_column(&ev, 4), "[{\"sku\": \"X1\", \"qty\": 2}, {\"sku\": \"Y\"}]");
    assert_string_equal(event_column(&ev, 5), "X1");
    assert_string_equal(event_column(&ev, 6), "slash");
    assert_string_equal(event_column(&ev, 7), "{\"order_id\": 7, \"customer\": {\"id\": 5, \"email\": \"a@b.example\", "
                                              "\"score\": 12.50}, \"lines\": [{\"sku\": \"X1\", \"qty\": 2}, "
                                              "{\"sku\": \"Y\"}], \"a/b\": \"slash\"}");
    event_free(&ev);

    /* Absent and null parents: the optional fields are NULL. */
    const char *thin = "{\"order_id\": 8, \"customer\": {\"id\": 6, \"email\": null}, \"lines\": []}";
    if (decode_both(def, thin, &ev, why, sizeof why)) fail_msg("%s", why);
    assert_null(event_column(&ev, 1));
    assert_null(event_column(&ev, 3));
    assert_string_equal(event_column(&ev, 4), "[]");
    assert_null(event_column(&ev, 5));
    event_free(&ev);

    assert_int_equal(-1, decode_both(def, "{\"order_id\": 9, \"customer\": null}", &ev, why, sizeof why));
    assert_string_equal(why, "missing_field|/customer/id: required field is missing");
    assert_int_equal(-1, decode_both(def, "{\"order_id\": 9, \"customer\": 5}", &ev, why, sizeof why));
    assert_string_equal(why, "invalid_field|/customer/email: expected an object or an array on the way, got an integer");
    assert_int_equal(-1, decode_both(def, "{\"order_id\": 9, \"customer\": {\"id\": \"x\"}}", &ev, why, sizeof why));
    assert_string_equal(why, "invalid_field|/customer/id: expected an integer, got a string");
    assert_int_equal(-1, decode_both(def, "{\"order_id\": 9, \"customer\": {\"id\": 1}, \"lines\": {\"0\": {\"sku\": 1}}}",
                                     &ev, why, sizeof why));
    assert_string_equal(why, "invalid_field|/lines/0/sku: expected a string, got an integer");
    event_free(&ev);

    expect_load_error("{\"pipelines\": [{\"name\": \"o\", \"table\": \"o\", \"fields\": [{\"path\": \"a/b\"}],"
                      " \"key\": [\"b\"], \"on_conflict\": \"nothing\"}]}",
                      "path: \"a/b\" is not a JSON Pointer");
    expect_load_error("{\"pipelines\": [{\"name\": \"o\", \"table\": \"o\", \"fields\": [{\"path\": \"/a~2\"}],"
                      " \"key\": [\"a\"], \"on_conflict\": \"nothing\"}]}",
                      "\"~\" stands for itself as \"~0\"");
    expect_load_error("{\"pipelines\": [{\"name\": \"o\", \"table\": \"o\", \"fields\": [{\"path\": \"\"}],"
                      " \"key\": [\"a\"], \"on_conflict\": \"nothing\"}]}",
                      "column: required for the whole value");
    expect_load_error("{\"pipelines\": [{\"name\": \"o\", \"table\": \"o\", \"fields\": [{\"path\": \"/a\", \"member\": \"a\"}],"
                      " \"key\": [\"a\"], \"on_conflict\": \"nothing\"}]}",
                      "a field has a \"member\" or a \"path\", not both");
}

/* One Connect envelope of `payload` under a schema of the fields below
 * (as JsonConverter writes it with schemas on), into buf[len]. */
static const char *connect_record(char *buf, size_t len, const char *payload)
{
    snprintf(buf, len,
             "{\"schema\": {\"type\": \"struct\", \"optional\": false, \"name\": \"orders\", \"fields\": ["
             "{\"type\": \"int64\", \"optional\": false, \"field\": \"id\"},"
             "{\"type\": \"bytes\", \"optional\": true, \"name\": \"org.apache.kafka.connect.data.Decimal\","
             " \"version\": 1, \"parameters\": {\"scale\": \"9\", \"connect.decimal.precision\": \"38\"}, \"field\": \"amount\"},"
             "{\"type\": \"int32\", \"optional\": true, \"name\": \"org.apache.kafka.connect.data.Date\", \"version\": 1, \"field\": \"day\"},"
             "{\"type\": \"int32\", \"optional\": true, \"name\": \"org.apache.kafka.connect.data.Time\", \"version\": 1, \"field\": \"at\"},"
             "{\"type\": \"int64\", \"optional\": true, \"name\": \"org.apache.kafka.connect.data.Timestamp\", \"version\": 1, \"field\": \"ts\"},"
             "{\"type\": \"struct\", \"optional\": true, \"field\": \"customer\", \"fields\": ["
             "{\"type\": \"bytes\", \"optional\": true, \"name\": \"org.apache.kafka.connect.data.Decimal\","
             " \"parameters\": {\"scale\": \"2\"}, \"field\": \"credit\"}]}]},"
             " \"payload\": %s}", payload);
    return buf;
}

/* DESIGN.md: Formats. Kafka Connect's JSON envelope: the payload's members
 * stored, each logical type of the schema decoded exactly (a Decimal's
 * base64 two's-complement bytes with its scale, every digit; a Date's days;
 * a Time's and a Timestamp's milliseconds), at any depth; a record without
 * the envelope is refused, saying how to read it. The fixtures' Decimal
 * bytes are what JsonConverter writes (BigInteger.toByteArray, base64). */
static void a_connect_envelope_stores_its_payload_with_its_logical_types_exact(void **state)
{
    (void)state;
    char err[1024], why[600], rec[2048];
    load_definitions("{\"pipelines\": [{\"name\": \"orders\", \"table\": \"orders\", \"format\": \"connect_json\",\n"
                     " \"fields\": [{\"member\": \"id\", \"required\": true}, {\"member\": \"amount\"},"
                     " {\"member\": \"day\"}, {\"member\": \"at\"}, {\"member\": \"ts\"},"
                     " {\"path\": \"/customer/credit\", \"column\": \"credit\"}, {\"path\": \"\", \"column\": \"doc\"}],\n"
                     " \"key\": [\"id\"], \"on_conflict\": \"nothing\"}]}");
    const pipeline_def_t *def = pipeline_get(0);
    column_fact_t cols[] = {typed("id", COLUMN_INT8, "bigint", true), typed("amount", COLUMN_NUMERIC, "numeric(38,9)", false),
                            typed("day", COLUMN_TEXT_INPUT, "date", false), typed("at", COLUMN_TEXT_INPUT, "time without time zone", false),
                            typed("ts", COLUMN_TIMESTAMPTZ, "timestamp with time zone", false),
                            typed("credit", COLUMN_NUMERIC, "numeric", false), typed("doc", COLUMN_JSONB, "jsonb", false)};
    cols[1].precision = 38;
    cols[1].scale = 9;
    char *keys[] = {"id"};
    table_facts_t t = {true, cols, 7, keys, 1};
    if (pipeline_bind(0, &t, err, sizeof err)) fail_msg("%s", err);

    event_t ev = {0};
    const char *r = connect_record(rec, sizeof rec,
                                   "{\"id\": 7, \"amount\": \"CUmw9vACMxPESZBQ3jjzTg==\", \"day\": 20788, \"at\": 36000123,"
                                   " \"ts\": 1796119200123, \"customer\": {\"credit\": \"+x4=\"}}");
    if (decode_both(def, r, &ev, why, sizeof why)) fail_msg("%s", why);
    assert_string_equal(event_column(&ev, 0), "7");
    assert_string_equal(event_column(&ev, 1), "12345678901234567890123456789.012345678");
    assert_string_equal(event_column(&ev, 2), "2026-12-01");
    assert_string_equal(event_column(&ev, 3), "10:00:00.123");
    assert_string_equal(event_column(&ev, 4), "2026-12-01 10:00:00.123000+00");
    assert_string_equal(event_column(&ev, 5), "-12.50");
    assert_non_null(strstr(event_column(&ev, 6), "\"amount\": \"CUmw9vACMxPESZBQ3jjzTg==\""));
    event_free(&ev);

    /* Before the epoch, small and negative decimals, and a Decimal sent as a number. */
    r = connect_record(rec, sizeof rec, "{\"id\": 8, \"amount\": 0.5, \"day\": -1, \"ts\": -1, \"customer\": {\"credit\": \"+w==\"}}");
    if (decode_both(def, r, &ev, why, sizeof why)) fail_msg("%s", why);
    assert_string_equal(event_column(&ev, 1), "0.5");
    assert_string_equal(event_column(&ev, 2), "1969-12-31");
    assert_string_equal(event_column(&ev, 4), "1969-12-31 23:59:59.999000+00");
    assert_string_equal(event_column(&ev, 5), "-0.05");
    event_free(&ev);

    assert_int_equal(-1, decode_both(def, connect_record(rec, sizeof rec, "{\"id\": 9, \"amount\": \"not base64!\"}"), &ev,
                                     why, sizeof why));
    assert_string_equal(why, "invalid_field|amount: a Decimal's bytes are not base64");
    assert_int_equal(-1, decode_both(def, connect_record(rec, sizeof rec, "{\"id\": 9, \"at\": 86400000}"), &ev, why, sizeof why));
    assert_string_equal(why, "invalid_field|at: a time of milliseconds 86400000 is out of range");
    assert_int_equal(-1, decode_both(def, connect_record(rec, sizeof rec, "null"), &ev, why, sizeof why));
    assert_string_equal(why, "empty_payload|the envelope's payload is null");
    assert_int_equal(-1, decode_both(def, "{\"id\": 7, \"amount\": 1}", &ev, why, sizeof why));
    assert_string_equal(why, "invalid_json|expected Kafka Connect's JSON envelope {\"schema\": ..., \"payload\": ...}: the "
                             "record has no \"schema\" (a converter with schemas off writes the payload alone: read it "
                             "with \"format\": \"json\")");
    event_free(&ev);
}

/* DESIGN.md: Pipelines are declared (names): every name is taken literally,
 * case, keywords, quotes and all, and quoted in every statement; a table
 * is split at its first dot into schema and name; a name PostgreSQL would
 * cut (over 63 bytes) or one with a control character is refused. */
static void names_are_taken_literally_and_quoted_in_every_statement(void **state)
{
    (void)state;
    char err[1024];
    char *path = write_file("{\"pipelines\": [{\"name\": \"odd\", \"table\": \"My Schema.Odd.Table\",\n"
                            " \"application\": {\"member\": \"package_name\", \"column\": \"App,Id\"},\n"
                            " \"fields\": [{\"member\": \"order\", \"required\": true},\n"
                            "  {\"member\": \"seen\", \"column\": \"Seen \\\"At\\\"\", \"required\": true}],\n"
                            " \"key\": [\"App,Id\", \"order\"],\n"
                            " \"on_conflict\": {\"update\": [\"Seen \\\"At\\\"\"], \"when_newer\": \"Seen \\\"At\\\"\"}}]}");
    assert_int_equal(0, pipelines_load(path, err, sizeof err));
    unlink(path);
    free(path);
    const pipeline_def_t *def = pipeline_get(0);
    assert_string_equal(def->table, "My Schema.Odd.Table");
    assert_string_equal(def->table_sql, "\"My Schema\".\"Odd.Table\"");
    column_fact_t cols[] = {
        typed("App,Id", COLUMN_INT8, "bigint", true),
        typed("order", COLUMN_INT4, "integer", true),
        typed("Seen \"At\"", COLUMN_TIMESTAMPTZ, "timestamp with time zone", true),
    };
    /* The key found whole in the catalog's "App,Id,order", though a name
     * holds the separator. */
    char *keys[] = {"App,Id,order"};
    table_facts_t t = {true, cols, 3, keys, 1};
    assert_int_equal(0, pipeline_bind(0, &t, err, sizeof err));
    assert_string_equal(def->columns_sql, "\"App,Id\", \"order\", \"Seen \"\"At\"\"\"");
    assert_string_equal(def->key_sql, "\"App,Id\", \"order\"");
    assert_string_equal(def->conflict_sql, "ON CONFLICT (\"App,Id\", \"order\") DO UPDATE SET "
                                           "\"Seen \"\"At\"\"\" = EXCLUDED.\"Seen \"\"At\"\"\" "
                                           "WHERE t.\"Seen \"\"At\"\"\" IS NULL OR EXCLUDED.\"Seen \"\"At\"\"\" > t.\"Seen \"\"At\"\"\"");
    assert_string_equal(def->probe_sql, "SELECT s.i FROM unnest($1::bigint[], $2::integer[], "
                                        "$3::timestamp with time zone[]) WITH ORDINALITY AS s(c0, c1, c2, i) "
                                        "JOIN \"My Schema\".\"Odd.Table\" t ON t.\"App,Id\" = s.c0 AND t.\"order\" = s.c1 "
                                        "WHERE t.\"Seen \"\"At\"\"\" >= s.c2");
    /* Messages show the names as written. */
    char *keys_other[] = {"App,Id"};
    t.unique_keys = keys_other;
    assert_int_equal(-1, pipeline_bind(0, &t, err, sizeof err));
    assert_string_equal(err, "pipeline odd, column My Schema.Odd.Table.order: the natural key (App,Id, order) "
                             "has no UNIQUE constraint (ON CONFLICT needs one)");

    char long_name[65];
    memset(long_name, 'c', 64);
    long_name[64] = '\0';
    char text[512];
    snprintf(text, sizeof text, ONE("\"fields\": [{\"member\": \"permission\", \"column\": \"%s\"}]"), long_name);
    expect_load_error(text, "fields[0] (permission).column: \"cccc");
    expect_load_error(text, "is not a column name (1 to 63 bytes, no control characters)");
    expect_load_error("{\"pipelines\": [{\"name\": \"x\", \"table\": \"a\\tb\"}]}",
                      "table: \"a\tb\" is not a table name ([schema.]table, each 1 to 63 bytes, no control characters)");
    expect_load_error("{\"pipelines\": [{\"name\": \"x\", \"table\": \".t\"}]}", "is not a table name");
    expect_load_error("{\"pipelines\": [{\"name\": \"x\", \"table\": \"s.\"}]}", "is not a table name");
}

/* The record's own fields (DESIGN.md: Pipelines are declared): declared by
 * "record", refused where malformed; a natural key of several of them
 * matches its UNIQUE index in any order; each decoded from the record. */
static void a_malformed_record_field_is_refused_naming_it(void **state)
{
    (void)state;
#define REC(field) ONE("\"fields\": [" field ", {\"member\": \"permission\", \"required\": true}], "  \
                       "\"key\": [\"permission\"], \"on_conflict\": \"nothing\"")
    expect_load_error(REC("{\"record\": \"color\", \"column\": \"c\"}"),
                      "fields[0] (color).record: \"color\" is none of value, key, topic");
    expect_load_error(REC("{\"record\": \"topic\", \"member\": \"t\", \"column\": \"c\"}"),
                      "member: a field of the record's topic has no member");
    expect_load_error(REC("{\"record\": \"offset\"}"), "column: required for a field of the record's offset");
    expect_load_error(REC("{\"record\": \"header\", \"column\": \"c\"}"), "header: required");
    expect_load_error(REC("{\"member\": \"m\", \"header\": \"h\"}"), "only a field of \"record\": \"header\" names one");
    expect_load_error(REC("{\"record\": \"topic\", \"column\": \"c\"}, {\"record\": \"topic\", \"column\": \"d\"}"),
                      "\"record topic\" is declared twice");
#undef REC
}

static const char *header_pairs[][2] = {{"trace-id", "t-1"}, {"source", NULL}, {"trace-id", "t-2"}};

static bool headers_at(const void *opaque, size_t i, const char **name, const void **value, size_t *len)
{
    (void)opaque;
    if (i >= sizeof header_pairs / sizeof *header_pairs) return false;
    *name = header_pairs[i][0];
    *value = header_pairs[i][1];
    *len = header_pairs[i][1] ? strlen(header_pairs[i][1]) : 0;
    return true;
}

static void a_key_of_record_fields_takes_its_columns_from_the_record(void **state)
{
    (void)state;
    char err[1024];
    char *path = write_file(ONE("\"fields\": [{\"record\": \"topic\", \"column\": \"t\", \"required\": true},\n"
                                " {\"record\": \"partition\", \"column\": \"p\", \"required\": true},\n"
                                " {\"record\": \"offset\", \"column\": \"o\", \"required\": true},\n"
                                " {\"record\": \"timestamp\", \"column\": \"at\"},\n"
                                " {\"record\": \"timestamp_type\", \"column\": \"tt\"},\n"
                                " {\"record\": \"key\", \"column\": \"k\"},\n"
                                " {\"record\": \"headers\", \"column\": \"h\"},\n"
                                " {\"record\": \"header\", \"header\": \"trace-id\", \"column\": \"trace\"},\n"
                                " {\"member\": \"permission\"}],\n"
                                " \"key\": [\"t\", \"p\", \"o\"], \"on_conflict\": \"nothing\""));
    assert_int_equal(0, pipelines_load(path, err, sizeof err));
    unlink(path);
    free(path);
    column_fact_t cols[] = {
        typed("application_id", COLUMN_INT8, "bigint", true),
        typed("t", COLUMN_TEXT, "text", true),
        typed("p", COLUMN_INT4, "integer", true),
        typed("o", COLUMN_INT8, "bigint", true),
        typed("at", COLUMN_TIMESTAMPTZ, "timestamp with time zone", false),
        typed("tt", COLUMN_TEXT, "text", false),
        typed("k", COLUMN_TEXT_INPUT, "bytea", false),
        typed("h", COLUMN_JSONB, "jsonb", false),
        typed("trace", COLUMN_TEXT, "text", false),
        varchar("permission", 255, false),
    };
    /* The index's columns in another order than the key's. */
    char *keys[] = {"o,t,p"};
    table_facts_t t = {true, cols, sizeof cols / sizeof *cols, keys, 1};
    assert_int_equal(0, pipeline_bind(0, &t, err, sizeof err));
    const pipeline_def_t *def = pipeline_get(0);
    assert_string_equal(def->key_sql, "\"t\", \"p\", \"o\"");
    assert_string_equal(def->conflict_sql, "ON CONFLICT (\"t\", \"p\", \"o\") DO NOTHING");
    const char *json = "{\"package_name\":\"com.example.a\",\"permission\":\"CAMERA\"}";
    record_t r = {.topic = "events", .partition = 2, .offset = 41, .timestamp_ms = 1764410400123,
                  .timestamp_type = RECORD_TIMESTAMP_LOG_APPEND, .key = "\x01k", .key_len = 2,
                  .value = json, .value_len = strlen(json), .headers = {NULL, headers_at}};
    event_t ev = {0};
    rejection_t rej;
    assert_int_equal(0, decode_record_of(def, &r, &ev, &rej));
    assert_string_equal(event_column(&ev, 0), "events");
    assert_string_equal(event_column(&ev, 1), "2");
    assert_string_equal(event_column(&ev, 2), "41");
    assert_string_equal(event_column(&ev, 3), "2025-11-29 10:00:00.123000+00");
    assert_string_equal(event_column(&ev, 4), "log_append");
    assert_string_equal(event_column(&ev, 5), "\\x016b");
    assert_string_equal(event_column(&ev, 6), "[{\"key\":\"trace-id\",\"value\":\"t-1\"},{\"key\":\"source\",\"value\":null},"
                                              "{\"key\":\"trace-id\",\"value\":\"t-2\"}]");
    assert_string_equal(event_column(&ev, 7), "t-2"); /* the last of its name */
    /* Without a record (decode_record), the record's fields are absent. */
    assert_int_equal(-1, decode_record(def, json, strlen(json), &ev, &rej));
    assert_string_equal(rej.detail, "record topic: required field is missing");
    /* Into a text column, a key must be UTF-8. */
    cols[6] = typed("k", COLUMN_TEXT, "text", false);
    assert_int_equal(0, pipeline_bind(0, &t, err, sizeof err));
    r.key = "\xff";
    r.key_len = 1;
    assert_int_equal(-1, decode_record_of(def, &r, &ev, &rej));
    assert_string_equal(rej.error_type, ERROR_INVALID_UTF8);
    assert_string_equal(rej.detail, "record key: the key is not valid UTF-8");
    event_free(&ev);
    /* A record field on a column that cannot take it. */
    cols[2] = typed("p", COLUMN_TEXT, "text", true);
    assert_int_equal(-1, pipeline_bind(0, &t, err, sizeof err));
    assert_string_equal(err, "pipeline app-permissions, field record partition, column app_permissions.p: the record "
                             "partition needs an integer column, not text");
}

/* A member of a JSON key checked as a value's member would be; a key that
 * is not JSON, or not an object, is refused naming the field. */
static void a_member_of_the_records_key_is_checked_as_a_values_member(void **state)
{
    (void)state;
    char err[1024];
    char *path = write_file(ONE("\"fields\": [{\"record\": \"key\", \"member\": \"id\", \"required\": true},\n"
                                " {\"record\": \"key\", \"member\": \"price\", \"column\": \"amount\"},\n"
                                " {\"member\": \"permission\"}],\n"
                                " \"key\": [\"id\"], \"on_conflict\": \"nothing\""));
    assert_int_equal(0, pipelines_load(path, err, sizeof err));
    unlink(path);
    free(path);
    column_fact_t cols[] = {
        typed("application_id", COLUMN_INT8, "bigint", true),
        typed("id", COLUMN_INT4, "integer", true),
        typed("amount", COLUMN_NUMERIC, "numeric", false),
        varchar("permission", 255, false),
    };
    char *keys[] = {"id"};
    table_facts_t t = {true, cols, sizeof cols / sizeof *cols, keys, 1};
    assert_int_equal(0, pipeline_bind(0, &t, err, sizeof err));
    const pipeline_def_t *def = pipeline_get(0);
    assert_string_equal(def->fields[0].name, "record key.id");
    const char *json = "{\"package_name\":\"com.example.a\",\"permission\":\"CAMERA\"}";
    struct {
        const char *key, *id, *amount, *rejected;
    } cases[] = {
        {"{\"price\": 0.10, \"id\": 7}", "7", "0.10", NULL},
        {"{\"id\": 7}", "7", NULL, NULL},
        {"{\"id\": 4294967296}", NULL, NULL, "record key.id: 4294967296 is out of range"},
        {"{\"id\": \"7\"}", NULL, NULL, "record key.id: expected an integer"},
        {"{\"other\": 1}", NULL, NULL, "record key.id: required field is missing"},
        {"k-7", NULL, NULL, "record key.id: the key is not JSON: "},
        {"[7]", NULL, NULL, "record key.id: the key is not a JSON object"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        record_t r = {.topic = "t", .key = cases[c].key, .key_len = strlen(cases[c].key), .value = json,
                      .value_len = strlen(json), .timestamp_ms = -1};
        event_t ev = {0};
        rejection_t rej;
        int rc = decode_record_of(def, &r, &ev, &rej);
        if (cases[c].rejected) {
            assert_int_equal(-1, rc);
            if (!strstr(rej.detail, cases[c].rejected)) fail_msg("%s: \"%s\" lacks \"%s\"", cases[c].key, rej.detail, cases[c].rejected);
        } else {
            assert_int_equal(0, rc);
            assert_string_equal(event_column(&ev, 0), cases[c].id);
            if (cases[c].amount) assert_string_equal(event_column(&ev, 1), cases[c].amount);
            else assert_null(event_column(&ev, 1));
        }
        event_free(&ev);
    }
}

/* The states de-duplication leaves a batch of key/value records under the
 * tombstone rule `rule`: record i has key keys[i] and, where tombs[i] is
 * 'T', no value (a tombstone); its timestamp, the version, is ts[i]. Each
 * state a letter: E (event), R (rejected), s (superseded), T (a tombstone
 * applied after its key's value), t (one applied before it). */
static void dedup_states(const char *rule, const char *keys, const char *tombs, const int64_t *ts,
                         const char *expected)
{
    char err[1024], text[2048];
    snprintf(text, sizeof text,
             ONE("\"fields\": [{\"record\": \"key\", \"column\": \"k\", \"required\": true},\n"
                 " {\"member\": \"v\", \"required\": true},\n"
                 " {\"record\": \"timestamp\", \"column\": \"seen\", \"required\": true}],\n"
                 " \"key\": [\"k\"], \"tombstones\": %s,\n"
                 " \"on_conflict\": {\"update\": [\"v\", \"seen\"], \"when_newer\": \"seen\"}"),
             rule);
    char *path = write_file(text);
    assert_int_equal(0, pipelines_load(path, err, sizeof err));
    unlink(path);
    free(path);
    column_fact_t cols[] = {
        typed("application_id", COLUMN_INT8, "bigint", true), typed("k", COLUMN_TEXT, "text", true),
        typed("v", COLUMN_TEXT, "text", true), typed("seen", COLUMN_INT8, "bigint", true),
        typed("gone", COLUMN_TIMESTAMPTZ, "timestamp with time zone", false),
    };
    char *key_columns[] = {"k"};
    table_facts_t t = {true, cols, sizeof cols / sizeof *cols, key_columns, 1};
    assert_int_equal(0, pipeline_bind(0, &t, err, sizeof err));
    const char *v = "{\"package_name\":\"com.example.a\",\"v\":\"x\"}";
    size_t n = strlen(keys);
    record_t r[16];
    assert_true(n <= 16 && strlen(tombs) == n);
    for (size_t i = 0; i < n; i++) {
        bool tomb = tombs[i] == 'T';
        r[i] = (record_t){.topic = "t", .offset = (int64_t)i, .timestamp_ms = ts[i], .key = &keys[i],
                          .key_len = 1, .value = tomb ? NULL : v, .value_len = tomb ? 0 : strlen(v)};
    }
    batch_t b;
    batch_init(&b, pipeline_get(0));
    batch_decode(&b, r, n);
    for (size_t i = 0; i < n; i++) b.entries[i].application_id = 1;
    batch_deduplicate(&b);
    char got[17] = "";
    static const char letter[] = {[ENTRY_EVENT] = 'E', [ENTRY_REJECTED] = 'R', [ENTRY_SUPERSEDED] = 's',
                                  [ENTRY_TOMBSTONE] = 'T'};
    for (size_t i = 0; i < n; i++)
        got[i] = b.entries[i].state == ENTRY_TOMBSTONE && b.entries[i].mark_first ? 't' : letter[b.entries[i].state];
    if (strcmp(got, expected) != 0) fail_msg("%s, keys %s (%s): got %s, expected %s", rule, keys, tombs, got, expected);
    batch_free(&b);
}

/* DESIGN.md: Pipelines are declared, tombstones. A delete supersedes the
 * values of its key before it (they would be deleted) and an earlier
 * tombstone; a value after it stands. A mark before the key's standing
 * value is applied before it is written, one after it after; a value after
 * a mark does not supersede the mark (the guard may skip the value, and the
 * row then stays marked). */
static void tombstones_keep_the_record_order_of_their_key(void **state)
{
    (void)state;
    /* a: a value, a tombstone, a newer value; b: a value, a tombstone;
     * c: two tombstones. */
    static const int64_t ts[] = {1, 2, 3, 4, 5, 6, 7};
    dedup_states("\"delete\"", "abacbac", "--TTT-T", ts, "ssTsTET");
    dedup_states("{\"mark\": \"gone\"}", "abacbac", "--TTT-T", ts, "sEtsTET");
    dedup_states("\"dead_letter\"", "abacbac", "--TTT-T", ts, "sERRRER");
}

/* Applied one by one, a mark then an older value leaves the row marked
 * (the guard skips the value): in one batch the mark must stand too. */
static void a_mark_stands_beside_a_later_older_value_of_its_key(void **state)
{
    (void)state;
    static const int64_t ts[] = {10, 5};
    dedup_states("{\"mark\": \"gone\"}", "aa", "T-", ts, "tE");
}

/* Of a key's marks on one side of its value, one can be the last to pass
 * the guard only if its timestamp is greater than every later one's: the
 * others never decide the row's mark. */
static void only_marks_that_can_be_the_last_to_pass_the_guard_stand(void **state)
{
    (void)state;
    static const int64_t ts[] = {5, 3, 4, 9, 2, 8, 8};
    /* Before the value (at 9): 5 stands (greater than 3 and 4), 3 does not,
     * 4 does; after it: 8 (the first) does not (the last is as great). */
    dedup_states("{\"mark\": \"gone\"}", "aaaaaaa", "TTT-TTT", ts, "tstEssT");
    /* Without a timestamp a mark passes every guard: the ones before it
     * never decide. */
    static const int64_t none[] = {5, -1, 4};
    dedup_states("{\"mark\": \"gone\"}", "aaa", "TTT", none, "sTT");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(a_widened_column_stores_what_the_old_limit_refused, rebind),
        cmocka_unit_test_setup(a_narrowed_column_is_refused_at_decoding_naming_the_field, rebind),
        cmocka_unit_test_setup(a_column_of_text_takes_any_length, rebind),
        cmocka_unit_test_setup(integer_ranges_are_the_column_types_narrowed_by_the_definition, rebind),
        cmocka_unit_test_setup(a_numeric_column_sets_the_precision_and_the_decimals, rebind),
        cmocka_unit_test_setup(a_definition_that_disagrees_with_its_table_is_refused_naming_field_and_column, rebind),
        cmocka_unit_test_setup(a_natural_key_without_a_unique_constraint_is_refused, rebind),
        cmocka_unit_test_setup(a_natural_key_on_a_column_whose_text_has_many_forms_is_refused, rebind),
        cmocka_unit_test_setup(a_malformed_file_is_refused_with_its_line_or_member, rebind),
        cmocka_unit_test_setup(a_definition_reads_a_list_of_topics, rebind),
        cmocka_unit_test_setup(a_declared_pipeline_builds_its_conflict_rule_and_key_probe, rebind),
        cmocka_unit_test_setup(a_pipeline_without_an_application_writes_its_fields_alone, rebind),
        cmocka_unit_test_setup(a_member_path_reaches_nested_members_and_the_whole_value, rebind),
        cmocka_unit_test_setup(a_lookup_names_any_tables_unique_column_and_application_is_one, rebind),
        cmocka_unit_test_setup(a_connect_envelope_stores_its_payload_with_its_logical_types_exact, rebind),
        cmocka_unit_test_setup(an_empty_never_writes_says_none, rebind),
        cmocka_unit_test_setup(a_bound_beyond_the_column_types_range_is_refused, rebind),
        cmocka_unit_test_setup(names_are_taken_literally_and_quoted_in_every_statement, rebind),
        cmocka_unit_test_setup(a_malformed_record_field_is_refused_naming_it, rebind),
        cmocka_unit_test_setup(a_key_of_record_fields_takes_its_columns_from_the_record, rebind),
        cmocka_unit_test_setup(a_member_of_the_records_key_is_checked_as_a_values_member, rebind),
        cmocka_unit_test_setup(tombstones_keep_the_record_order_of_their_key, rebind),
        cmocka_unit_test_setup(a_mark_stands_beside_a_later_older_value_of_its_key, rebind),
        cmocka_unit_test_setup(only_marks_that_can_be_the_last_to_pass_the_guard_stand, rebind),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    pipelines_free();
    return rc;
}
