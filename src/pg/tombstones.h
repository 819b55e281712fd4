/* tombstones — the memory of applied tombstones (migration 0011,
 * applied_tombstones; DESIGN.md: Resolving dead letters): each tombstone a
 * pipeline applies is remembered by its key, topic and partition with its
 * offset, in the batch's transaction, so that `dead-letters redrive` gives
 * what a replay of the topic would: a dead letter older than a delete or a
 * mark of its key applied after it is not stored over it. */
#ifndef STORAGE_PG_TOMBSTONES_H
#define STORAGE_PG_TOMBSTONES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/batch.h"
#include "core/retry.h"
#include "pg/db.h"

/* Remember the tombstones idx[0..n) of `b` (entries of its pipeline), in
 * the transaction on `conn`: per key, topic and partition the greatest
 * offset. Returns 0, or -1 with `err` and *cls set. */
int tombstones_remember(db_conn_t *conn, int64_t deadline_ms, const batch_t *b, const size_t *idx, size_t n,
                        char *err, size_t errlen, error_class_t *cls);

/* For every event of `b` (ENTRY_EVENT), whether a tombstone of its key was
 * applied at a later offset of its topic and partition: after[i] true and
 * at[i] that offset (both sized b->count; others left false). Returns how
 * many, or -1 with `err` and *cls set. */
long tombstones_after(db_conn_t *conn, int64_t deadline_ms, const batch_t *b, bool *after, int64_t *at, char *err,
                      size_t errlen, error_class_t *cls);

#endif
