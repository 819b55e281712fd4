/* consumer — one Kafka consumer per pipeline (its own rd_kafka_t, so a
 * reviews burst can never fill network-metrics' queue).
 *
 * Auto-commit is off: offsets are committed by the worker, synchronously and
 * with a deadline of our own, only after the database commit. The consumer
 * tracks which partitions this member owns, and never commits an offset for
 * a partition it no longer owns. */
#ifndef STORAGE_CONSUMER_H
#define STORAGE_CONSUMER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "core/batch.h"
#include "settings.h"

typedef struct consumer consumer_t;

/* Where newly assigned partitions start (DESIGN.md: Progress in the
 * database): the database's position when it has one, else Kafka's
 * committed offset, else STORAGE_AUTO_OFFSET_RESET. */
typedef struct {
    /* Fill next[p] for partitions 0..n-1 of `topic` with the database's
     * position (-1: none). Returns 0, or -1 with the reason in `err`: the
     * assignment cannot start anywhere safe, and the pipeline fails (the
     * next consumer_poll returns -1; nothing of those partitions is
     * delivered). Retries are the callee's. */
    int (*read)(void *ctx, const char *topic, int n, int64_t *next, char *err, size_t errlen);
    /* Record next[p] (>= 0) as the database's position of each partition p
     * that had none, before it is started there: from this assignment on,
     * the database is the record (a backup taken later restores it).
     * Returns 0, or -1 with the reason in `err`: the pipeline fails, as
     * for read. */
    int (*record)(void *ctx, const char *topic, int n, const int64_t *next, char *err, size_t errlen);
    void *ctx;
    /* Counts the records retention deleted before they were stored. */
    atomic_uint_fast64_t *lost;
} consumer_positions_t;

/* Create a consumer for pipeline `id`, subscribed to its topics in its group,
 * starting assigned partitions where `positions` says (NULL: at Kafka's
 * committed offsets). Returns NULL with the reason in `err` (an invalid
 * librdkafka property names the variable). The settings must outlive the
 * consumer. */
consumer_t *consumer_new(const settings_t *s, pipeline_id_t id, const consumer_positions_t *positions,
                         char *err, size_t errlen);

/* Poll up to `max` records: wait up to `timeout_ms` for the first (0: take
 * only what is already fetched), then take only what is already fetched, so
 * a lone message is not held back waiting for a full batch. Returns the
 * number of records (0 on timeout), stored in *records (owned by the
 * consumer, valid until consumer_release of that pointer), or -1 on a fatal
 * consumer error described in `err`. At most two polls may be unreleased at
 * once: the batch being written and the next one.
 *
 * Fatal, besides librdkafka's own fatal errors: what means this pipeline can
 * never consume. Not authorized to read the topic, or to use the group: at
 * once. The topic does not exist: after CONSUMER_MISSING_TOPIC_GRACE_MS of
 * asking the cluster again, since a topic may be created moments after the
 * service starts. A partition librdkafka has stopped fetching: after
 * STORAGE_FETCH_STALL_SECONDS of polls finding nothing while its leader
 * holds records past this member's position (DESIGN.md: Errors). Other
 * consumer errors are transient: logged, not fatal. */
int consumer_poll(consumer_t *c, size_t max, int timeout_ms, record_t **records, char *err,
                  size_t errlen);

/* Release the records of one poll (NULL or unknown pointers: nothing). */
void consumer_release(consumer_t *c, record_t *records);

/* Commit, for every partition of `records` this member still owns, the
 * highest offset + 1, together with any offsets stored earlier and not yet
 * taken by Kafka. Waits at most the commit timeout. Returns 0; 1 when the
 * group is between generations (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION,
 * UNKNOWN_MEMBER_ID: refused, or held back without asking until this member
 * has its next assignment; the offsets stay pending and a later commit or
 * flush covers them); or -1 with the reason in `err` (the data is already
 * durable; the offsets stay pending: the caller counts the failure and goes
 * on). Offsets of a partition given up in a rebalance are dropped: its next
 * owner redelivers those records and they are skipped. */
int consumer_commit(consumer_t *c, const record_t *records, size_t count, int timeout_ms, char *err,
                    size_t errlen);

/* Commit the pending offsets (see consumer_commit), if any: 0 when nothing
 * is pending. For an idle pipeline, whose last commit was held or refused. */
int consumer_flush(consumer_t *c, int timeout_ms, char *err, size_t errlen);

/* After a batch was fenced (DESIGN.md: Progress in the database): read
 * every owned partition again from the database's position (the positions'
 * read, with its retries), as an assignment starts it; a partition the
 * database has no position for is left where it is. Nothing taken may be
 * unreleased. Returns 0, or -1 with the reason in `err`. */
int consumer_rewind(consumer_t *c, char *err, size_t errlen);

/* Lag of every owned partition (high watermark as last seen by the fetcher
 * minus the consumed position) into lag[t * max + p] for partition p of
 * the pipeline's topic t (in the settings' order), and from the committed
 * position (the offset after the last record whose batch the database
 * committed, or where the assignment started) into committed_lag the same
 * way; -1 for partitions not owned or not known. Each array holds
 * PIPELINE_MAX_TOPICS * max entries; `max` at most 1024. No network round
 * trip. */
void consumer_lag(consumer_t *c, atomic_int_fast64_t *lag, atomic_int_fast64_t *committed_lag, int max);

/* Keep *owned at the number of partitions this member owns (from its first
 * assignment on) and *brokers_up at the number of the cluster's brokers it
 * is connected to (librdkafka's statistics, every statistics.interval.ms),
 * for the probes (DESIGN.md: Probes and metrics). Written on the pipeline's
 * thread; either may be NULL. */
void consumer_observe(consumer_t *c, atomic_int_fast64_t *owned, atomic_int_fast64_t *brokers_up);


/* Leave the group (the broker rebalances at once) and free everything. */
void consumer_close(consumer_t *c);

#endif
