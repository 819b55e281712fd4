/* redrive — the engine of `storage-consumer dead-letters redrive`
 * (DESIGN.md: Operations): store what unresolved dead letters now decode to
 * and mark them resolved.
 *
 * It is the pipeline's own path, not a copy of it: decode_record
 * (batch_decode), the store's resolver with its bind (store_resolve),
 * batch_deduplicate, and the store's COPY + INSERT ... ON CONFLICT with its
 * data-error isolation (store_write). So a redriven review older than the
 * stored row is a no-op by the same last_synced_at guard, and a row the
 * database refuses does not abort the others. In the same transaction as
 * the rows, a store hook (pg/dead_letters.h) marks the dead letters that
 * stored resolved (kind `redriven`, who ran it and a note; redrive never
 * deletes one: only purge does, long after, DESIGN.md: Resolving dead
 * letters), and refreshes the reason of those still failing.
 * Running it again changes nothing.
 *
 * Still-failing records go through the store's dead-letter insert like any
 * rejected record; their coordinates, timestamp, key and payload are the
 * dead letter's own (pg/dead_letters.c reads the timestamp back to the
 * millisecond the digest covers), so its ON CONFLICT (topic, partition,
 * kafka_offset, record_digest) DO NOTHING adds no row.
 *
 * A truncated payload (payload_size > the bytes stored) is not the message:
 * storing it would store something the producer never sent, so it is
 * reported as not redrivable and left as it is. */
#ifndef STORAGE_REDRIVE_H
#define STORAGE_REDRIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/pipeline.h"
#include "pg/db.h"
#include "settings.h"

typedef struct {
    /* after_tombstone: resolved without storing, older than a tombstone of
     * their key applied after them. */
    size_t examined, stored, still_failing, not_redrivable, superseded, after_tombstone;
    size_t inserted, updated, skipped, resolved, reasons_refreshed;
} redrive_counts_t;

/* What the caller hears of each dead letter that is not resolved. */
typedef struct {
    void (*not_redrivable)(void *ctx, int64_t id, long long payload_size, long long stored_bytes);
    void (*still_failing)(void *ctx, int64_t id, const char *error_type, const char *detail);
    void *ctx;
    /* Optional: after each batch, how many were examined so far. */
    void (*progress)(void *ctx, size_t examined);
} redrive_report_t;

/* Redrive the unresolved dead letters of `def`'s topic (of error_type
 * `type`, NULL: any; resolved_by `by`), read on `conn` in batches of the pipeline's size, each
 * written in one transaction through a store of its own (rolled back with
 * `dry_run`). Adds to *counts. Returns 0, or -1 with `err` (the failed batch
 * was rolled back, the ones before it are committed). */
int redrive_pipeline(const settings_t *s, db_conn_t *conn, const pipeline_def_t *def, const char *type,
                     const char *by, bool dry_run, const redrive_report_t *report, redrive_counts_t *counts, char *err,
                     size_t errlen);

#endif
