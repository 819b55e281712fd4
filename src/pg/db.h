/* db — PostgreSQL sessions as storage-consumer needs them: the part the
 * rest of the service sees. libpq stays behind src/pg/ (DESIGN.md:
 * Architecture): a connection is an opaque db_conn_t here, and the queries
 * on it live in src/pg/ (pg/db_internal.h).
 *
 * Every session runs with synchronous_commit = on, set explicitly: offsets
 * are committed to Kafka right after the database commit, so a server
 * configured with synchronous_commit = off would turn a database crash into
 * silently lost messages. */
#ifndef STORAGE_DB_H
#define STORAGE_DB_H

#include <stddef.h>
#include <stdint.h>

/* A connection: libpq's PGconn, opaque outside src/pg/. */
typedef struct pg_conn db_conn_t;

/* 0 if `conninfo` parses as a libpq conninfo or URI, else -1. */
int db_check_conninfo(const char *conninfo);

/* A conninfo with any password replaced by "********", for logs. Returns a
 * string the caller frees. */
char *db_mask_conninfo(const char *conninfo);

/* Connect with `conninfo` (key=value or URI; "" uses libpq's PG* variables)
 * and prepare the session (statement_timeout_ms 0: no statement timeout),
 * all before `deadline_ms` (0: none; libpq counts whole seconds, so the
 * connect may overrun it by up to a second; a conninfo's own
 * connect_timeout wins). Returns a connection the caller closes
 * (db_close), or NULL with the reason in `err`; the password never appears
 * in it. */
db_conn_t *db_connect(const char *conninfo, int statement_timeout_ms, int64_t deadline_ms, char *err,
                      size_t errlen);

/* The libpq version this process runs with ("15.18"; PQlibVersion, not
 * the headers it was built against). */
const char *db_library_version(void);

/* Close a connection (NULL: nothing). */
void db_close(db_conn_t *conn);

/* count(*) of `table` (a constant of the pipeline table, never input) into
 * *count. Returns 0, or -1 with the server's "SQLSTATE: message" in `err`. */
int db_count_rows(db_conn_t *conn, const char *table, long long *count, char *err, size_t errlen);

#endif
