/* app_cache — package_name → application_id, per pipeline thread, with a TTL.
 *
 * Knows neither Kafka nor PostgreSQL: the store asks the registry and tells
 * the cache what it answered. One batch is resolved at a time:
 *
 *   app_cache_begin(c, names, n, now, ids, stale)  the fresh names' ids,
 *                                              and which must be asked
 *   app_cache_answer(c, name, id, now)         the registry has it (repeat)
 *   app_cache_lookup(c, name)                  an asked name's id
 *
 * The rules (each one a bug that was found):
 *   - A name resolved for a batch stays resolved until the next
 *     app_cache_begin, whatever the clock does meanwhile: a name that was
 *     fresh when the batch began may pass its TTL while the registry query for
 *     the other names runs (a lock on the registry stretches that to the
 *     statement timeout), and must not turn into unregistered_app then.
 *   - Only the registry's answer "absent" makes a name unresolved: a name that
 *     was asked and not answered. Absences are never cached, so an app
 *     registered now is seen on the next batch.
 *   - TTL 0 means "ask the registry every batch", not "never fresh".
 *   - Growing the cache never forgets a name the current batch resolved: the
 *     index is rebuilt from the entries' stored hashes (the slowest batch of
 *     500 new names took 4.5 ms while the cache grew to 200,000 names), and
 *     only names that are stale and outside the batch are shed then.
 *
 * Not thread-safe: each pipeline owns its cache (a shared one would need a
 * lock per message to save one query an hour). */
#ifndef STORAGE_APP_CACHE_H
#define STORAGE_APP_CACHE_H

#include <stddef.h>
#include <stdint.h>

typedef struct app_cache app_cache_t;

/* A cache whose entries stay fresh for `ttl_ms` (0: never fresh across
 * batches). Returns a cache the caller frees with app_cache_free. */
app_cache_t *app_cache_new(int64_t ttl_ms);
void app_cache_free(app_cache_t *c);

/* Start resolving a batch whose distinct package names are names[0..n).
 * Fresh names are resolved for this batch at once, their ids in ids[j]; the
 * others get ids[j] = -1 and their indexes j are written to stale[0..k)
 * (`ids` and `stale` hold n), and k is returned: ask the registry for them,
 * report each present one with app_cache_answer, then read their ids with
 * app_cache_lookup. Ends the previous batch's resolution. */
size_t app_cache_begin(app_cache_t *c, const char *const *names, size_t n, int64_t now_ms, int64_t *ids,
                       size_t *stale);

/* The registry has `name` with `id`: resolved for the current batch and
 * fresh until now_ms + ttl. The name is copied. */
void app_cache_answer(app_cache_t *c, const char *name, int64_t id, int64_t now_ms);

/* The application id resolved for `name` in the current batch, or -1 when the
 * registry said it is absent. */
int64_t app_cache_lookup(const app_cache_t *c, const char *name);

/* `name`'s cached id proved wrong (the app was deleted, perhaps registered
 * again under a new id): the next batch asks the registry for it. It stays
 * bound in the current batch. */
void app_cache_forget(app_cache_t *c, const char *name);

/* How many names the cache holds (fresh or not). */
size_t app_cache_size(const app_cache_t *c);

#endif
