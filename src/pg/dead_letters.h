/* dead_letters — every statement on dead_letter_events (DESIGN.md: Dead
 * letters), but the migrations that create the table: the store's insert of
 * a batch's rejected records, the commands' reads, the marks of redrive and
 * resolve (one statement resolves, DESIGN.md: Resolving dead letters),
 * purge's deletes and verify's summary. Results are plain C values; their
 * strings point into memory the result owns until its _free. */
#ifndef STORAGE_PG_DEAD_LETTERS_H
#define STORAGE_PG_DEAD_LETTERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/batch.h"
#include "core/pipeline.h"
#include "core/retry.h"
#include "pg/db.h"
#include "pg/store.h"

/* Where these functions take a `topic`, it is a pipeline's list of topics
 * joined by commas (settings_t.topic): the dead letters of any of them. */

/* The unresolved dead letters of `topic` by error_type, within
 * `deadline_ms`: counts[i] for decode_error_types[i], counts[n - 1] for any
 * other type (the status page's snapshot). Returns 0, or -1 with `err` and
 * *cls set. */
int dead_letters_unresolved(db_conn_t *conn, int64_t deadline_ms, const char *topic, int64_t *counts, size_t n,
                            char *err, size_t errlen, error_class_t *cls);

/* Inside the store's transaction, before `deadline_ms`: insert the batch's
 * rejected entries (ON CONFLICT on their coordinates and the digest of their
 * timestamp, key and payload DO NOTHING: the same record read again adds
 * nothing, another record at reused coordinates is kept); *written gets how
 * many there were (the batch's log line), and each entry whose row was
 * inserted is marked dead_letter_new: a replayed record already stored is
 * not (the metrics count those, DESIGN.md: Probes and metrics). Returns 0,
 * or -1 with `err` and *cls set (a refused dead letter is fatal: the batch
 * is not committed without it). */
int dead_letters_write(db_conn_t *conn, int64_t deadline_ms, batch_t *b, size_t *written, char *err,
                       size_t errlen, error_class_t *cls);

/* How a dead letter was resolved (resolution_kind, migration 0007). */
#define DEAD_LETTER_REDRIVEN "redriven"         /* it stored once its cause was fixed */
#define DEAD_LETTER_ACKNOWLEDGED "acknowledged" /* an operator decided it never will */

/* Resolve the dead letters ids[0..n) as redriven by `by` without storing
 * them: each record is older than a tombstone of its key applied after it
 * (pg/tombstones.h), which a replay of the topic would not have stored
 * over either; the note says so. Adds how many changed to *resolved.
 * Returns 0, or -1 with `err`. */
int dead_letters_resolve_after_tombstone(db_conn_t *conn, const int64_t *ids, size_t n, const char *by,
                                         size_t *resolved, char *err, size_t errlen);

/* Whether the table has every resolution column (migrations 0005 and
 * 0007): 1 yes, 0 no, -1 the catalog could not be read (`err`). */
int dead_letters_resolvable(db_conn_t *conn, char *err, size_t errlen);

/* list: counts by topic and error_type, then the newest rows. */
typedef struct {
    const char *topic, *error_type, *newest; /* newest: created_at, UTC */
    long long unresolved, resolved;
} dead_letter_count_t;

typedef struct {
    const char *id, *topic, *partition, *offset, *error_type, *created_at, *detail;
    long long payload_size, stored_bytes; /* stored_bytes < payload_size: truncated */
    bool resolved;
    /* NULL while unresolved; resolved_by and resolution may be NULL for a
     * dead letter resolved before migration 0007. */
    const char *resolved_at, *resolution_kind, *resolved_by, *resolution;
} dead_letter_row_t;

typedef struct {
    dead_letter_count_t *counts;
    size_t count_n;
    dead_letter_row_t *rows;
    size_t row_n;
    void *results;
} dead_letter_list_t;

/* Of `topic` and `type` (NULL: any), up to `limit` newest rows (only the
 * unresolved ones with `unresolved_only`). Returns 0, or -1 with `err`. */
int dead_letters_list(db_conn_t *conn, const char *topic, const char *type, long long limit,
                      bool unresolved_only, dead_letter_list_t *out, char *err, size_t errlen);
void dead_letters_list_free(dead_letter_list_t *l);

/* show: one dead letter, every column (NULL: SQL null). */
typedef struct {
    const char *id, *topic, *partition, *kafka_offset, *kafka_timestamp, *created_at, *error_type,
        *error_detail, *resolved_at, *resolution_kind, *resolved_by, *resolution;
    const char *key, *payload; /* exact bytes */
    size_t key_len, payload_len;
    long long payload_size;
    void *result;
} dead_letter_t;

/* Returns 1 (found), 0 (no such id) or -1 with `err`. */
int dead_letters_get(db_conn_t *conn, const char *id, dead_letter_t *out, char *err, size_t errlen);
void dead_letters_get_free(dead_letter_t *d);

/* redrive: a batch of unresolved dead letters as the records they were. */
typedef struct {
    int64_t id;
    record_t record;                      /* topic borrowed from the result */
    long long payload_size, stored_bytes; /* stored_bytes < payload_size: truncated */
} stored_letter_t;

typedef struct {
    stored_letter_t *letters;
    size_t n;
    void *result;
} stored_letters_t;

/* Up to `limit` unresolved dead letters of `topic` (and `type`, NULL: any)
 * with an id above `after`, in id order. Returns 0, or -1 with `err`. */
int dead_letters_fetch(db_conn_t *conn, const char *topic, const char *type, int64_t after, int limit,
                       stored_letters_t *out, char *err, size_t errlen);
void dead_letters_fetch_free(stored_letters_t *l);

/* What redrive marks in a batch's transaction: entry i of the batch came
 * from dead letter ids[i]. Stored and superseded entries resolve theirs with
 * a note; rejected ones get their reason refreshed where it changed. */
typedef struct {
    const pipeline_def_t *def;
    const int64_t *ids;
    const char *by;             /* resolved_by */
    size_t resolved, refreshed; /* rows changed by the hook's last run */
} dead_letter_marks_t;

/* The store hook that makes the marks (committed, or rolled back when
 * !commit: a dry run). */
store_hook_t dead_letters_resolve_hook(dead_letter_marks_t *marks, bool commit);

/* resolve: acknowledge dead letters as garbage, with `note`
 * (DEAD_LETTER_ACKNOWLEDGED), each statement committed on its own.
 *
 * Of the n `ids`, those no dead letter has go to missing[] (*missing_n of
 * them, in the order given); when there is any, nothing is changed. Else the
 * unresolved ones are acknowledged: *acknowledged gets how many (the others
 * were resolved already). Returns 0, or -1 with `err`. */
int dead_letters_acknowledge_ids(db_conn_t *conn, const int64_t *ids, size_t n, const char *by, const char *note,
                                 int64_t *missing, size_t *missing_n, size_t *acknowledged, char *err,
                                 size_t errlen);

/* Acknowledge every unresolved dead letter of error_type `type` (and of
 * `topic`, NULL: any topic), a chunk of ids per statement; *acknowledged
 * gets how many. Returns 0, or -1 with `err` (chunks before it stay
 * acknowledged). */
int dead_letters_acknowledge_matching(db_conn_t *conn, const char *topic, const char *type, const char *by,
                                      const char *note, size_t *acknowledged, char *err, size_t errlen);

/* purge: resolved dead letters whose resolved_at is more than age_seconds
 * ago, deleted a chunk per statement (never an unresolved one). `cutoff`
 * gets the moment they were resolved before (UTC, fixed when it starts).
 * With `dry_run` nothing is deleted: *count is how many would be. Returns 0,
 * or -1 with `err` (chunks before it stay deleted; *count says how many). */
int dead_letters_purge(db_conn_t *conn, long long age_seconds, bool dry_run, long long *count, char *cutoff,
                       size_t cutoff_len, char *err, size_t errlen);

/* Unresolved dead letters (of `type`, NULL: any) by topic, of the topics
 * not among the n `topics`. */
typedef struct {
    const char **topics, **unresolved;
    size_t n;
    void *result;
} dead_letter_topics_t;

int dead_letters_other_topics(db_conn_t *conn, const char *const *topics, size_t n, const char *type,
                              dead_letter_topics_t *out, char *err, size_t errlen);
void dead_letters_other_topics_free(dead_letter_topics_t *t);

/* verify: counts by error_type of the unresolved dead letters of the n
 * `topics`, and the newest unresolved one; resolved ones are only counted. */
typedef struct {
    bool counted; /* the counts below were read */
    long long total, resolved; /* total: unresolved */
    const char **types, **type_counts; /* unresolved, by count, descending */
    size_t type_n;
    /* The newest unresolved (id NULL: none); detail: its first 200
     * characters. */
    const char *id, *topic, *partition, *offset, *error_type, *created_at, *detail;
    void *results[2];
} dead_letter_summary_t;

/* Returns 0, or -1 with `err` (out->counted says whether the counts were
 * read before the newest could not be). */
int dead_letters_summary(db_conn_t *conn, const char *const *topics, size_t n, dead_letter_summary_t *out,
                         char *err, size_t errlen);
void dead_letters_summary_free(dead_letter_summary_t *s);

#endif
