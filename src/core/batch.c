#include "core/batch.h"

#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    for (size_t i = 0; i < count; i++) {
        entry_t *e = &b->entries[i];
        e->application_id = -1;
        e->state = decode_record(b->def, records[i].value, records[i].value_len, &e->event,
                                 &e->rejection) == 0
                       ? ENTRY_EVENT
                       : ENTRY_REJECTED;
    }
}

/* glibc's hsearch_r: a hash table from libc, sized per batch, gone after. */
static void table_create(struct hsearch_data *t, size_t n)
{
    memset(t, 0, sizeof *t);
    if (!hcreate_r(n * 2 + 16, t)) abort();
}

size_t batch_package_names(const batch_t *b, const char **names)
{
    struct hsearch_data seen;
    size_t n = 0;
    table_create(&seen, b->count);
    for (size_t i = 0; i < b->count; i++) {
        if (b->entries[i].state != ENTRY_EVENT) continue;
        ENTRY item = {(char *)event_package_name(&b->entries[i].event), NULL}, *found;
        if (!hsearch_r(item, FIND, &found, &seen)) {
            if (!hsearch_r(item, ENTER, &found, &seen)) abort();
            names[n++] = item.key;
        }
    }
    hdestroy_r(&seen);
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

void batch_bind(batch_t *b, int64_t (*lookup)(void *ctx, const char *package_name), void *ctx)
{
    for (size_t i = 0; i < b->count; i++) {
        entry_t *e = &b->entries[i];
        if (e->state != ENTRY_EVENT) continue;
        const char *name = event_package_name(&e->event);
        e->application_id = lookup(ctx, name);
        if (e->application_id < 0) {
            char detail[320];
            /* A dead letter, not an error: locking the partition until
             * someone registers the app would stop every other app. */
            snprintf(detail, sizeof detail,
                     "package_name: %s is not registered in apps_registry_application", name);
            batch_reject(b, i, ERROR_UNREGISTERED_APP, detail);
        }
    }
}

/* The natural key as one string: "<application_id>/<key column>" when the
 * key includes the app, else the key column alone. */
static char *natural_key(const batch_t *b, const entry_t *e, size_t key_index)
{
    const char *k = event_column(&e->event, key_index);
    char *s;
    if (b->def->key_includes_app) {
        if (asprintf(&s, "%lld/%s", (long long)e->application_id, k) < 0) abort();
    } else {
        s = strdup(k);
        if (!s) abort();
    }
    return s;
}

/* The rule of de-duplication: `e` wins over `than`, the earlier of the two
 * in the batch, only with a greater version; ties and versionless pipelines
 * keep the first. */
static bool wins_over(const batch_t *b, const entry_t *e, const entry_t *than)
{
    return b->def->version_field && e->event.version > than->event.version;
}

size_t batch_deduplicate(batch_t *b)
{
    int key_index = pipeline_field_index(b->def, b->def->key_field);
    struct hsearch_data winners;
    char **keys = calloc(b->count ? b->count : 1, sizeof *keys);
    size_t superseded = 0;
    if (!keys) abort();
    table_create(&winners, b->count);
    for (size_t i = 0; i < b->count; i++) {
        entry_t *e = &b->entries[i];
        if (e->state != ENTRY_EVENT) continue;
        keys[i] = natural_key(b, e, (size_t)key_index);
        ENTRY item = {keys[i], (void *)i}, *found;
        if (!hsearch_r(item, FIND, &found, &winners)) {
            if (!hsearch_r(item, ENTER, &found, &winners)) abort();
            continue;
        }
        size_t w = (size_t)found->data;
        superseded++;
        if (wins_over(b, e, &b->entries[w])) {
            b->entries[w].state = ENTRY_SUPERSEDED;
            b->entries[w].winner = i;
            found->data = (void *)i;
        } else {
            e->state = ENTRY_SUPERSEDED;
            e->winner = w;
        }
    }
    hdestroy_r(&winners);
    for (size_t i = 0; i < b->count; i++) free(keys[i]);
    free(keys);
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
        if (e->state != ENTRY_SUPERSEDED || root_of(b, i) != rejected) continue;
        if (best == b->count || wins_over(b, e, &b->entries[best])) best = i;
    }
    if (best == b->count) return false;
    for (size_t i = 0; i < b->count; i++)
        if (i != best && b->entries[i].state == ENTRY_SUPERSEDED && root_of(b, i) == rejected)
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
        while (k < n && out[k].partition != r->partition) k++;
        if (k == n) {
            out[n++] = (batch_range_t){r->partition, r->offset, r->offset};
        } else {
            if (r->offset < out[k].first) out[k].first = r->offset;
            if (r->offset > out[k].last) out[k].last = r->offset;
        }
    }
    return n;
}
