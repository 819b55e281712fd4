/* Unit tests of the message contract (DESIGN.md: The message contract): decode_record turns one Kafka
 * record value into the column texts PostgreSQL reads, or rejects it with a
 * stable error_type and a detail naming the field.
 *
 * Messages are built as JSON text from a valid base message per pipeline with
 * individual fields replaced, removed or added (see msg()), so every test
 * controls the exact bytes the decoder sees. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "shipped_schema.h"
#include "core/decode.h"
#include "core/json_value.h"
#include "core/pipeline.h"

#define APP PIPELINE_APP_STATS
#define REV PIPELINE_REVIEWS
#define NET PIPELINE_NETWORK_METRICS

/* ------------------------------------------------------------------------ */
/* Message builder                                                          */

typedef struct {
    const char *key;
    const char *raw; /* the JSON text of the value */
} kv_t;

/* msg(..., "field", OMIT, NULL) leaves the field out of the message. */
static const char OMIT[] = "<omit>";

static const kv_t app_stats_base[] = {
    {"package_name", "\"com.example.app\""},
    {"crawled_at", "\"2026-11-29T12:00:00\""},
    {"title", "\"Example \u2605 App\""},
    {"score", "4.5"},
    {"ratings_count", "12345"},
    {"reviews_count", "678"},
    {"min_installs", "1000000"},
    {"real_installs", "1234567"},
    {"histogram", "[10, 20, 30, 40, 50]"},
    {"price", "0.99"},
    {"is_free", "false"},
    {"version", "\"2.0.1\""},
    {"app_updated_at", "\"2026-11-28T09:15:00.000001Z\""},
    {NULL, NULL},
};

static const kv_t reviews_base[] = {
    {"package_name", "\"com.example.app\""},
    {"review_id", "\"gp:AOqpTOE1\""},
    {"user_name", "\"Zo\u00eb\""},
    {"content", "\"Great app, \\\"five\\\" stars\\n\""},
    {"score", "5"},
    {"thumbs_up_count", "42"},
    {"app_version", "\"1.2.3\""},
    {"reviewed_at", "\"2026-11-29T12:00:00Z\""},
    {"reply_content", "\"Thanks!\""},
    {"replied_at", "\"2026-11-29T15:30:00.123456+03:30\""},
    {"last_synced_at", "\"2026-11-30T08:00:00.5\""},
    {NULL, NULL},
};

static const kv_t network_base[] = {
    {"package_name", "\"com.example.app\""},
    {"analysis_id", "\"3F2504E0-4F89-11D3-9A0C-0305E82C3301\""},
    {"analyzed_at", "\"2026-11-29T12:00:00+00:00\""},
    {"duration_seconds", "12.5"},
    {"total_packets", "1500"},
    {"total_bytes", "9223372036854775807"},
    {"unique_hosts", "17"},
    {"dns_queries", "42"},
    {"tls_handshakes", "9"},
    {"avg_packet_size", "512.25"},
    {"protocols", "{\"tcp\": 1200, \"udp\": 280, \"icmp\": 20}"},
    {NULL, NULL},
};

static const kv_t *const bases[3] = {app_stats_base, reviews_base, network_base};

typedef struct {
    char *s;
    size_t len, cap;
} sbuf_t;

static void sb_add(sbuf_t *b, const char *s)
{
    size_t n = strlen(s);
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) abort();
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n + 1);
    b->len += n;
}

static void sb_field(sbuf_t *b, bool *first, const char *key, const char *raw)
{
    if (!*first) sb_add(b, ", ");
    *first = false;
    sb_add(b, "\"");
    sb_add(b, key);
    sb_add(b, "\": ");
    sb_add(b, raw);
}

/* The base message of pipeline `p` with overrides: pairs of key and raw JSON
 * value (OMIT removes the key), terminated by NULL. Keys not in the base
 * message are appended. Returns a malloc'd NUL-terminated string. */
static char *msg(pipeline_id_t p, ...)
{
    const char *okey[32], *oraw[32];
    bool used[32] = {false};
    size_t n = 0;
    va_list ap;
    va_start(ap, p);
    for (const char *k; (k = va_arg(ap, const char *)) != NULL;) {
        assert_true(n < 32);
        okey[n] = k;
        oraw[n] = va_arg(ap, const char *);
        n++;
    }
    va_end(ap);

    sbuf_t b = {0};
    bool first = true;
    sb_add(&b, "{");
    for (const kv_t *f = bases[p]; f->key; f++) {
        const char *raw = f->raw;
        for (size_t i = 0; i < n; i++)
            if (strcmp(okey[i], f->key) == 0) {
                raw = oraw[i];
                used[i] = true;
            }
        if (raw != OMIT) sb_field(&b, &first, f->key, raw);
    }
    for (size_t i = 0; i < n; i++)
        if (!used[i] && oraw[i] != OMIT) sb_field(&b, &first, okey[i], oraw[i]);
    sb_add(&b, "}");
    return b.s;
}

/* A message holding only the given fields: pairs of key and raw value. */
static char *only(const char *key, ...)
{
    sbuf_t b = {0};
    bool first = true;
    va_list ap;
    sb_add(&b, "{");
    va_start(ap, key);
    for (const char *k = key; k != NULL; k = va_arg(ap, const char *))
        sb_field(&b, &first, k, va_arg(ap, const char *));
    va_end(ap);
    sb_add(&b, "}");
    return b.s;
}

/* "\"" + n copies of unit + "\"" */
static char *repeat_str(const char *unit, size_t n)
{
    size_t u = strlen(unit);
    char *s = malloc(u * n + 3);
    if (!s) abort();
    s[0] = '"';
    for (size_t i = 0; i < n; i++) memcpy(s + 1 + i * u, unit, u);
    s[1 + u * n] = '"';
    s[2 + u * n] = '\0';
    return s;
}

/* n copies of unit, unquoted */
static char *repeat_raw(const char *unit, size_t n)
{
    size_t u = strlen(unit);
    char *s = malloc(u * n + 1);
    if (!s) abort();
    for (size_t i = 0; i < n; i++) memcpy(s + i * u, unit, u);
    s[u * n] = '\0';
    return s;
}

/* ------------------------------------------------------------------------ */
/* Decode helpers. Each frees the message before asserting.                 */

static size_t field_index(pipeline_id_t p, const char *field)
{
    const pipeline_def_t *def = pipeline_get(p);
    for (size_t i = 0; i < def->field_count; i++)
        if (strcmp(def->fields[i].name, field) == 0) return i;
    fail_msg("pipeline %s has no field %s", def->name, field);
    return 0;
}

static void snip(char *dst, size_t cap, const char *json)
{
    snprintf(dst, cap, "%.300s%s", json, strlen(json) > 300 ? "..." : "");
}

/* Decode `json` (freed) into *ev; fail the test if it is rejected. */
static void decode_ok(pipeline_id_t p, char *json, event_t *ev)
{
    rejection_t rej = {0};
    char shown[320];
    snip(shown, sizeof shown, json);
    int rc = decode_record(pipeline_get(p), json, strlen(json), ev, &rej);
    free(json);
    if (rc != 0) {
        event_free(ev);
        fail_msg("unexpectedly rejected (%s: %s): %s", rej.error_type, rej.detail, shown);
    }
}

/* Column `field` of `json` (freed) is exactly `expected` (NULL: SQL NULL). */
static void expect_column(pipeline_id_t p, char *json, const char *field, const char *expected)
{
    event_t ev = {0};
    size_t i = field_index(p, field);
    decode_ok(p, json, &ev);
    const char *c = event_column(&ev, i);
    char got[4096];
    bool is_null = c == NULL;
    bool fits = c && strlen(c) < sizeof got;
    if (c) snprintf(got, sizeof got, "%s", c);
    event_free(&ev);
    if (expected == NULL) {
        if (!is_null) fail_msg("%s: expected SQL NULL, got \"%s\"", field, got);
        return;
    }
    if (is_null) fail_msg("%s: expected \"%s\", got SQL NULL", field, expected);
    assert_true(fits);
    assert_string_equal(got, expected);
}

/* Decoding `len` bytes at `value` is rejected with `type`, and the detail
 * starts with `prefix` (e.g. "score:") and contains `mentions` (either may
 * be NULL). */
static void expect_reject_bytes(pipeline_id_t p, const void *value, size_t len, const char *type,
                                const char *prefix, const char *mentions)
{
    event_t ev = {0};
    rejection_t rej = {0};
    int rc = decode_record(pipeline_get(p), value, len, &ev, &rej);
    event_free(&ev);
    if (rc != -1) fail_msg("accepted, expected %s (%s)", type, prefix ? prefix : "");
    assert_non_null(rej.error_type);
    if (strcmp(rej.error_type, type) != 0)
        fail_msg("error_type %s (%s), expected %s", rej.error_type, rej.detail, type);
    if (prefix && strncmp(rej.detail, prefix, strlen(prefix)) != 0)
        fail_msg("detail \"%s\" does not start with \"%s\"", rej.detail, prefix);
    if (mentions && !strstr(rej.detail, mentions))
        fail_msg("detail \"%s\" does not mention \"%s\"", rej.detail, mentions);
}

static void expect_reject(pipeline_id_t p, char *json, const char *type, const char *prefix,
                          const char *mentions)
{
    char shown[320];
    snip(shown, sizeof shown, json);
    event_t ev = {0};
    rejection_t rej = {0};
    int rc = decode_record(pipeline_get(p), json, strlen(json), &ev, &rej);
    free(json);
    event_free(&ev);
    if (rc != -1) fail_msg("accepted, expected %s: %s", type, shown);
    if (strcmp(rej.error_type, type) != 0)
        fail_msg("error_type %s (%s), expected %s: %s", rej.error_type, rej.detail, type, shown);
    if (prefix && strncmp(rej.detail, prefix, strlen(prefix)) != 0)
        fail_msg("detail \"%s\" does not start with \"%s\": %s", rej.detail, prefix, shown);
    if (mentions && !strstr(rej.detail, mentions))
        fail_msg("detail \"%s\" does not mention \"%s\": %s", rej.detail, mentions, shown);
}

/* The detail of a field-level rejection starts with "<field>:". */
static void expect_invalid(pipeline_id_t p, char *json, const char *field)
{
    char prefix[128];
    snprintf(prefix, sizeof prefix, "%s:", field);
    expect_reject(p, json, ERROR_INVALID_FIELD, prefix, NULL);
}

/* Field `field` set to `raw` is accepted, and its column is `expected`. */
static void field_accepted(pipeline_id_t p, const char *field, const char *raw, const char *expected)
{
    expect_column(p, msg(p, field, raw, NULL), field, expected);
}

/* Field `field` set to `raw` is rejected as invalid_field naming it. */
static void field_rejected(pipeline_id_t p, const char *field, const char *raw)
{
    expect_invalid(p, msg(p, field, raw, NULL), field);
}

/* ------------------------------------------------------------------------ */
/* Valid full messages                                                      */

typedef struct {
    const char *field;
    const char *text; /* NULL: SQL NULL */
} column_t;

static void expect_columns(pipeline_id_t p, char *json, const column_t *want, int64_t version)
{
    event_t ev = {0};
    const pipeline_def_t *def = pipeline_get(p);
    decode_ok(p, json, &ev);
    size_t n = 0;
    for (; want[n].field; n++) {
        size_t i = field_index(p, want[n].field);
        const char *c = event_column(&ev, i);
        if (want[n].text == NULL) {
            if (c) fail_msg("%s: expected SQL NULL, got \"%s\"", want[n].field, c);
        } else {
            if (!c) fail_msg("%s: expected \"%s\", got SQL NULL", want[n].field, want[n].text);
            if (strcmp(c, want[n].text) != 0)
                fail_msg("%s: expected \"%s\", got \"%s\"", want[n].field, want[n].text, c);
        }
    }
    /* Every column of the pipeline is listed. */
    assert_int_equal(n, def->field_count);
    assert_string_equal(event_package_name(&ev), "com.example.app");
    assert_int_equal(ev.version, version);
    event_free(&ev);
}

static void app_stats_full_message_decodes_every_column_exactly(void **state)
{
    (void)state;
    static const column_t want[] = {
        {"crawled_at", "2026-11-29 12:00:00.000000+00"},
        {"title", "Example \u2605 App"},
        {"score", "4.5"},
        {"ratings_count", "12345"},
        {"reviews_count", "678"},
        {"min_installs", "1000000"},
        {"real_installs", "1234567"},
        {"histogram", "{10,20,30,40,50}"},
        {"price", "0.99"},
        {"is_free", "f"},
        {"version", "2.0.1"},
        {"app_updated_at", "2026-11-28 09:15:00.000001+00"},
        {NULL, NULL},
    };
    expect_columns(APP, msg(APP, NULL), want, 0);
}

static void reviews_full_message_decodes_every_column_exactly(void **state)
{
    (void)state;
    static const column_t want[] = {
        {"review_id", "gp:AOqpTOE1"},
        {"user_name", "Zo\u00eb"},
        {"content", "Great app, \"five\" stars\n"},
        {"score", "5"},
        {"thumbs_up_count", "42"},
        {"app_version", "1.2.3"},
        {"reviewed_at", "2026-11-29 12:00:00.000000+00"},
        {"reply_content", "Thanks!"},
        {"replied_at", "2026-11-29 12:00:00.123456+00"},
        {"last_synced_at", "2026-11-30 08:00:00.500000+00"},
        {NULL, NULL},
    };
    /* 2026-11-30T08:00:00.5Z in microseconds since the epoch. */
    expect_columns(REV, msg(REV, NULL), want, INT64_C(1796025600500000));
}

static void network_metrics_full_message_decodes_every_column_exactly(void **state)
{
    (void)state;
    static const column_t want[] = {
        {"analysis_id", "3f2504e0-4f89-11d3-9a0c-0305e82c3301"},
        {"analyzed_at", "2026-11-29 12:00:00.000000+00"},
        {"duration_seconds", "12.5"},
        {"total_packets", "1500"},
        {"total_bytes", "9223372036854775807"},
        {"unique_hosts", "17"},
        {"dns_queries", "42"},
        {"tls_handshakes", "9"},
        {"avg_packet_size", "512.25"},
        {"protocols", "{\"tcp\":1200,\"udp\":280,\"icmp\":20}"},
        {NULL, NULL},
    };
    expect_columns(NET, msg(NET, NULL), want, 0);
}

static void app_stats_with_only_required_fields_has_null_optional_columns(void **state)
{
    (void)state;
    static const column_t want[] = {
        {"crawled_at", "2026-11-29 12:00:00.000000+00"},
        {"title", NULL},
        {"score", NULL},
        {"ratings_count", NULL},
        {"reviews_count", NULL},
        {"min_installs", NULL},
        {"real_installs", NULL},
        {"histogram", NULL},
        {"price", NULL},
        {"is_free", NULL},
        {"version", NULL},
        {"app_updated_at", NULL},
        {NULL, NULL},
    };
    expect_columns(APP,
                   only("package_name", "\"com.example.app\"", "crawled_at",
                        "\"2026-11-29T12:00:00Z\"", NULL),
                   want, 0);
}

static void reviews_with_only_required_fields_has_null_optional_columns(void **state)
{
    (void)state;
    static const column_t want[] = {
        {"review_id", "r1"},
        {"user_name", NULL},
        {"content", NULL},
        {"score", "1"},
        {"thumbs_up_count", "0"},
        {"app_version", NULL},
        {"reviewed_at", "2026-11-29 12:00:00.000000+00"},
        {"reply_content", NULL},
        {"replied_at", NULL},
        {"last_synced_at", "2026-11-30 08:00:00.500000+00"},
        {NULL, NULL},
    };
    expect_columns(REV,
                   only("package_name", "\"com.example.app\"", "review_id", "\"r1\"", "score", "1",
                        "thumbs_up_count", "0", "reviewed_at", "\"2026-11-29T12:00:00Z\"",
                        "last_synced_at", "\"2026-11-30T08:00:00.500000Z\"", NULL),
                   want, INT64_C(1796025600500000));
}

static void network_metrics_with_only_required_fields_has_null_optional_columns(void **state)
{
    (void)state;
    static const column_t want[] = {
        {"analysis_id", "3f2504e0-4f89-11d3-9a0c-0305e82c3301"},
        {"analyzed_at", "2026-11-29 12:00:00.000000+00"},
        {"duration_seconds", "0"},
        {"total_packets", "0"},
        {"total_bytes", "0"},
        {"unique_hosts", NULL},
        {"dns_queries", NULL},
        {"tls_handshakes", NULL},
        {"avg_packet_size", NULL},
        {"protocols", NULL},
        {NULL, NULL},
    };
    expect_columns(NET,
                   only("package_name", "\"com.example.app\"", "analysis_id",
                        "\"3f2504e0-4f89-11d3-9a0c-0305e82c3301\"", "analyzed_at",
                        "\"2026-11-29T12:00:00Z\"", "duration_seconds", "0", "total_packets", "0",
                        "total_bytes", "0", NULL),
                   want, 0);
}

static void null_optional_fields_are_sql_null(void **state)
{
    (void)state;
    static const column_t want[] = {
        {"review_id", "gp:AOqpTOE1"},
        {"user_name", NULL},
        {"content", NULL},
        {"score", "5"},
        {"thumbs_up_count", "42"},
        {"app_version", NULL},
        {"reviewed_at", "2026-11-29 12:00:00.000000+00"},
        {"reply_content", NULL},
        {"replied_at", NULL},
        {"last_synced_at", "2026-11-30 08:00:00.500000+00"},
        {NULL, NULL},
    };
    expect_columns(REV,
                   msg(REV, "user_name", "null", "content", "null", "app_version", "null",
                       "reply_content", "null", "replied_at", "null", NULL),
                   want, INT64_C(1796025600500000));
    field_accepted(APP, "histogram", "null", NULL);
    field_accepted(APP, "price", "null", NULL);
    field_accepted(APP, "is_free", "null", NULL);
    field_accepted(NET, "protocols", "null", NULL);
    field_accepted(NET, "avg_packet_size", "null", NULL);
}

static void reviews_version_is_last_synced_at_in_microseconds(void **state)
{
    (void)state;
    event_t ev = {0};
    /* 2026-11-29T12:00:00.123456Z, given with a +03:30 offset. */
    decode_ok(REV, msg(REV, "last_synced_at", "\"2026-11-29T15:30:00.123456+03:30\"", NULL), &ev);
    int64_t v = ev.version;
    event_free(&ev);
    assert_int_equal(v, INT64_C(1795953600123456));

    decode_ok(REV, msg(REV, "last_synced_at", "\"1970-01-01T00:00:00.000001Z\"", NULL), &ev);
    v = ev.version;
    event_free(&ev);
    assert_int_equal(v, 1);
}

static void event_reused_for_next_record_holds_only_new_values(void **state)
{
    (void)state;
    event_t ev;
    event_init(&ev);
    decode_ok(REV, msg(REV, NULL), &ev);
    decode_ok(REV,
              msg(REV, "package_name", "\"org.other\"", "review_id", "\"r2\"", "user_name", "null",
                  "last_synced_at", "\"1970-01-01T00:00:01Z\"", NULL),
              &ev);
    char pkg[64], rid[64];
    snprintf(pkg, sizeof pkg, "%s", event_package_name(&ev));
    snprintf(rid, sizeof rid, "%s", event_column(&ev, field_index(REV, "review_id")));
    bool user_null = event_column(&ev, field_index(REV, "user_name")) == NULL;
    int64_t v = ev.version;
    event_free(&ev);
    assert_string_equal(pkg, "org.other");
    assert_string_equal(rid, "r2");
    assert_true(user_null);
    assert_int_equal(v, 1000000);
}

/* ------------------------------------------------------------------------ */
/* Payload shape                                                            */

static void empty_value_is_empty_payload(void **state)
{
    (void)state;
    expect_reject_bytes(REV, "", 0, ERROR_EMPTY_PAYLOAD, NULL, NULL);
    expect_reject_bytes(REV, "{}", 0, ERROR_EMPTY_PAYLOAD, NULL, NULL);
}

static void null_value_is_empty_payload(void **state)
{
    (void)state;
    expect_reject_bytes(APP, NULL, 0, ERROR_EMPTY_PAYLOAD, NULL, NULL);
    expect_reject_bytes(NET, NULL, 0, ERROR_EMPTY_PAYLOAD, NULL, NULL);
}

static void array_instead_of_object_is_invalid_json(void **state)
{
    (void)state;
    char *one = msg(REV, NULL);
    size_t n = strlen(one);
    char *arr = malloc(n + 3);
    assert_non_null(arr);
    arr[0] = '[';
    memcpy(arr + 1, one, n);
    arr[n + 1] = ']';
    arr[n + 2] = '\0';
    free(one);
    expect_reject(REV, arr, ERROR_INVALID_JSON, NULL, "array");
}

static void scalar_instead_of_object_is_invalid_json(void **state)
{
    (void)state;
    static const char *const scalars[] = {"42", "4.5", "true", "null", "\"{}\""};
    for (size_t i = 0; i < sizeof scalars / sizeof scalars[0]; i++)
        expect_reject_bytes(APP, scalars[i], strlen(scalars[i]), ERROR_INVALID_JSON, NULL, NULL);
}

static void string_instead_of_object_is_invalid_json(void **state)
{
    (void)state;
    const char *s = "\"{\\\"package_name\\\": \\\"com.example.app\\\"}\"";
    expect_reject_bytes(REV, s, strlen(s), ERROR_INVALID_JSON, NULL, "string");
}

static void malformed_json_is_invalid_json(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "{",
        "{\"package_name\": \"com.example.app\"",
        "{\"package_name\": \"com.example.app\",}",
        "{'package_name': 'com.example.app'}",
        "{\"package_name\": \"com.example.app\"} trailing",
        "{\"package_name\": \"com.example.app\"}{}",
        "   ",
        "packageName=com.example.app",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_reject_bytes(APP, bad[i], strlen(bad[i]), ERROR_INVALID_JSON, NULL, NULL);
}

static void value_length_bounds_the_parse(void **state)
{
    (void)state;
    /* The record value is `len` bytes, not a C string: bytes after it are
     * not part of the message. */
    char *full = msg(NET, NULL);
    size_t n = strlen(full);
    char *padded = malloc(n + 16);
    assert_non_null(padded);
    memcpy(padded, full, n);
    memcpy(padded + n, "garbage}{[", 11);
    event_t ev = {0};
    rejection_t rej = {0};
    int ok = decode_record(pipeline_get(NET), padded, n, &ev, &rej);
    int cut = decode_record(pipeline_get(NET), padded, n - 1, &ev, &rej);
    const char *cut_type = rej.error_type;
    event_free(&ev);
    free(full);
    free(padded);
    assert_int_equal(ok, 0);
    assert_int_equal(cut, -1);
    assert_string_equal(cut_type, ERROR_INVALID_JSON);
}

static void duplicate_top_level_key_is_invalid_json(void **state)
{
    (void)state;
    /* Which score wins would depend on the parser. */
    expect_reject(REV, msg(REV, "score", "5, \"score\": 1", NULL), ERROR_INVALID_JSON, NULL,
                  "duplicate");
    /* Even when both values are equal. */
    expect_reject(REV, msg(REV, "score", "5, \"score\": 5", NULL), ERROR_INVALID_JSON, NULL,
                  "duplicate");
    /* And for package_name, which decides the application. */
    expect_reject(NET,
                  msg(NET, "package_name", "\"com.example.app\", \"package_name\": \"com.evil\"",
                      NULL),
                  ERROR_INVALID_JSON, NULL, "duplicate");
}

static void duplicate_nested_key_is_invalid_json(void **state)
{
    (void)state;
    expect_reject(NET, msg(NET, "protocols", "{\"tcp\": 1, \"tcp\": 2}", NULL), ERROR_INVALID_JSON,
                  NULL, "duplicate");
    /* Inside an unknown field, too: the message as a whole is ambiguous. */
    expect_reject(REV, msg(REV, "extra", "{\"a\": {\"b\": 1, \"b\": 2}}", NULL),
                  ERROR_INVALID_JSON, NULL, "duplicate");
}

/* ------------------------------------------------------------------------ */
/* Required fields                                                          */

static const char *const app_stats_required[] = {"package_name", "crawled_at", NULL};
static const char *const reviews_required[] = {"package_name",    "review_id",   "score",
                                               "thumbs_up_count", "reviewed_at", "last_synced_at",
                                               NULL};
static const char *const network_required[] = {"package_name",     "analysis_id",   "analyzed_at",
                                               "duration_seconds", "total_packets", "total_bytes",
                                               NULL};

static void expect_required(pipeline_id_t p, const char *const *required)
{
    for (const char *const *f = required; *f; f++) {
        char prefix[128];
        snprintf(prefix, sizeof prefix, "%s:", *f);
        expect_reject(p, msg(p, *f, OMIT, NULL), ERROR_MISSING_FIELD, prefix, NULL);
        expect_reject(p, msg(p, *f, "null", NULL), ERROR_MISSING_FIELD, prefix, NULL);
    }
}

static void app_stats_missing_or_null_required_field_is_missing_field(void **state)
{
    (void)state;
    expect_required(APP, app_stats_required);
}

static void reviews_missing_or_null_required_field_is_missing_field(void **state)
{
    (void)state;
    expect_required(REV, reviews_required);
}

static void network_metrics_missing_or_null_required_field_is_missing_field(void **state)
{
    (void)state;
    expect_required(NET, network_required);
}

static void empty_object_is_missing_package_name(void **state)
{
    (void)state;
    for (int p = 0; p < pipeline_count(); p++)
        expect_reject_bytes((pipeline_id_t)p, "{}", 2, ERROR_MISSING_FIELD, "package_name:", NULL);
}

static void camel_case_legacy_message_is_missing_field(void **state)
{
    (void)state;
    /* DESIGN.md: Operations: raw camelCase scraper output goes to the dead letters. */
    expect_reject(REV,
                  only("package_name", "\"com.example.app\"", "reviewId", "\"gp:1\"", "score", "5",
                       "thumbsUpCount", "3", "at", "\"2026-11-29T12:00:00\"", NULL),
                  ERROR_MISSING_FIELD, "review_id:", NULL);
}

/* ------------------------------------------------------------------------ */
/* Wrong types                                                              */

typedef struct {
    const char *field;
    const char *const *wrong; /* NULL-terminated raw values of the wrong type */
} wrong_types_t;

static const char *const not_string[] = {"12", "true", "[\"a\"]", "{\"a\": \"b\"}", NULL};
static const char *const not_integer[] = {"\"12\"", "true", "[1]", "{}", NULL};
static const char *const not_number[] = {"\"4.5\"", "false", "[4.5]", "{}", NULL};
static const char *const not_timestamp[] = {"1764417600", "true", "[\"2026-11-29T12:00:00Z\"]",
                                            "{}", NULL};
static const char *const not_boolean[] = {"1", "0", "\"true\"", "\"t\"", "[]", NULL};
static const char *const not_uuid[] = {"123", "true", "[]", "{}", NULL};
static const char *const not_histogram[] = {"\"1,2,3,4,5\"", "5", "{}", "true", NULL};
static const char *const not_price[] = {"\"0.99\"", "true", "[0.99]", "{}", NULL};
static const char *const not_counts[] = {"[]", "[[\"tcp\", 1]]", "\"tcp\"", "1", "true", NULL};

static const wrong_types_t app_stats_wrong[] = {
    {"package_name", not_string}, {"crawled_at", not_timestamp},
    {"title", not_string},        {"score", not_number},
    {"ratings_count", not_integer}, {"reviews_count", not_integer},
    {"min_installs", not_integer}, {"real_installs", not_integer},
    {"histogram", not_histogram}, {"price", not_price},
    {"is_free", not_boolean},     {"version", not_string},
    {"app_updated_at", not_timestamp}, {NULL, NULL},
};

static const wrong_types_t reviews_wrong[] = {
    {"package_name", not_string},  {"review_id", not_string},
    {"user_name", not_string},     {"content", not_string},
    {"score", not_integer},        {"thumbs_up_count", not_integer},
    {"app_version", not_string},   {"reviewed_at", not_timestamp},
    {"reply_content", not_string}, {"replied_at", not_timestamp},
    {"last_synced_at", not_timestamp}, {NULL, NULL},
};

static const wrong_types_t network_wrong[] = {
    {"package_name", not_string},     {"analysis_id", not_uuid},
    {"analyzed_at", not_timestamp},   {"duration_seconds", not_number},
    {"total_packets", not_integer},   {"total_bytes", not_integer},
    {"unique_hosts", not_integer},    {"dns_queries", not_integer},
    {"tls_handshakes", not_integer},  {"avg_packet_size", not_number},
    {"protocols", not_counts},        {NULL, NULL},
};

static void expect_wrong_types(pipeline_id_t p, const wrong_types_t *t)
{
    for (; t->field; t++)
        for (const char *const *w = t->wrong; *w; w++) field_rejected(p, t->field, *w);
}

static void app_stats_wrong_type_is_invalid_field(void **state)
{
    (void)state;
    expect_wrong_types(APP, app_stats_wrong);
}

static void reviews_wrong_type_is_invalid_field(void **state)
{
    (void)state;
    expect_wrong_types(REV, reviews_wrong);
}

static void network_metrics_wrong_type_is_invalid_field(void **state)
{
    (void)state;
    expect_wrong_types(NET, network_wrong);
}

/* ------------------------------------------------------------------------ */
/* Timestamps                                                               */

static void naive_timestamp_is_utc(void **state)
{
    (void)state;
    field_accepted(APP, "crawled_at", "\"2026-11-29T12:00:00\"", "2026-11-29 12:00:00.000000+00");
    field_accepted(REV, "reviewed_at", "\"2026-11-29T23:59:59.25\"", "2026-11-29 23:59:59.250000+00");
}

static void utc_designator_and_zero_offset_are_utc(void **state)
{
    (void)state;
    field_accepted(NET, "analyzed_at", "\"2026-11-29T12:00:00Z\"", "2026-11-29 12:00:00.000000+00");
    field_accepted(NET, "analyzed_at", "\"2026-11-29T12:00:00+00:00\"", "2026-11-29 12:00:00.000000+00");
    field_accepted(NET, "analyzed_at", "\"2026-11-29T12:00:00-00:00\"", "2026-11-29 12:00:00.000000+00");
    field_accepted(NET, "analyzed_at", "\"2026-11-29T12:00:00+0000\"", "2026-11-29 12:00:00.000000+00");
}

static void offset_plus_0330_is_converted_to_utc(void **state)
{
    (void)state;
    field_accepted(REV, "replied_at", "\"2026-11-29T15:30:00.123456+03:30\"",
                 "2026-11-29 12:00:00.123456+00");
    field_accepted(REV, "replied_at", "\"2026-11-29T08:30:00-03:30\"", "2026-11-29 12:00:00.000000+00");
    /* Crossing midnight into the previous day. */
    field_accepted(REV, "replied_at", "\"2026-11-29T02:00:00+03:30\"", "2026-11-28 22:30:00.000000+00");
}

static void microseconds_are_kept_exactly(void **state)
{
    (void)state;
    field_accepted(APP, "app_updated_at", "\"2026-11-29T12:00:00.000001Z\"",
                 "2026-11-29 12:00:00.000001+00");
    field_accepted(APP, "app_updated_at", "\"2026-11-29T12:00:00.999999Z\"",
                 "2026-11-29 12:00:00.999999+00");
    field_accepted(APP, "app_updated_at", "\"2026-11-29T12:00:00.123456Z\"",
                 "2026-11-29 12:00:00.123456+00");
    field_accepted(APP, "app_updated_at", "\"2026-11-29T12:00:00.1Z\"",
                 "2026-11-29 12:00:00.100000+00");
    /* Zeros beyond the sixth digit round nothing. */
    field_accepted(APP, "app_updated_at", "\"2026-11-29T12:00:00.123456000Z\"",
                 "2026-11-29 12:00:00.123456+00");
}

static void expect_timestamp_rejected(const char *raw, const char *why)
{
    expect_reject(APP, msg(APP, "crawled_at", raw, NULL), ERROR_INVALID_FIELD, "crawled_at:", why);
}

static void timestamp_february_30_is_rejected(void **state)
{
    (void)state;
    expect_timestamp_rejected("\"2026-02-30T12:00:00Z\"", "February");
    expect_timestamp_rejected("\"2026-02-29T12:00:00Z\"", "February 2026");
}

static void timestamp_month_13_is_rejected(void **state)
{
    (void)state;
    expect_timestamp_rejected("\"2026-13-01T12:00:00Z\"", "month 13");
    expect_timestamp_rejected("\"2026-00-01T12:00:00Z\"", "month 00");
}

static void timestamp_hour_24_is_rejected(void **state)
{
    (void)state;
    expect_timestamp_rejected("\"2026-11-29T24:00:00Z\"", "hour 24");
    expect_timestamp_rejected("\"2026-11-29T12:60:00Z\"", "minute 60");
    expect_timestamp_rejected("\"2026-11-29T12:00:60Z\"", "second 60");
}

static void timestamp_year_0000_is_rejected(void **state)
{
    (void)state;
    expect_timestamp_rejected("\"0000-01-01T00:00:00Z\"", "0000");
}

static void timestamp_beyond_microseconds_is_rejected(void **state)
{
    (void)state;
    expect_timestamp_rejected("\"2026-11-29T12:00:00.1234567Z\"", "microsecond");
    expect_timestamp_rejected("\"2026-11-29T12:00:00.0000001\"", "microsecond");
}

static void timestamp_with_text_after_it_is_rejected(void **state)
{
    (void)state;
    expect_timestamp_rejected("\"2026-11-29T12:00:00Z UTC\"", "after");
    expect_timestamp_rejected("\"2026-11-29T12:00:00 \"", "after");
    expect_timestamp_rejected("\"2026-11-29T12:00:00\\u0000\"", "after");
}

static void timestamp_infinity_is_rejected(void **state)
{
    (void)state;
    expect_timestamp_rejected("\"infinity\"", "ISO 8601");
    expect_timestamp_rejected("\"-infinity\"", "ISO 8601");
    expect_timestamp_rejected("\"now\"", "ISO 8601");
    expect_timestamp_rejected("\"\"", "ISO 8601");
    expect_timestamp_rejected("\"2026-11-29\"", "ISO 8601");
}

static void invalid_timestamp_in_every_timestamp_field_names_the_field(void **state)
{
    (void)state;
    static const struct {
        pipeline_id_t p;
        const char *field;
    } fields[] = {
        {APP, "crawled_at"},  {APP, "app_updated_at"}, {REV, "reviewed_at"},
        {REV, "replied_at"},  {REV, "last_synced_at"}, {NET, "analyzed_at"},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        field_rejected(fields[i].p, fields[i].field, "\"2026-02-30T00:00:00Z\"");
}

/* ------------------------------------------------------------------------ */
/* Integer ranges                                                           */

static void review_score_accepts_1_to_5_only(void **state)
{
    (void)state;
    field_accepted(REV, "score", "1", "1");
    field_accepted(REV, "score", "3", "3");
    field_accepted(REV, "score", "5", "5");
    field_rejected(REV, "score", "0");
    field_rejected(REV, "score", "6");
    field_rejected(REV, "score", "-1");
    field_rejected(REV, "score", "32767");
    field_rejected(REV, "score", "32768");
}

static void thumbs_up_count_at_int32_max_is_accepted(void **state)
{
    (void)state;
    field_accepted(REV, "thumbs_up_count", "0", "0");
    field_accepted(REV, "thumbs_up_count", "2147483647", "2147483647");
}

static void thumbs_up_count_beyond_int32_is_rejected(void **state)
{
    (void)state;
    expect_reject(REV, msg(REV, "thumbs_up_count", "2147483648", NULL), ERROR_INVALID_FIELD,
                  "thumbs_up_count:", "2147483648");
    field_rejected(REV, "thumbs_up_count", "4294967296");
}

static void network_integer_counts_at_int32_limit_and_one_beyond(void **state)
{
    (void)state;
    static const char *const fields[] = {"unique_hosts", "dns_queries", "tls_handshakes"};
    for (size_t i = 0; i < 3; i++) {
        field_accepted(NET, fields[i], "0", "0");
        field_accepted(NET, fields[i], "2147483647", "2147483647");
        field_rejected(NET, fields[i], "2147483648");
    }
}

static void bigint_fields_at_int64_max_are_accepted(void **state)
{
    (void)state;
    static const struct {
        pipeline_id_t p;
        const char *field;
    } fields[] = {
        {APP, "ratings_count"}, {APP, "reviews_count"}, {APP, "min_installs"},
        {APP, "real_installs"}, {NET, "total_packets"}, {NET, "total_bytes"},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        field_accepted(fields[i].p, fields[i].field, "9223372036854775807", "9223372036854775807");
        field_accepted(fields[i].p, fields[i].field, "0", "0");
    }
}

static void total_bytes_beyond_int64_is_invalid_field(void **state)
{
    (void)state;
    /* jansson reports it as a numeric overflow at parse time; the detail
     * must still name the field. */
    expect_reject(NET, msg(NET, "total_bytes", "9223372036854775808", NULL), ERROR_INVALID_FIELD,
                  "total_bytes:", "9223372036854775808 is out of range");
    expect_reject(APP, msg(APP, "real_installs", "18446744073709551616", NULL),
                  ERROR_INVALID_FIELD, "real_installs:", "out of range");
}

static void number_beyond_a_double_names_its_field(void **state)
{
    (void)state;
    expect_reject(NET, msg(NET, "duration_seconds", "1e400", NULL), ERROR_INVALID_FIELD,
                  "duration_seconds:", "out of range");
    expect_reject(REV, msg(REV, "thumbs_up_count", "-2e999", NULL), ERROR_INVALID_FIELD,
                  "thumbs_up_count:", "out of range");
    expect_reject(APP, msg(APP, "histogram", "[1, 2, 1e400, 4, 5]", NULL), ERROR_INVALID_FIELD,
                  "histogram[2]:", "out of range");
    /* A string field holding such a number is not quietly turned into text. */
    expect_reject(REV, msg(REV, "user_name", "1e400", NULL), ERROR_INVALID_FIELD, "user_name:", NULL);
}

static void unknown_field_with_a_number_beyond_a_double_is_ignored(void **state)
{
    (void)state;
    event_t ev = {0};
    rejection_t rej = {0};
    char *json = msg(NET, "future_ratio", "1e400", "other", "[-1e999, 2e500]", NULL);
    int rc = decode_record(pipeline_get(NET), json, strlen(json), &ev, &rej);
    free(json);
    if (rc != 0) fail_msg("rejected %s: %s", rej.error_type, rej.detail);
    event_free(&ev);
}

static void nul_in_an_object_key_is_an_invalid_field(void **state)
{
    (void)state;
    expect_reject(NET, msg(NET, "protocols", "{\"t\\u0000cp\": 3}", NULL), ERROR_INVALID_FIELD, NULL,
                  "NUL");
}

static void unknown_field_with_an_integer_beyond_int64_is_ignored(void **state)
{
    (void)state;
    event_t ev = {0};
    rejection_t rej = {0};
    char *json = msg(NET, "future_counter", "99999999999999999999", "total_bytes", "1000", NULL);
    int rc = decode_record(pipeline_get(NET), json, strlen(json), &ev, &rej);
    free(json);
    if (rc != 0) fail_msg("rejected %s: %s", rej.error_type, rej.detail);
    assert_string_equal(event_column(&ev, 3), "1500"); /* total_packets stays exact */
    event_free(&ev);
}

/* RFC 8259 lets a parser refuse a byte order mark, and both readers do: a
 * later simdjson that skipped it would make the two disagree. */
static void a_leading_byte_order_mark_is_refused_by_both_readers(void **state)
{
    (void)state;
    char *json = msg(REV, NULL);
    size_t n = strlen(json);
    char *bom = malloc(n + 4);
    assert_non_null(bom);
    memcpy(bom, "\xEF\xBB\xBF", 3);
    memcpy(bom + 3, json, n + 1);
    free(json);
    for (int reference = 0; reference < 2; reference++) {
        event_t ev = {0};
        rejection_t rej = {0};
        int rc = reference ? decode_record_reference(pipeline_get(REV), bom, n + 3, &ev, &rej)
                           : decode_record(pipeline_get(REV), bom, n + 3, &ev, &rej);
        event_free(&ev);
        if (rc != -1) fail_msg("the %s reader accepted a leading BOM", reference ? "reference" : "fast");
        assert_string_equal(rej.error_type, ERROR_INVALID_JSON);
    }
    free(bom);
}

/* An unknown member's integer beyond 64 bits changes nothing in how the
 * known ones are read: the record's other integers stay integers, exact
 * beyond 2^53, and counts stay integers in the stored JSON. */
static void an_unknown_integer_beyond_64_bits_leaves_the_known_integers_exact(void **state)
{
    (void)state;
    event_t ev = {0};
    rejection_t rej = {0};
    char *json = msg(NET, "unknown_extra", "18446744073709551616", "total_bytes", "9007199254740993",
                     "protocols", "{\"tcp\":5}", NULL);
    int rc = decode_record(pipeline_get(NET), json, strlen(json), &ev, &rej);
    free(json);
    if (rc != 0) fail_msg("rejected %s: %s", rej.error_type, rej.detail);
    assert_string_equal(event_column(&ev, 4), "9007199254740993");
    assert_string_equal(event_column(&ev, 9), "{\"tcp\":5}");
    event_free(&ev);
    /* Beyond 64 bits in a known integer field is still refused by name. */
    expect_reject(NET, msg(NET, "unknown_extra", "18446744073709551616", "total_packets", "18446744073709551617", NULL),
                  ERROR_INVALID_FIELD, "total_packets:", "out of range");
}

static void negative_counts_are_rejected(void **state)
{
    (void)state;
    static const struct {
        pipeline_id_t p;
        const char *field;
    } fields[] = {
        {APP, "ratings_count"},   {APP, "reviews_count"},   {APP, "min_installs"},
        {APP, "real_installs"},   {REV, "thumbs_up_count"}, {NET, "total_packets"},
        {NET, "total_bytes"},     {NET, "unique_hosts"},    {NET, "dns_queries"},
        {NET, "tls_handshakes"},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        field_rejected(fields[i].p, fields[i].field, "-1");
        field_rejected(fields[i].p, fields[i].field, "-9223372036854775808");
    }
}

static void fractional_number_for_integer_field_is_rejected(void **state)
{
    (void)state;
    expect_reject(REV, msg(REV, "thumbs_up_count", "1.5", NULL), ERROR_INVALID_FIELD,
                  "thumbs_up_count:", "integer");
    field_rejected(REV, "score", "4.5");
    field_rejected(REV, "score", "4.999999");
    field_rejected(NET, "total_bytes", "1e-3");
    field_rejected(APP, "ratings_count", "0.5");
}

static void integral_number_for_integer_field_is_accepted_as_integer(void **state)
{
    (void)state;
    field_accepted(REV, "score", "5.0", "5");
    field_accepted(REV, "thumbs_up_count", "1e3", "1000");
    field_accepted(NET, "total_packets", "1.5e2", "150");
    field_accepted(REV, "thumbs_up_count", "-0.0", "0");
    /* The largest integer below 2^53 is exact as a double. */
    field_accepted(NET, "total_bytes", "9007199254740991.0", "9007199254740991");
}

static void integral_number_beyond_exact_double_range_is_rejected(void **state)
{
    (void)state;
    /* 9007199254740993.0 parses to the double 2^53: storing 9007199254740992
     * would silently change the value. */
    expect_reject(NET, msg(NET, "total_bytes", "9007199254740993.0", NULL), ERROR_INVALID_FIELD,
                  "total_bytes:", "exact");
    field_rejected(NET, "total_bytes", "9007199254740992.0");
    field_rejected(NET, "total_bytes", "1e19");
    field_rejected(APP, "min_installs", "1e18");
    field_rejected(REV, "thumbs_up_count", "3e9");
}

/* ------------------------------------------------------------------------ */
/* Plain numbers                                                            */

static double column_as_double(pipeline_id_t p, const char *field, const char *raw)
{
    event_t ev = {0};
    decode_ok(p, msg(p, field, raw, NULL), &ev);
    const char *c = event_column(&ev, field_index(p, field));
    char *end = NULL;
    double d = c ? strtod(c, &end) : -1.0;
    bool whole = c && *end == '\0';
    event_free(&ev);
    assert_true(whole);
    return d;
}

static void numbers_are_stored_as_the_text_sent(void **state)
{
    (void)state;
    assert_true(column_as_double(APP, "score", "4.1") == 4.1);
    assert_true(column_as_double(APP, "score", "0.3") == 0.3);
    assert_true(column_as_double(NET, "duration_seconds", "0.1") == 0.1);
    assert_true(column_as_double(NET, "duration_seconds", "1e308") == 1e308);
    assert_true(column_as_double(NET, "avg_packet_size", "1234.5678901234567") ==
                1234.5678901234567);
    field_accepted(APP, "score", "4", "4");
    field_accepted(APP, "score", "4.75", "4.75");
    field_accepted(APP, "score", "4.10", "4.10");
    field_accepted(APP, "score", "41e-1", "41e-1");
}

static void negative_zero_reaches_postgresql_as_sent(void **state)
{
    (void)state;
    /* float8in keeps the sign of zero: the text decides, as for any number. */
    field_accepted(NET, "duration_seconds", "-0.0", "-0.0");
    field_accepted(APP, "score", "-0", "-0");
}

static void app_score_accepts_0_to_5_only(void **state)
{
    (void)state;
    field_accepted(APP, "score", "0", "0");
    field_accepted(APP, "score", "5", "5");
    field_accepted(APP, "score", "5.0", "5.0");
    field_rejected(APP, "score", "5.01");
    field_rejected(APP, "score", "-0.01");
    field_rejected(APP, "score", "100");
}

static void negative_duration_and_packet_size_are_rejected(void **state)
{
    (void)state;
    field_rejected(NET, "duration_seconds", "-0.5");
    field_rejected(NET, "avg_packet_size", "-1");
}

static void number_overflow_1e400_is_rejected(void **state)
{
    (void)state;
    /* jansson refuses the literal itself (numeric overflow). */
    expect_reject(NET, msg(NET, "duration_seconds", "1e400", NULL), ERROR_INVALID_FIELD, NULL,
                  "out of range");
    expect_reject(APP, msg(APP, "score", "-1e400", NULL), ERROR_INVALID_FIELD, NULL,
                  "out of range");
}

static void nan_and_infinity_literals_are_rejected(void **state)
{
    (void)state;
    static const char *const lits[] = {"NaN", "Infinity", "-Infinity", "nan", "inf"};
    for (size_t i = 0; i < sizeof lits / sizeof lits[0]; i++) {
        expect_reject(NET, msg(NET, "duration_seconds", lits[i], NULL), ERROR_INVALID_JSON, NULL,
                      NULL);
        expect_reject(NET, msg(NET, "total_bytes", lits[i], NULL), ERROR_INVALID_JSON, NULL,
                      NULL);
    }
}

/* ------------------------------------------------------------------------ */
/* Strings                                                                  */

static void expect_length_limit(pipeline_id_t p, const char *field, size_t max, const char *unit)
{
    char *ok = repeat_str(unit, max);
    char *expected = repeat_raw(unit, max);
    char *over = repeat_str(unit, max + 1);
    char count[32];
    snprintf(count, sizeof count, "%zu characters", max + 1);
    expect_column(p, msg(p, field, ok, NULL), field, expected);
    char prefix[128];
    snprintf(prefix, sizeof prefix, "%s:", field);
    expect_reject(p, msg(p, field, over, NULL), ERROR_INVALID_FIELD, prefix, count);
    free(ok);
    free(expected);
    free(over);
}

static void user_name_of_255_two_byte_characters_is_accepted_256_rejected(void **state)
{
    (void)state;
    expect_length_limit(REV, "user_name", 255, "\xc3\xa9"); /* é */
    expect_length_limit(REV, "user_name", 255, "a");
}

static void app_version_of_64_characters_is_accepted_65_rejected(void **state)
{
    (void)state;
    expect_length_limit(REV, "app_version", 64, "\xc3\xa9");
    expect_length_limit(REV, "app_version", 64, "\xf0\x9f\x98\x80"); /* U+1F600, 4 bytes */
    /* Escaped in JSON, counted once decoded. */
    char *esc = repeat_str("\\u00e9", 64), *esc_over = repeat_str("\\u00e9", 65);
    char *want = repeat_raw("\xc3\xa9", 64);
    expect_column(REV, msg(REV, "app_version", esc, NULL), "app_version", want);
    field_rejected(REV, "app_version", esc_over);
    free(esc);
    free(esc_over);
    free(want);
}

static void review_id_of_255_characters_is_accepted_256_rejected(void **state)
{
    (void)state;
    expect_length_limit(REV, "review_id", 255, "x");
    expect_length_limit(REV, "review_id", 255, "\xe2\x98\x85"); /* ★, 3 bytes */
}

static void app_stats_title_and_version_lengths_are_limited(void **state)
{
    (void)state;
    expect_length_limit(APP, "title", 255, "\xc3\xa9");
    expect_length_limit(APP, "version", 64, "\xc3\xa9");
}

static void package_name_longer_than_255_characters_is_rejected(void **state)
{
    (void)state;
    char *ok = repeat_str("p", 255);
    char *over = repeat_str("p", 256);
    char *over_mb = repeat_str("\xc3\xa9", 256);
    for (int p = 0; p < pipeline_count(); p++) {
        event_t ev = {0};
        decode_ok((pipeline_id_t)p, msg((pipeline_id_t)p, "package_name", ok, NULL), &ev);
        size_t n = strlen(event_package_name(&ev));
        event_free(&ev);
        assert_int_equal(n, 255);
        expect_reject((pipeline_id_t)p, msg((pipeline_id_t)p, "package_name", over, NULL),
                      ERROR_INVALID_FIELD, "package_name:", "256 characters");
        expect_reject((pipeline_id_t)p, msg((pipeline_id_t)p, "package_name", over_mb, NULL),
                      ERROR_INVALID_FIELD, "package_name:", "256 characters");
    }
    free(ok);
    free(over);
    free(over_mb);
}

static void empty_package_name_and_review_id_are_rejected(void **state)
{
    (void)state;
    expect_reject(NET, msg(NET, "package_name", "\"\"", NULL), ERROR_INVALID_FIELD,
                  "package_name:", "empty");
    expect_reject(REV, msg(REV, "review_id", "\"\"", NULL), ERROR_INVALID_FIELD, "review_id:",
                  "empty");
    /* Optional strings may be empty: '' is not NULL. */
    field_accepted(REV, "user_name", "\"\"", "");
}

static void long_review_content_is_accepted_whole(void **state)
{
    (void)state;
    char *big = repeat_str("\xc3\xa9", 100000);
    event_t ev = {0};
    decode_ok(REV, msg(REV, "content", big, NULL), &ev);
    const char *c = event_column(&ev, field_index(REV, "content"));
    size_t n = c ? strlen(c) : 0;
    event_free(&ev);
    free(big);
    assert_int_equal(n, 200000);
}

static void nul_in_review_content_is_rejected_naming_the_field(void **state)
{
    (void)state;
    expect_reject(REV, msg(REV, "content", "\"before\\u0000after\"", NULL), ERROR_INVALID_FIELD,
                  "content:", "NUL");
}

static void nul_in_package_name_is_rejected_naming_the_field(void **state)
{
    (void)state;
    for (int p = 0; p < pipeline_count(); p++)
        expect_reject((pipeline_id_t)p,
                      msg((pipeline_id_t)p, "package_name", "\"com.example.app\\u0000\"", NULL),
                      ERROR_INVALID_FIELD, "package_name:", "NUL");
}

static void nul_in_any_string_field_is_rejected_naming_the_field(void **state)
{
    (void)state;
    static const struct {
        pipeline_id_t p;
        const char *field;
    } fields[] = {
        {APP, "title"},     {APP, "version"},     {REV, "review_id"},
        {REV, "user_name"}, {REV, "content"},     {REV, "app_version"},
        {REV, "reply_content"},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        char prefix[128];
        snprintf(prefix, sizeof prefix, "%s:", fields[i].field);
        expect_reject(fields[i].p, msg(fields[i].p, fields[i].field, "\"\\u0000\"", NULL),
                      ERROR_INVALID_FIELD, prefix, "NUL");
        expect_reject(fields[i].p, msg(fields[i].p, fields[i].field, "\"x\\u0000y\"", NULL),
                      ERROR_INVALID_FIELD, prefix, "NUL");
    }
    /* Strings that are parsed further are rejected too. */
    field_rejected(NET, "analysis_id", "\"3f2504e0-4f89-11d3-9a0c-0305e82c330\\u0000\"");
}

static void nul_in_protocol_name_is_rejected(void **state)
{
    (void)state;
    expect_reject(NET, msg(NET, "protocols", "{\"tc\\u0000p\": 1}", NULL), ERROR_INVALID_FIELD,
                  NULL, NULL);
}

static void lone_surrogate_escape_is_rejected(void **state)
{
    (void)state;
    expect_reject(REV, msg(REV, "content", "\"\\ud800\"", NULL), ERROR_INVALID_JSON, NULL, NULL);
    expect_reject(REV, msg(REV, "content", "\"\\udc00\"", NULL), ERROR_INVALID_JSON, NULL, NULL);
    expect_reject(REV, msg(REV, "user_name", "\"a\\ud83dz\"", NULL), ERROR_INVALID_JSON, NULL,
                  NULL);
    expect_reject(REV, msg(REV, "content", "\"\\ud800\\u0041\"", NULL), ERROR_INVALID_JSON, NULL,
                  NULL);
}

static void escaped_surrogate_pair_is_one_character(void **state)
{
    (void)state;
    field_accepted(REV, "content", "\"\\ud83d\\ude00\"", "\xf0\x9f\x98\x80");
    char *pairs = repeat_str("\\ud83d\\ude00", 64);
    char *expected = repeat_raw("\xf0\x9f\x98\x80", 64);
    expect_column(REV, msg(REV, "app_version", pairs, NULL), "app_version", expected);
    free(pairs);
    free(expected);
}

static void expect_invalid_utf8(const char *bad_string_raw)
{
    expect_reject(REV, msg(REV, "content", bad_string_raw, NULL), ERROR_INVALID_UTF8, NULL, NULL);
    /* Anywhere in the record, including an unknown field or a key. */
    expect_reject(REV, msg(REV, "future_field", bad_string_raw, NULL), ERROR_INVALID_UTF8, NULL,
                  NULL);
}

/* The detail goes to a TEXT column: PostgreSQL refuses invalid UTF-8, and a
 * refused dead letter stops the pipeline. A strict decoder, not a byte
 * count, decides. */
static bool valid_utf8(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int n = *p < 0x80 ? 1 : (*p & 0xE0) == 0xC0 ? 2 : (*p & 0xF0) == 0xE0 ? 3 : (*p & 0xF8) == 0xF0 ? 4 : 0;
        if (n == 0) return false;
        for (int i = 1; i < n; i++)
            if ((p[i] & 0xC0) != 0x80) return false;
        p += n;
    }
    return true;
}

static void rejection_detail_is_valid_utf8_when_a_long_multibyte_name_is_cut(void **state)
{
    (void)state;
    char key[400] = "x"; /* then two-byte characters: a cut at an even byte splits one */
    for (int i = 0; i < 100; i++) strcat(key, "\u00e9");
    char protocols[600];
    snprintf(protocols, sizeof protocols, "{\"%s\": -1}", key);
    char *json = msg(NET, "protocols", protocols, NULL);
    event_t ev = {0};
    rejection_t rej = {0};
    int rc = decode_record(pipeline_get(NET), json, strlen(json), &ev, &rej);
    free(json);
    event_free(&ev);
    assert_int_equal(rc, -1);
    assert_string_equal(rej.error_type, ERROR_INVALID_FIELD);
    if (!valid_utf8(rej.detail)) fail_msg("detail is not valid UTF-8: %s", rej.detail);
}

static void raw_0xff_byte_is_invalid_utf8(void **state)
{
    (void)state;
    expect_invalid_utf8("\"ab\xff\"");
    expect_invalid_utf8("\"\xfe\"");
    const char bare[] = "{\"package_name\": \xff}";
    expect_reject_bytes(REV, bare, sizeof bare - 1, ERROR_INVALID_UTF8, NULL, NULL);
}

static void overlong_encoding_is_invalid_utf8(void **state)
{
    (void)state;
    expect_invalid_utf8("\"\xc0\xaf\"");         /* '/' in two bytes */
    expect_invalid_utf8("\"\xe0\x80\xaf\"");     /* '/' in three bytes */
    expect_invalid_utf8("\"\xc0\x80\"");         /* modified-UTF-8 NUL */
}

static void encoded_surrogate_is_invalid_utf8(void **state)
{
    (void)state;
    expect_invalid_utf8("\"\xed\xa0\x80\"");     /* U+D800 */
    expect_invalid_utf8("\"\xed\xbf\xbf\"");     /* U+DFFF */
}

static void truncated_or_out_of_range_sequence_is_invalid_utf8(void **state)
{
    (void)state;
    expect_invalid_utf8("\"\xe2\x82\"");         /* € missing its last byte */
    expect_invalid_utf8("\"\x80\"");             /* continuation byte alone */
    expect_invalid_utf8("\"\xf4\x90\x80\x80\""); /* beyond U+10FFFF */
    const char key[] = "{\"pack\xff" "age_name\": \"x\"}";
    expect_reject_bytes(REV, key, sizeof key - 1, ERROR_INVALID_UTF8, NULL, NULL);
}

static void valid_multibyte_utf8_is_kept_byte_for_byte(void **state)
{
    (void)state;
    field_accepted(REV, "content", "\"\xd8\xb9\xd8\xa7\xd9\x84\xdb\x8c \xe2\x82\xac \xf0\x9f\x98\x80\"",
                 "\xd8\xb9\xd8\xa7\xd9\x84\xdb\x8c \xe2\x82\xac \xf0\x9f\x98\x80");
    field_accepted(REV, "content", "\"\\u00e9\\u20ac\"", "\xc3\xa9\xe2\x82\xac");
}

/* ------------------------------------------------------------------------ */
/* Histogram                                                                */

static void histogram_of_five_integers_is_an_array_literal(void **state)
{
    (void)state;
    field_accepted(APP, "histogram", "[0, 0, 0, 0, 0]", "{0,0,0,0,0}");
    field_accepted(APP, "histogram", "[1,2,3,4,5.0]", "{1,2,3,4,5}");
    field_accepted(APP, "histogram",
                 "[9223372036854775807, 1, 2, 3, 9223372036854775807]",
                 "{9223372036854775807,1,2,3,9223372036854775807}");
}

static void histogram_of_wrong_length_is_rejected(void **state)
{
    (void)state;
    expect_reject(APP, msg(APP, "histogram", "[1, 2, 3, 4]", NULL), ERROR_INVALID_FIELD,
                  "histogram:", "got 4");
    expect_reject(APP, msg(APP, "histogram", "[1, 2, 3, 4, 5, 6]", NULL), ERROR_INVALID_FIELD,
                  "histogram:", "got 6");
    field_rejected(APP, "histogram", "[]");
}

static void histogram_with_negative_or_non_integer_element_is_rejected(void **state)
{
    (void)state;
    expect_reject(APP, msg(APP, "histogram", "[1, -1, 3, 4, 5]", NULL), ERROR_INVALID_FIELD,
                  "histogram[1]:", NULL);
    expect_reject(APP, msg(APP, "histogram", "[1, 2, 3.5, 4, 5]", NULL), ERROR_INVALID_FIELD,
                  "histogram[2]:", NULL);
    expect_reject(APP, msg(APP, "histogram", "[1, 2, 3, \"4\", 5]", NULL), ERROR_INVALID_FIELD,
                  "histogram[3]:", NULL);
    expect_reject(APP, msg(APP, "histogram", "[1, 2, 3, 4, null]", NULL), ERROR_INVALID_FIELD,
                  "histogram[4]:", NULL);
    expect_reject(APP, msg(APP, "histogram", "[[1], 2, 3, 4, 5]", NULL), ERROR_INVALID_FIELD,
                  "histogram[0]:", NULL);
}

/* ------------------------------------------------------------------------ */
/* Numbers as sent (DESIGN.md: Pipelines are declared)                      */

/* Pipeline p's table `table` with column `name` changed to `changed`. */
static void bind_with(pipeline_id_t p, const char *table, const char *name, column_fact_t changed)
{
    table_facts_t t = shipped_schema_table(table);
    column_fact_t cols[32];
    char err[512];
    memcpy(cols, t.columns, t.column_count * sizeof *cols);
    for (size_t i = 0; i < t.column_count; i++)
        if (strcmp(cols[i].name, name) == 0) cols[i] = changed;
    t.columns = cols;
    if (pipeline_bind(p, &t, err, sizeof err)) fail_msg("bind: %s", err);
}

static column_fact_t column_typed(const char *name, column_type_t kind, const char *type, int precision, int scale)
{
    column_fact_t c = {.kind = kind, .length = -1, .precision = precision, .scale = scale};
    snprintf(c.name, sizeof c.name, "%s", name);
    snprintf(c.type, sizeof c.type, "%s", type);
    return c;
}

/* Field `field` set to `raw`, decoded by the fast reader or the reference one. */
static int decode_by(pipeline_id_t p, const char *field, const char *raw, int reference, event_t *ev, rejection_t *rej)
{
    char *json = msg(p, field, raw, NULL);
    int rc = reference ? decode_record_reference(pipeline_get(p), json, strlen(json), ev, rej)
                       : decode_record(pipeline_get(p), json, strlen(json), ev, rej);
    free(json);
    return rc;
}

/* Both readers store field `field` set to `raw` as `expected`. */
static void both_store(pipeline_id_t p, const char *field, const char *raw, const char *expected)
{
    for (int reference = 0; reference < 2; reference++) {
        event_t ev = {0};
        rejection_t rej = {0};
        if (decode_by(p, field, raw, reference, &ev, &rej) != 0)
            fail_msg("%s=%s refused by the %s reader: %s", field, raw, reference ? "reference" : "fast", rej.detail);
        assert_string_equal(event_column(&ev, field_index(p, field)), expected);
        event_free(&ev);
    }
}

/* Both readers refuse field `field` set to `raw`, naming it and `mentions`. */
static void both_refuse(pipeline_id_t p, const char *field, const char *raw, const char *mentions)
{
    for (int reference = 0; reference < 2; reference++) {
        event_t ev = {0};
        rejection_t rej = {0};
        int rc = decode_by(p, field, raw, reference, &ev, &rej);
        event_free(&ev);
        if (rc == 0) fail_msg("%s=%s accepted by the %s reader", field, raw, reference ? "reference" : "fast");
        assert_string_equal(rej.error_type, ERROR_INVALID_FIELD);
        if (strncmp(rej.detail, field, strlen(field)) != 0 || !strstr(rej.detail, mentions))
            fail_msg("detail \"%s\" does not name %s and \"%s\"", rej.detail, field, mentions);
    }
}

static void a_numbers_text_is_found_by_its_members_place(void **state)
{
    (void)state;
    static const char doc[] = "{ \"\\u0073core\" : 4.10 , \"x\": {\"a\": [\"]}\\\"\", 1]}, \"package_name\": \"a\","
                              " \"crawled_at\": \"2026-11-29T12:00:00Z\", \"price\" :\t0.990 }";
    for (int reference = 0; reference < 2; reference++) {
        event_t ev = {0};
        rejection_t rej = {0};
        const pipeline_def_t *def = pipeline_get(APP);
        int rc = reference ? decode_record_reference(def, doc, strlen(doc), &ev, &rej)
                           : decode_record(def, doc, strlen(doc), &ev, &rej);
        if (rc != 0) fail_msg("refused: %s", rej.detail);
        assert_string_equal(event_column(&ev, field_index(APP, "score")), "4.10");
        assert_string_equal(event_column(&ev, field_index(APP, "price")), "0.990");
        event_free(&ev);
    }
}

static void an_unconstrained_numeric_stores_every_digit_as_sent(void **state)
{
    (void)state;
    bind_with(APP, "app_stats", "price", column_typed("price", COLUMN_NUMERIC, "numeric", -1, -1));
    both_store(APP, "price", "0.1", "0.1");
    both_store(APP, "price", "12345678901234567", "12345678901234567");
    both_store(APP, "price", "123456789.123456789", "123456789.123456789");
    both_store(APP, "price", "1.10", "1.10");
    both_store(APP, "price", "2.5E+3", "2.5E+3");
    /* Beyond int64 and beyond a double: still NUMERIC's to hold. */
    both_store(APP, "price", "123456789012345678901234567890", "123456789012345678901234567890");
    both_store(APP, "price", "1e400", "1e400");
    both_store(APP, "price", "1e-400", "1e-400");
    /* numeric_in's own limits. */
    both_store(APP, "price", "9e131071", "9e131071");
    both_refuse(APP, "price", "1e131072", "overflows numeric format");
    both_refuse(APP, "price", "1e-16384", "overflows numeric format");
    both_refuse(APP, "price", "1e2000000000", "overflows numeric format");
    /* The declared min 0, compared exactly: a negative below any double's
     * resolution is still negative. */
    both_store(APP, "price", "-0", "-0");
    both_refuse(APP, "price", "-1e-400", "below the minimum 0");
    shipped_schema_bind();
}

static field_spec_t *price_spec(void)
{
    return (field_spec_t *)&pipeline_get(APP)->fields[field_index(APP, "price")];
}

/* The definitions stay loaded between tests: the bound set here goes. */
static int forget_price_bound(void **state)
{
    (void)state;
    price_spec()->declared.max_set = false;
    shipped_schema_bind();
    return 0;
}

static void a_declared_bound_on_a_numeric_is_compared_exactly(void **state)
{
    (void)state;
    bind_with(APP, "app_stats", "price", column_typed("price", COLUMN_NUMERIC, "numeric", -1, -1));
    price_spec()->declared.max_set = true;
    price_spec()->declared.max = 0.1; /* the double 0.1000000000000000055511151231257827021181583404541015625 */
    both_store(APP, "price", "0.1", "0.1");
    both_store(APP, "price", "1000e-4", "1000e-4");
    both_store(APP, "price", "0.1000000000000000055511151231257827021181583404541015625",
               "0.1000000000000000055511151231257827021181583404541015625");
    /* Each reads as that double, and each is above it. */
    both_refuse(APP, "price", "0.10000000000000000555111512312578270211815834045410156251", "above the maximum");
    both_refuse(APP, "price", "0.10000000000000001", "above the maximum");
}

static void a_numeric_of_any_precision_is_checked_exactly_on_the_text(void **state)
{
    (void)state;
    bind_with(APP, "app_stats", "price", column_typed("price", COLUMN_NUMERIC, "numeric(30,10)", 30, 10));
    both_store(APP, "price", "12345678901234567890.0123456789", "12345678901234567890.0123456789");
    both_store(APP, "price", "99999999999999999999.9999999999", "99999999999999999999.9999999999");
    both_store(APP, "price", "1.5000000000000000000000", "1.5000000000000000000000");
    both_refuse(APP, "price", "12345678901234567890.01234567891", "more than 10 decimals");
    both_refuse(APP, "price", "1e20", "out of range for numeric(30,10)");
    shipped_schema_bind();
    /* The shipped numeric(12,2): decimals PostgreSQL would round away are refused. */
    both_store(APP, "price", "1.005e2", "1.005e2");
    both_refuse(APP, "price", "1.005", "more than 2 decimals");
    both_refuse(APP, "price", "0.30000000000000004", "more than 2 decimals");
}

static void real_is_judged_as_float4in_judges_it(void **state)
{
    (void)state;
    bind_with(NET, "network_metrics", "duration_seconds",
              column_typed("duration_seconds", COLUMN_FLOAT4, "real", -1, -1));
    both_store(NET, "duration_seconds", "3.4028235e38", "3.4028235e38"); /* rounds to the float maximum */
    both_refuse(NET, "duration_seconds", "3.4028236e38", "out of range for type real");
    both_refuse(NET, "duration_seconds", "1e-46", "out of range for type real"); /* underflows to zero */
    both_store(NET, "duration_seconds", "1e-45", "1e-45");                       /* a subnormal is kept */
    both_store(NET, "duration_seconds", "0e-400", "0e-400");
    both_store(NET, "duration_seconds", "16777217", "16777217");
    shipped_schema_bind();
}

static void double_precision_is_judged_as_float8in_judges_it(void **state)
{
    (void)state;
    both_store(NET, "duration_seconds", "1.7976931348623157e308", "1.7976931348623157e308");
    both_refuse(NET, "duration_seconds", "1.7976931348623159e308", "out of range for type double precision");
    both_refuse(NET, "duration_seconds", "1e400", "out of range for type double precision");
    both_refuse(NET, "duration_seconds", "1e-400", "out of range for type double precision");
    both_store(NET, "duration_seconds", "4.9e-324", "4.9e-324");
    both_store(NET, "duration_seconds", "0.1", "0.1");
    both_store(NET, "duration_seconds", "1.10", "1.10");
}

/* ------------------------------------------------------------------------ */
/* Price                                                                    */

static void price_with_two_decimals_is_stored_as_sent(void **state)
{
    (void)state;
    field_accepted(APP, "price", "0.99", "0.99");
    field_accepted(APP, "price", "0", "0");
    field_accepted(APP, "price", "0.0", "0.0");
    field_accepted(APP, "price", "0.1", "0.1");
    field_accepted(APP, "price", "0.07", "0.07");
    field_accepted(APP, "price", "0.29", "0.29");
    field_accepted(APP, "price", "19.9", "19.9");
    field_accepted(APP, "price", "4.35", "4.35");
    field_accepted(APP, "price", "1.005e2", "1.005e2");
    field_accepted(APP, "price", "1234567890.12", "1234567890.12");
    field_accepted(APP, "price", "9999999999.99", "9999999999.99");
    field_accepted(APP, "price", "9999999999", "9999999999");
    field_accepted(APP, "price", "0.990000", "0.990000");
}

static void price_with_three_decimals_is_rejected(void **state)
{
    (void)state;
    expect_reject(APP, msg(APP, "price", "0.999", NULL), ERROR_INVALID_FIELD, "price:",
                  "2 decimals");
    field_rejected(APP, "price", "1.005");
    field_rejected(APP, "price", "0.001");
    field_rejected(APP, "price", "19.991");
    field_rejected(APP, "price", "1000.001");
    field_rejected(APP, "price", "123456.789");
    field_rejected(APP, "price", "1234567890.125");
    field_rejected(APP, "price", "9999999999.985");
    field_rejected(APP, "price", "0.30000000000000004");
}

static void price_beyond_numeric_12_2_is_rejected(void **state)
{
    (void)state;
    expect_reject(APP, msg(APP, "price", "10000000000", NULL), ERROR_INVALID_FIELD, "price:",
                  "out of range");
    field_rejected(APP, "price", "10000000000.01");
    field_rejected(APP, "price", "1e300");
}

static void negative_price_is_rejected(void **state)
{
    (void)state;
    field_rejected(APP, "price", "-0.01");
    field_rejected(APP, "price", "-1");
}

/* ------------------------------------------------------------------------ */
/* UUID, boolean                                                            */

static void upper_case_uuid_is_normalised_to_lower_case(void **state)
{
    (void)state;
    field_accepted(NET, "analysis_id", "\"3F2504E0-4F89-11D3-9A0C-0305E82C3301\"",
                 "3f2504e0-4f89-11d3-9a0c-0305e82c3301");
    field_accepted(NET, "analysis_id", "\"AbCdEf01-2345-6789-aBcD-eF0123456789\"",
                 "abcdef01-2345-6789-abcd-ef0123456789");
    field_accepted(NET, "analysis_id", "\"00000000-0000-0000-0000-000000000000\"",
                 "00000000-0000-0000-0000-000000000000");
}

static void spaces_beyond_a_varchar_are_cut_as_postgresql_cuts_them(void **state)
{
    (void)state;
    char raw[160], kept[80];
    /* app_version is VARCHAR(64): 64 characters kept, the spaces beyond cut. */
    snprintf(raw, sizeof raw, "\"%064d   \"", 7);
    snprintf(kept, sizeof kept, "%064d", 7);
    both_store(REV, "app_version", raw, kept);
    snprintf(raw, sizeof raw, "\"1.2.3%70s\"", "");
    snprintf(kept, sizeof kept, "1.2.3%59s", "");
    both_store(REV, "app_version", raw, kept);
    /* Anything else beyond the length is too long. */
    snprintf(raw, sizeof raw, "\"%064d  x\"", 7);
    both_refuse(REV, "app_version", raw, "67 characters, longer than the column's 64");
    snprintf(raw, sizeof raw, "\"%064d\\t\"", 7);
    both_refuse(REV, "app_version", raw, "longer than the column's 64");
}

static void a_char_column_is_padded_to_its_length_as_postgresql_stores_it(void **state)
{
    (void)state;
    column_fact_t c = column_typed("app_version", COLUMN_CHAR, "character(8)", -1, -1);
    c.length = 8;
    bind_with(REV, "reviews", "app_version", c);
    both_store(REV, "app_version", "\"1.2\"", "1.2     ");
    both_store(REV, "app_version", "\"\u00e9t\u00e9\"", "\u00e9t\u00e9     ");
    both_store(REV, "app_version", "\"12345678   \"", "12345678");
    both_refuse(REV, "app_version", "\"123456789\"", "9 characters, longer than the column's 8");
    shipped_schema_bind();
}

static void types_postgresql_judges_are_handed_over_as_text(void **state)
{
    (void)state;
    bind_with(APP, "app_stats", "version", column_typed("version", COLUMN_TEXT_INPUT, "date", -1, -1));
    both_store(APP, "version", "\"2026-02-30\"", "2026-02-30"); /* PostgreSQL's to refuse */
    both_refuse(APP, "version", "20261129", "expected a string, got an integer");
    both_refuse(APP, "version", "\"a\\u0000b\"", "NUL");
    /* json and jsonb without a kind: any JSON value, its text as sent. */
    bind_with(APP, "app_stats", "title", column_typed("title", COLUMN_JSON, "json", -1, -1));
    both_store(APP, "title", "{\"b\": [1, 2.50, \"\\u00e9\"], \"a\": {}}", "{\"b\": [1, 2.50, \"\\u00e9\"], \"a\": {}}");
    both_store(APP, "title", "1e400", "1e400");
    both_store(APP, "title", "\"\\u0000overflow\"", "\"\\u0000overflow\"");
    /* Arrays: a JSON array as an array literal, or a string holding one. */
    bind_with(APP, "app_stats", "version", column_typed("version", COLUMN_TEXT_ARRAY, "date[]", -1, -1));
    both_store(APP, "version", "[\"2026-11-29\", null, \"a,\\\"b\\\\\"]", "{\"2026-11-29\",NULL,\"a,\\\"b\\\\\"}");
    both_store(APP, "version", "[]", "{}");
    both_store(APP, "version", "\"{2026-11-29}\"", "{2026-11-29}");
    both_refuse(APP, "version", "[\"2026-11-29\", 5]", "version[1]: expected a string or null, got an integer");
    bind_with(APP, "app_stats", "version", column_typed("version", COLUMN_JSON_ARRAY, "jsonb[]", -1, -1));
    both_store(APP, "version", "[ {\"a\": \"]\"} , null,2.50 ]", "{\"{\\\"a\\\": \\\"]\\\"}\",\"null\",\"2.50\"}");
    shipped_schema_bind();
}

static void every_uuid_form_postgresql_reads_is_stored_as_postgresql_writes_it(void **state)
{
    (void)state;
    static const char *const forms[] = {
        "\"3f2504e04f8911d39a0c0305e82c3301\"",
        "\"{3F2504E0-4F89-11D3-9A0C-0305E82C3301}\"",
        "\"{3f2504e04f8911d39a0c0305e82c3301}\"",
        "\"3f25-04e0-4f89-11d3-9a0c-0305-e82c-3301\"",
        "\"3F2504E04F89-11D39A0C-0305E82C3301\"",
    };
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++)
        both_store(NET, "analysis_id", forms[i], "3f2504e0-4f89-11d3-9a0c-0305e82c3301");
}

static void invalid_uuid_is_rejected(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "\"\"",
        "\"3f2504e0-4f89-11d3-9a0c-0305e82c330\"",   /* too short */
        "\"3f2504e0-4f89-11d3-9a0c-0305e82c33011\"", /* too long */
        "\"3g2504e0-4f89-11d3-9a0c-0305e82c3301\"",  /* bad hex */
        "\"3f2504e0-4f89-11d3-9a0c-0305e82c330z\"",  /* bad hex at the end */
        "\"3f2504e0_4f89_11d3_9a0c_0305e82c3301\"",  /* wrong separator */
        "\"3f2504e04-f89-11d3-9a0c-0305e82c3301\"",  /* dash misplaced */
        "\"{3f2504e0-4f89-11d3-9a0c-0305e82c3301\"",  /* a brace not closed */
        "\"3f2504e0-4f89-11d3-9a0c-0305e82c3301}\"",  /* a brace not opened */
        "\"3f2504e0--4f89-11d3-9a0c-0305e82c3301\"", /* two hyphens */
        "\"3f2504e0-4f89-11d3-9a0c-0305e82c3301-\"", /* a hyphen after the last group */
        "\"3f-2504e0-4f89-11d3-9a0c-0305e82c3301\"", /* a hyphen after two digits */
        "\" 3f2504e0-4f89-11d3-9a0c-0305e82c3301\"", /* padded */
        "\"3f2504e0-4f89-11d3-9a0c-0305e82c33\xc3\xa9\"", /* multi-byte */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_reject(NET, msg(NET, "analysis_id", bad[i], NULL), ERROR_INVALID_FIELD,
                      "analysis_id:", "UUID");
}

static void is_free_is_written_as_t_or_f(void **state)
{
    (void)state;
    field_accepted(APP, "is_free", "true", "t");
    field_accepted(APP, "is_free", "false", "f");
}

/* ------------------------------------------------------------------------ */
/* Unknown fields, protocols                                                */

static void unknown_fields_are_ignored(void **state)
{
    (void)state;
    static const column_t want[] = {
        {"analysis_id", "3f2504e0-4f89-11d3-9a0c-0305e82c3301"},
        {"analyzed_at", "2026-11-29 12:00:00.000000+00"},
        {"duration_seconds", "12.5"},
        {"total_packets", "1500"},
        {"total_bytes", "9223372036854775807"},
        {"unique_hosts", "17"},
        {"dns_queries", "42"},
        {"tls_handshakes", "9"},
        {"avg_packet_size", "512.25"},
        {"protocols", "{\"tcp\":1200,\"udp\":280,\"icmp\":20}"},
        {NULL, NULL},
    };
    expect_columns(NET,
                   msg(NET, "schema_version", "2", "note", "\"has a NUL \\u0000 inside\"",
                       "nested", "{\"deep\": {\"x\": [1, \"\\u0000\", null, -5, 1.5]}}",
                       "application_id", "\"not-a-number\"", "packageName", "\"com.other\"",
                       "tags", "[]", "flag", "null", NULL),
                   want, 0);
    /* Unknown fields in every pipeline. */
    event_t ev = {0};
    decode_ok(APP, msg(APP, "extra", "{\"k\": \"\\u0000\"}", NULL), &ev);
    event_free(&ev);
    decode_ok(REV, msg(REV, "sentiment", "\"positive\"", "sentiment_score", "-7", NULL), &ev);
    event_free(&ev);
}

static void protocols_object_is_stored_as_compact_json(void **state)
{
    (void)state;
    field_accepted(NET, "protocols", "{ \"tcp\" : 120 ,\n \"udp\" : 7 }", "{\"tcp\":120,\"udp\":7}");
    field_accepted(NET, "protocols", "{}", "{}");
    field_accepted(NET, "protocols", "{\"quic\": 0}", "{\"quic\":0}");
    field_accepted(NET, "protocols", "{\"h\\u00e9\": 1, \"a\\\"b\": 2}",
                 "{\"h\xc3\xa9\":1,\"a\\\"b\":2}");
}

static void protocols_with_non_integer_or_negative_count_is_rejected(void **state)
{
    (void)state;
    expect_reject(NET, msg(NET, "protocols", "{\"tcp\": 1, \"udp\": -1}", NULL),
                  ERROR_INVALID_FIELD, "protocols.udp:", NULL);
    expect_reject(NET, msg(NET, "protocols", "{\"tcp\": 1.5}", NULL), ERROR_INVALID_FIELD,
                  "protocols.tcp:", NULL);
    expect_reject(NET, msg(NET, "protocols", "{\"tcp\": \"12\"}", NULL), ERROR_INVALID_FIELD,
                  "protocols.tcp:", NULL);
    expect_reject(NET, msg(NET, "protocols", "{\"tcp\": null}", NULL), ERROR_INVALID_FIELD,
                  "protocols.tcp:", NULL);
    expect_reject(NET, msg(NET, "protocols", "{\"tcp\": {\"syn\": 1}}", NULL),
                  ERROR_INVALID_FIELD, "protocols.tcp:", NULL);
    expect_reject(NET, msg(NET, "protocols", "{\"tcp\": [1]}", NULL), ERROR_INVALID_FIELD,
                  "protocols.tcp:", NULL);
    expect_reject(NET, msg(NET, "protocols", "{\"tcp\": true}", NULL), ERROR_INVALID_FIELD,
                  "protocols.tcp:", NULL);
}

static void every_pipeline_fits_in_an_event(void **state)
{
    (void)state;
    /* event_t has PIPELINE_MAX_FIELDS slots: a pipeline with more fields would
     * write past them. */
    for (int p = 0; p < pipeline_count(); p++) {
        const pipeline_def_t *def = pipeline_get((pipeline_id_t)p);
        assert_true(def->field_count <= PIPELINE_MAX_FIELDS);
    }
}

static void every_pipeline_keys_and_versions_by_required_fields_it_has(void **state)
{
    (void)state;
    for (int p = 0; p < pipeline_count(); p++) {
        const pipeline_def_t *def = pipeline_get((pipeline_id_t)p);
        assert_true(def->key_count >= 1);
        for (size_t k = 0; k < def->key_count; k++) assert_true(def->fields[def->key_fields[k]].required);
        if (def->version_field) {
            /* The decoder keeps a version only from a timestamp or an integer. */
            int version = pipeline_field_index(def, def->version_field);
            assert_true(version >= 0);
            assert_true(def->fields[version].required);
            assert_true(def->fields[version].kind == FIELD_TIMESTAMP || def->fields[version].kind == FIELD_INTEGER);
        }
    }
}

static void every_pipeline_conflicts_on_its_natural_key(void **state)
{
    (void)state;
    char target[160];
    for (int p = 0; p < pipeline_count(); p++) {
        const pipeline_def_t *def = pipeline_get((pipeline_id_t)p);
        snprintf(target, sizeof target, "ON CONFLICT (%s) ", def->key_sql);
        assert_true(strncmp(def->conflict_sql, target, strlen(target)) == 0);
    }
    char *cols = pipeline_key_columns(pipeline_get(PIPELINE_APP_STATS), " and ");
    assert_string_equal(cols, "application_id and crawled_at");
    free(cols);
    /* The built-in definitions write what the service always wrote, every
     * name quoted. */
    assert_string_equal(pipeline_get(PIPELINE_APP_STATS)->conflict_sql,
                        "ON CONFLICT (\"application_id\", \"crawled_at\") DO NOTHING");
    assert_string_equal(pipeline_get(PIPELINE_NETWORK_METRICS)->conflict_sql,
                        "ON CONFLICT (\"analysis_id\") DO NOTHING");
    assert_string_equal(pipeline_get(PIPELINE_REVIEWS)->conflict_sql,
                        "ON CONFLICT (\"review_id\") DO UPDATE SET "
                        "\"thumbs_up_count\" = EXCLUDED.\"thumbs_up_count\", \"score\" = EXCLUDED.\"score\", "
                        "\"content\" = EXCLUDED.\"content\", \"reply_content\" = EXCLUDED.\"reply_content\", "
                        "\"replied_at\" = EXCLUDED.\"replied_at\", \"app_version\" = EXCLUDED.\"app_version\", "
                        "\"last_synced_at\" = EXCLUDED.\"last_synced_at\" "
                        "WHERE t.\"last_synced_at\" IS NULL OR EXCLUDED.\"last_synced_at\" > t.\"last_synced_at\"");
}

static void the_list_of_pipeline_names_is_the_table_of_pipelines(void **state)
{
    (void)state;
    char names[128];
    assert_string_equal(pipeline_names(names, sizeof names), "app-stats, reviews, network-metrics");
    for (int p = 0; p < pipeline_count(); p++) {
        const char *name = pipeline_get((pipeline_id_t)p)->name;
        assert_ptr_equal(pipeline_find(name, strlen(name)), pipeline_get((pipeline_id_t)p));
    }
    assert_null(pipeline_find("reviews2", 8));
}

/* The commands' --type takes exactly the codes a dead letter can carry. */
static void every_error_type_is_known_and_nothing_else(void **state)
{
    (void)state;
    const char *codes[] = {ERROR_EMPTY_PAYLOAD,   ERROR_INVALID_UTF8,     ERROR_INVALID_JSON,
                           ERROR_MISSING_FIELD,   ERROR_INVALID_FIELD,    ERROR_UNREGISTERED_APP,
                           ERROR_DATABASE_REJECTED, ERROR_NO_MAGIC_BYTE,  ERROR_SHORT_HEADER,
                           ERROR_UNKNOWN_SCHEMA,    ERROR_UNDECODABLE,    ERROR_TRAILING_BYTES};
    assert_int_equal(sizeof codes / sizeof *codes, DECODE_ERROR_TYPE_COUNT);
    for (size_t i = 0; i < DECODE_ERROR_TYPE_COUNT; i++) {
        assert_string_equal(decode_error_types[i], codes[i]);
        assert_int_equal((int)i, decode_error_type_index(codes[i]));
    }
    assert_int_equal(-1, decode_error_type_index("bogus"));
    assert_int_equal(-1, decode_error_type_index("INVALID_JSON"));
    assert_int_equal(-1, decode_error_type_index("invalid_json "));
    assert_int_equal(-1, decode_error_type_index(""));
}

/* ------------------------------------------------------------------------ */
/* Two parsers, one outcome (DESIGN.md)                                     */

static bool fast_reader_reads(pipeline_id_t p, char *json)
{
    const pipeline_def_t *def = pipeline_get(p);
    jv_t vals[PIPELINE_MAX_FIELDS + 1];
    bool read = json_fast_read(json, strlen(json), def->members, def->field_count + 1, vals);
    free(json);
    return read;
}

/* The fast reader takes every ordinary record, so the speed is real, and
 * declines exactly the unusual ones its reference reader must judge. */
static void fast_reader_reads_ordinary_records_and_declines_unusual_ones(void **state)
{
    (void)state;
    for (int p = 0; p < pipeline_count(); p++) assert_true(fast_reader_reads((pipeline_id_t)p, msg((pipeline_id_t)p, NULL)));
    assert_true(fast_reader_reads(REV, msg(REV, "extra", "{\"a\": [1, {\"b\": null}]}", NULL)));
    assert_true(fast_reader_reads(REV, msg(REV, "content", "\"\\ud83d\\ude00\"", NULL)));

    assert_false(fast_reader_reads(REV, msg(REV, "score", "5, \"score\": 1", NULL)));
    assert_false(fast_reader_reads(REV, msg(REV, "extra", "{\"a\": {\"b\": 1, \"b\": 2}}", NULL)));
    assert_false(fast_reader_reads(REV, msg(REV, "extra", "{\"a\\u0000\": 1}", NULL)));
    assert_false(fast_reader_reads(REV, msg(REV, "extra", "18446744073709551615", NULL)));
    assert_false(fast_reader_reads(REV, msg(REV, "extra", "1e400", NULL)));
    assert_false(fast_reader_reads(REV, msg(REV, "content", "\"\\ud800\"", NULL)));
    assert_false(fast_reader_reads(REV, strdup("[1, 2]")));
    char *long_content = repeat_str("x", JSON_FAST_MAX_BYTES);
    assert_false(fast_reader_reads(REV, msg(REV, "content", long_content, NULL)));
    free(long_content);
    assert_false(fast_reader_reads(REV, strdup("{\"package_name\": \"a\"} x")));

    sbuf_t wide = {0};
    sb_add(&wide, "{");
    for (int k = 0; k <= JSON_FAST_MAX_KEYS; k++) {
        char key[32];
        snprintf(key, sizeof key, "%s\"k%d\": %d", k ? ", " : "", k, k);
        sb_add(&wide, key);
    }
    sb_add(&wide, "}");
    assert_false(fast_reader_reads(REV, msg(REV, "extra", wide.s, NULL)));
    free(wide.s);
}

/* decode_record and the reference reader alone agree to the byte: outcome,
 * error_type, detail, every column and the version. */
static void expect_same_as_reference(pipeline_id_t p, char *json)
{
    const pipeline_def_t *def = pipeline_get(p);
    event_t ev = {0}, ref = {0};
    rejection_t rej = {0}, ref_rej = {0};
    char shown[320];
    snip(shown, sizeof shown, json);
    int rc = decode_record(def, json, strlen(json), &ev, &rej);
    int ref_rc = decode_record_reference(def, json, strlen(json), &ref, &ref_rej);
    free(json);
    if (rc != ref_rc) fail_msg("decoder %d, reference %d: %s", rc, ref_rc, shown);
    if (rc != 0) {
        if (strcmp(rej.error_type, ref_rej.error_type) != 0 || strcmp(rej.detail, ref_rej.detail) != 0)
            fail_msg("decoder %s (%s), reference %s (%s): %s", rej.error_type, rej.detail,
                     ref_rej.error_type, ref_rej.detail, shown);
    } else {
        assert_string_equal(event_package_name(&ev), event_package_name(&ref));
        assert_int_equal(ev.version, ref.version);
        for (size_t i = 0; i < def->field_count; i++) {
            const char *a = event_column(&ev, i), *b = event_column(&ref, i);
            if ((a == NULL) != (b == NULL) || (a && strcmp(a, b) != 0))
                fail_msg("%s: decoder \"%s\", reference \"%s\": %s", def->fields[i].name,
                         a ? a : "NULL", b ? b : "NULL", shown);
        }
    }
    event_free(&ev);
    event_free(&ref);
}

static void every_record_decodes_as_the_reference_reader_decodes_it(void **state)
{
    (void)state;
    for (int i = 0; i < pipeline_count(); i++) {
        pipeline_id_t p = (pipeline_id_t)i;
        expect_same_as_reference(p, msg(p, NULL));
        expect_same_as_reference(p, msg(p, "extra", "18446744073709551615", NULL));
        expect_same_as_reference(p, msg(p, "extra", "1e400", NULL));
        expect_same_as_reference(p, msg(p, "extra", "{\"a\": {\"b\": 1, \"b\": 2}}", NULL));
        expect_same_as_reference(p, msg(p, "extra", "[{\"k\\u0000\": 1}]", NULL));
        expect_same_as_reference(p, msg(p, "package_name", "1e400", NULL));
        expect_same_as_reference(p, msg(p, "package_name", "\"a\\u0000b\"", NULL));
        expect_same_as_reference(p, strdup("\xef\xbb\xbf{\"package_name\": \"a\"}"));
        expect_same_as_reference(p, strdup("\"just a string\""));
        expect_same_as_reference(p, strdup("{\"package_name\": \"a\"}\n\t "));
        char *deep = repeat_raw("[", 1100);
        expect_same_as_reference(p, deep);
    }
    /* An integer beyond int64 anywhere turns every integer into a double in
     * the reference reader: a known field at 2^53 is then refused there. */
    expect_same_as_reference(NET, msg(NET, "total_bytes", "9007199254740993", "extra",
                                      "18446744073709551616", NULL));
    expect_same_as_reference(NET, msg(NET, "total_bytes", "9007199254740993", "extra",
                                      "18446744073709551615", NULL));
    expect_same_as_reference(NET, msg(NET, "protocols", "{\"a\\nb\\u0001\\\"\\\\/\\u007f\": 1e3, \"x\": 5.0, \"y\": -0.0}", NULL));
    expect_same_as_reference(NET, msg(NET, "protocols", "{\"tcp\": 1, \"tcp\": 2}", NULL));
    expect_same_as_reference(APP, msg(APP, "histogram", "[1, 2.0, 3e0, 4, 5]", NULL));
    expect_same_as_reference(APP, msg(APP, "histogram", "[1, [2], {}, \"4\", null]", NULL));
    expect_same_as_reference(APP, msg(APP, "histogram", "[1, 2, 3, 4, 18446744073709551615]", NULL));
    /* A string spelt like the reference reader's overflow marker is a
     * string to both, top-level or a count's value. */
    expect_same_as_reference(NET, msg(NET, "protocols", "{\"tcp\": \"\\u0000overflow\"}", NULL));
    expect_same_as_reference(APP, msg(APP, "score", "\"\\u0000overflow\"", NULL));
    /* A number's text is found by its member's place, whatever comes
     * before it: escaped keys, nested strings holding brackets, spaces. */
    expect_same_as_reference(APP, strdup("{ \"\\u0073core\" : 4.10 , \"x\": {\"a\": [\"]}\", 1]}, "
                                         "\"package_name\": \"a\", \"crawled_at\": \"2026-11-29T12:00:00Z\", "
                                         "\"price\" :\t0.990 }"));
    expect_same_as_reference(APP, msg(APP, "price", "123456789012345678901234567890", NULL));
}

/* The stored text of a counts object does not depend on the parser: its
 * keys escaped as jansson's compact output escapes them. */
static void protocols_keys_are_written_with_json_escapes(void **state)
{
    (void)state;
    field_accepted(NET, "protocols", "{\"a\\nb\\u001f\\\"\\\\\\/\\t\": 1}",
                   "{\"a\\nb\\u001F\\\"\\\\/\\t\":1}");
    field_accepted(NET, "protocols", "{\"x\": 1e3, \"y\": 5.0}", "{\"x\":1000.0,\"y\":5.0}");
}

int main(void)
{
    shipped_schema_bind();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(app_stats_full_message_decodes_every_column_exactly),
        cmocka_unit_test(reviews_full_message_decodes_every_column_exactly),
        cmocka_unit_test(network_metrics_full_message_decodes_every_column_exactly),
        cmocka_unit_test(app_stats_with_only_required_fields_has_null_optional_columns),
        cmocka_unit_test(reviews_with_only_required_fields_has_null_optional_columns),
        cmocka_unit_test(network_metrics_with_only_required_fields_has_null_optional_columns),
        cmocka_unit_test(null_optional_fields_are_sql_null),
        cmocka_unit_test(reviews_version_is_last_synced_at_in_microseconds),
        cmocka_unit_test(event_reused_for_next_record_holds_only_new_values),
        cmocka_unit_test(empty_value_is_empty_payload),
        cmocka_unit_test(null_value_is_empty_payload),
        cmocka_unit_test(array_instead_of_object_is_invalid_json),
        cmocka_unit_test(scalar_instead_of_object_is_invalid_json),
        cmocka_unit_test(string_instead_of_object_is_invalid_json),
        cmocka_unit_test(malformed_json_is_invalid_json),
        cmocka_unit_test(value_length_bounds_the_parse),
        cmocka_unit_test(duplicate_top_level_key_is_invalid_json),
        cmocka_unit_test(duplicate_nested_key_is_invalid_json),
        cmocka_unit_test(app_stats_missing_or_null_required_field_is_missing_field),
        cmocka_unit_test(reviews_missing_or_null_required_field_is_missing_field),
        cmocka_unit_test(network_metrics_missing_or_null_required_field_is_missing_field),
        cmocka_unit_test(empty_object_is_missing_package_name),
        cmocka_unit_test(camel_case_legacy_message_is_missing_field),
        cmocka_unit_test(app_stats_wrong_type_is_invalid_field),
        cmocka_unit_test(reviews_wrong_type_is_invalid_field),
        cmocka_unit_test(network_metrics_wrong_type_is_invalid_field),
        cmocka_unit_test(naive_timestamp_is_utc),
        cmocka_unit_test(utc_designator_and_zero_offset_are_utc),
        cmocka_unit_test(offset_plus_0330_is_converted_to_utc),
        cmocka_unit_test(microseconds_are_kept_exactly),
        cmocka_unit_test(timestamp_february_30_is_rejected),
        cmocka_unit_test(timestamp_month_13_is_rejected),
        cmocka_unit_test(timestamp_hour_24_is_rejected),
        cmocka_unit_test(timestamp_year_0000_is_rejected),
        cmocka_unit_test(timestamp_beyond_microseconds_is_rejected),
        cmocka_unit_test(timestamp_with_text_after_it_is_rejected),
        cmocka_unit_test(timestamp_infinity_is_rejected),
        cmocka_unit_test(invalid_timestamp_in_every_timestamp_field_names_the_field),
        cmocka_unit_test(review_score_accepts_1_to_5_only),
        cmocka_unit_test(thumbs_up_count_at_int32_max_is_accepted),
        cmocka_unit_test(thumbs_up_count_beyond_int32_is_rejected),
        cmocka_unit_test(network_integer_counts_at_int32_limit_and_one_beyond),
        cmocka_unit_test(bigint_fields_at_int64_max_are_accepted),
        cmocka_unit_test(total_bytes_beyond_int64_is_invalid_field),
        cmocka_unit_test(unknown_field_with_an_integer_beyond_int64_is_ignored),
        cmocka_unit_test(an_unknown_integer_beyond_64_bits_leaves_the_known_integers_exact),
        cmocka_unit_test(a_leading_byte_order_mark_is_refused_by_both_readers),
        cmocka_unit_test(number_beyond_a_double_names_its_field),
        cmocka_unit_test(unknown_field_with_a_number_beyond_a_double_is_ignored),
        cmocka_unit_test(nul_in_an_object_key_is_an_invalid_field),
        cmocka_unit_test(negative_counts_are_rejected),
        cmocka_unit_test(fractional_number_for_integer_field_is_rejected),
        cmocka_unit_test(integral_number_for_integer_field_is_accepted_as_integer),
        cmocka_unit_test(integral_number_beyond_exact_double_range_is_rejected),
        cmocka_unit_test(numbers_are_stored_as_the_text_sent),
        cmocka_unit_test(negative_zero_reaches_postgresql_as_sent),
        cmocka_unit_test(a_numbers_text_is_found_by_its_members_place),
        cmocka_unit_test(an_unconstrained_numeric_stores_every_digit_as_sent),
        cmocka_unit_test(a_numeric_of_any_precision_is_checked_exactly_on_the_text),
        cmocka_unit_test_teardown(a_declared_bound_on_a_numeric_is_compared_exactly, forget_price_bound),
        cmocka_unit_test(real_is_judged_as_float4in_judges_it),
        cmocka_unit_test(double_precision_is_judged_as_float8in_judges_it),
        cmocka_unit_test(app_score_accepts_0_to_5_only),
        cmocka_unit_test(negative_duration_and_packet_size_are_rejected),
        cmocka_unit_test(number_overflow_1e400_is_rejected),
        cmocka_unit_test(nan_and_infinity_literals_are_rejected),
        cmocka_unit_test(user_name_of_255_two_byte_characters_is_accepted_256_rejected),
        cmocka_unit_test(app_version_of_64_characters_is_accepted_65_rejected),
        cmocka_unit_test(review_id_of_255_characters_is_accepted_256_rejected),
        cmocka_unit_test(app_stats_title_and_version_lengths_are_limited),
        cmocka_unit_test(package_name_longer_than_255_characters_is_rejected),
        cmocka_unit_test(empty_package_name_and_review_id_are_rejected),
        cmocka_unit_test(long_review_content_is_accepted_whole),
        cmocka_unit_test(nul_in_review_content_is_rejected_naming_the_field),
        cmocka_unit_test(nul_in_package_name_is_rejected_naming_the_field),
        cmocka_unit_test(nul_in_any_string_field_is_rejected_naming_the_field),
        cmocka_unit_test(nul_in_protocol_name_is_rejected),
        cmocka_unit_test(lone_surrogate_escape_is_rejected),
        cmocka_unit_test(escaped_surrogate_pair_is_one_character),
        cmocka_unit_test(raw_0xff_byte_is_invalid_utf8),
        cmocka_unit_test(rejection_detail_is_valid_utf8_when_a_long_multibyte_name_is_cut),
        cmocka_unit_test(overlong_encoding_is_invalid_utf8),
        cmocka_unit_test(encoded_surrogate_is_invalid_utf8),
        cmocka_unit_test(truncated_or_out_of_range_sequence_is_invalid_utf8),
        cmocka_unit_test(valid_multibyte_utf8_is_kept_byte_for_byte),
        cmocka_unit_test(histogram_of_five_integers_is_an_array_literal),
        cmocka_unit_test(histogram_of_wrong_length_is_rejected),
        cmocka_unit_test(histogram_with_negative_or_non_integer_element_is_rejected),
        cmocka_unit_test(price_with_two_decimals_is_stored_as_sent),
        cmocka_unit_test(price_with_three_decimals_is_rejected),
        cmocka_unit_test(price_beyond_numeric_12_2_is_rejected),
        cmocka_unit_test(negative_price_is_rejected),
        cmocka_unit_test(upper_case_uuid_is_normalised_to_lower_case),
        cmocka_unit_test(types_postgresql_judges_are_handed_over_as_text),
        cmocka_unit_test(every_uuid_form_postgresql_reads_is_stored_as_postgresql_writes_it),
        cmocka_unit_test(spaces_beyond_a_varchar_are_cut_as_postgresql_cuts_them),
        cmocka_unit_test(a_char_column_is_padded_to_its_length_as_postgresql_stores_it),
        cmocka_unit_test(invalid_uuid_is_rejected),
        cmocka_unit_test(is_free_is_written_as_t_or_f),
        cmocka_unit_test(unknown_fields_are_ignored),
        cmocka_unit_test(protocols_object_is_stored_as_compact_json),
        cmocka_unit_test(protocols_with_non_integer_or_negative_count_is_rejected),
        cmocka_unit_test(every_pipeline_fits_in_an_event),
        cmocka_unit_test(every_pipeline_keys_and_versions_by_required_fields_it_has),
        cmocka_unit_test(every_pipeline_conflicts_on_its_natural_key),
        cmocka_unit_test(the_list_of_pipeline_names_is_the_table_of_pipelines),
        cmocka_unit_test(every_error_type_is_known_and_nothing_else),
        cmocka_unit_test(fast_reader_reads_ordinary_records_and_declines_unusual_ones),
        cmocka_unit_test(every_record_decodes_as_the_reference_reader_decodes_it),
        cmocka_unit_test(protocols_keys_are_written_with_json_escapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
