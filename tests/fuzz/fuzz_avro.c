/* libFuzzer target: every byte string as an Avro record of a schema that
 * holds every Avro type and logical type, through avro-c's read and our
 * JSON text of it (DESIGN.md: Formats). Under ASan+UBSan a crash, a leak
 * (the blocks avro-c loses on a failed read must be freed) or undefined
 * behaviour is a finding; so is a text that is valid UTF-8 and not JSON
 * (but for a number beyond a double, which jansson refuses),
 * and a record that reads once and not again. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"
#include "formats/avro.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char SCHEMA[] =
    "{\"type\": \"record\", \"name\": \"Everything\", \"namespace\": \"t\", \"fields\": ["
    "{\"name\": \"i\", \"type\": \"int\"}, {\"name\": \"l\", \"type\": \"long\"},"
    "{\"name\": \"f\", \"type\": \"float\"}, {\"name\": \"d\", \"type\": \"double\"},"
    "{\"name\": \"b\", \"type\": \"boolean\"}, {\"name\": \"s\", \"type\": \"string\"},"
    "{\"name\": \"raw\", \"type\": \"bytes\"},"
    "{\"name\": \"e\", \"type\": {\"type\": \"enum\", \"name\": \"E\", \"symbols\": [\"A\", \"B\", \"C\"]}},"
    "{\"name\": \"fx\", \"type\": {\"type\": \"fixed\", \"name\": \"F\", \"size\": 3}},"
    "{\"name\": \"dec\", \"type\": {\"type\": \"bytes\", \"logicalType\": \"decimal\", \"precision\": 38, \"scale\": 9}},"
    "{\"name\": \"decf\", \"type\": {\"type\": \"fixed\", \"name\": \"D\", \"size\": 16, \"logicalType\": \"decimal\","
    " \"precision\": 38, \"scale\": 2}},"
    "{\"name\": \"day\", \"type\": {\"type\": \"int\", \"logicalType\": \"date\"}},"
    "{\"name\": \"tms\", \"type\": {\"type\": \"int\", \"logicalType\": \"time-millis\"}},"
    "{\"name\": \"tus\", \"type\": {\"type\": \"long\", \"logicalType\": \"time-micros\"}},"
    "{\"name\": \"ts\", \"type\": [\"null\", {\"type\": \"long\", \"logicalType\": \"timestamp-micros\"}]},"
    "{\"name\": \"lts\", \"type\": {\"type\": \"long\", \"logicalType\": \"local-timestamp-millis\"}},"
    "{\"name\": \"arr\", \"type\": {\"type\": \"array\", \"items\": [\"null\", \"string\", \"E\"]}},"
    "{\"name\": \"m\", \"type\": {\"type\": \"map\", \"values\": {\"type\": \"array\", \"items\": \"F\"}}},"
    "{\"name\": \"next\", \"type\": [\"null\", \"Everything\"]}]}";

static avro_format_t *format;

static void release(void) { avro_format_free(format); }

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    char why[400];
    format = avro_format_new(SCHEMA, sizeof SCHEMA - 1, why, sizeof why);
    if (!format) abort();
    atexit(release); /* what the value holds is freed: a leak at exit is a finding */
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *json, *again, why[400];
    size_t len, again_len;
    int rc = avro_format_json(format, data, size, &json, &len, why, sizeof why);
    if (rc == AVRO_UNDECODABLE || rc == AVRO_TRAILING) return 0;
    if (rc != 0 || strlen(json) != len) abort();
    if (utf8_valid(json, len)) {
        /* jansson refuses a number beyond a double (a decimal of hundreds
         * of digits), which the decoder takes as its text. */
        json_error_t jerr;
        json_t *root = json_loadb(json, len, JSON_ALLOW_NUL, &jerr);
        if (!root && !strstr(jerr.text, "overflow")) abort();
        if (root && !json_is_object(root)) abort();
        json_decref(root);
    }
    /* The same bytes give the same text after the value was reused. */
    if (avro_format_json(format, data, size, &again, &again_len, why, sizeof why) != 0 || again_len != len ||
        memcmp(json, again, len) != 0)
        abort();
    free(json);
    free(again);
    return 0;
}
