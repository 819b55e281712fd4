/* consumer_start — where a pipeline's newly assigned partitions start
 * (DESIGN.md: Progress in the database): the database's position when it
 * has one, else Kafka's committed offset, else where
 * STORAGE_AUTO_OFFSET_RESET says, and a start found outside the database is
 * recorded there before reading begins. A position retention has passed is
 * said loudly and counted. Runs in the rebalance callback (consumer.c). */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kafka/consumer_internal.h"
#include "log.h"

/* Where a partition without a database position starts: Kafka's committed
 * offset, else the reset policy's end of the partition (resolved here, so
 * that what is recorded is where reading starts). -1 when neither can be
 * known now (the broker did not answer): librdkafka then decides, and the
 * first batch records the position. */
static int64_t start_without_position(consumer_t *c, rd_kafka_t *rk, const rd_kafka_topic_partition_t *e,
                                      int64_t kafka)
{
    if (kafka >= 0) return kafka;
    int64_t lo, hi;
    if (rd_kafka_query_watermark_offsets(rk, e->topic, e->partition, &lo, &hi, CONSUMER_METADATA_TIMEOUT_MS))
        return -1;
    return strcmp(c->settings->auto_offset_reset, "latest") == 0 ? hi : lo;
}

/* Start each newly assigned partition at the database's position, where
 * it has one. A position below the partition's first offset means
 * retention deleted records nobody stored (a database restored from an old
 * backup): said loudly, counted, and read from the first offset the broker
 * still has. A partition without a position starts at Kafka's committed
 * offset, else where the reset policy says, and that start is recorded
 * first: from then on the database is the record (DESIGN.md, Progress in
 * the database). */
/* The same for the partitions of `parts` of one topic; `committed`: Kafka's
 * committed offsets of `parts`, in its order (NULL: unknown). */
static void start_topic(consumer_t *c, rd_kafka_t *rk, rd_kafka_topic_partition_list_t *parts,
                        const rd_kafka_topic_partition_list_t *committed, const char *topic)
{
    int n = 0;
    for (int i = 0; i < parts->cnt; i++)
        if (strcmp(parts->elems[i].topic, topic) == 0 && parts->elems[i].partition + 1 > n)
            n = parts->elems[i].partition + 1;
    if (n == 0) return;
    int64_t *next = malloc((size_t)n * sizeof *next), *starts = malloc((size_t)n * sizeof *starts);
    char err[1024];
    bool record = false;
    if (!next || !starts) abort();
    for (int p = 0; p < n; p++) starts[p] = -1;
    if (c->positions.read(c->positions.ctx, topic, n, next, err, sizeof err) != 0) {
        snprintf(c->positions_error, sizeof c->positions_error,
                 "cannot read where the assigned partitions of %s start from the database: %s", topic, err);
        c->positions_failed = true;
        goto out;
    }
    for (int i = 0; i < parts->cnt; i++) {
        rd_kafka_topic_partition_t *e = &parts->elems[i];
        if (strcmp(e->topic, topic) != 0) continue;
        int64_t at = next[e->partition];
        int64_t kafka = committed ? committed->elems[i].offset : RD_KAFKA_OFFSET_INVALID;
        if (at < 0) {
            at = start_without_position(c, rk, e, kafka);
            if (kafka >= 0)
                /* The first run after the upgrade that added the table, or
                 * a database restored from a backup older than this
                 * partition's first assignment: only the first is safe,
                 * and nothing here can tell them apart. */
                LOG_WARN(c->def->name, "%s [%d] has no position in the database: starting at Kafka's committed offset %lld and recording it (right on the first run after the upgrade that added consumer_offsets; if this database was restored from a backup older than that, records below %lld it lacks are not read again)",
                         e->topic, e->partition, (long long)kafka, (long long)kafka);
            else if (at >= 0)
                LOG_INFO(c->def->name, "%s [%d] has no position in the database nor in Kafka: starting at offset %lld (STORAGE_AUTO_OFFSET_RESET=%s) and recording it",
                         e->topic, e->partition, (long long)at, c->settings->auto_offset_reset);
            else
                LOG_WARN(c->def->name, "%s [%d] has no position in the database nor in Kafka, and the broker did not say where the partition starts: STORAGE_AUTO_OFFSET_RESET=%s decides",
                         e->topic, e->partition, c->settings->auto_offset_reset);
            if (at >= 0) {
                starts[e->partition] = at;
                record = true;
                e->offset = at;
            }
            continue;
        }
        int64_t lo, hi;
        rd_kafka_resp_err_t werr =
            rd_kafka_query_watermark_offsets(rk, e->topic, e->partition, &lo, &hi, CONSUMER_METADATA_TIMEOUT_MS);
        if (werr) {
            LOG_WARN(c->def->name, "cannot read the first offset of %s [%d] (%s): starting at the database's position %lld",
                     e->topic, e->partition, rd_kafka_err2str(werr), (long long)at);
        } else if (at < lo) {
            LOG_ERROR_F(c->def->name,
                        LOG_FIELDS(LF_STR("topic", e->topic), LF_INT("partition", e->partition), LF_INT("lost", lo - at)),
                        "%s [%d]: %lld message(s) can no longer be stored: the database's position %lld is below the partition's first offset %lld (retention deleted them; was the database restored from an old backup?); continuing from offset %lld",
                        e->topic, e->partition, (long long)(lo - at), (long long)at, (long long)lo, (long long)lo);
            if (c->positions.lost)
                atomic_fetch_add_explicit(c->positions.lost, (uint_fast64_t)(lo - at), memory_order_relaxed);
            e->offset = lo;
            continue; /* the ERROR said it all: no comparison with Kafka's copy */
        } else if (at > hi) {
            /* Records the position counts as stored no longer exist: the
             * topic was recreated (or the database is another cluster's).
             * Read from where the reset policy says; the first batch moves
             * the position down to where its records end (fenced:
             * offsets_advance_sql), so a restart loses nothing. */
            int64_t from = strcmp(c->settings->auto_offset_reset, "latest") == 0 ? hi : lo;
            LOG_WARN(c->def->name, "%s [%d]: the database's position %lld is beyond the partition's end %lld (was the topic recreated?): reading from offset %lld (STORAGE_AUTO_OFFSET_RESET=%s); the position follows the records stored",
                     e->topic, e->partition, (long long)at, (long long)hi, (long long)from,
                     c->settings->auto_offset_reset);
            e->offset = from;
            continue;
        }
        if (kafka >= 0 && at > kafka) {
            LOG_INFO(c->def->name, "%s [%d] starts at offset %lld, the database's position (Kafka's committed offset %lld is behind: %lld stored message(s) not read again; the copy catches up with the next commit)",
                     e->topic, e->partition, (long long)at, (long long)kafka, (long long)(at - kafka));
            /* Pending like a stored batch's offsets: the next commit, or
             * the idle pipeline's flush, brings Kafka's copy up to date,
             * so lag tools do not show the gap for good. */
            rd_kafka_topic_partition_t *p = rd_kafka_topic_partition_list_find(c->pending, e->topic, e->partition);
            if (!p) p = rd_kafka_topic_partition_list_add(c->pending, e->topic, e->partition);
            if (p->offset < at) p->offset = at;
        } else if (kafka >= 0 && at < kafka)
            LOG_WARN(c->def->name, "%s [%d] starts at offset %lld, the database's position: %lld message(s) below Kafka's committed offset %lld are read again (was the database restored from a backup?)",
                     e->topic, e->partition, (long long)at, (long long)(kafka - at), (long long)kafka);
        else
            LOG_INFO(c->def->name, "%s [%d] starts at offset %lld, the database's position", e->topic,
                     e->partition, (long long)at);
        e->offset = at;
    }
    if (record && c->positions.record &&
        c->positions.record(c->positions.ctx, topic, n, starts, err, sizeof err) != 0) {
        snprintf(c->positions_error, sizeof c->positions_error,
                 "cannot record where the assigned partitions of %s start in the database: %s", topic, err);
        c->positions_failed = true;
    }
out:
    free(next);
    free(starts);
}

void start_at_database_positions(consumer_t *c, rd_kafka_t *rk, rd_kafka_topic_partition_list_t *parts)
{
    if (parts->cnt == 0) return;
    /* Kafka's copy, to tell the operator how the two records compare. */
    rd_kafka_topic_partition_list_t *committed = rd_kafka_topic_partition_list_copy(parts);
    if (rd_kafka_committed(rk, committed, CONSUMER_METADATA_TIMEOUT_MS) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        rd_kafka_topic_partition_list_destroy(committed);
        committed = NULL;
    }
    for (int t = 0; t < c->topic_count && !c->positions_failed; t++)
        start_topic(c, rk, parts, committed, c->topics[t].name);
    if (committed) rd_kafka_topic_partition_list_destroy(committed);
}
