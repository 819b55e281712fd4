#include "pg/db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* Strip the trailing newline libpq puts on its messages. */
static void copy_message(const char *msg, char *err, size_t errlen)
{
    snprintf(err, errlen, "%s", msg ? msg : "");
    size_t n = strlen(err);
    while (n > 0 && (err[n - 1] == '\n' || err[n - 1] == ' ')) err[--n] = '\0';
}

/* Server notices ("relation already exists, skipping") are debug detail,
 * not something to print raw on stderr between log lines. */
static void db_notice(void *arg, const char *message)
{
    (void)arg;
    LOG_DEBUG("postgres", "notice: %.*s", (int)strcspn(message, "\n"), message);
}

int db_check_conninfo(const char *conninfo)
{
    char *errmsg = NULL;
    PQconninfoOption *opts = PQconninfoParse(conninfo, &errmsg);
    /* errmsg quotes the conninfo, password included: never show it. */
    PQfreemem(errmsg);
    if (!opts) return -1;
    PQconninfoFree(opts);
    return 0;
}

PGconn *db_connect(const char *conninfo, int statement_timeout_ms, char *err, size_t errlen)
{
    const char *keys[] = {"dbname", "fallback_application_name", NULL};
    const char *vals[] = {conninfo, "storage-consumer", NULL};
    char sql[160];
    PGconn *conn;

    if (db_check_conninfo(conninfo)) {
        snprintf(err, errlen, "not a valid libpq conninfo or URI");
        return NULL;
    }
    conn = PQconnectdbParams(keys, vals, 1);
    if (!conn) {
        snprintf(err, errlen, "out of memory creating a PostgreSQL connection");
        return NULL;
    }
    if (PQstatus(conn) != CONNECTION_OK) {
        copy_message(PQerrorMessage(conn), err, errlen);
        PQfinish(conn);
        return NULL;
    }
    PQsetNoticeProcessor(conn, db_notice, NULL);
    snprintf(sql, sizeof sql,
             "SET synchronous_commit = on; SET statement_timeout = %d; SET client_encoding = 'UTF8'",
             statement_timeout_ms);
    if (db_exec(conn, sql, err, errlen, NULL)) {
        PQfinish(conn);
        return NULL;
    }
    return conn;
}

error_class_t db_classify(PGconn *conn, const PGresult *res)
{
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    return retry_classify(state, PQstatus(conn) != CONNECTION_OK);
}

void db_describe(PGconn *conn, const PGresult *res, char *err, size_t errlen)
{
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    char msg[1024];
    copy_message(res && PQresultErrorMessage(res)[0] ? PQresultErrorMessage(res)
                                                      : PQerrorMessage(conn),
                 msg, sizeof msg);
    if (state)
        snprintf(err, errlen, "%s: %s", state, msg);
    else
        snprintf(err, errlen, "%s", msg[0] ? msg : "connection lost");
}

int db_exec(PGconn *conn, const char *sql, char *err, size_t errlen, error_class_t *cls)
{
    PGresult *res = PQexec(conn, sql);
    ExecStatusType st = PQresultStatus(res);
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
        PQclear(res);
        return 0;
    }
    db_describe(conn, res, err, errlen);
    if (cls) *cls = db_classify(conn, res);
    PQclear(res);
    return -1;
}

char *db_mask_conninfo(const char *conninfo)
{
    char *errmsg = NULL;
    PQconninfoOption *opts = PQconninfoParse(conninfo, &errmsg);
    size_t cap = 256, len = 0;
    char *out;

    if (!opts) {
        PQfreemem(errmsg); /* it quotes the conninfo, password included */
        out = strdup("(unparsable conninfo)");
        if (!out) abort();
        return out;
    }
    for (PQconninfoOption *o = opts; o->keyword; o++)
        if (o->val) cap += strlen(o->keyword) + strlen(o->val) + 16;
    out = malloc(cap);
    if (!out) abort();
    out[0] = '\0';
    for (PQconninfoOption *o = opts; o->keyword; o++) {
        if (!o->val) continue;
        /* password, sslpassword, and whatever secret libpq adds next. */
        int secret = strstr(o->keyword, "password") != NULL;
        len += (size_t)snprintf(out + len, cap - len, "%s%s=%s", len ? " " : "", o->keyword,
                                secret ? "********" : o->val);
    }
    PQconninfoFree(opts);
    return out;
}
