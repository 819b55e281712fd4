#include "pg/migrate.h"

#include <stdio.h>
#include <string.h>

#include "log.h"
#include "pg/db_internal.h"

/* Arbitrary but fixed: every storage-consumer instance takes the same lock. */
#define MIGRATE_LOCK_KEY "7301946530471288117"

static int query_one(PGconn *conn, const char *sql, int nparams, const char *const *params,
                     PGresult **out, char *err, size_t errlen)
{
    PGresult *res = PQexecParams(conn, sql, nparams, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK && PQresultStatus(res) != PGRES_COMMAND_OK) {
        db_describe(conn, res, err, errlen);
        PQclear(res);
        return -1;
    }
    *out = res;
    return 0;
}

/* Runs inside the caller's transaction, under the advisory lock. */
static int apply_all(PGconn *conn, char *err, size_t errlen)
{
    PGresult *res = NULL;
    char why[1024];
    int applied = 0;

    if (query_one(conn, "SELECT to_regclass('apps_registry_application') IS NULL", 0, NULL, &res,
                  err, errlen))
        return -1;
    int missing = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    if (missing) {
        snprintf(err, errlen,
                 "table apps_registry_application does not exist: apply the App API migrations first "
                 "(storage-consumer's tables reference it)");
        return -1;
    }

    if (db_exec(conn,
                "CREATE TABLE IF NOT EXISTS storage_consumer_migrations ("
                " name TEXT PRIMARY KEY,"
                " checksum TEXT NOT NULL,"
                " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
                why, sizeof why, NULL)) {
        snprintf(err, errlen, "creating storage_consumer_migrations: %s", why);
        return -1;
    }

    for (unsigned i = 0; i < migration_count; i++) {
        const migration_t *m = &migrations[i];
        const char *params[2] = {m->name, m->sql};
        /* The checksum is PostgreSQL's md5 of the file: no extra dependency,
         * and anyone can recompute it with psql. */
        if (query_one(conn,
                      "SELECT md5($2), (SELECT checksum FROM storage_consumer_migrations WHERE name = $1)",
                      2, params, &res, err, errlen))
            return -1;
        char checksum[33];
        snprintf(checksum, sizeof checksum, "%s", PQgetvalue(res, 0, 0));
        int done = !PQgetisnull(res, 0, 1);
        int same = done && strcmp(PQgetvalue(res, 0, 1), checksum) == 0;
        if (done && !same) {
            snprintf(err, errlen,
                     "migration %s was edited after it was applied (applied checksum %s, file checksum %s): "
                     "restore the file and add a new migration instead",
                     m->name, PQgetvalue(res, 0, 1), checksum);
            PQclear(res);
            return -1;
        }
        PQclear(res);
        if (done) continue;

        if (db_exec(conn, m->sql, why, sizeof why, NULL)) {
            snprintf(err, errlen, "migration %s failed: %s", m->name, why);
            return -1;
        }
        const char *rec[2] = {m->name, checksum};
        if (query_one(conn, "INSERT INTO storage_consumer_migrations (name, checksum) VALUES ($1, $2)",
                      2, rec, &res, err, errlen))
            return -1;
        PQclear(res);
        LOG_INFO("migrate", "applied migration=%s checksum=%s", m->name, checksum);
        applied++;
    }
    return applied;
}

int migrate_apply(PGconn *conn, char *err, size_t errlen)
{
    char why[1024];
    if (db_exec(conn, "BEGIN", err, errlen, NULL)) return -1;
    /* Transaction-scoped: released by COMMIT or ROLLBACK, even if we crash. */
    if (db_exec(conn, "SELECT pg_advisory_xact_lock(" MIGRATE_LOCK_KEY ")", err, errlen, NULL)) {
        db_exec(conn, "ROLLBACK", why, sizeof why, NULL);
        return -1;
    }
    int applied = apply_all(conn, err, errlen);
    if (applied < 0) {
        db_exec(conn, "ROLLBACK", why, sizeof why, NULL);
        return -1;
    }
    if (db_exec(conn, "COMMIT", err, errlen, NULL)) return -1;
    return applied;
}
