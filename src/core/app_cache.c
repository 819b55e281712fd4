#include "core/app_cache.h"

#include <stdlib.h>
#include <string.h>

#include "core/hash.h"

/* Entries live in an array (a name keeps its entry until a rebuild sheds
 * it); the hash table holds only their indices, with linear probing in a
 * power-of-two table kept at most half full. Entries are never deleted one by
 * one (a rebuild sheds the stale ones), so probing needs no tombstones. At
 * 100,000 names: 4 MiB of entries, 2 MiB of table. */
#define APP_CACHE_MIN_SLOTS 1024

typedef struct {
    char *name;
    uint64_t hash;
    int64_t id;
    int64_t fresh_until_ms;
    uint64_t batch; /* resolved for this batch */
} entry_t;

struct app_cache {
    int64_t ttl_ms;
    entry_t *entries;
    size_t count, entry_cap;
    uint32_t *slots; /* 0: empty, else an index into entries + 1 */
    size_t cap;      /* power of two */
    uint64_t batch;  /* the batch being resolved; 0: none yet */
    uint64_t *hashes; /* app_cache_begin's, of each name */
    size_t hash_cap;
};

static uint64_t name_hash(const char *s) { return hash_fnv1a(s, HASH_FNV_OFFSET); }

/* The slot holding `name`, or the empty slot where it belongs. */
static uint32_t *find(const app_cache_t *c, const char *name, uint64_t h)
{
    size_t mask = c->cap - 1;
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        uint32_t *s = &c->slots[i];
        if (*s == 0) return s;
        const entry_t *e = &c->entries[*s - 1];
        if (e->hash == h && strcmp(e->name, name) == 0) return s;
    }
}

static entry_t *entry_of(const app_cache_t *c, const char *name, uint64_t h)
{
    uint32_t s = *find(c, name, h);
    return s ? &c->entries[s - 1] : NULL;
}

static void alloc_slots(app_cache_t *c, size_t cap)
{
    free(c->slots);
    c->slots = calloc(cap, sizeof *c->slots);
    if (!c->slots) abort();
    c->cap = cap;
}

app_cache_t *app_cache_new(int64_t ttl_ms)
{
    app_cache_t *c = calloc(1, sizeof *c);
    if (!c) abort();
    c->ttl_ms = ttl_ms;
    alloc_slots(c, APP_CACHE_MIN_SLOTS);
    return c;
}

void app_cache_free(app_cache_t *c)
{
    if (!c) return;
    for (size_t i = 0; i < c->count; i++) free(c->entries[i].name);
    free(c->entries);
    free(c->slots);
    free(c->hashes);
    free(c);
}

/* Make room for one more entry. A half-full table is rebuilt for what is
 * kept, a quarter full: stale names outside the current batch are shed,
 * nothing the batch resolved is lost. */
static void make_room(app_cache_t *c, int64_t now_ms)
{
    if ((c->count + 1) * 2 > c->cap) {
        size_t kept = 0;
        for (size_t i = 0; i < c->count; i++) {
            entry_t *e = &c->entries[i];
            if (e->batch == c->batch || now_ms < e->fresh_until_ms) c->entries[kept++] = *e;
            else free(e->name);
        }
        c->count = kept;
        size_t cap = APP_CACHE_MIN_SLOTS;
        while ((kept + 1) * 4 > cap) cap *= 2;
        alloc_slots(c, cap);
        for (size_t i = 0; i < kept; i++)
            *find(c, c->entries[i].name, c->entries[i].hash) = (uint32_t)(i + 1);
    }
    if (c->count == c->entry_cap) {
        c->entry_cap = c->entry_cap ? c->entry_cap * 2 : APP_CACHE_MIN_SLOTS / 2;
        c->entries = realloc(c->entries, c->entry_cap * sizeof *c->entries);
        if (!c->entries) abort();
    }
}

/* The batch's look-ups one step at a time over all its names, each step
 * prefetching what the next one reads: a batch's hundreds of names are each
 * a cache miss in the table, in its entry and in its name (10,000 apps:
 * about a megabyte), taken one after the other they were a tenth of the
 * worker's time; side by side, the misses overlap. */
static void prefetch_names(const app_cache_t *c, const char *const *names, const uint64_t *h, size_t n)
{
    size_t mask = c->cap - 1;
    for (size_t i = 0; i < n; i++) __builtin_prefetch(&c->slots[h[i] & mask]);
    for (size_t i = 0; i < n; i++) {
        uint32_t s = c->slots[h[i] & mask];
        if (s) __builtin_prefetch(&c->entries[s - 1]);
        __builtin_prefetch(names[i]);
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t s = c->slots[h[i] & mask];
        if (s) __builtin_prefetch(c->entries[s - 1].name);
    }
}

size_t app_cache_begin(app_cache_t *c, const char *const *names, size_t n, int64_t now_ms, int64_t *ids,
                       size_t *stale)
{
    size_t k = 0;
    c->batch++;
    if (n > c->hash_cap) {
        c->hash_cap = n;
        c->hashes = realloc(c->hashes, n * sizeof *c->hashes);
        if (!c->hashes) abort();
    }
    for (size_t i = 0; i < n; i++) c->hashes[i] = name_hash(names[i]);
    prefetch_names(c, names, c->hashes, n);
    for (size_t i = 0; i < n; i++) {
        entry_t *e = entry_of(c, names[i], c->hashes[i]);
        if (e && now_ms < e->fresh_until_ms) {
            e->batch = c->batch;
            ids[i] = e->id;
        } else {
            ids[i] = -1;
            stale[k++] = i;
        }
    }
    return k;
}

void app_cache_answer(app_cache_t *c, const char *name, int64_t id, int64_t now_ms)
{
    uint64_t h = name_hash(name);
    entry_t *e = entry_of(c, name, h);
    if (!e) {
        make_room(c, now_ms);
        *find(c, name, h) = (uint32_t)(c->count + 1);
        e = &c->entries[c->count++];
        e->name = strdup(name);
        if (!e->name) abort();
        e->hash = h;
    }
    e->id = id;
    e->fresh_until_ms = now_ms + c->ttl_ms;
    e->batch = c->batch;
}

int64_t app_cache_lookup(const app_cache_t *c, const char *name)
{
    const entry_t *e = entry_of(c, name, name_hash(name));
    return e && e->batch == c->batch ? e->id : -1;
}

void app_cache_forget(app_cache_t *c, const char *name)
{
    entry_t *e = entry_of(c, name, name_hash(name));
    if (e) e->fresh_until_ms = 0;
}

size_t app_cache_size(const app_cache_t *c)
{
    return c->count;
}
