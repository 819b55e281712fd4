#include "core/decode.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/timestamp.h"
#include "core/utf8.h"

/* Largest magnitude at which every integer is exactly a double. */
#define EXACT_DOUBLE_INT 9007199254740992.0

void event_init(event_t *ev) { memset(ev, 0, sizeof *ev); }

void event_free(event_t *ev)
{
    free(ev->buf);
    memset(ev, 0, sizeof *ev);
}

const char *event_column(const event_t *ev, size_t i)
{
    return ev->col[i] == EVENT_NULL ? NULL : ev->buf + ev->col[i];
}

const char *event_package_name(const event_t *ev) { return ev->buf + ev->package_name; }

/* Append n bytes plus a NUL; returns the offset of the copy. */
static size_t event_append(event_t *ev, const char *s, size_t n)
{
    if (ev->len + n + 1 > ev->cap) {
        size_t cap = ev->cap ? ev->cap : 256;
        while (cap < ev->len + n + 1) cap *= 2;
        char *p = realloc(ev->buf, cap);
        if (!p) abort();
        ev->buf = p;
        ev->cap = cap;
    }
    size_t at = ev->len;
    memcpy(ev->buf + at, s, n);
    ev->buf[at + n] = '\0';
    ev->len += n + 1;
    return at;
}

const char *const decode_error_types[DECODE_ERROR_TYPE_COUNT] = {
    ERROR_EMPTY_PAYLOAD, ERROR_INVALID_UTF8,     ERROR_INVALID_JSON,     ERROR_MISSING_FIELD,
    ERROR_INVALID_FIELD, ERROR_UNREGISTERED_APP, ERROR_DATABASE_REJECTED};

int decode_error_type_index(const char *type)
{
    for (size_t i = 0; i < DECODE_ERROR_TYPE_COUNT; i++)
        if (strcmp(type, decode_error_types[i]) == 0) return (int)i;
    return -1;
}

static int reject(rejection_t *rej, const char *type, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

void decode_repair_utf8(char *s)
{
    unsigned char *p = (unsigned char *)s;
    size_t left = strlen(s);
    uint32_t cp;
    while (left > 0) {
        size_t n = utf8_sequence(p, left, &cp);
        if (n == 0) {
            *p = '?';
            n = 1;
        }
        p += n;
        left -= n;
    }
}

static int reject(rejection_t *rej, const char *type, const char *fmt, ...)
{
    va_list ap;
    rej->error_type = type;
    va_start(ap, fmt);
    vsnprintf(rej->detail, sizeof rej->detail, fmt, ap);
    va_end(ap);
    decode_repair_utf8(rej->detail);
    return -1;
}

/* A number too large for a double fails jansson's whole parse, naming no
 * field. Such a number is replaced by this marker, the JSON string
 * "\u0000overflow", and the document parsed again: the field that holds it
 * is then rejected by name, or ignored when it is unknown. A real string
 * equal to the marker holds U+0000 and is rejected anyway. */
#define OVERFLOW_MARKER_JSON "\"\\u0000overflow\""
static bool is_overflow_marker(const json_t *v)
{
    return json_is_string(v) && json_string_length(v) == 9 &&
           memcmp(json_string_value(v), "\0overflow", 9) == 0;
}

static int reject_overflow(rejection_t *rej, const char *name)
{
    return reject(rej, ERROR_INVALID_FIELD, "%s: number out of range (beyond what a double can hold)", name);
}

static const char *json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "an unknown value";
}

/* UTF-8 characters in a string jansson has already validated. */
static size_t utf8_chars(const char *s, size_t n)
{
    size_t chars = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80) chars++;
    return chars;
}

/* A string usable as PostgreSQL text: no U+0000 (text cannot hold it; libpq
 * would silently truncate at it), length in characters within the column. */
static int check_string(const char *name, const json_t *v, int64_t min, int64_t max,
                        rejection_t *rej)
{
    if (!json_is_string(v))
        return reject(rej, ERROR_INVALID_FIELD, "%s: expected a string, got %s", name,
                      json_type_name(v));
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);
    if (memchr(s, '\0', n))
        return reject(rej, ERROR_INVALID_FIELD,
                      "%s: contains a NUL character (U+0000), which PostgreSQL text cannot hold",
                      name);
    size_t chars = utf8_chars(s, n);
    if ((int64_t)chars < min || (int64_t)chars > max) {
        if (min > 0 && chars == 0) return reject(rej, ERROR_INVALID_FIELD, "%s: must not be empty", name);
        return reject(rej, ERROR_INVALID_FIELD, "%s: %zu characters, longer than the column's %lld",
                      name, chars, (long long)max);
    }
    return 0;
}

/* An integer exactly: JSON integers, or numbers with an integral value that a
 * double represents exactly (1e3, 5.0); never a rounded fraction. */
static int get_integer(const char *name, const json_t *v, int64_t min, int64_t max, int64_t *out,
                       rejection_t *rej)
{
    int64_t x;
    if (is_overflow_marker(v)) return reject_overflow(rej, name);
    if (json_is_integer(v)) {
        x = json_integer_value(v);
    } else if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d != floor(d))
            return reject(rej, ERROR_INVALID_FIELD, "%s: expected an integer, got %.17g", name, d);
        /* 0x1p63: (double)INT64_MAX rounds up to it. */
        if (d < (double)min || d > (double)max || fabs(d) >= 0x1p63)
            return reject(rej, ERROR_INVALID_FIELD, "%s: %.0f is out of range %lld..%lld", name, d,
                          (long long)min, (long long)max);
        /* 2^53 itself is excluded: 9007199254740993.0 parses to it. */
        if (fabs(d) >= EXACT_DOUBLE_INT)
            return reject(rej, ERROR_INVALID_FIELD,
                          "%s: %.0f is not an exact integer (write it without a fraction or exponent)",
                          name, d);
        x = (int64_t)d;
    } else {
        return reject(rej, ERROR_INVALID_FIELD, "%s: expected an integer, got %s", name,
                      json_type_name(v));
    }
    if (x < min || x > max)
        return reject(rej, ERROR_INVALID_FIELD, "%s: %lld is out of range %lld..%lld", name,
                      (long long)x, (long long)min, (long long)max);
    *out = x;
    return 0;
}

static size_t append_int(event_t *ev, int64_t x)
{
    char tmp[24];
    int n = snprintf(tmp, sizeof tmp, "%lld", (long long)x);
    return event_append(ev, tmp, (size_t)n);
}

static int decode_number(const field_spec_t *f, const json_t *v, event_t *ev, size_t *col,
                         rejection_t *rej)
{
    if (!json_is_number(v))
        return reject(rej, ERROR_INVALID_FIELD, "%s: expected a number, got %s", f->name,
                      json_type_name(v));
    double d = json_number_value(v);
    if (!isfinite(d))
        return reject(rej, ERROR_INVALID_FIELD, "%s: not a finite number", f->name);
    if (d < f->dmin || d > f->dmax)
        return reject(rej, ERROR_INVALID_FIELD, "%s: %.17g is out of range %g..%g", f->name, d,
                      f->dmin, f->dmax);
    char tmp[32];
    /* %.17g round-trips every double exactly through float8 input. */
    int n = snprintf(tmp, sizeof tmp, "%.17g", d + 0.0); /* + 0.0: no "-0" */
    *col = event_append(ev, tmp, (size_t)n);
    return 0;
}

/* NUMERIC(12,2): at most two decimals. The JSON text is gone once parsed, so
 * the check is on the double: a number written with at most two decimals
 * parses to the double nearest c/100 for its whole number of cents c, which
 * is exactly what c / 100.0 computes (c < 2^53, one correctly rounded
 * division). Any other double has more decimals, whatever its magnitude. */
static int decode_price(const field_spec_t *f, const json_t *v, event_t *ev, size_t *col,
                        rejection_t *rej)
{
    if (!json_is_number(v))
        return reject(rej, ERROR_INVALID_FIELD, "%s: expected a number, got %s", f->name,
                      json_type_name(v));
    double d = json_number_value(v);
    if (!isfinite(d) || d < f->dmin || d > f->dmax)
        return reject(rej, ERROR_INVALID_FIELD, "%s: %.17g is out of range 0..9999999999.99",
                      f->name, d);
    double whole = nearbyint(d * 100.0);
    if (whole / 100.0 != d)
        return reject(rej, ERROR_INVALID_FIELD, "%s: %.17g has more than 2 decimals", f->name, d);
    long long c = (long long)whole;
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%lld.%02lld", c / 100, c % 100);
    *col = event_append(ev, tmp, (size_t)n);
    return 0;
}

static int decode_timestamp(const field_spec_t *f, const json_t *v, event_t *ev, size_t *col,
                            int64_t *micros, rejection_t *rej)
{
    char why[160];
    if (!json_is_string(v))
        return reject(rej, ERROR_INVALID_FIELD, "%s: expected an ISO 8601 string, got %s",
                      f->name, json_type_name(v));
    if (timestamp_parse(json_string_value(v), json_string_length(v), micros, why, sizeof why))
        return reject(rej, ERROR_INVALID_FIELD, "%s: %s", f->name, why);
    char text[TIMESTAMP_TEXT_SIZE];
    timestamp_format(*micros, text);
    *col = event_append(ev, text, strlen(text));
    return 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int decode_uuid(const field_spec_t *f, const json_t *v, event_t *ev, size_t *col,
                       rejection_t *rej)
{
    if (!json_is_string(v))
        return reject(rej, ERROR_INVALID_FIELD, "%s: expected a UUID string, got %s", f->name,
                      json_type_name(v));
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);
    char out[37];
    bool ok = n == 36;
    for (size_t i = 0; ok && i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            ok = s[i] == '-';
            out[i] = '-';
        } else {
            int h = hexval(s[i]);
            ok = h >= 0;
            out[i] = "0123456789abcdef"[h & 15];
        }
    }
    if (!ok)
        return reject(rej, ERROR_INVALID_FIELD,
                      "%s: not a UUID (expected 8-4-4-4-12 hexadecimal digits)", f->name);
    *col = event_append(ev, out, 36);
    return 0;
}

static int decode_histogram(const field_spec_t *f, const json_t *v, event_t *ev, size_t *col,
                            rejection_t *rej)
{
    if (!json_is_array(v))
        return reject(rej, ERROR_INVALID_FIELD, "%s: expected an array of 5 integers, got %s",
                      f->name, json_type_name(v));
    if (json_array_size(v) != 5)
        return reject(rej, ERROR_INVALID_FIELD, "%s: expected exactly 5 integers, got %zu",
                      f->name, json_array_size(v));
    char tmp[5 * 21 + 3];
    size_t n = 0;
    tmp[n++] = '{';
    for (size_t i = 0; i < 5; i++) {
        int64_t x;
        char name[64];
        snprintf(name, sizeof name, "%s[%zu]", f->name, i);
        if (get_integer(name, json_array_get(v, i), f->min, f->max, &x, rej)) return -1;
        n += (size_t)snprintf(tmp + n, sizeof tmp - n, "%s%lld", i ? "," : "", (long long)x);
    }
    tmp[n++] = '}';
    *col = event_append(ev, tmp, n);
    return 0;
}

/* protocols: {"tcp": 120, "udp": 7}. Stored as jsonb, which rejects U+0000. */
static int decode_counts(const field_spec_t *f, json_t *v, event_t *ev, size_t *col,
                         rejection_t *rej)
{
    const char *key;
    size_t key_len;
    json_t *count;
    if (!json_is_object(v))
        return reject(rej, ERROR_INVALID_FIELD, "%s: expected an object of name -> count, got %s",
                      f->name, json_type_name(v));
    json_object_keylen_foreach(v, key, key_len, count)
    {
        int64_t x;
        char name[96];
        if (memchr(key, '\0', key_len))
            return reject(rej, ERROR_INVALID_FIELD, "%s: a key contains a NUL character",
                          f->name);
        snprintf(name, sizeof name, "%s.%.*s", f->name, (int)(key_len > 48 ? 48 : key_len), key);
        if (get_integer(name, count, f->min, f->max, &x, rej)) return -1;
    }
    char *text = json_dumps(v, JSON_COMPACT);
    if (!text) abort();
    *col = event_append(ev, text, strlen(text));
    free(text);
    return 0;
}

static int decode_field(const field_spec_t *f, json_t *v, event_t *ev, size_t *col,
                        int64_t *micros, rejection_t *rej)
{
    int64_t x;
    if (is_overflow_marker(v)) return reject_overflow(rej, f->name);
    switch (f->kind) {
    case FIELD_STRING:
        if (check_string(f->name, v, f->min, f->max, rej)) return -1;
        *col = event_append(ev, json_string_value(v), json_string_length(v));
        return 0;
    case FIELD_INTEGER:
        if (get_integer(f->name, v, f->min, f->max, &x, rej)) return -1;
        *col = append_int(ev, x);
        return 0;
    case FIELD_NUMBER: return decode_number(f, v, ev, col, rej);
    case FIELD_TIMESTAMP: return decode_timestamp(f, v, ev, col, micros, rej);
    case FIELD_BOOLEAN:
        if (!json_is_boolean(v))
            return reject(rej, ERROR_INVALID_FIELD, "%s: expected true or false, got %s", f->name,
                          json_type_name(v));
        *col = event_append(ev, json_is_true(v) ? "t" : "f", 1);
        return 0;
    case FIELD_UUID: return decode_uuid(f, v, ev, col, rej);
    case FIELD_HISTOGRAM: return decode_histogram(f, v, ev, col, rej);
    case FIELD_PRICE: return decode_price(f, v, ev, col, rej);
    case FIELD_COUNTS: return decode_counts(f, v, ev, col, rej);
    }
    return reject(rej, ERROR_INVALID_FIELD, "%s: unsupported field kind", f->name);
}

static int reject_parse_error(const json_error_t *e, rejection_t *rej)
{
    switch (json_error_code(e)) {
    case json_error_invalid_utf8:
        return reject(rej, ERROR_INVALID_UTF8, "not valid UTF-8 at byte %d: %s", e->position,
                      e->text);
    case json_error_duplicate_key:
        return reject(rej, ERROR_INVALID_JSON,
                      "%s at byte %d (which value wins would depend on the parser)", e->text,
                      e->position);
    case json_error_numeric_overflow:
        return reject(rej, ERROR_INVALID_FIELD, "a number is out of range at byte %d: %s",
                      e->position, e->text);
    case json_error_null_byte_in_key:
        return reject(rej, ERROR_INVALID_FIELD,
                      "an object key contains a NUL character (U+0000), which PostgreSQL cannot hold: %s",
                      e->text);
    default:
        return reject(rej, ERROR_INVALID_JSON, "%s at line %d, column %d", e->text, e->line,
                      e->column);
    }
}

/* The start of the number token that ends at `end`. */
static size_t number_start(const char *s, size_t end)
{
    while (end > 0 && strchr("0123456789+-.eE", s[end - 1]) && s[end - 1] != '\0') end--;
    return end;
}

/* Parse, recovering from numbers too large for jansson: an integer beyond
 * 64 bits makes it parse again with integers as doubles (integers below 2^53
 * stay exact; a known integer field at or beyond 2^53 is then rejected in
 * this rare path rather than stored rounded); a number beyond a double is
 * replaced by the overflow marker. Returns the document or NULL with *jerr. */
static json_t *load_json(const void *value, size_t len, json_error_t *jerr)
{
    /* JSON_REJECT_DUPLICATES: a key given twice is a classic way to smuggle
     * a value past validation. JSON_ALLOW_NUL: let \u0000 through the parser
     * so the field check can name the field that holds it. */
    size_t flags = JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_ALLOW_NUL;
    static const char marker[] = OVERFLOW_MARKER_JSON;
    char *copy = NULL;
    const char *text = value;
    json_t *root = json_loadb(text, len, flags, jerr);

    for (int tries = 0; !root && json_error_code(jerr) == json_error_numeric_overflow && tries < 64; tries++) {
        size_t end = (size_t)jerr->position, start = number_start(text, end);
        if (start == end || end > len) break;
        if (!(flags & JSON_DECODE_INT_AS_REAL) && !memchr(text + start, '.', end - start) &&
            !memchr(text + start, 'e', end - start) && !memchr(text + start, 'E', end - start)) {
            flags |= JSON_DECODE_INT_AS_REAL;
        } else {
            char *next = malloc(len - (end - start) + sizeof marker);
            if (!next) abort();
            memcpy(next, text, start);
            memcpy(next + start, marker, sizeof marker - 1);
            memcpy(next + start + sizeof marker - 1, text + end, len - end);
            len = len - (end - start) + sizeof marker - 1;
            free(copy);
            copy = next;
            text = copy;
        }
        root = json_loadb(text, len, flags, jerr);
    }
    free(copy);
    return root;
}

int decode_record(const pipeline_def_t *def, const void *value, size_t len, event_t *ev,
                  rejection_t *rej)
{
    json_error_t jerr;
    json_t *root;
    json_t *v;
    int rc = -1;

    if (value == NULL || len == 0)
        return reject(rej, ERROR_EMPTY_PAYLOAD, "the record value is empty (tombstone or empty message)");

    root = load_json(value, len, &jerr);
    if (!root) return reject_parse_error(&jerr, rej);
    if (!json_is_object(root)) {
        reject(rej, ERROR_INVALID_JSON, "expected a JSON object, got %s", json_type_name(root));
        goto out;
    }

    ev->len = 0;
    ev->version = 0;
    v = json_object_get(root, "package_name");
    if (!v || json_is_null(v)) {
        reject(rej, ERROR_MISSING_FIELD, "package_name: required field is missing");
        goto out;
    }
    if (check_string("package_name", v, 1, 255, rej)) goto out;
    ev->package_name = event_append(ev, json_string_value(v), json_string_length(v));

    for (size_t i = 0; i < def->field_count; i++) {
        const field_spec_t *f = &def->fields[i];
        int64_t micros = 0;
        v = json_object_get(root, f->name);
        /* null and an absent optional field mean the same. */
        if (!v || json_is_null(v)) {
            if (f->required) {
                reject(rej, ERROR_MISSING_FIELD, "%s: required field is missing", f->name);
                goto out;
            }
            ev->col[i] = EVENT_NULL;
            continue;
        }
        if (decode_field(f, v, ev, &ev->col[i], &micros, rej)) goto out;
        /* Only a timestamp is a version (a unit test holds the table to it). */
        if (f->kind == FIELD_TIMESTAMP && def->version_field && strcmp(f->name, def->version_field) == 0)
            ev->version = micros;
    }
    rc = 0;
out:
    json_decref(root);
    return rc;
}
