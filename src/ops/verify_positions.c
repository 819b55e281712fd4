/* verify_positions — the positions and lag stages of `storage-consumer
 * verify` (DESIGN.md: Operations; Progress in the database): each group's
 * two records of its progress, the database's position and Kafka's
 * committed offset, partition by partition, and where the group would
 * start against the topic's watermarks. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kafka/cluster.h"
#include "ops/verify.h"
#include "pg/offsets.h"

/* Each group's two records of its progress, partition by partition
 * (DESIGN.md, Progress in the database): the database's position, where
 * the service starts, and Kafka's committed offset, its copy, committed
 * after the database's COMMIT. Read here for the lag stage too. */
void check_positions(verify_t *v)
{
    stage_t st = {.status = STAGE_SKIP};

    for (int i = 0; i < v->nt; i++) {
        target_t *t = &v->t[i];
        if (!t->enabled) continue;
        if (t->exists != 1 || !t->hi) {
            stage_add(&st, "%s not checked", t->group);
            continue;
        }
        int n = t->info.partitions;
        char err[1024];
        t->kafka = calloc((size_t)n, sizeof *t->kafka);
        if (!t->kafka) abort();
        /* An OffsetFetch: reads the group's offsets without joining it. */
        if (cluster_committed(t->client, t->topic, n, VERIFY_KAFKA_TIMEOUT_MS, t->kafka, err, sizeof err)) {
            stage_raise(&st, STAGE_BROKEN);
            stage_add(&st, "%s: cannot read Kafka's committed offsets: %s", t->group, err);
            free(t->kafka);
            t->kafka = NULL;
            continue;
        }
        if (!v->conn) {
            stage_add(&st, "%s: the database's positions not read (database unreachable)", t->group);
            continue;
        }
        t->db = malloc((size_t)n * sizeof *t->db);
        if (!t->db) abort();
        error_class_t cls;
        if (offsets_read(v->conn, 0, t->group, t->topic, n, t->db, NULL, err, sizeof err, &cls)) {
            stage_raise(&st, STAGE_BROKEN);
            stage_add(&st, "%s: cannot read the database's positions: %s", t->group, first_line(err));
            free(t->db);
            t->db = NULL;
            continue;
        }
        stage_raise(&st, STAGE_OK);

        char per[1024];
        size_t len = 0;
        per[0] = '\0';
        bool database_ahead = false;
        /* What deserves a sentence, after the group's numbers. */
        stage_t notes = {0};
        for (int p = 0; p < n; p++) {
            int64_t d = t->db[p], k = t->kafka[p].offset;
            char dt[32], kt[32], which[64];
            if (t->kafka[p].error[0]) {
                stage_raise(&st, STAGE_BROKEN);
                stage_add(&notes, "%s [%d]: cannot read Kafka's committed offset: %s", t->group, p,
                          t->kafka[p].error);
                continue;
            }
            if (d < 0 && k < 0) {
                snprintf(which, sizeof which, "neither yet");
            } else if (d < 0) {
                snprintf(which, sizeof which, "no database row");
                stage_add(&notes, "%s [%d]: no position in the database: the service starts at Kafka's committed "
                          "offset %" PRId64 " (the first run after the upgrade)", t->group, p, k);
            } else if (k < 0 || d > k) {
                snprintf(which, sizeof which, "database ahead by %" PRId64, k < 0 ? d : d - k);
                database_ahead = true;
            } else if (d < k) {
                snprintf(which, sizeof which, "Kafka ahead by %" PRId64, k - d);
                stage_raise(&st, STAGE_WARN);
                stage_add(&notes, "%s [%d]: Kafka's committed offset %" PRId64 " is ahead of the database's position %"
                          PRId64 ": the service starts at the database's and reads those %" PRId64
                          " messages again (was the database restored from a backup?)",
                          t->group, p, k, d, k - d);
            } else {
                snprintf(which, sizeof which, "even");
            }
            int w = snprintf(per + len, sizeof per - len, "%s [%d] database=%s kafka=%s %s", p ? "," : "", p,
                             cluster_offset_text(d, dt, sizeof dt), cluster_offset_text(k, kt, sizeof kt), which);
            if (w > 0 && (size_t)w < sizeof per - len) len += (size_t)w;
        }
        stage_add(&st, "%s%s", t->group, per);
        if (notes.len) stage_add(&st, "%s", notes.detail);
        json_decref(notes.parts);
        if (database_ahead)
            stage_add(&st, "%s: the database ahead of Kafka is normal: Kafka's copy lags a batch, or a crash "
                      "came between the two commits", t->group);
    }
    stage_finish(v, "positions", &st);
}

void check_lag(verify_t *v)
{
    stage_t st = {.status = STAGE_SKIP};

    for (int i = 0; i < v->nt; i++) {
        target_t *t = &v->t[i];
        if (!t->enabled) continue;
        /* The positions stage said why. */
        if (!t->kafka) {
            stage_add(&st, "%s not checked", t->group);
            continue;
        }
        int n = t->info.partitions;
        long long total = 0;
        int never = 0;
        bool broken = false;
        char per[1024];
        size_t len = 0;
        per[0] = '\0';
        for (int p = 0; p < n; p++) {
            /* Where the service starts: the database's position, else
             * Kafka's committed offset, else STORAGE_AUTO_OFFSET_RESET. */
            bool in_db = t->db && t->db[p] >= 0;
            int64_t c = in_db ? t->db[p] : t->kafka[p].offset;
            const char *whose = in_db ? "the database's position" : "Kafka's committed offset";
            int64_t lo = t->lo[p], hi = t->hi[p], lag = 0;
            if (t->kafka[p].error[0]) {
                broken = true;
                continue; /* the positions stage said why */
            }
            if (hi < 0) continue; /* the messages stage said why */
            if (c < 0) {
                /* No position yet: everything the partition holds is unread. */
                lag = hi - lo;
                if (hi > 0) never++;
            } else if (c < lo) {
                broken = true;
                lag = hi - lo;
                stage_add(&st, "%s [%d]: %s %" PRId64 " is below the log start %" PRId64
                          ": %" PRId64 " messages were deleted by retention before they were stored",
                          t->group, p, whose, c, lo, lo - c);
            } else if (c > hi) {
                broken = true;
                stage_add(&st, "%s [%d]: %s %" PRId64 " is beyond the high watermark %" PRId64
                          ": the topic was recreated or truncated, the group will reset (STORAGE_AUTO_OFFSET_RESET)",
                          t->group, p, whose, c, hi);
            } else {
                lag = hi - c;
            }
            total += lag;
            int w = snprintf(per + len, sizeof per - len, " [%d]=%" PRId64, p, lag);
            if (w > 0 && (size_t)w < sizeof per - len) len += (size_t)w;
        }
        stage_add(&st, "%s lag=%lld%s%s%s", t->group, total, per,
                  never ? " (no offset committed yet)" : "",
                  t->db ? "" : " (from Kafka's committed offsets: the database's positions were not read)");
        if (v->max_lag >= 0 && total > v->max_lag) {
            broken = true;
            stage_add(&st, "%s: lag %lld exceeds --max-lag %lld", t->group, total, v->max_lag);
        }
        stage_raise(&st, broken ? STAGE_BROKEN : total > 0 ? STAGE_WARN : STAGE_OK);
    }
    stage_finish(v, "lag", &st);
}
