#include "kafka/member.h"

#include <stdlib.h>
#include <string.h>

#include "kafka/internal.h"
#include "log.h"

struct member {
    struct cluster_client view; /* the member's handle, for member_cluster */
    const char *log_name;
    const topic_list_t *topics; /* joined on; NULL before member_join */
    int owned;                  /* partitions of the topics assigned to us now */
    int assignments;   /* assignments received, empty ones included */
};

/* Track the assignment and pause what we are given: the member reads no
 * message, it only holds the partitions. Runs inside member_serve and the
 * close. */
static void on_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque)
{
    member_t *m = opaque;
    kafka_rebalance_t r = kafka_rebalance_kind(rk, err);
    int mine = 0;

    for (int i = 0; i < parts->cnt; i++) mine += topic_list_index(m->topics, parts->elems[i].topic) >= 0;
    if (r.closed) {
        m->owned = 0;
        LOG_DEBUG(m->log_name, "rebalance callback after the close: %d partition(s)", parts->cnt);
        return;
    }
    kafka_rebalance_apply(rk, &r, parts, m->log_name);
    if (r.assign) {
        m->assignments++;
        m->owned = r.cooperative ? m->owned + mine : mine;
        rd_kafka_pause_partitions(rk, parts);
        LOG_DEBUG_F(m->log_name, LOG_FIELDS(LF_INT("count", parts->cnt), LF_INT("owned", m->owned)),
                    "partitions assigned");
    } else {
        m->owned = r.cooperative ? m->owned - mine : 0;
        LOG_DEBUG_F(m->log_name, LOG_FIELDS(LF_INT("count", parts->cnt), LF_INT("owned", m->owned)),
                    "partitions revoked");
    }
}

member_t *member_new(const settings_t *s, pipeline_id_t id, const char *log_name,
                     bool *invalid_setting, char *err, size_t errlen)
{
    member_t *m = calloc(1, sizeof *m);
    if (!m) abort();
    m->log_name = log_name;
    m->view.rk = kafka_handle_new(s, id, on_rebalance, NULL, m, "the Kafka consumer", invalid_setting, err,
                                  errlen);
    if (!m->view.rk) {
        free(m);
        return NULL;
    }
    return m;
}

cluster_client_t *member_cluster(member_t *m) { return &m->view; }

int member_join(member_t *m, const topic_list_t *topics, char *err, size_t errlen)
{
    rd_kafka_topic_partition_list_t *sub = rd_kafka_topic_partition_list_new(topics->count);
    for (int t = 0; t < topics->count; t++)
        rd_kafka_topic_partition_list_add(sub, topics->name[t], RD_KAFKA_PARTITION_UA);
    m->topics = topics;
    rd_kafka_resp_err_t e = rd_kafka_subscribe(m->view.rk, sub);
    rd_kafka_topic_partition_list_destroy(sub);
    if (e) {
        m->topics = NULL;
        snprintf(err, errlen, "%s", rd_kafka_err2str(e));
        return -1;
    }
    return 0;
}

void member_serve(member_t *m, int ms)
{
    /* Every partition is paused: a message cannot arrive, but is released
     * if it does. */
    rd_kafka_message_t *msg = rd_kafka_consumer_poll(m->view.rk, ms);
    if (!msg) return;
    if (msg->err) LOG_DEBUG(m->log_name, "consumer: %s", rd_kafka_message_errstr(msg));
    rd_kafka_message_destroy(msg);
}

int member_owned(const member_t *m) { return m->owned; }

int member_assignments(const member_t *m) { return m->assignments; }

int member_commit(member_t *m, const topic_list_t *topics, const int *n, int64_t *const *offsets, int timeout_ms,
                  char *err, size_t errlen)
{
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(0);
    rd_kafka_resp_err_t cause;
    for (int t = 0; t < topics->count; t++)
        for (int p = 0; p < n[t]; p++)
            rd_kafka_topic_partition_list_add(list, topics->name[t], p)->offset = offsets[t][p];
    int rc = kafka_commit_offsets(m->view.rk, list, timeout_ms, &cause, err, errlen);
    rd_kafka_topic_partition_list_destroy(list);
    return rc;
}

void member_close(member_t *m)
{
    if (!m) return;
    if (m->topics) {
        rd_kafka_resp_err_t e = rd_kafka_consumer_close(m->view.rk);
        if (e) LOG_WARN(m->log_name, "consumer close: %s", rd_kafka_err2str(e));
        rd_kafka_destroy(m->view.rk);
    } else {
        /* Never subscribed: closing would only wait for a group it never joined. */
        rd_kafka_destroy_flags(m->view.rk, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
    }
    free(m);
}
