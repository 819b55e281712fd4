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
 * list and show are here; redrive, resolve and purge, which change dead
 * letters, are in ops/dead_letters_change.c; the arguments and connection
 * every subcommand shares in ops/dead_letters_args.c. The statements on
 * dead_letter_events are pg/dead_letters.c's. */
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/decode.h"
#include "core/utf8.h"
#include "exit_code.h"
#include "ops/ops.h"
#include "ops/args.h"
#include "ops/dead_letters.h"
#include "ops/print.h"
#include "pg/dead_letters.h"
#include "pg/db.h"

/* list: rows shown by default, and how much of a detail fits on a line. */
#define DL_LIST_DEFAULT_LIMIT 20
#define DL_LIST_MAX_LIMIT 10000
#define DL_LIST_DETAIL_BYTES 160


/* ------------------------------------------------------------------------ */
/* Shared helpers. */

/* The pipeline that reads `topic` in these settings, or NULL. */
static const pipeline_def_t *pipeline_of_topic(const settings_t *s, const char *topic)
{
    for (int i = 0; i < pipeline_count(); i++)
        if (topic_list_index(&s->topics[i], topic) >= 0) return pipeline_get(i);
    return NULL;
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
    char names[1024];
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
