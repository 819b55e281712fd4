#include "pg/db_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core/clock.h"
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

/* One of `allowed` (NULL-terminated). */
static bool one_of(const char *v, const char *const *allowed)
{
    for (; *allowed; allowed++)
        if (strcmp(v, *allowed) == 0) return true;
    return false;
}

/* A comma-separated list of ports (one per host), each empty or 1..65535. */
static bool valid_ports(const char *v)
{
    for (;;) {
        const char *comma = strchr(v, ',');
        size_t n = comma ? (size_t)(comma - v) : strlen(v);
        long port = 0;
        for (size_t i = 0; i < n; i++) {
            if (v[i] < '0' || v[i] > '9' || port > 65535) return false;
            port = port * 10 + (v[i] - '0');
        }
        if (n > 0 && (port < 1 || port > 65535)) return false;
        if (!comma) return true;
        v = comma + 1;
    }
}

static bool valid_integer(const char *v)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    return *v && *end == '\0' && errno == 0 && x >= 0 && x <= 2147483647L;
}

int db_check_conninfo(const char *conninfo, char *err, size_t errlen)
{
    static const char *const sslmodes[] = {"disable", "allow", "prefer", "require", "verify-ca", "verify-full", NULL};
    static const char *const gssencmodes[] = {"disable", "prefer", "require", NULL};
    static const char *const channel_bindings[] = {"disable", "prefer", "require", NULL};
    static const char *const session_attrs[] = {"any", "read-write", "read-only", "primary", "standby",
                                                "prefer-standby", NULL};
    static const char uri_hint[] =
        " (in a URI, percent-encode any '/', '?', '#', '@' or ':' of the user name or password)";
    /* In a URI a password holding an unencoded '/' or '?' spills into the
     * port, the database name or the query: no value parsed from a URI is
     * printed, nor a query parameter holding the '@' that ends the
     * password. */
    const bool uri = strncmp(conninfo, "postgresql://", 13) == 0 || strncmp(conninfo, "postgres://", 11) == 0;
    char *errmsg = NULL;
    PQconninfoOption *opts = PQconninfoParse(conninfo, &errmsg);
    if (!opts) {
        /* errmsg may quote the conninfo, password included: only the
         * messages that quote a keyword alone are passed on. */
        const char *why = errmsg &&
                                  (strncmp(errmsg, "invalid connection option", 25) == 0 ||
                                   strncmp(errmsg, "invalid URI query parameter", 27) == 0) &&
                                  !(uri && strchr(errmsg, '@'))
                              ? errmsg
                              : "not a valid libpq conninfo or URI";
        snprintf(err, errlen, "%.*s%s", (int)strcspn(why, "\n"), why, uri ? uri_hint : "");
        PQfreemem(errmsg);
        return -1;
    }
    /* PQconninfoParse checks the syntax and the keywords, not the values:
     * those would fail only at the first connection, after start-up. */
    int rc = 0;
    for (PQconninfoOption *o = opts; o->keyword && rc == 0; o++) {
        if (!o->val) continue;
        const char *k = o->keyword, *v = o->val, *expect = NULL;
        if (strcmp(k, "port") == 0 && !valid_ports(v))
            expect = "a port 1..65535 (a comma-separated list, one per host)";
        else if (strcmp(k, "sslmode") == 0 && !one_of(v, sslmodes))
            expect = "disable, allow, prefer, require, verify-ca or verify-full";
        else if (strcmp(k, "gssencmode") == 0 && !one_of(v, gssencmodes))
            expect = "disable, prefer or require";
        else if (strcmp(k, "channel_binding") == 0 && !one_of(v, channel_bindings))
            expect = "disable, prefer or require";
        else if (strcmp(k, "target_session_attrs") == 0 && !one_of(v, session_attrs))
            expect = "any, read-write, read-only, primary, standby or prefer-standby";
        else if ((strcmp(k, "connect_timeout") == 0 || strncmp(k, "keepalives", 10) == 0) && !valid_integer(v))
            expect = "a non-negative integer";
        if (expect) {
            if (uri)
                snprintf(err, errlen, "%s: expected %s%s", k, expect, uri_hint);
            else
                snprintf(err, errlen, "%s=%s: expected %s", k, v, expect);
            rc = -1;
        }
    }
    PQconninfoFree(opts);
    return rc;
}

PGconn *db_connect(const char *conninfo, int statement_timeout_ms, int64_t deadline_ms, char *err,
                   size_t errlen)
{
    char connect_timeout[24] = "", sql[160];
    /* libpq bounds connecting in whole seconds, at least 2. Keywords before
     * dbname are defaults that the conninfo (expanded from dbname) overrides. */
    if (deadline_ms) {
        int64_t left = deadline_ms - clock_now_ms();
        snprintf(connect_timeout, sizeof connect_timeout, "%lld", left < 2000 ? 2LL : (long long)(left + 999) / 1000);
    }
    const char *keys[] = {"connect_timeout", "dbname", "fallback_application_name", NULL};
    const char *vals[] = {connect_timeout, conninfo, "storage-consumer", NULL};
    PGconn *conn;

    if (db_check_conninfo(conninfo, err, errlen)) return NULL;
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
    /* Sends never block: every wait happens in db_result/db_flush, under a
     * deadline. (PQexec still works: it waits regardless.) */
    PQsetnonblocking(conn, 1);
    snprintf(sql, sizeof sql,
             "SET synchronous_commit = on; SET statement_timeout = %d; SET client_encoding = 'UTF8'",
             statement_timeout_ms);
    if (db_command(conn, sql, deadline_ms, err, errlen, NULL)) {
        PQfinish(conn);
        return NULL;
    }
    return conn;
}

static void *cancel_thread(void *arg)
{
    char why[256];
    if (!PQcancel(arg, why, sizeof why))
        LOG_WARN("postgres", "cancelling a query past its deadline failed: %.*s", (int)strcspn(why, "\n"), why);
    PQfreeCancel(arg);
    return NULL;
}

/* The deadline passed: ask the server to cancel what this session runs and
 * shut the connection down. PQcancel opens a connection of its own and can
 * block as long as connecting does, so it runs on a short-lived detached
 * thread of its own (nothing shared: it owns its PGcancel). */
static void abandon(PGconn *conn, char *err, size_t errlen)
{
    PGcancel *cancel = PQgetCancel(conn);
    int fd = PQsocket(conn);
    if (fd >= 0) shutdown(fd, SHUT_RDWR);
    if (cancel) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &attr, cancel_thread, cancel) != 0) PQfreeCancel(cancel);
        pthread_attr_destroy(&attr);
    }
    snprintf(err, errlen, "PostgreSQL did not answer before the deadline: query cancelled, connection dropped");
}

/* Wait until the socket is readable (or writable too, with `write`). 1:
 * ready, 0: the deadline passed (0: none), -1: error. */
static int wait_socket(PGconn *conn, bool write, int64_t deadline_ms)
{
    struct pollfd p = {PQsocket(conn), (short)(POLLIN | (write ? POLLOUT : 0)), 0};
    if (p.fd < 0) return -1;
    for (;;) {
        int timeout = -1;
        if (deadline_ms) {
            int64_t left = deadline_ms - clock_now_ms();
            if (left <= 0) return 0;
            timeout = left > 60000 ? 60000 : (int)left;
        }
        int r = poll(&p, 1, timeout);
        if (r > 0) return 1;
        if (r < 0 && errno != EINTR) return -1;
    }
}

/* Send what libpq has queued. 0, or -1 with err/cls (the deadline, or the
 * connection failed). */
static int flush_by(PGconn *conn, int64_t deadline_ms, char *err, size_t errlen, error_class_t *cls)
{
    int r;
    while ((r = PQflush(conn)) == 1) {
        int w = wait_socket(conn, true, deadline_ms);
        if (w == 0) {
            abandon(conn, err, errlen);
            if (cls) *cls = ERROR_CLASS_TRANSIENT;
            return -1;
        }
        /* The server may be sending meanwhile (a notice, an error). */
        if (w < 0 || !PQconsumeInput(conn)) break;
    }
    if (r == 0) return 0;
    db_describe(conn, NULL, err, errlen);
    if (cls) *cls = db_classify(conn, NULL);
    return -1;
}

PGresult *db_result(PGconn *conn, int64_t deadline_ms, bool *timed_out, char *err, size_t errlen)
{
    *timed_out = false;
    while (PQisBusy(conn)) {
        int w = wait_socket(conn, false, deadline_ms);
        if (w == 0) {
            abandon(conn, err, errlen);
            *timed_out = true;
            return NULL;
        }
        /* On failure PQgetResult reports the error. */
        if (w < 0 || !PQconsumeInput(conn)) break;
    }
    return PQgetResult(conn);
}

/* Send what `sent` (a PQsend* call's return) says was queued (1). 0, or -1
 * with err/cls. */
static int sent_and_flushed(PGconn *conn, int sent, int64_t deadline_ms, char *err, size_t errlen,
                            error_class_t *cls)
{
    if (sent != 1) {
        db_describe(conn, NULL, err, errlen);
        if (cls) *cls = db_classify(conn, NULL);
        return -1;
    }
    return flush_by(conn, deadline_ms, err, errlen, cls);
}

int db_send(PGconn *conn, const char *sql, int64_t deadline_ms, char *err, size_t errlen,
            error_class_t *cls)
{
    return sent_and_flushed(conn, PQsendQuery(conn, sql), deadline_ms, err, errlen, cls);
}

PGresult *db_collect(PGconn *conn, int64_t deadline_ms, char *err, size_t errlen, error_class_t *cls)
{
    PGresult *last = NULL, *res;
    bool failed = false, timed_out;
    while ((res = db_result(conn, deadline_ms, &timed_out, err, errlen))) {
        ExecStatusType st = PQresultStatus(res);
        if (!failed && st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
            db_describe(conn, res, err, errlen);
            if (cls) *cls = db_classify(conn, res);
            failed = true;
        }
        PQclear(last);
        last = res;
    }
    if (timed_out) {
        if (cls) *cls = ERROR_CLASS_TRANSIENT;
        failed = true;
    } else if (!failed && !last) {
        /* The connection broke before any result. */
        db_describe(conn, NULL, err, errlen);
        if (cls) *cls = db_classify(conn, NULL);
        failed = true;
    }
    if (failed) {
        PQclear(last);
        return NULL;
    }
    return last;
}

/* sent_and_flushed, then collect the results. */
static PGresult *sent_and_collected(PGconn *conn, int sent, int64_t deadline_ms, char *err, size_t errlen,
                                    error_class_t *cls)
{
    if (sent_and_flushed(conn, sent, deadline_ms, err, errlen, cls)) return NULL;
    return db_collect(conn, deadline_ms, err, errlen, cls);
}

/* db_query with the results in `result_format` (0 text, 1 binary). */
static PGresult *query(PGconn *conn, const char *sql, int nparams, const char *const *values,
                       const int *lengths, const int *formats, int result_format, int64_t deadline_ms,
                       char *err, size_t errlen, error_class_t *cls)
{
    int sent = nparams || result_format
                   ? PQsendQueryParams(conn, sql, nparams, NULL, values, lengths, formats, result_format)
                   : PQsendQuery(conn, sql);
    return sent_and_collected(conn, sent, deadline_ms, err, errlen, cls);
}

PGresult *db_query(PGconn *conn, const char *sql, int nparams, const char *const *values,
                   const int *lengths, const int *formats, int64_t deadline_ms, char *err,
                   size_t errlen, error_class_t *cls)
{
    return query(conn, sql, nparams, values, lengths, formats, 0, deadline_ms, err, errlen, cls);
}

int db_prepare(PGconn *conn, const char *name, const char *sql, int nparams, int64_t deadline_ms, char *err,
               size_t errlen, error_class_t *cls)
{
    PGresult *res = sent_and_collected(conn, PQsendPrepare(conn, name, sql, nparams, NULL), deadline_ms, err,
                                       errlen, cls);
    if (!res) return -1;
    PQclear(res);
    return 0;
}

int db_send_prepared(PGconn *conn, const char *name, int nparams, const char *const *values, int64_t deadline_ms,
                     char *err, size_t errlen, error_class_t *cls)
{
    return sent_and_flushed(conn, PQsendQueryPrepared(conn, name, nparams, values, NULL, NULL, 0), deadline_ms, err,
                            errlen, cls);
}

int db_command(PGconn *conn, const char *sql, int64_t deadline_ms, char *err, size_t errlen,
               error_class_t *cls)
{
    PGresult *res = db_query(conn, sql, 0, NULL, NULL, NULL, deadline_ms, err, errlen, cls);
    if (!res) return -1;
    PQclear(res);
    return 0;
}

int db_copy_send(PGconn *conn, const char *sql, const char *data, size_t len, int64_t deadline_ms,
                 char *err, size_t errlen, error_class_t *cls)
{
    bool timed_out;
    if (PQsendQuery(conn, sql) != 1) {
        db_describe(conn, NULL, err, errlen);
        if (cls) *cls = db_classify(conn, NULL);
        return -1;
    }
    if (flush_by(conn, deadline_ms, err, errlen, cls)) return -1;
    /* The statements before the COPY in `sql` (a BEGIN) answer first. */
    PGresult *res;
    while ((res = db_result(conn, deadline_ms, &timed_out, err, errlen)) &&
           PQresultStatus(res) == PGRES_COMMAND_OK)
        PQclear(res);
    if (PQresultStatus(res) != PGRES_COPY_IN) {
        if (timed_out) {
            if (cls) *cls = ERROR_CLASS_TRANSIENT;
        } else {
            db_describe(conn, res, err, errlen);
            if (cls) *cls = db_classify(conn, res);
        }
        PQclear(res);
        if (!timed_out) {
            char ignored[256];
            PQclear(db_collect(conn, deadline_ms, ignored, sizeof ignored, NULL));
        }
        return -1;
    }
    PQclear(res);
    /* Non-blocking: 0 means libpq's buffer is full; flush and offer again. */
    int r;
    while ((r = PQputCopyData(conn, data, (int)len)) == 0)
        if (flush_by(conn, deadline_ms, err, errlen, cls)) return -1;
    if (r == 1)
        while ((r = PQputCopyEnd(conn, NULL)) == 0)
            if (flush_by(conn, deadline_ms, err, errlen, cls)) return -1;
    if (r != 1) {
        db_describe(conn, NULL, err, errlen);
        if (cls) *cls = db_classify(conn, NULL);
        return -1;
    }
    return flush_by(conn, deadline_ms, err, errlen, cls);
}

int db_copy_in(PGconn *conn, const char *sql, const char *data, size_t len, int64_t deadline_ms,
               char *err, size_t errlen, error_class_t *cls)
{
    if (db_copy_send(conn, sql, data, len, deadline_ms, err, errlen, cls)) return -1;
    PGresult *res = db_collect(conn, deadline_ms, err, errlen, cls);
    if (!res) return -1;
    PQclear(res);
    return 0;
}

error_class_t db_classify(PGconn *conn, const PGresult *res)
{
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    return retry_classify(state, PQstatus(conn) != CONNECTION_OK);
}

/* The constraint the last error described on this thread named ("": none). */
static _Thread_local char error_constraint[64];

const char *db_error_constraint(void) { return error_constraint; }

void db_describe(PGconn *conn, const PGresult *res, char *err, size_t errlen)
{
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *constraint = res ? PQresultErrorField(res, PG_DIAG_CONSTRAINT_NAME) : NULL;
    snprintf(error_constraint, sizeof error_constraint, "%s", constraint ? constraint : "");
    char msg[1024];
    copy_message(res && PQresultErrorMessage(res)[0] ? PQresultErrorMessage(res)
                                                      : PQerrorMessage(conn),
                 msg, sizeof msg);
    if (state)
        snprintf(err, errlen, "%s: %s", state, msg);
    else
        snprintf(err, errlen, "%s", msg[0] ? msg : "connection lost");
}

const char *db_library_version(void)
{
    static char text[32];
    int v = PQlibVersion(); /* 150018: 15.18; before 10, 90624: 9.6.24 */
    if (v >= 100000)
        snprintf(text, sizeof text, "%d.%d", v / 10000, v % 10000);
    else
        snprintf(text, sizeof text, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
    return text;
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

void db_close(db_conn_t *conn)
{
    if (conn) PQfinish(conn);
}

PGresult *db_select(PGconn *conn, const char *sql, int nparams, const char *const *params, int format,
                    char *err, size_t errlen)
{
    PGresult *res = query(conn, sql, nparams, params, NULL, NULL, format, 0, err, errlen, NULL);
    if (res && PQresultStatus(res) != PGRES_TUPLES_OK) {
        snprintf(err, errlen, "the statement returned no rows: %s", sql);
        PQclear(res);
        return NULL;
    }
    return res;
}

int db_count_rows(db_conn_t *conn, const char *table, long long *count, char *err, size_t errlen)
{
    char *sql;
    if (asprintf(&sql, "SELECT count(*) FROM %s", table) < 0) abort();
    PGresult *res = db_select(conn, sql, 0, NULL, 0, err, errlen);
    free(sql);
    if (!res) return -1;
    *count = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    return 0;
}

char *db_array_literal(const char *const *texts, const int64_t *ids, size_t n)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    if (!f) abort();
    fputc('{', f);
    for (size_t i = 0; i < n; i++) {
        if (i) fputc(',', f);
        if (!texts) {
            fprintf(f, "%" PRId64, ids[i]);
            continue;
        }
        fputc('"', f);
        for (const char *p = texts[i]; *p; p++) {
            if (*p == '"' || *p == '\\') fputc('\\', f);
            fputc(*p, f);
        }
        fputc('"', f);
    }
    fputc('}', f);
    if (fclose(f) != 0 || !out) abort();
    return out;
}
