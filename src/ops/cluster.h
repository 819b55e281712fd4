/* cluster — what the operator commands ask the Kafka cluster, without ever
 * changing it by asking.
 *
 * A metadata request that names a topic makes a broker with topic
 * auto-creation on (the test cluster, many development clusters) create it,
 * with the broker's default partition count: a `verify` that asked "is the
 * reviews topic there?" would create it and then report it healthy. So a
 * topic is looked up in the metadata of all topics, and it is named to the
 * cluster (watermarks, offsets, subscriptions) only once it is known to
 * exist. */
#ifndef STORAGE_OPS_CLUSTER_H
#define STORAGE_OPS_CLUSTER_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>

#include "settings.h"

typedef struct {
    int partitions; /* 0 when the topic does not exist */
    int leaderless; /* partitions without a leader, or reported with an error */
} cluster_topic_t;

/* A consumer handle configured exactly like pipeline `id`'s consumer (its
 * group id, the STORAGE_RDKAFKA_ pass-through) that never subscribes: it
 * reads metadata, watermarks and the group's committed offsets without
 * joining the group. Returns a handle the caller releases with
 * cluster_client_destroy, or NULL with the reason in `err`. */
rd_kafka_t *cluster_client_new(const settings_t *s, pipeline_id_t id, char *err, size_t errlen);

/* Destroy a handle of cluster_client_new (NULL is ignored). It never joined
 * the group, so there is no membership to leave and nothing to commit. */
void cluster_client_destroy(rd_kafka_t *rk);

/* Look `topic` up in the metadata of all topics (which creates nothing).
 * Returns 1 and fills *out when it exists, 0 when it does not (out->partitions
 * is 0), or -1 with the reason in `err` when the cluster did not answer
 * within `timeout_ms`. */
int cluster_topic_lookup(rd_kafka_t *rk, const char *topic, int timeout_ms, cluster_topic_t *out,
                         char *err, size_t errlen) __attribute__((warn_unused_result));

/* "none" for an offset that was never committed, else the number, in buf. */
const char *cluster_offset_text(int64_t offset, char *buf, size_t len);

#endif
