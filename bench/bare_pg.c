/* bare_pg — the benchmark's baseline: how fast PostgreSQL itself takes the
 * reviews of the message file by the fastest path we know, with the
 * service's batch size and transaction boundaries, and nothing else (no
 * Kafka, no decoding, no lookups on the clock).
 *
 *   bare_pg CONNINFO MESSAGES_FILE [BATCH_SIZE]
 *
 * MESSAGES_FILE holds one message per line, "KEY<TAB>JSON" (bench/gen-reviews.awk).
 * Untimed: read the file, decode every message with the project's decoder
 * (src/core/decode.c), resolve every package_name with one query, and build
 * each batch's COPY data. Timed, per batch of BATCH_SIZE (500) rows, one
 * transaction each:
 *
 *   BEGIN; COPY bare_stage FROM STDIN; INSERT INTO reviews (...) SELECT ...
 *   FROM bare_stage ON CONFLICT (review_id) DO UPDATE ... RETURNING (xmax = 0);
 *   COMMIT
 *
 * into a per-session staging table (ON COMMIT DELETE ROWS). Two passes: fresh
 * (the reviews table must be empty: every row is inserted), then a replay of
 * the same rows (every row skipped by the last_synced_at guard). A CHECKPOINT
 * precedes each pass, so no pass pays for the previous one's dirty pages, and
 * a VACUUM ANALYZE the replay (bench/run.sh does the same for the service).
 *
 * The SQL is written here with libpq, independently of src/pg/store.c, so the
 * baseline does not move when the service's store changes; the conflict
 * clause is the reviews upsert of DESIGN.md: Tables and natural keys / src/core/pipeline.c, and the
 * program says so loudly if the two ever differ.
 *
 * Output: one line per pass on stdout, "key=value" pairs:
 *   pass=fresh rows=200000 batches=400 seconds=... rows_per_s=... inserted=...
 *   updated=... skipped=... batch_ms_mean=... batch_ms_p50=... batch_ms_p99=...
 *   batch_ms_max=... client_cpu_s=... backend_cpu_s=... pg_cpu_s=... machine_cpu_s=...
 * start_ms=... end_ms=... (wall clock, epoch ms)
 * (CPU seconds during the pass: this program, its server backend, the whole
 * PostgreSQL cluster (-1 when the server is not local), and the whole machine — the machine is shared, the last one shows by how much)
 * plus "conflict_clause_matches_service=1|0". Exit 1 on any error. */
#include <dirent.h>
#include <libpq-fe.h>
#include <search.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/decode.h"
#include "core/pipeline.h"

/* The reviews columns in the order the decoder fills them (application_id
 * first, then the pipeline's fields), checked against the pipeline at start. */
static const char *const COLUMNS[] = {"review_id",      "user_name",  "content",
                                      "score",          "thumbs_up_count", "app_version",
                                      "reviewed_at",    "reply_content", "replied_at",
                                      "last_synced_at"};
#define NCOLUMNS (sizeof COLUMNS / sizeof COLUMNS[0])
#define COLUMN_LIST                                                                              \
    "application_id, review_id, user_name, content, score, thumbs_up_count, app_version, "     \
    "reviewed_at, reply_content, replied_at, last_synced_at"

/* DESIGN.md: Tables and natural keys, the reviews upsert: keep in step with src/core/pipeline.c. */
static const char CONFLICT_SQL[] =
    "ON CONFLICT (review_id) DO UPDATE SET "
    "thumbs_up_count = EXCLUDED.thumbs_up_count, score = EXCLUDED.score, "
    "content = EXCLUDED.content, reply_content = EXCLUDED.reply_content, "
    "replied_at = EXCLUDED.replied_at, app_version = EXCLUDED.app_version, "
    "last_synced_at = EXCLUDED.last_synced_at "
    "WHERE EXCLUDED.last_synced_at > reviews.last_synced_at";

static const char STAGE_SQL[] =
    "CREATE TEMP TABLE bare_stage ON COMMIT DELETE ROWS AS SELECT " COLUMN_LIST
    " FROM reviews WITH NO DATA";
static const char COPY_SQL[] = "COPY bare_stage (" COLUMN_LIST ") FROM STDIN";
static const char INSERT_PREFIX[] =
    "INSERT INTO reviews (" COLUMN_LIST ") SELECT " COLUMN_LIST " FROM bare_stage ";

typedef struct {
    char *data;
    size_t len, cap;
} buf_t;

static void buf_add(buf_t *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1 << 16;
        while (cap < b->len + n + 1) cap *= 2;
        b->data = realloc(b->data, cap);
        if (!b->data) abort();
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static void buf_str(buf_t *b, const char *s) { buf_add(b, s, strlen(s)); }

/* COPY text format: backslash, tab, newline and carriage return escaped. */
static void copy_escape(buf_t *b, const char *s)
{
    const char *run = s;
    for (; *s; s++) {
        const char *esc = *s == '\\' ? "\\\\" : *s == '\t' ? "\\t" : *s == '\n' ? "\\n"
                        : *s == '\r' ? "\\r" : NULL;
        if (!esc) continue;
        buf_add(b, run, (size_t)(s - run));
        buf_str(b, esc);
        run = s + 1;
    }
    buf_add(b, run, (size_t)(s - run));
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "bare_pg: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    exit(1);
}

static PGresult *expect(PGconn *c, PGresult *res, ExecStatusType want, const char *what)
{
    if (PQresultStatus(res) != want) die("%s: %s", what, PQerrorMessage(c));
    return res;
}

static void exec_ok(PGconn *c, const char *sql)
{
    PQclear(expect(c, PQexec(c, sql), PGRES_COMMAND_OK, sql));
}

static double now_s(clockid_t clk)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* From /proc/PID/stat: the parent pid and utime, stime, cutime, cstime in
 * seconds. Returns -1 when unreadable (a remote server, a process gone). */
static int proc_stat(long pid, long *ppid, double cpu[4])
{
    char path[64], line[2048];
    unsigned long ut, st;
    long cut, cst;
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = '\0';
    char *p = strrchr(line, ')'); /* comm may hold spaces */
    if (!p || sscanf(p + 2, "%*c %ld %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu %ld %ld", ppid, &ut,
                     &st, &cut, &cst) != 5)
        return -1;
    double hz = (double)sysconf(_SC_CLK_TCK);
    cpu[0] = (double)ut / hz, cpu[1] = (double)st / hz, cpu[2] = (double)cut / hz, cpu[3] = (double)cst / hz;
    return 0;
}

/* utime + stime of a process, in seconds, or -1. */
static double proc_cpu_s(long pid)
{
    long ppid;
    double cpu[4];
    return proc_stat(pid, &ppid, cpu) ? -1 : cpu[0] + cpu[1];
}

/* CPU seconds of the whole PostgreSQL cluster so far: the postmaster, the
 * children it has reaped (cutime + cstime) and those alive (background
 * writer, WAL writer, checkpointer, backends). -1 if unreadable. */
static double cluster_cpu_s(long postmaster)
{
    long ppid;
    double cpu[4], total;
    if (postmaster <= 0 || proc_stat(postmaster, &ppid, cpu)) return -1;
    total = cpu[0] + cpu[1] + cpu[2] + cpu[3];
    DIR *d = opendir("/proc");
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0) continue;
        if (proc_stat(pid, &ppid, cpu) == 0 && ppid == postmaster) total += cpu[0] + cpu[1];
    }
    closedir(d);
    return total;
}

/* Busy CPU seconds of the whole machine (all CPUs) so far, from /proc/stat:
 * how much else ran during a pass on a shared machine. -1 if unreadable. */
static double machine_busy_s(void)
{
    unsigned long long v[8] = {0};
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return -1;
    int got = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                     &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    if (got != 8) return -1;
    /* user nice system idle iowait irq softirq steal: all but idle and iowait */
    return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)sysconf(_SC_CLK_TCK);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double percentile(const double *sorted, size_t n, double q)
{
    size_t i = (size_t)(q * (double)n);
    if (i >= n) i = n - 1;
    return sorted[i];
}

/* One timed pass over all batches. Prints its line. */
static void run_pass(PGconn *c, const char *name, buf_t *batches, const size_t *rows_in,
                     size_t nbatches, const char *insert_sql, long backend_pid, long postmaster)
{
    double *ms = calloc(nbatches ? nbatches : 1, sizeof *ms);
    size_t inserted = 0, updated = 0, rows = 0;
    if (!ms) abort();

    exec_ok(c, "CHECKPOINT"); /* untimed: start every pass from clean buffers */
    double cpu0 = now_s(CLOCK_PROCESS_CPUTIME_ID), be0 = proc_cpu_s(backend_pid), m0 = machine_busy_s();
    double pg0 = cluster_cpu_s(postmaster);
    double t0 = now_s(CLOCK_MONOTONIC), wall0 = now_s(CLOCK_REALTIME);
    for (size_t i = 0; i < nbatches; i++) {
        double b0 = now_s(CLOCK_MONOTONIC);
        exec_ok(c, "BEGIN");
        PQclear(expect(c, PQexec(c, COPY_SQL), PGRES_COPY_IN, "COPY"));
        if (PQputCopyData(c, batches[i].data, (int)batches[i].len) != 1 ||
            PQputCopyEnd(c, NULL) != 1)
            die("COPY data: %s", PQerrorMessage(c));
        PGresult *res = PQgetResult(c);
        PQclear(expect(c, res, PGRES_COMMAND_OK, "COPY end"));
        while ((res = PQgetResult(c))) PQclear(res);
        res = expect(c, PQexec(c, insert_sql), PGRES_TUPLES_OK, "INSERT ... ON CONFLICT");
        for (int r = 0; r < PQntuples(res); r++) {
            if (PQgetvalue(res, r, 0)[0] == 't') inserted++;
            else updated++;
        }
        PQclear(res);
        exec_ok(c, "COMMIT");
        rows += rows_in[i];
        ms[i] = (now_s(CLOCK_MONOTONIC) - b0) * 1e3;
    }
    double secs = now_s(CLOCK_MONOTONIC) - t0, wall1 = now_s(CLOCK_REALTIME);
    double cpu = now_s(CLOCK_PROCESS_CPUTIME_ID) - cpu0, be1 = proc_cpu_s(backend_pid), m1 = machine_busy_s();
    double pg1 = cluster_cpu_s(postmaster);
    double sum = 0;
    for (size_t i = 0; i < nbatches; i++) sum += ms[i];
    qsort(ms, nbatches, sizeof *ms, cmp_double);
    printf("pass=%s rows=%zu batches=%zu seconds=%.3f rows_per_s=%.0f inserted=%zu updated=%zu "
           "skipped=%zu batch_ms_mean=%.2f batch_ms_p50=%.2f batch_ms_p99=%.2f batch_ms_max=%.2f "
           "client_cpu_s=%.2f backend_cpu_s=%.2f pg_cpu_s=%.2f machine_cpu_s=%.2f start_ms=%.0f end_ms=%.0f\n",
           name, rows, nbatches, secs, (double)rows / secs, inserted, updated,
           rows - inserted - updated, sum / (double)nbatches, percentile(ms, nbatches, 0.50),
           percentile(ms, nbatches, 0.99), ms[nbatches - 1], cpu,
           be0 >= 0 && be1 >= 0 ? be1 - be0 : -1.0, pg0 >= 0 && pg1 >= 0 ? pg1 - pg0 : -1.0,
           m0 >= 0 && m1 >= 0 ? m1 - m0 : -1.0,
           wall0 * 1e3, wall1 * 1e3);
    fflush(stdout);
    free(ms);
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: bare_pg CONNINFO MESSAGES_FILE [BATCH_SIZE]\n");
        return 2;
    }
    const size_t batch = argc == 4 ? strtoul(argv[3], NULL, 10) : 500;
    const pipeline_def_t *def = pipeline_get(PIPELINE_REVIEWS);
    if (batch == 0) die("bad batch size %s", argv[3]);

    /* The decoder's column order must be ours. */
    if (def->field_count != NCOLUMNS) die("the reviews pipeline has changed its columns");
    for (size_t i = 0; i < NCOLUMNS; i++)
        if (strcmp(def->fields[i].name, COLUMNS[i]) != 0)
            die("reviews column %s is now %s in src/core/pipeline.c", COLUMNS[i], def->fields[i].name);
    int clause_matches = strcmp(def->conflict_sql, CONFLICT_SQL) == 0;
    if (!clause_matches)
        fprintf(stderr, "bare_pg: WARNING: the service's reviews conflict clause differs from the "
                        "baseline's:\n  service:  %s\n  baseline: %s\n",
                def->conflict_sql, CONFLICT_SQL);

    PGconn *c = PQconnectdb(argv[1]);
    if (PQstatus(c) != CONNECTION_OK) die("connect: %s", PQerrorMessage(c));
    /* Same session settings as the service (DESIGN.md: Errors). */
    exec_ok(c, "SET synchronous_commit = on");
    exec_ok(c, "SET client_encoding = 'UTF8'");
    PGresult *res = expect(c, PQexec(c, "SELECT pg_backend_pid()"), PGRES_TUPLES_OK, "backend pid");
    long backend_pid = strtol(PQgetvalue(res, 0, 0), NULL, 10), postmaster = -1;
    PQclear(res);
    {
        double cpu[4];
        if (proc_stat(backend_pid, &postmaster, cpu)) postmaster = -1; /* a remote server */
    }

    /* Untimed: every package_name, resolved once. */
    PGresult *apps_res = expect(c, PQexec(c, "SELECT package_name, id FROM apps_registry_application"),
                                PGRES_TUPLES_OK, "apps");
    struct hsearch_data apps;
    memset(&apps, 0, sizeof apps);
    if (!hcreate_r((size_t)PQntuples(apps_res) * 2 + 16, &apps)) abort();
    for (int r = 0; r < PQntuples(apps_res); r++) {
        ENTRY e = {PQgetvalue(apps_res, r, 0), PQgetvalue(apps_res, r, 1)}, *found;
        if (!hsearch_r(e, ENTER, &found, &apps)) abort();
    }

    /* Untimed: read and decode every message with the project's decoder,
     * bind its application id and append it to its batch's COPY data, as
     * the service would send it. */
    FILE *f = fopen(argv[2], "r");
    if (!f) die("cannot open %s", argv[2]);
    size_t n = 0, nbatches = 0, bcap = 0;
    buf_t *batches = NULL;
    size_t *rows = NULL;
    event_t ev;
    rejection_t rej;
    char *line = NULL;
    size_t linecap = 0;
    ssize_t len;
    event_init(&ev);
    double d0 = now_s(CLOCK_MONOTONIC);
    while ((len = getline(&line, &linecap, f)) > 0) {
        if (line[len - 1] == '\n') line[--len] = '\0';
        char *value = memchr(line, '\t', (size_t)len);
        if (!value) die("line %zu of %s has no key/value tab", n + 1, argv[2]);
        value++;
        if (decode_record(def, value, (size_t)(line + len - value), &ev, &rej) != 0)
            die("message %zu rejected by the decoder (%s: %s); the bench data must be valid", n + 1,
                rej.error_type, rej.detail);
        ENTRY q = {(char *)event_package_name(&ev), NULL}, *found;
        if (!hsearch_r(q, FIND, &found, &apps))
            die("message %zu: package_name %s is not registered", n + 1, event_package_name(&ev));
        if (n % batch == 0) {
            if (nbatches == bcap) {
                bcap = bcap ? bcap * 2 : 1024;
                batches = realloc(batches, bcap * sizeof *batches);
                rows = realloc(rows, bcap * sizeof *rows);
                if (!batches || !rows) abort();
            }
            memset(&batches[nbatches], 0, sizeof *batches);
            rows[nbatches++] = 0;
        }
        buf_t *b = &batches[nbatches - 1];
        buf_str(b, found->data);
        for (size_t col = 0; col < NCOLUMNS; col++) {
            const char *v = event_column(&ev, col);
            buf_add(b, "\t", 1);
            if (v) copy_escape(b, v);
            else buf_add(b, "\\N", 2);
        }
        buf_add(b, "\n", 1);
        rows[nbatches - 1]++;
        n++;
    }
    fclose(f);
    free(line);
    event_free(&ev);
    hdestroy_r(&apps);
    PQclear(apps_res);
    if (n == 0) die("no messages in %s", argv[2]);
    double decode_s = now_s(CLOCK_MONOTONIC) - d0;

    char *insert_sql;
    if (asprintf(&insert_sql, "%s%s RETURNING (xmax = 0)", INSERT_PREFIX, CONFLICT_SQL) < 0) abort();
    exec_ok(c, STAGE_SQL);
    res = expect(c, PQexec(c, "SELECT count(*) FROM reviews"), PGRES_TUPLES_OK, "count");
    if (strcmp(PQgetvalue(res, 0, 0), "0") != 0)
        die("the reviews table must start empty (it has %s rows)", PQgetvalue(res, 0, 0));
    PQclear(res);

    printf("messages=%zu batch_size=%zu decode_seconds=%.2f conflict_clause_matches_service=%d\n", n,
           batch, decode_s, clause_matches);
    fflush(stdout);
    run_pass(c, "fresh", batches, rows, nbatches, insert_sql, backend_pid, postmaster);
    /* Untimed: a replay meets a table that autovacuum has long since seen
     * (and autovacuum must not pick it during the pass). This session's
     * pending table statistics are flushed first: flushed after the VACUUM,
     * the last second of inserts would count as new and wake autovacuum. */
    PQclear(PQexec(c, "SELECT pg_stat_force_next_flush()")); /* PostgreSQL 15+; harmless if absent */
    PQclear(PQexec(c, "SELECT 1"));
    exec_ok(c, "VACUUM ANALYZE reviews");
    run_pass(c, "replay", batches, rows, nbatches, insert_sql, backend_pid, postmaster);

    for (size_t i = 0; i < nbatches; i++) free(batches[i].data);
    free(batches);
    free(rows);
    free(insert_sql);
    PQfinish(c);
    return 0;
}
