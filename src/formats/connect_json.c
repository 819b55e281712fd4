#include "formats/connect_json.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* The unscaled two's-complement big-endian integer b[n] with `scale`
 * decimals, as exact decimal text. */
static char *decimal_text(unsigned char *b, size_t n, int scale)
{
    bool negative = n > 0 && (b[0] & 0x80);
    if (negative) { /* its magnitude: invert and add one */
        for (size_t i = 0; i < n; i++) b[i] = (unsigned char)~b[i];
        for (size_t i = n; i-- > 0;)
            if (++b[i] != 0) break;
    }
    /* Digits, least significant first: divide the magnitude by 10 again and again. */
    size_t cap = n * 3 + 2, d = 0;
    char *digits = malloc(cap);
    if (!digits) abort();
    for (;;) {
        unsigned rem = 0;
        bool zero = true;
        for (size_t i = 0; i < n; i++) {
            unsigned cur = (rem << 8) | b[i];
            b[i] = (unsigned char)(cur / 10);
            rem = cur % 10;
            zero = zero && b[i] == 0;
        }
        digits[d++] = (char)('0' + rem);
        if (zero) break;
    }
    /* Sign, digits, the point `scale` digits from the right (zeros before it
     * as needed), or zeros after them for a negative scale. */
    size_t width = scale > 0 && (size_t)scale >= d ? (size_t)scale + 1 : d;
    size_t size = width + (scale > 0 ? 1 : 0) + (scale < 0 ? (size_t)-scale : 0) + 2;
    char *out = malloc(size), *o = out;
    if (!out) abort();
    bool all_zero = d == 1 && digits[0] == '0';
    if (negative && !all_zero) *o++ = '-';
    for (size_t i = width; i-- > 0;) {
        if (scale > 0 && i + 1 == (size_t)scale) *o++ = '.';
        *o++ = i < d ? digits[i] : '0';
    }
    for (int z = 0; scale < 0 && z < -scale; z++) *o++ = '0';
    *o = '\0';
    free(digits);
    return out;
}

static int too_far(const char *what, int64_t v, char *why, size_t len)
{
    snprintf(why, len, "%s %" PRId64 " is out of range", what, v);
    return -1;
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
        *out = decimal_text(bytes, n, t.scale);
        return 0;
    }
    if (v->type != JV_INT) {
        snprintf(why, len, "a %s is an integer", t.type == CONNECT_DATE ? "Date" : t.type == CONNECT_TIME ? "Time" : "Timestamp");
        return -1;
    }
    int64_t x = v->integer, secs, ms = 0;
    char buf[64];
    struct tm tm;
    switch (t.type) {
    case CONNECT_DATE:
        /* PostgreSQL's dates: 4713 BC to 5874897 AD; gmtime's years fit an int. */
        /* PostgreSQL's dates: 4713 BC to 5874897 AD. */
        if (x < -2440588 || x > 2145031948) return too_far("a Date of days", x, why, len);
        secs = x * 86400;
        break;
    case CONNECT_TIME:
        if (x < 0 || x >= 86400000) return too_far("a Time of milliseconds", x, why, len);
        snprintf(buf, sizeof buf, "%02d:%02d:%02d.%03d", (int)(x / 3600000), (int)(x / 60000 % 60),
                 (int)(x / 1000 % 60), (int)(x % 1000));
        *out = strdup(buf);
        if (!*out) abort();
        return 0;
    default: /* CONNECT_TIMESTAMP */
        /* Years 1 to 9999: the ISO 8601 form the decoder reads. */
        if (x < -62135596800000LL || x > 253402300799999LL) return too_far("a Timestamp of milliseconds", x, why, len);
        secs = x / 1000 - (x % 1000 < 0);
        ms = x - secs * 1000;
        break;
    }
    time_t tt = (time_t)secs;
    if (!gmtime_r(&tt, &tm)) return too_far("a value", x, why, len);
    long year = (long)tm.tm_year + 1900;
    /* Years before 1 are BC to PostgreSQL: year 0 is 1 BC. */
    const char *bc = year <= 0 ? " BC" : "";
    if (year <= 0) year = 1 - year;
    if (t.type == CONNECT_DATE)
        snprintf(buf, sizeof buf, "%04ld-%02d-%02d%s", year, tm.tm_mon + 1, tm.tm_mday, bc);
    else
        snprintf(buf, sizeof buf, "%04ld-%02d-%02dT%02d:%02d:%02d.%03dZ", year, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                 tm.tm_min, tm.tm_sec, (int)ms);
    *out = strdup(buf);
    if (!*out) abort();
    return 0;
}
