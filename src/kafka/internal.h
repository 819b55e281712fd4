/* kafka/internal — what the modules of src/kafka/ share in librdkafka's own
 * types. Included only by the .c files of src/kafka/: the public headers of src/kafka/
 * speak in topic names, partition numbers, offsets and error strings, so no
 * other part of the service sees librdkafka (DESIGN.md: Architecture). */
#ifndef STORAGE_KAFKA_INTERNAL_H
#define STORAGE_KAFKA_INTERNAL_H

#include <librdkafka/rdkafka.h>
#include <stdbool.h>
#include <stddef.h>

#include "kafka/cluster.h"
#include "settings.h"

/* ---- conf.c: the one configuration of every handle ---------------------- */

/* The librdkafka configuration of pipeline `id`'s consumer: its group, the
 * built-in settings and the STORAGE_RDKAFKA_ pass-through (TLS, SASL, ...),
 * so that every handle reaches the cluster and the group exactly as the
 * service does. Returns a configuration the caller owns, or NULL with the
 * reason in `err` (naming the variable at fault). */
rd_kafka_conf_t *kafka_conf_new(const settings_t *s, pipeline_id_t id, char *err, size_t errlen);

typedef void (*kafka_rebalance_cb_t)(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                                     rd_kafka_topic_partition_list_t *parts, void *opaque);

/* A consumer handle configured for pipeline `id` (kafka_conf_new). With a
 * rebalance callback it is a group member: `opaque` is the callback's, and
 * its events are served by the consumer poll. Without one it never joins a
 * group. Returns NULL with the reason in `err`: an invalid setting
 * (*invalid_setting true), or "cannot create `what`: <librdkafka's reason,
 * redacted>". */
/* With `stats` too (NULL: none), librdkafka's statistics are given to it
 * every statistics.interval.ms (1000 unless the operator set it). */
typedef int (*kafka_stats_cb_t)(rd_kafka_t *rk, char *json, size_t len, void *opaque);
rd_kafka_t *kafka_handle_new(const settings_t *s, pipeline_id_t id, kafka_rebalance_cb_t rebalance,
                             kafka_stats_cb_t stats,
                             void *opaque, const char *what, bool *invalid_setting, char *err,
                             size_t errlen);

/* ---- group.c: what every member of a group does ------------------------- */

/* What a rebalance callback was called for. */
typedef struct {
    /* librdkafka 2.0.2 may still run a callback queued before the close
     * once the close has ended the group logic (which then reports no
     * protocol, and has already given up every partition): nothing is left
     * to assign or unassign, or to commit. */
    bool closed;
    bool assign;      /* partitions given; else taken */
    bool cooperative; /* incremental (cooperative-sticky) rather than eager */
    bool lost;        /* taken without an orderly revocation (session lost) */
} kafka_rebalance_t;

kafka_rebalance_t kafka_rebalance_kind(rd_kafka_t *rk, rd_kafka_resp_err_t err);

/* Take or give up `parts` as the protocol wants (incremental or whole);
 * a failure is logged under `log_name`. Not for a closed callback. */
void kafka_rebalance_apply(rd_kafka_t *rk, const kafka_rebalance_t *r,
                           rd_kafka_topic_partition_list_t *parts, const char *log_name);

/* Commit `offsets` on `rk` and wait for the answer at most `timeout_ms`
 * (a synchronous commit can block for minutes with every broker down; a
 * commit that never answers is a failure). Returns 0, or -1 with the reason
 * in `err` and the error in *cause (the first partition's that failed;
 * RD_KAFKA_RESP_ERR__TIMED_OUT when no answer came). */
int kafka_commit_offsets(rd_kafka_t *rk, const rd_kafka_topic_partition_list_t *offsets,
                         int timeout_ms, rd_kafka_resp_err_t *cause, char *err, size_t errlen);

/* ---- cluster.c ------------------------------------------------------------ */

/* A cluster client is a view of one handle: its own (cluster_client_new)
 * or a member's (member_cluster). */
struct cluster_client {
    rd_kafka_t *rk;
    /* The partition being read (cluster_read_start). */
    const char *read_topic;
    int read_partition;
    int64_t read_from;
};

/* Look `topic` up in the metadata of all topics on `rk` (see cluster.h).
 * Returns 1 when it exists (*partitions: its partition count; *leaderless:
 * partitions without a leader or reported with an error; either pointer may
 * be NULL), 0 when it does not, or -1 with the reason in `err` when the
 * cluster did not answer within `timeout_ms`. */
int kafka_topic_lookup(rd_kafka_t *rk, const char *topic, int timeout_ms, int *partitions,
                       int *leaderless, char *err, size_t errlen) __attribute__((warn_unused_result));

#endif
