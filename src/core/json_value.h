/* json_value — the JSON values the decoder reads, whichever parser read them
 * (DESIGN.md: Two parsers, one outcome).
 *
 * The decoder looks at the top-level members its pipeline names, and one
 * level below them (a histogram's elements, a counts object's values). A
 * value here is that view: scalars with their value, containers with their
 * direct children; a child's own children are not kept (only its type is).
 *
 * Two readers fill it. json_fast_read (simdjson, src/core/json_fast.cpp)
 * reads ordinary documents and declines the rest; the decoder's reference
 * reader (jansson, src/core/decode.c) reads everything the fast one
 * declines, so every unusual document gets exactly the outcome it always
 * had. Both give every top-level value its place among the members, from
 * which its text as sent is found when a column takes it
 * (json_member_text). */
#ifndef STORAGE_JSON_VALUE_H
#define STORAGE_JSON_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    JV_ABSENT,  /* no such member */
    JV_NULL,
    JV_BOOL,
    JV_INT,     /* an integer literal within int64 */
    JV_REAL,    /* a literal with a fraction or exponent, within a double */
    JV_STRING,  /* may hold U+0000: str + len */
    JV_ARRAY,
    JV_OBJECT,
    JV_OVERFLOW /* a number beyond what a double can hold (reference reader only) */
} jv_type_t;

typedef struct {
    const char *str;
    size_t len;
} jv_key_t;

typedef struct jv {
    jv_type_t type;
    bool boolean;
    int64_t integer;
    double real;
    const char *str; /* JV_STRING */
    size_t len;
    const struct jv *items; /* JV_ARRAY: elements; JV_OBJECT: values */
    const jv_key_t *keys;   /* JV_OBJECT: keys[i] names items[i] */
    size_t count;           /* containers: number of children (kept only one level down) */
    /* A top-level member's value: its position among the document's
     * top-level members, so its text as sent can be found again
     * (json_member_text). Children leave it 0. */
    size_t member;
} jv_t;

/* The text of the `member`-th value of the top-level object in the `len`
 * bytes at `doc`, exactly as written (a number's digits, a string with its
 * quotes and escapes, a container whole): *start and *end delimit it.
 * The document must be one a reader above accepted: an object, valid JSON.
 * Returns false when there is no such member (a caller bug). Neither
 * reader keeps a number's text (simdjson's DOM and jansson both hold the
 * double), so the decoder finds it here when a column takes it as sent
 * (DESIGN.md: Two parsers, one outcome). */
bool json_member_text(const char *doc, size_t len, size_t member, size_t *start, size_t *end);

/* Read `len` bytes at `data` with simdjson and fill out[k] with the member
 * named names[k] of the top-level object (JV_ABSENT when there is none).
 * Returns true when the document is ordinary: it parses, its root is an
 * object, no object anywhere has a key twice, a key that holds U+0000 or
 * more than JSON_FAST_MAX_KEYS keys, no integer lies beyond int64, and it
 * is at most JSON_FAST_MAX_BYTES long (simdjson keeps, per thread, buffers
 * sized for the largest document it has read).
 * Returns false otherwise: the caller reads the document with the
 * reference reader.
 *
 * The strings and children in out[] stay valid until the next call on the
 * same thread. Allocation failure aborts. */
#define JSON_FAST_MAX_KEYS 64
#define JSON_FAST_MAX_BYTES 65536
bool json_fast_read(const void *data, size_t len, const jv_key_t *names, size_t n, jv_t *out);

#ifdef __cplusplus
}
#endif

#endif
