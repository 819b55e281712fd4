/* storage-consumer — Kafka topics into PostgreSQL, nothing lost, nothing
 * duplicated. main parses the command line and the settings and decides the
 * exit code; the work is done by the modules it calls. */
#include <jansson.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_settings.h"
#include "crash.h"
#include "env_file.h"
#include "exit_code.h"
#include "kafka/conf.h"
#include "log.h"
#include "ops/ops.h"
#include "pg/db.h"
#include "pg/catalog.h"
#include "pg/migrate.h"
#include "settings.h"
#include "supervisor.h"

#ifndef STORAGE_VERSION
#define STORAGE_VERSION "0.1.0"
#endif

extern char **environ;

static void usage(FILE *out)
{
    fputs("usage: storage-consumer [--env-file PATH] [COMMAND]\n"
          "       storage-consumer --version | -V\n"
          "\n"
          "Consumes the app-stats, reviews and network-metrics topics and stores every\n"
          "message in PostgreSQL: offsets move only after the rows are committed, and\n"
          "every write is idempotent, so redelivery never duplicates a row.\n"
          "\n"
          "commands:\n"
          "  run [--no-migrate]\n"
          "              (the default) apply pending migrations, then consume until\n"
          "              SIGTERM/SIGINT; exits 1 if any pipeline fails, so the orchestrator\n"
          "              restarts it. A current schema is only read (no DDL); with\n"
          "              --no-migrate or STORAGE_MIGRATE=off a schema that is behind exits 1\n"
          "              naming the missing migrations\n"
          "  migrate     apply the schema migrations and exit\n"
          "  health      exit 0 if every enabled pipeline runs with a fresh heartbeat,\n"
          "              else 1 (a stopped pipeline at once, a killed one once stale)\n"
          "  verify [--max-lag N] [--json]\n"
          "              check the deployment stage by stage (schema, topics, messages,\n"
          "              rows, unresolved dead letters, lag); exit 1 names the first\n"
          "              broken stage; --json: one JSON document\n"
          "  replay PIPELINE [--to earliest|latest|ISO-8601]\n"
          "              reset that pipeline's consumer group (only it) so the topic is\n"
          "              read again from there; refused while the group has members\n"
          "  dead-letters list|show ID|redrive|resolve|purge [OPTIONS]\n"
          "              inspect dead letters (list, show: --json too); redrive stores\n"
          "              those that now succeed and marks them resolved; resolve\n"
          "              acknowledges garbage with a note; purge --older-than AGE\n"
          "              deletes resolved ones (`dead-letters --help` for details)\n"
          "  version     print the version and those of the libraries, and exit\n"
          "  --help      this text\n"
          "\n"
          "options:\n"
          "  --env-file PATH   read NAME=value lines into the environment first (the\n"
          "                    rules: docs/OPERATIONS.md, The env file); variables\n"
          "                    already set in the environment win\n"
          "  --version, -V     same as the version command\n"
          "\n"
          "Settings come from STORAGE_* environment variables (see docs/OPERATIONS.md).\n"
          "exit codes: 0 clean stop, 1 runtime failure, 2 configuration or usage error\n"
          "\n",
          out);
    /* The per-pipeline settings of the pipelines this environment defines. */
    char err[1024];
    if (pipelines_load(getenv("STORAGE_PIPELINES_FILE"), err, sizeof err)) {
        fprintf(out, "(STORAGE_PIPELINES_FILE: %s; the built-in pipelines' settings are listed)\n\n", err);
        if (pipelines_load(NULL, err, sizeof err)) abort();
    }
    settings_print_catalog(out);
}

/* Connect for the schema's work: no statement timeout, since a migration
 * building an index on a large table, or a second instance waiting on the
 * advisory lock, may take long. */
static db_conn_t *schema_connect(const settings_t *s)
{
    char err[2048];
    db_conn_t *conn = db_connect(s->database_url, 0, 0, err, sizeof err);
    if (!conn) {
        char *masked = db_mask_conninfo(s->database_url);
        LOG_ERROR("migrate", "cannot connect to PostgreSQL (%s): %s", masked, err);
        free(masked);
    }
    return conn;
}

static void log_schema_current(int applied)
{
    LOG_INFO_F("migrate", LOG_FIELDS(LF_INT("applied", applied), LF_INT("total", migration_count)),
               "schema is current");
}

static int cmd_migrate(const settings_t *s)
{
    char err[2048];
    db_conn_t *conn = schema_connect(s);
    if (!conn) return EXIT_FAILED;
    int applied = migrate_apply(conn, err, sizeof err);
    db_close(conn);
    if (applied < 0) {
        LOG_ERROR("migrate", "%s", err);
        return EXIT_FAILED;
    }
    log_schema_current(applied);
    return EXIT_OK;
}

/* Before run: the schema read first, without a lock or any DDL, so that a
 * runtime role without CREATE starts against a current schema; pending
 * migrations applied only when `migrate` (DESIGN.md: Least privilege). */
static int ensure_schema(const settings_t *s, bool migrate)
{
    char err[2048], pending[1024];
    db_conn_t *conn = schema_connect(s);
    if (!conn) return EXIT_FAILED;
    int missing = migrate_pending(conn, pending, sizeof pending, err, sizeof err);
    if (missing > 0 && migrate) {
        int applied = migrate_apply(conn, err, sizeof err);
        if (applied >= 0) log_schema_current(applied);
        /* 42501: insufficient privilege, a runtime role without DDL rights. */
        if (applied < 0 && strstr(err, "42501"))
            snprintf(err + strlen(err), sizeof err - strlen(err),
                     " (%s missing; a role without DDL rights: apply them with `storage-consumer migrate` as "
                     "the migration role and run with STORAGE_MIGRATE=off)",
                     pending);
        missing = applied < 0 ? -1 : 0;
    } else if (missing > 0) {
        snprintf(err, sizeof err,
                 "the schema is behind this release: %d migration(s) missing (%s); STORAGE_MIGRATE=off "
                 "(or --no-migrate): apply them with `storage-consumer migrate` as the migration role",
                 missing, pending);
        missing = -1;
    }
    db_close(conn);
    if (missing < 0) {
        LOG_ERROR("migrate", "%s", err);
        return EXIT_FAILED;
    }
    return EXIT_OK;
}

/* The pipelines' checks from their tables as they are now (DESIGN.md:
 * Pipelines are declared): a definition that disagrees with its table
 * stops start-up naming the pipeline, the field and the column. */
static int bind_pipelines(const settings_t *s)
{
    char err[2048];
    db_conn_t *conn = schema_connect(s);
    if (!conn) return EXIT_FAILED;
    int rc = catalog_bind_pipelines(conn, s->pipeline_enabled, err, sizeof err);
    db_close(conn);
    if (rc < 0) LOG_ERROR("pipelines", "cannot read the tables' columns: %s", err);
    if (rc > 0) LOG_ERROR("pipelines", "the definition disagrees with the database: %s", err);
    return rc ? EXIT_FAILED : EXIT_OK;
}

static int cmd_run(const settings_t *s, bool migrate)
{
    char *masked = db_mask_conninfo(s->database_url);
    LOG_INFO_F("main", LOG_FIELDS(LF_STR("database", masked), LF_STR("kafka", s->bootstrap_servers)),
               "storage-consumer %s starting", STORAGE_VERSION);
    free(masked);
    /* A schema that cannot be made current exits 1 before any pipeline starts. */
    if (ensure_schema(s, migrate) != EXIT_OK || bind_pipelines(s) != EXIT_OK) return EXIT_FAILED;
    return supervisor_run(s, STORAGE_VERSION);
}

static void print_version(void)
{
    /* The libraries' versions as loaded at run time, not as compiled. */
    printf("storage-consumer %s\n", STORAGE_VERSION);
    printf("librdkafka %s\n", kafka_library_version());
    printf("libpq %s\n", db_library_version());
    printf("jansson %s\n", jansson_version_str());
    printf("libmicrohttpd %s\n", MHD_get_version());
}

int main(int argc, char **argv)
{
    const char *command = "run";
    int i = 1;
    bool no_migrate = false;
    settings_t settings;
    char err[1024];
    int rc;

    alloc_settings_apply();
    atexit(pipelines_free);

    for (; i < argc; i++) {
        if (strcmp(argv[i], "--env-file") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "storage-consumer: --env-file needs a path\n");
                return EXIT_USAGE;
            }
            if (env_file_load(argv[++i], err, sizeof err)) {
                fprintf(stderr, "storage-consumer: --env-file %s\n", err);
                env_file_forget();
                return EXIT_USAGE;
            }
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0 ||
                   strcmp(argv[i], "help") == 0) {
            usage(stdout);
            return EXIT_OK;
        } else if (strcmp(argv[i], "--version") == 0 || strcmp(argv[i], "-V") == 0) {
            print_version();
            return EXIT_OK;
        } else if (strcmp(argv[i], "--no-migrate") == 0) {
            no_migrate = true;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "storage-consumer: unknown option %s\n", argv[i]);
            usage(stderr);
            return EXIT_USAGE;
        } else {
            command = argv[i++];
            break;
        }
    }
    /* run's own option may follow it. */
    if (strcmp(command, "run") == 0)
        for (; i < argc && strcmp(argv[i], "--no-migrate") == 0; i++) no_migrate = true;
    env_file_forget();
    if (no_migrate && strcmp(command, "run") != 0) {
        fprintf(stderr, "storage-consumer: --no-migrate is an option of run, not of %s\n", command);
        return EXIT_USAGE;
    }

    if (strcmp(command, "version") == 0) {
        print_version();
        return EXIT_OK;
    }

    if (settings_load(&settings, environ, err, sizeof err)) {
        fprintf(stderr, "storage-consumer: invalid setting: %s\n", err);
        return EXIT_USAGE;
    }
    log_configure(settings.log_level, settings.log_format);
    crash_report_install(settings.log_format);
    for (char **e = environ; *e; e++)
        if (strncmp(*e, "STORAGE_", 8) == 0 && settings_is_kubernetes_service_variable(*e))
            LOG_DEBUG("settings", "ignoring %.*s: a variable Kubernetes sets for a Service", (int)strcspn(*e, "="), *e);
    /* librdkafka's own messages (its log, its errors) may quote a secret
     * property's value: the log, and the commands' error messages, redact
     * those values wherever they turn up. */
    for (size_t k = 0; k < settings.kafka_property_count; k++)
        if (settings_kafka_property_is_secret(settings.kafka_properties[k].name))
            log_add_secret(settings.kafka_properties[k].value);
    /* Every configuration error exits 2 here, before any migration or
     * connection (DESIGN.md: Settings catalog). */
    if (db_check_conninfo(settings.database_url, err, sizeof err)) {
        fprintf(stderr, "storage-consumer: invalid setting: STORAGE_DATABASE_URL: %s\n", err);
        settings_free(&settings);
        return EXIT_USAGE;
    }
    if (strcmp(command, "run") == 0 && kafka_conf_check(&settings, err, sizeof err)) {
        fprintf(stderr, "storage-consumer: invalid setting: %s\n", err);
        settings_free(&settings);
        return EXIT_USAGE;
    }

    /* Commands with arguments of their own get them with argv[0] = command. */
    const struct {
        const char *name;
        int (*fn)(const settings_t *, int, char **);
    } with_args[] = {
        {"dead-letters", ops_dead_letters},
        {"verify", ops_verify},
        {"replay", ops_replay},
        {NULL, NULL}, /* sentinel */
    };
    for (size_t k = 0; with_args[k].name; k++) {
        if (strcmp(command, with_args[k].name) == 0) {
            rc = with_args[k].fn(&settings, argc - i + 1, argv + i - 1);
            settings_free(&settings);
            return rc;
        }
    }
    if (i != argc) {
        fprintf(stderr, "storage-consumer: unexpected argument %s\n", argv[i]);
        rc = EXIT_USAGE;
    } else if (strcmp(command, "run") == 0) {
        rc = cmd_run(&settings, settings.migrate && !no_migrate);
    } else if (strcmp(command, "migrate") == 0) {
        rc = cmd_migrate(&settings);
    } else if (strcmp(command, "health") == 0) {
        rc = supervisor_health(&settings);
    } else {
        fprintf(stderr, "storage-consumer: unknown command %s\n", command);
        usage(stderr);
        rc = EXIT_USAGE;
    }
    settings_free(&settings);
    return rc;
}
