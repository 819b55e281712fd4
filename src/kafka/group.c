/* group — what every member of a consumer group does, the pipelines'
 * consumers and the replay's membership alike: follow the rebalances
 * (eager or incremental, as the group's protocol says) and commit offsets
 * with a deadline of our own (DESIGN.md: Errors). */
#include <stdio.h>
#include <string.h>

#include "kafka/internal.h"
#include "log.h"

kafka_rebalance_t kafka_rebalance_kind(rd_kafka_t *rk, rd_kafka_resp_err_t err)
{
    kafka_rebalance_t r = {0};
    const char *protocol = rd_kafka_rebalance_protocol(rk);
    if (!protocol) {
        r.closed = true;
        return r;
    }
    r.cooperative = strcmp(protocol, "COOPERATIVE") == 0;
    r.assign = err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS;
    if (!r.assign) r.lost = rd_kafka_assignment_lost(rk);
    return r;
}

void kafka_rebalance_apply(rd_kafka_t *rk, const kafka_rebalance_t *r,
                           rd_kafka_topic_partition_list_t *parts, const char *log_name)
{
    rd_kafka_error_t *error = NULL;
    if (r->assign) {
        if (r->cooperative) error = rd_kafka_incremental_assign(rk, parts);
        else rd_kafka_assign(rk, parts);
    } else {
        if (r->cooperative) error = rd_kafka_incremental_unassign(rk, parts);
        else rd_kafka_assign(rk, NULL);
    }
    if (error) {
        LOG_ERROR(log_name, "rebalance failed: %s", rd_kafka_error_string(error));
        rd_kafka_error_destroy(error);
    }
}

int kafka_commit_offsets(rd_kafka_t *rk, const rd_kafka_topic_partition_list_t *offsets,
                         int timeout_ms, rd_kafka_resp_err_t *cause, char *err, size_t errlen)
{
    *cause = RD_KAFKA_RESP_ERR__TIMED_OUT;
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_resp_err_t e = rd_kafka_commit_queue(rk, offsets, q, NULL, NULL);
    if (e) {
        *cause = e;
        snprintf(err, errlen, "offset commit failed: %s", rd_kafka_err2str(e));
        rd_kafka_queue_destroy(q);
        return -1;
    }
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, timeout_ms);
    rd_kafka_queue_destroy(q);
    if (!ev) {
        snprintf(err, errlen, "offset commit did not complete within %d ms (STORAGE_COMMIT_TIMEOUT_MS)",
                 timeout_ms);
        return -1;
    }
    int rc = 0;
    *cause = rd_kafka_event_error(ev);
    if (*cause) {
        snprintf(err, errlen, "offset commit failed: %s", rd_kafka_event_error_string(ev));
        rc = -1;
    } else {
        /* Per-partition errors travel in the event's partition list. */
        const rd_kafka_topic_partition_list_t *res = rd_kafka_event_topic_partition_list(ev);
        for (int i = 0; res && i < res->cnt; i++) {
            if (res->elems[i].err) {
                *cause = res->elems[i].err;
                snprintf(err, errlen, "offset commit failed for %s [%d]: %s", res->elems[i].topic,
                         res->elems[i].partition, rd_kafka_err2str(res->elems[i].err));
                rc = -1;
                break;
            }
        }
    }
    rd_kafka_event_destroy(ev);
    return rc;
}
