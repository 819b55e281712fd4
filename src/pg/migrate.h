/* migrate — the schema storage-consumer owns (DESIGN.md: Migrations).
 *
 * The numbered files of migrations/ are compiled into the binary. They are
 * applied in order inside one transaction that holds an advisory lock, so
 * two instances starting together apply each file once. Each applied file is
 * recorded in storage_consumer_migrations with its checksum: a file edited
 * after it was applied is reported and refused, never silently skipped. */
#ifndef STORAGE_MIGRATE_H
#define STORAGE_MIGRATE_H

#include <stdbool.h>
#include <stddef.h>

#include "pg/db.h"

typedef struct {
    const char *name; /* "0001_app_stats.sql" */
    const char *sql;
} migration_t;

extern const migration_t migrations[];
extern const unsigned migration_count;

/* Whether `m` creates or changes a built-in pipeline's table (app_stats,
 * reviews, network_metrics), whose application_id references the App
 * API's registry (apps_registry_application): such a migration waits
 * until the registry exists, and a database without it, whose pipelines
 * are the user's own, never needs it (DESIGN.md: Migrations). */
bool migration_needs_registry(const migration_t *m);

/* Apply every pending migration (those needing the registry only where it
 * exists). Returns the number applied (0 when the schema is current), or
 * -1 with the reason in `err`: an applied file was edited, or a statement
 * failed (then nothing of this run is kept). */
int migrate_apply(db_conn_t *conn, char *err, size_t errlen);

/* Where a migration of this binary stands in a database. WAITING: not
 * applied, and not needed yet: it needs the registry, which the database
 * lacks. */
typedef enum { MIGRATION_APPLIED, MIGRATION_PENDING, MIGRATION_EDITED, MIGRATION_WAITING } migration_state_t;

typedef struct {
    migration_state_t state;
    char checksum[33];         /* this binary's file */
    char applied_checksum[33]; /* as recorded when it was applied ("" if pending) */
} migration_status_t;

/* What verify reports about the schema, read without changing anything. */
typedef struct {
    bool apps_table; /* apps_registry_application exists */
    bool tracked;    /* storage_consumer_migrations exists (else nothing below is filled) */
    migration_status_t *migrations; /* [migration_count] */
    char **unknown;  /* applied migrations this binary does not know */
    size_t unknown_count;
} schema_status_t;

/* Fill *status (free it with migrate_status_free). Returns 0, or -1 with the
 * reason in `err`, naming what could not be read. */
int migrate_status(db_conn_t *conn, schema_status_t *status, char *err, size_t errlen);
void migrate_status_free(schema_status_t *status);

/* Read-only, no lock taken, nothing created (DESIGN.md: Least privilege):
 * the number of this binary's migrations the database lacks (a waiting
 * one is not lacking), their names
 * comma-separated in `pending`; or -1 with the reason in `err` (the catalog
 * cannot be read, an applied migration was edited). Needs only SELECT on
 * storage_consumer_migrations. */
int migrate_pending(db_conn_t *conn, char *pending, size_t plen, char *err, size_t errlen);

#endif
