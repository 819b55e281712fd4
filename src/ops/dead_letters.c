/* dead_letters — `storage-consumer dead-letters list|show|redrive|resolve|purge`
 * (DESIGN.md: Operations; Resolving dead letters): arguments, and what is
 * printed.
 *
 * list     counts by pipeline and error_type, then the most recent
 *          unresolved rows (--all: every one); --json for scripts.
 * show     one dead letter, every column; payload and key printed so that
 *          no byte can reach the terminal raw (ops/print.h); --json.
 * redrive  store what unresolved dead letters now decode to and mark them
 *          resolved (the operator registered the missing app, a producer
 *          bug was fixed); the engine is ops/redrive.c.
 * resolve  acknowledge dead letters that will never store, with a note.
 * purge    delete resolved dead letters resolved longer ago than an age.
 *
 * The statements on dead_letter_events are pg/dead_letters.c's. */
#include <stddef.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/decode.h"
#include "core/utf8.h"
#include "exit_code.h"
#include "ops/ops.h"
#include "ops/args.h"
#include "ops/connect.h"
#include "ops/print.h"
#include "ops/progress.h"
#include "ops/redrive.h"
#include "pg/dead_letters.h"
#include "pg/db.h"

/* Per pipeline and category, how many ids redrive prints before a summary. */
#define DL_DETAIL_LINES 10
/* list: rows shown by default, and how much of a detail fits on a line. */
#define DL_LIST_DEFAULT_LIMIT 20
#define DL_LIST_MAX_LIMIT 10000
#define DL_LIST_DETAIL_BYTES 160
/* resolve: at most this many ids at once, and this long a note. */
#define DL_RESOLVE_MAX_IDS 10000
#define DL_NOTE_MAX_BYTES 1000
/* purge: the oldest AGE it takes (100 years). */
#define DL_PURGE_MAX_AGE_S (100LL * 365 * 86400)

/* ------------------------------------------------------------------------ */
/* Shared helpers. */

/* The pipeline whose topic is `topic` in these settings, or NULL. */
static const pipeline_def_t *pipeline_of_topic(const settings_t *s, const char *topic)
{
    for (int i = 0; i < pipeline_count(); i++)
        if (s->topic[i] && strcmp(s->topic[i], topic) == 0) return pipeline_get(i);
    return NULL;
}

static void fail_msg(const char *sub, const char *what, const char *detail)
{
    fprintf(stderr, "storage-consumer: dead-letters %s: %s%s\n", sub, what, detail);
}

/* Connect for a one-shot command and check the schema knows resolution
 * (migrations 0005 and 0007). Returns a connection the caller owns, or NULL after
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
        fail_msg(sub, "dead_letter_events lacks the resolution columns (migrations 0005_dead_letter_resolution.sql, "
                 "0007_dead_letter_acknowledgement.sql): ", "run `storage-consumer migrate` first");
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

/* --type T: one of the error types the decoder and the store write.
 * Returns false after a usage error. */
static bool parse_type(const char *sub, const char *type)
{
    if (decode_error_type_index(type) >= 0) return true;
    fprintf(stderr, "storage-consumer: dead-letters %s: unknown error type %s (known:", sub, type);
    for (size_t i = 0; i < DECODE_ERROR_TYPE_COUNT; i++)
        fprintf(stderr, "%s %s", i ? "," : "", decode_error_types[i]);
    fputs(")\n", stderr);
    return false;
}

/* --pipeline P and --type T, which list, redrive and resolve share: 1
 * argv[*i] was one of them, 0 neither, -1 a usage error (reported). */
static int filter_option(const char *sub, int argc, char **argv, int *i, const pipeline_def_t **def,
                         const char **type)
{
    const char *v;
    if (args_option(argc, argv, i, "--pipeline", &v))
        return value_given(sub, "--pipeline", v) && (*def = parse_pipeline(sub, v)) ? 1 : -1;
    if (args_option(argc, argv, i, "--type", type))
        return value_given(sub, "--type", *type) && parse_type(sub, *type) ? 1 : -1;
    return 0;
}

/* Who resolves (resolved_by): the login running the command. */
static const char *operator_name(char *buf, size_t len)
{
    struct passwd pw, *found = NULL;
    char scratch[1024];
    uid_t uid = geteuid();
    if (getpwuid_r(uid, &pw, scratch, sizeof scratch, &found) == 0 && found && found->pw_name[0])
        snprintf(buf, len, "%s", found->pw_name);
    else
        snprintf(buf, len, "uid %u", (unsigned)uid);
    return buf;
}

/* The resolution of a dead letter as JSON: null while unresolved. */
static json_t *json_resolution(const char *resolved_at, const char *kind, const char *by, const char *note)
{
    if (!resolved_at) return json_null();
    return json_pack("{s:s, s:o, s:o, s:o}", "resolved_at", resolved_at, "kind", print_json_string(kind),
                     "resolved_by", print_json_string(by), "note", print_json_string(note));
}

/* ------------------------------------------------------------------------ */
/* list */

static void usage_list(FILE *out)
{
    char names[128];
    fprintf(out, "usage: storage-consumer dead-letters list [--pipeline P] [--type T] [--limit N] [--all] [--json]\n"
          "\n"
          "Counts of dead letters by pipeline and error_type (unresolved and resolved),\n"
          "then the most recent unresolved rows, newest first.\n"
          "\n"
          "  --pipeline P   only the topic of pipeline P (%s)\n"
          "  --type T       only error_type T (e.g. unregistered_app)\n"
          "  --limit N      how many recent rows to show (default 20)\n"
          "  --all          recent rows: resolved ones too (default: unresolved only;\n"
          "                 --unresolved, that default, is still accepted)\n"
          "  --json         one JSON document instead (docs/OPERATIONS.md: Output for\n"
          "                 scripts)\n"
          "\n"
          "Output lines: `total ...`, one `count pipeline=P error_type=T unresolved=N\n"
          "resolved=N topic=... newest=...` per group (pipeline=- for a topic no pipeline\n"
          "reads), then `row id=...` lines. `dead-letters show ID` prints one in full.\n",
          pipeline_names(names, sizeof names));
}

/* list --json: the same as the text, one document (DESIGN.md: Output for
 * scripts). Returns 0, or -1 when stdout could not be written. */
static int list_json(const settings_t *s, const dead_letter_list_t *l, long long unresolved, long long resolved,
                     long long limit, bool all)
{
    json_t *counts = json_array(), *rows = json_array();
    for (size_t r = 0; r < l->count_n; r++) {
        const dead_letter_count_t *c = &l->counts[r];
        const pipeline_def_t *p = pipeline_of_topic(s, c->topic);
        json_array_append_new(counts, json_pack("{s:o, s:o, s:o, s:I, s:I, s:s}", "pipeline",
                                                p ? json_string(p->name) : json_null(), "topic",
                                                print_json_string(c->topic), "error_type",
                                                print_json_string(c->error_type),
                                                "unresolved", (json_int_t)c->unresolved, "resolved",
                                                (json_int_t)c->resolved, "newest_created_at", c->newest));
    }
    for (size_t r = 0; r < l->row_n; r++) {
        const dead_letter_row_t *row = &l->rows[r];
        const pipeline_def_t *p = pipeline_of_topic(s, row->topic);
        json_array_append_new(
            rows, json_pack("{s:o, s:o, s:o, s:o, s:o, s:s, s:o, s:o, s:I, s:I, s:b, s:b, s:o}", "id",
                            print_json_integer(row->id), "pipeline", p ? json_string(p->name) : json_null(),
                            "topic", print_json_string(row->topic), "partition", print_json_integer(row->partition),
                            "kafka_offset", print_json_integer(row->offset), "created_at", row->created_at,
                            "error_type", print_json_string(row->error_type), "error_detail",
                            print_json_string(row->detail),
                            "payload_size", (json_int_t)row->payload_size, "stored_bytes",
                            (json_int_t)row->stored_bytes, "truncated", row->payload_size > row->stored_bytes,
                            "resolved", row->resolved, "resolution",
                            json_resolution(row->resolved_at, row->resolution_kind, row->resolved_by,
                                            row->resolution)));
    }
    return print_json(json_pack("{s:{s:I, s:I}, s:o, s:o, s:I, s:b}", "total", "unresolved", (json_int_t)unresolved,
                                "resolved", (json_int_t)resolved, "counts", counts, "dead_letters", rows, "limit",
                                (json_int_t)limit, "all", all));
}

static int dl_list(const settings_t *s, int argc, char **argv)
{
    const pipeline_def_t *def = NULL;
    const char *type = NULL;
    long long limit = DL_LIST_DEFAULT_LIMIT;
    bool unresolved_only = true, json = false;
    char err[1024];
    int rc = EXIT_FAILED;

    for (int i = 1; i < argc; i++) {
        const char *v;
        int f;
        if (args_is_help(argv[i])) {
            usage_list(stdout);
            return EXIT_OK;
        } else if ((f = filter_option("list", argc, argv, &i, &def, &type)) != 0) {
            if (f < 0) return EXIT_USAGE;
        } else if (args_option(argc, argv, &i, "--limit", &v)) {
            if (!value_given("list", "--limit", v)) return EXIT_USAGE;
            if (args_integer(v, 1, DL_LIST_MAX_LIMIT, &limit)) {
                fprintf(stderr, "storage-consumer: dead-letters list: --limit %s: expected 1..%d\n", v,
                        DL_LIST_MAX_LIMIT);
                return EXIT_USAGE;
            }
        } else if (strcmp(argv[i], "--unresolved") == 0) {
            unresolved_only = true;
        } else if (strcmp(argv[i], "--all") == 0) {
            unresolved_only = false;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = true;
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
    if (json) {
        rc = list_json(s, &l, total_unresolved, total_resolved, limit, !unresolved_only) ? EXIT_FAILED : EXIT_OK;
        goto out;
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
        printf("row id=%s pipeline=%s partition=%s offset=%s created_at=%s error_type=%s status=%s%s%s "
               "payload_size=%lld%s detail=",
               row->id, p ? p->name : "-", row->partition, row->offset, row->created_at, row->error_type,
               row->resolved ? "resolved" : "unresolved", row->resolution_kind ? " resolution=" : "",
               row->resolution_kind ? row->resolution_kind : "", row->payload_size,
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
    fputs("usage: storage-consumer dead-letters show ID [--json]\n"
          "\n"
          "Prints every column of dead letter ID, one `name: value` line each. Text that\n"
          "is valid UTF-8 is printed quoted with control characters escaped; bytes that\n"
          "are not valid UTF-8 are printed as \\xNN, and the exact bytes follow in hex\n"
          "(payload_hex, message_key_hex). Timestamps are UTC.\n"
          "\n"
          "  --json   one JSON document instead (docs/OPERATIONS.md: Output for scripts)\n",
          out);
}

/* show --json (DESIGN.md: Output for scripts). Returns 0, or -1 when stdout
 * could not be written. */
static int show_json(const settings_t *s, const dead_letter_t *d)
{
    const pipeline_def_t *p = pipeline_of_topic(s, d->topic);
    long long kept = (long long)d->payload_len;
    bool resolved = d->resolved_at != NULL, truncated = d->payload_size > kept;
    json_t *hex[2];
    const char *bytes[2] = {d->key, d->payload};
    size_t lens[2] = {d->key_len, d->payload_len};
    for (int i = 0; i < 2; i++) {
        char *text = NULL;
        size_t size = 0;
        if (!bytes[i]) {
            hex[i] = json_null();
            continue;
        }
        FILE *f = open_memstream(&text, &size);
        if (!f) abort();
        print_hex(f, bytes[i], lens[i]);
        if (fclose(f) != 0 || !text) abort();
        hex[i] = json_string(text);
        free(text);
    }
    return print_json(json_pack(
        "{s:o, s:o, s:o, s:o, s:o, s:o, s:s, s:o, s:o, s:b, s:o, s:I, s:I, s:b, s:b, s:o, s:o, s:b, s:o, s:o, s:b}",
        "id", print_json_integer(d->id), "pipeline", p ? json_string(p->name) : json_null(), "topic",
        print_json_string(d->topic), "partition", print_json_integer(d->partition), "kafka_offset",
        print_json_integer(d->kafka_offset), "kafka_timestamp", print_json_string(d->kafka_timestamp), "created_at",
        d->created_at, "error_type", print_json_string(d->error_type), "error_detail",
        print_json_string(d->error_detail), "resolved", resolved, "resolution",
        json_resolution(d->resolved_at, d->resolution_kind, d->resolved_by, d->resolution), "payload_size",
        (json_int_t)d->payload_size, "stored_bytes", (json_int_t)kept, "truncated", truncated, "redrivable",
        !truncated && !resolved, "message_key", print_json_text(d->key, d->key_len), "message_key_hex", hex[0],
        "message_key_utf8", d->key && utf8_valid(d->key, d->key_len), "payload",
        print_json_text(d->payload, d->payload_len), "payload_hex", hex[1], "payload_utf8",
        d->payload && utf8_valid(d->payload, d->payload_len)));
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
    bool json = false;
    char err[1024];
    for (int i = 1; i < argc; i++) {
        if (args_is_help(argv[i])) {
            usage_show(stdout);
            return EXIT_OK;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = true;
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
    } else if (json) {
        rc = show_json(s, &d) ? EXIT_FAILED : EXIT_OK;
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
        show_plain("resolution_kind", d.resolution_kind);
        show_text("resolved_by", d.resolved_by);
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
          "batch stores what now succeeds and marks those dead letters resolved\n"
          "(resolution_kind redriven) with a note (e.g. after registering a missing app\n"
          "or fixing a producer). What still fails stays unresolved with its reason\n"
          "refreshed. Truncated payloads are reported as not redrivable. Redrive never\n"
          "deletes a dead letter (purge does, once resolved); running it again\n"
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
    progress_t *progress; /* NULL: not on a terminal */
} redrive_lines_t;

static void show_progress(void *ctx, size_t examined)
{
    redrive_lines_t *p = ctx;
    progress_update(p->progress, (long long)examined);
}

/* The progress line of one pipeline's redrive (DESIGN.md: Progress of long
 * work): its total is counted only when the line is shown. NULL when not on
 * a terminal or when the count failed (the redrive then reports it). */
static progress_t *redrive_progress(const settings_t *s, db_conn_t *conn, const pipeline_def_t *def,
                                    const char *type)
{
    if (!progress_wanted()) return NULL;
    dead_letter_list_t l;
    char err[1024], label[128];
    if (dead_letters_list(conn, s->topic[def->id], type, 0, true, &l, err, sizeof err)) return NULL;
    long long total = 0;
    for (size_t r = 0; r < l.count_n; r++) total += l.counts[r].unresolved;
    dead_letters_list_free(&l);
    snprintf(label, sizeof label, "redrive %s", def->name);
    return progress_new(label, total, "dead letters");
}

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
                       const char *by, bool dry_run, redrive_counts_t *total)
{
    redrive_lines_t lines = {.pipeline = def->name, .progress = redrive_progress(s, conn, def, type)};
    redrive_report_t report = {print_not_redrivable, print_still_failing, &lines, show_progress};
    redrive_counts_t c = {0};
    char err[2048];

    int rc = redrive_pipeline(s, conn, def, type, by, dry_run, &report, &c, err, sizeof err);
    progress_end(lines.progress);
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
    const char *topics[PIPELINE_MAX];
    char err[1024];
    dead_letter_topics_t other;
    for (int i = 0; i < pipeline_count(); i++) topics[i] = s->topic[i];
    if (dead_letters_other_topics(conn, topics, pipeline_count(), type, &other, err, sizeof err)) {
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
        int f;
        if (args_is_help(argv[i])) {
            usage_redrive(stdout);
            return EXIT_OK;
        } else if ((f = filter_option("redrive", argc, argv, &i, &only, &type)) != 0) {
            if (f < 0) return EXIT_USAGE;
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
    char by[256];
    operator_name(by, sizeof by);
    for (int i = 0; i < pipeline_count() && rc == EXIT_OK; i++) {
        const pipeline_def_t *def = pipeline_get(i);
        if (only && only != def) continue;
        if (redrive_one(s, conn, def, type, by, dry_run, &total)) rc = EXIT_FAILED;
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
/* resolve */

static void usage_resolve(FILE *out)
{
    char names[128];
    fprintf(out, "usage: storage-consumer dead-letters resolve ID... --note TEXT\n"
          "       storage-consumer dead-letters resolve --type T [--pipeline P] --note TEXT\n"
          "\n"
          "Acknowledges dead letters that will never store (the operator decided they\n"
          "are garbage) without redriving them: each unresolved one is marked resolved\n"
          "with resolution_kind `acknowledged`, resolved_at, resolved_by (the login\n"
          "running the command) and the note. Nothing is stored, nothing deleted; one\n"
          "already resolved keeps its first resolution. Running it again changes\n"
          "nothing.\n"
          "\n"
          "  ID...          these dead letters (ids from `dead-letters list`); when one\n"
          "                 does not exist, nothing is changed (exit 1)\n"
          "  --type T       every unresolved dead letter of error_type T\n"
          "  --pipeline P   with --type: only the topic of pipeline P (%s);\n"
          "                 without it, every topic\n"
          "  --note TEXT    why (required; at most %d bytes)\n"
          "\n"
          "Output: `resolve acknowledged=N already_resolved=N by=...` for ids, or\n"
          "`resolve error_type=T pipeline=P acknowledged=N by=...` for a type.\n"
          "exit codes: 0 done, 1 runtime failure (an id that does not exist), 2 usage error\n",
          pipeline_names(names, sizeof names), DL_NOTE_MAX_BYTES);
}

static int dl_resolve(const settings_t *s, int argc, char **argv)
{
    const pipeline_def_t *def = NULL;
    const char *type = NULL, *note = NULL;
    int64_t *ids = calloc((size_t)argc, sizeof *ids);
    size_t n = 0;
    char err[1024], by[256];
    int rc = EXIT_USAGE;
    if (!ids) abort();

    for (int i = 1; i < argc; i++) {
        int f;
        long long id;
        if (args_is_help(argv[i])) {
            usage_resolve(stdout);
            rc = EXIT_OK;
            goto out;
        } else if ((f = filter_option("resolve", argc, argv, &i, &def, &type)) != 0) {
            if (f < 0) goto out;
        } else if (args_option(argc, argv, &i, "--note", &note)) {
            if (!value_given("resolve", "--note", note)) goto out;
        } else if (argv[i][0] != '-' && args_integer(argv[i], 1, INT64_MAX, &id) == 0) {
            ids[n++] = id;
        } else if (argv[i][0] != '-') {
            fprintf(stderr, "storage-consumer: dead-letters resolve: ID %s: expected a positive integer\n", argv[i]);
            goto out;
        } else {
            fprintf(stderr, "storage-consumer: dead-letters resolve: unexpected argument %s\n", argv[i]);
            usage_resolve(stderr);
            goto out;
        }
    }
    if ((n > 0) == (type != NULL)) {
        fprintf(stderr, "storage-consumer: dead-letters resolve: %s\n",
                n ? "give either IDs or --type T, not both" : "which dead letters? give IDs or --type T");
        usage_resolve(stderr);
        goto out;
    }
    if (def && !type) {
        fputs("storage-consumer: dead-letters resolve: --pipeline goes with --type (an ID names one dead letter)\n",
              stderr);
        goto out;
    }
    if (n > DL_RESOLVE_MAX_IDS) {
        fprintf(stderr, "storage-consumer: dead-letters resolve: %zu IDs: at most %d at once\n", n,
                DL_RESOLVE_MAX_IDS);
        goto out;
    }
    /* Acknowledging says why: a note is what the next operator reads. */
    if (!note) {
        fputs("storage-consumer: dead-letters resolve: --note TEXT is required: say why these dead letters "
              "will never be stored\n",
              stderr);
        goto out;
    }
    if (strlen(note) > DL_NOTE_MAX_BYTES || !utf8_valid(note, strlen(note))) {
        fprintf(stderr, "storage-consumer: dead-letters resolve: --note: expected UTF-8 text of at most %d bytes\n",
                DL_NOTE_MAX_BYTES);
        goto out;
    }

    rc = EXIT_FAILED;
    db_conn_t *conn = connect_checked(s, "resolve");
    if (!conn) goto out;
    operator_name(by, sizeof by);
    size_t acknowledged = 0;
    if (type) {
        if (dead_letters_acknowledge_matching(conn, def ? s->topic[def->id] : NULL, type, by, note, &acknowledged,
                                              err, sizeof err)) {
            fail_msg("resolve", "", err);
            fprintf(stderr, "storage-consumer: dead-letters resolve: %zu acknowledged before the failure; "
                    "run it again for the rest\n", acknowledged);
        } else {
            printf("resolve error_type=%s pipeline=%s acknowledged=%zu by=", type, def ? def->name : "all",
                   acknowledged);
            print_quoted(stdout, by, strlen(by), 0);
            putchar('\n');
            rc = EXIT_OK;
        }
    } else {
        int64_t *missing = calloc(n, sizeof *missing);
        size_t missing_n = 0;
        if (!missing) abort();
        /* The same id twice is one dead letter. */
        size_t distinct = 0;
        for (size_t i = 0; i < n; i++) {
            size_t j = 0;
            while (j < distinct && ids[j] != ids[i]) j++;
            if (j == distinct) ids[distinct++] = ids[i];
        }
        if (dead_letters_acknowledge_ids(conn, ids, distinct, by, note, missing, &missing_n, &acknowledged, err,
                                         sizeof err)) {
            fail_msg("resolve", "", err);
        } else if (missing_n > 0) {
            fputs("storage-consumer: dead-letters resolve: no dead letter with id", stderr);
            for (size_t i = 0; i < missing_n; i++) fprintf(stderr, "%s %" PRId64, i ? "," : "", missing[i]);
            fputs(": nothing changed\n", stderr);
        } else {
            printf("resolve acknowledged=%zu already_resolved=%zu by=", acknowledged, distinct - acknowledged);
            print_quoted(stdout, by, strlen(by), 0);
            putchar('\n');
            rc = EXIT_OK;
        }
        free(missing);
    }
    db_close(conn);
out:
    free(ids);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* purge */

static void usage_purge(FILE *out)
{
    fputs("usage: storage-consumer dead-letters purge --older-than AGE [--dry-run]\n"
          "\n"
          "Deletes the resolved dead letters (redriven or acknowledged) that were resolved\n"
          "longer ago than AGE, a chunk at a time. An unresolved dead letter is never\n"
          "deleted, however old.\n"
          "\n"
          "  --older-than AGE   a number and a unit: h (hours), d (days) or w (weeks),\n"
          "                     e.g. 12h, 30d, 8w\n"
          "  --dry-run          count what would be deleted, delete nothing\n"
          "\n"
          "Output: `purge older_than=AGE resolved_before=TIMESTAMP deleted=N` (with\n"
          "--dry-run: `would_delete=N dry_run=yes`).\n"
          "exit codes: 0 done, 1 runtime failure (chunks deleted before it stay deleted;\n"
          "run it again), 2 usage error\n",
          out);
}

/* AGE: digits then h, d or w. Returns 0 with *seconds set, or -1. */
static int parse_age(const char *text, long long *seconds)
{
    size_t len = strlen(text);
    long long n, unit;
    char digits[32];
    if (len < 2 || len >= sizeof digits) return -1;
    switch (text[len - 1]) {
    case 'h': unit = 3600; break;
    case 'd': unit = 86400; break;
    case 'w': unit = 7 * 86400; break;
    default: return -1;
    }
    memcpy(digits, text, len - 1);
    digits[len - 1] = '\0';
    if (args_integer(digits, 1, DL_PURGE_MAX_AGE_S / unit, &n)) return -1;
    *seconds = n * unit;
    return 0;
}

static int dl_purge(const settings_t *s, int argc, char **argv)
{
    const char *age_text = NULL;
    long long age = 0, count = 0;
    bool dry_run = false;
    char err[1024], cutoff[64] = "";

    for (int i = 1; i < argc; i++) {
        if (args_is_help(argv[i])) {
            usage_purge(stdout);
            return EXIT_OK;
        } else if (args_option(argc, argv, &i, "--older-than", &age_text)) {
            if (!value_given("purge", "--older-than", age_text)) return EXIT_USAGE;
            if (parse_age(age_text, &age)) {
                fprintf(stderr, "storage-consumer: dead-letters purge: --older-than %s: expected a number and "
                        "a unit, h, d or w (e.g. 12h, 30d), of at most 100 years\n", age_text);
                return EXIT_USAGE;
            }
        } else if (strcmp(argv[i], "--dry-run") == 0) {
            dry_run = true;
        } else {
            fprintf(stderr, "storage-consumer: dead-letters purge: unexpected argument %s\n", argv[i]);
            usage_purge(stderr);
            return EXIT_USAGE;
        }
    }
    /* No default age: what is history worth keeping is the operator's call. */
    if (!age_text) {
        fputs("storage-consumer: dead-letters purge: --older-than AGE is required (e.g. --older-than 30d)\n", stderr);
        usage_purge(stderr);
        return EXIT_USAGE;
    }

    db_conn_t *conn = connect_checked(s, "purge");
    if (!conn) return EXIT_FAILED;
    int rc = EXIT_OK;
    if (dead_letters_purge(conn, age, dry_run, &count, cutoff, sizeof cutoff, err, sizeof err)) {
        fail_msg("purge", "", err);
        rc = EXIT_FAILED;
    }
    if (rc == EXIT_OK && dry_run)
        printf("purge older_than=%s resolved_before=%s would_delete=%lld dry_run=yes\n", age_text, cutoff, count);
    else
        printf("purge older_than=%s resolved_before=%s deleted=%lld%s\n", age_text, cutoff[0] ? cutoff : "-",
               count, rc == EXIT_OK ? "" : " (interrupted by an error)");
    db_close(conn);
    return rc;
}

/* ------------------------------------------------------------------------ */

static void usage_dead_letters(FILE *out)
{
    fputs("usage: storage-consumer dead-letters list|show ID|redrive|resolve|purge [OPTIONS]\n"
          "\n"
          "Records that can never be stored are kept in dead_letter_events, written in\n"
          "the same transaction as the good rows of their batch.\n"
          "\n"
          "  list [--pipeline P] [--type T] [--limit N] [--all] [--json]\n"
          "                 counts by pipeline and error_type, then the most recent\n"
          "                 unresolved rows (--all: resolved ones too)\n"
          "  show ID [--json]\n"
          "                 one dead letter, every column; payload and key escaped safely\n"
          "  redrive [--pipeline P] [--type T] [--dry-run]\n"
          "                 store what now succeeds and mark it resolved (redriven)\n"
          "  resolve ID... --note TEXT | resolve --type T [--pipeline P] --note TEXT\n"
          "                 acknowledge dead letters that will never store, without storing\n"
          "  purge --older-than AGE [--dry-run]\n"
          "                 delete resolved dead letters resolved longer ago than AGE\n"
          "                 (e.g. 30d); never an unresolved one\n"
          "\n",
          out);
    fputs("--type T is one of the error types:", out);
    for (size_t i = 0; i < DECODE_ERROR_TYPE_COUNT; i++)
        fprintf(out, "%s %s", i ? "," : "", decode_error_types[i]);
    fputs(".\n"
          "\n"
          "`storage-consumer dead-letters SUBCOMMAND --help` describes each.\n"
          "exit codes: 0 done, 1 runtime failure, 2 usage error\n",
          out);
}

int ops_dead_letters(const settings_t *s, int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "storage-consumer: dead-letters: which subcommand? (list, show, redrive, resolve, purge)\n");
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
    if (strcmp(sub, "resolve") == 0) return dl_resolve(s, argc - 1, argv + 1);
    if (strcmp(sub, "purge") == 0) return dl_purge(s, argc - 1, argv + 1);
    fprintf(stderr, "storage-consumer: dead-letters: unknown subcommand %s\n", sub);
    usage_dead_letters(stderr);
    return EXIT_USAGE;
}
