/* verify — is this deployment storing what it is sent? (DESIGN.md: Operations)
 *
 * Checked stage by stage, in the order a message travels, one line per
 * stage on stdout:
 *
 *   schema        every migration of this binary applied, checksums match,
 *                 and each enabled pipeline's definition matches its table
 *   registry      only when a pipeline reads the schema registry's wire
 *                 format: the registry answers with the configured
 *                 credentials, and each such pipeline's fields are in its
 *                 subject's latest schema
 *   topics        each enabled pipeline's topic exists, with its partitions
 *   messages      what the topics hold (high watermarks)
 *   rows          what the tables hold
 *   dead-letters  what could never be stored and no one dealt with yet: the
 *                 unresolved dead letters by error_type, the newest (the
 *                 resolved ones, redriven or acknowledged, are only counted:
 *                 DESIGN.md, Resolving dead letters)
 *   positions     each group's two records of its progress, per partition:
 *                 the database's position and Kafka's committed offset, and
 *                 which is ahead (DESIGN.md, Progress in the database)
 *   lag           where each group would start against the high watermarks
 *
 * Each line says ok, warn, BROKEN or skip (an earlier broken stage left
 * nothing to check). A stage is BROKEN when the pipeline cannot work or has
 * lost data:
 *   schema        the database is unreachable, the App API's table is missing,
 *                 a migration is not applied, an applied one was edited, or
 *                 a definition disagrees with its table (the words run's
 *                 start-up would exit with)
 *   registry      the registry does not answer or refuses the credentials,
 *                 or a required field is not in the subject's latest schema
 *   topics        a topic is missing, a partition has no leader, or the
 *                 cluster does not answer
 *   messages      the watermarks of a partition cannot be read
 *   rows          a table cannot be counted
 *   dead-letters  the table cannot be read
 *   positions     Kafka's committed offsets or the database's positions
 *                 cannot be read
 *   lag           a start position (the database's, else Kafka's committed
 *                 offset: where the service starts) lies below the log start
 *                 (retention deleted messages before they were stored) or
 *                 beyond the high watermark (the topic was recreated: the
 *                 group will reset); or, with --max-lag N, a group's total
 *                 lag exceeds N
 * and a warning when it works but deserves a look: a partition count other
 * than the 3 topics are created with (DESIGN.md: Architecture), migrations applied that this
 * binary does not know (a newer version migrated the database), unresolved
 * dead letters present, Kafka's committed offset ahead of the database's position (a
 * database restored from a backup: the service stores the gap again), a lag
 * above 0. An empty topic is not broken: nothing was sent yet. The database
 * ahead of Kafka is normal (Kafka's copy is committed after the database's
 * COMMIT), and a partition without a database position (the first run after
 * the upgrade) starts at Kafka's committed offset: both are said, neither is
 * a warning.
 *
 * Every stage runs, so the report is complete; the exit code is 0 when no
 * stage is broken, else 1, and the last line names the first broken stage
 * (the later ones are usually its consequences).
 *
 * With --json the same report is one JSON document on stdout instead
 * (DESIGN.md: Output for scripts), the exit code the same.
 *
 * verify only reads: topics are looked up in the metadata of all topics
 * (naming an unknown topic would create it on a broker with auto-creation
 * on), and the groups' offsets are fetched without joining them.
 *
 * The positions and lag stages are in ops/verify_positions.c, how a stage
 * is reported in ops/verify_stage.c; ops/verify.h holds what they share. */
#include "ops/ops.h"

#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "exit_code.h"
#include "kafka/cluster.h"
#include "kafka/conf.h"
#include "ops/args.h"
#include "ops/print.h"
#include "ops/verify.h"
#include "pg/catalog.h"
#include "pg/dead_letters.h"
#include "pg/db.h"
#include "pg/migrate.h"
#include "registry/registry.h"

/* count(*) of a large table may take a while; a verify must still end. */
#define VERIFY_STATEMENT_TIMEOUT_MS 60000
/* DESIGN.md: Architecture: topics are created with 3 partitions. */
#define VERIFY_EXPECTED_PARTITIONS 3

/* ------------------------------------------------------------------------ */

static void check_schema(verify_t *v)
{
    stage_t st = {0};
    char err[1024];
    schema_status_t schema;

    if (!v->conn) {
        char *masked = db_mask_conninfo(v->s->database_url);
        stage_raise(&st, STAGE_BROKEN);
        stage_add(&st, "cannot connect to PostgreSQL (%s): %s", masked, v->db_error);
        free(masked);
        goto out;
    }
    int rc = migrate_status(v->conn, &schema, err, sizeof err);
    /* The catalog was read unless it was the read that failed; the
     * registry is needed by the enabled pipelines with an application. */
    const char *resolver = NULL;
    for (int i = 0; i < pipeline_count() && !resolver; i++)
        if (v->s->pipeline_enabled[i] && pipeline_get(i)->app_member &&
            strcmp(pipeline_get(i)->lookup_table, "apps_registry_application") == 0)
            resolver = pipeline_get(i)->name;
    if ((rc == 0 || schema.tracked) && !schema.apps_table && resolver) {
        stage_raise(&st, STAGE_BROKEN);
        stage_add(&st, "table apps_registry_application does not exist: apply the App API migrations first "
                       "(pipeline %s resolves applications through it)", resolver);
    }
    if (rc != 0) {
        stage_raise(&st, STAGE_BROKEN);
        stage_add(&st, "%s", first_line(err));
    } else if (!schema.tracked) {
        stage_raise(&st, STAGE_BROKEN);
        stage_add(&st, "no migration applied (no table storage_consumer_migrations): run storage-consumer migrate");
    } else {
        unsigned applied = 0, waiting = 0;
        for (unsigned i = 0; i < migration_count; i++) {
            const migration_status_t *m = &schema.migrations[i];
            if (m->state == MIGRATION_WAITING) {
                waiting++;
            } else if (m->state == MIGRATION_PENDING) {
                stage_raise(&st, STAGE_BROKEN);
                stage_add(&st, "migration %s is not applied: run storage-consumer migrate", migrations[i].name);
            } else if (m->state == MIGRATION_EDITED) {
                stage_raise(&st, STAGE_BROKEN);
                stage_add(&st, "migration %s was edited after it was applied (applied checksum %s, this binary's %s)",
                          migrations[i].name, m->applied_checksum, m->checksum);
            } else {
                applied++;
            }
        }
        /* Applied files this binary does not have: a newer version migrated
         * the database. This binary still works with the columns it knows. */
        for (size_t i = 0; i < schema.unknown_count; i++) {
            stage_raise(&st, STAGE_WARN);
            stage_add(&st, "migration %s is applied but unknown to this binary (a newer version migrated this database)",
                      schema.unknown[i]);
        }
        if (applied + waiting == migration_count)
            stage_add(&st, "applied=%u/%u checksums match", applied, migration_count);
        else
            stage_add(&st, "applied=%u/%u", applied, migration_count);
        if (waiting)
            stage_add(&st, "%u migration(s) of the built-in pipelines' tables wait for table "
                           "apps_registry_application (not needed by pipelines of your own)", waiting);
        /* The enabled pipelines' definitions against their tables, as run
         * binds them at start (DESIGN.md: Pipelines are declared). */
        int bound = catalog_bind_pipelines(v->conn, v->s->pipeline_enabled, err, sizeof err);
        if (bound != 0) {
            stage_raise(&st, STAGE_BROKEN);
            stage_add(&st, "%s%s", bound < 0 ? "cannot read the tables' columns: " : "", first_line(err));
        } else {
            stage_add(&st, "the tables match the pipelines' definitions");
        }
    }
    migrate_status_free(&schema);
out:
    stage_finish(v, "schema", &st);
}

static void registry_said(void *ctx, int level, const char *text)
{
    stage_t *st = ctx;
    stage_raise(st, level == REGISTRY_BROKEN ? STAGE_BROKEN : level == REGISTRY_WARN ? STAGE_WARN : STAGE_OK);
    stage_add(st, "%s", text);
}

/* The schema registry, when an enabled pipeline reads its wire format:
 * reachable with the configured credentials, and each such pipeline's
 * fields in its subject's latest schema (DESIGN.md: Formats). */
static void check_registry(verify_t *v)
{
    bool needed = false;
    for (int i = 0; i < v->nt; i++)
        needed = needed || FORMAT_NEEDS_REGISTRY(v->t[i].def->format) || FORMAT_NEEDS_REGISTRY(v->t[i].def->key_format);
    if (!needed) return;
    stage_t st = {0};
    char why[400];
    registry_t *r = registry_new(v->s, NULL);
    if (registry_reachable(r, why, sizeof why) != 0) {
        stage_raise(&st, STAGE_BROKEN);
        stage_add(&st, "schema registry unreachable: %s", why);
    } else {
        for (int i = 0; i < v->nt; i++)
            if (FORMAT_NEEDS_REGISTRY(v->t[i].def->format))
                registry_compare(r, v->t[i].def, v->t[i].topic, registry_said, &st);
    }
    registry_free(r);
    stage_finish(v, "registry", &st);
}

static void check_topics(verify_t *v)
{
    stage_t st = {0};
    char err[1024];
    bool unreachable = false;

    for (int i = 0; i < v->nt; i++) {
        target_t *t = &v->t[i];
        if (!t->enabled) continue;
        t->exists = -1;
        if (unreachable) continue;
        if (!t->client) {
            stage_raise(&st, STAGE_BROKEN);
            stage_add(&st, "%s: no Kafka client", t->topic);
            continue;
        }
        int r = cluster_topic_lookup(t->client, t->topic, VERIFY_KAFKA_TIMEOUT_MS, &t->info, err, sizeof err);
        if (r < 0) {
            /* One unanswered request is enough: do not wait again per topic. */
            unreachable = true;
            stage_raise(&st, STAGE_BROKEN);
            stage_add(&st, "%s (%s)", err, v->s->bootstrap_servers);
            continue;
        }
        t->exists = r;
        if (r == 0) {
            stage_raise(&st, STAGE_BROKEN);
            stage_add(&st, "topic %s (pipeline %s) does not exist", t->topic, t->def->name);
            continue;
        }
        stage_add(&st, "%s partitions=%d", t->topic, t->info.partitions);
        if (t->info.partitions != VERIFY_EXPECTED_PARTITIONS) {
            stage_raise(&st, STAGE_WARN);
            stage_add(&st, "%s has %d partitions, topics are created with %d", t->topic,
                      t->info.partitions, VERIFY_EXPECTED_PARTITIONS);
        }
        if (t->info.leaderless > 0) {
            stage_raise(&st, STAGE_BROKEN);
            stage_add(&st, "%s: %d of %d partitions have no leader (nothing can be read from them)",
                      t->topic, t->info.leaderless, t->info.partitions);
        }
    }
    stage_finish(v, "topics", &st);
}

static void check_messages(verify_t *v)
{
    stage_t st = {.status = STAGE_SKIP};

    for (int i = 0; i < v->nt; i++) {
        target_t *t = &v->t[i];
        if (!t->enabled) continue;
        if (t->exists != 1) {
            stage_add(&st, "%s not checked", t->topic);
            continue;
        }
        int n = t->info.partitions;
        t->lo = calloc((size_t)n + 1, sizeof *t->lo);
        t->hi = calloc((size_t)n + 1, sizeof *t->hi);
        if (!t->lo || !t->hi) abort();
        long long total = 0;
        char marks[1024];
        size_t len = 0;
        marks[0] = '\0';
        bool failed = false;
        for (int p = 0; p < n; p++) {
            char err[512];
            if (cluster_watermarks(t->client, t->topic, p, VERIFY_KAFKA_TIMEOUT_MS, &t->lo[p], &t->hi[p],
                                   err, sizeof err)) {
                t->lo[p] = t->hi[p] = -1;
                failed = true;
                stage_raise(&st, STAGE_BROKEN);
                stage_add(&st, "%s [%d]: cannot read the watermarks: %s", t->topic, p, err);
            } else {
                total += t->hi[p] - t->lo[p];
            }
            int w = snprintf(marks + len, sizeof marks - len, "%s%" PRId64, p ? "," : "", t->hi[p]);
            if (w > 0 && (size_t)w < sizeof marks - len) len += (size_t)w;
        }
        if (!failed) stage_raise(&st, STAGE_OK);
        stage_add(&st, "%s messages=%lld high_watermarks=%s%s", t->topic, total, marks,
                  total == 0 && !failed ? " (empty)" : "");
        bool trimmed = false;
        for (int p = 0; p < n; p++) trimmed |= t->lo[p] > 0;
        if (trimmed) {
            len = 0;
            for (int p = 0; p < n; p++) {
                int w = snprintf(marks + len, sizeof marks - len, "%s%" PRId64, p ? "," : "", t->lo[p]);
                if (w > 0 && (size_t)w < sizeof marks - len) len += (size_t)w;
            }
            stage_add(&st, "%s log_start=%s (retention removed older messages)", t->topic, marks);
        }
    }
    stage_finish(v, "messages", &st);
}

static void check_rows(verify_t *v)
{
    stage_t st = {.status = STAGE_SKIP};
    char err[1024];

    if (!v->conn) {
        stage_add(&st, "database unreachable");
        goto out;
    }
    for (int i = 0; i < v->nt; i++) {
        target_t *t = &v->t[i];
        long long rows;
        if (!t->enabled || !t->first_of_pipeline) continue;
        if (db_count_rows(v->conn, t->def->table_sql, &rows, err, sizeof err)) {
            stage_raise(&st, STAGE_BROKEN);
            stage_add(&st, "%s: %s", t->def->table, first_line(err));
            continue;
        }
        stage_raise(&st, STAGE_OK);
        stage_add(&st, "%s=%lld", t->def->table, rows);
    }
out:
    stage_finish(v, "rows", &st);
}

static void check_dead_letters(verify_t *v)
{
    stage_t st = {0};
    char err[1024];
    const char *topics[PIPELINE_MAX * PIPELINE_MAX_TOPICS];
    size_t n = 0;
    dead_letter_summary_t sum;

    if (!v->conn) {
        st.status = STAGE_SKIP;
        stage_add(&st, "database unreachable");
        stage_finish(v, "dead-letters", &st);
        return;
    }
    for (int i = 0; i < v->nt; i++)
        if (v->t[i].enabled) topics[n++] = v->t[i].topic;
    int rc = dead_letters_summary(v->conn, topics, n, &sum, err, sizeof err);
    if (!sum.counted) {
        stage_raise(&st, STAGE_BROKEN);
        stage_add(&st, "cannot read dead_letter_events: %s", first_line(err));
        goto out;
    }
    char reasons[2048];
    size_t len = 0;
    reasons[0] = '\0';
    for (size_t r = 0; r < sum.type_n; r++) {
        int w = snprintf(reasons + len, sizeof reasons - len, " %s=%s", sum.types[r], sum.type_counts[r]);
        if (w > 0 && (size_t)w < sizeof reasons - len) len += (size_t)w;
    }
    stage_add(&st, "unresolved=%lld%s", sum.total, reasons);
    /* Redriven or acknowledged: dealt with, nothing to look at. */
    if (sum.resolved > 0) stage_add(&st, "resolved=%lld (redriven or acknowledged: not counted)", sum.resolved);
    json_t *by_type = json_object();
    for (size_t r = 0; r < sum.type_n; r++)
        json_object_set_new(by_type, sum.types[r], json_integer(strtoll(sum.type_counts[r], NULL, 10)));
    st.data = json_pack("{s:I, s:I, s:o, s:n}", "unresolved", (json_int_t)sum.total, "resolved",
                        (json_int_t)sum.resolved, "unresolved_by_error_type", by_type, "newest_unresolved");
    if (sum.total == 0) goto out;

    /* Stored, so every message moved on; still, someone should look. */
    stage_raise(&st, STAGE_WARN);
    if (rc != 0) {
        stage_raise(&st, STAGE_BROKEN);
        stage_add(&st, "cannot read the newest dead letter: %s", first_line(err));
    } else if (sum.id) {
        stage_add(&st, "newest id=%s topic=%s partition=%s offset=%s error_type=%s created_at=%s detail=\"%s\"",
                  sum.id, sum.topic, sum.partition, sum.offset, sum.error_type, sum.created_at, sum.detail);
        json_object_set_new(st.data, "newest_unresolved",
                            json_pack("{s:o, s:o, s:o, s:o, s:o, s:s, s:o}", "id", print_json_integer(sum.id),
                                      "topic", print_json_string(sum.topic), "partition",
                                      print_json_integer(sum.partition), "kafka_offset",
                                      print_json_integer(sum.offset), "error_type",
                                      print_json_string(sum.error_type), "created_at", sum.created_at,
                                      "error_detail", print_json_string(sum.detail)));
    }
out:
    dead_letters_summary_free(&sum);
    stage_finish(v, "dead-letters", &st);
}


/* ------------------------------------------------------------------------ */

static void verify_usage(FILE *out)
{
    fputs("usage: storage-consumer verify [--max-lag N] [--json]\n"
          "\n"
          "Checks the deployment stage by stage, for the pipelines of STORAGE_PIPELINES,\n"
          "and prints one line per stage (ok, warn, BROKEN, or skip when an earlier\n"
          "broken stage left nothing to check):\n"
          "  schema        every migration applied, checksums match\n"
          "  topics        each topic exists; its partition count (not 3: warn)\n"
          "  messages      messages present (high watermarks); an empty topic is fine\n"
          "  rows          rows in each table\n"
          "  dead-letters  unresolved dead letters by error_type and the newest (any:\n"
          "                warn); resolved ones (redriven, acknowledged) only counted\n"
          "  positions     per partition, the database's position (where the service\n"
          "                starts) and Kafka's committed offset (its copy), and which\n"
          "                is ahead: Kafka ahead is a warning (a database restored from\n"
          "                a backup: the service reads the gap again); the database\n"
          "                ahead is normal; no database row (the first run after the\n"
          "                upgrade) starts at Kafka's committed offset\n"
          "  lag           where each group starts (the database's position, else\n"
          "                Kafka's committed offset) against the high watermarks;\n"
          "                broken when it is below the log start (messages deleted\n"
          "                before they were stored) or beyond the high watermark, or,\n"
          "                with --max-lag, when a group's lag exceeds N\n"
          "\n"
          "It only reads: it creates no topic and does not join any group.\n"
          "\n"
          "options:\n"
          "  --max-lag N   a group whose total lag exceeds N breaks the lag stage\n"
          "                (default: lag is reported, a lag above 0 is a warning)\n"
          "  --json        the report as one JSON document on stdout\n"
          "                (docs/OPERATIONS.md: Output for scripts); the exit codes\n"
          "                are the same\n"
          "\n"
          "exit codes: 0 no stage broken, 1 a stage is broken (the last line names the\n"
          "first one), 2 usage or configuration error\n",
          out);
}

int ops_verify(const settings_t *s, int argc, char **argv)
{
    verify_t v = {.s = s, .max_lag = -1};
    char err[1024];
    bool json = false;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *value;
        if (args_is_help(a)) {
            verify_usage(stdout);
            return EXIT_OK;
        } else if (args_option(argc, argv, &i, "--max-lag", &value)) {
            if (!value || args_integer(value, 0, LLONG_MAX, &v.max_lag)) {
                fprintf(stderr, "storage-consumer: verify: --max-lag needs a number >= 0, got %s\n",
                        value ? value : "nothing");
                return EXIT_USAGE;
            }
        } else if (strcmp(a, "--json") == 0) {
            json = true;
        } else {
            fprintf(stderr, "storage-consumer: verify: unexpected argument %s\n", a);
            verify_usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (kafka_conf_check(s, err, sizeof err)) {
        fprintf(stderr, "storage-consumer: invalid setting: %s\n", err);
        return EXIT_USAGE;
    }

    char names[1024] = "";
    json_t *pipelines = json_array();
    for (int i = 0; i < pipeline_count(); i++) {
        if (!s->pipeline_enabled[i]) continue;
        for (int k = 0; k < s->topics[i].count; k++) {
            target_t *t = &v.t[v.nt++];
            t->enabled = true;
            t->def = pipeline_get(i);
            t->topic = s->topics[i].name[k];
            t->first_of_pipeline = k == 0;
            t->exists = -1;
            settings_group_id(s, i, t->group, sizeof t->group);
            /* Each client carries its pipeline's group id: the committed
             * offsets are asked per group. */
            t->client = cluster_client_new(s, i, err, sizeof err);
            if (!t->client) fprintf(stderr, "storage-consumer: verify: %s\n", err);
        }
        const target_t *t = &v.t[v.nt - 1];
        size_t n = strlen(names);
        snprintf(names + n, sizeof names - n, "%s%s", n ? "," : "", t->def->name);
        json_array_append_new(pipelines, json_pack("{s:s, s:o, s:s}", "name", t->def->name, "topic",
                                                   print_json_string(s->topic[i]), "group", t->group));
    }
    char *masked = db_mask_conninfo(s->database_url);
    if (json) {
        v.stages = json_array();
    } else {
        printf("verify pipelines=%s kafka=%s database=\"%s\"\n", names, s->bootstrap_servers, masked);
        fflush(stdout);
    }
    v.conn = db_connect(s->database_url, VERIFY_STATEMENT_TIMEOUT_MS,
                        clock_now_ms() + VERIFY_STATEMENT_TIMEOUT_MS + SETTINGS_DB_DEADLINE_GRACE_MS, v.db_error,
                        sizeof v.db_error);

    check_schema(&v);
    check_registry(&v);
    check_topics(&v);
    check_messages(&v);
    check_rows(&v);
    check_dead_letters(&v);
    check_positions(&v);
    check_lag(&v);

    int rc = v.first_broken ? EXIT_FAILED : EXIT_OK;
    if (json) {
        json_t *warnings = json_array();
        for (size_t i = 0; i < json_array_size(v.stages); i++) {
            json_t *stage = json_array_get(v.stages, i);
            if (strcmp(json_string_value(json_object_get(stage, "status")), "warn") == 0)
                json_array_append(warnings, json_object_get(stage, "name"));
        }
        const char *result = v.first_broken ? "broken" : v.warned[0] ? "healthy_with_warnings" : "healthy";
        if (print_json(json_pack("{s:s, s:o, s:o, s:o, s:o, s:s, s:o, s:o}", "command", "verify", "pipelines",
                                 pipelines, "kafka", print_json_string(s->bootstrap_servers), "database",
                                 print_json_string(masked), "stages", v.stages, "result", result, "first_broken",
                                 v.first_broken ? json_string(v.first_broken) : json_null(), "warnings", warnings)))
            rc = EXIT_FAILED;
    } else {
        json_decref(pipelines);
        if (v.first_broken)
            printf("verify: broken at stage %s\n", v.first_broken);
        else if (v.warned[0])
            printf("verify: healthy, with warnings (%s)\n", v.warned);
        else
            printf("verify: healthy\n");
    }
    free(masked);

    db_close(v.conn);
    for (int i = 0; i < v.nt; i++) {
        cluster_client_destroy(v.t[i].client);
        free(v.t[i].lo);
        free(v.t[i].hi);
        free(v.t[i].kafka);
        free(v.t[i].db);
    }
    return rc;
}
