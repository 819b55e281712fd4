/* dead_letters_change — the subcommands of `storage-consumer dead-letters`
 * that change dead letters (DESIGN.md: Resolving dead letters): their
 * arguments, and what is printed.
 *
 * redrive  store what unresolved dead letters now decode to and mark them
 *          resolved; the engine is ops/redrive.c, the output is here.
 * resolve  acknowledge dead letters that will never store, with a note.
 * purge    delete resolved dead letters resolved longer ago than an age.
 *
 * The command, list and show are ops/dead_letters.c's. */
#include <inttypes.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/utf8.h"
#include "exit_code.h"
#include "ops/args.h"
#include "ops/dead_letters.h"
#include "ops/print.h"
#include "ops/progress.h"
#include "ops/redrive.h"
#include "pg/dead_letters.h"
#include "pg/db.h"

/* Per pipeline and category, how many ids redrive prints before a summary. */
#define DL_DETAIL_LINES 10
/* resolve: at most this many ids at once, and this long a note. */
#define DL_RESOLVE_MAX_IDS 10000
#define DL_NOTE_MAX_BYTES 1000
/* purge: the oldest AGE it takes (100 years). */
#define DL_PURGE_MAX_AGE_S (100LL * 365 * 86400)

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

/* ------------------------------------------------------------------------ */
/* redrive */

static void usage_redrive(FILE *out)
{
    char names[1024];
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
           "inserted=%zu updated=%zu skipped=%zu superseded=%zu after_tombstone=%zu resolved=%zu reasons_refreshed=%zu "
           "dry_run=%s%s\n",
           def->name, c.examined, c.stored, c.still_failing, c.not_redrivable, c.inserted, c.updated, c.skipped,
           c.superseded, c.after_tombstone, c.resolved, c.reasons_refreshed, dry_run ? "yes" : "no",
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
    const char *topics[PIPELINE_MAX * PIPELINE_MAX_TOPICS];
    size_t n = 0;
    char err[1024];
    dead_letter_topics_t other;
    for (int i = 0; i < pipeline_count(); i++)
        for (int t = 0; t < s->topics[i].count; t++) topics[n++] = s->topics[i].name[t];
    if (dead_letters_other_topics(conn, topics, n, type, &other, err, sizeof err)) {
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

int dl_redrive(const settings_t *s, int argc, char **argv)
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
    char names[1024];
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

int dl_resolve(const settings_t *s, int argc, char **argv)
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

int dl_purge(const settings_t *s, int argc, char **argv)
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
