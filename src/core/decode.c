#include "core/decode.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/json_value.h"
#include "core/number_text.h"
#include "core/timestamp.h"
#include "core/utf8.h"
#include "formats/connect_json.h"

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

/* Append n bytes (no NUL) to the column being written. */
static void event_put(event_t *ev, const char *s, size_t n)
{
    if (ev->len + n + 1 > ev->cap) {
        size_t cap = ev->cap ? ev->cap : 256;
        while (cap < ev->len + n + 1) cap *= 2;
        char *p = realloc(ev->buf, cap);
        if (!p) abort();
        ev->buf = p;
        ev->cap = cap;
    }
    memcpy(ev->buf + ev->len, s, n);
    ev->len += n;
}

/* End the column that began at `at` with its NUL; returns `at`. */
static size_t event_end(event_t *ev, size_t at)
{
    event_put(ev, "", 1);
    return at;
}

/* Append n bytes plus a NUL; returns the offset of the copy. */
static size_t event_append(event_t *ev, const char *s, size_t n)
{
    size_t at = ev->len;
    event_put(ev, s, n);
    return event_end(ev, at);
}

const char *const decode_error_types[DECODE_ERROR_TYPE_COUNT] = {
    ERROR_EMPTY_PAYLOAD, ERROR_INVALID_UTF8,     ERROR_INVALID_JSON,     ERROR_MISSING_FIELD,
    ERROR_INVALID_FIELD, ERROR_UNREGISTERED_APP, ERROR_DATABASE_REJECTED, ERROR_NO_MAGIC_BYTE,
    ERROR_SHORT_HEADER,  ERROR_UNKNOWN_SCHEMA,   ERROR_UNDECODABLE,       ERROR_TRAILING_BYTES};

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
 * equal to the marker is a string when no number was replaced (as the fast
 * reader, which takes such a record, reads it); when one was, the fast
 * reader declined the record and both readers' outcome is this one. */
#define OVERFLOW_MARKER_JSON "\"\\u0000overflow\""
static bool is_overflow_marker(const json_t *v)
{
    return json_is_string(v) && json_string_length(v) == 9 &&
           memcmp(json_string_value(v), "\0overflow", 9) == 0;
}

/* A jansson value as the decoder reads it (json_value.h): scalars and a
 * container's type and size; children are added by ref_member. */
static jv_t ref_scalar(const json_t *v, bool markers)
{
    jv_t out = {0};
    if (!v) return out; /* JV_ABSENT */
    switch (json_typeof(v)) {
    case JSON_NULL: out.type = JV_NULL; break;
    case JSON_TRUE:
    case JSON_FALSE:
        out.type = JV_BOOL;
        out.boolean = json_is_true(v);
        break;
    case JSON_INTEGER:
        out.type = JV_INT;
        out.integer = json_integer_value(v);
        break;
    case JSON_REAL:
        out.type = JV_REAL;
        out.real = json_real_value(v);
        break;
    case JSON_STRING:
        out.type = markers && is_overflow_marker(v) ? JV_OVERFLOW : JV_STRING;
        out.str = json_string_value(v);
        out.len = json_string_length(v);
        break;
    case JSON_ARRAY:
        out.type = JV_ARRAY;
        out.count = json_array_size(v);
        break;
    case JSON_OBJECT:
        out.type = JV_OBJECT;
        out.count = json_object_size(v);
        break;
    }
    return out;
}

/* A top-level member with its children, which live in *children and *keys
 * (freed by the caller). */
static jv_t ref_member(const json_t *v, bool markers, jv_t **children, jv_key_t **keys)
{
    jv_t out = ref_scalar(v, markers);
    *children = NULL;
    *keys = NULL;
    if ((out.type != JV_ARRAY && out.type != JV_OBJECT) || out.count == 0) return out;
    jv_t *items = calloc(out.count, sizeof *items);
    if (!items) abort();
    if (out.type == JV_ARRAY) {
        for (size_t i = 0; i < out.count; i++) items[i] = ref_scalar(json_array_get(v, i), markers);
    } else {
        jv_key_t *k = calloc(out.count, sizeof *k);
        if (!k) abort();
        const char *key;
        size_t key_len, i = 0;
        json_t *child;
        json_object_keylen_foreach((json_t *)v, key, key_len, child)
        {
            items[i] = ref_scalar(child, markers);
            k[i++] = (jv_key_t){key, key_len};
        }
        out.keys = *keys = k;
    }
    out.items = *children = items;
    return out;
}

static int reject_overflow(rejection_t *rej, const char *name)
{
    return reject(rej, ERROR_INVALID_FIELD, "%s: number out of range (beyond what a double can hold)", name);
}

static const char *jv_type_name(const jv_t *v)
{
    switch (v->type) {
    case JV_OBJECT: return "an object";
    case JV_ARRAY: return "an array";
    case JV_STRING: return "a string";
    case JV_INT: return "an integer";
    case JV_REAL:
    case JV_OVERFLOW: return "a number";
    case JV_BOOL: return "a boolean";
    case JV_NULL: return "null";
    case JV_ABSENT: break;
    }
    return "an unknown value";
}


/* UTF-8 characters in a string the parser has already validated. */
static size_t utf8_chars(const char *s, size_t n)
{
    size_t chars = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80) chars++;
    return chars;
}

/* The byte length of the first `chars` characters of s[0..n). */
static size_t utf8_prefix(const char *s, size_t n, size_t chars)
{
    size_t i = 0;
    for (; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80 && chars-- == 0) break;
    return i;
}

/* A string usable as PostgreSQL text: no U+0000 (text cannot hold it; libpq
 * would silently truncate at it), length in characters within the column.
 * With `clip`, PostgreSQL's rule for VARCHAR(n) and CHAR(n): characters
 * beyond n that are all spaces are cut away, any other makes it too long.
 * *kept: the bytes stored. */
static int check_string(const char *name, const jv_t *v, int64_t min, int64_t max, bool clip, size_t *kept,
                        rejection_t *rej)
{
    if (v->type == JV_OVERFLOW) return reject_overflow(rej, name);
    if (v->type != JV_STRING)
        return reject(rej, ERROR_INVALID_FIELD, "%s: expected a string, got %s", name,
                      jv_type_name(v));
    const char *s = v->str;
    size_t n = v->len;
    *kept = n;
    if (memchr(s, '\0', n))
        return reject(rej, ERROR_INVALID_FIELD,
                      "%s: contains a NUL character (U+0000), which PostgreSQL text cannot hold",
                      name);
    /* A character is 1 to 4 bytes: within max bytes, and not empty, is
     * within max characters without counting them. */
    if ((int64_t)n <= max && (min <= 0 || (min == 1 && n > 0))) return 0;
    size_t chars = utf8_chars(s, n);
    if ((int64_t)chars > max) {
        size_t at = clip ? utf8_prefix(s, n, (size_t)max) : 0;
        for (size_t j = at; clip && j < n; j++)
            if (s[j] != ' ') clip = false;
        if (!clip)
            return reject(rej, ERROR_INVALID_FIELD, "%s: %zu characters, longer than the column's %lld", name,
                          chars, (long long)max);
        *kept = at;
        chars = (size_t)max;
    }
    if ((int64_t)chars < min) {
        if (chars == 0) return reject(rej, ERROR_INVALID_FIELD, "%s: must not be empty", name);
        return reject(rej, ERROR_INVALID_FIELD, "%s: %zu characters, fewer than the minimum %lld", name, chars,
                      (long long)min);
    }
    return 0;
}

/* VARCHAR(n), CHAR(n), TEXT: the string as PostgreSQL stores it (CHAR(n)
 * padded with spaces to n characters). */
static int decode_string(const field_spec_t *f, const jv_t *v, event_t *ev, size_t *col, rejection_t *rej)
{
    size_t kept;
    if (check_string(f->name, v, f->min, f->max, true, &kept, rej)) return -1;
    size_t at = ev->len;
    event_put(ev, v->str, kept);
    if (f->pad)
        for (size_t chars = utf8_chars(v->str, kept); (int64_t)chars < f->max; chars++) event_put(ev, " ", 1);
    *col = event_end(ev, at);
    return 0;
}

/* An integer exactly: JSON integers, or numbers with an integral value that a
 * double represents exactly (1e3, 5.0); never a rounded fraction. */
static int get_integer(const char *name, const jv_t *v, int64_t min, int64_t max, int64_t *out,
                       rejection_t *rej)
{
    int64_t x;
    if (v->type == JV_OVERFLOW) return reject_overflow(rej, name);
    if (v->type == JV_INT) {
        x = v->integer;
    } else if (v->type == JV_REAL) {
        double d = v->real;
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
                      jv_type_name(v));
    }
    if (x < min || x > max)
        return reject(rej, ERROR_INVALID_FIELD, "%s: %lld is out of range %lld..%lld", name,
                      (long long)x, (long long)min, (long long)max);
    *out = x;
    return 0;
}

/* x in decimal into tmp[24]; returns the length. By hand: it runs for
 * every integer of every record. */
static size_t format_int(char tmp[24], int64_t x)
{
    char rev[20];
    size_t n = 0, len = 0;
    uint64_t u = x < 0 ? (uint64_t)0 - (uint64_t)x : (uint64_t)x;
    do {
        rev[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (x < 0) tmp[len++] = '-';
    while (n) tmp[len++] = rev[--n];
    return len;
}

static size_t append_int(event_t *ev, int64_t x)
{
    char tmp[24];
    return event_append(ev, tmp, format_int(tmp, x));
}

/* Past the string that opens at s[i] ('"'); n if it never closes. A quote
 * ends it unless an odd run of backslashes escapes it. */
static size_t skip_string(const char *s, size_t n, size_t i)
{
    for (i++; i < n;) {
        const char *q = memchr(s + i, '"', n - i);
        if (!q) return n;
        size_t at = (size_t)(q - s), back = 0;
        while (at - back > i && s[at - back - 1] == '\\') back++;
        if (back % 2 == 0) return at + 1;
        i = at + 1;
    }
    return n;
}

static size_t skip_space(const char *s, size_t n, size_t i)
{
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
    return i;
}

/* Past the value that starts at s[i]: a string, a container with
 * everything in it, or a scalar up to the next delimiter. */
static size_t skip_value(const char *s, size_t n, size_t i)
{
    if (i < n && s[i] == '"') return skip_string(s, n, i);
    if (i < n && (s[i] == '{' || s[i] == '[')) {
        size_t depth = 0;
        while (i < n) {
            char c = s[i];
            if (c == '"') {
                i = skip_string(s, n, i);
                continue;
            }
            if (c == '{' || c == '[') depth++;
            else if ((c == '}' || c == ']') && --depth == 0) return i + 1;
            i++;
        }
        return n;
    }
    for (; i < n; i++) {
        switch (s[i]) {
        case ',': case '}': case ']': case ' ': case '\t': case '\n': case '\r': case '\0': return i;
        default: break;
        }
    }
    return i;
}

/* A record as sent, and where the last member looked for was found: the
 * fields are read in their definition's order, most often the record's own,
 * so each look resumes where the last one stopped (one pass for them all). */
typedef struct {
    const char *s;
    size_t len;
    bool started;
    size_t member, pos; /* the member whose key starts at s[pos] */
    /* A value below the top level (a member path's): its text is
     * s[wstart, wend), whatever member is asked for. */
    bool whole;
    size_t wstart, wend;
} record_text_t;

static bool member_text(record_text_t *d, size_t member, size_t *start, size_t *end)
{
    const char *doc = d->s;
    size_t len = d->len, i;
    if (d->whole) {
        *start = d->wstart;
        *end = d->wend;
        return d->wend > d->wstart;
    }
    if (!d->started || member < d->member) {
        i = skip_space(doc, len, 0);
        if (i >= len || doc[i] != '{') return false;
        d->started = true;
        d->member = 0;
        d->pos = skip_space(doc, len, i + 1);
    }
    i = d->pos;
    for (size_t at = d->member; i < len && doc[i] == '"'; at++) {
        size_t key = i;
        i = skip_space(doc, len, skip_string(doc, len, i));
        if (i >= len || doc[i] != ':') return false;
        i = skip_space(doc, len, i + 1);
        size_t value_end = skip_value(doc, len, i);
        if (at == member) {
            d->member = at;
            d->pos = key;
            *start = i;
            *end = value_end;
            return value_end > i;
        }
        i = skip_space(doc, len, value_end);
        if (i >= len || doc[i] != ',') return false;
        i = skip_space(doc, len, i + 1);
    }
    return false;
}

/* The text of element `index` of the array whose text is s[0, len). */
static bool element_text(const char *s, size_t len, size_t index, size_t *start, size_t *end)
{
    size_t i = skip_space(s, len, 0);
    if (i >= len || s[i] != '[') return false;
    i = skip_space(s, len, i + 1);
    for (size_t at = 0; i < len && s[i] != ']'; at++) {
        size_t e = skip_value(s, len, i);
        if (at == index) {
            *start = i;
            *end = e;
            return e > i;
        }
        i = skip_space(s, len, e);
        if (i >= len || s[i] != ',') return false;
        i = skip_space(s, len, i + 1);
    }
    return false;
}

bool json_member_text(const char *doc, size_t len, size_t member, size_t *start, size_t *end)
{
    record_text_t d = {doc, len, false, 0, 0};
    return member_text(&d, member, start, end);
}

/* A top-level number's text as its producer sent it (json_member_text),
 * in *s and *n; a string standing where a number was read (the reference
 * reader's overflow marker, or a string equal to it) is named as a string. */
static int number_text_of(const field_spec_t *f, const jv_t *v, record_text_t *doc, const char **s,
                          size_t *n, rejection_t *rej)
{
    size_t start, end;
    if (v->type != JV_INT && v->type != JV_REAL && v->type != JV_OVERFLOW)
        return reject(rej, ERROR_INVALID_FIELD, "%s: expected a number, got %s", f->name, jv_type_name(v));
    if (!member_text(doc, v->member, &start, &end))
        return reject(rej, ERROR_INVALID_FIELD, "%s: the number's text cannot be found", f->name);
    if (doc->s[start] == '"')
        return reject(rej, ERROR_INVALID_FIELD, "%s: expected a number, got a string", f->name);
    *s = doc->s + start;
    *n = end - start;
    return 0;
}

/* At most 40 characters of a number's text, for a detail. */
#define SHOWN(n) (int)((n) > 40 ? 40 : (n))
#define ELLIPSIS(n) ((n) > 40 ? "..." : "")

/* REAL and DOUBLE PRECISION: the text as sent, refused where float4in or
 * float8in would refuse it (out of range: an overflow, or a nonzero value
 * that underflows to zero); the declared bounds hold for the value
 * PostgreSQL stores. */
static int decode_number(const field_spec_t *f, const jv_t *v, record_text_t *doc, event_t *ev,
                         size_t *col, rejection_t *rej)
{
    const char *s;
    size_t n;
    double d;
    if (number_text_of(f, v, doc, &s, &n, rej)) return -1;
    if (number_text_float(s, n, f->single, &d))
        return reject(rej, ERROR_INVALID_FIELD, "%s: %.*s%s is out of range for type %s", f->name, SHOWN(n), s,
                      ELLIPSIS(n), f->single ? "real" : "double precision");
    if (d < f->dmin || d > f->dmax)
        return reject(rej, ERROR_INVALID_FIELD, "%s: %.*s%s is out of range %.17g..%.17g", f->name, SHOWN(n), s,
                      ELLIPSIS(n), f->dmin, f->dmax);
    *col = event_append(ev, s, n);
    return 0;
}

/* NUMERIC and NUMERIC(p,s): the text as sent, never through a double
 * (NUMERIC keeps every digit of its input). Refused where numeric_in would
 * refuse it, and where NUMERIC(p,s) would store another number: more than
 * s decimals (PostgreSQL would round them away). The declared bounds are
 * compared exactly. */
static int decode_decimal(const field_spec_t *f, const jv_t *v, record_text_t *doc, event_t *ev,
                          size_t *col, rejection_t *rej)
{
    const char *s;
    size_t n;
    number_text_t x;
    if (number_text_of(f, v, doc, &s, &n, rej)) return -1;
    number_text_read(s, n, &x);
    switch (number_text_numeric_fit(&x, f->precision, f->scale)) {
    case NUMBER_FITS: break;
    case NUMBER_OVERFLOWS_NUMERIC:
        return reject(rej, ERROR_INVALID_FIELD, "%s: %.*s%s overflows numeric format", f->name, SHOWN(n), s,
                      ELLIPSIS(n));
    case NUMBER_BEYOND_PRECISION:
        return reject(rej, ERROR_INVALID_FIELD,
                      "%s: %.*s%s is out of range for numeric(%d,%d) (an absolute value below 1e%d)", f->name,
                      SHOWN(n), s, ELLIPSIS(n), f->precision, f->scale, f->precision - f->scale);
    case NUMBER_MORE_DECIMALS:
        return reject(rej, ERROR_INVALID_FIELD, "%s: %.*s%s has more than %d decimals", f->name, SHOWN(n), s,
                      ELLIPSIS(n), f->scale);
    }
    if (f->declared.min_set && number_text_compare(&x, s, n, f->declared.min) < 0)
        return reject(rej, ERROR_INVALID_FIELD, "%s: %.*s%s is below the minimum %.17g", f->name, SHOWN(n), s,
                      ELLIPSIS(n), f->declared.min);
    if (f->declared.max_set && number_text_compare(&x, s, n, f->declared.max) > 0)
        return reject(rej, ERROR_INVALID_FIELD, "%s: %.*s%s is above the maximum %.17g", f->name, SHOWN(n), s,
                      ELLIPSIS(n), f->declared.max);
    *col = event_append(ev, s, n);
    return 0;
}

static int decode_timestamp(const field_spec_t *f, const jv_t *v, event_t *ev, size_t *col,
                            int64_t *micros, rejection_t *rej)
{
    char why[160];
    if (v->type != JV_STRING)
        return reject(rej, ERROR_INVALID_FIELD, "%s: expected an ISO 8601 string, got %s",
                      f->name, jv_type_name(v));
    if (timestamp_parse(v->str, v->len, micros, why, sizeof why))
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

/* UUID: every form uuid_in reads (PostgreSQL 15): an optional pair of
 * braces around 32 hexadecimal digits, either case, with a hyphen allowed
 * after any group of four; stored as PostgreSQL writes it, 8-4-4-4-12 in
 * lower case. */
static int decode_uuid(const field_spec_t *f, const jv_t *v, event_t *ev, size_t *col,
                       rejection_t *rej)
{
    if (v->type != JV_STRING)
        return reject(rej, ERROR_INVALID_FIELD, "%s: expected a UUID string, got %s", f->name,
                      jv_type_name(v));
    const char *s = v->str, *end = v->str + v->len;
    char out[36];
    size_t o = 0;
    bool braces = s < end && *s == '{', ok = true;
    s += braces;
    for (int i = 0; ok && i < 32; i++) {
        int h = s < end ? hexval(*s++) : -1;
        ok = h >= 0;
        if (i == 8 || i == 12 || i == 16 || i == 20) out[o++] = '-';
        out[o++] = "0123456789abcdef"[h & 15];
        if (i % 4 == 3 && i < 31 && s < end && *s == '-') s++;
    }
    if (ok && braces) ok = s < end && *s++ == '}';
    if (!ok || s != end)
        return reject(rej, ERROR_INVALID_FIELD,
                      "%s: not a UUID (expected 32 hexadecimal digits, as 8-4-4-4-12 or in braces)", f->name);
    *col = event_append(ev, out, 36);
    return 0;
}

static int decode_histogram(const field_spec_t *f, const jv_t *v, event_t *ev, size_t *col,
                            rejection_t *rej)
{
    if (v->type != JV_ARRAY)
        return reject(rej, ERROR_INVALID_FIELD, "%s: expected an array of 5 integers, got %s",
                      f->name, jv_type_name(v));
    if (v->count != 5)
        return reject(rej, ERROR_INVALID_FIELD, "%s: expected exactly 5 integers, got %zu",
                      f->name, v->count);
    char tmp[5 * 21 + 3];
    size_t n = 0;
    tmp[n++] = '{';
    for (size_t i = 0; i < 5; i++) {
        int64_t x;
        char name[64];
        snprintf(name, sizeof name, "%s[%zu]", f->name, i);
        if (get_integer(name, &v->items[i], f->min, f->max, &x, rej)) return -1;
        n += (size_t)snprintf(tmp + n, sizeof tmp - n, "%s%lld", i ? "," : "", (long long)x);
    }
    tmp[n++] = '}';
    *col = event_append(ev, tmp, n);
    return 0;
}

/* A key as jansson's compact output writes it (`"`, `\\`, and control
 * characters escaped; everything else as is), so the stored text does not
 * depend on which parser read the record. */
static void put_json_key(event_t *ev, const jv_key_t *k)
{
    static const char short_escape[] = {['\b'] = 'b', ['\f'] = 'f', ['\n'] = 'n', ['\r'] = 'r', ['\t'] = 't'};
    event_put(ev, "\"", 1);
    for (size_t i = 0; i < k->len; i++) {
        unsigned char c = (unsigned char)k->str[i];
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            event_put(ev, esc, 2);
        } else if (c < sizeof short_escape && short_escape[c]) {
            esc[0] = '\\';
            esc[1] = short_escape[c];
            event_put(ev, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04X", c);
            event_put(ev, esc, 6);
        } else {
            event_put(ev, (const char *)&c, 1);
        }
    }
    event_put(ev, "\"", 1);
}

/* A validated count as jansson's compact output writes it: an integer as
 * is; an integral real (1e3, 5.0: below 2^53, so %.17g has no exponent)
 * with ".0", as a real stays a real in jsonb. */
static void put_json_count(event_t *ev, const jv_t *v, int64_t x)
{
    char tmp[32];
    size_t n = v->type == JV_INT ? format_int(tmp, x)
                                 : (size_t)snprintf(tmp, sizeof tmp, "%.17g.0", v->real);
    event_put(ev, tmp, n);
}

/* protocols: {"tcp": 120, "udp": 7}. Stored as jsonb, which rejects U+0000;
 * written back as compact JSON. */
static int decode_counts(const field_spec_t *f, const jv_t *v, event_t *ev, size_t *col,
                         rejection_t *rej)
{
    if (v->type != JV_OBJECT)
        return reject(rej, ERROR_INVALID_FIELD, "%s: expected an object of name -> count, got %s",
                      f->name, jv_type_name(v));
    size_t at = ev->len;
    event_put(ev, "{", 1);
    for (size_t i = 0; i < v->count; i++) {
        const jv_key_t *key = &v->keys[i];
        int64_t x;
        char name[96];
        if (memchr(key->str, '\0', key->len))
            return reject(rej, ERROR_INVALID_FIELD, "%s: a key contains a NUL character",
                          f->name);
        snprintf(name, sizeof name, "%s.%.*s", f->name, (int)(key->len > 48 ? 48 : key->len),
                 key->str);
        if (get_integer(name, &v->items[i], f->min, f->max, &x, rej)) return -1;
        if (i) event_put(ev, ",", 1);
        put_json_key(ev, key);
        event_put(ev, ":", 1);
        put_json_count(ev, &v->items[i], x);
    }
    event_put(ev, "}", 1);
    *col = event_end(ev, at);
    return 0;
}

/* A value PostgreSQL judges (DESIGN.md: Pipelines are declared): the
 * decoder says only what text reaches it. */

/* A string's characters as the type's text input (date, time, timestamp,
 * bytea); U+0000 cannot reach PostgreSQL. */
static int decode_text(const field_spec_t *f, const jv_t *v, event_t *ev, size_t *col, rejection_t *rej)
{
    size_t kept;
    if (check_string(f->name, v, 0, INT64_MAX, false, &kept, rej)) return -1;
    *col = event_append(ev, v->str, v->len);
    return 0;
}

/* json, or jsonb without a kind: the member's JSON text as sent (json keeps
 * it byte for byte). */
static int decode_json(const field_spec_t *f, const jv_t *v, record_text_t *doc, event_t *ev,
                       size_t *col, rejection_t *rej)
{
    size_t start, end;
    if (!member_text(doc, v->member, &start, &end))
        return reject(rej, ERROR_INVALID_FIELD, "%s: the value's text cannot be found", f->name);
    *col = event_append(ev, doc->s + start, end - start);
    return 0;
}

/* One element of an array literal, in double quotes ('"' and '\' escaped). */
static void put_array_element(event_t *ev, const char *s, size_t n)
{
    event_put(ev, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"' || s[i] == '\\') event_put(ev, "\\", 1);
        event_put(ev, s + i, 1);
    }
    event_put(ev, "\"", 1);
}

/* An array column: a JSON array written as PostgreSQL's array literal (its
 * strings quoted, null as NULL; for json[] and jsonb[] each element's JSON
 * text as sent), or a string holding a literal, handed over as it is. */
static int decode_array(const field_spec_t *f, const jv_t *v, record_text_t *doc, event_t *ev,
                        size_t *col, rejection_t *rej)
{
    if (v->type == JV_STRING) return decode_text(f, v, ev, col, rej);
    if (v->type != JV_ARRAY)
        return reject(rej, ERROR_INVALID_FIELD, "%s: expected an array, got %s", f->name, jv_type_name(v));
    size_t start = 0, end = 0, i = 0;
    if (f->json_elements && !member_text(doc, v->member, &start, &end))
        return reject(rej, ERROR_INVALID_FIELD, "%s: the value's text cannot be found", f->name);
    size_t at = ev->len, p = skip_space(doc->s, end, start + 1);
    event_put(ev, "{", 1);
    for (i = 0; i < v->count; i++) {
        const jv_t *e = &v->items[i];
        if (i) event_put(ev, ",", 1);
        if (f->json_elements) { /* the element's text, from the member's */
            size_t e_end = skip_value(doc->s, end, p);
            put_array_element(ev, doc->s + p, e_end - p);
            p = skip_space(doc->s, end, e_end);
            p = skip_space(doc->s, end, p + (p < end && doc->s[p] == ','));
        } else if (e->type == JV_NULL) {
            event_put(ev, "NULL", 4);
        } else if (e->type == JV_STRING && !memchr(e->str, '\0', e->len)) {
            put_array_element(ev, e->str, e->len);
        } else {
            ev->len = at;
            return reject(rej, ERROR_INVALID_FIELD, "%s[%zu]: expected a string or null, got %s", f->name, i,
                          e->type == JV_STRING ? "a NUL character (U+0000)" : jv_type_name(e));
        }
    }
    event_put(ev, "}", 1);
    *col = event_end(ev, at);
    return 0;
}

static int decode_field(const field_spec_t *f, const jv_t *v, record_text_t *doc, event_t *ev,
                        size_t *col, int64_t *micros, rejection_t *rej)
{
    int64_t x;
    /* A number beyond a double is judged on its text where a column takes
     * the text (NUMERIC holds it); elsewhere it is out of range. */
    if (v->type == JV_OVERFLOW && f->kind != FIELD_NUMBER && f->kind != FIELD_DECIMAL && f->kind != FIELD_JSON)
        return reject_overflow(rej, f->name);
    switch (f->kind) {
    case FIELD_STRING:
        return decode_string(f, v, ev, col, rej);
    case FIELD_INTEGER:
        if (get_integer(f->name, v, f->min, f->max, &x, rej)) return -1;
        *col = append_int(ev, x);
        *micros = x; /* an integer orders observations as itself */
        return 0;
    case FIELD_NUMBER: return decode_number(f, v, doc, ev, col, rej);
    case FIELD_TIMESTAMP: return decode_timestamp(f, v, ev, col, micros, rej);
    case FIELD_BOOLEAN:
        if (v->type != JV_BOOL)
            return reject(rej, ERROR_INVALID_FIELD, "%s: expected true or false, got %s", f->name,
                          jv_type_name(v));
        *col = event_append(ev, v->boolean ? "t" : "f", 1);
        return 0;
    case FIELD_UUID: return decode_uuid(f, v, ev, col, rej);
    case FIELD_HISTOGRAM: return decode_histogram(f, v, ev, col, rej);
    case FIELD_DECIMAL: return decode_decimal(f, v, doc, ev, col, rej);
    case FIELD_COUNTS: return decode_counts(f, v, ev, col, rej);
    case FIELD_TEXT: return decode_text(f, v, ev, col, rej);
    case FIELD_JSON: return decode_json(f, v, doc, ev, col, rej);
    case FIELD_ARRAY: return decode_array(f, v, doc, ev, col, rej);
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
 * 64 bits is given a ".0" and parsed again, so that number alone is read as
 * a double (a known integer field then refuses it, out of range, naming it;
 * every other integer of the record stays an exact integer, whatever an
 * unknown member holds); a number beyond a double is replaced by the
 * overflow marker (*markers set). Returns the document or NULL with *jerr. */
static json_t *load_json(const void *value, size_t len, json_error_t *jerr, bool *markers)
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
        bool integer = !memchr(text + start, '.', end - start) && !memchr(text + start, 'e', end - start) &&
                       !memchr(text + start, 'E', end - start);
        /* The integer's digits and ".0", or the marker, in place of the token. */
        const char *put = integer ? text + start : marker;
        size_t put_len = integer ? end - start : sizeof marker - 1, grown = put_len + (integer ? 2 : 0);
        char *next = malloc(len - (end - start) + grown + 1);
        if (!next) abort();
        memcpy(next, text, start);
        memcpy(next + start, put, put_len);
        if (integer) memcpy(next + start + put_len, ".0", 2);
        *markers |= !integer;
        memcpy(next + start + grown, text + end, len - end);
        len = len - (end - start) + grown;
        free(copy);
        copy = next;
        text = copy;
        root = json_loadb(text, len, flags, jerr);
    }
    free(copy);
    return root;
}

/* A string of JSON: quotes, backslashes and control characters escaped. */
static void put_json_string(event_t *ev, const char *s, size_t n)
{
    event_put(ev, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\', esc[1] = (char)c;
            event_put(ev, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            event_put(ev, esc, 6);
        } else {
            event_put(ev, s + i, 1);
        }
    }
    event_put(ev, "\"", 1);
}

/* Bytes a text column takes: UTF-8 without U+0000 (what `what` holds,
 * for the rejection). */
static int check_text_bytes(const field_spec_t *f, const char *what, const void *s, size_t n, rejection_t *rej)
{
    if (!utf8_valid(s, n)) return reject(rej, ERROR_INVALID_UTF8, "%s: %s is not valid UTF-8", f->name, what);
    if (memchr(s, '\0', n))
        return reject(rej, ERROR_INVALID_FIELD, "%s: %s contains a NUL character (U+0000), which PostgreSQL text "
                                                "cannot hold", f->name, what);
    return 0;
}

/* The record's headers as JSON: [{"key": name, "value": value or null}],
 * in the record's order; a name or value that is not UTF-8 text refused. */
static int decode_headers(const field_spec_t *f, const record_t *rec, event_t *ev, size_t *col, rejection_t *rej)
{
    size_t at = ev->len;
    const char *name;
    const void *value;
    size_t len;
    event_put(ev, "[", 1);
    for (size_t i = 0; rec->headers.at && rec->headers.at(rec->headers.opaque, i, &name, &value, &len); i++) {
        char what[96];
        snprintf(what, sizeof what, "header %zu", i);
        if (check_text_bytes(f, what, name, strlen(name), rej) || (value && check_text_bytes(f, what, value, len, rej))) {
            ev->len = at;
            return -1;
        }
        event_put(ev, i ? ",{\"key\":" : "{\"key\":", i ? 8 : 7);
        put_json_string(ev, name, strlen(name));
        event_put(ev, ",\"value\":", 9);
        if (value)
            put_json_string(ev, value, len);
        else
            event_put(ev, "null", 4);
        event_put(ev, "}", 1);
    }
    event_put(ev, "]", 1);
    *col = event_end(ev, at);
    return 0;
}

/* Bytes of the record (its key, a header's value) into their column: a
 * bytea as its hex text, any other as a string the field then checks. */
static int record_bytes(const field_spec_t *f, const char *what, const void *s, size_t n, char **hex, jv_t *v,
                        rejection_t *rej)
{
    if (f->bytes) {
        static const char digits[] = "0123456789abcdef";
        *hex = malloc(2 * n + 3);
        if (!*hex) abort();
        memcpy(*hex, "\\x", 2);
        for (size_t i = 0; i < n; i++) {
            (*hex)[2 + 2 * i] = digits[((const unsigned char *)s)[i] >> 4];
            (*hex)[3 + 2 * i] = digits[((const unsigned char *)s)[i] & 15];
        }
        *v = (jv_t){.type = JV_STRING, .str = *hex, .len = 2 * n + 2};
        return 0;
    }
    if (!utf8_valid(s, n)) return reject(rej, ERROR_INVALID_UTF8, "%s: %s is not valid UTF-8", f->name, what);
    *v = (jv_t){.type = JV_STRING, .str = s, .len = n};
    return 0;
}

/* The record's key read as a JSON object, once per record, for the fields
 * of its members (DESIGN.md: Pipelines are declared). */
typedef struct {
    bool read;
    json_t *root; /* NULL after a failed read: jerr says why */
    bool markers;
    json_error_t jerr;
    record_text_t doc;
} key_doc_t;

/* What one field of the record's own is read into: scratch, and what is
 * freed once its value is decoded. */
typedef struct {
    char buf[64];
    char *hex;
    jv_t *children;
    jv_key_t *keys;
} own_value_t;

static int reject_parse_error(const json_error_t *e, rejection_t *rej);
static json_t *load_json(const void *value, size_t len, json_error_t *jerr, bool *markers);

/* Member f->header of the record's key, a JSON object, with its place among
 * the key's members (for its text as sent). */
static int key_member(const field_spec_t *f, const record_t *rec, key_doc_t *kd, own_value_t *o, jv_t *v,
                      rejection_t *rej)
{
    if (!kd->read) {
        kd->read = true;
        kd->root = load_json(rec->key, rec->key_len, &kd->jerr, &kd->markers);
        kd->doc = (record_text_t){rec->key, rec->key_len, false, 0, 0};
    }
    if (!kd->root) {
        rejection_t why;
        reject_parse_error(&kd->jerr, &why);
        return reject(rej, why.error_type, "%s: the key is not JSON: %s", f->name, why.detail);
    }
    if (!json_is_object(kd->root)) return reject(rej, ERROR_INVALID_JSON, "%s: the key is not a JSON object", f->name);
    const char *key;
    size_t key_len, position = 0;
    json_t *member;
    json_object_keylen_foreach(kd->root, key, key_len, member)
    {
        if (key_len == strlen(f->header) && memcmp(key, f->header, key_len) == 0) {
            *v = ref_member(member, kd->markers, &o->children, &o->keys);
            v->member = position;
            return 0;
        }
        position++;
    }
    return 0;
}

/* A field of the record's own, as the value the field's check takes (a
 * string or an integer, or a member of the key as any member),
 * JV_ABSENT where the record has none (no key, no such header or member, no
 * timestamp, or no record: decode_record). The headers go straight into the
 * event (*col set, JV_OBJECT returned in *v). */
static int record_value(const field_spec_t *f, const record_t *rec, key_doc_t *kd, own_value_t *o, jv_t *v,
                        event_t *ev, size_t *col, rejection_t *rej)
{
    char *buf = o->buf;
    size_t buflen = sizeof o->buf;
    *v = (jv_t){.type = JV_ABSENT};
    if (!rec) return 0;
    switch (f->source) {
    case SOURCE_VALUE: break;
    case SOURCE_TOPIC: *v = (jv_t){.type = JV_STRING, .str = rec->topic, .len = strlen(rec->topic)}; break;
    case SOURCE_PARTITION: *v = (jv_t){.type = JV_INT, .integer = rec->partition}; break;
    case SOURCE_OFFSET: *v = (jv_t){.type = JV_INT, .integer = rec->offset}; break;
    case SOURCE_TIMESTAMP:
        if (rec->timestamp_ms < 0) break;
        if (f->kind == FIELD_TIMESTAMP) {
            time_t secs = (time_t)(rec->timestamp_ms / 1000);
            struct tm tm;
            gmtime_r(&secs, &tm);
            size_t n = strftime(buf, buflen, "%Y-%m-%dT%H:%M:%S", &tm);
            snprintf(buf + n, buflen - n, ".%03dZ", (int)(rec->timestamp_ms % 1000));
            *v = (jv_t){.type = JV_STRING, .str = buf, .len = strlen(buf)};
        } else {
            *v = (jv_t){.type = JV_INT, .integer = rec->timestamp_ms};
        }
        break;
    case SOURCE_TIMESTAMP_TYPE:
        if (rec->timestamp_type == RECORD_TIMESTAMP_NONE) break;
        snprintf(buf, buflen, "%s", rec->timestamp_type == RECORD_TIMESTAMP_CREATE ? "create" : "log_append");
        *v = (jv_t){.type = JV_STRING, .str = buf, .len = strlen(buf)};
        break;
    case SOURCE_KEY:
        if (!rec->key) break;
        return record_bytes(f, "the key", rec->key, rec->key_len, &o->hex, v, rej);
    case SOURCE_KEY_MEMBER:
        if (!rec->key) break;
        return key_member(f, rec, kd, o, v, rej);
    case SOURCE_HEADER: {
        const char *name;
        const void *value, *last = NULL;
        size_t len, last_len = 0;
        for (size_t i = 0; rec->headers.at && rec->headers.at(rec->headers.opaque, i, &name, &value, &len); i++)
            if (strcmp(name, f->header) == 0) last = value, last_len = len;
        if (!last) break;
        return record_bytes(f, "its value", last, last_len, &o->hex, v, rej);
    }
    case SOURCE_HEADERS:
        if (decode_headers(f, rec, ev, col, rej)) return -1;
        *v = (jv_t){.type = JV_OBJECT};
        break;
    }
    return 0;
}

/* Field i, one of the record's own, decoded into ev->col[i] (absent: NULL,
 * or missing_field when it is required). Returns 0 or -1 with *rej. */
static int decode_own(const pipeline_def_t *def, size_t i, const record_t *rec, key_doc_t *kd, event_t *ev,
                      int64_t *micros, rejection_t *rej)
{
    const field_spec_t *f = &def->fields[i];
    own_value_t o = {.hex = NULL};
    jv_t v;
    int rc = record_value(f, rec, kd, &o, &v, ev, &ev->col[i], rej);
    if (rc == 0 && v.type != JV_OBJECT) { /* JV_OBJECT: the headers, written */
        if (v.type == JV_ABSENT || v.type == JV_NULL) {
            ev->col[i] = EVENT_NULL;
            if (f->required) rc = reject(rej, ERROR_MISSING_FIELD, "%s: required field is missing", f->name);
        } else {
            rc = decode_field(f, &v, f->source == SOURCE_KEY_MEMBER ? &kd->doc : &(record_text_t){"", 0, false, 0, 0},
                              ev, &ev->col[i], micros, rej);
        }
    }
    free(o.hex);
    free(o.children);
    free(o.keys);
    return rc;
}

/* What a member path's value is read into, freed once it is decoded. */
typedef struct {
    json_t *root;
    jv_t *children;
    jv_key_t *keys;
} path_value_t;

static void path_value_free(path_value_t *pv)
{
    json_decref(pv->root);
    free(pv->children);
    free(pv->keys);
}

/* Whether `seg` is an array index as a JSON Pointer writes one: "0", or
 * digits without a leading zero; into *index. */
static bool pointer_index(const char *seg, size_t *index)
{
    size_t n = strlen(seg);
    if (n == 0 || n > 9 || (n > 1 && seg[0] == '0') || strspn(seg, "0123456789") != n) return false;
    *index = (size_t)strtoul(seg, NULL, 10);
    return true;
}

/* Field f's value at its JSON Pointer below the top-level member `top`
 * (DESIGN.md: Member paths), into *v, and its text as sent into *sub.
 * Whichever reader read the record, the member's text is read again by the
 * reference reader and walked segment by segment, each step's text found
 * in its container's, so both give one outcome. A step into an absent or
 * null parent, or to a key or index the parent lacks, is absent; one into
 * a string, number or boolean is the record's error. */
static int path_value(const field_spec_t *f, const jv_t *top, record_text_t *doc, path_value_t *pv, jv_t *v,
                      record_text_t *sub, rejection_t *rej)
{
    *v = (jv_t){.type = JV_ABSENT};
    if (top->type == JV_ABSENT || top->type == JV_NULL) return 0;
    size_t start, end;
    if (!member_text(doc, top->member, &start, &end))
        return reject(rej, ERROR_INVALID_FIELD, "%s: the value's text cannot be found", f->name);
    json_error_t jerr;
    bool markers = false;
    const json_t *cur = pv->root = load_json(doc->s + start, end - start, &jerr, &markers);
    if (!cur) return reject(rej, ERROR_INVALID_FIELD, "%s: the value cannot be read: %s", f->name, jerr.text);
    for (size_t k = 1; k < f->path_count; k++) {
        const char *seg = f->path[k];
        const json_t *child = NULL;
        size_t cs = 0, ce = 0, index;
        bool found;
        if (json_is_object(cur)) {
            const char *key;
            size_t key_len, position = 0;
            json_t *member;
            json_object_keylen_foreach((json_t *)cur, key, key_len, member)
            {
                if (key_len == strlen(seg) && memcmp(key, seg, key_len) == 0) {
                    child = member;
                    break;
                }
                position++;
            }
            record_text_t in = {doc->s + start, end - start, false, 0, 0};
            found = !child || member_text(&in, position, &cs, &ce);
        } else if (json_is_array(cur)) {
            if (!pointer_index(seg, &index))
                return reject(rej, ERROR_INVALID_FIELD, "%s: \"%s\" is not an index of the array on the way",
                              f->name, seg);
            child = json_array_get(cur, index);
            found = !child || element_text(doc->s + start, end - start, index, &cs, &ce);
        } else if (json_is_null(cur)) {
            return 0;
        } else {
            jv_t parent = ref_scalar(cur, markers);
            return reject(rej, ERROR_INVALID_FIELD, "%s: expected an object or an array on the way, got %s", f->name,
                          jv_type_name(&parent));
        }
        if (!found) return reject(rej, ERROR_INVALID_FIELD, "%s: the value's text cannot be found", f->name);
        if (!child) return 0;
        cur = child;
        end = start + ce;
        start += cs;
    }
    *v = ref_member(cur, markers, &pv->children, &pv->keys);
    *sub = (record_text_t){doc->s, doc->len, false, 0, 0, true, start, end};
    return 0;
}

/* The record's values, whichever parser read them: package_name is vals[0],
 * field i is vals[i + 1]; doc is the record as sent; rec the record, for
 * the fields of its own (NULL: none). */
static int decode_fields(const pipeline_def_t *def, const jv_t *vals, const char *text, size_t text_len,
                         const record_t *rec, key_doc_t *kd, const connect_type_t *logical, event_t *ev,
                         rejection_t *rej)
{
    record_text_t doc = {text, text_len, false, 0, 0};
    ev->len = 0;
    ev->version = 0;
    if (!def->app_member) {
        ev->package_name = event_append(ev, "", 0);
    } else {
        if (vals[0].type == JV_ABSENT || vals[0].type == JV_NULL)
            return reject(rej, ERROR_MISSING_FIELD, "%s: required field is missing", def->app_member);
        size_t kept;
        if (check_string(def->app_member, &vals[0], 1, def->lookup_max_length < 0 ? INT64_MAX : def->lookup_max_length,
                         false, &kept, rej))
            return -1;
        ev->package_name = event_append(ev, vals[0].str, vals[0].len);
    }

    for (size_t i = 0; i < def->field_count; i++) {
        const field_spec_t *f = &def->fields[i];
        const jv_t *v = f->slot >= 0 ? &vals[f->slot] : NULL;
        int64_t micros = 0;
        if (f->source != SOURCE_VALUE) {
            if (decode_own(def, i, rec, kd, ev, &micros, rej)) return -1;
            if ((int)i == def->version_index) ev->version = micros;
            continue;
        }
        record_text_t *at = &doc, below;
        jv_t nested, whole = {.type = JV_OBJECT};
        path_value_t pv = {NULL, NULL, NULL};
        if (f->whole) { /* the record's value, a JSON object, as sent */
            size_t s = skip_space(text, text_len, 0), e = text_len;
            while (e > s && strchr(" \t\n\r", text[e - 1])) e--;
            below = (record_text_t){text, text_len, false, 0, 0, true, s, e};
            v = &whole;
            at = &below;
        } else if (f->path_count > 1) {
            int rc = path_value(f, v, &doc, &pv, &nested, &below, rej);
            v = &nested;
            at = &below;
            if (rc) {
                path_value_free(&pv);
                return -1;
            }
        }
        /* null and an absent optional field mean the same. */
        if (v->type == JV_ABSENT || v->type == JV_NULL) {
            path_value_free(&pv);
            if (f->required)
                return reject(rej, ERROR_MISSING_FIELD, "%s: required field is missing", f->name);
            ev->col[i] = EVENT_NULL;
            continue;
        }
        /* A logical type of a Connect envelope's schema: its text as
         * PostgreSQL reads it stands in for the value. */
        char *converted = NULL;
        jv_t lv;
        record_text_t ltext;
        if (logical && logical[i].type != CONNECT_PLAIN) {
            char why[200];
            int c = connect_text(logical[i], v, &converted, why, sizeof why);
            if (c < 0) {
                path_value_free(&pv);
                return reject(rej, ERROR_INVALID_FIELD, "%s: %s", f->name, why);
            }
            if (c == 0) {
                size_t n = strlen(converted);
                double real = logical[i].type == CONNECT_DECIMAL ? strtod(converted, NULL) : 0;
                lv = logical[i].type == CONNECT_DECIMAL
                         ? (jv_t){.type = isfinite(real) ? JV_REAL : JV_OVERFLOW, .real = real}
                         : (jv_t){.type = JV_STRING, .str = converted, .len = n};
                ltext = (record_text_t){converted, n, false, 0, 0, true, 0, n};
                v = &lv;
                at = &ltext;
            }
        }
        int rc = decode_field(f, v, at, ev, &ev->col[i], &micros, rej);
        free(converted);
        path_value_free(&pv);
        if (rc) return -1;
        /* A version is a timestamp or an integer (pipeline_bind holds it to that). */
        if ((int)i == def->version_index) ev->version = micros;
    }
    return 0;
}

static int decode_values(const pipeline_def_t *def, const jv_t *vals, const char *text, size_t text_len,
                         const record_t *rec, const connect_type_t *logical, event_t *ev, rejection_t *rej)
{
    key_doc_t kd = {.read = false};
    int rc = decode_fields(def, vals, text, text_len, rec, &kd, logical, ev, rej);
    json_decref(kd.root);
    return rc;
}

/* The reference reader: jansson, for every document the fast reader
 * declines (DESIGN.md: Two parsers, one outcome). */
static int decode_reference(const pipeline_def_t *def, const void *value, size_t len, const record_t *rec,
                            size_t skip, const connect_type_t *logical, event_t *ev, rejection_t *rej)
{
    const jv_key_t *names = def->members;
    size_t n = def->member_count;
    json_error_t jerr;
    bool markers = false;
    json_t *root = load_json(value, len, &jerr, &markers);
    if (!root) return reject_parse_error(&jerr, rej);
    int rc = -1;
    /* Only the n members read are set (zeroing all of PIPELINE_MAX_FIELDS
     * would cost every declined record). */
    jv_t vals[PIPELINE_MAX_FIELDS + 1];
    jv_t *children[PIPELINE_MAX_FIELDS + 1];
    jv_key_t *keys[PIPELINE_MAX_FIELDS + 1];
    memset(vals, 0, n * sizeof *vals);
    memset(children, 0, n * sizeof *children);
    memset(keys, 0, n * sizeof *keys);
    if (!json_is_object(root)) {
        jv_t r = ref_scalar(root, markers);
        reject(rej, ERROR_INVALID_JSON, "expected a JSON object, got %s", jv_type_name(&r));
        goto out;
    }
    /* In document order, as the fast reader meets them: a member's
     * position finds its text (json_member_text). jansson keeps an
     * object's members in the order they were read. */
    const char *key;
    size_t key_len, position = 0;
    json_t *member;
    json_object_keylen_foreach(root, key, key_len, member)
    {
        size_t k = skip;
        while (k < n && !(names[k].len == key_len && memcmp(names[k].str, key, key_len) == 0)) k++;
        if (k < n) {
            vals[k] = ref_member(member, markers, &children[k], &keys[k]);
            vals[k].member = position;
        }
        position++;
    }
    rc = decode_values(def, vals, value, len, rec, logical, ev, rej);
out:
    for (size_t k = 0; k < n; k++) {
        free(children[k]);
        free(keys[k]);
    }
    json_decref(root);
    return rc;
}

/* A tombstone of a pipeline with a tombstone rule: its natural key alone,
 * every key field one of the record's own (pipelines_load holds the rule
 * to that); every other column NULL. Returns DECODE_TOMBSTONE, or -1 with
 * the rejection of a key the record lacks or a column refuses. */
static int decode_tombstone(const pipeline_def_t *def, const record_t *rec, event_t *ev, rejection_t *rej)
{
    key_doc_t kd = {.read = false};
    int rc = DECODE_TOMBSTONE;
    ev->len = 0;
    ev->version = 0;
    ev->package_name = event_append(ev, "", 0);
    for (size_t i = 0; i < def->field_count; i++) ev->col[i] = EVENT_NULL;
    for (size_t k = 0; k < def->key_count && rc == DECODE_TOMBSTONE; k++) {
        int64_t micros;
        if (decode_own(def, (size_t)def->key_fields[k], rec, &kd, ev, &micros, rej)) rc = -1;
    }
    json_decref(kd.root);
    return rc;
}

/* A JSON object's members as the pipeline reads them; `logical`: the
 * logical types of a Connect envelope's schema, per field (NULL: none). */
static int decode_json_object(const pipeline_def_t *def, const char *value, size_t len, const record_t *rec,
                              const connect_type_t *logical, event_t *ev, rejection_t *rej, bool fast)
{
    jv_t vals[PIPELINE_MAX_FIELDS + 1];
    /* Without an application, members[0] is not read at all. */
    size_t skip = def->app_member ? 0 : 1, n = def->member_count - skip;
    if (fast && json_fast_read(value, len, def->members + skip, n, vals + skip))
        return decode_values(def, vals, value, len, rec, logical, ev, rej);
    return decode_reference(def, value, len, rec, skip, logical, ev, rej);
}

/* Kafka Connect's JSON envelope (DESIGN.md: Formats): its payload read as
 * the record's value is, with the logical types its schema declares. */
static int decode_connect(const pipeline_def_t *def, const char *value, size_t len, const record_t *rec, event_t *ev,
                          rejection_t *rej, bool fast)
{
    static const jv_key_t envelope[2] = {{"schema", 6}, {"payload", 7}};
    jv_t env[2] = {{.type = JV_ABSENT}, {.type = JV_ABSENT}};
    if (!(fast && json_fast_read(value, len, envelope, 2, env))) {
        json_error_t jerr;
        bool markers = false;
        json_t *root = load_json(value, len, &jerr, &markers);
        if (!root) return reject_parse_error(&jerr, rej);
        jv_t r = ref_scalar(root, markers);
        if (!json_is_object(root)) {
            json_decref(root);
            return reject(rej, ERROR_INVALID_JSON, "expected a JSON object, got %s", jv_type_name(&r));
        }
        const char *key;
        size_t key_len, position = 0;
        json_t *member;
        json_object_keylen_foreach(root, key, key_len, member)
        {
            for (int k = 0; k < 2; k++)
                if (key_len == envelope[k].len && memcmp(key, envelope[k].str, key_len) == 0) {
                    env[k] = ref_scalar(member, markers);
                    env[k].member = position;
                }
            position++;
        }
        json_decref(root);
    }
    for (int k = 0; k < 2; k++)
        if (env[k].type == JV_ABSENT)
            return reject(rej, ERROR_INVALID_JSON,
                          "expected Kafka Connect's JSON envelope {\"schema\": ..., \"payload\": ...}: the record has no "
                          "\"%s\" (a converter with schemas off writes the payload alone: read it with \"format\": "
                          "\"json\")", envelope[k].str);
    if (env[1].type == JV_NULL) return reject(rej, ERROR_EMPTY_PAYLOAD, "the envelope's payload is null");
    if (env[1].type != JV_OBJECT)
        return reject(rej, ERROR_INVALID_JSON, "the envelope's payload is %s, not an object", jv_type_name(&env[1]));
    size_t ps, pe, ss, se;
    if (!json_member_text(value, len, env[1].member, &ps, &pe) || !json_member_text(value, len, env[0].member, &ss, &se))
        return reject(rej, ERROR_INVALID_JSON, "the envelope's members cannot be found");
    connect_type_t logical[PIPELINE_MAX_FIELDS];
    memset(logical, 0, sizeof logical);
    if (env[0].type == JV_OBJECT) {
        json_error_t jerr;
        bool markers = false;
        json_t *schema = load_json(value + ss, se - ss, &jerr, &markers);
        for (size_t i = 0; schema && i < def->field_count; i++) {
            const field_spec_t *f = &def->fields[i];
            if (f->source != SOURCE_VALUE || f->whole) continue;
            char *const one[1] = {f->name};
            logical[i] = connect_type_at(schema, f->path_count ? f->path : one, f->path_count ? f->path_count : 1);
        }
        json_decref(schema);
    }
    return decode_json_object(def, value + ps, pe - ps, rec, logical, ev, rej, fast);
}

/* Bytes of the schema registry's wire format (format `fmt`) as the JSON
 * text the readers take (DESIGN.md: Formats): *text, *text_len, pointing
 * into bytes or into *owned (the caller frees it). `what`: "the value" or
 * "the key", for the rejection. Returns 0, -1 (the record's fault: *rej) or
 * DECODE_UNAVAILABLE. */
static int unwrap(value_format_t fmt, const void *bytes, size_t len, const schema_source_t *schemas,
                  const char *what, const char **text, size_t *text_len, char **owned, rejection_t *rej)
{
    int32_t id = 0;
    *owned = NULL;
    int h = wire_header(bytes, len, &id);
    if (h == -2)
        return reject(rej, ERROR_NO_MAGIC_BYTE,
                      "%s does not start with the schema registry's magic byte 0 (first byte 0x%02x)", what,
                      ((const unsigned char *)bytes)[0]);
    if (h == -1)
        return reject(rej, ERROR_SHORT_HEADER,
                      "%s is %zu bytes, shorter than the schema registry's header (magic byte and 4-byte id)", what,
                      len);
    const format_schema_t *schema = NULL;
    char why[300];
    schema_answer_t a = SCHEMA_UNAVAILABLE;
    if (!schemas) snprintf(why, sizeof why, "no schema registry is configured (STORAGE_SCHEMA_REGISTRY_URL)");
    else a = schemas->get(schemas->ctx, id, &schema, why, sizeof why);
    if (a == SCHEMA_UNAVAILABLE) {
        reject(rej, ERROR_UNKNOWN_SCHEMA, "schema %d of %s cannot be had now: %s", (int)id, what, why);
        return DECODE_UNAVAILABLE;
    }
    if (a == SCHEMA_UNKNOWN)
        return reject(rej, ERROR_UNKNOWN_SCHEMA, "%s's schema id %d is not in the schema registry: %s", what, (int)id,
                      why);
    schema_kind_t want = fmt == FORMAT_AVRO ? SCHEMA_AVRO : SCHEMA_JSON;
    if (schema->kind != want)
        return reject(rej, ERROR_UNDECODABLE, "%s's schema id %d is not %s schema, and the pipeline reads %s", what,
                      (int)id, want == SCHEMA_AVRO ? "an Avro" : "a JSON", fmt == FORMAT_AVRO ? "Avro" : "JSON Schema");
    if (want == SCHEMA_JSON) {
        *text = (const char *)bytes + WIRE_HEADER;
        *text_len = len - WIRE_HEADER;
        return 0;
    }
    if (schema->unusable)
        return reject(rej, ERROR_UNDECODABLE, "%s's schema id %d cannot be used: %s", what, (int)id, schema->unusable);
    int rc = avro_format_json(schema->avro, (const char *)bytes + WIRE_HEADER, len - WIRE_HEADER, owned, text_len,
                              why, sizeof why);
    if (rc == AVRO_TRAILING)
        return reject(rej, ERROR_TRAILING_BYTES, "%s (schema id %d): %s", what, (int)id, why);
    if (rc) return reject(rej, ERROR_UNDECODABLE, "%s (schema id %d): %s", what, (int)id, why);
    *text = *owned;
    return 0;
}

/* Kafka Connect's JSON key: its payload's text, or the key itself when it
 * is not an envelope (a schema-less converter's). */
static void connect_key(const record_t *rec, const char **text, size_t *len)
{
    static const jv_key_t payload[1] = {{"payload", 7}};
    jv_t v = {.type = JV_ABSENT};
    size_t s, e;
    *text = rec->key;
    *len = rec->key_len;
    if (json_fast_read(rec->key, rec->key_len, payload, 1, &v) && v.type != JV_ABSENT &&
        json_member_text(rec->key, rec->key_len, v.member, &s, &e)) {
        *text = (const char *)rec->key + s;
        *len = e - s;
    }
}

static int decode_value(const pipeline_def_t *def, const void *value, size_t len, const record_t *rec,
                        const schema_source_t *schemas, event_t *ev, rejection_t *rej, bool fast)
{
    if (value == NULL && rec && def->tombstones != TOMBSTONE_DEAD_LETTER) return decode_tombstone(def, rec, ev, rej);
    if (value == NULL || len == 0)
        return reject(rej, ERROR_EMPTY_PAYLOAD, "the record value is empty (tombstone or empty message)");
    if (def->format == FORMAT_CONNECT_JSON) return decode_connect(def, value, len, rec, ev, rej, fast);
    if (!FORMAT_NEEDS_REGISTRY(def->format)) return decode_json_object(def, value, len, rec, NULL, ev, rej, fast);
    const char *text;
    size_t text_len;
    char *owned;
    int rc = unwrap(def->format, value, len, schemas, "the value", &text, &text_len, &owned, rej);
    if (rc == 0) rc = decode_json_object(def, text, text_len, rec, NULL, ev, rej, fast);
    free(owned);
    return rc;
}

static int decode_with(const pipeline_def_t *def, const void *value, size_t len, const record_t *rec,
                       const schema_source_t *schemas, event_t *ev, rejection_t *rej, bool fast)
{
    if (!def->bound) abort(); /* a caller bug: the checks come from the table (pipeline_bind) */
    if (!rec || !rec->key || def->key_format == FORMAT_JSON)
        return decode_value(def, value, len, rec, schemas, ev, rej, fast);
    /* The key's members are read from its JSON text. */
    record_t keyed = *rec;
    char *owned = NULL;
    if (def->key_format == FORMAT_CONNECT_JSON) {
        connect_key(rec, (const char **)&keyed.key, &keyed.key_len);
    } else if (rec->key_len > 0) {
        int rc = unwrap(def->key_format, rec->key, rec->key_len, schemas, "the key", (const char **)&keyed.key,
                        &keyed.key_len, &owned, rej);
        if (rc) return rc;
    }
    int rc = decode_value(def, value, len, &keyed, schemas, ev, rej, fast);
    free(owned);
    return rc;
}

bool event_equal(const pipeline_def_t *def, const event_t *a, const event_t *b)
{
    if (strcmp(event_package_name(a), event_package_name(b)) != 0 || a->version != b->version) return false;
    for (size_t i = 0; i < def->field_count; i++) {
        const char *x = event_column(a, i), *y = event_column(b, i);
        if ((x == NULL) != (y == NULL) || (x && strcmp(x, y) != 0)) return false;
    }
    return true;
}

int decode_record(const pipeline_def_t *def, const void *value, size_t len, event_t *ev,
                  rejection_t *rej)
{
    return decode_with(def, value, len, NULL, NULL, ev, rej, true);
}

int decode_record_of(const pipeline_def_t *def, const record_t *r, event_t *ev, rejection_t *rej)
{
    return decode_with(def, r->value, r->value_len, r, NULL, ev, rej, true);
}

int decode_record_from(const pipeline_def_t *def, const record_t *r, const schema_source_t *schemas, event_t *ev,
                       rejection_t *rej)
{
    return decode_with(def, r->value, r->value_len, r, schemas, ev, rej, true);
}

int decode_record_reference(const pipeline_def_t *def, const void *value, size_t len,
                            event_t *ev, rejection_t *rej)
{
    return decode_with(def, value, len, NULL, NULL, ev, rej, false);
}
