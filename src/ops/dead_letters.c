/* dead_letters — `storage-consumer dead-letters list|show ID|redrive`.
 *
 * list     counts by pipeline and error_type, then the most recent rows.
 * show     one dead letter, every column; payload and key printed so that
 *          no byte can reach the terminal raw (invalid UTF-8 as \xNN).
 * redrive  re-decode the stored payloads of unresolved dead letters and store
 *          what now succeeds (the operator registered the missing app, a
 *          producer bug was fixed). It is the pipeline's own path, not a copy
 *          of it: decode_record (batch_decode), the store's resolver with its
 *          bind (store_resolve), batch_deduplicate, and the store's COPY +
 *          INSERT ... ON CONFLICT with its data-error isolation
 *          (store_write with a hook). So a redriven review older than the stored
 *          row is a no-op by the same last_synced_at guard, and a row the
 *          database refuses does not abort the others. In the same
 *          transaction as the rows, the dead letters that stored are marked
 *          resolved with a note (never deleted: the table is the history of
 *          what went wrong), and those still failing get their reason
 *          refreshed. Running it again changes nothing.
 *
 * Still-failing records go through the store's dead-letter insert like any
 * rejected record; their coordinates are the dead letter's own, so its
 * ON CONFLICT (topic, partition, kafka_offset) DO NOTHING adds no row.
 *
 * A truncated payload (payload_size > length(payload)) is not the message:
 * storing it would store something the producer never sent, so it is
 * reported as not redrivable and left as it is. */
#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/batch.h"
#include "core/utf8.h"
#include "ops/ops.h"
#include "ops/print.h"
#include "pg/db_internal.h"
#include "pg/store.h"

enum { DL_OK = 0, DL_RUNTIME = 1, DL_USAGE = 2 };

/* Per pipeline and category, how many ids redrive prints before a summary. */
#define DL_DETAIL_LINES 10
/* list: rows shown by default, and how much of a detail fits on a line. */
#define DL_LIST_DEFAULT_LIMIT 20
#define DL_LIST_MAX_LIMIT 10000
#define DL_LIST_DETAIL_BYTES 160

/* Timestamps printed in UTC whatever the server's or session's time zone. */
#define SQL_UTC(col) "to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"

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
static PGconn *connect_checked(const settings_t *s, const char *sub)
{
    char err[1024];
    PGconn *conn = db_connect(s->database_url, s->db_statement_timeout_ms,
                              db_now_ms() + settings_db_attempt_ms(s), err, sizeof err);
    if (!conn) {
        char *masked = db_mask_conninfo(s->database_url);
        fprintf(stderr, "storage-consumer: dead-letters %s: cannot connect to PostgreSQL (%s): %s\n", sub,
                masked, err);
        free(masked);
        return NULL;
    }
    PGresult *res = PQexec(conn, "SELECT count(*) FROM pg_attribute "
                                 "WHERE attrelid = to_regclass('dead_letter_events') "
                                 "AND attname = 'resolved_at' AND NOT attisdropped");
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        db_describe(conn, res, err, sizeof err);
        fail_msg(sub, "checking the schema: ", err);
        PQclear(res);
        PQfinish(conn);
        return NULL;
    }
    bool current = strcmp(PQgetvalue(res, 0, 0), "0") != 0;
    PQclear(res);
    if (!current) {
        fail_msg(sub, "dead_letter_events lacks resolved_at (migration 0005_dead_letter_resolution.sql): ",
                 "run `storage-consumer migrate` first");
        PQfinish(conn);
        return NULL;
    }
    return conn;
}

static bool is_help(const char *a) { return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0; }

/* The value of option argv[*i] (its next argument). Returns NULL after
 * reporting a usage error. */
static const char *option_value(const char *sub, int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) {
        fprintf(stderr, "storage-consumer: dead-letters %s: %s needs a value\n", sub, argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

/* --pipeline NAME: resolved to its definition. Returns NULL after a usage
 * error. */
static const pipeline_def_t *parse_pipeline(const char *sub, const char *name)
{
    const pipeline_def_t *def = pipeline_find(name, strlen(name));
    if (!def)
        fprintf(stderr,
                "storage-consumer: dead-letters %s: unknown pipeline %s (app-stats, reviews, network-metrics)\n",
                sub, name);
    return def;
}

/* A positive decimal integer (an id, a limit) or -1. */
static long long parse_positive(const char *s)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v <= 0 || s[0] == '+' || s[0] == ' ') return -1;
    return v;
}

/* ------------------------------------------------------------------------ */
/* list */

static void usage_list(FILE *out)
{
    fputs("usage: storage-consumer dead-letters list [--pipeline P] [--type T] [--limit N] [--unresolved]\n"
          "\n"
          "Counts of dead letters by pipeline and error_type (unresolved and resolved),\n"
          "then the most recent rows, newest first.\n"
          "\n"
          "  --pipeline P   only the topic of pipeline P (app-stats, reviews, network-metrics)\n"
          "  --type T       only error_type T (e.g. unregistered_app)\n"
          "  --limit N      how many recent rows to show (default 20)\n"
          "  --unresolved   recent rows: only those not yet resolved\n"
          "\n"
          "Output lines: `total ...`, one `count pipeline=P error_type=T unresolved=N\n"
          "resolved=N topic=... newest=...` per group (pipeline=- for a topic no pipeline\n"
          "reads), then `row id=...` lines. `dead-letters show ID` prints one in full.\n",
          out);
}

static int dl_list(const settings_t *s, int argc, char **argv)
{
    const pipeline_def_t *def = NULL;
    const char *type = NULL;
    long long limit = DL_LIST_DEFAULT_LIMIT;
    bool unresolved_only = false;
    char err[1024];
    int rc = DL_RUNTIME;

    for (int i = 1; i < argc; i++) {
        const char *v;
        if (is_help(argv[i])) {
            usage_list(stdout);
            return DL_OK;
        } else if (strcmp(argv[i], "--pipeline") == 0) {
            if (!(v = option_value("list", argc, argv, &i)) || !(def = parse_pipeline("list", v))) return DL_USAGE;
        } else if (strcmp(argv[i], "--type") == 0) {
            if (!(type = option_value("list", argc, argv, &i))) return DL_USAGE;
        } else if (strcmp(argv[i], "--limit") == 0) {
            if (!(v = option_value("list", argc, argv, &i))) return DL_USAGE;
            limit = parse_positive(v);
            if (limit < 1 || limit > DL_LIST_MAX_LIMIT) {
                fprintf(stderr, "storage-consumer: dead-letters list: --limit %s: expected 1..%d\n", v,
                        DL_LIST_MAX_LIMIT);
                return DL_USAGE;
            }
        } else if (strcmp(argv[i], "--unresolved") == 0) {
            unresolved_only = true;
        } else {
            fprintf(stderr, "storage-consumer: dead-letters list: unexpected argument %s\n", argv[i]);
            usage_list(stderr);
            return DL_USAGE;
        }
    }

    PGconn *conn = connect_checked(s, "list");
    if (!conn) return DL_RUNTIME;

    char limit_text[24];
    snprintf(limit_text, sizeof limit_text, "%lld", limit);
    const char *params[4] = {def ? s->topic[def->id] : NULL, type, limit_text,
                             unresolved_only ? "t" : "f"};
    PGresult *counts = NULL, *rows = NULL;

    counts = PQexecParams(conn,
                          "SELECT topic, error_type, count(*) FILTER (WHERE resolved_at IS NULL),"
                          " count(*) FILTER (WHERE resolved_at IS NOT NULL), " SQL_UTC("max(created_at)")
                          " FROM dead_letter_events"
                          " WHERE ($1::text IS NULL OR topic = $1) AND ($2::text IS NULL OR error_type = $2)"
                          " GROUP BY topic, error_type ORDER BY topic, error_type",
                          2, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(counts) != PGRES_TUPLES_OK) {
        db_describe(conn, counts, err, sizeof err);
        fail_msg("list", "", err);
        goto out;
    }
    rows = PQexecParams(conn,
                        "SELECT id, topic, partition, kafka_offset, error_type, payload_size,"
                        " octet_length(payload), resolved_at IS NOT NULL, " SQL_UTC("created_at") ", error_detail"
                        " FROM dead_letter_events"
                        " WHERE ($1::text IS NULL OR topic = $1) AND ($2::text IS NULL OR error_type = $2)"
                        " AND NOT ($4::boolean AND resolved_at IS NOT NULL)"
                        " ORDER BY id DESC LIMIT $3::bigint",
                        4, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(rows) != PGRES_TUPLES_OK) {
        db_describe(conn, rows, err, sizeof err);
        fail_msg("list", "", err);
        goto out;
    }

    long long total_unresolved = 0, total_resolved = 0;
    for (int r = 0; r < PQntuples(counts); r++) {
        total_unresolved += strtoll(PQgetvalue(counts, r, 2), NULL, 10);
        total_resolved += strtoll(PQgetvalue(counts, r, 3), NULL, 10);
    }
    printf("total unresolved=%lld resolved=%lld\n", total_unresolved, total_resolved);
    for (int r = 0; r < PQntuples(counts); r++) {
        const char *topic = PQgetvalue(counts, r, 0);
        const pipeline_def_t *p = pipeline_of_topic(s, topic);
        printf("count pipeline=%s error_type=%s unresolved=%s resolved=%s topic=", p ? p->name : "-",
               PQgetvalue(counts, r, 1), PQgetvalue(counts, r, 2), PQgetvalue(counts, r, 3));
        print_quoted(stdout, topic, strlen(topic), 0);
        printf(" newest=%s%s\n", PQgetvalue(counts, r, 4), p ? "" : " (no pipeline reads this topic)");
    }
    printf("recent shown=%d limit=%lld%s\n", PQntuples(rows), limit, unresolved_only ? " unresolved_only" : "");
    for (int r = 0; r < PQntuples(rows); r++) {
        const pipeline_def_t *p = pipeline_of_topic(s, PQgetvalue(rows, r, 1));
        long long size = strtoll(PQgetvalue(rows, r, 5), NULL, 10);
        long long kept = strtoll(PQgetvalue(rows, r, 6), NULL, 10);
        const char *detail = PQgetvalue(rows, r, 9);
        printf("row id=%s pipeline=%s partition=%s offset=%s created_at=%s error_type=%s status=%s "
               "payload_size=%lld%s detail=",
               PQgetvalue(rows, r, 0), p ? p->name : "-", PQgetvalue(rows, r, 2), PQgetvalue(rows, r, 3),
               PQgetvalue(rows, r, 8), PQgetvalue(rows, r, 4),
               PQgetvalue(rows, r, 7)[0] == 't' ? "resolved" : "unresolved", size,
               size > kept ? " truncated" : "");
        print_quoted(stdout, detail, strlen(detail), DL_LIST_DETAIL_BYTES);
        putchar('\n');
    }
    rc = DL_OK;
out:
    PQclear(counts);
    PQclear(rows);
    PQfinish(conn);
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
static void show_bytes(const char *name, const PGresult *res, int col)
{
    if (PQgetisnull(res, 0, col)) {
        printf("%s: null\n", name);
        return;
    }
    const char *v = PQgetvalue(res, 0, col);
    size_t len = (size_t)PQgetlength(res, 0, col);
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

static void show_text(const char *name, const PGresult *res, int col)
{
    if (PQgetisnull(res, 0, col)) {
        printf("%s: null\n", name);
        return;
    }
    printf("%s: ", name);
    print_quoted(stdout, PQgetvalue(res, 0, col), (size_t)PQgetlength(res, 0, col), 0);
    putchar('\n');
}

static void show_plain(const char *name, const PGresult *res, int col)
{
    printf("%s: %s\n", name, PQgetisnull(res, 0, col) ? "null" : PQgetvalue(res, 0, col));
}

static int dl_show(const settings_t *s, int argc, char **argv)
{
    const char *id_text = NULL;
    char err[1024];
    for (int i = 1; i < argc; i++) {
        if (is_help(argv[i])) {
            usage_show(stdout);
            return DL_OK;
        } else if (!id_text && argv[i][0] != '-') {
            id_text = argv[i];
        } else {
            fprintf(stderr, "storage-consumer: dead-letters show: unexpected argument %s\n", argv[i]);
            usage_show(stderr);
            return DL_USAGE;
        }
    }
    if (!id_text) {
        fprintf(stderr, "storage-consumer: dead-letters show: which dead letter? (an id from `dead-letters list`)\n");
        usage_show(stderr);
        return DL_USAGE;
    }
    if (parse_positive(id_text) < 0) {
        fprintf(stderr, "storage-consumer: dead-letters show: ID %s: expected a positive integer\n", id_text);
        return DL_USAGE;
    }

    PGconn *conn = connect_checked(s, "show");
    if (!conn) return DL_RUNTIME;
    const char *params[1] = {id_text};
    /* Binary results: bytea arrives as its exact bytes; every other column is
     * text (a text column's binary form is its bytes). */
    PGresult *res = PQexecParams(conn,
                                 "SELECT id::text, topic::text, partition::text, kafka_offset::text, "
                                 SQL_UTC("kafka_timestamp") ", message_key, payload, payload_size::text,"
                                 " octet_length(payload)::text, error_type::text, error_detail, "
                                 SQL_UTC("created_at") ", " SQL_UTC("resolved_at") ", resolution"
                                 " FROM dead_letter_events WHERE id = $1::bigint",
                                 1, NULL, params, NULL, NULL, 1);
    int rc = DL_RUNTIME;
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        db_describe(conn, res, err, sizeof err);
        fail_msg("show", "", err);
    } else if (PQntuples(res) == 0) {
        fail_msg("show", "no dead letter with id ", id_text);
    } else {
        const char *topic = PQgetvalue(res, 0, 1);
        const pipeline_def_t *p = pipeline_of_topic(s, topic);
        long long size = strtoll(PQgetvalue(res, 0, 7), NULL, 10);
        long long kept = strtoll(PQgetvalue(res, 0, 8), NULL, 10);
        bool resolved = !PQgetisnull(res, 0, 12);
        show_plain("id", res, 0);
        show_text("topic", res, 1);
        printf("pipeline: %s\n", p ? p->name : "- (no pipeline reads this topic)");
        show_plain("partition", res, 2);
        show_plain("kafka_offset", res, 3);
        show_plain("kafka_timestamp", res, 4);
        show_plain("created_at", res, 11);
        show_plain("error_type", res, 9);
        show_text("error_detail", res, 10);
        printf("status: %s\n", resolved ? "resolved" : "unresolved");
        show_plain("resolved_at", res, 12);
        show_text("resolution", res, 13);
        if (size > kept)
            printf("redrivable: no (payload truncated: %lld of %lld bytes stored)\n", kept, size);
        else
            printf("redrivable: %s\n", resolved ? "no (already resolved)" : "yes");
        show_bytes("message_key", res, 5);
        show_plain("payload_size", res, 7);
        show_bytes("payload", res, 6);
        rc = DL_OK;
    }
    PQclear(res);
    PQfinish(conn);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* redrive */

static void usage_redrive(FILE *out)
{
    fputs("usage: storage-consumer dead-letters redrive [--pipeline P] [--type T] [--dry-run]\n"
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
          "  --pipeline P   only pipeline P (app-stats, reviews, network-metrics)\n"
          "  --type T       only dead letters with error_type T (e.g. unregistered_app)\n"
          "  --dry-run      do everything, then roll back: reports what would be stored\n"
          "                 and what still fails, changes nothing\n"
          "\n"
          "Output: `redrive pipeline=P examined=N stored=N still_failing=N\n"
          "not_redrivable=N ...` per pipeline, `still_failing id=...` and\n"
          "`not_redrivable id=...` lines (the first 10 of each), and a `redrive total ...`\n"
          "line. Exit 0 when the run completed (whatever still fails), 1 on a database\n"
          "failure (batches committed before it stay committed; run it again).\n",
          out);
}

typedef struct {
    size_t examined, stored, still_failing, not_redrivable, superseded;
    size_t inserted, updated, skipped, resolved, reasons_refreshed;
} redrive_counts_t;

/* One pipeline's redrive. Owns the store, the batch and the per-batch arrays. */
typedef struct {
    const settings_t *settings;
    const pipeline_def_t *def;
    const char *topic;
    bool dry_run;
    store_t *store;
    batch_t batch;
    record_t *records;     /* the batch's records; bytes borrowed from `rows` */
    int64_t *ids;          /* dead letter id of each record */
    size_t capacity;
    redrive_counts_t counts;
    /* Set by mark_dead_letters for the current batch. */
    size_t batch_resolved, batch_refreshed;
    size_t printed_failing, printed_truncated;
} redrive_t;

/* A text[] literal of the given strings, or of the decimal ids. Returns a
 * string the caller frees. */
static char *array_literal(const int64_t *ids, const char *const *texts, size_t n)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    if (!f) abort();
    fputc('{', f);
    for (size_t i = 0; i < n; i++) {
        if (i) fputc(',', f);
        if (ids) {
            fprintf(f, "%" PRId64, ids[i]);
            continue;
        }
        fputc('"', f);
        for (const char *p = texts[i]; *p; p++) {
            if (*p == '"' || *p == '\\') fputc('\\', f);
            fputc(*p, f);
        }
        fputc('"', f);
    }
    fputc('}', f);
    if (fclose(f) != 0 || !out) abort();
    return out;
}

/* Run one UPDATE with text parameters; *changed gets the rows it touched. */
static int exec_update(PGconn *conn, const char *sql, int nparams, const char *const *params,
                       size_t *changed, char *err, size_t errlen, error_class_t *cls)
{
    PGresult *res = PQexecParams(conn, sql, nparams, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        char why[1024];
        db_describe(conn, res, why, sizeof why);
        snprintf(err, errlen, "updating dead_letter_events: %s", why);
        *cls = db_classify(conn, res);
        PQclear(res);
        return -1;
    }
    *changed = (size_t)strtoull(PQcmdTuples(res), NULL, 10);
    PQclear(res);
    return 0;
}

/* The store hook: inside the batch's transaction, before its upsert and
 * COMMIT, every entry in its final state. Stored and superseded entries
 * resolve their dead letters; rejected ones refresh the reason, only where
 * it changed, so a second run touches nothing. A reason
 * changed when its error_type or the first line of its detail did: the
 * database's DETAIL line (database_rejected) quotes the failing row with a
 * fresh sequence value on every attempt, and would rewrite the row on every
 * run. */
static int mark_dead_letters(void *ctx, PGconn *conn, const batch_t *b, char *err, size_t errlen,
                             error_class_t *cls)
{
    redrive_t *rd = ctx;
    int64_t *stored = malloc((b->count ? b->count : 1) * sizeof *stored);
    int64_t *superseded = malloc((b->count ? b->count : 1) * sizeof *superseded);
    int64_t *failing = malloc((b->count ? b->count : 1) * sizeof *failing);
    const char **types = malloc((b->count ? b->count : 1) * sizeof *types);
    const char **details = malloc((b->count ? b->count : 1) * sizeof *details);
    size_t ns = 0, nx = 0, nf = 0, changed;
    char *ids_lit = NULL, *types_lit = NULL, *details_lit = NULL, note[256], note_superseded[256];
    int rc = -1;
    if (!stored || !superseded || !failing || !types || !details) abort();

    for (size_t i = 0; i < b->count; i++) {
        const entry_t *e = &b->entries[i];
        if (e->state == ENTRY_EVENT) stored[ns++] = rd->ids[i];
        else if (e->state == ENTRY_SUPERSEDED) superseded[nx++] = rd->ids[i];
        else if (e->state == ENTRY_REJECTED) {
            failing[nf] = rd->ids[i];
            types[nf] = e->rejection.error_type;
            details[nf++] = e->rejection.detail;
        }
    }
    rd->batch_resolved = rd->batch_refreshed = 0;
    /* Per row the upsert's outcome is not known (a newer stored row may
     * have been kept by the ON CONFLICT rule): the note says what was done. */
    snprintf(note, sizeof note, "redriven: decoded and upserted into %s by the pipeline's ON CONFLICT rule",
             rd->def->table);
    snprintf(note_superseded, sizeof note_superseded,
             "redriven: another dead letter with the same %s%s was upserted into %s in the same batch",
             rd->def->key_includes_app ? "application_id and " : "", rd->def->fields[rd->def->key_field].name,
             rd->def->table);

    const char *resolve_sql = "UPDATE dead_letter_events SET resolved_at = now(), resolution = $2"
                              " WHERE id = ANY($1::bigint[]) AND resolved_at IS NULL";
    if (ns > 0) {
        ids_lit = array_literal(stored, NULL, ns);
        const char *params[2] = {ids_lit, note};
        if (exec_update(conn, resolve_sql, 2, params, &changed, err, errlen, cls)) goto out;
        rd->batch_resolved += changed;
        free(ids_lit);
        ids_lit = NULL;
    }
    if (nx > 0) {
        ids_lit = array_literal(superseded, NULL, nx);
        const char *params[2] = {ids_lit, note_superseded};
        if (exec_update(conn, resolve_sql, 2, params, &changed, err, errlen, cls)) goto out;
        rd->batch_resolved += changed;
        free(ids_lit);
        ids_lit = NULL;
    }
    if (nf > 0) {
        ids_lit = array_literal(failing, NULL, nf);
        types_lit = array_literal(NULL, types, nf);
        details_lit = array_literal(NULL, details, nf);
        const char *params[3] = {ids_lit, types_lit, details_lit};
        if (exec_update(conn,
                        "UPDATE dead_letter_events d SET error_type = v.error_type, error_detail = v.error_detail"
                        " FROM unnest($1::bigint[], $2::text[], $3::text[]) AS v(id, error_type, error_detail)"
                        " WHERE d.id = v.id AND d.resolved_at IS NULL"
                        " AND (d.error_type::text, split_part(d.error_detail, E'\\n', 1))"
                        " IS DISTINCT FROM (v.error_type, split_part(v.error_detail, E'\\n', 1))",
                        3, params, &changed, err, errlen, cls))
            goto out;
        rd->batch_refreshed = changed;
    }
    rc = 0;
out:
    free(ids_lit);
    free(types_lit);
    free(details_lit);
    free(stored);
    free(superseded);
    free(failing);
    free(types);
    free(details);
    return rc;
}

/* Columns of the redrive query, in order. */
enum { RD_ID, RD_PARTITION, RD_OFFSET, RD_TIMESTAMP_MS, RD_KEY, RD_PAYLOAD, RD_SIZE, RD_KEPT, RD_COLUMNS };

/* Fetch the next batch of unresolved dead letters of the pipeline's topic
 * with an id above `after`. Returns the result (the caller clears it) or NULL
 * with err. */
static PGresult *fetch_batch(PGconn *conn, const redrive_t *rd, const char *type, int64_t after,
                             char *err, size_t errlen)
{
    char after_text[24], limit_text[24];
    snprintf(after_text, sizeof after_text, "%" PRId64, after);
    snprintf(limit_text, sizeof limit_text, "%d", rd->settings->max_poll_records[rd->def->id]);
    const char *params[4] = {rd->topic, type, after_text, limit_text};
    /* Binary results: bytea as its exact bytes; the other columns are text. */
    PGresult *res = PQexecParams(
        conn,
        "SELECT id::text, partition::text, kafka_offset::text,"
        " COALESCE(round(extract(epoch FROM kafka_timestamp) * 1000)::bigint, -1)::text,"
        " message_key, payload, payload_size::text, octet_length(payload)::text"
        " FROM dead_letter_events"
        " WHERE topic = $1 AND resolved_at IS NULL AND ($2::text IS NULL OR error_type = $2)"
        " AND id > $3::bigint ORDER BY id LIMIT $4::int",
        4, NULL, params, NULL, NULL, 1);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        db_describe(conn, res, err, errlen);
        PQclear(res);
        return NULL;
    }
    return res;
}

/* Redrive the rows of one fetched batch. Returns 0 or -1 with err. */
static int redrive_batch(redrive_t *rd, const PGresult *rows, char *err, size_t errlen)
{
    size_t n = (size_t)PQntuples(rows), m = 0;
    error_class_t cls = ERROR_CLASS_FATAL;
    const char *name = rd->def->name;

    if (n > rd->capacity) {
        rd->records = realloc(rd->records, n * sizeof *rd->records);
        rd->ids = realloc(rd->ids, n * sizeof *rd->ids);
        if (!rd->records || !rd->ids) abort();
        rd->capacity = n;
    }
    for (size_t r = 0; r < n; r++) {
        int row = (int)r;
        int64_t id = strtoll(PQgetvalue(rows, row, RD_ID), NULL, 10);
        long long size = strtoll(PQgetvalue(rows, row, RD_SIZE), NULL, 10);
        long long kept = strtoll(PQgetvalue(rows, row, RD_KEPT), NULL, 10);
        rd->counts.examined++;
        if (size > kept) {
            rd->counts.not_redrivable++;
            if (rd->printed_truncated++ < DL_DETAIL_LINES)
                printf("not_redrivable id=%" PRId64 " pipeline=%s payload_size=%lld stored_bytes=%lld "
                       "reason=\"payload truncated: the stored bytes are not the message\"\n",
                       id, name, size, kept);
            continue;
        }
        record_t *rec = &rd->records[m];
        rd->ids[m] = id;
        rec->topic = rd->topic;
        rec->partition = (int32_t)strtol(PQgetvalue(rows, row, RD_PARTITION), NULL, 10);
        rec->offset = strtoll(PQgetvalue(rows, row, RD_OFFSET), NULL, 10);
        rec->timestamp_ms = strtoll(PQgetvalue(rows, row, RD_TIMESTAMP_MS), NULL, 10);
        rec->key = PQgetisnull(rows, row, RD_KEY) ? NULL : PQgetvalue(rows, row, RD_KEY);
        rec->key_len = rec->key ? (size_t)PQgetlength(rows, row, RD_KEY) : 0;
        rec->value = PQgetvalue(rows, row, RD_PAYLOAD);
        rec->value_len = (size_t)PQgetlength(rows, row, RD_PAYLOAD);
        m++;
    }
    if (m == 0) return 0;

    /* The pipeline's own path: decode, resolve and bind, de-duplicate, then
     * the store's upsert with the dead letters marked in its transaction. */
    batch_counts_t counts = {0};
    batch_decode(&rd->batch, rd->records, m);
    if (store_resolve(rd->store, &rd->batch, err, errlen, &cls)) return -1;
    counts.superseded = batch_deduplicate(&rd->batch);
    store_hook_t hook = {.fn = mark_dead_letters, .ctx = rd, .commit = !rd->dry_run};
    if (store_write(rd->store, &rd->batch, &hook, &counts, err, errlen, &cls)) return -1;

    rd->counts.inserted += counts.inserted;
    rd->counts.updated += counts.updated;
    rd->counts.skipped += counts.skipped;
    rd->counts.resolved += rd->batch_resolved;
    rd->counts.reasons_refreshed += rd->batch_refreshed;
    for (size_t i = 0; i < m; i++) {
        const entry_t *e = &rd->batch.entries[i];
        /* A superseded record's winner is stored: when the database refused
         * a winner, the store put the next observation in its place. */
        if (e->state == ENTRY_REJECTED) {
            rd->counts.still_failing++;
            if (rd->printed_failing++ < DL_DETAIL_LINES) {
                printf("still_failing id=%" PRId64 " pipeline=%s error_type=%s detail=", rd->ids[i], name,
                       e->rejection.error_type);
                print_quoted(stdout, e->rejection.detail, strlen(e->rejection.detail), 0);
                putchar('\n');
            }
        } else {
            rd->counts.stored++;
            if (e->state == ENTRY_SUPERSEDED) rd->counts.superseded++;
        }
    }
    return 0;
}

static void print_more(const char *what, const char *pipeline, size_t printed)
{
    if (printed > DL_DETAIL_LINES)
        printf("%s pipeline=%s more=%zu (only the first %d are listed)\n", what, pipeline,
               printed - DL_DETAIL_LINES, DL_DETAIL_LINES);
}

/* Redrive one pipeline. Adds to *total. Returns 0 or -1 (reported). */
static int redrive_pipeline(const settings_t *s, PGconn *conn, const pipeline_def_t *def, const char *type,
                            bool dry_run, redrive_counts_t *total)
{
    redrive_t rd = {.settings = s, .def = def, .topic = s->topic[def->id], .dry_run = dry_run};
    char err[2048];
    int64_t after = 0;
    int rc = 0;

    rd.store = store_new(s, def);
    batch_init(&rd.batch, def);
    for (;;) {
        PGresult *rows = fetch_batch(conn, &rd, type, after, err, sizeof err);
        if (!rows) {
            rc = -1;
            break;
        }
        size_t n = (size_t)PQntuples(rows);
        if (n > 0) after = strtoll(PQgetvalue(rows, (int)n - 1, RD_ID), NULL, 10);
        /* The records borrow the bytes of `rows`: clear it only after. */
        rc = n > 0 ? redrive_batch(&rd, rows, err, sizeof err) : 0;
        PQclear(rows);
        if (rc != 0 || n == 0) break;
    }
    print_more("still_failing", def->name, rd.printed_failing);
    print_more("not_redrivable", def->name, rd.printed_truncated);
    printf("redrive pipeline=%s examined=%zu stored=%zu still_failing=%zu not_redrivable=%zu "
           "inserted=%zu updated=%zu skipped=%zu superseded=%zu resolved=%zu reasons_refreshed=%zu dry_run=%s%s\n",
           def->name, rd.counts.examined, rd.counts.stored, rd.counts.still_failing, rd.counts.not_redrivable,
           rd.counts.inserted, rd.counts.updated, rd.counts.skipped, rd.counts.superseded, rd.counts.resolved,
           rd.counts.reasons_refreshed, dry_run ? "yes" : "no", rc ? " (interrupted by an error)" : "");
    if (rc) {
        fflush(stdout);
        fprintf(stderr,
                "storage-consumer: dead-letters redrive: pipeline %s: %s (the failed batch was rolled back; "
                "batches before it are committed; redrive is idempotent: run it again)\n",
                def->name, err);
    }
    total->examined += rd.counts.examined;
    total->stored += rd.counts.stored;
    total->still_failing += rd.counts.still_failing;
    total->not_redrivable += rd.counts.not_redrivable;
    total->resolved += rd.counts.resolved;
    total->reasons_refreshed += rd.counts.reasons_refreshed;
    batch_free(&rd.batch);
    store_free(rd.store);
    free(rd.records);
    free(rd.ids);
    return rc;
}

/* Unresolved dead letters of topics no pipeline reads: reported, left as is. */
static int report_unknown_topics(const settings_t *s, PGconn *conn, const char *type)
{
    const char *topics[PIPELINE_COUNT];
    char err[1024];
    for (int i = 0; i < PIPELINE_COUNT; i++) topics[i] = s->topic[i];
    char *literal = array_literal(NULL, topics, PIPELINE_COUNT);
    const char *params[2] = {literal, type};
    PGresult *res = PQexecParams(conn,
                                 "SELECT topic, count(*) FROM dead_letter_events"
                                 " WHERE resolved_at IS NULL AND topic <> ALL($1::text[])"
                                 " AND ($2::text IS NULL OR error_type = $2)"
                                 " GROUP BY topic ORDER BY topic",
                                 2, NULL, params, NULL, NULL, 0);
    free(literal);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        db_describe(conn, res, err, sizeof err);
        fail_msg("redrive", "", err);
        PQclear(res);
        return -1;
    }
    for (int r = 0; r < PQntuples(res); r++) {
        const char *topic = PQgetvalue(res, r, 0);
        printf("redrive skipped topic=");
        print_quoted(stdout, topic, strlen(topic), 0);
        printf(" unresolved=%s note=\"no pipeline reads this topic (STORAGE_TOPIC_*): left as is\"\n",
               PQgetvalue(res, r, 1));
    }
    PQclear(res);
    return 0;
}

static int dl_redrive(const settings_t *s, int argc, char **argv)
{
    const pipeline_def_t *only = NULL;
    const char *type = NULL;
    bool dry_run = false;

    for (int i = 1; i < argc; i++) {
        const char *v;
        if (is_help(argv[i])) {
            usage_redrive(stdout);
            return DL_OK;
        } else if (strcmp(argv[i], "--pipeline") == 0) {
            if (!(v = option_value("redrive", argc, argv, &i)) || !(only = parse_pipeline("redrive", v)))
                return DL_USAGE;
        } else if (strcmp(argv[i], "--type") == 0) {
            if (!(type = option_value("redrive", argc, argv, &i))) return DL_USAGE;
        } else if (strcmp(argv[i], "--dry-run") == 0) {
            dry_run = true;
        } else {
            fprintf(stderr, "storage-consumer: dead-letters redrive: unexpected argument %s\n", argv[i]);
            usage_redrive(stderr);
            return DL_USAGE;
        }
    }

    PGconn *conn = connect_checked(s, "redrive");
    if (!conn) return DL_RUNTIME;
    redrive_counts_t total = {0};
    int rc = DL_OK;
    for (int i = 0; i < PIPELINE_COUNT && rc == DL_OK; i++) {
        const pipeline_def_t *def = pipeline_get((pipeline_id_t)i);
        if (only && only != def) continue;
        if (redrive_pipeline(s, conn, def, type, dry_run, &total)) rc = DL_RUNTIME;
    }
    if (rc == DL_OK && !only && report_unknown_topics(s, conn, type)) rc = DL_RUNTIME;
    PQfinish(conn);
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
               rc == DL_OK ? "" : " (interrupted by an error)");
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
        return DL_USAGE;
    }
    const char *sub = argv[1];
    if (is_help(sub) || strcmp(sub, "help") == 0) {
        usage_dead_letters(stdout);
        return DL_OK;
    }
    if (strcmp(sub, "list") == 0) return dl_list(s, argc - 1, argv + 1);
    if (strcmp(sub, "show") == 0) return dl_show(s, argc - 1, argv + 1);
    if (strcmp(sub, "redrive") == 0) return dl_redrive(s, argc - 1, argv + 1);
    fprintf(stderr, "storage-consumer: dead-letters: unknown subcommand %s\n", sub);
    usage_dead_letters(stderr);
    return DL_USAGE;
}
