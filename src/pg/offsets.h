/* offsets — every statement on consumer_offsets (DESIGN.md: Progress in the
 * database) but the migration that creates it: the position each batch
 * records in its own transaction, the positions an assignment starts from,
 * and the reads and resets of the commands.
 *
 * A row says: every record of (group, topic, partition) below next_offset
 * has its effect in the database. A batch moves it only from where its
 * member found it (fencing: a member that lost its partitions and writes
 * late must neither undo the new owner's progress nor commit rows over its
 * rows; its whole transaction rolls back). */
#ifndef STORAGE_PG_OFFSETS_H
#define STORAGE_PG_OFFSETS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/batch.h"
#include "core/retry.h"
#include "pg/db.h"

/* What a member knows of the positions of one topic's partitions p < n:
 * the epoch it read when they were assigned, and next[p], where the
 * database's position stands as far as this member knows (read at the
 * assignment, moved by each batch it committed; -1: no row yet). */
typedef struct {
    char *topic;
    int64_t *epoch;
    int64_t *next;
    int n;
} topic_epochs_t;

/* The statement that moves the rows of the partitions `b` covers to the
 * highest offset + 1 of each (never lower), for `group` (quoted with the
 * connection's rules), each only from where this member knows it to stand,
 * within the epoch it read: its entry of `epochs` (ntopics of them; a
 * partition it has none for, as one without a row: inserted). A row that
 * moved on meanwhile (another member's batch, a replay) fails the
 * statement with RETRY_SQLSTATE_FENCED, and the transaction with it. Rows
 * are written in topic and partition order. The statement returns one row
 * with the column OFFSETS_FENCE_COLUMN. Returns a string the caller frees,
 * or NULL when the batch has no records. */
#define OFFSETS_FENCE_COLUMN "storage_fence"
char *offsets_advance_sql(db_conn_t *conn, const char *group, const batch_t *b, const topic_epochs_t *epochs,
                          int ntopics);

/* After `b` committed: the positions it moved are where this member knows
 * them to stand (epochs[].next). */
void offsets_advanced(const batch_t *b, topic_epochs_t *epochs, int ntopics);

/* The database's next offset of partitions 0..n-1 of `topic` in `group`
 * into next[p] (-1: no row) and, unless `epoch` is NULL, their epochs into
 * epoch[p] (0: no row), before `deadline_ms` (0: none). Returns 0, or -1
 * with `err` and *cls set. */
int offsets_read(db_conn_t *conn, int64_t deadline_ms, const char *group, const char *topic, int n,
                 int64_t *next, int64_t *epoch, char *err, size_t errlen, error_class_t *cls);

/* offsets_read on a connection of its own (`conninfo`, statement timeout
 * `statement_timeout_ms`), closed before it returns, all before
 * `deadline_ms`: for a rebalance callback, which may run while the
 * pipeline's own connection waits for a batch's COMMIT. */
int offsets_load(const char *conninfo, int statement_timeout_ms, int64_t deadline_ms, const char *group,
                 const char *topic, int n, int64_t *next, int64_t *epoch, char *err, size_t errlen,
                 error_class_t *cls);

/* Record next[p] as the position of each partition p < n of `topic` in
 * `group` that has none (next[p] < 0: leave p alone), on a connection of
 * its own as offsets_load: where a member starts a partition the database
 * had no position for (Kafka's committed offset, or the reset policy's
 * offset), so that from then on the database is the record and a backup
 * taken afterwards restores it. A row written meanwhile wins. Returns 0, or
 * -1 with `err` and *cls set. */
int offsets_record_starts(const char *conninfo, int statement_timeout_ms, int64_t deadline_ms,
                          const char *group, const char *topic, int n, const int64_t *next, char *err,
                          size_t errlen, error_class_t *cls);

/* Whether consumer_offsets exists (migration 0006): 1 yes, 0 no, -1 the
 * catalog could not be read (`err`). */
int offsets_table_exists(db_conn_t *conn, char *err, size_t errlen);

/* replay's reset, in steps around the Kafka commit (DESIGN.md:
 * Operations): BEGIN (offsets_reset_begin); then for each topic
 * (offsets_reset_topic), read the positions partitions 0..n-1 of `topic`
 * had in `group` into before[p] (-1: no row) and lock them, and set them to
 * exactly target[p], lower ones included. The transaction stays open until
 * offsets_reset_end; each row's epoch moves on, fencing off members that
 * started before the replay. Each returns 0, or -1 with `err` (rolled
 * back). No deadline of our own: a one-shot command waits as long as the
 * server works. */
int offsets_reset_begin(db_conn_t *conn, char *err, size_t errlen);
int offsets_reset_topic(db_conn_t *conn, const char *group, const char *topic, int n, const int64_t *target,
                        int64_t *before, char *err, size_t errlen);

/* COMMIT (commit true) or ROLLBACK the transaction of offsets_reset_begin.
 * Returns 0, or -1 with `err` when it did not commit. */
int offsets_reset_end(db_conn_t *conn, bool commit, char *err, size_t errlen);

#endif
