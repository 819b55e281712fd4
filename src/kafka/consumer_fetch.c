/* consumer_fetch — what the consumer poll watches besides the records
 * (DESIGN.md: Errors; Settings and budgets): a subscribed topic the cluster
 * does not know (the pipeline fails after a grace), a partition librdkafka
 * has stopped fetching (the pipeline fails after
 * STORAGE_FETCH_STALL_SECONDS), and a fetcher left waiting after the queue
 * was full (woken with a seek). */
#include <stdbool.h>
#include <stdio.h>

#include "core/clock.h"
#include "kafka/consumer_internal.h"
#include "log.h"

/* The stalled-fetch check (check_stalled_fetch) asks the leaders at most
 * every sixth of STORAGE_FETCH_STALL_SECONDS, within these bounds, and
 * waits this long for their answer: an unanswered question proves nothing. */
#define CONSUMER_STALL_CHECK_MIN_MS 500
#define CONSUMER_STALL_CHECK_MAX_MS 5000
#define CONSUMER_STALL_QUERY_TIMEOUT_MS 1000

/* A subscribed topic was reported missing: ask the cluster again now and
 * then, and fail once it is still missing after the grace. Returns 0, or -1
 * with the reason in `err`. An unanswered question proves nothing (a
 * cluster that does not answer is an outage, not a missing topic): asked
 * again later. */
static int check_topic(consumer_t *c, struct consumer_topic *t, char *err, size_t errlen)
{
    int64_t now = clock_now_ms();
    if (!t->missing_since_ms || now < t->check_ms) return 0;
    char why[512];
    int found = kafka_topic_lookup(c->rk, t->name, CONSUMER_METADATA_TIMEOUT_MS, NULL, NULL, why, sizeof why);
    now = clock_now_ms();
    t->check_ms = now + CONSUMER_MISSING_TOPIC_RECHECK_MS;
    if (found < 0) {
        LOG_DEBUG(c->def->name, "cannot check whether topic %s exists: %s", t->name, why);
        return 0;
    }
    if (found) {
        LOG_INFO(c->def->name, "topic %s exists now (%lld ms after it was reported missing)", t->name,
                 (long long)(now - t->missing_since_ms));
        t->missing_since_ms = 0;
        return 0;
    }
    if (now - t->missing_since_ms < CONSUMER_MISSING_TOPIC_GRACE_MS) return 0;
    snprintf(err, errlen, "topic %s does not exist (consumer group %s; still unknown to the Kafka cluster "
                          "%d s after it was first reported missing): check the pipeline's topic setting, "
                          "or create the topic",
             t->name, c->group, CONSUMER_MISSING_TOPIC_GRACE_MS / 1000);
    c->topic_unusable = true;
    return -1;
}

int check_missing_topic(consumer_t *c, char *err, size_t errlen)
{
    for (int t = 0; t < c->topic_count; t++)
        if (check_topic(c, &c->topics[t], err, errlen)) return -1;
    return 0;
}

/* This member's position in each partition of `at` (a copy of `owned`):
 * librdkafka's (rd_kafka_position: after the last record delivered, the
 * markers of a transactional producer included, which never reach us), or
 * the consumer's own (`parts[].next`) when that is further or librdkafka's is
 * unknown, as it is after wake_fetcher's seek until the next record; -1 when
 * neither is known. */
void positions_of(consumer_t *c, rd_kafka_topic_partition_list_t *at)
{
    if (rd_kafka_position(c->rk, at))
        for (int i = 0; i < at->cnt; i++) at->elems[i].offset = -1;
    for (int i = 0; i < at->cnt; i++) {
        const struct consumer_part *part = part_of(c, at->elems[i].topic, at->elems[i].partition);
        int64_t own = part ? part->next : -1;
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
int check_stalled_fetch(consumer_t *c, char *err, size_t errlen)
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
        struct consumer_part *part = part_of(c, a->topic, p);
        if (!part) continue;
        int64_t pos = a->offset;
        if (e || !first || first->err || end->err || pos < 0 || end->offset <= pos || first->offset > pos) {
            part->stall_since = 0;
            continue;
        }
        if (!part->stall_since) {
            part->stall_since = now;
            LOG_DEBUG(c->def->name, "%s [%d]: the leader holds %lld record(s) past position %lld and none is queued: watching for a stalled fetch",
                      a->topic, p, (long long)(end->offset - pos), (long long)pos);
        } else if (now - part->stall_since >= stall_ms) {
            snprintf(err, errlen, "%s [%d]: no record fetched for %lld s while its leader holds %lld record(s) past this member's position %lld and nothing else is queued: librdkafka's fetcher for the partition is stuck (librdkafka 2.0.2 can leave a partition on a broker that is no longer its leader after leader changes); the pipeline fails so that a restart reads on from the database's position (STORAGE_FETCH_STALL_SECONDS=%d)",
                     a->topic, p, (long long)((now - part->stall_since) / 1000), (long long)(end->offset - pos),
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
void wake_fetcher(consumer_t *c)
{
    c->taken_bytes = 0;
    rd_kafka_topic_partition_list_t *at = rd_kafka_topic_partition_list_new(c->owned->cnt);
    for (int i = 0; i < c->owned->cnt; i++) {
        const rd_kafka_topic_partition_t *o = &c->owned->elems[i];
        struct consumer_part *part = part_of(c, o->topic, o->partition);
        if (!part || !part->taken) continue;
        rd_kafka_topic_partition_list_add(at, o->topic, o->partition)->offset = part->next;
        part->taken = false;
    }
    if (at->cnt > 0) {
        /* Asynchronous (timeout 0): it reports nothing. */
        rd_kafka_error_t *e = rd_kafka_seek_partitions(c->rk, at, 0);
        if (e) rd_kafka_error_destroy(e);
        LOG_DEBUG(c->def->name, "queue emptied after a run: woke the fetcher of %d partition(s)", at->cnt);
    }
    rd_kafka_topic_partition_list_destroy(at);
}
