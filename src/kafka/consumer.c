#include "kafka/consumer.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/clock.h"
#include "kafka/internal.h"
#include "log.h"

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
/* The stalled-fetch check (check_stalled_fetch) asks the leaders at most
 * every sixth of STORAGE_FETCH_STALL_SECONDS, within these bounds, and
 * waits this long for their answer: an unanswered question proves nothing. */
#define CONSUMER_STALL_CHECK_MIN_MS 500
#define CONSUMER_STALL_CHECK_MAX_MS 5000
#define CONSUMER_STALL_QUERY_TIMEOUT_MS 1000
/* The fetcher is woken (wake_fetcher) when a poll finds the queue empty
 * after records of at least this share of queued.max.messages.kbytes were
 * taken since it was last woken. */
#define CONSUMER_WAKE_SHARE_DIVISOR 2

struct consumer {
    const settings_t *settings;
    const pipeline_def_t *def;
    const char *topic;
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
    /* The cluster said the topic does not exist at this time (0: it exists
     * as far as we know); asked again at topic_check_ms. */
    int64_t topic_missing_since_ms, topic_check_ms;
    /* The pipeline failed because its topic cannot be read (missing, or not
     * authorized): librdkafka sends no JoinGroup while the subscription
     * matches no topic, which consumer_close relies on. */
    bool topic_unusable;
    /* Per partition number (parts_fit): `next`, the offset after the last
     * record taken, or where its assignment started (-1: unknown, or not
     * owned); `stall_since`, since when its leader has held records past
     * this member's position while polls found the queue empty (0: not
     * suspected; check_stalled_fetch; any record of the partition and any
     * rebalance clear it). */
    struct {
        int64_t next, stall_since;
        /* A record of it was taken since the fetcher was last woken (and
         * since its assignment): only then may wake_fetcher seek it. */
        bool taken;
    } *parts;
    int parts_n;
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

static int send_commit(consumer_t *c, const rd_kafka_topic_partition_list_t *offsets, int timeout_ms,
                       char *err, size_t errlen);

/* Raise the committed position of a partition to `next`. */
static void set_stored(consumer_t *c, const char *topic, int32_t partition, int64_t next)
{
    rd_kafka_topic_partition_t *p = rd_kafka_topic_partition_list_find(c->stored, topic, partition);
    if (!p) {
        p = rd_kafka_topic_partition_list_add(c->stored, topic, partition);
        p->offset = next;
    } else if (next > p->offset) {
        p->offset = next;
    }
}

static void drop_pending(consumer_t *c, const rd_kafka_topic_partition_list_t *parts)
{
    for (int i = 0; i < parts->cnt; i++)
        rd_kafka_topic_partition_list_del(c->pending, parts->elems[i].topic,
                                          parts->elems[i].partition);
}

/* Before giving partitions up in an orderly rebalance, commit what was
 * stored for them: the generation that revokes them is still current, and
 * the next owner then starts where this member's rows end instead of
 * redelivering them. */
static void commit_revoked(consumer_t *c, const rd_kafka_topic_partition_list_t *parts)
{
    rd_kafka_topic_partition_list_t *offsets = rd_kafka_topic_partition_list_new(parts->cnt);
    for (int i = 0; i < parts->cnt; i++) {
        rd_kafka_topic_partition_t *p =
            rd_kafka_topic_partition_list_find(c->pending, parts->elems[i].topic,
                                               parts->elems[i].partition);
        if (p) rd_kafka_topic_partition_list_add(offsets, p->topic, p->partition)->offset = p->offset;
    }
    if (offsets->cnt > 0) {
        char err[512];
        int timeout = c->closing ? SETTINGS_STOP_CLOSE_MS / 2 : c->settings->commit_timeout_ms;
        if (send_commit(c, offsets, timeout, err, sizeof err) == 0)
            LOG_INFO(c->def->name, "offsets of %d revoked partition(s) committed before giving them up",
                     offsets->cnt);
        else
            LOG_WARN(c->def->name, "offsets of %d revoked partition(s) not committed (the next owner redelivers those records; they are stored and will be skipped): %s",
                     offsets->cnt, err);
    }
    rd_kafka_topic_partition_list_destroy(offsets);
}

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
static void start_at_database_positions(consumer_t *c, rd_kafka_t *rk, rd_kafka_topic_partition_list_t *parts)
{
    int n = 0;
    for (int i = 0; i < parts->cnt; i++)
        if (parts->elems[i].partition + 1 > n) n = parts->elems[i].partition + 1;
    if (n == 0) return;
    int64_t *next = malloc((size_t)n * sizeof *next), *starts = malloc((size_t)n * sizeof *starts);
    char err[1024];
    bool record = false;
    if (!next || !starts) abort();
    for (int p = 0; p < n; p++) starts[p] = -1;
    if (c->positions.read(c->positions.ctx, c->topic, n, next, err, sizeof err) != 0) {
        snprintf(c->positions_error, sizeof c->positions_error,
                 "cannot read where the assigned partitions start from the database: %s", err);
        c->positions_failed = true;
        goto out;
    }
    /* Kafka's copy, to tell the operator how the two records compare. */
    rd_kafka_topic_partition_list_t *committed = rd_kafka_topic_partition_list_copy(parts);
    if (rd_kafka_committed(rk, committed, CONSUMER_METADATA_TIMEOUT_MS) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        rd_kafka_topic_partition_list_destroy(committed);
        committed = NULL;
    }
    for (int i = 0; i < parts->cnt; i++) {
        rd_kafka_topic_partition_t *e = &parts->elems[i];
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
            LOG_WARN(c->def->name, "%s [%d]: the database's position %lld is beyond the partition's end %lld (was the topic recreated?): STORAGE_AUTO_OFFSET_RESET decides",
                     e->topic, e->partition, (long long)at, (long long)hi);
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
    if (committed) rd_kafka_topic_partition_list_destroy(committed);
    if (record && c->positions.record &&
        c->positions.record(c->positions.ctx, c->topic, n, starts, err, sizeof err) != 0) {
        snprintf(c->positions_error, sizeof c->positions_error,
                 "cannot record where the assigned partitions start in the database: %s", err);
        c->positions_failed = true;
    }
out:
    free(next);
    free(starts);
}

/* Make room for the partitions of a rebalance; a new entry knows nothing. */
static void parts_fit(consumer_t *c, const rd_kafka_topic_partition_list_t *parts)
{
    int n = c->parts_n;
    for (int i = 0; i < parts->cnt; i++)
        if (parts->elems[i].partition + 1 > n) n = parts->elems[i].partition + 1;
    if (n == c->parts_n) return;
    c->parts = realloc(c->parts, (size_t)n * sizeof *c->parts);
    if (!c->parts) abort();
    for (int p = c->parts_n; p < n; p++) {
        c->parts[p].next = -1;
        c->parts[p].stall_since = 0;
        c->parts[p].taken = false;
    }
    c->parts_n = n;
}

/* A partition assigned (its fetcher starts at `next`; -1: unknown, at the
 * committed offset) or revoked (-1): nothing of it taken yet. */
static void part_restart(consumer_t *c, int32_t partition, int64_t next)
{
    if (partition < 0) return;
    c->parts[partition].next = next >= 0 ? next : -1;
    c->parts[partition].taken = false;
}

/* Track the assignment: the rebalance callback runs on the worker thread
 * inside consumer_poll (also the poll that takes the next batch while one
 * is written: that batch's offsets are not pending yet, so only stored rows
 * are ever committed here). */
static void on_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque)
{
    consumer_t *c = opaque;
    kafka_rebalance_t r = kafka_rebalance_kind(rk, err);

    if (r.closed) {
        /* Every partition is already given up: drop them, commit nothing. */
        for (int i = 0; i < parts->cnt; i++)
            rd_kafka_topic_partition_list_del(c->owned, parts->elems[i].topic,
                                              parts->elems[i].partition);
        drop_pending(c, parts);
        LOG_DEBUG(c->def->name, "rebalance callback after the close: %d partition(s)", parts->cnt);
        return;
    }
    parts_fit(c, parts);
    if (r.assign) {
        if (c->positions.read && !c->positions_failed) start_at_database_positions(c, rk, parts);
        for (int i = 0; i < parts->cnt; i++) {
            if (!rd_kafka_topic_partition_list_find(c->owned, parts->elems[i].topic,
                                                    parts->elems[i].partition))
                rd_kafka_topic_partition_list_add(c->owned, parts->elems[i].topic,
                                                  parts->elems[i].partition);
            /* Where reading starts is what the database holds (or the
             * first offset retention left). */
            if (parts->elems[i].offset >= 0) set_stored(c, parts->elems[i].topic, parts->elems[i].partition,
                                                        parts->elems[i].offset);
            part_restart(c, parts->elems[i].partition, parts->elems[i].offset);
        }
        c->ever_assigned = true;
        c->topic_missing_since_ms = 0; /* it exists: the group assigns it */
        /* The rebalance is over for this member, unless this assignment
         * follows a cooperative revocation: librdkafka rejoins right after
         * it to hand the revoked partitions over. */
        c->hold = c->rejoin_follows;
        c->rejoin_follows = false;
        if (c->hold) c->hold_since_ms = clock_now_ms();
        LOG_INFO_F(c->def->name, LOG_FIELDS(LF_INT("count", parts->cnt), LF_INT("owned", c->owned->cnt)),
                   "partitions assigned");
    } else {
        if (!r.lost) commit_revoked(c, parts);
        for (int i = 0; i < parts->cnt; i++)
            rd_kafka_topic_partition_list_del(c->owned, parts->elems[i].topic,
                                              parts->elems[i].partition);
        /* Never commit for a partition given up: the next owner's commits
         * must not be overwritten by ours. */
        drop_pending(c, parts);
        for (int i = 0; i < parts->cnt; i++) {
            rd_kafka_topic_partition_list_del(c->stored, parts->elems[i].topic, parts->elems[i].partition);
            part_restart(c, parts->elems[i].partition, -1);
        }
        if (!c->hold) c->hold_since_ms = clock_now_ms();
        c->hold = true;
        c->rejoin_follows = r.cooperative && !r.lost;
        LOG_INFO_F(c->def->name,
                   LOG_FIELDS(LF_INT("count", parts->cnt), LF_INT("owned", c->owned->cnt),
                              LF_STR("reason", rd_kafka_err2str(err))),
                   "partitions revoked");
    }
    /* Any rebalance clears every suspicion of a stalled fetch. */
    for (int p = 0; p < c->parts_n; p++) c->parts[p].stall_since = 0;
    kafka_rebalance_apply(rk, &r, parts, c->def->name);
    if (c->owned_count) atomic_store_explicit(c->owned_count, c->owned->cnt, memory_order_relaxed);
}

/* Everything but the librdkafka handle. */
static void free_consumer(consumer_t *c)
{
    rd_kafka_topic_partition_list_destroy(c->owned);
    rd_kafka_topic_partition_list_destroy(c->pending);
    rd_kafka_topic_partition_list_destroy(c->stored);
    free(c->parts);
    for (int k = 0; k < 2; k++) {
        free(c->slot[k].messages);
        free(c->slot[k].records);
    }
    free(c);
}

/* librdkafka's statistics (every statistics.interval.ms, served by the
 * consumer poll on the pipeline's thread): how many of the brokers the
 * cluster named (nodeid >= 0; not the bootstrap entries) are connected, for
 * /readyz (DESIGN.md: Probes and metrics). */
static int on_stats(rd_kafka_t *rk, char *json, size_t len, void *opaque)
{
    consumer_t *c = opaque;
    (void)rk;
    if (!c->brokers_up) return 0;
    json_t *root = json_loadb(json, len, 0, NULL);
    json_t *brokers = root ? json_object_get(root, "brokers") : NULL;
    const char *name;
    json_t *b;
    long long known = 0, up = 0;
    json_object_foreach(brokers, name, b) {
        if (json_integer_value(json_object_get(b, "nodeid")) < 0) continue;
        known++;
        const char *state = json_string_value(json_object_get(b, "state"));
        if (state && strcmp(state, "UP") == 0) up++;
    }
    if (known > 0) atomic_store_explicit(c->brokers_up, up, memory_order_relaxed);
    json_decref(root);
    return 0; /* librdkafka frees json */
}

void consumer_observe(consumer_t *c, atomic_int_fast64_t *owned, atomic_int_fast64_t *brokers_up)
{
    c->owned_count = owned;
    c->brokers_up = brokers_up;
}


consumer_t *consumer_new(const settings_t *s, pipeline_id_t id, const consumer_positions_t *positions,
                         char *err, size_t errlen)
{
    consumer_t *c = calloc(1, sizeof *c);
    rd_kafka_topic_partition_list_t *topics;
    rd_kafka_resp_err_t rerr;
    bool invalid;

    if (!c) abort();
    c->settings = s;
    c->def = pipeline_get(id);
    if (positions) c->positions = *positions;
    c->topic = s->topic[id];
    settings_group_id(s, id, c->group, sizeof c->group);
    c->owned = rd_kafka_topic_partition_list_new(8);
    c->pending = rd_kafka_topic_partition_list_new(8);
    c->stored = rd_kafka_topic_partition_list_new(8);
    c->rk = kafka_handle_new(s, id, on_rebalance, on_stats, c, "the Kafka consumer", &invalid, err, errlen);
    if (!c->rk) goto error;

    char kbytes[32];
    size_t kbytes_len = sizeof kbytes;
    if (rd_kafka_conf_get(rd_kafka_conf(c->rk), "queued.max.messages.kbytes", kbytes, &kbytes_len) ==
        RD_KAFKA_CONF_OK)
        c->wake_bytes = strtoll(kbytes, NULL, 10) * 1024 / CONSUMER_WAKE_SHARE_DIVISOR;

    topics = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(topics, s->topic[id], RD_KAFKA_PARTITION_UA);
    rerr = rd_kafka_subscribe(c->rk, topics);
    rd_kafka_topic_partition_list_destroy(topics);
    if (rerr) {
        snprintf(err, errlen, "cannot subscribe to %s: %s", s->topic[id], rd_kafka_err2str(rerr));
        goto error;
    }
    return c;
error:
    if (c->rk) rd_kafka_destroy(c->rk);
    free_consumer(c);
    return NULL;
}

static void slot_grow(consumer_t *c, int k, size_t max)
{
    if (max <= c->slot[k].capacity) return;
    c->slot[k].messages = realloc(c->slot[k].messages, max * sizeof *c->slot[k].messages);
    c->slot[k].records = realloc(c->slot[k].records, max * sizeof *c->slot[k].records);
    if (!c->slot[k].messages || !c->slot[k].records) abort();
    c->slot[k].capacity = max;
}

/* The subscribed topic was reported missing: ask the cluster again now and
 * then, and fail once it is still missing after the grace. Returns 0, or -1
 * with the reason in `err`. An unanswered question proves nothing (a
 * cluster that does not answer is an outage, not a missing topic): asked
 * again later. */
static int check_missing_topic(consumer_t *c, char *err, size_t errlen)
{
    int64_t now = clock_now_ms();
    if (!c->topic_missing_since_ms || now < c->topic_check_ms) return 0;
    char why[512];
    int found = kafka_topic_lookup(c->rk, c->topic, CONSUMER_METADATA_TIMEOUT_MS, NULL, NULL, why,
                                   sizeof why);
    now = clock_now_ms();
    c->topic_check_ms = now + CONSUMER_MISSING_TOPIC_RECHECK_MS;
    if (found < 0) {
        LOG_DEBUG(c->def->name, "cannot check whether topic %s exists: %s", c->topic, why);
        return 0;
    }
    if (found) {
        LOG_INFO(c->def->name, "topic %s exists now (%lld ms after it was reported missing)", c->topic,
                 (long long)(now - c->topic_missing_since_ms));
        c->topic_missing_since_ms = 0;
        return 0;
    }
    if (now - c->topic_missing_since_ms < CONSUMER_MISSING_TOPIC_GRACE_MS) return 0;
    snprintf(err, errlen, "topic %s does not exist (consumer group %s; still unknown to the Kafka cluster "
                          "%d s after it was first reported missing): check the pipeline's topic setting, "
                          "or create the topic",
             c->topic, c->group, CONSUMER_MISSING_TOPIC_GRACE_MS / 1000);
    c->topic_unusable = true;
    return -1;
}

/* This member's position in each partition of `at` (a copy of `owned`):
 * librdkafka's (rd_kafka_position: after the last record delivered, the
 * markers of a transactional producer included, which never reach us), or
 * the consumer's own (`parts[].next`) when that is further or librdkafka's is
 * unknown, as it is after wake_fetcher's seek until the next record; -1 when
 * neither is known. */
static void positions_of(consumer_t *c, rd_kafka_topic_partition_list_t *at)
{
    if (rd_kafka_position(c->rk, at))
        for (int i = 0; i < at->cnt; i++) at->elems[i].offset = -1;
    for (int i = 0; i < at->cnt; i++) {
        int p = at->elems[i].partition;
        int64_t own = p >= 0 && p < c->parts_n ? c->parts[p].next : -1;
        if (own > at->elems[i].offset) at->elems[i].offset = own;
        if (at->elems[i].offset < 0) at->elems[i].offset = -1;
    }
}

/* A partition librdkafka no longer fetches (DESIGN.md: Errors): its leader
 * holds records past this member's position, the consumer's queue is empty
 * (the poll that calls this found nothing in its whole timeout), and no
 * record of it came for STORAGE_FETCH_STALL_SECONDS. librdkafka 2.0.2 can
 * leave a partition on a broker that is no longer its leader after a burst
 * of leader changes: every Fetch is refused there and the application is
 * told nothing. Only a new consumer fetches it again: the pipeline fails,
 * and the orchestrator's restart reads on from the database's position.
 * Returns 0, or -1 with the reason in `err`. A leader that does not answer
 * proves nothing (an outage, which librdkafka rides out): every suspicion
 * starts again. So does a position below the partition's first offset:
 * retention deleted records, librdkafka reset the offset (to the first
 * record, which then comes, or with STORAGE_AUTO_OFFSET_RESET=latest to the
 * end, past records it will never deliver), and the position moves only
 * with the next record. */
static int check_stalled_fetch(consumer_t *c, char *err, size_t errlen)
{
    int stall_ms = c->settings->fetch_stall_seconds * 1000;
    int64_t now = clock_now_ms();
    if (stall_ms == 0 || c->owned->cnt == 0 || now < c->stall_check_ms) return 0;
    int every = stall_ms / 6;
    if (every < CONSUMER_STALL_CHECK_MIN_MS) every = CONSUMER_STALL_CHECK_MIN_MS;
    if (every > CONSUMER_STALL_CHECK_MAX_MS) every = CONSUMER_STALL_CHECK_MAX_MS;
    c->stall_check_ms = now + every;

    /* Three lists in the order of `owned`: this member's position, where
     * each partition ends and, when one ends past its position, where each
     * starts. */
    rd_kafka_topic_partition_list_t *at = rd_kafka_topic_partition_list_copy(c->owned);
    rd_kafka_topic_partition_list_t *ends = rd_kafka_topic_partition_list_copy(c->owned);
    rd_kafka_topic_partition_list_t *starts = NULL;
    for (int i = 0; i < ends->cnt; i++) ends->elems[i].offset = RD_KAFKA_OFFSET_END;
    rd_kafka_resp_err_t e = rd_kafka_offsets_for_times(c->rk, ends, CONSUMER_STALL_QUERY_TIMEOUT_MS);
    positions_of(c, at);
    bool behind = false;
    for (int i = 0; i < at->cnt && !e; i++) {
        rd_kafka_topic_partition_t *a = &at->elems[i];
        if (a->offset >= 0 && !ends->elems[i].err && ends->elems[i].offset > a->offset) behind = true;
    }
    if (behind) {
        starts = rd_kafka_topic_partition_list_copy(c->owned);
        for (int i = 0; i < starts->cnt; i++) starts->elems[i].offset = RD_KAFKA_OFFSET_BEGINNING;
        e = rd_kafka_offsets_for_times(c->rk, starts, CONSUMER_STALL_QUERY_TIMEOUT_MS);
    }
    int rc = 0;
    now = clock_now_ms();
    for (int i = 0; i < at->cnt && rc == 0; i++) {
        const rd_kafka_topic_partition_t *a = &at->elems[i], *end = &ends->elems[i];
        const rd_kafka_topic_partition_t *first = starts ? &starts->elems[i] : NULL;
        int p = a->partition;
        if (p < 0 || p >= c->parts_n) continue;
        int64_t pos = a->offset;
        if (e || !first || first->err || end->err || pos < 0 || end->offset <= pos || first->offset > pos) {
            c->parts[p].stall_since = 0;
            continue;
        }
        if (!c->parts[p].stall_since) {
            c->parts[p].stall_since = now;
            LOG_DEBUG(c->def->name, "%s [%d]: the leader holds %lld record(s) past position %lld and none is queued: watching for a stalled fetch",
                      a->topic, p, (long long)(end->offset - pos), (long long)pos);
        } else if (now - c->parts[p].stall_since >= stall_ms) {
            snprintf(err, errlen, "%s [%d]: no record fetched for %lld s while its leader holds %lld record(s) past this member's position %lld and nothing else is queued: librdkafka's fetcher for the partition is stuck (librdkafka 2.0.2 can leave a partition on a broker that is no longer its leader after leader changes); the pipeline fails so that a restart reads on from the database's position (STORAGE_FETCH_STALL_SECONDS=%d)",
                     a->topic, p, (long long)((now - c->parts[p].stall_since) / 1000), (long long)(end->offset - pos),
                     (long long)pos, c->settings->fetch_stall_seconds);
            rc = -1;
        }
    }
    if (e) LOG_DEBUG(c->def->name, "stalled-fetch check: the partitions' offsets or positions are unknown now: %s", rd_kafka_err2str(e));
    rd_kafka_topic_partition_list_destroy(at);
    rd_kafka_topic_partition_list_destroy(ends);
    if (starts) rd_kafka_topic_partition_list_destroy(starts);
    return rc;
}

/* Returns 1 if the message was kept in slot k, 0 if it was an event we
 * consumed, -1 on a fatal error. */
static int take(consumer_t *c, int k, rd_kafka_message_t *m, char *err, size_t errlen)
{
    if (m->err) {
        rd_kafka_resp_err_t e = m->err;
        const char *topic = m->rkt ? rd_kafka_topic_name(m->rkt) : c->topic;
        int fatal = 0;
        if (e == RD_KAFKA_RESP_ERR__FATAL) {
            char why[512];
            rd_kafka_fatal_error(c->rk, why, sizeof why);
            snprintf(err, errlen, "fatal Kafka error: %s", why);
            fatal = 1;
        } else if (e == RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED) {
            /* Reported by the coordinator lookup, the join or the offset
             * fetch: the group is unusable until an ACL changes, which no
             * retry of ours can bring about. */
            snprintf(err, errlen, "not authorized to use consumer group %s (topic %s): %s", c->group,
                     c->topic, rd_kafka_message_errstr(m));
            fatal = 1;
        } else if (e == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED) {
            snprintf(err, errlen, "not authorized to read topic %s (consumer group %s): %s", topic,
                     c->group, rd_kafka_message_errstr(m));
            c->topic_unusable = !c->ever_assigned;
            fatal = 1;
        } else if (e == RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION) {
            snprintf(err, errlen, "topic %s is not a valid topic name (consumer group %s): %s", topic,
                     c->group, rd_kafka_message_errstr(m));
            c->topic_unusable = !c->ever_assigned;
            fatal = 1;
        } else if (e == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART || e == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC) {
            /* The subscribed topic (the only one) is missing from the
             * cluster's metadata: librdkafka says so once, then waits. */
            if (!c->topic_missing_since_ms) {
                c->topic_missing_since_ms = clock_now_ms();
                c->topic_check_ms = c->topic_missing_since_ms + CONSUMER_MISSING_TOPIC_RECHECK_MS;
                LOG_WARN_F(c->def->name, LOG_FIELDS(LF_STR("topic", topic), LF_STR("group", c->group)),
                           "topic %s does not exist (consumer group %s): the pipeline fails unless it appears within %d s: %s",
                           topic, c->group, CONSUMER_MISSING_TOPIC_GRACE_MS / 1000, rd_kafka_message_errstr(m));
            }
        } else if (e == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET || e == RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE)
            /* The broker no longer has the offset we were at: retention
             * dropped messages nobody stored. Say so loudly. */
            LOG_ERROR_F(c->def->name,
                        LOG_FIELDS(LF_STR("topic", m->rkt ? rd_kafka_topic_name(m->rkt) : NULL),
                                   LF_INT("partition", m->partition)),
                        "offset reset on %s [%d]: %s — messages may have been deleted by retention before they were stored",
                        m->rkt ? rd_kafka_topic_name(m->rkt) : "?", m->partition, rd_kafka_message_errstr(m));
        else
            LOG_WARN(c->def->name, "consumer: %s", rd_kafka_message_errstr(m));
        rd_kafka_message_destroy(m);
        return fatal ? -1 : 0;
    }
    record_t *r = &c->slot[k].records[c->slot[k].count];
    r->topic = rd_kafka_topic_name(m->rkt);
    r->partition = m->partition;
    r->offset = m->offset;
    rd_kafka_timestamp_type_t tstype;
    r->timestamp_ms = rd_kafka_message_timestamp(m, &tstype);
    r->key = m->key;
    r->key_len = m->key_len;
    r->value = m->payload;
    r->value_len = m->len;
    if (r->partition >= 0 && r->partition < c->parts_n) {
        c->parts[r->partition].next = r->offset + 1;
        c->parts[r->partition].stall_since = 0;
        c->parts[r->partition].taken = true;
    }
    c->taken_bytes += (int64_t)(m->len + m->key_len);
    c->slot[k].messages[c->slot[k].count++] = m;
    return 1;
}

/* librdkafka (2.0.2, and later releases by default) stops fetching once
 * queued.max.messages.kbytes are queued, and its broker thread looks again
 * only when something wakes it or its 1 s idle wait ends: a consumer that
 * empties the queue faster than that waits out the rest of the second, and
 * a replay ran at about the bound per second whatever PostgreSQL could do
 * (DESIGN.md: Settings and budgets). A seek is the one public call that wakes
 * the broker thread (which then looks at every partition it fetches): each
 * partition a record of which was taken since the last wake-up is sought to
 * the offset after its last record taken, which is where its fetcher stands
 * when the queue is empty, so nothing is skipped; a record fetched meanwhile
 * is discarded by librdkafka (the seek starts a new fetch version) and
 * fetched again. Only such partitions: one that delivered nothing since may
 * have been moved by librdkafka itself (an offset reset after retention, a
 * topic recreated), or have its fetch start still queued inside librdkafka
 * after an assignment, which a seek's version barrier would make it drop. */
static void wake_fetcher(consumer_t *c)
{
    c->taken_bytes = 0;
    rd_kafka_topic_partition_list_t *at = rd_kafka_topic_partition_list_new(c->owned->cnt);
    for (int i = 0; i < c->owned->cnt; i++) {
        int p = c->owned->elems[i].partition;
        if (p < 0 || p >= c->parts_n || !c->parts[p].taken) continue;
        rd_kafka_topic_partition_list_add(at, c->owned->elems[i].topic, p)->offset = c->parts[p].next;
        c->parts[p].taken = false;
    }
    if (at->cnt > 0) {
        /* Asynchronous (timeout 0): it reports nothing. */
        rd_kafka_error_t *e = rd_kafka_seek_partitions(c->rk, at, 0);
        if (e) rd_kafka_error_destroy(e);
        LOG_DEBUG(c->def->name, "queue emptied after a run: woke the fetcher of %d partition(s)", at->cnt);
    }
    rd_kafka_topic_partition_list_destroy(at);
}

int consumer_poll(consumer_t *c, size_t max, int timeout_ms, record_t **records, char *err,
                  size_t errlen)
{
    int64_t deadline = clock_now_ms() + timeout_ms;
    int k = c->slot[0].busy ? 1 : 0;
    if (c->slot[k].busy) abort(); /* a caller bug: two batches not released */
    slot_grow(c, k, max);
    c->slot[k].count = 0;
    while (c->slot[k].count < max) {
        /* Block only until the first record: afterwards take what is
         * already fetched and go. */
        int wait = 0;
        if (c->slot[k].count == 0) {
            if (check_missing_topic(c, err, errlen)) return -1;
            int64_t left = deadline - clock_now_ms();
            if (left < 0) break;
            wait = (int)left;
            if (c->topic_missing_since_ms && wait > CONSUMER_MISSING_TOPIC_RECHECK_MS)
                wait = CONSUMER_MISSING_TOPIC_RECHECK_MS;
        }
        rd_kafka_message_t *m = rd_kafka_consumer_poll(c->rk, wait);
        if (c->positions_failed) {
            /* Nothing of an assignment that starts nowhere safe. */
            if (m) rd_kafka_message_destroy(m);
            snprintf(err, errlen, "%s", c->positions_error);
            consumer_release(c, c->slot[k].records);
            return -1;
        }
        if (!m) {
            if (c->slot[k].count > 0 || wait == 0) break;
            continue;
        }
        if (take(c, k, m, err, errlen) < 0) {
            consumer_release(c, c->slot[k].records);
            return -1;
        }
    }
    /* Fewer records than asked for: the queue ran empty. */
    if (c->slot[k].count < max && c->wake_bytes > 0 && c->taken_bytes >= c->wake_bytes) wake_fetcher(c);
    if (c->slot[k].count == 0) {
        /* Idle for the whole timeout: the queue is empty. Only the loop's
         * own poll judges (not a short poll between commit attempts, whose
         * time the stop budget counts without this check). */
        if (timeout_ms >= c->settings->poll_timeout_ms && check_stalled_fetch(c, err, errlen)) return -1;
        return 0;
    }
    c->slot[k].busy = true;
    *records = c->slot[k].records;
    return (int)c->slot[k].count;
}

void consumer_release(consumer_t *c, record_t *records)
{
    for (int k = 0; k < 2; k++) {
        if (c->slot[k].records != records) continue;
        for (size_t i = 0; i < c->slot[k].count; i++) rd_kafka_message_destroy(c->slot[k].messages[i]);
        c->slot[k].count = 0;
        c->slot[k].busy = false;
    }
}

/* Errors of a group between generations: the commit is refused until the
 * member has rejoined, and a later commit covers these offsets. A zombie
 * member sees the same errors: its commit is refused, as it must be. */
static bool group_in_flux(rd_kafka_resp_err_t e)
{
    return e == RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS || e == RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION ||
           e == RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID;
}

/* Commit `offsets` as this member. Returns like consumer_commit; a refusal
 * because the group is between generations starts a hold. */
static int send_commit(consumer_t *c, const rd_kafka_topic_partition_list_t *offsets, int timeout_ms,
                       char *err, size_t errlen)
{
    rd_kafka_resp_err_t cause;
    if (kafka_commit_offsets(c->rk, offsets, timeout_ms, &cause, err, errlen) == 0)
        return 0;
    if (!group_in_flux(cause)) return -1;
    if (!c->hold) {
        c->hold = true;
        c->hold_since_ms = clock_now_ms();
    }
    return 1;
}

int consumer_commit(consumer_t *c, const record_t *records, size_t count, int timeout_ms, char *err,
                    size_t errlen)
{
    int64_t top = -1; /* the highest offset of the current run */
    for (size_t i = 0; i < count; i++) {
        const record_t *r = &records[i];
        if (r->offset > top) top = r->offset;
        /* A batch holds runs of one partition's records (a fetched message
         * set each): the partition's lists are searched once per run, not
         * once per record. */
        const record_t *after = i + 1 < count ? &records[i + 1] : NULL;
        if (after && after->partition == r->partition && strcmp(after->topic, r->topic) == 0) continue;
        int64_t next = top + 1;
        top = -1;
        /* Never commit for a partition this member no longer owns: the new
         * owner's commits must not be overwritten by ours. */
        if (!rd_kafka_topic_partition_list_find(c->owned, r->topic, r->partition)) continue;
        /* The rows, and the position with them, are committed already. */
        set_stored(c, r->topic, r->partition, next);
        rd_kafka_topic_partition_t *p =
            rd_kafka_topic_partition_list_find(c->pending, r->topic, r->partition);
        if (!p) {
            p = rd_kafka_topic_partition_list_add(c->pending, r->topic, r->partition);
            p->offset = next;
        } else if (next > p->offset) {
            p->offset = next;
        }
    }
    if (c->pending->cnt == 0) return 0;
    if (c->hold) {
        /* A hold that outlives a session timeout is probed with a real
         * commit: a rebalance that ended without telling this member must
         * not stop its commits for good. */
        if (clock_now_ms() - c->hold_since_ms < c->settings->session_timeout_ms) {
            snprintf(err, errlen, "offset commit held: the group is rebalancing");
            return 1;
        }
        c->hold_since_ms = clock_now_ms();
    }
    int rc = send_commit(c, c->pending, timeout_ms, err, errlen);
    if (rc == 0) {
        /* Rebalance callbacks run only inside consumer_poll: pending is as
         * it was sent. */
        rd_kafka_topic_partition_list_destroy(c->pending);
        c->pending = rd_kafka_topic_partition_list_new(8);
        c->hold = false;
    }
    return rc;
}

int consumer_flush(consumer_t *c, int timeout_ms, char *err, size_t errlen)
{
    return consumer_commit(c, NULL, 0, timeout_ms, err, errlen);
}

void consumer_lag(consumer_t *c, atomic_int_fast64_t *lag, atomic_int_fast64_t *committed_lag, int max)
{
    /* Computed aside and then stored once per partition: the HTTP thread
     * reads these without a lock, and a scrape that saw a passing -1 would
     * drop the series for that scrape (a stale series resets alerts' `for`). */
    enum { LAG_SLOTS = 1024 };
    int64_t next_lag[LAG_SLOTS], next_committed[LAG_SLOTS];
    if (max > LAG_SLOTS) max = LAG_SLOTS;
    for (int p = 0; p < max; p++) next_lag[p] = next_committed[p] = -1;
    if (c->owned->cnt > 0) {
        for (int i = 0; i < c->stored->cnt; i++) {
            int64_t lo, hi;
            const rd_kafka_topic_partition_t *p = &c->stored->elems[i];
            if (p->partition < 0 || p->partition >= max ||
                rd_kafka_get_watermark_offsets(c->rk, p->topic, p->partition, &lo, &hi) || hi < 0)
                continue;
            next_committed[p->partition] = hi > p->offset ? hi - p->offset : 0;
        }
        rd_kafka_topic_partition_list_t *pos = rd_kafka_topic_partition_list_copy(c->owned);
        positions_of(c, pos);
        for (int i = 0; i < pos->cnt; i++) {
            int64_t lo, hi;
            const rd_kafka_topic_partition_t *p = &pos->elems[i];
            if (p->partition < 0 || p->partition >= max || p->offset < 0 ||
                rd_kafka_get_watermark_offsets(c->rk, p->topic, p->partition, &lo, &hi) || hi < 0)
                continue;
            next_lag[p->partition] = hi > p->offset ? hi - p->offset : 0;
        }
        rd_kafka_topic_partition_list_destroy(pos);
    }
    for (int p = 0; p < max; p++) {
        atomic_store_explicit(&lag[p], next_lag[p], memory_order_relaxed);
        atomic_store_explicit(&committed_lag[p], next_committed[p], memory_order_relaxed);
    }
}

/* Consumers left undestroyed (see consumer_close), kept reachable on
 * purpose so that LeakSanitizer does not report them. Pipeline threads
 * close their consumers at the same moment: each claims a slot of its own
 * with one atomic increment and is that slot's only writer; nothing reads
 * the list but the leak checker, after the threads are joined. A process
 * closes at most one consumer per pipeline (one supervisor run), so the
 * slots cannot run out. If a new caller ever made them, its consumer would
 * still be left undestroyed (destroying it is what aborts), only not
 * recorded here: LeakSanitizer may then report it, never the release build. */
static rd_kafka_t *unclosable[PIPELINE_MAX];
static atomic_size_t unclosable_claimed;

static void keep_unclosable(rd_kafka_t *rk)
{
    size_t i = atomic_fetch_add_explicit(&unclosable_claimed, 1, memory_order_relaxed);
    if (i < sizeof unclosable / sizeof unclosable[0]) unclosable[i] = rk;
}

void consumer_close(consumer_t *c)
{
    if (!c) return;
    for (int k = 0; k < 2; k++) consumer_release(c, c->slot[k].records);
    /* librdkafka before 2.3.0 asserts (aborts the process) when a
     * cooperative-sticky consumer is destroyed before its first assignment
     * arrived (upstream issue 4312). Wait for it, within half the shutdown
     * timeout; what it delivers meanwhile is dropped uncommitted.
     * Not for a pipeline that failed because its topic cannot be read: its
     * subscription matches no topic, so librdkafka never sent a JoinGroup
     * and no assignment is coming. The abort needs an answered JoinGroup
     * (the assignor is chosen there, its state only comes with an
     * assignment); librdkafka reports the protocol "NONE" until then, and
     * ignores a JoinGroup answer once the close has begun. */
    int64_t deadline = clock_now_ms() + c->settings->shutdown_timeout_seconds * 500LL;
    if (!c->ever_assigned && c->topic_unusable) {
        const char *protocol = rd_kafka_rebalance_protocol(c->rk);
        if (protocol && strcmp(protocol, "NONE") == 0) deadline = 0;
    }
    while (!c->ever_assigned && deadline && clock_now_ms() < deadline) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(c->rk, 100);
        if (m) rd_kafka_message_destroy(m);
    }
    if (!c->ever_assigned && deadline) {
        /* Still none: leave the handle to the process exit, which is near
         * (a consumer closes only when its pipeline stops). */
        LOG_WARN(c->def->name, "consumer closed before the group assigned it anything: not destroyed (a librdkafka 2.0.2 bug would abort the process)");
        keep_unclosable(c->rk);
        free_consumer(c);
        return;
    }
    /* Close before destroy: leaves the group so the broker rebalances at
     * once instead of after a session timeout. */
    c->closing = true;
    rd_kafka_resp_err_t e = rd_kafka_consumer_close(c->rk);
    if (e) LOG_WARN(c->def->name, "consumer close: %s", rd_kafka_err2str(e));
    rd_kafka_destroy(c->rk);
    free_consumer(c);
}
