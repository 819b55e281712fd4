#include "ops/print.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"

/* Code points that would steer a terminal or reorder what the reader sees:
 * C0, DEL, C1, the line/paragraph separators, the bidi controls and marks,
 * and the invisible format characters (zero-width ones, the word joiner and
 * invisible operators, the byte order mark, the soft hyphen). */
static bool needs_escape(uint32_t cp)
{
    return cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F) || cp == 0xAD || cp == 0x061C ||
           (cp >= 0x200B && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202E) ||
           (cp >= 0x2060 && cp <= 0x2069) || cp == 0xFEFF;
}

static void escape(FILE *out, const unsigned char *s, size_t len, size_t max_bytes, bool quoted)
{
    size_t limit = max_bytes && len > max_bytes ? max_bytes : len;
    size_t i = 0;
    uint32_t cp;
    if (quoted) fputc('"', out);
    while (i < limit) {
        size_t n = utf8_sequence(s + i, len - i, &cp);
        if (n == 0) {
            fprintf(out, "\\x%02x", s[i]);
            i++;
            continue;
        }
        if (i + n > limit) break; /* never cut a character in half */
        switch (cp) {
        case '"': fputs(quoted ? "\\\"" : "\"", out); break;
        case '\\': fputs("\\\\", out); break;
        case '\n': fputs("\\n", out); break;
        case '\r': fputs("\\r", out); break;
        case '\t': fputs("\\t", out); break;
        default:
            if (needs_escape(cp) && cp < 0x80) fprintf(out, "\\x%02x", (unsigned)cp);
            else if (needs_escape(cp)) fprintf(out, "\\u%04x", (unsigned)cp);
            else fwrite(s + i, 1, n, out);
        }
        i += n;
    }
    if (quoted) fputc('"', out);
    if (i < len) fputs("...", out);
}

void print_quoted(FILE *out, const void *data, size_t len, size_t max_bytes)
{
    escape(out, data, len, max_bytes, true);
}

char *print_escape(const char *s)
{
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    if (!f) abort();
    escape(f, (const unsigned char *)s, strlen(s), 0, false);
    if (fclose(f) != 0 || !text) abort();
    return text;
}

void print_hex(FILE *out, const void *data, size_t len)
{
    const unsigned char *s = data;
    for (size_t i = 0; i < len; i++) fprintf(out, "%02x", s[i]);
}

json_t *print_json_text(const void *data, size_t len)
{
    if (!data) return json_null();
    if (utf8_valid(data, len)) {
        json_t *text = json_stringn(data, len);
        if (!text) abort();
        return text;
    }
    char *escaped = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&escaped, &size);
    if (!f) abort();
    escape(f, data, len, 0, false);
    if (fclose(f) != 0 || !escaped) abort();
    json_t *text = json_string(escaped);
    free(escaped);
    if (!text) abort();
    return text;
}

json_t *print_json_string(const char *s) { return s ? print_json_text(s, strlen(s)) : json_null(); }

json_t *print_json_integer(const char *s)
{
    json_t *v = s ? json_integer(strtoll(s, NULL, 10)) : json_null();
    if (!v) abort();
    return v;
}

int print_json(json_t *doc)
{
    if (!doc) abort();
    int rc = json_dumpf(doc, stdout, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(doc);
    if (putchar('\n') == EOF || fflush(stdout) != 0) rc = -1;
    return rc ? -1 : 0;
}
