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
    memset(out, 0, sizeof *out);
    return consumer_topic_lookup(rk, topic, timeout_ms, &out->partitions, &out->leaderless, err,
                                 errlen);
}

const char *cluster_offset_text(int64_t offset, char *buf, size_t len)
{
    if (offset < 0) snprintf(buf, len, "none");
    else snprintf(buf, len, "%" PRId64, offset);
    return buf;
}
