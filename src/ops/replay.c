/* replay — move one pipeline's consumer group to earliest, latest or a point
 * in time, so its topics are read again (or skipped) from there (DESIGN.md: Operations).
 *
 * Only that pipeline's group moves: replaying reviews must not reprocess
 * app-stats. Idempotency (DESIGN.md: Tables and natural keys) makes re-reading safe.
 *
 * How: the replay joins the group itself (a consumer with the group's id,
 * subscribed to the pipeline's topics), commits the target offsets as a
 * member, and leaves. Why not an admin "alter offsets" from outside:
 *   - a reset under a running member is silently overwritten by that
 *     member's next commit. Being assigned every partition of the topics
 *     proves no other member is active; given fewer, the replay leaves and
 *     refuses, changing nothing. (The refusal still costs the running
 *     members a rebalance when the replay joins and another when it
 *     leaves);
 *   - the test cluster (librdkafka's mock) rejects offset commits from a
 *     client that is not a member of a group it has seen; a member's commit
 *     works on every cluster.
 * Two records of the group's progress are moved together (DESIGN.md,
 * Progress in the database): the database's positions, where the service
 * starts, and Kafka's committed offsets, their copy. The database is checked
 * before the replay joins the group, so a database it cannot use changes
 * nothing. Holding every partition, the replay sets the positions to the
 * targets in a transaction, commits the targets to Kafka, then COMMITs: a
 * failed Kafka commit rolls the transaction back (nothing changed); a failed
 * COMMIT after it leaves Kafka reset and the database's positions as they
 * were, which the replay says in those words, since the service would go on
 * from the database's positions as if no replay happened.
 *
 * Joining triggers a rebalance that waits for the existing members, and
 * the documented flow is "stop, replay, start": the replay often meets a
 * group whose last member is still on its way out. It waits for the group
 * to give it every partition, saying what it waits for, within a bound
 * (see replay_run).
 *
 * A point in time resolves, per partition, to the first message whose
 * timestamp is at or after it (Kafka's offsets-for-times). A broker that
 * answers "no such message" for a partition whose last message is at or
 * after that time did not resolve it (librdkafka 2.0.2's mock cluster never
 * does); then the partition is read from its start to find the offset. */
#include "ops/ops.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/timestamp.h"
#include "exit_code.h"
#include "kafka/cluster.h"
#include "kafka/conf.h"
#include "kafka/member.h"
#include "log.h"
#include "ops/args.h"
#include "ops/connect.h"
#include "ops/progress.h"
#include "pg/db.h"
#include "pg/members.h"
#include "pg/offsets.h"
#include "worker.h"

#define REPLAY_KAFKA_TIMEOUT_MS 10000
/* Beyond two session timeouts (see replay_run), a rebalance round itself
 * needs a few seconds. */
#define REPLAY_JOIN_MARGIN_MS 10000
/* While waiting for the group, a progress line this often. */
#define REPLAY_PROGRESS_MS 5000
/* Reading partitions to resolve a time, when the broker cannot. */
#define REPLAY_SCAN_TIMEOUT_MS 120000
#define REPLAY_POLL_MS 200

typedef enum { REPLAY_TO_EARLIEST, REPLAY_TO_LATEST, REPLAY_TO_TIME } replay_to_t;

typedef struct {
    const pipeline_def_t *def;
    replay_to_t to;
    const char *to_text; /* as the operator wrote it */
    int64_t time_ms;     /* REPLAY_TO_TIME: the first message at or after it */
} replay_args_t;

/* ------------------------------------------------------------------------ */
/* Resolving a point in time.                                               */

/* Read partition `p` from offset `from` and return, in *out, the offset of
 * the first message whose timestamp is >= time_ms, or `hi` when none is
 * before the high watermark. `reader` is a client that never joins the
 * group (cluster_client_new). Returns 0, or -1 with the reason in `err`. */
static int scan_partition(cluster_client_t *reader, const char *topic, int p, int64_t from, int64_t hi,
                          int64_t time_ms, int64_t deadline, int64_t *out, char *err, size_t errlen)
{
    char why[512];
    if (cluster_read_start(reader, topic, p, from, why, sizeof why)) {
        snprintf(err, errlen, "%s [%d]: cannot read from offset %" PRId64 ": %s", topic, p, from, why);
        return -1;
    }
    int rc = -1;
    snprintf(err, errlen, "%s [%d]: could not read the messages from offset %" PRId64 " within %d ms",
             topic, p, from, REPLAY_SCAN_TIMEOUT_MS);
    /* On a terminal, the read's progress (DESIGN.md: Progress of long
     * work); not for the one message that checks the last timestamp. */
    progress_t *progress = NULL;
    if (hi - from > 1) {
        char label[300];
        snprintf(label, sizeof label, "replay: reading %s [%d]", topic, p);
        progress = progress_new(label, hi - from, "messages");
    }
    while (clock_now_ms() < deadline) {
        int64_t offset, ts;
        int got = cluster_read_next(reader, REPLAY_POLL_MS, &offset, &ts, why, sizeof why);
        if (got < 0) LOG_DEBUG("replay", "reader: %s", why);
        if (got <= 0) continue;
        progress_update(progress, offset + 1 - from);
        if (ts >= time_ms) {
            *out = offset;
            rc = 0;
            break;
        }
        if (offset + 1 >= hi) {
            *out = hi;
            rc = 0;
            break;
        }
    }
    progress_end(progress);
    cluster_read_stop(reader);
    return rc;
}

/* Fill target[p] with the first offset at or after time_ms on every
 * partition, within [lo[p], hi[p]]. Returns 0, or -1 with the reason. */
static int resolve_time(const settings_t *s, cluster_client_t *cluster, const replay_args_t *a,
                        const char *topic, int n, const int64_t *lo, const int64_t *hi,
                        int64_t *target, char *err, size_t errlen)
{
    cluster_offset_t *q = calloc((size_t)n, sizeof *q);
    cluster_client_t *reader = NULL;
    char why[512];
    int rc = -1;

    if (!q) abort();
    if (cluster_offsets_for_time(cluster, topic, n, a->time_ms, REPLAY_KAFKA_TIMEOUT_MS, q, why,
                                 sizeof why)) {
        snprintf(err, errlen, "cannot look the offsets up by time: %s", why);
        goto out;
    }
    int64_t deadline = clock_now_ms() + REPLAY_SCAN_TIMEOUT_MS;
    for (int p = 0; p < n; p++) {
        const cluster_offset_t *r = &q[p];
        if (r->error[0]) {
            snprintf(err, errlen, "%s [%d]: cannot look the offset up by time: %s", topic, p, r->error);
            goto out;
        }
        if (lo[p] >= hi[p]) {
            target[p] = hi[p]; /* empty */
            continue;
        }
        if (r->offset >= 0) {
            target[p] = r->offset < lo[p] ? lo[p] : r->offset > hi[p] ? hi[p] : r->offset;
            continue;
        }
        /* "No message at or after that time": true only if the last one is
         * older. Checking costs one message per partition. */
        if (!reader && !(reader = cluster_client_new(s, a->def->id, err, errlen))) goto out;
        int64_t found;
        if (scan_partition(reader, topic, p, hi[p] - 1, hi[p], a->time_ms, deadline, &found, err,
                           errlen))
            goto out;
        if (found == hi[p]) {
            target[p] = hi[p];
            continue;
        }
        LOG_INFO("replay", "the broker did not resolve the time on %s [%d]: reading the partition from offset %" PRId64,
                 topic, p, lo[p]);
        if (scan_partition(reader, topic, p, lo[p], hi[p], a->time_ms, deadline, &target[p], err,
                           errlen))
            goto out;
    }
    rc = 0;
out:
    free(q);
    cluster_client_destroy(reader);
    return rc;
}

/* ------------------------------------------------------------------------ */

/* What the reset reads and sets for one topic of the pipeline. */
typedef struct {
    const char *topic;
    int n; /* partitions */
    cluster_offset_t *committed;
    int64_t *lo, *hi, *target, *stored;
} topic_reset_t;

/* Read the current offsets of one topic and compute its targets. Returns
 * 0, or -1 after saying why (nothing was changed). */
static int plan_topic(const settings_t *s, cluster_client_t *cluster, const replay_args_t *a, const char *group,
                      topic_reset_t *r)
{
    char err[1024];
    int n = r->n;
    const char *topic = r->topic;
    if (cluster_committed(cluster, topic, n, REPLAY_KAFKA_TIMEOUT_MS, r->committed, err, sizeof err)) {
        fprintf(stderr, "storage-consumer: replay: cannot read the committed offsets of %s on %s: %s\n", group,
                topic, err);
        return -1;
    }
    for (int p = 0; p < n; p++) {
        if (cluster_watermarks(cluster, topic, p, REPLAY_KAFKA_TIMEOUT_MS, &r->lo[p], &r->hi[p], err,
                               sizeof err)) {
            fprintf(stderr, "storage-consumer: replay: cannot read the watermarks of %s [%d]: %s\n",
                    topic, p, err);
            return -1;
        }
    }
    switch (a->to) {
    case REPLAY_TO_EARLIEST:
        for (int p = 0; p < n; p++) r->target[p] = r->lo[p];
        break;
    case REPLAY_TO_LATEST:
        for (int p = 0; p < n; p++) r->target[p] = r->hi[p];
        break;
    case REPLAY_TO_TIME:
        if (resolve_time(s, cluster, a, topic, n, r->lo, r->hi, r->target, err, sizeof err)) {
            fprintf(stderr, "storage-consumer: replay: %s; nothing was changed\n", err);
            return -1;
        }
        break;
    }
    return 0;
}

/* Print one topic's reset; add the messages it leaves to read, and those
 * the service would have read without it, to *after and *before. */
static void print_topic(const settings_t *s, const topic_reset_t *r, long long *before, long long *after)
{
    for (int p = 0; p < r->n; p++) {
        int64_t old = r->committed[p].offset, lo = r->lo[p], hi = r->hi[p];
        char db_text[32], old_text[32];
        /* Where the service would have started: the database's position,
         * else Kafka's committed offset, else auto.offset.reset. */
        int64_t from = r->stored[p] >= 0 ? r->stored[p] : old;
        *before += hi - (from < 0 ? (strcmp(s->auto_offset_reset, "latest") == 0 ? hi : lo)
                                  : from < lo ? lo : from > hi ? hi : from);
        *after += hi - r->target[p];
        printf("  %s [%d] database %s, Kafka committed %s -> %" PRId64 " (%" PRId64 " messages to read)\n",
               r->topic, p, cluster_offset_text(r->stored[p], db_text, sizeof db_text),
               cluster_offset_text(old, old_text, sizeof old_text), r->target[p], hi - r->target[p]);
    }
}

/* Holding every partition of the pipeline's topics: read the current
 * offsets, compute the targets, set them in the database and in Kafka (one
 * transaction, one commit: all topics or none), print what was done.
 * `partitions[t]`: the partition count of topic t. Returns an exit code. */
static int reset_offsets(const settings_t *s, db_conn_t *conn, member_t *m, const replay_args_t *a,
                         const topic_list_t *topics, const char *group, const int *partitions)
{
    cluster_client_t *cluster = member_cluster(m);
    topic_reset_t r[PIPELINE_MAX_TOPICS];
    int64_t *targets[PIPELINE_MAX_TOPICS];
    char err[1024];
    int rc = EXIT_FAILED, total = 0;

    for (int t = 0; t < topics->count; t++) {
        int n = partitions[t];
        r[t] = (topic_reset_t){topics->name[t], n, calloc((size_t)n, sizeof(cluster_offset_t)),
                               calloc((size_t)n, sizeof(int64_t)), calloc((size_t)n, sizeof(int64_t)),
                               calloc((size_t)n, sizeof(int64_t)), calloc((size_t)n, sizeof(int64_t))};
        if (!r[t].committed || !r[t].lo || !r[t].hi || !r[t].target || !r[t].stored) abort();
        targets[t] = r[t].target;
        total += n;
    }
    for (int t = 0; t < topics->count; t++)
        if (plan_topic(s, cluster, a, group, &r[t])) goto out;

    /* A member that joined meanwhile would own some partitions now: its
     * commits would overwrite ours. */
    member_serve(m, 0);
    if (member_owned(m) != total) {
        fprintf(stderr, "storage-consumer: replay refused: another member joined group %s during the replay "
                        "(this replay now holds %d of %d partitions); nothing was changed\n",
                group, member_owned(m), total);
        goto out;
    }
    /* The database first, uncommitted: its COMMIT comes last, once Kafka
     * took the reset, so a failed Kafka commit leaves both as they were. */
    bool begun = offsets_reset_begin(conn, err, sizeof err) == 0;
    for (int t = 0; begun && t < topics->count; t++)
        begun = offsets_reset_topic(conn, group, r[t].topic, r[t].n, r[t].target, r[t].stored, err, sizeof err) == 0;
    if (!begun) {
        fprintf(stderr, "storage-consumer: replay: cannot set the database's positions of group %s: %s; "
                        "nothing was changed\n",
                group, err);
        goto out;
    }
    if (member_commit(m, topics, partitions, targets, s->commit_timeout_ms, err, sizeof err)) {
        char why[256];
        bool rolled_back = offsets_reset_end(conn, false, why, sizeof why) == 0;
        /* A commit Kafka refused may still have moved some partitions;
         * only where the database has no position does that count. */
        bool unrecorded = false;
        for (int t = 0; t < topics->count; t++)
            for (int p = 0; p < r[t].n; p++) unrecorded |= r[t].stored[p] < 0;
        fprintf(stderr, "storage-consumer: replay: cannot commit the target offsets to Kafka: %s (group %s); "
                        "the database's positions %s: nothing was changed%s, run the replay again\n",
                err, group, rolled_back ? "were rolled back" : "were not committed",
                unrecorded ? " (but for partitions without a database position, where Kafka's offsets may be "
                             "partly reset)"
                           : "");
        goto out;
    }
    if (offsets_reset_end(conn, true, err, sizeof err)) {
        fprintf(stderr, "storage-consumer: replay: Kafka's committed offsets of group %s were reset to %s, but "
                        "the database's COMMIT failed: %s. The database's positions are unchanged, and the "
                        "service starts from them: it would continue as if no replay happened. Run the "
                        "replay again\n",
                group, a->to_text, err);
        goto out;
    }

    long long before = 0, after = 0;
    for (int t = 0; t < topics->count; t++) print_topic(s, &r[t], &before, &after);
    printf("replay %s: group %s reset to %s on %d partitions, in the database and in Kafka: %lld messages "
           "to read (was %lld)\n",
           a->def->name, group, a->to_text, total, after, before);
    LOG_INFO_F("replay",
               LOG_FIELDS(LF_STR("group", group), LF_STR("topic", s->topic[a->def->id]), LF_STR("to", a->to_text),
                          LF_INT("partitions", total), LF_INT("to_read", after), LF_INT("was", before)),
               "positions moved");
    rc = EXIT_OK;
out:
    for (int t = 0; t < topics->count; t++) {
        free(r[t].committed);
        free(r[t].lo);
        free(r[t].hi);
        free(r[t].target);
        free(r[t].stored);
    }
    return rc;
}

/* A connection to the database that holds consumer_offsets, or NULL
 * after saying why (nothing was changed). */
static db_conn_t *connect_database(const settings_t *s)
{
    char err[1024];
    db_conn_t *conn = ops_connect(s, "replay", "; nothing was changed");
    if (!conn) return NULL;
    int exists = offsets_table_exists(conn, err, sizeof err);
    if (exists == 1) return conn;
    if (exists == 0)
        fprintf(stderr, "storage-consumer: replay: the database has no table consumer_offsets: apply the "
                        "migrations first (storage-consumer migrate); nothing was changed\n");
    else
        fprintf(stderr, "storage-consumer: replay: cannot read the database's catalog: %s; nothing was changed\n",
                err);
    db_close(conn);
    return NULL;
}

/* A running member of `group` refuses the replay here, in seconds and
 * before the replay joins the group and takes a partition from it
 * (pg/members.h): a session holding the group's lock whose state changes
 * within the time an idle member takes to ping PostgreSQL (every
 * SETTINGS_DB_PING_MS between polls), or a session that appears meanwhile.
 * Returns 1 when refused, -1 on an error (both said), 0 to go on to the
 * group: no holder; holders that did nothing meanwhile (a paused or stuck
 * process, which the group evicts); or a role that cannot see their
 * activity. */
static int refuse_running_member(const settings_t *s, db_conn_t *conn, const replay_args_t *a, const char *group)
{
    enum { MAX_SESSIONS = 32 };
    member_session_t before[MAX_SESSIONS], now[MAX_SESSIONS];
    char err[1024];
    int n = members_sessions(conn, group, before, MAX_SESSIONS, err, sizeof err), m = 0;
    const int window_ms = 2 * SETTINGS_DB_PING_MS + s->poll_timeout_ms + 1000;
    const member_session_t *working = NULL;

    if (n <= 0) goto judged;
    printf("replay %s: %d PostgreSQL session(s) hold group %s (pid %d, %s); watching them for up to %d s\n",
           a->def->name, n, group, before[0].pid, before[0].client, (window_ms + 999) / 1000);
    fflush(stdout);
    for (int64_t until = clock_now_ms() + window_ms; !working && clock_now_ms() < until;) {
        nanosleep(&(struct timespec){0, 250 * 1000000L}, NULL);
        if ((m = members_sessions(conn, group, now, MAX_SESSIONS, err, sizeof err)) < 0) goto judged;
        for (int j = 0; j < m && !working; j++) {
            int i = 0;
            while (i < n && before[i].pid != now[j].pid) i++;
            if (i == n || (now[j].state_change_ms >= 0 && now[j].state_change_ms != before[i].state_change_ms))
                working = &now[j];
        }
    }
    if (!working)
        printf("replay %s: the session(s) holding group %s did nothing for %d s: a paused or stuck process; "
               "the group decides whether it is alive\n",
               a->def->name, group, (window_ms + 999) / 1000);
judged:
    if (n < 0 || m < 0) {
        fprintf(stderr, "storage-consumer: replay: cannot read which sessions run group %s: %s; nothing was changed\n",
                group, err);
        return -1;
    }
    if (!working) return 0;
    fprintf(stderr,
            "storage-consumer: replay refused: group %s has other active members: a running member's PostgreSQL "
            "session (pid %d, %s, client %s) is working. Stop every process running the %s pipeline first: a "
            "reset under a running member is overwritten by its next commit. Nothing was changed (the group was "
            "not joined)\n",
            group, working->pid, *working->application ? working->application : "no application name",
            working->client, a->def->name);
    return 1;
}

static int replay_run(const settings_t *s, const replay_args_t *a)
{
    const pipeline_id_t id = a->def->id;
    const char *topic = s->topic[id];
    char group[512], err[1024];
    cluster_topic_t info;
    int rc = EXIT_FAILED;
    bool invalid_setting;
    /* How long a member that stopped can still hold the group: one that
     * left is gone when the coordinator ends the rebalance its leaving
     * started (at once on Kafka; librdkafka's mock cluster, the test broker,
     * waits up to a session timeout); one that stopped without leaving
     * (killed, or stopped before its first assignment) is removed after its
     * session timeout, and the round after that takes up to another. This
     * assumes the members run with the same STORAGE_SESSION_TIMEOUT_MS. */
    const int wait_ms = 2 * s->session_timeout_ms + REPLAY_JOIN_MARGIN_MS;

    settings_group_id(s, id, group, sizeof group);
    /* The database before the group: a replay that could not reset the
     * database's positions must not have joined (and rebalanced) it. */
    db_conn_t *conn = connect_database(s);
    if (!conn) return EXIT_FAILED;
    if (refuse_running_member(s, conn, a, group) != 0) {
        db_close(conn);
        return EXIT_FAILED;
    }
    member_t *m = member_new(s, id, "replay", &invalid_setting, err, sizeof err);
    if (!m) {
        db_close(conn);
        if (invalid_setting) {
            fprintf(stderr, "storage-consumer: invalid setting: %s\n", err);
            return EXIT_USAGE;
        }
        fprintf(stderr, "storage-consumer: replay: %s\n", err);
        return EXIT_FAILED;
    }

    /* Before joining: subscribing to a topic that does not exist would
     * create it on a broker with auto-creation on. */
    const topic_list_t *topics = &s->topics[id];
    int partitions[PIPELINE_MAX_TOPICS], total = 0;
    for (int t = 0; t < topics->count; t++) {
        int found = cluster_topic_lookup(member_cluster(m), topics->name[t], REPLAY_KAFKA_TIMEOUT_MS, &info, err,
                                         sizeof err);
        if (found < 0) {
            fprintf(stderr, "storage-consumer: replay: %s (%s); nothing was changed\n", err, s->bootstrap_servers);
            goto out;
        }
        if (found == 0 || info.partitions == 0) {
            fprintf(stderr, "storage-consumer: replay: topic %s (pipeline %s) does not exist; nothing was changed\n",
                    topics->name[t], a->def->name);
            goto out;
        }
        partitions[t] = info.partitions;
        total += info.partitions;
    }

    if (member_join(m, topics, err, sizeof err)) {
        fprintf(stderr, "storage-consumer: replay: cannot subscribe to %s: %s\n", topic, err);
        goto out;
    }

    printf("replay %s: joining group %s on topic %s (%d partitions); waiting up to %d s for the group to "
           "give this replay every partition\n",
           a->def->name, group, topic, total, (wait_ms + 999) / 1000);
    fflush(stdout);
    /* Alone in the group, the replay is given every partition at once
     * (eager and cooperative protocols alike). Given nothing or a part, some
     * member is still in the group: one that is stopping (finishing its
     * batch, committing, leaving) lets go within the bound, and the next
     * round gives the replay the rest. One that keeps running never does:
     * the replay refuses at the bound, having held the partitions it was
     * given (paused) meanwhile. */
    int64_t start = clock_now_ms(), deadline = start + wait_ms, next_progress = start + REPLAY_PROGRESS_MS;
    int seen = 0;
    while (member_owned(m) < total && clock_now_ms() < deadline) {
        member_serve(m, REPLAY_POLL_MS);
        int64_t now = clock_now_ms();
        if (member_owned(m) >= total || (member_assignments(m) == seen && now < next_progress))
            continue;
        if (member_assignments(m) == 0)
            printf("replay %s: %lld s: no answer from group %s yet: it is still rebalancing (a member that "
                   "stopped moments ago is still leaving it, or one that stopped without leaving is "
                   "removed after its session timeout)\n",
                   a->def->name, (long long)(now - start) / 1000, group);
        else
            printf("replay %s: %lld s: group %s gave this replay %d of %d partitions: another member is "
                   "still in it; waiting up to %lld s more for it to leave\n",
                   a->def->name, (long long)(now - start) / 1000, group, member_owned(m), total,
                   (long long)(deadline - now + 999) / 1000);
        fflush(stdout);
        seen = member_assignments(m);
        next_progress = now + REPLAY_PROGRESS_MS;
    }

    if (member_owned(m) < total) {
        if (member_assignments(m) == 0)
            fprintf(stderr,
                    "storage-consumer: replay refused: no assignment from group %s within %d ms: a member "
                    "did not answer the rebalance (a running member stuck in a batch), or the group's "
                    "coordinator is unreachable. Nothing was changed\n",
                    group, wait_ms);
        else
            fprintf(stderr,
                    "storage-consumer: replay refused: group %s has other active members (this replay was "
                    "given %d of the %d partitions of %s within %d ms). Stop every process running the %s "
                    "pipeline first: a reset under a running member is overwritten by its next commit. "
                    "Nothing was changed\n",
                    group, member_owned(m), total, topic, wait_ms, a->def->name);
        goto out;
    }
    rc = reset_offsets(s, conn, m, a, topics, group, partitions);
out:
    /* Leave the group: the pipeline, restarted, is assigned at once. */
    member_close(m);
    db_close(conn);
    fflush(stdout);
    return rc;
}

/* ------------------------------------------------------------------------ */

static void replay_usage(FILE *out)
{
    char names[1024];
    fprintf(out, "usage: storage-consumer replay PIPELINE [--to earliest|latest|TIMESTAMP]\n"
          "\n"
          "Moves the consumer group of one pipeline (%s),\n"
          "and only that group, so the pipeline reads its topics again from there when it\n"
          "next runs. Rows already stored are not duplicated: every write is idempotent.\n"
          "\n"
          "  --to earliest    the oldest message the topic still holds (the default)\n"
          "  --to latest      the end of the topic: the backlog is skipped, never stored\n"
          "  --to TIMESTAMP   ISO 8601 (2026-11-29T12:00:00Z, +03:30 offsets; no offset\n"
          "                   means UTC): on each partition, the first message whose\n"
          "                   timestamp is at or after it\n"
          "\n"
          "The group must have no active member: stop every process running the\n"
          "pipeline first. The replay joins the group itself and refuses (exit 1,\n"
          "nothing changed) unless it is given every partition of its topics; members\n"
          "that are still stopping are waited for, up to twice STORAGE_SESSION_TIMEOUT_MS\n"
          "plus 10 s, with a progress line every 5 s. The database holds the group's\n"
          "positions, where the pipeline starts; Kafka's committed offsets are their\n"
          "copy: both are reset together (a failed Kafka commit changes neither), and\n"
          "the replay refuses before joining the group when the database cannot be\n"
          "used. It prints each partition's database position and Kafka committed\n"
          "offset before, and the target. The pipeline need not be in\n"
          "STORAGE_PIPELINES: this process only acts on its group.\n"
          "\n"
          "exit codes: 0 reset, 1 refused or failed, 2 usage or configuration error\n",
          pipeline_names(names, sizeof names));
}

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...)
{
    va_list ap;
    fputs("storage-consumer: replay: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\n(storage-consumer replay --help for usage)\n", stderr);
    return EXIT_USAGE;
}

int ops_replay(const settings_t *s, int argc, char **argv)
{
    replay_args_t a = {.to = REPLAY_TO_EARLIEST, .to_text = "earliest"};
    const char *pipeline = NULL;
    char err[256];

    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *value;
        if (args_is_help(arg)) {
            replay_usage(stdout);
            return EXIT_OK;
        } else if (args_option(argc, argv, &i, "--to", &value)) {
            if (!value || !*value)
                return usage_error("--to needs a value: earliest, latest or an ISO 8601 timestamp");
            a.to_text = value;
            if (strcmp(value, "earliest") == 0) {
                a.to = REPLAY_TO_EARLIEST;
            } else if (strcmp(value, "latest") == 0) {
                a.to = REPLAY_TO_LATEST;
            } else {
                int64_t micros;
                if (timestamp_parse(value, strlen(value), &micros, err, sizeof err)) {
                    return usage_error("--to %s: expected earliest, latest or an ISO 8601 timestamp: %s",
                                       value, err);
                }
                a.to = REPLAY_TO_TIME;
                /* Kafka timestamps are milliseconds: the first message at or
                 * after the instant has ms >= ceil(micros / 1000). Negative
                 * times mean "end"/"beginning" to Kafka: before 1970 is 0. */
                a.time_ms = micros <= 0 ? 0 : (micros + 999) / 1000;
            }
        } else if (arg[0] == '-') {
            return usage_error("unknown option %s", arg);
        } else if (pipeline) {
            return usage_error("unexpected argument %s (one pipeline at a time)", arg);
        } else {
            pipeline = arg;
        }
    }
    char names[1024];
    if (!pipeline) return usage_error("which pipeline? %s", pipeline_names(names, sizeof names));
    a.def = pipeline_find(pipeline, strlen(pipeline));
    if (!a.def) return usage_error("unknown pipeline %s (known: %s)", pipeline, pipeline_names(names, sizeof names));
    if (kafka_conf_check(s, err, sizeof err)) {
        fprintf(stderr, "storage-consumer: invalid setting: %s\n", err);
        return EXIT_USAGE;
    }
    return replay_run(s, &a);
}
