#include "pg/migrate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "pg/db_internal.h"

/* Arbitrary but fixed: every storage-consumer instance takes the same lock. */
#define MIGRATE_LOCK_KEY "7301946530471288117"

/* Where migration m stands: its checksum against the one recorded when it
 * was applied. Returns 0, or -1 with err. */
static int check_migration(PGconn *conn, const migration_t *m, migration_status_t *ms, char *err, size_t errlen)
{
    PGresult *res;
    const char *params[2] = {m->name, m->sql};
    /* The checksum is PostgreSQL's md5 of the file: no extra dependency,
     * and anyone can recompute it with psql. */
    if (!(res = db_query(conn, "SELECT md5($2), (SELECT checksum FROM storage_consumer_migrations WHERE name = $1)",
                         2, params, NULL, NULL, 0, err, errlen, NULL)))
        return -1;
    snprintf(ms->checksum, sizeof ms->checksum, "%s", PQgetvalue(res, 0, 0));
    snprintf(ms->applied_checksum, sizeof ms->applied_checksum, "%s",
             PQgetisnull(res, 0, 1) ? "" : PQgetvalue(res, 0, 1));
    ms->state = PQgetisnull(res, 0, 1)                            ? MIGRATION_PENDING
                : strcmp(ms->applied_checksum, ms->checksum) == 0 ? MIGRATION_APPLIED
                                                                  : MIGRATION_EDITED;
    PQclear(res);
    return 0;
}

/* An applied migration whose file changed since: refused, never skipped. */
static int refuse_edited(const migration_t *m, const migration_status_t *ms, char *err, size_t errlen)
{
    snprintf(err, errlen,
             "migration %s was edited after it was applied (applied checksum %s, file checksum %s): "
             "restore the file and add a new migration instead",
             m->name, ms->applied_checksum, ms->checksum);
    return -1;
}

bool migration_needs_registry(const migration_t *m)
{
    static const char *const builtin[] = {"0001_app_stats.sql", "0002_reviews.sql", "0003_network_metrics.sql",
                                          "0008_reviews_fillfactor.sql", NULL};
    for (int i = 0; builtin[i]; i++)
        if (strcmp(m->name, builtin[i]) == 0) return true;
    return false;
}

/* Runs inside the caller's transaction, under the advisory lock. */
static int apply_all(PGconn *conn, char *err, size_t errlen)
{
    PGresult *res = NULL;
    char why[1024];
    int applied = 0, waiting = 0;

    if (!(res = db_query(conn, "SELECT to_regclass('apps_registry_application') IS NULL", 0, NULL, NULL, NULL, 0,
                         err, errlen, NULL)))
        return -1;
    bool no_registry = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);

    if (db_command(conn,
                   "CREATE TABLE IF NOT EXISTS storage_consumer_migrations ("
                   " name TEXT PRIMARY KEY,"
                   " checksum TEXT NOT NULL,"
                   " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
                   0, why, sizeof why, NULL)) {
        snprintf(err, errlen, "creating storage_consumer_migrations: %s", why);
        return -1;
    }

    for (unsigned i = 0; i < migration_count; i++) {
        const migration_t *m = &migrations[i];
        migration_status_t ms;
        if (check_migration(conn, m, &ms, err, errlen)) return -1;
        const char *checksum = ms.checksum;
        if (ms.state == MIGRATION_EDITED) return refuse_edited(m, &ms, err, errlen);
        if (ms.state == MIGRATION_APPLIED) continue;
        if (no_registry && migration_needs_registry(m)) {
            waiting++;
            continue;
        }

        if (db_command(conn, m->sql, 0, why, sizeof why, NULL)) {
            snprintf(err, errlen, "migration %s failed: %s", m->name, why);
            return -1;
        }
        const char *rec[2] = {m->name, checksum};
        if (!(res = db_query(conn, "INSERT INTO storage_consumer_migrations (name, checksum) VALUES ($1, $2)", 2,
                             rec, NULL, NULL, 0, err, errlen, NULL)))
            return -1;
        PQclear(res);
        LOG_INFO_F("migrate", LOG_FIELDS(LF_STR("migration", m->name), LF_STR("checksum", checksum)), "applied");
        applied++;
    }
    if (waiting)
        LOG_INFO_F("migrate", LOG_FIELDS(LF_INT("waiting", waiting)),
                   "the built-in pipelines' tables are not created: they reference table "
                   "apps_registry_application, which does not exist (the App API's registry); the first migrate "
                   "after it exists creates them");
    return applied;
}

int migrate_apply(PGconn *conn, char *err, size_t errlen)
{
    char why[1024];
    if (db_command(conn, "BEGIN", 0, err, errlen, NULL)) return -1;
    /* Transaction-scoped: released by COMMIT or ROLLBACK, even if we crash. */
    if (db_command(conn, "SELECT pg_advisory_xact_lock(" MIGRATE_LOCK_KEY ")", 0, err, errlen, NULL)) {
        db_command(conn, "ROLLBACK", 0, why, sizeof why, NULL);
        return -1;
    }
    int applied = apply_all(conn, err, errlen);
    if (applied < 0) {
        db_command(conn, "ROLLBACK", 0, why, sizeof why, NULL);
        return -1;
    }
    if (db_command(conn, "COMMIT", 0, err, errlen, NULL)) return -1;
    return applied;
}

int migrate_status(db_conn_t *conn, schema_status_t *status, char *err, size_t errlen)
{
    char why[1024];
    PGresult *res = db_select(conn,
                              "SELECT to_regclass('apps_registry_application') IS NOT NULL,"
                              " to_regclass('storage_consumer_migrations') IS NOT NULL",
                              0, NULL, 0, why, sizeof why);
    memset(status, 0, sizeof *status);
    if (!res) {
        snprintf(err, errlen, "cannot read the catalog: %s", why);
        return -1;
    }
    status->apps_table = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    status->tracked = strcmp(PQgetvalue(res, 0, 1), "t") == 0;
    PQclear(res);
    if (!status->tracked) return 0;

    status->migrations = calloc(migration_count ? migration_count : 1, sizeof *status->migrations);
    if (!status->migrations) abort();
    for (unsigned i = 0; i < migration_count; i++) {
        if (check_migration(conn, &migrations[i], &status->migrations[i], why, sizeof why)) {
            snprintf(err, errlen, "cannot read storage_consumer_migrations: %s", why);
            return -1;
        }
        if (status->migrations[i].state == MIGRATION_PENDING && !status->apps_table &&
            migration_needs_registry(&migrations[i]))
            status->migrations[i].state = MIGRATION_WAITING;
    }
    res = db_select(conn, "SELECT name FROM storage_consumer_migrations ORDER BY name", 0, NULL, 0, why,
                    sizeof why);
    if (!res) {
        snprintf(err, errlen, "cannot read storage_consumer_migrations: %s", why);
        return -1;
    }
    status->unknown = calloc((size_t)PQntuples(res) + 1, sizeof *status->unknown);
    if (!status->unknown) abort();
    for (int r = 0; r < PQntuples(res); r++) {
        const char *name = PQgetvalue(res, r, 0);
        bool known = false;
        for (unsigned i = 0; i < migration_count && !known; i++) known = strcmp(migrations[i].name, name) == 0;
        if (known) continue;
        if (!(status->unknown[status->unknown_count++] = strdup(name))) abort();
    }
    PQclear(res);
    return 0;
}

void migrate_status_free(schema_status_t *status)
{
    for (size_t i = 0; i < status->unknown_count; i++) free(status->unknown[i]);
    free(status->unknown);
    free(status->migrations);
    memset(status, 0, sizeof *status);
}

int migrate_pending(db_conn_t *conn, char *pending, size_t plen, char *err, size_t errlen)
{
    schema_status_t st;
    int count = 0;
    size_t used = 0;
    if (plen) pending[0] = '\0';
    if (migrate_status(conn, &st, err, errlen)) {
        migrate_status_free(&st);
        return -1;
    }
    for (unsigned i = 0; i < migration_count; i++) {
        if (st.tracked && st.migrations[i].state == MIGRATION_EDITED) {
            refuse_edited(&migrations[i], &st.migrations[i], err, errlen);
            migrate_status_free(&st);
            return -1;
        }
        if (st.tracked && st.migrations[i].state == MIGRATION_APPLIED) continue;
        if (st.tracked ? st.migrations[i].state == MIGRATION_WAITING
                       : !st.apps_table && migration_needs_registry(&migrations[i]))
            continue;
        count++;
        if (used < plen)
            used += (size_t)snprintf(pending + used, plen - used, "%s%s", used ? ", " : "", migrations[i].name);
    }
    migrate_status_free(&st);
    return count;
}
