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

/* 0 if `conninfo` parses as a libpq conninfo or URI whose port, sslmode,
 * gssencmode, channel_binding, target_session_attrs, connect_timeout and
 * keepalives* values libpq would accept; else -1 with the reason in `err`
 * (a keyword and its value, never a password; DESIGN.md: Settings catalog). */
int db_check_conninfo(const char *conninfo, char *err, size_t errlen);

/* libpq's version as loaded at run time, e.g. "15.18" (a static string). */
const char *db_library_version(void);

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

/* Close a connection (NULL: nothing). */
void db_close(db_conn_t *conn);

/* count(*) of `table` (a pipeline's table as SQL names it, quoted:
 * pipeline_def_t.table_sql) into
 * *count. Returns 0, or -1 with the server's "SQLSTATE: message" in `err`. */
int db_count_rows(db_conn_t *conn, const char *table, long long *count, char *err, size_t errlen);

#endif
