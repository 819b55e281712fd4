/* dead_letters — `storage-consumer dead-letters list|show ID|redrive`
 * (DESIGN.md: Operations): arguments, and what is printed.
 *
 * list     counts by pipeline and error_type, then the most recent rows.
 * show     one dead letter, every column; payload and key printed so that
 *          no byte can reach the terminal raw (ops/print.h).
 * redrive  store what unresolved dead letters now decode to and mark them
 *          resolved (the operator registered the missing app, a producer
 *          bug was fixed); the engine is ops/redrive.c.
 *
 * The statements on dead_letter_events are pg/dead_letters.c's. */
#include <stddef.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"
#include "exit_code.h"
#include "ops/ops.h"
#include "ops/args.h"
#include "ops/connect.h"
#include "ops/print.h"
#include "ops/redrive.h"
#include "pg/dead_letters.h"
#include "pg/db.h"

/* Per pipeline and category, how many ids redrive prints before a summary. */
#define DL_DETAIL_LINES 10
/* list: rows shown by default, and how much of a detail fits on a line. */
#define DL_LIST_DEFAULT_LIMIT 20
#define DL_LIST_MAX_LIMIT 10000
#define DL_LIST_DETAIL_BYTES 160

/* ------------------------------------------------------------------------ */
/* Shared helpers. */

/* The pipeline whose topic is `topic` in these settings, or NULL. */
static const pipeline_def_t *pipeline_of_topic(const settings_t *s, const char *topic)
{
    for (int i = 0; i < PIPELINE_COUNT; i++)
        if (s->topic[i] && strcmp(s->topic[i], topic) == 0) return pipeline_get((pipeline_id_t)i);
    return NULL;
}

static void fail_msg(const char *sub, const char *what, const char *detail)
{
    fprintf(stderr, "storage-consumer: dead-letters %s: %s%s\n", sub, what, detail);
}

/* Connect for a one-shot command and check the schema knows resolution
 * (migration 0005). Returns a connection the caller owns, or NULL after
 * reporting why on stderr. */
static db_conn_t *connect_checked(const settings_t *s, const char *sub)
{
    char err[1024], command[64];
    snprintf(command, sizeof command, "dead-letters %s", sub);
    db_conn_t *conn = ops_connect(s, command, "");
    if (!conn) return NULL;
    int current = dead_letters_resolvable(conn, err, sizeof err);
    if (current < 0) fail_msg(sub, "checking the schema: ", err);
    if (current == 0)
        fail_msg(sub, "dead_letter_events lacks resolved_at (migration 0005_dead_letter_resolution.sql): ",
                 "run `storage-consumer migrate` first");
    if (current != 1) {
        db_close(conn);
        return NULL;
    }
    return conn;
}

/* Whether option `name` of subcommand `sub` got a value; reports the usage
 * error when it did not. */
static bool value_given(const char *sub, const char *name, const char *value)
{
    if (value && *value) return true;
    fprintf(stderr, "storage-consumer: dead-letters %s: %s needs a value\n", sub, name);
    return false;
}

/* --pipeline NAME: resolved to its definition. Returns NULL after a usage
 * error. */
static const pipeline_def_t *parse_pipeline(const char *sub, const char *name)
{
    const pipeline_def_t *def = pipeline_find(name, strlen(name));
    char names[128];
    if (!def)
        fprintf(stderr, "storage-consumer: dead-letters %s: unknown pipeline %s (known: %s)\n", sub, name,
                pipeline_names(names, sizeof names));
    return def;
}

/* ------------------------------------------------------------------------ */
/* list */

static void usage_list(FILE *out)
{
    char names[128];
    fprintf(out, "usage: storage-consumer dead-letters list [--pipeline P] [--type T] [--limit N] [--unresolved]\n"
          "\n"
          "Counts of dead letters by pipeline and error_type (unresolved and resolved),\n"
          "then the most recent rows, newest first.\n"
          "\n"
          "  --pipeline P   only the topic of pipeline P (%s)\n"
          "  --type T       only error_type T (e.g. unregistered_app)\n"
          "  --limit N      how many recent rows to show (default 20)\n"
          "  --unresolved   recent rows: only those not yet resolved\n"
          "\n"
          "Output lines: `total ...`, one `count pipeline=P error_type=T unresolved=N\n"
          "resolved=N topic=... newest=...` per group (pipeline=- for a topic no pipeline\n"
          "reads), then `row id=...` lines. `dead-letters show ID` prints one in full.\n",
          pipeline_names(names, sizeof names));
}

static int dl_list(const settings_t *s, int argc, char **argv)
{
    const pipeline_def_t *def = NULL;
    const char *type = NULL;
    long long limit = DL_LIST_DEFAULT_LIMIT;
    bool unresolved_only = false;
    char err[1024];
    int rc = EXIT_FAILED;

    for (int i = 1; i < argc; i++) {
        const char *v;
        if (args_is_help(argv[i])) {
            usage_list(stdout);
            return EXIT_OK;
        } else if (args_option(argc, argv, &i, "--pipeline", &v)) {
            if (!value_given("list", "--pipeline", v) || !(def = parse_pipeline("list", v))) return EXIT_USAGE;
        } else if (args_option(argc, argv, &i, "--type", &type)) {
            if (!value_given("list", "--type", type)) return EXIT_USAGE;
        } else if (args_option(argc, argv, &i, "--limit", &v)) {
            if (!value_given("list", "--limit", v)) return EXIT_USAGE;
            if (args_integer(v, 1, DL_LIST_MAX_LIMIT, &limit)) {
                fprintf(stderr, "storage-consumer: dead-letters list: --limit %s: expected 1..%d\n", v,
                        DL_LIST_MAX_LIMIT);
                return EXIT_USAGE;
            }
        } else if (strcmp(argv[i], "--unresolved") == 0) {
            unresolved_only = true;
        } else {
            fprintf(stderr, "storage-consumer: dead-letters list: unexpected argument %s\n", argv[i]);
            usage_list(stderr);
            return EXIT_USAGE;
        }
    }

    db_conn_t *conn = connect_checked(s, "list");
    if (!conn) return EXIT_FAILED;
    dead_letter_list_t l;
    if (dead_letters_list(conn, def ? s->topic[def->id] : NULL, type, limit, unresolved_only, &l, err,
                          sizeof err)) {
        fail_msg("list", "", err);
        goto out;
    }

    long long total_unresolved = 0, total_resolved = 0;
    for (size_t r = 0; r < l.count_n; r++) {
        total_unresolved += l.counts[r].unresolved;
        total_resolved += l.counts[r].resolved;
    }
    printf("total unresolved=%lld resolved=%lld\n", total_unresolved, total_resolved);
    for (size_t r = 0; r < l.count_n; r++) {
        const dead_letter_count_t *c = &l.counts[r];
        const pipeline_def_t *p = pipeline_of_topic(s, c->topic);
        printf("count pipeline=%s error_type=%s unresolved=%lld resolved=%lld topic=", p ? p->name : "-",
               c->error_type, c->unresolved, c->resolved);
        print_quoted(stdout, c->topic, strlen(c->topic), 0);
        printf(" newest=%s%s\n", c->newest, p ? "" : " (no pipeline reads this topic)");
    }
    printf("recent shown=%zu limit=%lld%s\n", l.row_n, limit, unresolved_only ? " unresolved_only" : "");
    for (size_t r = 0; r < l.row_n; r++) {
        const dead_letter_row_t *row = &l.rows[r];
        const pipeline_def_t *p = pipeline_of_topic(s, row->topic);
        printf("row id=%s pipeline=%s partition=%s offset=%s created_at=%s error_type=%s status=%s "
               "payload_size=%lld%s detail=",
               row->id, p ? p->name : "-", row->partition, row->offset, row->created_at, row->error_type,
               row->resolved ? "resolved" : "unresolved", row->payload_size,
               row->payload_size > row->stored_bytes ? " truncated" : "");
        print_quoted(stdout, row->detail, strlen(row->detail), DL_LIST_DETAIL_BYTES);
        putchar('\n');
    }
    rc = EXIT_OK;
out:
    dead_letters_list_free(&l);
    db_close(conn);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* show */

static void usage_show(FILE *out)
{
    fputs("usage: storage-consumer dead-letters show ID\n"
          "\n"
          "Prints every column of dead letter ID, one `name: value` line each. Text that\n"
          "is valid UTF-8 is printed quoted with control characters escaped; bytes that\n"
          "are not valid UTF-8 are printed as \\xNN, and the exact bytes follow in hex\n"
          "(payload_hex, message_key_hex). Timestamps are UTC.\n",
          out);
}

/* "name_bytes", "name_utf8", "name" and, when not UTF-8, "name_hex". */
static void show_bytes(const char *name, const char *v, size_t len)
{
    if (!v) {
        printf("%s: null\n", name);
        return;
    }
    bool utf8 = utf8_valid(v, len);
    printf("%s_bytes: %zu\n%s_utf8: %s\n%s: ", name, len, name, utf8 ? "yes" : "no", name);
    print_quoted(stdout, v, len, 0);
    putchar('\n');
    if (!utf8) {
        printf("%s_hex: ", name);
        print_hex(stdout, v, len);
        putchar('\n');
    }
}

static void show_text(const char *name, const char *v)
{
    if (!v) {
        printf("%s: null\n", name);
        return;
    }
    printf("%s: ", name);
    print_quoted(stdout, v, strlen(v), 0);
    putchar('\n');
}

static void show_plain(const char *name, const char *v) { printf("%s: %s\n", name, v ? v : "null"); }

static int dl_show(const settings_t *s, int argc, char **argv)
{
    const char *id_text = NULL;
    char err[1024];
    for (int i = 1; i < argc; i++) {
        if (args_is_help(argv[i])) {
            usage_show(stdout);
            return EXIT_OK;
        } else if (!id_text && argv[i][0] != '-') {
            id_text = argv[i];
        } else {
            fprintf(stderr, "storage-consumer: dead-letters show: unexpected argument %s\n", argv[i]);
            usage_show(stderr);
            return EXIT_USAGE;
        }
    }
    if (!id_text) {
        fprintf(stderr, "storage-consumer: dead-letters show: which dead letter? (an id from `dead-letters list`)\n");
        usage_show(stderr);
        return EXIT_USAGE;
    }
    long long id;
    if (args_integer(id_text, 1, INT64_MAX, &id)) {
        fprintf(stderr, "storage-consumer: dead-letters show: ID %s: expected a positive integer\n", id_text);
        return EXIT_USAGE;
    }

    db_conn_t *conn = connect_checked(s, "show");
    if (!conn) return EXIT_FAILED;
    dead_letter_t d;
    int found = dead_letters_get(conn, id_text, &d, err, sizeof err);
    int rc = EXIT_FAILED;
    if (found < 0) {
        fail_msg("show", "", err);
    } else if (found == 0) {
        fail_msg("show", "no dead letter with id ", id_text);
    } else {
        const pipeline_def_t *p = pipeline_of_topic(s, d.topic);
        long long kept = (long long)d.payload_len;
        bool resolved = d.resolved_at != NULL;
        show_plain("id", d.id);
        show_text("topic", d.topic);
        printf("pipeline: %s\n", p ? p->name : "- (no pipeline reads this topic)");
        show_plain("partition", d.partition);
        show_plain("kafka_offset", d.kafka_offset);
        show_plain("kafka_timestamp", d.kafka_timestamp);
        show_plain("created_at", d.created_at);
        show_plain("error_type", d.error_type);
        show_text("error_detail", d.error_detail);
        printf("status: %s\n", resolved ? "resolved" : "unresolved");
        show_plain("resolved_at", d.resolved_at);
        show_text("resolution", d.resolution);
        if (d.payload_size > kept)
            printf("redrivable: no (payload truncated: %lld of %lld bytes stored)\n", kept, d.payload_size);
        else
            printf("redrivable: %s\n", resolved ? "no (already resolved)" : "yes");
        show_bytes("message_key", d.key, d.key_len);
        printf("payload_size: %lld\n", d.payload_size);
        show_bytes("payload", d.payload, d.payload_len);
        rc = EXIT_OK;
    }
    dead_letters_get_free(&d);
    db_close(conn);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* redrive */

static void usage_redrive(FILE *out)
{
    char names[128];
    fprintf(out, "usage: storage-consumer dead-letters redrive [--pipeline P] [--type T] [--dry-run]\n"
          "\n"
          "Re-decodes the stored payload of every unresolved dead letter (of pipeline P,\n"
          "of error_type T) exactly as the pipeline would, and in one transaction per\n"
          "batch stores what now succeeds and marks those dead letters resolved with a\n"
          "note (e.g. after registering a missing app or fixing a producer). What still\n"
          "fails stays unresolved with its reason refreshed. Truncated payloads are\n"
          "reported as not redrivable. Dead letters are never deleted; running it again\n"
          "changes nothing. A redriven review older than the stored row does not\n"
          "overwrite it (the same last_synced_at rule as the pipeline).\n"
          "\n"
          "  --pipeline P   only pipeline P (%s)\n"
          "  --type T       only dead letters with error_type T (e.g. unregistered_app)\n"
          "  --dry-run      do everything, then roll back: reports what would be stored\n"
          "                 and what still fails, changes nothing\n"
          "\n"
          "Output: `redrive pipeline=P examined=N stored=N still_failing=N\n"
          "not_redrivable=N ...` per pipeline, `still_failing id=...` and\n"
          "`not_redrivable id=...` lines (the first 10 of each), and a `redrive total ...`\n"
          "line. Exit 0 when the run completed (whatever still fails), 1 on a database\n"
          "failure (batches committed before it stay committed; run it again).\n",
          pipeline_names(names, sizeof names));
}

/* Prints the first DL_DETAIL_LINES dead letters of each kind, per pipeline. */
typedef struct {
    const char *pipeline;
    size_t failing, truncated;
} redrive_lines_t;

static void print_not_redrivable(void *ctx, int64_t id, long long payload_size, long long stored_bytes)
{
    redrive_lines_t *p = ctx;
    if (p->truncated++ < DL_DETAIL_LINES)
        printf("not_redrivable id=%" PRId64 " pipeline=%s payload_size=%lld stored_bytes=%lld "
               "reason=\"payload truncated: the stored bytes are not the message\"\n",
               id, p->pipeline, payload_size, stored_bytes);
}

static void print_still_failing(void *ctx, int64_t id, const char *error_type, const char *detail)
{
    redrive_lines_t *p = ctx;
    if (p->failing++ < DL_DETAIL_LINES) {
        printf("still_failing id=%" PRId64 " pipeline=%s error_type=%s detail=", id, p->pipeline, error_type);
        print_quoted(stdout, detail, strlen(detail), 0);
        putchar('\n');
    }
}

static void print_more(const char *what, const char *pipeline, size_t printed)
{
    if (printed > DL_DETAIL_LINES)
        printf("%s pipeline=%s more=%zu (only the first %d are listed)\n", what, pipeline,
               printed - DL_DETAIL_LINES, DL_DETAIL_LINES);
}

/* Redrive one pipeline and print what it did. Adds to *total. Returns 0 or
 * -1 (reported). */
static int redrive_one(const settings_t *s, db_conn_t *conn, const pipeline_def_t *def, const char *type,
                       bool dry_run, redrive_counts_t *total)
{
    redrive_lines_t lines = {.pipeline = def->name};
    redrive_report_t report = {print_not_redrivable, print_still_failing, &lines};
    redrive_counts_t c = {0};
    char err[2048];

    int rc = redrive_pipeline(s, conn, def, type, dry_run, &report, &c, err, sizeof err);
    print_more("still_failing", def->name, lines.failing);
    print_more("not_redrivable", def->name, lines.truncated);
    printf("redrive pipeline=%s examined=%zu stored=%zu still_failing=%zu not_redrivable=%zu "
           "inserted=%zu updated=%zu skipped=%zu superseded=%zu resolved=%zu reasons_refreshed=%zu dry_run=%s%s\n",
           def->name, c.examined, c.stored, c.still_failing, c.not_redrivable, c.inserted, c.updated, c.skipped,
           c.superseded, c.resolved, c.reasons_refreshed, dry_run ? "yes" : "no",
           rc ? " (interrupted by an error)" : "");
    if (rc) {
        fflush(stdout);
        fprintf(stderr,
                "storage-consumer: dead-letters redrive: pipeline %s: %s (the failed batch was rolled back; "
                "batches before it are committed; redrive is idempotent: run it again)\n",
                def->name, err);
    }
    total->examined += c.examined;
    total->stored += c.stored;
    total->still_failing += c.still_failing;
    total->not_redrivable += c.not_redrivable;
    total->resolved += c.resolved;
    total->reasons_refreshed += c.reasons_refreshed;
    return rc;
}

/* Unresolved dead letters of topics no pipeline reads: reported, left as is. */
static int report_unknown_topics(const settings_t *s, db_conn_t *conn, const char *type)
{
    const char *topics[PIPELINE_COUNT];
    char err[1024];
    dead_letter_topics_t other;
    for (int i = 0; i < PIPELINE_COUNT; i++) topics[i] = s->topic[i];
    if (dead_letters_other_topics(conn, topics, PIPELINE_COUNT, type, &other, err, sizeof err)) {
        fail_msg("redrive", "", err);
        return -1;
    }
    for (size_t r = 0; r < other.n; r++) {
        printf("redrive skipped topic=");
        print_quoted(stdout, other.topics[r], strlen(other.topics[r]), 0);
        printf(" unresolved=%s note=\"no pipeline reads this topic (STORAGE_TOPIC_*): left as is\"\n",
               other.unresolved[r]);
    }
    dead_letters_other_topics_free(&other);
    return 0;
}

static int dl_redrive(const settings_t *s, int argc, char **argv)
{
    const pipeline_def_t *only = NULL;
    const char *type = NULL;
    bool dry_run = false;

    for (int i = 1; i < argc; i++) {
        const char *v;
        if (args_is_help(argv[i])) {
            usage_redrive(stdout);
            return EXIT_OK;
        } else if (args_option(argc, argv, &i, "--pipeline", &v)) {
            if (!value_given("redrive", "--pipeline", v) || !(only = parse_pipeline("redrive", v)))
                return EXIT_USAGE;
        } else if (args_option(argc, argv, &i, "--type", &type)) {
            if (!value_given("redrive", "--type", type)) return EXIT_USAGE;
        } else if (strcmp(argv[i], "--dry-run") == 0) {
            dry_run = true;
        } else {
            fprintf(stderr, "storage-consumer: dead-letters redrive: unexpected argument %s\n", argv[i]);
            usage_redrive(stderr);
            return EXIT_USAGE;
        }
    }

    db_conn_t *conn = connect_checked(s, "redrive");
    if (!conn) return EXIT_FAILED;
    redrive_counts_t total = {0};
    int rc = EXIT_OK;
    for (int i = 0; i < PIPELINE_COUNT && rc == EXIT_OK; i++) {
        const pipeline_def_t *def = pipeline_get((pipeline_id_t)i);
        if (only && only != def) continue;
        if (redrive_one(s, conn, def, type, dry_run, &total)) rc = EXIT_FAILED;
    }
    if (rc == EXIT_OK && !only && report_unknown_topics(s, conn, type)) rc = EXIT_FAILED;
    db_close(conn);
    printf("redrive total examined=%zu stored=%zu still_failing=%zu not_redrivable=%zu resolved=%zu "
           "reasons_refreshed=%zu dry_run=%s\n",
           total.examined, total.stored, total.still_failing, total.not_redrivable, total.resolved,
           total.reasons_refreshed, dry_run ? "yes" : "no");
    if (dry_run)
        printf("dry run: rolled back, nothing changed (without --dry-run: %zu would be resolved, "
               "%zu reasons refreshed)\n",
               total.resolved, total.reasons_refreshed);
    else if (total.resolved == 0 && total.reasons_refreshed == 0)
        printf("nothing changed: no unresolved dead letter stores now%s\n",
               rc == EXIT_OK ? "" : " (interrupted by an error)");
    else
        printf("changed: %zu dead letters resolved, %zu reasons refreshed\n", total.resolved,
               total.reasons_refreshed);
    return rc;
}

/* ------------------------------------------------------------------------ */

static void usage_dead_letters(FILE *out)
{
    fputs("usage: storage-consumer dead-letters list|show ID|redrive [OPTIONS]\n"
          "\n"
          "Records that can never be stored are kept in dead_letter_events, written in\n"
          "the same transaction as the good rows of their batch.\n"
          "\n"
          "  list [--pipeline P] [--type T] [--limit N] [--unresolved]\n"
          "                 counts by pipeline and error_type, then the most recent rows\n"
          "  show ID        one dead letter, every column; payload and key escaped safely\n"
          "  redrive [--pipeline P] [--type T] [--dry-run]\n"
          "                 store what now succeeds and mark it resolved (never deleted)\n"
          "\n"
          "`storage-consumer dead-letters SUBCOMMAND --help` describes each.\n"
          "exit codes: 0 done, 1 runtime failure, 2 usage error\n",
          out);
}

int ops_dead_letters(const settings_t *s, int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "storage-consumer: dead-letters: which subcommand? (list, show, redrive)\n");
        usage_dead_letters(stderr);
        return EXIT_USAGE;
    }
    const char *sub = argv[1];
    if (args_is_help(sub) || strcmp(sub, "help") == 0) {
        usage_dead_letters(stdout);
        return EXIT_OK;
    }
    if (strcmp(sub, "list") == 0) return dl_list(s, argc - 1, argv + 1);
    if (strcmp(sub, "show") == 0) return dl_show(s, argc - 1, argv + 1);
    if (strcmp(sub, "redrive") == 0) return dl_redrive(s, argc - 1, argv + 1);
    fprintf(stderr, "storage-consumer: dead-letters: unknown subcommand %s\n", sub);
    usage_dead_letters(stderr);
    return EXIT_USAGE;
}
