#include "pg/members.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg/db_internal.h"

/* The lock's first key, "stor" in ASCII; the second is the group's hash,
 * non-negative so pg_locks shows both keys as they were given. */
#define MEMBERS_LOCK_CLASS "1937010546"
#define MEMBERS_LOCK_KEY "hashtext($1) & 2147483647"

int members_announce(db_conn_t *conn, const char *group, int64_t deadline_ms, char *err, size_t errlen,
                     error_class_t *cls)
{
    const char *params[1] = {group};
    PGresult *res = db_query(conn, "SELECT pg_try_advisory_lock_shared(" MEMBERS_LOCK_CLASS ", " MEMBERS_LOCK_KEY ")",
                             1, params, NULL, NULL, deadline_ms, err, errlen, cls);
    if (!res) return -1;
    PQclear(res);
    return 0;
}

int members_sessions(db_conn_t *conn, const char *group, member_session_t *out, int max, char *err, size_t errlen)
{
    const char *params[1] = {group};
    PGresult *res = db_select(conn,
                              "SELECT l.pid, coalesce((extract(epoch FROM a.state_change) * 1000)::bigint, -1), "
                              "coalesce(a.application_name, ''), coalesce(host(a.client_addr), 'local') "
                              "FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid "
                              "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 "
                              "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                              "AND l.classid = " MEMBERS_LOCK_CLASS " AND l.objid = (" MEMBERS_LOCK_KEY ")::oid "
                              "AND l.pid <> pg_backend_pid() ORDER BY l.pid",
                              1, params, 0, err, errlen);
    if (!res) return -1;
    int n = PQntuples(res) < max ? PQntuples(res) : max;
    for (int i = 0; i < n; i++) {
        out[i].pid = atoi(PQgetvalue(res, i, 0));
        out[i].state_change_ms = strtoll(PQgetvalue(res, i, 1), NULL, 10);
        snprintf(out[i].application, sizeof out[i].application, "%s", PQgetvalue(res, i, 2));
        snprintf(out[i].client, sizeof out[i].client, "%s", PQgetvalue(res, i, 3));
    }
    PQclear(res);
    return n;
}
