#include "kafka/cluster.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kafka/internal.h"

cluster_client_t *cluster_client_new(const settings_t *s, pipeline_id_t id, char *err, size_t errlen)
{
    bool invalid;
    rd_kafka_t *rk = kafka_handle_new(s, id, NULL, NULL, NULL, "a Kafka client", &invalid, err, errlen);
    if (!rk) return NULL;
    cluster_client_t *c = calloc(1, sizeof *c);
    if (!c) abort();
    c->rk = rk;
    return c;
}

void cluster_client_destroy(cluster_client_t *c)
{
    if (!c) return;
    /* Never subscribed: closing would only wait for a group it never joined. */
    rd_kafka_destroy_flags(c->rk, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
    free(c);
}

int kafka_topic_lookup(rd_kafka_t *rk, const char *topic, int timeout_ms, int *partitions,
                       int *leaderless, char *err, size_t errlen)
{
    const struct rd_kafka_metadata *md = NULL;
    /* all_topics = 1: see cluster.h. */
    rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 1, NULL, &md, timeout_ms);
    if (partitions) *partitions = 0;
    if (leaderless) *leaderless = 0;
    if (e) {
        snprintf(err, errlen, "the Kafka cluster did not answer a metadata request within %d ms: %s",
                 timeout_ms, rd_kafka_err2str(e));
        return -1;
    }
    int found = 0;
    for (int i = 0; i < md->topic_cnt; i++) {
        const rd_kafka_metadata_topic_t *t = &md->topics[i];
        if (strcmp(t->topic, topic) != 0) continue;
        if (t->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) break;
        found = 1;
        if (partitions) *partitions = t->partition_cnt;
        for (int p = 0; leaderless && p < t->partition_cnt; p++)
            if (t->partitions[p].err || t->partitions[p].leader < 0) (*leaderless)++;
        break;
    }
    rd_kafka_metadata_destroy(md);
    return found;
}

int cluster_topic_lookup(cluster_client_t *c, const char *topic, int timeout_ms, cluster_topic_t *out,
                         char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    return kafka_topic_lookup(c->rk, topic, timeout_ms, &out->partitions, &out->leaderless, err,
                              errlen);
}

int cluster_watermarks(cluster_client_t *c, const char *topic, int partition, int timeout_ms,
                       int64_t *lo, int64_t *hi, char *err, size_t errlen)
{
    rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(c->rk, topic, partition, lo, hi, timeout_ms);
    if (!e) return 0;
    snprintf(err, errlen, "%s", rd_kafka_err2str(e));
    return -1;
}

/* The answer for partitions 0..n-1 of `topic` in `list` into out[]. */
static void offsets_out(const rd_kafka_topic_partition_list_t *list, const char *topic, int n,
                        cluster_offset_t *out)
{
    for (int p = 0; p < n; p++) {
        const rd_kafka_topic_partition_t *r = rd_kafka_topic_partition_list_find(list, topic, p);
        out[p].offset = r && !r->err ? r->offset : RD_KAFKA_OFFSET_INVALID;
        snprintf(out[p].error, sizeof out[p].error, "%s",
                 !r ? "missing from the answer" : r->err ? rd_kafka_err2str(r->err) : "");
    }
}

/* Ask `request` (rd_kafka_committed or rd_kafka_offsets_for_times, which
 * answer alike) about partitions 0..n-1 of `topic`, each starting at
 * `offset`. */
static int offsets_request(cluster_client_t *c, const char *topic, int n, int64_t offset,
                           rd_kafka_resp_err_t (*request)(rd_kafka_t *, rd_kafka_topic_partition_list_t *, int),
                           int timeout_ms, cluster_offset_t *out, char *err, size_t errlen)
{
    rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(n);
    for (int p = 0; p < n; p++) rd_kafka_topic_partition_list_add(parts, topic, p)->offset = offset;
    rd_kafka_resp_err_t e = request(c->rk, parts, timeout_ms);
    if (e) snprintf(err, errlen, "%s", rd_kafka_err2str(e));
    else offsets_out(parts, topic, n, out);
    rd_kafka_topic_partition_list_destroy(parts);
    return e ? -1 : 0;
}

int cluster_committed(cluster_client_t *c, const char *topic, int n, int timeout_ms,
                      cluster_offset_t *out, char *err, size_t errlen)
{
    return offsets_request(c, topic, n, RD_KAFKA_OFFSET_INVALID, rd_kafka_committed, timeout_ms, out, err,
                           errlen);
}

int cluster_offsets_for_time(cluster_client_t *c, const char *topic, int n, int64_t time_ms,
                             int timeout_ms, cluster_offset_t *out, char *err, size_t errlen)
{
    return offsets_request(c, topic, n, time_ms, rd_kafka_offsets_for_times, timeout_ms, out, err, errlen);
}

int cluster_read_start(cluster_client_t *c, const char *topic, int partition, int64_t offset,
                       char *err, size_t errlen)
{
    rd_kafka_topic_partition_list_t *at = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(at, topic, partition)->offset = offset;
    rd_kafka_resp_err_t e = rd_kafka_assign(c->rk, at);
    rd_kafka_topic_partition_list_destroy(at);
    if (e) {
        snprintf(err, errlen, "%s", rd_kafka_err2str(e));
        return -1;
    }
    c->read_topic = topic;
    c->read_partition = partition;
    c->read_from = offset;
    return 0;
}

int cluster_read_next(cluster_client_t *c, int timeout_ms, int64_t *offset, int64_t *timestamp_ms,
                      char *err, size_t errlen)
{
    rd_kafka_message_t *msg = rd_kafka_consumer_poll(c->rk, timeout_ms);
    if (!msg) return 0;
    if (msg->err) {
        snprintf(err, errlen, "%s", rd_kafka_message_errstr(msg));
        rd_kafka_message_destroy(msg);
        return -1;
    }
    /* Messages from an earlier assignment are discarded by librdkafka; the
     * checks keep that from being an assumption. */
    bool ours = msg->partition == c->read_partition && msg->offset >= c->read_from &&
                strcmp(rd_kafka_topic_name(msg->rkt), c->read_topic) == 0;
    *offset = msg->offset;
    *timestamp_ms = rd_kafka_message_timestamp(msg, NULL);
    rd_kafka_message_destroy(msg);
    return ours ? 1 : 0;
}

void cluster_read_stop(cluster_client_t *c)
{
    rd_kafka_assign(c->rk, NULL);
    c->read_topic = NULL;
}

const char *cluster_offset_text(int64_t offset, char *buf, size_t len)
{
    if (offset < 0) snprintf(buf, len, "none");
    else snprintf(buf, len, "%" PRId64, offset);
    return buf;
}
