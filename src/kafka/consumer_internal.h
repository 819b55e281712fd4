/* consumer_internal — the state of a pipeline's consumer, which its three
 * files share: consumer.c (create, poll, commit, rebalances, close),
 * consumer_start.c (where newly assigned partitions start) and
 * consumer_fetch.c (a missing topic, a stalled fetch, waking the fetcher).
 * In librdkafka's types, like kafka/internal.h: included by those three
 * files alone. */
#ifndef STORAGE_KAFKA_CONSUMER_INTERNAL_H
#define STORAGE_KAFKA_CONSUMER_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kafka/consumer.h"
#include "kafka/internal.h"

/* A subscribed topic the cluster does not know fails its pipeline only when
 * it is still unknown this long after it was first reported: deployments
 * create topics moments after starting the services, and a broker that has
 * just created one may not know it yet. Long enough for that, short enough
 * that a pipeline pointed at a misspelt topic fails visibly within a
 * minute. Meanwhile the cluster is asked again every
 * CONSUMER_MISSING_TOPIC_RECHECK_MS: librdkafka reports a missing topic
 * once, not again while it stays missing, and not when it appears. */
#define CONSUMER_MISSING_TOPIC_GRACE_MS 30000
#define CONSUMER_MISSING_TOPIC_RECHECK_MS 2000
#define CONSUMER_METADATA_TIMEOUT_MS 5000

/* A partition of a subscribed topic: `next`, the offset after the last
 * record taken, or where its assignment started (-1: unknown, or not
 * owned); `stall_since`, since when its leader has held records past this
 * member's position while polls found the queue empty (0: not suspected;
 * check_stalled_fetch; any record of the partition and any rebalance clear
 * it). */
struct consumer_part {
    int64_t next, stall_since;
    /* A record of it was taken since the fetcher was last woken (and since
     * its assignment): only then may wake_fetcher seek it. */
    bool taken;
};

struct consumer {
    const settings_t *settings;
    const pipeline_def_t *def;
    bool reads_headers; /* a field of def's takes the record's headers */
    const char *topic;  /* the pipeline's topics as one text, for messages */
    char group[512];
    rd_kafka_t *rk;
    rd_kafka_topic_partition_list_t *owned; /* current assignment */
    bool ever_assigned; /* a first assignment (even an empty one) arrived */
    /* Offsets whose rows are committed in the database but which Kafka has
     * not yet taken (next offset to read, per owned partition). */
    rd_kafka_topic_partition_list_t *pending;
    /* Per owned partition, the offset after the last record whose rows the
     * database committed (from the assignment's start on): the committed
     * position of storage_consumer_committed_lag. */
    rd_kafka_topic_partition_list_t *stored;
    /* Where the probes read this consumer's state (consumer_observe; NULL:
     * nobody): partitions owned, brokers connected. */
    atomic_int_fast64_t *owned_count, *brokers_up;
    /* The member is between generations: commits are held, not sent. A
     * commit sent now would reach the coordinator after this member's
     * JoinGroup with the old generation id; librdkafka answers the
     * ILLEGAL_GENERATION by dropping its assignment and rejoining, which
     * starts the next rebalance, and a busy group never settles. Held from
     * the first refusal (or a revocation) until the assignment that ends the
     * rebalance; `rejoin_follows` marks the cooperative assignment that
     * comes right after a revocation, which is followed by a rejoin. */
    bool hold;
    bool rejoin_follows;
    /* Inside consumer_close: a commit in the revoke callback gets only part
     * of the close's share of the shutdown budget (SETTINGS_STOP_CLOSE_MS);
     * the stop's own commit already had a full commit timeout. */
    bool closing;
    int64_t hold_since_ms;
    /* The pipeline failed because a topic of it cannot be read (missing,
     * or not authorized): librdkafka sends no JoinGroup while the
     * subscription matches no topic, which consumer_close relies on. */
    bool topic_unusable;
    /* Each subscribed topic, in the settings' order (topic_count of them). */
    struct consumer_topic {
        const char *name;
        /* The cluster said the topic does not exist at this time (0: it
         * exists as far as we know); asked again at check_ms. */
        int64_t missing_since_ms, check_ms;
        /* Per partition number (parts_fit), parts_n of them. */
        struct consumer_part *parts;
        int parts_n;
    } topics[PIPELINE_MAX_TOPICS];
    int topic_count;
    /* The topic of the last record taken: a batch holds runs of one
     * partition's records, so the list is searched once per run. */
    struct consumer_topic *last_topic;
    int64_t stall_check_ms;
    /* Bytes of records taken since the fetcher was last woken, and how many
     * make a wake-up worth it (0: never; wake_fetcher). */
    int64_t taken_bytes, wake_bytes;
    consumer_positions_t positions;
    /* The database's positions could not be read for an assignment: the
     * pipeline fails at the next poll, and nothing is delivered. */
    bool positions_failed;
    char positions_error[1200];
    /* Two polls may be alive at once: the batch being written and the next
     * one, taken and decoded meanwhile. */
    struct {
        rd_kafka_message_t **messages;
        record_t *records;
        size_t count, capacity;
        bool busy;
    } slot[2];
};

/* The state of partition `partition` of `topic` (NULL: not a subscribed
 * topic, or a partition never assigned). */
struct consumer_part *part_of(consumer_t *c, const char *topic, int32_t partition);

/* The subscribed topic called `topic`, or NULL. */
struct consumer_topic *topic_of(consumer_t *c, const char *topic);

/* ---- consumer_start.c: where newly assigned partitions start ------------ */

/* Start each newly assigned partition of `parts` at the database's position
 * (see consumer_start.c); called by the rebalance callback. On a failure to
 * read or record the positions, sets positions_failed and positions_error. */
void start_at_database_positions(consumer_t *c, rd_kafka_t *rk, rd_kafka_topic_partition_list_t *parts);

/* ---- consumer_fetch.c: watching the fetch, from the consumer poll ------- */

/* Ask again whether each topic reported missing exists; -1 with the reason
 * in `err` once one is still missing after the grace. */
int check_missing_topic(consumer_t *c, char *err, size_t errlen);

/* This member's position in each partition of `at` (a copy of `owned`). */
void positions_of(consumer_t *c, rd_kafka_topic_partition_list_t *at);

/* -1 with the reason in `err` when a partition's fetch has stalled for
 * STORAGE_FETCH_STALL_SECONDS. */
int check_stalled_fetch(consumer_t *c, char *err, size_t errlen);

/* Wake a fetcher that waits because the queue was full. */
void wake_fetcher(consumer_t *c);

#endif
