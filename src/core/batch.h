/* batch — one polled batch on its way to the database: records, their
 * decoded events or rejections, application ids, de-duplication.
 *
 * Knows neither Kafka nor PostgreSQL. The worker fills `records` from its
 * consumer; everything else is derived here and consumed by the store. */
#ifndef STORAGE_BATCH_H
#define STORAGE_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/decode.h"
#include "core/pipeline.h"

typedef enum {
    ENTRY_EVENT,     /* decoded; to be written (unless superseded) */
    ENTRY_REJECTED,  /* to dead_letter_events */
    ENTRY_SUPERSEDED, /* same natural key as a winning event of this batch, or a tombstone after it */
    ENTRY_TOMBSTONE   /* a tombstone to apply (the pipeline's tombstone rule): its key alone */
} entry_state_t;

typedef struct {
    entry_state_t state;
    event_t event;
    rejection_t rejection;
    int64_t application_id;
    size_t winner; /* ENTRY_SUPERSEDED: the entry that superseded this one */
    bool tombstone; /* decoded as a tombstone (ENTRY_TOMBSTONE, or superseded by a later one) */
    /* Set by batch_deduplicate: the entry's key has a tombstone in the
     * batch (such a key is applied record by record when the database
     * refuses one of its records); and, for a standing tombstone that
     * marks, whether it goes before the key's value is written. */
    bool with_tombstone, mark_first;
    /* ENTRY_REJECTED: its dead letter was inserted by this batch's
     * transaction (false: already stored, e.g. by a replayed read). */
    bool dead_letter_new;
} entry_t;

typedef struct {
    const pipeline_def_t *def;
    record_t *records; /* borrowed from the consumer */
    size_t count;
    entry_t *entries;  /* owned; one per record, kept across batches */
    size_t capacity;
    /* How many times the batch was decoded: what was derived from one
     * decode (a COPY text written ahead) is not taken for the next. */
    uint64_t generation;
    /* Where the writer's schemas of a registry format come from (NULL:
     * nowhere); set by the batch's owner after batch_init. */
    const schema_source_t *schemas;
    /* Set by batch_decode when a record's schema could not be had
     * (DECODE_UNAVAILABLE): the batch must not be stored, but decoded again
     * after a wait (DESIGN.md: Formats); why, in `unavailable_why`. */
    bool unavailable;
    char unavailable_why[512];
} batch_t;

/* The offsets a batch covers in one partition of one topic. */
typedef struct {
    const char *topic; /* the records' own */
    int32_t partition;
    int64_t first, last;
} batch_range_t;

/* Counters of one batch, for the log line and the metrics. */
typedef struct {
    size_t inserted, updated, skipped, dead_lettered, superseded;
    size_t deleted; /* rows the batch's tombstones deleted or marked */
    size_t skipped_by_probe; /* of `skipped`, found stored before the write, never sent */
    size_t inserted_by_copy; /* of `inserted`, COPYed straight into the table */
} batch_counts_t;

void batch_init(batch_t *b, const pipeline_def_t *def);
void batch_free(batch_t *b);

/* Take `count` records (borrowed) and decode each into its entry; sets
 * b->unavailable when a schema could not be had. */
void batch_decode(batch_t *b, record_t *records, size_t count);

/* The partitions the batch's records are in, each with its lowest and
 * highest offset, in the order the partitions first appear, into out (room
 * for b->count ranges: never more). Returns how many. */
size_t batch_ranges(const batch_t *b, batch_range_t *out);

/* The distinct package names of the decoded events, for one resolve query.
 * Fills `names` (pointers into the events; valid until the batch is reused)
 * and returns how many; name_of[i] is the index in `names` of event i's
 * name (other entries' are left alone). Both must hold b->count. */
size_t batch_package_names(const batch_t *b, const char **names, uint32_t *name_of);

/* Bind application ids: event i gets ids[name_of[i]] (name_of from
 * batch_package_names), or, for -1 (the app is not registered), becomes a
 * rejected record (unregistered_app). */
void batch_bind(batch_t *b, const uint32_t *name_of, const int64_t *ids);

/* Reduce each natural key's records to what applying them one by one, in
 * record order, leaves in the table, marking the rest superseded: of the
 * values, the greatest version wins (reviews: last_synced_at), ties and
 * versionless pipelines keep the first occurrence, as ON CONFLICT DO NOTHING
 * would; a key's tombstones keep their place in that order (see
 * reduce_key in batch.c). Required, not an optimisation: PostgreSQL aborts
 * an ON CONFLICT DO UPDATE that touches the same row twice. Returns the
 * number superseded. */
size_t batch_deduplicate(batch_t *b);

/* Sort the entry indexes idx[0..n) in key order: the application's id (when
 * the key has it), then the key's text, byte by byte. The keys must be
 * distinct (batch_deduplicate). The order a batch is COPYed in (DESIGN.md:
 * The write path). */
void batch_sort_by_key(const batch_t *b, size_t *idx, size_t n);

/* Entry `rejected`, the winner of its natural key, was refused by the
 * database, and its key has no tombstone in the batch (a key with one is
 * applied record by record instead): the observations it superseded must
 * not vanish with it. The one
 * de-duplication would have chosen among them becomes the key's event (the
 * others now superseded by it) and *promoted is set to it; returns false when
 * it superseded nothing. Every record then ends in exactly one place: stored,
 * merged into a stored observation, or dead-lettered with a reason. */
bool batch_promote(batch_t *b, size_t rejected, size_t *promoted);

/* How many entries are superseded now. */
size_t batch_superseded(const batch_t *b);

/* Mark entry i rejected with the database's reason (a data error isolated
 * by the store). */
void batch_reject(batch_t *b, size_t i, const char *error_type, const char *detail);

#endif
