/* migrate — the schema storage-consumer owns (DESIGN.md: Migrations).
 *
 * The numbered files of migrations/ are compiled into the binary. They are
 * applied in order inside one transaction that holds an advisory lock, so
 * two instances starting together apply each file once. Each applied file is
 * recorded in storage_consumer_migrations with its checksum: a file edited
 * after it was applied is reported and refused, never silently skipped. */
#ifndef STORAGE_MIGRATE_H
#define STORAGE_MIGRATE_H

#include <stddef.h>

#include "pg/db.h"

typedef struct {
    const char *name; /* "0001_app_stats.sql" */
    const char *sql;
} migration_t;

extern const migration_t migrations[];
extern const unsigned migration_count;

/* Apply every pending migration. Returns the number applied (0 when the
 * schema is current), or -1 with the reason in `err`: the applications table
 * is missing, an applied file was edited, or a statement failed (then
 * nothing of this run is kept). */
int migrate_apply(db_conn_t *conn, char *err, size_t errlen);

#endif
