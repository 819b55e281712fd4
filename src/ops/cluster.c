#include "ops/cluster.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "kafka/consumer.h"
#include "log.h"

rd_kafka_t *cluster_client_new(const settings_t *s, pipeline_id_t id, char *err, size_t errlen)
{
    char why[512];
    rd_kafka_conf_t *conf = consumer_conf_new(s, id, err, errlen);
    if (!conf) return NULL;
    /* rd_kafka_new takes ownership of conf on success only. */
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, why, sizeof why);
    if (!rk) {
        rd_kafka_conf_destroy(conf);
        log_redact(why, sizeof why); /* may quote a secret property's value */
        snprintf(err, errlen, "cannot create a Kafka client: %s", why);
        return NULL;
    }
    return rk;
}

void cluster_client_destroy(rd_kafka_t *rk)
{
    if (!rk) return;
    /* Never subscribed: closing would only wait for a group it never joined. */
    rd_kafka_destroy_flags(rk, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
}

int cluster_topic_lookup(rd_kafka_t *rk, const char *topic, int timeout_ms, cluster_topic_t *out,
                         char *err, size_t errlen)
{
    const struct rd_kafka_metadata *md = NULL;
    /* all_topics = 1: a request naming the topic would create it on a broker
     * with auto-creation on. */
    rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 1, NULL, &md, timeout_ms);
    memset(out, 0, sizeof *out);
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
        out->partitions = t->partition_cnt;
        for (int p = 0; p < t->partition_cnt; p++)
            if (t->partitions[p].err || t->partitions[p].leader < 0) out->leaderless++;
        break;
    }
    rd_kafka_metadata_destroy(md);
    return found;
}

const char *cluster_offset_text(int64_t offset, char *buf, size_t len)
{
    if (offset < 0) snprintf(buf, len, "none");
    else snprintf(buf, len, "%" PRId64, offset);
    return buf;
}
