/* cluster — what the operator commands ask the Kafka cluster, without ever
 * changing it by asking (DESIGN.md: Operations).
 *
 * A client is a consumer handle configured exactly like a pipeline's
 * consumer (its group id, the STORAGE_RDKAFKA_ pass-through) that never
 * subscribes: it reads metadata, watermarks and the group's committed
 * offsets without joining the group.
 *
 * A metadata request that names a topic makes a broker with topic
 * auto-creation on (the test cluster, many development clusters) create it,
 * with the broker's default partition count: a `verify` that asked "is the
 * reviews topic there?" would create it and then report it healthy. So a
 * topic is looked up in the metadata of all topics, and it is named to the
 * cluster (watermarks, offsets, subscriptions) only once it is known to
 * exist.
 *
 * Errors come back as text: a function that fails puts the cluster's reason
 * in `err`, and the caller says what it was doing. */
#ifndef STORAGE_KAFKA_CLUSTER_H
#define STORAGE_KAFKA_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include "settings.h"

typedef struct cluster_client cluster_client_t;

typedef struct {
    int partitions; /* 0 when the topic does not exist */
    int leaderless; /* partitions without a leader, or reported with an error */
} cluster_topic_t;

/* One partition's offset in an answer. */
typedef struct {
    int64_t offset; /* negative: none (never committed; no message at or after the time) */
    char error[128]; /* "" or why this partition's offset could not be read */
} cluster_offset_t;

/* A client for pipeline `id`'s cluster and group. Returns a client the
 * caller releases with cluster_client_destroy, or NULL with the reason in
 * `err`. */
cluster_client_t *cluster_client_new(const settings_t *s, pipeline_id_t id, char *err, size_t errlen);

/* Destroy a client of cluster_client_new (NULL is ignored). It never joined
 * the group, so there is no membership to leave and nothing to commit. */
void cluster_client_destroy(cluster_client_t *c);

/* Look `topic` up in the metadata of all topics (which creates nothing).
 * Returns 1 and fills *out when it exists, 0 when it does not (out->partitions
 * is 0), or -1 with the reason in `err` when the cluster did not answer
 * within `timeout_ms`. */
int cluster_topic_lookup(cluster_client_t *c, const char *topic, int timeout_ms, cluster_topic_t *out,
                         char *err, size_t errlen) __attribute__((warn_unused_result));

/* The log start and high watermark of one partition, asked of its leader.
 * Returns 0, or -1 with the reason in `err`. */
int cluster_watermarks(cluster_client_t *c, const char *topic, int partition, int timeout_ms,
                       int64_t *lo, int64_t *hi, char *err, size_t errlen);

/* The offsets the client's group committed on partitions 0..n-1 of
 * `topic`, without joining the group (an OffsetFetch). Returns 0 with
 * out[p] filled, or -1 with the reason in `err`. */
int cluster_committed(cluster_client_t *c, const char *topic, int n, int timeout_ms,
                      cluster_offset_t *out, char *err, size_t errlen);

/* Per partition 0..n-1 of `topic`, the offset of the first message whose
 * timestamp is at or after `time_ms` (Kafka's offsets-for-times; negative
 * when the broker found none). Returns 0 with out[p] filled, or -1 with the
 * reason in `err`. */
int cluster_offsets_for_time(cluster_client_t *c, const char *topic, int n, int64_t time_ms,
                             int timeout_ms, cluster_offset_t *out, char *err, size_t errlen);

/* Read partition `partition` of `topic` from `offset` on a client of
 * cluster_client_new, until cluster_read_stop. Returns 0, or -1 with the
 * reason in `err`. */
int cluster_read_start(cluster_client_t *c, const char *topic, int partition, int64_t offset,
                       char *err, size_t errlen);

/* Wait up to `timeout_ms` for the next message of the partition being read
 * (at or after the offset it was started at). Returns 1 with its offset and
 * timestamp (-1: none) in *offset and *timestamp_ms, 0 when none came, or
 * -1 with the consumer error in `err` (reading goes on). */
int cluster_read_next(cluster_client_t *c, int timeout_ms, int64_t *offset, int64_t *timestamp_ms,
                      char *err, size_t errlen);

/* Stop reading. */
void cluster_read_stop(cluster_client_t *c);

/* "none" for an offset that was never committed, else the number, in buf. */
const char *cluster_offset_text(int64_t offset, char *buf, size_t len);

#endif
