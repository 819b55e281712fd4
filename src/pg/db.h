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

#include "core/retry.h"

/* 0 if `conninfo` parses as a libpq conninfo or URI, else -1. */
int db_check_conninfo(const char *conninfo);

/* Connect with `conninfo` (key=value or URI; "" uses libpq's PG* variables)
 * and prepare the session (statement_timeout_ms 0: no statement timeout).
 * Returns a connection the caller owns (PQfinish),
 * or NULL with the reason in `err`; the password never appears in it. */
PGconn *db_connect(const char *conninfo, int statement_timeout_ms, char *err, size_t errlen);

/* Run a command that returns no rows. Returns 0, or -1 with the server's
 * message in `err` and the error's class in *cls (if non-NULL). */
int db_exec(PGconn *conn, const char *sql, char *err, size_t errlen, error_class_t *cls);

/* Classify a failed result (NULL: the connection itself failed). */
error_class_t db_classify(PGconn *conn, const PGresult *res);

/* Write a one-line "SQLSTATE: message" description of a failed result. */
void db_describe(PGconn *conn, const PGresult *res, char *err, size_t errlen);

/* A conninfo with any password replaced by "********", for logs. Returns a
 * string the caller frees. */
char *db_mask_conninfo(const char *conninfo);

#endif
