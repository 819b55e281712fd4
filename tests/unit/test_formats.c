/* Unit tests of the schema registry's formats in the decoder (DESIGN.md:
 * Formats): Avro records, encoded here by Apache Avro's C writer, decoded
 * with their writer's schema from a schema source; each bad input its own
 * rejection; a schema the source cannot give now is not the record's
 * fault. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <avro.h>
#include <cmocka.h>

#include "core/batch.h"
#include "core/decode.h"
#include "formats/logical.h"

static const char SCHEMA[] =
    "{\"type\": \"record\", \"name\": \"Order\", \"fields\": ["
    "{\"name\": \"id\", \"type\": \"long\"},"
    "{\"name\": \"price\", \"type\": {\"type\": \"fixed\", \"name\": \"P\", \"size\": 4, \"logicalType\": \"decimal\","
    " \"precision\": 9, \"scale\": 2}},"
    "{\"name\": \"at\", \"type\": [\"null\", {\"type\": \"long\", \"logicalType\": \"timestamp-micros\"}]},"
    "{\"name\": \"customer\", \"type\": [\"null\", {\"type\": \"record\", \"name\": \"C\", \"fields\": ["
    "{\"name\": \"email\", \"type\": \"string\"}]}]}]}";

/* A source of three ids: 7 the schema above, 8 a JSON schema, 9 one that
 * cannot be had now; any other is unknown. */
static format_schema_t *avro7, *json8;
static schema_answer_t get(void *ctx, int32_t id, const format_schema_t **schema, char *why, size_t len)
{
    (void)ctx;
    if (id == 9) {
        snprintf(why, len, "GET /schemas/ids/9: Connection refused");
        return SCHEMA_UNAVAILABLE;
    }
    if (id != 7 && id != 8) {
        snprintf(why, len, "HTTP 404: Schema %d not found", (int)id);
        return SCHEMA_UNKNOWN;
    }
    *schema = id == 7 ? avro7 : json8;
    return SCHEMA_FOUND;
}
static const schema_source_t source = {NULL, NULL, get};

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup(void **state)
{
    (void)state;
    char path[] = "/tmp/test_formats.XXXXXX", err[1024];
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    write_file(path, "{\"pipelines\": [{\"name\": \"orders\", \"table\": \"orders\", \"format\": \"avro\",\n"
                     " \"fields\": [{\"member\": \"id\", \"required\": true}, {\"member\": \"price\"}, {\"member\": \"at\"},"
                     " {\"path\": \"/customer/email\", \"column\": \"email\"}, {\"path\": \"\", \"column\": \"doc\"}],\n"
                     " \"key\": [\"id\"], \"on_conflict\": \"nothing\"}]}");
    if (pipelines_load(path, err, sizeof err)) fail_msg("%s", err);
    unlink(path);
    column_fact_t cols[] = {
        {.name = "id", .type = "bigint", .kind = COLUMN_INT8, .length = -1, .not_null = true, .precision = -1, .scale = -1},
        {.name = "price", .type = "numeric(9,2)", .kind = COLUMN_NUMERIC, .length = -1, .precision = 9, .scale = 2},
        {.name = "at", .type = "timestamp with time zone", .kind = COLUMN_TIMESTAMPTZ, .length = -1, .precision = -1, .scale = -1},
        {.name = "email", .type = "text", .kind = COLUMN_TEXT, .length = -1, .precision = -1, .scale = -1},
        {.name = "doc", .type = "jsonb", .kind = COLUMN_JSONB, .length = -1, .precision = -1, .scale = -1}};
    char *keys[] = {"id"};
    table_facts_t t = {true, cols, 5, keys, 1};
    if (pipeline_bind(0, &t, err, sizeof err)) fail_msg("%s", err);
    avro7 = format_schema_new(7, NULL, SCHEMA, sizeof SCHEMA - 1);
    json8 = format_schema_new(8, "JSON", "{\"type\": \"object\"}", 18);
    assert_null(avro7->unusable);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    format_schema_free(avro7);
    format_schema_free(json8);
    pipelines_free();
    return 0;
}

/* One order in the wire format of schema id `id`, written by avro-c: into
 * buf, its length returned. `email` NULL: no customer. */
static size_t order(char *buf, size_t cap, int32_t id, int64_t order_id, int32_t cents, const int64_t *at,
                    const char *email)
{
    avro_schema_t schema;
    assert_int_equal(0, avro_schema_from_json_length(SCHEMA, sizeof SCHEMA - 1, &schema));
    avro_value_iface_t *iface = avro_generic_class_from_schema(schema);
    avro_value_t rec, f, b;
    assert_int_equal(0, avro_generic_value_new(iface, &rec));
    avro_value_get_by_name(&rec, "id", &f, NULL);
    avro_value_set_long(&f, order_id);
    unsigned char price[4] = {(unsigned char)(cents >> 24), (unsigned char)(cents >> 16), (unsigned char)(cents >> 8),
                              (unsigned char)cents};
    avro_value_get_by_name(&rec, "price", &f, NULL);
    avro_value_set_fixed(&f, price, 4);
    avro_value_get_by_name(&rec, "at", &f, NULL);
    avro_value_set_branch(&f, at ? 1 : 0, &b);
    if (at) avro_value_set_long(&b, *at);
    else avro_value_set_null(&b);
    avro_value_get_by_name(&rec, "customer", &f, NULL);
    avro_value_set_branch(&f, email ? 1 : 0, &b);
    if (email) {
        avro_value_t e;
        avro_value_get_by_name(&b, "email", &e, NULL);
        avro_value_set_string(&e, email);
    } else {
        avro_value_set_null(&b);
    }
    buf[0] = 0;
    buf[1] = (char)(id >> 24), buf[2] = (char)(id >> 16), buf[3] = (char)(id >> 8), buf[4] = (char)id;
    avro_writer_t w = avro_writer_memory(buf + 5, (int64_t)cap - 5);
    assert_int_equal(0, avro_value_write(w, &rec));
    size_t n = 5 + (size_t)avro_writer_tell(w);
    avro_writer_free(w);
    avro_value_decref(&rec);
    avro_value_iface_decref(iface);
    avro_schema_decref(schema);
    return n;
}

static int decode(const char *bytes, size_t n, event_t *ev, char *why, size_t len)
{
    rejection_t rej;
    record_t r = {.topic = "orders", .timestamp_ms = -1, .value = bytes, .value_len = n};
    int rc = decode_record_from(pipeline_get(0), &r, &source, ev, &rej);
    if (rc) snprintf(why, len, "%s|%s", rej.error_type, rej.detail);
    return rc;
}

/* A record read with its writer's schema: the decimal of a fixed exact,
 * a timestamp-micros in UTC, a union's branch as its value, a nested
 * record's member by path, the whole value as JSON. */
static void an_avro_record_decodes_with_its_writers_schema_and_logical_types(void **state)
{
    (void)state;
    char buf[256], why[600];
    event_t ev = {0};
    int64_t at = -1; /* a microsecond before the epoch */
    size_t n = order(buf, sizeof buf, 7, 42, -1250, &at, "a\"b@c.example");
    if (decode(buf, n, &ev, why, sizeof why)) fail_msg("%s", why);
    assert_string_equal(event_column(&ev, 0), "42");
    assert_string_equal(event_column(&ev, 1), "-12.50");
    assert_string_equal(event_column(&ev, 2), "1969-12-31 23:59:59.999999+00");
    assert_string_equal(event_column(&ev, 3), "a\"b@c.example");
    assert_string_equal(event_column(&ev, 4), "{\"id\":42,\"price\":-12.50,\"at\":\"1969-12-31T23:59:59.999999Z\","
                                              "\"customer\":{\"email\":\"a\\\"b@c.example\"}}");
    n = order(buf, sizeof buf, 7, 43, 5, NULL, NULL);
    if (decode(buf, n, &ev, why, sizeof why)) fail_msg("%s", why);
    assert_string_equal(event_column(&ev, 1), "0.05");
    assert_null(event_column(&ev, 2));
    assert_null(event_column(&ev, 3));
    event_free(&ev);
}

/* Bad bytes are each their own rejection, and a schema that cannot be had
 * now is DECODE_UNAVAILABLE, never a rejection of the record. */
static void bad_bytes_are_each_their_own_rejection_and_an_unavailable_schema_none(void **state)
{
    (void)state;
    char buf[256], why[600];
    event_t ev = {0};
    size_t n = order(buf, sizeof buf, 7, 1, 100, NULL, "x@y.example");
    static const struct {
        const char *bytes;
        size_t len;
        const char *why;
    } bad[] = {
        {"{\"id\": 1}", 9, "no_magic_byte|the value does not start with the schema registry's magic byte 0 (first byte 0x7b)"},
        {"\0\0\0", 3, "short_header|the value is 3 bytes, shorter than the schema registry's header (magic byte and 4-byte id)"},
        {"\0\0\0\0\5\2", 6, "unknown_schema|the value's schema id 5 is not in the schema registry: HTTP 404: Schema 5 not found"},
        {"\0\0\0\0\10{}", 7, "undecodable|the value's schema id 8 is not an Avro schema, and the pipeline reads Avro"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(-1, decode(bad[i].bytes, bad[i].len, &ev, why, sizeof why));
        assert_string_equal(why, bad[i].why);
    }
    /* Cut off inside the email, and with a byte after the record: the
     * buffer avro-c allocated for the cut-off string is freed (LeakSanitizer). */
    assert_int_equal(-1, decode(buf, n - 3, &ev, why, sizeof why));
    assert_string_equal(why, "undecodable|the value (schema id 7): the bytes do not decode with the writer's schema: "
                             "Cannot read string value: Cannot read 11 bytes from memory buffer");
    buf[n] = 0;
    assert_int_equal(-1, decode(buf, n + 1, &ev, why, sizeof why));
    assert_string_equal(why, "trailing_bytes|the value (schema id 7): bytes are left after the record the writer's schema reads");
    /* The value still decodes after the failures. */
    if (decode(buf, n, &ev, why, sizeof why)) fail_msg("%s", why);
    assert_string_equal(event_column(&ev, 3), "x@y.example");
    /* A string of 2^30 bytes declared in a record of 11: refused, never allocated. */
    static const char huge[] = "\0\0\0\0\7\2\x80\x80\x80\x80\x08";
    assert_int_equal(-1, decode(huge, sizeof huge - 1, &ev, why, sizeof why));
    assert_non_null(strstr(why, "undecodable|"));
    /* Nobody's fault: no rejection to dead-letter. */
    buf[4] = 9;
    assert_int_equal(DECODE_UNAVAILABLE, decode(buf, n, &ev, why, sizeof why));
    assert_string_equal(why, "unknown_schema|schema 9 of the value cannot be had now: GET /schemas/ids/9: Connection refused");
    record_t r = {.topic = "orders", .timestamp_ms = -1, .value = buf, .value_len = n};
    rejection_t rej;
    assert_int_equal(DECODE_UNAVAILABLE, decode_record_from(pipeline_get(0), &r, NULL, &ev, &rej));
    event_free(&ev);
}

/* A batch with a record whose schema cannot be had is marked so, with
 * why: the worker keeps it from PostgreSQL. */
static void a_batch_with_an_unavailable_schema_says_so(void **state)
{
    (void)state;
    char one[256], two[256];
    size_t n1 = order(one, sizeof one, 7, 1, 1, NULL, NULL), n2 = order(two, sizeof two, 7, 2, 2, NULL, NULL);
    two[4] = 9;
    record_t r[2] = {{.topic = "orders", .offset = 0, .timestamp_ms = -1, .value = one, .value_len = n1},
                     {.topic = "orders", .offset = 1, .timestamp_ms = -1, .value = two, .value_len = n2}};
    batch_t b;
    batch_init(&b, pipeline_get(0));
    b.schemas = &source;
    batch_decode(&b, r, 2);
    assert_true(b.unavailable);
    assert_string_equal(b.unavailable_why, "schema 9 of the value cannot be had now: GET /schemas/ids/9: Connection refused");
    two[4] = 7;
    batch_decode(&b, r, 2);
    assert_false(b.unavailable);
    assert_int_equal(ENTRY_EVENT, b.entries[1].state);
    batch_free(&b);
}

/* avro-c reads an enum's index without checking it against the symbols,
 * and looked it up unchecked: a record of one byte crashed the decoder
 * (found by fuzz_avro). Now the record is undecodable. */
static void an_enum_index_beyond_the_symbols_is_undecodable_not_a_crash(void **state)
{
    (void)state;
    static const char schema[] = "{\"type\": \"record\", \"name\": \"R\", \"fields\": [{\"name\": \"e\", \"type\":"
                                 " {\"type\": \"enum\", \"name\": \"E\", \"symbols\": [\"A\", \"B\"]}}]}";
    char why[400], *json;
    size_t len;
    avro_format_t *f = avro_format_new(schema, sizeof schema - 1, why, sizeof why);
    assert_non_null(f);
    assert_int_equal(0, avro_format_json(f, "\2", 1, &json, &len, why, sizeof why));
    assert_string_equal(json, "{\"e\":\"B\"}");
    free(json);
    assert_int_equal(AVRO_UNDECODABLE, avro_format_json(f, "\x0a", 1, &json, &len, why, sizeof why));
    assert_string_equal(why, "enum index 5 is not one of the schema's 2 symbols");
    assert_int_equal(AVRO_UNDECODABLE, avro_format_json(f, "\x01", 1, &json, &len, why, sizeof why));
    avro_format_free(f);
}

/* The logical types' texts at the edges PostgreSQL and ISO 8601 set. */
static void logical_texts_hold_their_edges(void **state)
{
    (void)state;
    char buf[64], why[200];
    assert_int_equal(0, logical_timestamp_text(-62135596800000000LL, 6, 1, buf, sizeof buf, why, sizeof why));
    assert_string_equal(buf, "0001-01-01T00:00:00.000000Z");
    assert_int_equal(0, logical_timestamp_text(253402300799999LL, 3, 0, buf, sizeof buf, why, sizeof why));
    assert_string_equal(buf, "9999-12-31T23:59:59.999");
    assert_int_equal(-1, logical_timestamp_text(253402300800000LL, 3, 1, buf, sizeof buf, why, sizeof why));
    assert_string_equal(why, "a timestamp of milliseconds 253402300800000 is out of range");
    assert_int_equal(0, logical_timestamp_text(951782400000LL, 3, 1, buf, sizeof buf, why, sizeof why));
    assert_string_equal(buf, "2000-02-29T00:00:00.000Z");
    assert_int_equal(0, logical_time_text(86399999999LL, 6, buf, sizeof buf, why, sizeof why));
    assert_string_equal(buf, "23:59:59.999999");
    assert_int_equal(0, logical_date_text(-719163, buf, sizeof buf, why, sizeof why));
    assert_string_equal(buf, "0001-12-31 BC");
    char *d = logical_decimal_text((const unsigned char *)"\x80", 1, 0);
    assert_string_equal(d, "-128");
    free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(an_avro_record_decodes_with_its_writers_schema_and_logical_types),
        cmocka_unit_test(bad_bytes_are_each_their_own_rejection_and_an_unavailable_schema_none),
        cmocka_unit_test(a_batch_with_an_unavailable_schema_says_so),
        cmocka_unit_test(an_enum_index_beyond_the_symbols_is_undecodable_not_a_crash),
        cmocka_unit_test(logical_texts_hold_their_edges),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
