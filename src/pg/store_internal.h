/* The store's state, shared by store.c (connection, resolving, progress,
 * the batch prepared ahead) and store_write.c (the attempts that write a
 * batch; DESIGN.md: The batch loop, The write path). Private to src/pg. */
#ifndef STORAGE_PG_STORE_INTERNAL_H
#define STORAGE_PG_STORE_INTERNAL_H

#include "pg/copy_text.h"
#include "pg/db_internal.h"
#include "pg/store.h"

struct store {
    const settings_t *settings;
    const pipeline_def_t *def;
    PGconn *conn;
    char *stage_sql;  /* CREATE TEMP TABLE storage_stage ... AS SELECT (...) FROM table WITH NO DATA */
    char *copy_sql;   /* COPY storage_stage (...) FROM STDIN */
    char *insert_sql; /* INSERT INTO table AS t (...) SELECT ... FROM storage_stage ON CONFLICT ... */
    char *direct_sql; /* COPY table (...) FROM STDIN */
    /* The consumer group whose progress each committed batch records in
     * consumer_offsets (NULL: none, as for redrive, whose records are dead
     * letters, not a group's position). */
    char *progress_group;
    /* The epoch of each partition of each topic as read when it was
     * assigned: a batch raises a position only within it (DESIGN.md,
     * Progress in the database). */
    topic_epochs_t epochs[PIPELINE_MAX_TOPICS];
    int epoch_topics;
    /* The attempt whose end was sent and is not yet waited for, or the
     * probe sent before it (`probing`). */
    struct {
        bool active, probing;
        size_t rows;       /* staged rows the upsert was sent for */
        store_hook_t hook; /* the batch's hook, for a second attempt */
        int64_t left_ms;   /* of the attempt's time, what sending it left for the wait */
    } in_flight;
    batch_counts_t done;     /* counts of the batch being written */
    /* The write path (DESIGN.md: The write path): whether the next batch
     * first asks which of its rows are stored (the last one found most of
     * its rows stored: a redelivery, a replay), and what the probe of the
     * batch being written found: per entry, and how many. */
    bool probe_next;
    bool probe_prepared; /* in this session (conn) */
    bool *stored;
    size_t probed;
    /* Whether the next batch is COPYed straight into the table, and whether
     * the attempt in hand is: once `copy_need` batches in a row
     * (`copy_streak` so far) inserted every row — a fresh ingest. Each
     * fall-back from a COPY doubles the need (up to STORE_COPY_NEED_MAX),
     * each COPY that stored its batch lowers it by one, so batches that
     * alternate between new rows and re-observations cost a few fall-backs,
     * not one every other batch (DESIGN.md: The write path). Never where
     * the table refuses COPY FROM (`copy_refused`: row-level security). */
    bool direct_next, direct, copy_refused;
    /* A field takes its column's default where its member is absent: a
     * batch with such a row is written by the upsert, which writes it. */
    bool has_defaults;
    unsigned copy_need, copy_streak;
    copy_buf_t copy;       /* reused COPY data of one chunk */
    app_cache_t *apps; /* this pipeline's package_name -> application_id */
    /* The current attempt's deadline (clock_now_ms; 0: none yet): resolving and
     * writing one batch, connecting included, end by it. */
    int64_t deadline;
    /* Reused per batch: the indexes of the entries to upsert. */
    size_t *pending;
    size_t *order; /* store_prepare's, in key order (the batch in flight keeps `pending`) */
    /* Reused per batch: its distinct package names (`list`, with room for
     * as many again: the names asked of the registry), each event's index
     * among them (`of`), their ids and the indexes of those to be asked. */
    struct {
        const char **list;
        uint32_t *of;
        int64_t *ids;
        size_t *stale;
        size_t cap;
    } names;
    /* The batch store_prepare resolved from the cache alone, with the COPY
     * text of its events (`rows` of them) written ahead. Its first attempt
     * sends that text; a resolve of any batch, or an attempt, ends it. */
    struct {
        const batch_t *batch; /* NULL: none */
        uint64_t generation; /* the batch's, when prepared */
        size_t rows;
        copy_buf_t copy;
    } prepared;
};

#define STORE_COPY_NEED_MAX 32

/* Connect (once per connection) and prepare the session. Returns 0 or -1
 * with err/cls. */
int store_connect(store_t *st, char *err, size_t errlen, error_class_t *cls);

/* Start the attempt's time: resolving and writing one batch end by it. */
void store_arm_deadline(store_t *st);

#endif
