#include "formats/avro.h"

#include <avro.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/logical.h"

/* What avro-c's schema does not say: each node's logical type, and the
 * nodes below it, in the order avro-c numbers them (a record's fields, a
 * union's branches, an array's items or a map's values as child 0). */
typedef enum {
    LOGICAL_NONE = 0,
    LOGICAL_DECIMAL,
    LOGICAL_DATE,
    LOGICAL_TIME_MS,
    LOGICAL_TIME_US,
    LOGICAL_TS_MS,
    LOGICAL_TS_US,
    LOGICAL_LOCAL_TS_MS,
    LOGICAL_LOCAL_TS_US
} logical_t;

typedef struct plan {
    logical_t logical;
    int scale;
    size_t n;
    struct plan **child;
} plan_t;

typedef struct {
    char *name; /* full name */
    plan_t *plan;
} named_t;

struct avro_format {
    avro_schema_t schema;
    avro_value_iface_t *iface;
    avro_value_t value;
    avro_reader_t reader;
    plan_t *top; /* the schema's own node */
    plan_t **nodes; /* every node, to free */
    size_t node_count;
    named_t *names;
    size_t name_count;
};

static plan_t leaf = {LOGICAL_NONE, 0, 0, NULL};

/* avro-c leaks the buffer of a string, bytes or fixed value whose bytes
 * are cut off (its read_bytes returns without freeing it), and allocates
 * what a record's lengths ask for before reading them: a hostile record of
 * a few bytes could make it allocate gigabytes, and every undecodable
 * record would leak. So avro-c allocates through us. During a read, each
 * block it allocates is remembered until it frees it; after a failed read
 * the value is destroyed (which frees every block it owns) and what is
 * left was lost by the library: freed here. And no single block may be
 * larger than a bound derived from the record's length. */
typedef struct {
    bool on;
    size_t limit; /* largest block during a read; 0: any */
    void **slot;  /* open addressing, linear probing; NULL: empty */
    size_t cap, count;
} tracking_t;

static __thread tracking_t track;

static size_t slot_of(const void *p, size_t cap)
{
    uintptr_t x = (uintptr_t)p;
    x ^= x >> 17;
    x *= 0x9E3779B97F4A7C15ull;
    return (size_t)(x >> 20) & (cap - 1);
}

static void track_add(void *p)
{
    if ((track.count + 1) * 2 > track.cap) {
        size_t cap = track.cap ? track.cap * 2 : 64;
        void **old = track.slot, **slot = calloc(cap, sizeof *slot);
        if (!slot) abort();
        for (size_t i = 0; i < track.cap; i++)
            if (old[i]) {
                size_t k = slot_of(old[i], cap);
                while (slot[k]) k = (k + 1) & (cap - 1);
                slot[k] = old[i];
            }
        free(old);
        track.slot = slot;
        track.cap = cap;
    }
    size_t k = slot_of(p, track.cap);
    while (track.slot[k]) k = (k + 1) & (track.cap - 1);
    track.slot[k] = p;
    track.count++;
}

static void track_remove(const void *p)
{
    if (!track.count) return;
    size_t mask = track.cap - 1, k = slot_of(p, track.cap);
    while (track.slot[k] && track.slot[k] != p) k = (k + 1) & mask;
    if (!track.slot[k]) return; /* allocated before the read */
    track.slot[k] = NULL;
    track.count--;
    /* Backward shift: the entries after it move up where their probe allows. */
    for (size_t j = (k + 1) & mask; track.slot[j]; j = (j + 1) & mask) {
        size_t home = slot_of(track.slot[j], track.cap);
        if (((j - home) & mask) >= ((j - k) & mask)) {
            track.slot[k] = track.slot[j];
            track.slot[j] = NULL;
            k = j;
        }
    }
}

/* Forget every block: a large table (a large record's) is let go. */
static void track_reset(void)
{
    if (track.cap > 4096) {
        free(track.slot);
        track.slot = NULL;
        track.cap = 0;
    } else if (track.count) {
        memset(track.slot, 0, track.cap * sizeof *track.slot);
    }
    track.count = 0;
}

static void *allocate(void *ud, void *ptr, size_t osize, size_t nsize)
{
    (void)ud;
    (void)osize;
    if (track.on && ptr) track_remove(ptr);
    if (nsize == 0) {
        free(ptr);
        return NULL;
    }
    if (track.on && track.limit && nsize > track.limit) {
        if (ptr) track_add(ptr); /* still the caller's */
        return NULL;
    }
    void *p = realloc(ptr, nsize);
    if (track.on) track_add(p ? p : ptr);
    return p;
}

static pthread_once_t allocator_once = PTHREAD_ONCE_INIT;
static void allocator_start(void) { avro_set_allocator(allocate, NULL); }

/* After a failed read: the value (and its class) destroyed and made again,
 * and the blocks the library lost freed. */
static void recover(avro_format_t *f)
{
    avro_value_decref(&f->value);
    avro_value_iface_decref(f->iface);
    track.on = false;
    for (size_t i = 0; i < track.cap; i++)
        if (track.slot[i]) free(track.slot[i]);
    track_reset();
    f->iface = avro_generic_class_from_schema(f->schema);
    if (!f->iface || avro_generic_value_new(f->iface, &f->value) != 0) abort();
}

static void *grow(void *p, size_t n, size_t size)
{
    void *q = realloc(p, n * size);
    if (!q) abort();
    return q;
}

static plan_t *node_new(avro_format_t *f, size_t children)
{
    plan_t *p = calloc(1, sizeof *p);
    if (!p) abort();
    p->n = children;
    p->child = children ? calloc(children, sizeof *p->child) : NULL;
    if (children && !p->child) abort();
    for (size_t i = 0; i < children; i++) p->child[i] = &leaf;
    f->nodes = grow(f->nodes, f->node_count + 1, sizeof *f->nodes);
    f->nodes[f->node_count++] = p;
    return p;
}

static char *full_name(const char *name, const char *ns)
{
    char *out;
    if (strchr(name, '.') || !ns || !*ns) out = strdup(name);
    else if (asprintf(&out, "%s.%s", ns, name) < 0) out = NULL;
    if (!out) abort();
    return out;
}

static void name_add(avro_format_t *f, const char *name, const char *ns, plan_t *p)
{
    f->names = grow(f->names, f->name_count + 1, sizeof *f->names);
    f->names[f->name_count++] = (named_t){full_name(name, ns), p};
}

static plan_t *name_find(const avro_format_t *f, const char *name, const char *ns)
{
    char *full = full_name(name, ns);
    plan_t *found = NULL;
    for (size_t i = 0; i < f->name_count && !found; i++)
        if (strcmp(f->names[i].name, full) == 0 || strcmp(f->names[i].name, name) == 0) found = f->names[i].plan;
    free(full);
    return found;
}

static plan_t *compile(avro_format_t *f, const json_t *s, const char *ns);

static logical_t logical_of(const char *type, const char *logical)
{
    if (!logical) return LOGICAL_NONE;
    static const struct {
        const char *type, *logical;
        logical_t is;
    } known[] = {
        {"bytes", "decimal", LOGICAL_DECIMAL},
        {"fixed", "decimal", LOGICAL_DECIMAL},
        {"int", "date", LOGICAL_DATE},
        {"int", "time-millis", LOGICAL_TIME_MS},
        {"long", "time-micros", LOGICAL_TIME_US},
        {"long", "timestamp-millis", LOGICAL_TS_MS},
        {"long", "timestamp-micros", LOGICAL_TS_US},
        {"long", "local-timestamp-millis", LOGICAL_LOCAL_TS_MS},
        {"long", "local-timestamp-micros", LOGICAL_LOCAL_TS_US},
    };
    /* Any other (uuid is a string as it is) is the type beneath it, as the
     * specification says of a logical type a reader does not know. */
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(known[i].type, type) == 0 && strcmp(known[i].logical, logical) == 0) return known[i].is;
    return LOGICAL_NONE;
}

static plan_t *compile_object(avro_format_t *f, const json_t *s, const char *ns)
{
    const json_t *t = json_object_get(s, "type");
    if (!json_is_string(t)) return compile(f, t, ns); /* {"type": {...}} or {"type": [...]} */
    const char *type = json_string_value(t);
    const char *name = json_string_value(json_object_get(s, "name"));
    const char *own_ns = json_string_value(json_object_get(s, "namespace"));
    char *inner_ns = NULL;
    if (name && (strcmp(type, "record") == 0 || strcmp(type, "error") == 0 || strcmp(type, "enum") == 0 ||
                 strcmp(type, "fixed") == 0)) {
        /* A named type's own namespace, or its full name's, is its fields'. */
        const char *dot = strrchr(name, '.');
        if (dot) inner_ns = strndup(name, (size_t)(dot - name));
        else inner_ns = strdup(own_ns ? own_ns : ns ? ns : "");
        if (!inner_ns) abort();
    }
    plan_t *p;
    if (strcmp(type, "record") == 0 || strcmp(type, "error") == 0) {
        const json_t *fields = json_object_get(s, "fields");
        p = node_new(f, json_array_size(fields));
        if (name) name_add(f, name, inner_ns, p);
        for (size_t i = 0; i < p->n; i++) p->child[i] = compile(f, json_object_get(json_array_get(fields, i), "type"), inner_ns);
    } else if (strcmp(type, "array") == 0 || strcmp(type, "map") == 0) {
        p = node_new(f, 1);
        p->child[0] = compile(f, json_object_get(s, type[0] == 'a' ? "items" : "values"), ns);
    } else {
        const char *logical = json_string_value(json_object_get(s, "logicalType"));
        logical_t l = logical_of(type, logical);
        const json_t *scale = json_object_get(s, "scale");
        if (l == LOGICAL_DECIMAL && scale && (!json_is_integer(scale) || json_integer_value(scale) < 0 ||
                                              json_integer_value(scale) > 1000))
            l = LOGICAL_NONE; /* an invalid decimal is its bytes */
        if (l == LOGICAL_NONE && !name) {
            p = &leaf;
        } else {
            p = node_new(f, 0);
            p->logical = l;
            p->scale = (int)json_integer_value(scale);
        }
        if (name) name_add(f, name, inner_ns, p);
        if (!name && l == LOGICAL_NONE && strcmp(type, "enum") != 0 && strcmp(type, "fixed") != 0) {
            plan_t *named = name_find(f, type, ns); /* {"type": "a.Named"} */
            if (named) p = named;
        }
    }
    free(inner_ns);
    return p;
}

static plan_t *compile(avro_format_t *f, const json_t *s, const char *ns)
{
    if (json_is_object(s)) return compile_object(f, s, ns);
    if (json_is_array(s)) {
        plan_t *p = node_new(f, json_array_size(s));
        for (size_t i = 0; i < p->n; i++) p->child[i] = compile(f, json_array_get(s, i), ns);
        return p;
    }
    if (json_is_string(s)) {
        plan_t *named = name_find(f, json_string_value(s), ns);
        return named ? named : &leaf;
    }
    return &leaf;
}

void avro_format_free(avro_format_t *f)
{
    if (!f) return;
    /* The thread's table of blocks goes with it (the next read makes one). */
    free(track.slot);
    track = (tracking_t){0};
    if (f->reader) avro_reader_free(f->reader);
    if (f->iface) {
        avro_value_decref(&f->value);
        avro_value_iface_decref(f->iface);
    }
    if (f->schema) avro_schema_decref(f->schema);
    for (size_t i = 0; i < f->node_count; i++) {
        free(f->nodes[i]->child);
        free(f->nodes[i]);
    }
    free(f->nodes);
    for (size_t i = 0; i < f->name_count; i++) free(f->names[i].name);
    free(f->names);
    free(f);
}

avro_format_t *avro_format_new(const char *schema, size_t len, char *why, size_t why_len)
{
    pthread_once(&allocator_once, allocator_start);
    avro_format_t *f = calloc(1, sizeof *f);
    if (!f) abort();
    json_error_t jerr;
    json_t *root = json_loadb(schema, len, JSON_DECODE_ANY, &jerr);
    if (!root) {
        snprintf(why, why_len, "the schema is not JSON: %s", jerr.text);
        free(f);
        return NULL;
    }
    if (avro_schema_from_json_length(schema, len, &f->schema) != 0) {
        snprintf(why, why_len, "Apache Avro's C library does not read the schema: %s", avro_strerror());
        f->schema = NULL;
        json_decref(root);
        avro_format_free(f);
        return NULL;
    }
    f->iface = avro_generic_class_from_schema(f->schema);
    if (!f->iface || avro_generic_value_new(f->iface, &f->value) != 0) {
        snprintf(why, why_len, "Apache Avro's C library cannot hold values of the schema: %s", avro_strerror());
        if (f->iface) avro_value_iface_decref(f->iface);
        f->iface = NULL;
        json_decref(root);
        avro_format_free(f);
        return NULL;
    }
    f->reader = avro_reader_memory("", 0);
    if (!f->reader) abort();
    f->top = compile(f, root, NULL);
    json_decref(root);
    return f;
}

/* A growing text. */
typedef struct {
    char *s;
    size_t len, cap;
} text_t;

static void put(text_t *t, const char *s, size_t n)
{
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 256;
        while (t->len + n + 1 > cap) cap *= 2;
        t->s = grow(t->s, cap, 1);
        t->cap = cap;
    }
    memcpy(t->s + t->len, s, n);
    t->len += n;
    t->s[t->len] = '\0';
}

static void puts_(text_t *t, const char *s) { put(t, s, strlen(s)); }

/* Bytes a JSON string must escape: the control characters, '"' and '\\'. */
static const unsigned char must_escape[256] = {
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0};

static void put_string(text_t *t, const char *s, size_t n)
{
    put(t, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!must_escape[c]) continue;
        put(t, s + run, i - run);
        char esc[8];
        if (c == '"' || c == '\\') snprintf(esc, sizeof esc, "\\%c", c);
        else snprintf(esc, sizeof esc, "\\u%04x", c);
        puts_(t, esc);
        run = i + 1;
    }
    put(t, s + run, n - run);
    put(t, "\"", 1);
}

static void put_hex(text_t *t, const void *bytes, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    const unsigned char *b = bytes;
    puts_(t, "\"\\\\x");
    for (size_t i = 0; i < n; i++) {
        char two[2] = {digits[b[i] >> 4], digits[b[i] & 15]};
        put(t, two, 2);
    }
    put(t, "\"", 1);
}

static void put_real(text_t *t, double x, int digits)
{
    char buf[40];
    if (isnan(x)) puts_(t, "\"NaN\"");
    else if (isinf(x)) puts_(t, x > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    else {
        snprintf(buf, sizeof buf, "%.*g", digits, x);
        puts_(t, buf);
    }
}

static int fail(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *why, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
    return AVRO_UNDECODABLE;
}

static int put_integer(text_t *t, int64_t x, const plan_t *p, char *why, size_t len)
{
    char buf[64];
    int rc = 0;
    switch (p->logical) {
    case LOGICAL_DATE: rc = logical_date_text(x, buf, sizeof buf, why, len); break;
    case LOGICAL_TIME_MS: rc = logical_time_text(x, 3, buf, sizeof buf, why, len); break;
    case LOGICAL_TIME_US: rc = logical_time_text(x, 6, buf, sizeof buf, why, len); break;
    case LOGICAL_TS_MS: rc = logical_timestamp_text(x, 3, 1, buf, sizeof buf, why, len); break;
    case LOGICAL_TS_US: rc = logical_timestamp_text(x, 6, 1, buf, sizeof buf, why, len); break;
    case LOGICAL_LOCAL_TS_MS: rc = logical_timestamp_text(x, 3, 0, buf, sizeof buf, why, len); break;
    case LOGICAL_LOCAL_TS_US: rc = logical_timestamp_text(x, 6, 0, buf, sizeof buf, why, len); break;
    default: { /* digits, without printf */
        char *end = buf + sizeof buf, *at = end;
        uint64_t u = x < 0 ? 0 - (uint64_t)x : (uint64_t)x;
        do {
            *--at = (char)('0' + u % 10);
            u /= 10;
        } while (u);
        if (x < 0) *--at = '-';
        put(t, at, (size_t)(end - at));
        return 0;
    }
    }
    if (rc) return AVRO_UNDECODABLE;
    put_string(t, buf, strlen(buf));
    return 0;
}

static int put_bytes(text_t *t, const void *b, size_t n, const plan_t *p)
{
    if (p->logical == LOGICAL_DECIMAL && n > 0) {
        char *digits = logical_decimal_text(b, n, p->scale);
        puts_(t, digits);
        free(digits);
    } else {
        put_hex(t, b, n);
    }
    return 0;
}

static const plan_t *child_of(const plan_t *p, size_t i) { return i < p->n ? p->child[i] : &leaf; }

static int render(text_t *t, avro_value_t *v, const plan_t *p, char *why, size_t len, int depth)
{
    if (depth > 64) return fail(why, len, "the record nests deeper than 64 levels");
    switch (avro_value_get_type(v)) {
    case AVRO_NULL: puts_(t, "null"); return 0;
    case AVRO_BOOLEAN: {
        int b = 0;
        avro_value_get_boolean(v, &b);
        puts_(t, b ? "true" : "false");
        return 0;
    }
    case AVRO_INT32: {
        int32_t x = 0;
        avro_value_get_int(v, &x);
        return put_integer(t, x, p, why, len);
    }
    case AVRO_INT64: {
        int64_t x = 0;
        avro_value_get_long(v, &x);
        return put_integer(t, x, p, why, len);
    }
    case AVRO_FLOAT: {
        float x = 0;
        avro_value_get_float(v, &x);
        put_real(t, x, 9);
        return 0;
    }
    case AVRO_DOUBLE: {
        double x = 0;
        avro_value_get_double(v, &x);
        put_real(t, x, 17);
        return 0;
    }
    case AVRO_STRING: {
        const char *s = NULL;
        size_t n = 0;
        avro_value_get_string(v, &s, &n);
        put_string(t, s ? s : "", n ? n - 1 : 0); /* n counts the NUL */
        return 0;
    }
    case AVRO_BYTES: {
        const void *b = NULL;
        size_t n = 0;
        avro_value_get_bytes(v, &b, &n);
        return put_bytes(t, b, n, p);
    }
    case AVRO_FIXED: {
        const void *b = NULL;
        size_t n = 0;
        avro_value_get_fixed(v, &b, &n);
        return put_bytes(t, b, n, p);
    }
    case AVRO_ENUM: {
        int i = 0;
        avro_value_get_enum(v, &i);
        /* avro-c reads any index and looks it up unchecked. */
        avro_schema_t schema = avro_value_get_schema(v);
        if (i < 0 || i >= avro_schema_enum_number_of_symbols(schema))
            return fail(why, len, "enum index %d is not one of the schema's %d symbols", i,
                        avro_schema_enum_number_of_symbols(schema));
        const char *sym = avro_schema_enum_get(schema, i);
        if (!sym) return fail(why, len, "enum symbol %d is not in the schema", i);
        put_string(t, sym, strlen(sym));
        return 0;
    }
    case AVRO_UNION: {
        int d = -1;
        avro_value_t branch;
        if (avro_value_get_discriminant(v, &d) || avro_value_get_current_branch(v, &branch))
            return fail(why, len, "a union without a branch");
        return render(t, &branch, child_of(p, (size_t)d), why, len, depth + 1);
    }
    case AVRO_RECORD:
    case AVRO_MAP:
    case AVRO_ARRAY: {
        avro_type_t type = avro_value_get_type(v);
        size_t n = 0;
        avro_value_get_size(v, &n);
        put(t, type == AVRO_ARRAY ? "[" : "{", 1);
        for (size_t i = 0; i < n; i++) {
            avro_value_t c;
            const char *name = NULL;
            if (avro_value_get_by_index(v, i, &c, &name)) return fail(why, len, "element %zu cannot be read", i);
            if (i) put(t, ",", 1);
            if (type != AVRO_ARRAY) {
                put_string(t, name ? name : "", name ? strlen(name) : 0);
                put(t, ":", 1);
            }
            int rc = render(t, &c, type == AVRO_RECORD ? child_of(p, i) : child_of(p, 0), why, len, depth + 1);
            if (rc) return rc;
        }
        put(t, type == AVRO_ARRAY ? "]" : "}", 1);
        return 0;
    }
    default: return fail(why, len, "a value of an unknown Avro type");
    }
}

int avro_format_json(avro_format_t *f, const void *bytes, size_t len, char **json, size_t *json_len, char *why,
                     size_t why_len)
{
    *json = NULL;
    *json_len = 0;
    avro_reader_memory_set_source(f->reader, (const char *)bytes, (int64_t)len);
    avro_set_error("%s", ""); /* avro-c prefixes its errors to the last one's text */
    /* A block larger than this is no record's: every byte of the record
     * could be an element of an array of records of 64 bytes each. */
    track.limit = (len + 16) * 64 + ((size_t)1 << 20);
    track_reset();
    track.on = true;
    int read = avro_value_read(f->reader, &f->value);
    if (read != 0) {
        snprintf(why, why_len, "the bytes do not decode with the writer's schema: %s", avro_strerror());
        recover(f);
        return AVRO_UNDECODABLE;
    }
    track.on = false;
    track_reset();
    char extra;
    if (avro_read(f->reader, &extra, 1) == 0) {
        snprintf(why, why_len, "bytes are left after the record the writer's schema reads");
        return AVRO_TRAILING;
    }
    /* Room for the record's JSON at once, names and quotes included: a
     * buffer grown while writing costs a copy per doubling. */
    text_t t = {NULL, 0, 2 * len + 512};
    t.s = malloc(t.cap);
    if (!t.s) abort();
    int rc = render(&t, &f->value, f->top, why, why_len, 0);
    if (rc) {
        free(t.s);
        return rc;
    }
    *json = t.s;
    *json_len = t.len;
    return 0;
}

static const char *const primitives[] = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"};

static bool is_primitive(const char *name)
{
    for (size_t i = 0; i < sizeof primitives / sizeof primitives[0]; i++)
        if (strcmp(primitives[i], name) == 0) return true;
    return false;
}

/* The definition of named type `name` anywhere in `s` (by its name or
 * full name's last part), or NULL. */
static const json_t *named(const json_t *s, const char *name)
{
    if (json_is_object(s)) {
        const char *n = json_string_value(json_object_get(s, "name"));
        const char *type = json_string_value(json_object_get(s, "type"));
        if (n && type && (strcmp(type, "record") == 0 || strcmp(type, "enum") == 0 || strcmp(type, "fixed") == 0 ||
                          strcmp(type, "error") == 0)) {
            const char *dot = strrchr(name, '.'), *ndot = strrchr(n, '.');
            if (strcmp(n, name) == 0 || strcmp(ndot ? ndot + 1 : n, dot ? dot + 1 : name) == 0) return s;
        }
        const char *key;
        const json_t *v;
        json_object_foreach((json_t *)s, key, v)
        {
            const json_t *found = named(v, name);
            if (found) return found;
        }
    } else if (json_is_array(s)) {
        for (size_t i = 0; i < json_array_size(s); i++) {
            const json_t *found = named(json_array_get(s, i), name);
            if (found) return found;
        }
    }
    return NULL;
}

/* `s` with references and {"type": ...} wrappers of plain types resolved. */
static const json_t *resolved(const json_t *root, const json_t *s)
{
    for (int hops = 0; hops < 32; hops++) {
        if (json_is_string(s) && !is_primitive(json_string_value(s))) {
            const json_t *d = named(root, json_string_value(s));
            if (!d) return s;
            s = d;
        } else if (json_is_object(s) && !json_is_string(json_object_get(s, "type"))) {
            s = json_object_get(s, "type");
        } else {
            return s;
        }
    }
    return s;
}

static void type_name(const json_t *root, const json_t *s, char *out, size_t len)
{
    s = resolved(root, s);
    if (json_is_string(s)) {
        snprintf(out, len, "%s", json_string_value(s));
    } else if (json_is_array(s)) {
        size_t at = (size_t)snprintf(out, len, "union[");
        for (size_t i = 0; i < json_array_size(s) && at < len; i++) {
            char one[64];
            type_name(root, json_array_get(s, i), one, sizeof one);
            at += (size_t)snprintf(out + at, len - at, "%s%s", i ? "," : "", one);
        }
        if (at < len) snprintf(out + at, len - at, "]");
    } else {
        const char *type = json_string_value(json_object_get(s, "type"));
        const char *logical = json_string_value(json_object_get(s, "logicalType"));
        const char *name = json_string_value(json_object_get(s, "name"));
        if (logical) snprintf(out, len, "%s (%s)", type ? type : "?", logical);
        else if (name) snprintf(out, len, "%s %s", type ? type : "?", name);
        else snprintf(out, len, "%s", type ? type : "?");
    }
}

static const json_t *walk(const json_t *root, const json_t *s, char *const *path, size_t n)
{
    s = resolved(root, s);
    if (n == 0) return s;
    if (json_is_array(s)) { /* a union: any branch that leads on */
        for (size_t i = 0; i < json_array_size(s); i++) {
            const json_t *found = walk(root, json_array_get(s, i), path, n);
            if (found) return found;
        }
        return NULL;
    }
    const char *type = json_string_value(json_object_get(s, "type"));
    if (!type) return NULL;
    if (strcmp(type, "record") == 0 || strcmp(type, "error") == 0) {
        const json_t *fields = json_object_get(s, "fields");
        for (size_t i = 0; i < json_array_size(fields); i++) {
            const json_t *f = json_array_get(fields, i);
            const char *name = json_string_value(json_object_get(f, "name"));
            if (name && strcmp(name, path[0]) == 0) return walk(root, json_object_get(f, "type"), path + 1, n - 1);
        }
        return NULL;
    }
    if (strcmp(type, "array") == 0) {
        if (strspn(path[0], "0123456789") != strlen(path[0]) || !*path[0]) return NULL;
        return walk(root, json_object_get(s, "items"), path + 1, n - 1);
    }
    if (strcmp(type, "map") == 0) return walk(root, json_object_get(s, "values"), path + 1, n - 1);
    return NULL;
}

int avro_schema_path(const char *text, size_t len, char *const *path, size_t n, char *type, size_t type_len)
{
    json_t *root = json_loadb(text, len, JSON_DECODE_ANY, NULL);
    if (!root) return -1;
    const json_t *at = walk(root, root, path, n);
    if (at) type_name(root, at, type, type_len);
    json_decref(root);
    return at ? 1 : 0;
}
