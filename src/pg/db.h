/* db — PostgreSQL sessions as storage-consumer needs them.
 *
 * Every session runs with synchronous_commit = on, set explicitly: offsets
 * are committed to Kafka right after the database commit, so a server
 * configured with synchronous_commit = off would turn a database crash into
 * silently lost messages. */
#ifndef STORAGE_DB_H
#define STORAGE_DB_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/retry.h"

/* 0 if `conninfo` parses as a libpq conninfo or URI, else -1. */
int db_check_conninfo(const char *conninfo);

/* Connect with `conninfo` (key=value or URI; "" uses libpq's PG* variables)
 * and prepare the session (statement_timeout_ms 0: no statement timeout),
 * all before `deadline_ms` (0: none; libpq counts whole seconds, so the
 * connect may overrun it by up to a second; a conninfo's own
 * connect_timeout wins). Returns a connection the caller owns (PQfinish),
 * or NULL with the reason in `err`; the password never appears in it. */
PGconn *db_connect(const char *conninfo, int statement_timeout_ms, int64_t deadline_ms, char *err,
                   size_t errlen);

/* Run a command that returns no rows. Returns 0, or -1 with the server's
 * message in `err` and the error's class in *cls (if non-NULL). */
int db_exec(PGconn *conn, const char *sql, char *err, size_t errlen, error_class_t *cls);

/* Round trips with a deadline of our own.
 *
 * statement_timeout does not end everything: a COMMIT that waits for a
 * synchronous standby waited 12 minutes with a 1.5 s timeout, and a
 * connection to a host that stopped answering waits as long as TCP does.
 * Deadlines are CLOCK_MONOTONIC milliseconds (db_now_ms). When one passes,
 * the query is cancelled, the connection is shut down (nothing else may wait
 * on it: the caller drops it) and the error is transient, with a message
 * naming the time waited. */

/* Milliseconds on the monotonic clock. This function can't fail. */
int64_t db_now_ms(void);

/* Like PQexecParams (nparams 0: a plain query, which may hold several
 * statements) within `deadline_ms`. Returns the last result when every
 * statement succeeded (the caller PQclears it), else NULL with `err` and *cls
 * set from the first failure. */
PGresult *db_query(PGconn *conn, const char *sql, int nparams, const char *const *values,
                   const int *lengths, const int *formats, int64_t deadline_ms, char *err,
                   size_t errlen, error_class_t *cls);

/* db_query for commands: 0, or -1 with `err` and *cls set. */
int db_command(PGconn *conn, const char *sql, int64_t deadline_ms, char *err, size_t errlen,
               error_class_t *cls);

/* COPY `sql` FROM STDIN with `data` (COPY text format), within the deadline.
 * 0, or -1 with `err` and *cls set. */
int db_copy_in(PGconn *conn, const char *sql, const char *data, size_t len, int64_t deadline_ms,
               char *err, size_t errlen, error_class_t *cls);

/* Send `sql` without waiting for its results (collect them with db_result).
 * 0, or -1 with `err` and *cls set. */
int db_send(PGconn *conn, const char *sql, int64_t deadline_ms, char *err, size_t errlen,
            error_class_t *cls);

/* The next result of what was sent, or NULL when every result has come. When
 * the deadline passes first: NULL with *timed_out set (and `err`). */
PGresult *db_result(PGconn *conn, int64_t deadline_ms, bool *timed_out, char *err, size_t errlen);

/* Classify a failed result (NULL: the connection itself failed). */
error_class_t db_classify(PGconn *conn, const PGresult *res);

/* Write a one-line "SQLSTATE: message" description of a failed result. */
void db_describe(PGconn *conn, const PGresult *res, char *err, size_t errlen);

/* A conninfo with any password replaced by "********", for logs. Returns a
 * string the caller frees. */
char *db_mask_conninfo(const char *conninfo);

#endif
