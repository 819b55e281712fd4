#include "core/batch.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"

void batch_init(batch_t *b, const pipeline_def_t *def)
{
    memset(b, 0, sizeof *b);
    b->def = def;
}

void batch_free(batch_t *b)
{
    for (size_t i = 0; i < b->capacity; i++) event_free(&b->entries[i].event);
    free(b->entries);
    memset(b, 0, sizeof *b);
}

void batch_decode(batch_t *b, record_t *records, size_t count)
{
    if (count > b->capacity) {
        entry_t *grown = realloc(b->entries, count * sizeof *grown);
        if (!grown) abort();
        for (size_t i = b->capacity; i < count; i++) memset(&grown[i], 0, sizeof grown[i]);
        b->entries = grown;
        b->capacity = count;
    }
    b->records = records;
    b->count = count;
    b->generation++;
    b->unavailable = false;
    b->unavailable_why[0] = '\0';
    if (b->schemas && b->schemas->begin) b->schemas->begin(b->schemas->ctx);
    for (size_t i = 0; i < count; i++) {
        entry_t *e = &b->entries[i];
        e->application_id = -1;
        e->with_tombstone = e->mark_first = false;
        int rc = decode_record_from(b->def, &records[i], b->schemas, &e->event, &e->rejection);
        if (rc == DECODE_UNAVAILABLE) {
            /* Rejected only until the batch is decoded again: b->unavailable
             * keeps it from PostgreSQL. */
            if (!b->unavailable) snprintf(b->unavailable_why, sizeof b->unavailable_why, "%s", e->rejection.detail);
            b->unavailable = true;
            rc = -1;
        }
        e->tombstone = rc == DECODE_TOMBSTONE;
        e->state = rc == 0 ? ENTRY_EVENT : e->tombstone ? ENTRY_TOMBSTONE : ENTRY_REJECTED;
    }
}

/* A per-batch index of entries by a key: open addressing over entry
 * indices, at most half full, FNV-1a of the whole key. Not glibc's
 * hsearch_r, whose hash weighs only a key's first eight bytes: production
 * keys share longer prefixes (review ids "gp:AOqpTO...", package names
 * "com.<vendor>."), and its probes then compared a batch's keys pairwise. */
typedef struct {
    uint32_t *slot; /* 0: empty, else entry index + 1 */
    uint64_t *hash; /* per entry */
    size_t mask;
} key_index_t;

static void index_init(key_index_t *t, size_t entries)
{
    size_t cap = 16;
    while (cap < entries * 2) cap *= 2;
    t->slot = calloc(cap, sizeof *t->slot);
    t->hash = calloc(entries ? entries : 1, sizeof *t->hash);
    if (!t->slot || !t->hash) abort();
    t->mask = cap - 1;
}

static void index_free(key_index_t *t)
{
    free(t->slot);
    free(t->hash);
}

/* The slot of the entry whose key equals entry i's (same(b, i, j)), or the
 * empty slot where i belongs. t->hash[i] must be set. */
static uint32_t *index_find(key_index_t *t, const batch_t *b, size_t i,
                            bool (*same)(const batch_t *b, size_t i, size_t j))
{
    for (size_t k = (size_t)t->hash[i] & t->mask;; k = (k + 1) & t->mask) {
        uint32_t *s = &t->slot[k];
        if (*s == 0) return s;
        size_t j = *s - 1;
        if (t->hash[j] == t->hash[i] && same(b, i, j)) return s;
    }
}

static bool same_package(const batch_t *b, size_t i, size_t j)
{
    return strcmp(event_package_name(&b->entries[i].event), event_package_name(&b->entries[j].event)) == 0;
}

size_t batch_package_names(const batch_t *b, const char **names, uint32_t *name_of)
{
    key_index_t seen;
    size_t n = 0;
    if (!b->def->app_member) return 0; /* nothing to resolve */
    index_init(&seen, b->count);
    for (size_t i = 0; i < b->count; i++) {
        if (b->entries[i].state != ENTRY_EVENT) continue;
        seen.hash[i] = hash_fnv1a(event_package_name(&b->entries[i].event), HASH_FNV_OFFSET);
        uint32_t *s = index_find(&seen, b, i, same_package);
        if (*s == 0) {
            *s = (uint32_t)(i + 1);
            name_of[i] = (uint32_t)n;
            names[n++] = event_package_name(&b->entries[i].event);
        } else {
            name_of[i] = name_of[*s - 1];
        }
    }
    index_free(&seen);
    return n;
}

void batch_reject(batch_t *b, size_t i, const char *error_type, const char *detail)
{
    entry_t *e = &b->entries[i];
    e->state = ENTRY_REJECTED;
    e->rejection.error_type = error_type;
    snprintf(e->rejection.detail, sizeof e->rejection.detail, "%s", detail);
    decode_repair_utf8(e->rejection.detail);
}

void batch_bind(batch_t *b, const uint32_t *name_of, const int64_t *ids)
{
    for (size_t i = 0; b->def->app_member && i < b->count; i++) {
        entry_t *e = &b->entries[i];
        if (e->state != ENTRY_EVENT) continue;
        e->application_id = ids[name_of[i]];
        if (e->application_id < 0) {
            char detail[320];
            /* A dead letter, not an error: locking the partition until
             * someone registers the app would stop every other app. */
            snprintf(detail, sizeof detail, "%s: %s is not registered in %s", b->def->app_member,
                     event_package_name(&e->event), b->def->lookup_table);
            batch_reject(b, i, ERROR_UNREGISTERED_APP, detail);
        }
    }
}

/* The natural keys of entries i and j compared: the application's id first
 * when the key includes it, then each key column's text in the key's
 * order, byte by byte. */
static int compare_keys(const batch_t *b, size_t i, size_t j)
{
    const entry_t *x = &b->entries[i], *y = &b->entries[j];
    if (b->def->key_includes_app && x->application_id != y->application_id)
        return x->application_id < y->application_id ? -1 : 1;
    for (size_t k = 0; k < b->def->key_count; k++) {
        size_t c = (size_t)b->def->key_fields[k];
        int d = strcmp(event_column(&x->event, c), event_column(&y->event, c));
        if (d) return d;
    }
    return 0;
}

/* Entries i and j have the same natural key. */
static bool same_key(const batch_t *b, size_t i, size_t j)
{
    return compare_keys(b, i, j) == 0;
}

/* The rule of de-duplication: `e` wins over `than`, the earlier of the two
 * in the batch, only with a greater version; ties and versionless pipelines
 * keep the first. */
static bool wins_over(const batch_t *b, const entry_t *e, const entry_t *than)
{
    return b->def->version_field && e->event.version > than->event.version;
}

/* Entry `loser` is superseded by entry `by`. */
static void supersede(batch_t *b, size_t loser, size_t by)
{
    b->entries[loser].state = ENTRY_SUPERSEDED;
    b->entries[loser].winner = by;
}

/* A tombstone's timestamp as the mark's guard compares it: a tombstone
 * without one marks whatever the row's version, as if it were the latest. */
static int64_t mark_time(const batch_t *b, size_t i)
{
    int64_t ts = b->records[i].timestamp_ms;
    return ts < 0 ? INT64_MAX : ts;
}

/* The tombstones that mark, of one key, k[0..n) in record order, among
 * which only tombstone[j] are (the others are the key's values): each
 * applied in turn would leave the row marked by the last one whose guard
 * lets it (DESIGN.md: Pipelines are declared, tombstones). Which one that is
 * depends on the stored version, known only to the database; a tombstone
 * can be the one only if its timestamp is greater than every later one's
 * (a later one with a timestamp as great passes the guard whenever it
 * does). Those stand, `first` saying whether they go before the key's value
 * is written; the others are superseded by the last. Without a guard that
 * compares timestamps, the last alone stands. Returns how many were
 * superseded. */
static size_t stand_marks(batch_t *b, const size_t *k, size_t n, bool first)
{
    const pipeline_def_t *def = b->def;
    bool guarded = def->version_index >= 0 && def->fields[def->version_index].source == SOURCE_TIMESTAMP;
    size_t superseded = 0, last = n;
    int64_t later = INT64_MIN;
    for (size_t j = n; j-- > 0;) {
        entry_t *e = &b->entries[k[j]];
        if (e->state != ENTRY_TOMBSTONE) continue;
        int64_t ts = mark_time(b, k[j]);
        if (last == n || (guarded && ts > later)) {
            if (last == n) last = j;
            e->mark_first = first;
            if (ts > later) later = ts;
        } else {
            supersede(b, k[j], k[last]);
            superseded++;
        }
    }
    return superseded;
}

/* One key's records k[0..n), in record order (DESIGN.md: Pipelines are
 * declared, tombstones), reduced to what applying them one by one leaves in
 * the table, whatever the row held before:
 * - the values: the one with the greatest version (ties and versionless
 *   pipelines: the first) stands, the others are superseded by it; for a
 *   key with a deleting tombstone, only the values after the last tombstone
 *   count (those before it are superseded by it);
 * - a deleting tombstone: the last stands, the earlier ones are superseded;
 * - marking tombstones: those before the value that stands are applied
 *   before it is written, those after it (all, without a value) after it,
 *   each group reduced by stand_marks. A value written clears the marks
 *   before it; one the guard skips leaves them.
 * Refusals are not foreseen here: a key with a tombstone is applied record
 * by record when the database refuses one of its records (the store's
 * isolation), a key of values alone has the next value promoted
 * (batch_promote). Returns how many were superseded. */
static size_t reduce_key(batch_t *b, const size_t *k, size_t n)
{
    const pipeline_def_t *def = b->def;
    size_t superseded = 0, last_tombstone = n, w = n;
    for (size_t j = 0; j < n; j++)
        if (b->entries[k[j]].state == ENTRY_TOMBSTONE) last_tombstone = j;
    for (size_t j = 0; j < n; j++) b->entries[k[j]].with_tombstone = last_tombstone < n;
    bool deletes = def->tombstones == TOMBSTONE_DELETE && last_tombstone < n;
    for (size_t j = 0; j < n; j++) {
        entry_t *e = &b->entries[k[j]];
        if (e->state == ENTRY_TOMBSTONE) {
            if (deletes && j != last_tombstone) supersede(b, k[j], k[last_tombstone]), superseded++;
            continue;
        }
        if (deletes && j < last_tombstone) {
            supersede(b, k[j], k[last_tombstone]);
            superseded++;
        } else if (w == n) {
            w = j;
        } else if (wins_over(b, e, &b->entries[k[w]])) {
            supersede(b, k[w], k[j]);
            w = j;
            superseded++;
        } else {
            supersede(b, k[j], k[w]);
            superseded++;
        }
    }
    if (def->tombstones == TOMBSTONE_MARK && last_tombstone < n) {
        size_t split = w == n ? 0 : w;
        superseded += stand_marks(b, k, split, true);
        superseded += stand_marks(b, k + split, n - split, false);
    }
    return superseded;
}

size_t batch_deduplicate(batch_t *b)
{
    key_index_t keys;
    size_t superseded = 0;
    /* Each key's records chained in record order from its first: next[i]
     * (SIZE_MAX: the last), tail[first]. */
    size_t *next = malloc((b->count ? b->count : 1) * sizeof *next);
    size_t *tail = malloc((b->count ? b->count : 1) * sizeof *tail);
    size_t *chain = malloc((b->count ? b->count : 1) * sizeof *chain);
    if (!next || !tail || !chain) abort();
    index_init(&keys, b->count);
    for (size_t i = 0; i < b->count; i++) {
        entry_t *e = &b->entries[i];
        next[i] = SIZE_MAX;
        if (e->state != ENTRY_EVENT && e->state != ENTRY_TOMBSTONE) continue;
        uint64_t h = HASH_FNV_OFFSET;
        /* Each column's text and its end (the NUL): ("ab", "c") and ("a",
         * "bc") differ. */
        for (size_t k = 0; k < b->def->key_count; k++)
            h = hash_fnv1a(event_column(&e->event, (size_t)b->def->key_fields[k]), h) * HASH_FNV_PRIME;
        if (b->def->key_includes_app) h = (h ^ (uint64_t)e->application_id) * HASH_FNV_PRIME;
        keys.hash[i] = h;
        uint32_t *s = index_find(&keys, b, i, same_key);
        if (*s == 0) {
            *s = (uint32_t)(i + 1);
            tail[i] = i;
        } else {
            size_t first = *s - 1;
            next[tail[first]] = i;
            tail[first] = i;
        }
    }
    for (size_t k = 0; k <= keys.mask; k++) {
        if (!keys.slot[k]) continue;
        size_t n = 0;
        for (size_t i = keys.slot[k] - 1; i != SIZE_MAX; i = next[i]) chain[n++] = i;
        superseded += reduce_key(b, chain, n);
    }
    index_free(&keys);
    free(next);
    free(tail);
    free(chain);
    return superseded;
}

/* The entry a superseded one finally lost to: winners can themselves be
 * superseded later in the batch. */
static size_t root_of(const batch_t *b, size_t i)
{
    while (b->entries[i].state == ENTRY_SUPERSEDED) i = b->entries[i].winner;
    return i;
}

bool batch_promote(batch_t *b, size_t rejected, size_t *promoted)
{
    size_t best = b->count;
    for (size_t i = 0; i < b->count; i++) {
        const entry_t *e = &b->entries[i];
        if (e->state != ENTRY_SUPERSEDED || e->tombstone || root_of(b, i) != rejected) continue;
        if (best == b->count || wins_over(b, e, &b->entries[best])) best = i;
    }
    if (best == b->count) return false;
    for (size_t i = 0; i < b->count; i++)
        if (i != best && b->entries[i].state == ENTRY_SUPERSEDED && !b->entries[i].tombstone && root_of(b, i) == rejected)
            b->entries[i].winner = best;
    b->entries[best].state = ENTRY_EVENT;
    *promoted = best;
    return true;
}

size_t batch_superseded(const batch_t *b)
{
    size_t n = 0;
    for (size_t i = 0; i < b->count; i++) n += b->entries[i].state == ENTRY_SUPERSEDED;
    return n;
}

size_t batch_ranges(const batch_t *b, batch_range_t *out)
{
    size_t n = 0;
    for (size_t i = 0; i < b->count; i++) {
        const record_t *r = &b->records[i];
        size_t k = 0;
        while (k < n && (out[k].partition != r->partition || strcmp(out[k].topic, r->topic) != 0)) k++;
        if (k == n) {
            out[n++] = (batch_range_t){r->topic, r->partition, r->offset, r->offset};
        } else {
            if (r->offset < out[k].first) out[k].first = r->offset;
            if (r->offset > out[k].last) out[k].last = r->offset;
        }
    }
    return n;
}

/* An entry as sorted: the application's id (0 when the key lacks it) and
 * the first eight bytes of the first key column, big-endian and padded with
 * zeros, which order two keys as compare_keys does unless they are equal. */
typedef struct {
    int64_t app;
    uint64_t prefix;
    size_t i;
} sort_item_t;

static int by_key(const void *a, const void *b, void *batch)
{
    const sort_item_t *x = a, *y = b;
    if (x->app != y->app) return x->app < y->app ? -1 : 1;
    if (x->prefix != y->prefix) return x->prefix < y->prefix ? -1 : 1;
    return compare_keys(batch, x->i, y->i);
}

/* Entries in key order (compare_keys). A batch is COPYed in this order, so
 * the rows of a batch predicted new take the table's pages as the upsert's
 * ORDER BY gives them (DESIGN.md: The write path). Most comparisons end at
 * the prefix, without reading the two events. */
void batch_sort_by_key(const batch_t *b, size_t *idx, size_t n)
{
    sort_item_t *items = malloc((n ? n : 1) * sizeof *items);
    if (!items) abort();
    for (size_t k = 0; k < n; k++) {
        const entry_t *e = &b->entries[idx[k]];
        const unsigned char *t = (const unsigned char *)event_column(&e->event, (size_t)b->def->key_fields[0]);
        uint64_t prefix = 0;
        for (size_t j = 0; j < 8; j++) {
            prefix = prefix << 8 | *t;
            if (*t) t++;
        }
        items[k] = (sort_item_t){b->def->key_includes_app ? e->application_id : 0, prefix, idx[k]};
    }
    qsort_r(items, n, sizeof *items, by_key, (void *)b);
    for (size_t k = 0; k < n; k++) idx[k] = items[k].i;
    free(items);
}
