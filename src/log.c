#include "log.h"

#include "core/utf8.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static log_level_t current_level = LOG_LEVEL_INFO;
static log_format_t current_format = LOG_FORMAT_TEXT;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

void log_configure(log_level_t level, log_format_t format)
{
    current_level = level;
    current_format = format;
}

log_level_t log_current_level(void) { return current_level; }

int log_level_parse(const char *name, log_level_t *out)
{
    if (strcasecmp(name, "debug") == 0) *out = LOG_LEVEL_DEBUG;
    else if (strcasecmp(name, "info") == 0) *out = LOG_LEVEL_INFO;
    else if (strcasecmp(name, "warn") == 0 || strcasecmp(name, "warning") == 0)
        *out = LOG_LEVEL_WARN;
    else if (strcasecmp(name, "error") == 0) *out = LOG_LEVEL_ERROR;
    else return -1;
    return 0;
}

int log_format_parse(const char *name, log_format_t *out)
{
    if (strcasecmp(name, "text") == 0) *out = LOG_FORMAT_TEXT;
    else if (strcasecmp(name, "json") == 0) *out = LOG_FORMAT_JSON;
    else return -1;
    return 0;
}

/* A line (LOG_LINE_MAX, log.h) holds the longest message escaped (most
 * characters take 4 bytes escaped, "\x1b"); a message or a field value that
 * outgrows it is cut on a whole character, a field that cannot start is left
 * out whole. */

typedef struct {
    char *buf;
    size_t cap; /* bytes that may be used */
    size_t len;
} line_t;

/* Append n bytes, all or nothing: 0 if they do not fit. */
static int line_put(line_t *l, const char *s, size_t n)
{
    if (l->len + n > l->cap) return 0;
    memcpy(l->buf + l->len, s, n);
    l->len += n;
    return 1;
}

static int line_puts(line_t *l, const char *s) { return line_put(l, s, strlen(s)); }

/* The escape of the character `cp` (`used` bytes at `p`; used 0: an invalid
 * byte) into esc, or NULL when it passes unchanged; *n its length. The
 * double quote is escaped in JSON, and in text inside a quoted value. */
static const char *fixed_escape(const char *e, size_t *n)
{
    *n = strlen(e);
    return e;
}

static const char *escape_of(const unsigned char *p, size_t used, uint32_t cp, bool json, bool quoted,
                             char esc[8], size_t *n)
{
    if (used == 0) {
        if (json) return fixed_escape("\\ufffd", n);
        *n = (size_t)snprintf(esc, 8, "\\x%02x", *p);
    } else if (cp == '\\') {
        return fixed_escape("\\\\", n);
    } else if (cp == '"' && (json || quoted)) {
        return fixed_escape("\\\"", n);
    } else if (cp == '\n') {
        return fixed_escape("\\n", n);
    } else if (cp == '\r') {
        return fixed_escape("\\r", n);
    } else if (cp == '\t') {
        return fixed_escape("\\t", n);
    } else if (cp < 0x20 || cp == 0x7f) {
        *n = (size_t)snprintf(esc, 8, json ? "\\u%04x" : "\\x%02x", (unsigned)cp);
    } else if ((cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029) {
        *n = (size_t)snprintf(esc, 8, "\\u%04x", (unsigned)cp);
    } else {
        return NULL;
    }
    return esc;
}

/* Append `s` escaped for `format` (`quoted`: inside a quoted text value).
 * Producer strings reach log lines (a package name in a dead letter's
 * detail), so nothing in `s` may end the line, forge another, or reach the
 * operator's terminal as a control: C0 controls (newline, CR, TAB, ESC, ...),
 * DEL, C1 controls (U+0080 to U+009F, which some terminals obey like ESC
 * sequences) and the Unicode line and paragraph separators are escaped, and
 * so is the backslash, so that an escape always means what it shows. Bytes
 * that are not UTF-8 are shown as \xNN in text; JSON text must be UTF-8, so
 * there they become U+FFFD. Printable ASCII and well-formed UTF-8 pass
 * unchanged. Stops before the first character whose escape does not fit
 * whole; returns 1 if all of `s` fit. */
static int line_put_escaped(line_t *l, log_format_t format, const char *s, bool quoted)
{
    const unsigned char *p = (const unsigned char *)s;
    const unsigned char *end = p + strlen(s);
    const bool json = format == LOG_FORMAT_JSON;
    while (*p) {
        char esc[8];
        size_t n;
        uint32_t cp;
        size_t used = utf8_sequence(p, (size_t)(end - p), &cp);
        const char *out = escape_of(p, used, cp, json, quoted, esc, &n);
        if (!out) out = (const char *)p, n = used;
        if (!line_put(l, out, n)) return 0;
        p += used ? used : 1;
    }
    return 1;
}

/* A text value is quoted when it is empty or holds a space, '"', '=', or
 * anything escaped: " key=value" stays one token a logfmt reader can split. */
static bool text_needs_quotes(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    const unsigned char *end = p + strlen(s);
    if (!*p) return true;
    while (*p) {
        char esc[8];
        size_t n;
        uint32_t cp;
        size_t used = utf8_sequence(p, (size_t)(end - p), &cp);
        if (used == 1 && (cp == ' ' || cp == '=')) return true;
        if (escape_of(p, used, cp, false, true, esc, &n)) return true;
        p += used ? used : 1;
    }
    return false;
}

#define LOG_REDACTED "[redacted]"
/* Shorter values and words are not searched for (see log_add_secret). */
#define LOG_SECRET_MIN 4

typedef struct {
    const char *text;
    size_t len;
} secret_t;

/* The registered secrets, longest first, so that a whole value is replaced
 * before its words. Written only before threads start. */
static secret_t *secrets;
static size_t secret_count;

static void add_secret(const char *s, size_t n)
{
    if (n < LOG_SECRET_MIN) return;
    for (size_t i = 0; i < secret_count; i++)
        if (secrets[i].len == n && memcmp(secrets[i].text, s, n) == 0) return;
    secret_t *grown = realloc(secrets, (secret_count + 1) * sizeof *grown);
    char *copy = strndup(s, n);
    if (!grown || !copy) abort();
    secrets = grown;
    size_t at = secret_count++;
    while (at > 0 && secrets[at - 1].len < n) {
        secrets[at] = secrets[at - 1];
        at--;
    }
    secrets[at] = (secret_t){copy, n};
}

void log_add_secret(const char *value)
{
    static const char spaces[] = " \t";
    add_secret(value, strlen(value));
    /* Multi-line values (a PEM key) are blobs, not lists of words: their
     * armour words ("PRIVATE") would be redacted from unrelated lines. */
    if (!strpbrk(value, spaces) || strpbrk(value, "\r\n")) return;
    for (const char *p = value + strspn(value, spaces); *p;) {
        size_t n = strcspn(p, spaces);
        add_secret(p, n);
        p += n;
        p += strspn(p, spaces);
    }
}

/* Rewrite `text` with every occurrence of any of the `n` secrets (longest
 * first) replaced by LOG_REDACTED, in one pass over the original: a
 * replacement is never searched again. */
static void redact(char *text, size_t cap, const secret_t *find, size_t n)
{
    char out[LOG_LINE_MAX];
    size_t len = 0, tlen = strlen(text);
    const size_t rlen = strlen(LOG_REDACTED);
    bool found = false;
    for (size_t k = 0; k < n && !found; k++) found = find[k].len && strstr(text, find[k].text);
    if (!found || cap == 0) return;
    for (size_t i = 0; i < tlen && len + 1 < sizeof out;) {
        size_t k = 0;
        while (k < n && (find[k].len == 0 || find[k].len > tlen - i ||
                         memcmp(text + i, find[k].text, find[k].len) != 0))
            k++;
        if (k == n) {
            out[len++] = text[i++];
        } else {
            if (len + rlen >= sizeof out) break;
            memcpy(out + len, LOG_REDACTED, rlen);
            len += rlen;
            i += find[k].len;
        }
    }
    if (len >= cap) len = cap - 1;
    memcpy(text, out, len);
    text[len] = '\0';
}

void log_redact(char *text, size_t cap)
{
    if (secret_count) redact(text, cap, secrets, secret_count);
}

void log_redact_value(char *text, size_t cap, const char *value)
{
    secret_t one = {value, strlen(value)};
    redact(text, cap, &one, 1);
}

/* Append one field, " key=value" or ,"key":value, whole or not at all
 * (returns 0 then): a long string value may be cut on a whole character, a
 * list of ranges after a whole range; the room for what closes them is kept
 * before their content is written. */
static int line_put_field(line_t *l, log_format_t format, const log_field_t *f)
{
    const bool json = format == LOG_FORMAT_JSON;
    const size_t start = l->len;
    char num[384]; /* a range with a topic name of up to 249 characters */
    if (f->type == LOG_FIELD_STR && !f->v.str) return 1; /* left out */
    int ok = json ? line_put(l, ",\"", 2) : line_put(l, " ", 1);
    ok = ok && line_put_escaped(l, format, f->key, json) && (json ? line_put(l, "\":", 2) : line_put(l, "=", 1));
    if (!ok) goto undo;
    switch (f->type) {
    case LOG_FIELD_STR: {
        /* Redacted like the message; a copy only when there are secrets. */
        char copy[LOG_LINE_MAX];
        const char *v = f->v.str;
        if (secret_count) {
            snprintf(copy, sizeof copy, "%s", v);
            log_redact(copy, sizeof copy);
            v = copy;
        }
        bool quoted = json || text_needs_quotes(v);
        if (quoted) {
            if (!line_put(l, "\"", 1)) goto undo;
            l->cap--;
        }
        line_put_escaped(l, format, v, quoted);
        if (quoted) {
            l->cap++;
            line_put(l, "\"", 1);
        }
        return 1;
    }
    case LOG_FIELD_INT:
        snprintf(num, sizeof num, "%lld", f->v.num);
        break;
    case LOG_FIELD_FIXED:
        if (json && !isfinite(f->v.fixed.value)) snprintf(num, sizeof num, "null");
        else snprintf(num, sizeof num, "%.*f", f->v.fixed.decimals, f->v.fixed.value);
        break;
    case LOG_FIELD_RANGES: {
        if (!json && f->v.ranges.count == 0) {
            if (line_put(l, "\"\"", 2)) return 1;
            goto undo;
        }
        if (json) {
            if (!line_put(l, "[", 1)) goto undo;
            l->cap--;
        }
        for (size_t k = 0; k < f->v.ranges.count; k++) {
            const log_range_t *r = &f->v.ranges.at[k];
            /* Topic names are [a-zA-Z0-9._-]: nothing to escape. */
            if (json)
                snprintf(num, sizeof num, "%s{%s%s%s\"partition\":%d,\"first\":%lld,\"last\":%lld}", k ? "," : "",
                         r->topic ? "\"topic\":\"" : "", r->topic ? r->topic : "", r->topic ? "\"," : "",
                         (int)r->partition, (long long)r->first, (long long)r->last);
            else
                snprintf(num, sizeof num, "%s%s%sp%d:%lld-%lld", k ? "," : "", r->topic ? r->topic : "",
                         r->topic ? ":" : "", (int)r->partition, (long long)r->first, (long long)r->last);
            if (!line_puts(l, num)) break;
        }
        if (json) {
            l->cap++;
            line_put(l, "]", 1);
        }
        return 1;
    }
    default:
        goto undo;
    }
    if (line_puts(l, num)) return 1;
undo:
    l->len = start;
    return 0;
}

static void emit(log_level_t level, const char *component, const log_field_t *fields, size_t nfields,
                 const char *fmt, va_list ap)
{
    char msg[4096];
    char buf[LOG_LINE_MAX];
    struct timespec ts;
    struct tm tm;
    char when[32];
    const bool json = current_format == LOG_FORMAT_JSON;
    /* Room kept for what ends the line: "}\n" or "\n". */
    const size_t end_room = json ? 2 : 1;
    line_t line = {buf, sizeof buf - end_room, 0};

    vsnprintf(msg, sizeof msg, fmt, ap);
    log_redact(msg, sizeof msg);

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);

    /* Every part of the line that is not ours goes through
     * line_put_escaped: whatever the message and the fields hold, it is one
     * line. */
    if (json) {
        line.len = (size_t)snprintf(buf, sizeof buf,
                                    "{\"ts\":\"%s.%03ldZ\",\"level\":\"%s\",\"component\":\"", when,
                                    ts.tv_nsec / 1000000, level_names[level]);
        line.cap--; /* the closing quotes */
        line_put_escaped(&line, current_format, component, true);
        line.cap++;
        line_put(&line, "\"", 1);
        line_put(&line, ",\"msg\":\"", 8);
        line.cap--;
        line_put_escaped(&line, current_format, msg, true);
        line.cap++;
        line_put(&line, "\"", 1);
    } else {
        line.len = (size_t)snprintf(buf, sizeof buf, "%s.%03ldZ %-5s [", when, ts.tv_nsec / 1000000,
                                    level_names[level]);
        line_put_escaped(&line, current_format, component, false);
        line_put(&line, "] ", 2);
        line_put_escaped(&line, current_format, msg, false);
    }
    for (size_t i = 0; i < nfields; i++) line_put_field(&line, current_format, &fields[i]);
    line.cap = sizeof buf;
    line_put(&line, json ? "}\n" : "\n", end_room);
    /* One write per line: lines of concurrent threads never interleave. */
    if (write(STDERR_FILENO, buf, line.len) < 0) {
        /* Nothing sensible left to do when stderr is gone. */
    }
}

void log_emit(log_level_t level, const char *component, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    emit(level, component, NULL, 0, fmt, ap);
    va_end(ap);
}

void log_emit_fields(log_level_t level, const char *component, const log_field_t *fields, size_t nfields,
                     const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    emit(level, component, fields, nfields, fmt, ap);
    va_end(ap);
}
