#include "formats/connect_json.h"

#include "formats/logical.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const json_t *struct_field(const json_t *schema, const char *name)
{
    const json_t *fields = json_object_get(schema, "fields");
    for (size_t i = 0; i < json_array_size(fields); i++) {
        const json_t *f = json_array_get(fields, i);
        const char *n = json_string_value(json_object_get(f, "field"));
        if (n && strcmp(n, name) == 0) return f;
    }
    return NULL;
}

connect_type_t connect_type_at(const json_t *schema, char *const *path, size_t n)
{
    connect_type_t plain = {CONNECT_PLAIN, 0};
    const json_t *s = schema;
    for (size_t i = 0; s && i < n; i++) {
        const char *type = json_string_value(json_object_get(s, "type"));
        if (!type) return plain;
        if (strcmp(type, "struct") == 0) s = struct_field(s, path[i]);
        else if (strcmp(type, "array") == 0) s = json_object_get(s, "items");
        else if (strcmp(type, "map") == 0) s = json_object_get(s, "values");
        else return plain;
    }
    const char *name = json_string_value(json_object_get(s, "name"));
    if (!name) return plain;
    if (strcmp(name, "org.apache.kafka.connect.data.Date") == 0) return (connect_type_t){CONNECT_DATE, 0};
    if (strcmp(name, "org.apache.kafka.connect.data.Time") == 0) return (connect_type_t){CONNECT_TIME, 0};
    if (strcmp(name, "org.apache.kafka.connect.data.Timestamp") == 0) return (connect_type_t){CONNECT_TIMESTAMP, 0};
    if (strcmp(name, "org.apache.kafka.connect.data.Decimal") != 0) return plain;
    /* Connect writes the scale as a string parameter. */
    const char *scale = json_string_value(json_object_get(json_object_get(s, "parameters"), "scale"));
    char *end;
    long v = scale ? strtol(scale, &end, 10) : 0;
    if (!scale || !*scale || *end || v < -1000 || v > 1000) return plain;
    return (connect_type_t){CONNECT_DECIMAL, (int)v};
}

/* Standard base64 (RFC 4648, padded, as Java's encoder writes it) into
 * out[*n] (at most 3/4 of len). Returns false on any other character. */
static bool base64_decode(const char *s, size_t len, unsigned char *out, size_t *n)
{
    uint32_t acc = 0;
    int bits = 0;
    size_t pad = 0;
    *n = 0;
    if (len % 4 != 0) return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        int v;
        if (c >= 'A' && c <= 'Z') v = c - 'A';
        else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
        else if (c >= '0' && c <= '9') v = c - '0' + 52;
        else if (c == '+') v = 62;
        else if (c == '/') v = 63;
        else if (c == '=' && i + 2 >= len) { pad++; continue; }
        else return false;
        if (pad) return false; /* data after padding */
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[(*n)++] = (unsigned char)(acc >> bits);
        }
    }
    return true;
}

int connect_text(connect_type_t t, const jv_t *v, char **out, char *why, size_t len)
{
    *out = NULL;
    if (t.type == CONNECT_DECIMAL) {
        if (v->type == JV_INT || v->type == JV_REAL || v->type == JV_OVERFLOW) return 1;
        if (v->type != JV_STRING) {
            snprintf(why, len, "a Decimal is base64 bytes (a string) or a number");
            return -1;
        }
        if (v->len > 4096) {
            snprintf(why, len, "a Decimal of more than 3,072 bytes");
            return -1;
        }
        unsigned char bytes[3072];
        size_t n;
        if (!base64_decode(v->str, v->len, bytes, &n) || n == 0) {
            snprintf(why, len, "a Decimal's bytes are not base64");
            return -1;
        }
        *out = logical_decimal_text(bytes, n, t.scale);
        return 0;
    }
    if (v->type != JV_INT) {
        snprintf(why, len, "a %s is an integer", t.type == CONNECT_DATE ? "Date" : t.type == CONNECT_TIME ? "Time" : "Timestamp");
        return -1;
    }
    char buf[64];
    int rc = t.type == CONNECT_DATE   ? logical_date_text(v->integer, buf, sizeof buf, why, len)
             : t.type == CONNECT_TIME ? logical_time_text(v->integer, 3, buf, sizeof buf, why, len)
                                      : logical_timestamp_text(v->integer, 3, 1, buf, sizeof buf, why, len);
    if (rc) return -1;
    *out = strdup(buf);
    if (!*out) abort();
    return 0;
}
