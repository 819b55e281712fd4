/* bench/avro_speed — the decoder on Avro, side by side with its floor and
 * with the JSON path (docs/DESIGN.md: Formats). Every review of a bench
 * data file (KEY<TAB>JSON per line, as bench/gen-reviews.awk writes) is
 * encoded once with Apache Avro's C writer in the registry's wire format,
 * with a review schema as a producer would write it (timestamps as
 * timestamp-millis, optional fields as unions with null). Then, in
 * alternating passes:
 *   floor  avro-c reading the bytes into its generic value, nothing else
 *   avro   the service's decode of the wire-format bytes (decode_record_from,
 *          the schema from a source that holds it, as the registry's cache does)
 *   json   the service's decode of the same review as JSON (decode_record)
 * Before timing, each review's Avro and JSON decodes must give the same
 * event (every column's text), or it exits 1.
 *
 *   avro_speed FILE [PASSES]
 *
 * Prints one line: "avro_us=A floor_us=F json_us=J passes=P messages=N"
 * (µs per message, the median of the passes). */
#include <avro.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shipped_schema.h"
#include "speed_common.h"
#include "core/decode.h"
#include "core/timestamp.h"

static const char REVIEW_SCHEMA[] =
    "{\"type\": \"record\", \"name\": \"Review\", \"namespace\": \"crawler\", \"fields\": ["
    "{\"name\": \"package_name\", \"type\": \"string\"},"
    "{\"name\": \"review_id\", \"type\": \"string\"},"
    "{\"name\": \"user_name\", \"type\": [\"null\", \"string\"], \"default\": null},"
    "{\"name\": \"content\", \"type\": [\"null\", \"string\"], \"default\": null},"
    "{\"name\": \"score\", \"type\": \"int\"},"
    "{\"name\": \"thumbs_up_count\", \"type\": \"long\"},"
    "{\"name\": \"app_version\", \"type\": [\"null\", \"string\"], \"default\": null},"
    "{\"name\": \"reviewed_at\", \"type\": {\"type\": \"long\", \"logicalType\": \"timestamp-millis\"}},"
    "{\"name\": \"reply_content\", \"type\": [\"null\", \"string\"], \"default\": null},"
    "{\"name\": \"replied_at\", \"type\": [\"null\", {\"type\": \"long\", \"logicalType\": \"timestamp-millis\"}],"
    " \"default\": null},"
    "{\"name\": \"last_synced_at\", \"type\": {\"type\": \"long\", \"logicalType\": \"timestamp-millis\"}}]}";

static void die(const char *what)
{
    fprintf(stderr, "avro_speed: %s: %s\n", what, avro_strerror());
    exit(1);
}

/* Field `name` of the JSON review into the record's field of that name:
 * a union's branch 0 (null) or 1, a timestamp as milliseconds. */
static void set_field(avro_value_t *rec, json_t *review, const char *name)
{
    avro_value_t field, v = {0};
    if (avro_value_get_by_name(rec, name, &field, NULL)) die(name);
    json_t *j = json_object_get(review, name);
    bool is_union = avro_value_get_type(&field) == AVRO_UNION;
    if (is_union) {
        if (!j || json_is_null(j)) {
            if (avro_value_set_branch(&field, 0, &v) || avro_value_set_null(&v)) die(name);
            return;
        }
        if (avro_value_set_branch(&field, 1, &v)) die(name);
    } else {
        v = field;
    }
    switch (avro_value_get_type(&v)) {
    case AVRO_STRING:
        if (avro_value_set_string(&v, json_string_value(j))) die(name);
        break;
    case AVRO_INT32:
        if (avro_value_set_int(&v, (int32_t)json_integer_value(j))) die(name);
        break;
    case AVRO_INT64:
        if (json_is_string(j)) { /* a timestamp */
            int64_t micros;
            char err[200];
            if (timestamp_parse(json_string_value(j), strlen(json_string_value(j)), &micros, err, sizeof err)) {
                fprintf(stderr, "avro_speed: %s: %s\n", name, err);
                exit(1);
            }
            if (avro_value_set_long(&v, micros / 1000)) die(name);
        } else if (avro_value_set_long(&v, json_integer_value(j))) {
            die(name);
        }
        break;
    default: die("an unexpected field type");
    }
}

typedef struct {
    const format_schema_t *schema;
} one_schema_t;

static schema_answer_t get(void *ctx, int32_t id, const format_schema_t **schema, char *why, size_t len)
{
    one_schema_t *o = ctx;
    if (id != o->schema->id) {
        snprintf(why, len, "not the bench's schema");
        return SCHEMA_UNKNOWN;
    }
    *schema = o->schema;
    return SCHEMA_FOUND;
}

int main(int argc, char **argv)
{
    int passes;
    speed_messages_t m;
    int start = speed_start("avro_speed", argc, argv, &passes, &m);
    if (start) return start;
    avro_schema_t schema;
    if (avro_schema_from_json_length(REVIEW_SCHEMA, sizeof REVIEW_SCHEMA - 1, &schema)) die("the review schema");
    avro_value_iface_t *iface = avro_generic_class_from_schema(schema);
    avro_value_t rec;
    if (!iface || avro_generic_value_new(iface, &rec)) die("a review value");
    static const char *const names[] = {"package_name", "review_id", "user_name",     "content",
                                        "score",        "thumbs_up_count", "app_version", "reviewed_at",
                                        "reply_content", "replied_at", "last_synced_at"};

    /* Each review in the wire format: magic byte 0, schema id 1, the record. */
    char **json = m.msg, **wire = calloc(m.n, sizeof *wire), buf[1 << 16];
    size_t *json_len = m.len, *wire_len = calloc(m.n, sizeof *wire_len), n = m.n;
    if (!wire || !wire_len) abort();
    for (size_t i = 0; i < n; i++) {
        json_t *review = json_loadb(json[i], json_len[i], 0, NULL);
        if (!review) die("a review that is not JSON");
        avro_value_reset(&rec);
        for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) set_field(&rec, review, names[k]);
        json_decref(review);
        memcpy(buf, "\0\0\0\0\1", 5);
        avro_writer_t w = avro_writer_memory(buf + 5, sizeof buf - 5);
        if (avro_value_write(w, &rec)) die("writing a review");
        wire_len[i] = 5 + (size_t)avro_writer_tell(w);
        avro_writer_free(w);
        wire[i] = malloc(wire_len[i]);
        if (!wire[i]) abort();
        memcpy(wire[i], buf, wire_len[i]);
    }

    shipped_schema_bind(); /* the reviews table as migrations/ makes it */
    const pipeline_def_t *json_def = pipeline_get(PIPELINE_REVIEWS);
    pipeline_def_t avro_def = *json_def;
    avro_def.format = FORMAT_AVRO;
    format_schema_t *fs = format_schema_new(1, NULL, REVIEW_SCHEMA, sizeof REVIEW_SCHEMA - 1);
    one_schema_t one = {fs};
    schema_source_t source = {&one, NULL, get};
    event_t a = {0}, j = {0};
    rejection_t rej;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        record_t r = {.topic = "reviews", .offset = (int64_t)i, .timestamp_ms = -1, .value = wire[i],
                      .value_len = wire_len[i]};
        if (decode_record_from(&avro_def, &r, &source, &a, &rej) != 0 ||
            decode_record(json_def, json[i], json_len[i], &j, &rej) != 0) {
            fprintf(stderr, "avro_speed: review %zu rejected: %s: %s\n", i + 1, rej.error_type, rej.detail);
            rc = 1;
        } else if (!event_equal(json_def, &a, &j)) {
            fprintf(stderr, "avro_speed: review %zu decodes to another event from Avro than from JSON\n", i + 1);
            rc = 1;
        }
    }
    double *t_avro = calloc((size_t)passes, sizeof(double)), *t_floor = calloc((size_t)passes, sizeof(double)),
           *t_json = calloc((size_t)passes, sizeof(double));
    avro_reader_t reader = avro_reader_memory("", 0);
    if (!t_avro || !t_floor || !t_json || !reader) abort();
    for (int p = 0; p < passes && rc == 0; p++) {
        for (int which = 0; which < 3; which++) {
            int k = (which + p) % 3; /* each goes first in turn */
            double t0 = speed_now_s();
            for (size_t i = 0; i < n; i++) {
                if (k == 0) {
                    avro_reader_memory_set_source(reader, wire[i] + 5, (int64_t)wire_len[i] - 5);
                    if (avro_value_read(reader, &rec)) die("reading a review");
                } else if (k == 1) {
                    record_t r = {.topic = "reviews", .timestamp_ms = -1, .value = wire[i], .value_len = wire_len[i]};
                    if (decode_record_from(&avro_def, &r, &source, &a, &rej)) rc = 1;
                } else if (decode_record(json_def, json[i], json_len[i], &j, &rej)) {
                    rc = 1;
                }
            }
            double us = (speed_now_s() - t0) / (double)n * 1e6;
            (k == 0 ? t_floor : k == 1 ? t_avro : t_json)[p] = us;
        }
    }
    if (rc == 0) {
        printf("avro_us=%.3f floor_us=%.3f json_us=%.3f passes=%d messages=%zu\n", speed_median(t_avro, passes),
               speed_median(t_floor, passes), speed_median(t_json, passes), passes, n);
    }
    free(t_avro);
    free(t_floor);
    free(t_json);
    avro_reader_free(reader);
    event_free(&a);
    event_free(&j);
    format_schema_free(fs);
    avro_value_decref(&rec);
    avro_value_iface_decref(iface);
    avro_schema_decref(schema);
    for (size_t i = 0; i < n; i++) free(wire[i]);
    free(wire);
    free(wire_len);
    speed_messages_free(&m);
    return rc;
}
