/* decoder_vs_postgres — the decoder and PostgreSQL given the same values,
 * compared value for value (DESIGN.md: Pipelines are declared; run by
 * tests/integration/decoder_vs_postgres.sh).
 *
 *   decoder_vs_postgres CONNINFO WORKDIR < CASES
 *
 * CASES holds one case a line: a column type, a tab, and the JSON text of a
 * value ("real<TAB>3.4028235e38", "varchar(3)<TAB>\"ab   \""). For each type
 * a table of one column of it is made, and a pipeline declared for it is
 * bound to the table through the catalog, as the service binds its own.
 * Each value is then published in a record to both of the decoder's
 * readers, and its text as the producer meant it (a number's token, a
 * string's characters, anything else as written; for json and jsonb the
 * JSON text as written) is inserted into the table's column, as a client's
 * text is, in a transaction rolled back (a JSON array for an array column:
 * its elements, as PostgreSQL's json_array_elements reads them). They
 * agree when:
 *   - for a type the decoder checks: it accepts the value <=> PostgreSQL
 *     accepts it and stores that very value (for NUMERIC(p,s): the number
 *     is not rounded), and an accepted value's column text, read by
 *     PostgreSQL, gives the same output as the published text;
 *   - for a type PostgreSQL judges: the decoder hands the value over, and
 *     PostgreSQL reads the column text as it reads the published value:
 *     both refused, or both stored alike.
 * Prints one line per case ("agree" or "DISAGREE") and exits 1 if any
 * disagree, 2 on a setup failure. */
#include <jansson.h>
#include <libpq-fe.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/decode.h"
#include "core/pipeline.h"
#include "pg/catalog.h"
#include "pg/db.h"

#define MAX_TYPES 64
#define MAX_CASES 1024

typedef struct {
    char type[64];
    char json[512];
    int pipeline;
} case_t;

static case_t cases[MAX_CASES];
static char types[MAX_TYPES][64];

static void die(const char *what, const char *why)
{
    fprintf(stderr, "decoder_vs_postgres: %s: %s\n", what, why);
    exit(2);
}

static void run(PGconn *pg, const char *sql)
{
    PGresult *r = PQexec(pg, sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) die(sql, PQerrorMessage(pg));
    PQclear(r);
}

/* PostgreSQL's output of `text` stored in table dvp_T's column, given as
 * `expr` ("$1": the text itself): 1 with *out (freed by the caller), or 0
 * with its SQLSTATE and message in *out. */
static int pg_reads(PGconn *pg, int table, const char *expr, const char *text, char **out)
{
    char sql[300];
    snprintf(sql, sizeof sql, "INSERT INTO dvp_%d (k, v) VALUES (1, %s) RETURNING v::text", table, expr);
    const char *params[] = {text};
    run(pg, "BEGIN");
    PGresult *r = PQexecParams(pg, sql, 1, NULL, params, NULL, NULL, 0);
    int ok = PQresultStatus(r) == PGRES_TUPLES_OK;
    if (ok) {
        *out = strdup(PQgetisnull(r, 0, 0) ? "<null>" : PQgetvalue(r, 0, 0));
    } else {
        const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
        const char *msg = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
        size_t n = strlen(state ? state : "") + strlen(msg ? msg : "") + 4;
        *out = malloc(n);
        if (*out) snprintf(*out, n, "%s %s", state ? state : "", msg ? msg : "");
    }
    if (!*out) abort();
    PQclear(r);
    run(pg, "ROLLBACK");
    return ok;
}

/* Whether PostgreSQL stores the number `text` as another number in `type`,
 * a NUMERIC one (NUMERIC(p,s) rounds to its scale). */
static int pg_rounds(PGconn *pg, const char *type, const char *text)
{
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT $1::numeric <> $1::%s", type);
    const char *params[] = {text};
    PGresult *r = PQexecParams(pg, sql, 1, NULL, params, NULL, NULL, 0);
    int rounds = PQresultStatus(r) == PGRES_TUPLES_OK && strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    PQclear(r);
    return rounds;
}

/* The published text: a JSON string's characters, anything else (and
 * anything for a json or jsonb column) as written. */
static char *published(const char *type, const char *json)
{
    json_error_t e;
    json_t *v = json_loads(json, JSON_DECODE_ANY, &e);
    bool as_written = strcmp(type, "json") == 0 || strcmp(type, "jsonb") == 0;
    char *s = v && json_is_string(v) && !as_written ? strdup(json_string_value(v)) : strdup(json);
    if (!s) abort();
    json_decref(v);
    return s;
}

int main(int argc, char **argv)
{
    if (argc != 3) die("usage", "decoder_vs_postgres CONNINFO WORKDIR < CASES");
    char err[1024], line[1024];
    size_t ncases = 0, ntypes = 0;
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = '\0';
        char *tab = strchr(line, '\t');
        if (!tab || line[0] == '#') continue;
        if (ncases == MAX_CASES) die("cases", "too many");
        case_t *c = &cases[ncases++];
        *tab = '\0';
        if (strlen(line) >= sizeof c->type || strlen(tab + 1) >= sizeof c->json) die(line, "too long");
        memcpy(c->type, line, strlen(line) + 1);
        memcpy(c->json, tab + 1, strlen(tab + 1) + 1);
        size_t t = 0;
        while (t < ntypes && strcmp(types[t], c->type) != 0) t++;
        if (t == ntypes) {
            if (ntypes == MAX_TYPES) die("types", "too many");
            memcpy(types[ntypes++], c->type, sizeof c->type);
        }
        c->pipeline = (int)t;
    }

    PGconn *pg = PQconnectdb(argv[1]);
    if (PQstatus(pg) != CONNECTION_OK) die("connect", PQerrorMessage(pg));
    run(pg, "SET client_min_messages = warning");
    char path[512];
    snprintf(path, sizeof path, "%s/decoder_vs_postgres.json", argv[2]);
    FILE *f = fopen(path, "w");
    if (!f) die(path, "cannot write");
    fputs("{\"pipelines\": [\n", f);
    for (size_t t = 0; t < ntypes; t++) {
        char sql[512];
        snprintf(sql, sizeof sql,
                 "DROP TABLE IF EXISTS dvp_%zu; CREATE TABLE dvp_%zu (k int NOT NULL, v %s, UNIQUE (k))",
                 t, t, types[t]);
        run(pg, sql);
        fprintf(f,
                "%s{\"name\": \"dvp-%zu\", \"table\": \"dvp_%zu\", \"batch_size\": 10, "
                "\"fields\": [{\"member\": \"k\", \"required\": true}, {\"member\": \"v\"}], "
                "\"key\": [\"k\"], \"on_conflict\": \"nothing\"}\n",
                t ? "," : "", t, t);
    }
    fputs("]}\n", f);
    if (fclose(f) != 0) die(path, "cannot write");
    if (pipelines_load(path, err, sizeof err)) die("definitions", err);
    for (size_t t = 0; t < ntypes; t++) {
        int rc = catalog_bind_pipeline((db_conn_t *)pg, (pipeline_id_t)t, err, sizeof err);
        if (rc) die(types[t], err);
    }

    int disagree = 0;
    event_t ev = {0}, ref = {0};
    for (size_t i = 0; i < ncases; i++) {
        const case_t *c = &cases[i];
        const pipeline_def_t *def = pipeline_get(c->pipeline);
        char record[700];
        rejection_t rej, ref_rej;
        int n = snprintf(record, sizeof record, "{\"package_name\":\"p\",\"k\":1,\"v\":%s}", c->json);
        int rc = decode_record(def, record, (size_t)n, &ev, &rej);
        int ref_rc = decode_record_reference(def, record, (size_t)n, &ref, &ref_rej);
        /* A JSON array for an array column: PostgreSQL's own reading of
         * its elements (as text, or as JSON for json[] and jsonb[]). */
        char expr[200] = "$1";
        field_kind_t kind = def->fields[1].kind;
        if (kind == FIELD_ARRAY && c->json[0] == '[')
            snprintf(expr, sizeof expr, "ARRAY(SELECT json_array_elements%s($1::json))::%s",
                     def->fields[1].json_elements ? "" : "_text", c->type);
        char *text = published(c->type, c->json), *pg_out = NULL, *pg_col = NULL;
        int pg_ok = pg_reads(pg, c->pipeline, expr, text, &pg_out);
        int same_value = pg_ok && !(kind == FIELD_DECIMAL && pg_rounds(pg, c->type, text));
        /* PostgreSQL judges its types: the decoder hands every value over,
         * and PostgreSQL must read the handed text as it reads the
         * published one, refusal included. */
        bool judged = kind == FIELD_TEXT || kind == FIELD_JSON || kind == FIELD_ARRAY;
        const char *col = rc == 0 ? event_column(&ev, 1) : NULL;
        int agrees = rc == ref_rc && (judged ? rc == 0 : (rc == 0) == same_value) &&
                     (rc != 0 ? strcmp(rej.detail, ref_rej.detail) == 0 : event_equal(def, &ev, &ref));
        if (agrees && rc == 0 && col) {
            int col_ok = pg_reads(pg, c->pipeline, "$1", col, &pg_col);
            agrees = col_ok == pg_ok && (!pg_ok || strcmp(pg_col, pg_out) == 0);
        }
        printf("%s %s %s: decoder %s [%s], postgres %s [%s]%s%s\n", agrees ? "agree" : "DISAGREE", c->type, c->json,
               rc == 0 ? "accepts" : "refuses", rc == 0 ? (col ? col : "<null>") : rej.detail,
               pg_ok ? (same_value ? "accepts" : "rounds") : "refuses", pg_out, pg_col ? ", column read back as " : "",
               pg_col ? pg_col : "");
        disagree |= !agrees;
        free(text);
        free(pg_out);
        free(pg_col);
    }
    event_free(&ev);
    event_free(&ref);
    pipelines_free();
    PQfinish(pg);
    return disagree ? 1 : 0;
}
