/* db_internal — queries on a connection, for src/pg/ only: the one header
 * that brings libpq in (DESIGN.md: Architecture). */
#ifndef STORAGE_DB_INTERNAL_H
#define STORAGE_DB_INTERNAL_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/retry.h"
#include "pg/db.h"

/* Round trips with a deadline of our own (0: none, for the one-shot
 * commands and migrations, which wait as long as the server works).
 *
 * statement_timeout does not end everything: a COMMIT that waits for a
 * synchronous standby waited 12 minutes with a 1.5 s timeout, and a
 * connection to a host that stopped answering waits as long as TCP does.
 * Deadlines are CLOCK_MONOTONIC milliseconds (clock_now_ms). When one passes,
 * the query is cancelled, the connection is shut down (nothing else may wait
 * on it: the caller drops it) and the error is transient, with a message
 * naming the time waited. */

/* Like PQexecParams (nparams 0: a plain query, which may hold several
 * statements) within `deadline_ms`. Returns the last result when every
 * statement succeeded (the caller PQclears it), else NULL with `err` and *cls
 * set from the first failure. */
PGresult *db_query(PGconn *conn, const char *sql, int nparams, const char *const *values,
                   const int *lengths, const int *formats, int64_t deadline_ms, char *err,
                   size_t errlen, error_class_t *cls);

/* Prepare `sql` (nparams text parameters) as the statement `name` of this
 * session, within `deadline_ms`: what it parses and plans once instead of
 * at every call. 0, or -1 with `err` and *cls set. */
int db_prepare(PGconn *conn, const char *name, const char *sql, int nparams, int64_t deadline_ms, char *err,
               size_t errlen, error_class_t *cls);

/* Send the statement `name` db_prepare made in this session, without
 * waiting for its results (collect them with db_collect). 0, or -1 with
 * `err` and *cls set. */
int db_send_prepared(PGconn *conn, const char *name, int nparams, const char *const *values, int64_t deadline_ms,
                     char *err, size_t errlen, error_class_t *cls);
/* db_query for commands: 0, or -1 with `err` and *cls set. */
int db_command(PGconn *conn, const char *sql, int64_t deadline_ms, char *err, size_t errlen,
               error_class_t *cls);

/* COPY `sql` FROM STDIN with `data` (COPY text format), within the deadline.
 * 0, or -1 with `err` and *cls set. */
int db_copy_in(PGconn *conn, const char *sql, const char *data, size_t len, int64_t deadline_ms,
               char *err, size_t errlen, error_class_t *cls);

/* db_copy_in up to the end of the data, without waiting for the results.
 * `sql` may hold statements before the COPY (their results are read on the
 * way: they must succeed without rows) and after it (collect their
 * results, and the COPY's, with db_result). 0, or -1 with `err` and *cls
 * set. */
int db_copy_send(PGconn *conn, const char *sql, const char *data, size_t len, int64_t deadline_ms,
                 char *err, size_t errlen, error_class_t *cls);

/* Send `sql` without waiting for its results (collect them with db_result).
 * 0, or -1 with `err` and *cls set. */
int db_send(PGconn *conn, const char *sql, int64_t deadline_ms, char *err, size_t errlen,
            error_class_t *cls);

/* Collect every result of what was sent: the last one if all succeeded
 * (the caller PQclears it), else NULL with `err` and *cls of the first
 * failure (the deadline passed: transient). */
PGresult *db_collect(PGconn *conn, int64_t deadline_ms, char *err, size_t errlen, error_class_t *cls);
/* The next result of what was sent, or NULL when every result has come. When
 * the deadline passes first: NULL with *timed_out set (and `err`). */
PGresult *db_result(PGconn *conn, int64_t deadline_ms, bool *timed_out, char *err, size_t errlen);

/* Classify a failed result (NULL: the connection itself failed). */
error_class_t db_classify(PGconn *conn, const PGresult *res);

/* Write a one-line "SQLSTATE: message" description of a failed result. */
void db_describe(PGconn *conn, const PGresult *res, char *err, size_t errlen);

/* The constraint the last failure db_describe described on this thread
 * names (a foreign key's, a UNIQUE's: PG_DIAG_CONSTRAINT_NAME), or "". */
const char *db_error_constraint(void);

/* db_query for the one-shot commands' reads: text parameters, results in
 * `format` (0 text, 1 binary), no deadline. The result when it returned rows
 * (the caller PQclears it), else NULL with the reason in `err`. */
PGresult *db_select(PGconn *conn, const char *sql, int nparams, const char *const *params, int format,
                    char *err, size_t errlen);

/* A PostgreSQL array literal ({"a","b"} or {1,2}) of the n strings `texts`
 * (which hold no NUL), or, when texts is NULL, of the n integers `ids`.
 * Returns a string the caller frees. */
char *db_array_literal(const char *const *texts, const int64_t *ids, size_t n);

#endif
