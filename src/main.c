/* storage-consumer — Kafka topics into PostgreSQL, nothing lost, nothing
 * duplicated. main parses the command line and the settings and decides the
 * exit code; the work is done by the modules it calls. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exit_code.h"
#include "kafka/conf.h"
#include "log.h"
#include "ops/ops.h"
#include "pg/db.h"
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
          "\n"
          "Consumes the app-stats, reviews and network-metrics topics and stores every\n"
          "message in PostgreSQL: offsets move only after the rows are committed, and\n"
          "every write is idempotent, so redelivery never duplicates a row.\n"
          "\n"
          "commands:\n"
          "  run         (the default) apply migrations, then consume until SIGTERM/SIGINT;\n"
          "              exits 1 if any pipeline fails, so the orchestrator restarts it\n"
          "  migrate     apply the schema migrations and exit\n"
          "  health      exit 0 if every enabled pipeline runs with a fresh heartbeat,\n"
          "              else 1 (a stopped pipeline at once, a killed one once stale)\n"
          "  verify [--max-lag N]\n"
          "              check the deployment stage by stage (schema, topics, messages,\n"
          "              rows, dead letters, lag); exit 1 names the first broken stage\n"
          "  replay PIPELINE [--to earliest|latest|ISO-8601]\n"
          "              reset that pipeline's consumer group (only it) so the topic is\n"
          "              read again from there; refused while the group has members\n"
          "  dead-letters list|show ID|redrive [--pipeline P] [--type T] [--dry-run]\n"
          "              inspect dead letters; redrive stores those that now succeed and\n"
          "              marks them resolved (`dead-letters --help` for details)\n"
          "  version     print the version and exit\n"
          "  --help      this text\n"
          "\n"
          "options:\n"
          "  --env-file PATH   read NAME=value lines (# comments) into the environment\n"
          "                    first; variables already set in the environment win\n"
          "\n"
          "Settings come from STORAGE_* environment variables (see README.md).\n"
          "exit codes: 0 clean stop, 1 runtime failure, 2 configuration or usage error\n",
          out);
}

/* Load NAME=value lines into the environment without overriding variables
 * that are already set: the explicit environment beats the file. */
static int load_env_file(const char *path)
{
    FILE *f = fopen(path, "r");
    char line[8192];
    int lineno = 0;
    if (!f) {
        fprintf(stderr, "storage-consumer: --env-file %s: %s\n", path, strerror(errno));
        return -1;
    }
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *p = line;
        size_t n = strlen(p);
        while (n > 0 && (p[n - 1] == '\n' || p[n - 1] == '\r')) p[--n] = '\0';
        while (*p == ' ' || *p == '\t') p++;
        if (*p == '\0' || *p == '#') continue;
        if (strncmp(p, "export ", 7) == 0) p += 7;
        char *eq = strchr(p, '=');
        if (!eq || eq == p) {
            fprintf(stderr, "storage-consumer: --env-file %s:%d: expected NAME=value\n", path, lineno);
            fclose(f);
            return -1;
        }
        *eq = '\0';
        char *value = eq + 1;
        n = strlen(value);
        if (n >= 2 && (value[0] == '"' || value[0] == '\'') && value[n - 1] == value[0]) {
            value[n - 1] = '\0';
            value++;
        }
        setenv(p, value, 0);
    }
    fclose(f);
    return 0;
}

static int cmd_migrate(const settings_t *s, bool quiet_when_current)
{
    char err[2048];
    char *masked = db_mask_conninfo(s->database_url);
    /* No statement timeout: a migration building an index on a large table,
     * or a second instance waiting on the advisory lock, may take long. */
    db_conn_t *conn = db_connect(s->database_url, 0, 0, err, sizeof err);
    if (!conn) {
        LOG_ERROR("migrate", "cannot connect to PostgreSQL (%s): %s", masked, err);
        free(masked);
        return EXIT_FAILED;
    }
    free(masked);
    int applied = migrate_apply(conn, err, sizeof err);
    db_close(conn);
    if (applied < 0) {
        LOG_ERROR("migrate", "%s", err);
        return EXIT_FAILED;
    }
    if (applied > 0 || !quiet_when_current)
        LOG_INFO_F("migrate", LOG_FIELDS(LF_INT("applied", applied), LF_INT("total", migration_count)),
                   "schema is current");
    return EXIT_OK;
}

static int cmd_run(const settings_t *s)
{
    char err[1024];
    char *masked;
    if (kafka_conf_check(s, err, sizeof err)) {
        fprintf(stderr, "storage-consumer: invalid setting: %s\n", err);
        return EXIT_USAGE;
    }
    masked = db_mask_conninfo(s->database_url);
    LOG_INFO_F("main", LOG_FIELDS(LF_STR("database", masked), LF_STR("kafka", s->bootstrap_servers)),
               "storage-consumer %s starting", STORAGE_VERSION);
    free(masked);
    /* A migration error exits 1 before any pipeline starts. */
    if (cmd_migrate(s, true) != EXIT_OK) return EXIT_FAILED;
    return supervisor_run(s);
}

int main(int argc, char **argv)
{
    const char *command = "run";
    int i = 1;
    settings_t settings;
    char err[1024];
    int rc;

    for (; i < argc; i++) {
        if (strcmp(argv[i], "--env-file") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "storage-consumer: --env-file needs a path\n");
                return EXIT_USAGE;
            }
            if (load_env_file(argv[++i])) return EXIT_USAGE;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0 ||
                   strcmp(argv[i], "help") == 0) {
            usage(stdout);
            return EXIT_OK;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "storage-consumer: unknown option %s\n", argv[i]);
            usage(stderr);
            return EXIT_USAGE;
        } else {
            command = argv[i++];
            break;
        }
    }

    if (strcmp(command, "version") == 0) {
        printf("storage-consumer %s\n", STORAGE_VERSION);
        return EXIT_OK;
    }

    if (settings_load(&settings, environ, err, sizeof err)) {
        fprintf(stderr, "storage-consumer: invalid setting: %s\n", err);
        return EXIT_USAGE;
    }
    log_configure(settings.log_level, settings.log_format);
    /* librdkafka's own messages (its log, its errors) may quote a secret
     * property's value: the log, and the commands' error messages, redact
     * those values wherever they turn up. */
    for (size_t k = 0; k < settings.kafka_property_count; k++)
        if (settings_kafka_property_is_secret(settings.kafka_properties[k].name))
            log_add_secret(settings.kafka_properties[k].value);
    if (db_check_conninfo(settings.database_url)) {
        /* libpq's own message would quote the URI, password included. */
        fprintf(stderr, "storage-consumer: invalid setting: STORAGE_DATABASE_URL: not a valid libpq conninfo or URI\n");
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
        rc = cmd_run(&settings);
    } else if (strcmp(command, "migrate") == 0) {
        rc = cmd_migrate(&settings, false);
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
