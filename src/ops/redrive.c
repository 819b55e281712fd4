#include "ops/redrive.h"

#include <stdlib.h>

#include "core/batch.h"
#include "pg/catalog.h"
#include "pg/dead_letters.h"
#include "pg/store.h"
#include "pg/tombstones.h"
#include "registry/registry.h"

/* One pipeline's redrive: its store, its batch and the per-batch arrays. */
typedef struct {
    const pipeline_def_t *def;
    const char *by;
    bool dry_run;
    const redrive_report_t *report;
    redrive_counts_t *counts;
    store_t *store;
    batch_t batch;
    record_t *records; /* the batch's records; bytes borrowed from the fetched letters */
    int64_t *ids;      /* dead letter id of each record */
    size_t capacity;
} redrive_t;

/* Of the m records to redrive, those older than a tombstone of their key
 * applied after them (pg/tombstones.h) are resolved without being stored
 * (unless a dry run) and left out: a replay of the topic would have
 * deleted or marked what they stored (DESIGN.md: Resolving dead letters).
 * Returns how many records are left, in order, or (size_t)-1 with err. */
static size_t drop_after_tombstones(redrive_t *rd, db_conn_t *conn, size_t m, char *err, size_t errlen)
{
    error_class_t cls = ERROR_CLASS_FATAL;
    bool *after = calloc(m, sizeof *after);
    int64_t *at = calloc(m, sizeof *at), *buried = calloc(m, sizeof *buried);
    if (!after || !at || !buried) abort();
    batch_decode(&rd->batch, rd->records, m);
    if (rd->batch.unavailable) {
        snprintf(err, errlen, "schema registry: %s", rd->batch.unavailable_why);
        free(after);
        free(at);
        free(buried);
        return (size_t)-1;
    }
    long found = tombstones_after(conn, 0, &rd->batch, after, at, err, errlen, &cls);
    size_t kept = m, nb = 0;
    if (found > 0) {
        kept = 0;
        for (size_t i = 0; i < m; i++) {
            if (after[i]) {
                buried[nb++] = rd->ids[i];
                continue;
            }
            rd->records[kept] = rd->records[i];
            rd->ids[kept++] = rd->ids[i];
        }
        size_t resolved = 0;
        if (!rd->dry_run && dead_letters_resolve_after_tombstone(conn, buried, nb, rd->by, &resolved, err, errlen))
            found = -1;
        rd->counts->after_tombstone += nb;
        rd->counts->resolved += resolved;
    }
    free(after);
    free(at);
    free(buried);
    return found < 0 ? (size_t)-1 : kept;
}

/* Redrive one fetched batch. Returns 0 or -1 with err. */
static int redrive_batch(redrive_t *rd, db_conn_t *conn, const stored_letters_t *letters, char *err, size_t errlen)
{
    size_t m = 0;
    error_class_t cls = ERROR_CLASS_FATAL;
    redrive_counts_t *c = rd->counts;

    if (letters->n > rd->capacity) {
        rd->records = realloc(rd->records, letters->n * sizeof *rd->records);
        rd->ids = realloc(rd->ids, letters->n * sizeof *rd->ids);
        if (!rd->records || !rd->ids) abort();
        rd->capacity = letters->n;
    }
    for (size_t r = 0; r < letters->n; r++) {
        const stored_letter_t *l = &letters->letters[r];
        c->examined++;
        if (l->payload_size > l->stored_bytes) {
            c->not_redrivable++;
            rd->report->not_redrivable(rd->report->ctx, l->id, l->payload_size, l->stored_bytes);
            continue;
        }
        rd->records[m] = l->record;
        rd->ids[m] = l->id;
        m++;
    }
    if (m == 0) return 0;
    if (rd->def->tombstones != TOMBSTONE_DEAD_LETTER && (m = drop_after_tombstones(rd, conn, m, err, errlen)) == (size_t)-1)
        return -1;
    if (m == 0) return 0;

    /* The pipeline's own path: decode, resolve and bind, de-duplicate, then
     * the store's upsert with the dead letters marked in its transaction. */
    batch_counts_t counts = {0};
    dead_letter_marks_t marks = {.def = rd->def, .ids = rd->ids, .by = rd->by};
    store_hook_t hook = dead_letters_resolve_hook(&marks, !rd->dry_run);
    batch_decode(&rd->batch, rd->records, m);
    /* A schema the registry cannot give now: stop, storing nothing; the
     * dead letters wait for the next redrive. */
    if (rd->batch.unavailable) {
        snprintf(err, errlen, "schema registry: %s", rd->batch.unavailable_why);
        return -1;
    }
    if (store_resolve(rd->store, &rd->batch, err, errlen, &cls)) return -1;
    counts.superseded = batch_deduplicate(&rd->batch);
    if (store_write(rd->store, &rd->batch, &hook, &counts, err, errlen, &cls)) return -1;

    c->inserted += counts.inserted;
    c->updated += counts.updated;
    c->skipped += counts.skipped;
    c->resolved += marks.resolved;
    c->reasons_refreshed += marks.refreshed;
    for (size_t i = 0; i < m; i++) {
        const entry_t *e = &rd->batch.entries[i];
        /* A superseded record's winner is stored: when the database refused
         * a winner, the store put the next observation in its place. */
        if (e->state == ENTRY_REJECTED) {
            c->still_failing++;
            rd->report->still_failing(rd->report->ctx, rd->ids[i], e->rejection.error_type, e->rejection.detail);
        } else {
            c->stored++;
            if (e->state == ENTRY_SUPERSEDED) c->superseded++;
        }
    }
    return 0;
}

int redrive_pipeline(const settings_t *s, db_conn_t *conn, const pipeline_def_t *def, const char *type,
                     const char *by, bool dry_run, const redrive_report_t *report, redrive_counts_t *counts, char *err,
                     size_t errlen)
{
    redrive_t rd = {.def = def, .by = by, .dry_run = dry_run, .report = report, .counts = counts};
    const char *topic = s->topic[def->id];
    int64_t after = 0;
    int rc = 0;

    /* A dead letter keeps the record's topic, partition, offset, timestamp,
     * key and value, not its headers nor its timestamp's type: a redrive
     * would store another row than the record's. */
    if (pipeline_reads_record_metadata(def)) {
        snprintf(err, errlen,
                 "pipeline %s stores the record's headers or its timestamp's type, which a dead letter does not "
                 "keep: replay its topic instead (storage-consumer replay %s --to TIMESTAMP)",
                 def->name, def->name);
        return -1;
    }
    /* The checks come from the table as it is now (DESIGN.md: Pipelines are
     * declared): a column widened since the letter was written lets it in. */
    if (catalog_bind_pipeline(conn, def->id, err, errlen)) return -1;
    rd.store = store_new(s, def);
    batch_init(&rd.batch, def);
    registry_t *registry = NULL;
    if (*s->registry_url && (FORMAT_NEEDS_REGISTRY(def->format) || FORMAT_NEEDS_REGISTRY(def->key_format))) {
        registry = registry_new(s, NULL);
        rd.batch.schemas = registry_source(registry);
    }
    for (;;) {
        stored_letters_t letters;
        if (dead_letters_fetch(conn, topic, type, after, s->max_poll_records[def->id], &letters, err, errlen)) {
            rc = -1;
            break;
        }
        size_t n = letters.n;
        if (n > 0) after = letters.letters[n - 1].id;
        /* The records borrow the bytes of `letters`: free it only after. */
        rc = n > 0 ? redrive_batch(&rd, conn, &letters, err, errlen) : 0;
        dead_letters_fetch_free(&letters);
        if (rc == 0 && n > 0 && report->progress) report->progress(report->ctx, counts->examined);
        if (rc != 0 || n == 0) break;
    }
    batch_free(&rd.batch);
    registry_free(registry);
    store_free(rd.store);
    free(rd.records);
    free(rd.ids);
    return rc;
}
