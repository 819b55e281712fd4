/* members — which processes run a consumer group, as PostgreSQL sees them
 * (DESIGN.md: Operations, Replay a topic).
 *
 * Each running pipeline's session holds its group's advisory lock, shared,
 * for as long as it is connected: a process that exits or is killed loses
 * it with its connection. A replay looks for the holders before it joins the
 * group, so a live member is refused in seconds without the group ever
 * rebalancing. A holder that does nothing for a while (a paused or stuck
 * process, which Kafka will evict) is left to the group protocol. */
#ifndef STORAGE_PG_MEMBERS_H
#define STORAGE_PG_MEMBERS_H

#include <stddef.h>
#include <stdint.h>

#include "core/retry.h"
#include "pg/db.h"

/* Take `group`'s advisory lock, shared, for the session, before
 * `deadline_ms`. Returns 0, or -1 with `err` and *cls set. */
int members_announce(db_conn_t *conn, const char *group, int64_t deadline_ms, char *err, size_t errlen,
                     error_class_t *cls);

/* A session holding a group's lock, other than the caller's. */
typedef struct {
    int pid;
    int64_t state_change_ms; /* pg_stat_activity.state_change, Unix ms; -1: not visible to this role */
    char application[64];
    char client[64];         /* host address, or "local" */
} member_session_t;

/* The sessions holding `group`'s lock (at most `max`) into `out`. Returns
 * how many, or -1 with `err`. */
int members_sessions(db_conn_t *conn, const char *group, member_session_t *out, int max, char *err, size_t errlen);

#endif
