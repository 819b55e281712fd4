#include "kafka/consumer.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/clock.h"
#include "kafka/consumer_internal.h"
#include "log.h"

/* The fetcher is woken (wake_fetcher) when a poll finds the queue empty
 * after records of at least this share of queued.max.messages.kbytes were
 * taken since it was last woken. */
#define CONSUMER_WAKE_SHARE_DIVISOR 2

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

struct consumer_topic *topic_of(consumer_t *c, const char *topic)
{
    for (int t = 0; t < c->topic_count; t++)
        if (strcmp(c->topics[t].name, topic) == 0) return &c->topics[t];
    return NULL;
}

struct consumer_part *part_of(consumer_t *c, const char *topic, int32_t partition)
{
    struct consumer_topic *t = topic_of(c, topic);
    return t && partition >= 0 && partition < t->parts_n ? &t->parts[partition] : NULL;
}

/* Make room for the partitions of a rebalance; a new entry knows nothing. */
static void parts_fit(consumer_t *c, const rd_kafka_topic_partition_list_t *parts)
{
    for (int i = 0; i < parts->cnt; i++) {
        struct consumer_topic *t = topic_of(c, parts->elems[i].topic);
        int n = parts->elems[i].partition + 1;
        if (!t || n <= t->parts_n) continue;
        t->parts = realloc(t->parts, (size_t)n * sizeof *t->parts);
        if (!t->parts) abort();
        for (int p = t->parts_n; p < n; p++) t->parts[p] = (struct consumer_part){.next = -1};
        t->parts_n = n;
    }
}

/* A partition assigned (its fetcher starts at `next`; -1: unknown, at the
 * committed offset) or revoked (-1): nothing of it taken yet. */
static void part_restart(consumer_t *c, const char *topic, int32_t partition, int64_t next)
{
    struct consumer_part *p = part_of(c, topic, partition);
    if (!p) return;
    p->next = next >= 0 ? next : -1;
    p->taken = false;
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
            part_restart(c, parts->elems[i].topic, parts->elems[i].partition, parts->elems[i].offset);
        }
        c->ever_assigned = true;
        for (int i = 0; i < parts->cnt; i++) {
            struct consumer_topic *t = topic_of(c, parts->elems[i].topic);
            if (t) t->missing_since_ms = 0; /* it exists: the group assigns it */
        }
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
            part_restart(c, parts->elems[i].topic, parts->elems[i].partition, -1);
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
    for (int t = 0; t < c->topic_count; t++)
        for (int p = 0; p < c->topics[t].parts_n; p++) c->topics[t].parts[p].stall_since = 0;
    kafka_rebalance_apply(rk, &r, parts, c->def->name);
    if (c->owned_count) atomic_store_explicit(c->owned_count, c->owned->cnt, memory_order_relaxed);
}

/* Everything but the librdkafka handle. */
static void free_consumer(consumer_t *c)
{
    rd_kafka_topic_partition_list_destroy(c->owned);
    rd_kafka_topic_partition_list_destroy(c->pending);
    rd_kafka_topic_partition_list_destroy(c->stored);
    for (int t = 0; t < c->topic_count; t++) free(c->topics[t].parts);
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
    for (size_t i = 0; i < c->def->field_count; i++)
        c->reads_headers |= c->def->fields[i].source == SOURCE_HEADERS || c->def->fields[i].source == SOURCE_HEADER;
    if (positions) c->positions = *positions;
    c->topic = s->topic[id];
    c->topic_count = s->topics[id].count;
    for (int t = 0; t < c->topic_count; t++) c->topics[t].name = s->topics[id].name[t];
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

    topics = rd_kafka_topic_partition_list_new(c->topic_count);
    for (int t = 0; t < c->topic_count; t++)
        rd_kafka_topic_partition_list_add(topics, c->topics[t].name, RD_KAFKA_PARTITION_UA);
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

/* Returns 1 if the message was kept in slot k, 0 if it was an event we
 * consumed, -1 on a fatal error. */
/* The i-th header of a record (record_headers_t). */
static bool header_at(const void *opaque, size_t i, const char **name, const void **value, size_t *len)
{
    return rd_kafka_header_get_all((const rd_kafka_headers_t *)opaque, i, name, value, len) ==
           RD_KAFKA_RESP_ERR_NO_ERROR;
}

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
            /* A subscribed topic is missing from the cluster's metadata:
             * librdkafka says so once, then waits. */
            struct consumer_topic *t = m->rkt ? topic_of(c, topic) : NULL;
            bool first = false;
            /* Not told which: every topic is asked again (check_topic),
             * and those that exist are cleared at once. */
            for (int i = 0; i < c->topic_count; i++) {
                struct consumer_topic *u = &c->topics[i];
                if ((t && u != t) || u->missing_since_ms) continue;
                u->missing_since_ms = clock_now_ms();
                u->check_ms = t ? u->missing_since_ms + CONSUMER_MISSING_TOPIC_RECHECK_MS : 0;
                first = true;
            }
            if (first)
                LOG_WARN_F(c->def->name, LOG_FIELDS(LF_STR("topic", topic), LF_STR("group", c->group)),
                           "topic %s does not exist (consumer group %s): the pipeline fails unless it appears within %d s: %s",
                           topic, c->group, CONSUMER_MISSING_TOPIC_GRACE_MS / 1000, rd_kafka_message_errstr(m));
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
    r->timestamp_type = tstype == RD_KAFKA_TIMESTAMP_CREATE_TIME       ? RECORD_TIMESTAMP_CREATE
                        : tstype == RD_KAFKA_TIMESTAMP_LOG_APPEND_TIME ? RECORD_TIMESTAMP_LOG_APPEND
                                                                        : RECORD_TIMESTAMP_NONE;
    r->key = m->key;
    r->key_len = m->key_len;
    r->value = m->payload;
    r->value_len = m->len;
    /* Headers are parsed only for a pipeline that reads them. */
    rd_kafka_headers_t *headers = NULL;
    r->headers = (record_headers_t){NULL, NULL};
    if (c->reads_headers && rd_kafka_message_headers(m, &headers) == RD_KAFKA_RESP_ERR_NO_ERROR)
        r->headers = (record_headers_t){headers, header_at};
    if (!c->last_topic || strcmp(c->last_topic->name, r->topic) != 0) c->last_topic = topic_of(c, r->topic);
    struct consumer_topic *t = c->last_topic;
    if (t && r->partition >= 0 && r->partition < t->parts_n)
        t->parts[r->partition] = (struct consumer_part){.next = r->offset + 1, .taken = true};
    c->taken_bytes += (int64_t)(m->len + m->key_len);
    c->slot[k].messages[c->slot[k].count++] = m;
    return 1;
}

static bool any_topic_missing(const consumer_t *c)
{
    for (int t = 0; t < c->topic_count; t++)
        if (c->topics[t].missing_since_ms) return true;
    return false;
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
            if (any_topic_missing(c) && wait > CONSUMER_MISSING_TOPIC_RECHECK_MS)
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

int consumer_rewind(consumer_t *c, char *err, size_t errlen)
{
    if (!c->positions.read) {
        snprintf(err, errlen, "the pipeline records no positions in the database");
        return -1;
    }
    rd_kafka_topic_partition_list_t *seek = rd_kafka_topic_partition_list_new(c->owned->cnt ? c->owned->cnt : 1);
    int rc = 0;
    for (int t = 0; t < c->topic_count && rc == 0; t++) {
        const char *topic = c->topics[t].name;
        int n = 0;
        for (int i = 0; i < c->owned->cnt; i++)
            if (strcmp(c->owned->elems[i].topic, topic) == 0 && c->owned->elems[i].partition + 1 > n)
                n = c->owned->elems[i].partition + 1;
        if (n == 0) continue;
        int64_t *next = malloc((size_t)n * sizeof *next);
        if (!next) abort();
        if (c->positions.read(c->positions.ctx, topic, n, next, err, errlen) != 0) {
            rc = -1;
        } else {
            for (int i = 0; i < c->owned->cnt; i++) {
                const rd_kafka_topic_partition_t *e = &c->owned->elems[i];
                if (strcmp(e->topic, topic) != 0 || next[e->partition] < 0) continue;
                rd_kafka_topic_partition_list_add(seek, topic, e->partition)->offset = next[e->partition];
            }
        }
        free(next);
    }
    if (rc == 0 && seek->cnt > 0) {
        rd_kafka_error_t *error = rd_kafka_seek_partitions(c->rk, seek, c->settings->commit_timeout_ms);
        if (error) {
            snprintf(err, errlen, "seeking to the database's positions: %s", rd_kafka_error_string(error));
            rd_kafka_error_destroy(error);
            rc = -1;
        }
        for (int i = 0; rc == 0 && i < seek->cnt; i++) {
            const rd_kafka_topic_partition_t *e = &seek->elems[i];
            if (e->err) {
                snprintf(err, errlen, "seeking %s [%d] to the database's position %lld: %s", e->topic, e->partition,
                         (long long)e->offset, rd_kafka_err2str(e->err));
                rc = -1;
                break;
            }
            set_stored(c, e->topic, e->partition, e->offset);
            part_restart(c, e->topic, e->partition, e->offset);
            LOG_INFO(c->def->name, "%s [%d] read again from offset %lld, the database's position", e->topic,
                     e->partition, (long long)e->offset);
        }
    }
    rd_kafka_topic_partition_list_destroy(seek);
    return rc;
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
    rd_kafka_topic_partition_list_t *pos = NULL;
    if (c->owned->cnt > 0) {
        pos = rd_kafka_topic_partition_list_copy(c->owned);
        positions_of(c, pos);
    }
    for (int t = 0; t < c->topic_count; t++) {
        const char *topic = c->topics[t].name;
        for (int p = 0; p < max; p++) next_lag[p] = next_committed[p] = -1;
        for (int i = 0; pos && i < c->stored->cnt; i++) {
            int64_t lo, hi;
            const rd_kafka_topic_partition_t *p = &c->stored->elems[i];
            if (strcmp(p->topic, topic) != 0 || p->partition < 0 || p->partition >= max ||
                rd_kafka_get_watermark_offsets(c->rk, topic, p->partition, &lo, &hi) || hi < 0)
                continue;
            next_committed[p->partition] = hi > p->offset ? hi - p->offset : 0;
        }
        for (int i = 0; pos && i < pos->cnt; i++) {
            int64_t lo, hi;
            const rd_kafka_topic_partition_t *p = &pos->elems[i];
            if (strcmp(p->topic, topic) != 0 || p->partition < 0 || p->partition >= max || p->offset < 0 ||
                rd_kafka_get_watermark_offsets(c->rk, topic, p->partition, &lo, &hi) || hi < 0)
                continue;
            next_lag[p->partition] = hi > p->offset ? hi - p->offset : 0;
        }
        for (int p = 0; p < max; p++) {
            atomic_store_explicit(&lag[t * max + p], next_lag[p], memory_order_relaxed);
            atomic_store_explicit(&committed_lag[t * max + p], next_committed[p], memory_order_relaxed);
        }
    }
    if (pos) rd_kafka_topic_partition_list_destroy(pos);
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
