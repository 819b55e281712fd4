/* bare_pg — the benchmark's baselines: how fast PostgreSQL itself takes the
 * reviews of the message files, with the service's batch size and
 * transaction boundaries, and nothing else (no Kafka, no decoding, no lookups
 * on the clock).
 *
 *   bare_pg CONNINFO MESSAGES_FILE [BATCH_SIZE] --recrawl RECRAWL_FILE --passes limits|upsert [--prefilled]
 *   bare_pg CONNINFO MESSAGES_FILE [BATCH_SIZE] --connections N --partitions P
 *
 * MESSAGES_FILE holds one message per line, "KEY<TAB>JSON" (bench/gen-reviews.awk);
 * RECRAWL_FILE the next crawl of the same reviews (gen-reviews.awk
 * mode=recrawl: every review again with a newer last_synced_at, some changed,
 * some new). Untimed: read the files, decode every message with the
 * project's decoder (src/core/decode.c), resolve every package_name with one
 * query, and build each batch's COPY data. Timed, per batch of BATCH_SIZE
 * (500) rows, one transaction each, a CHECKPOINT before each pass (so no pass
 * pays for the previous one's dirty pages) and a VACUUM ANALYZE between
 * passes (a crawl meets a table autovacuum has long since seen), three passes
 * in this order on one connection, on a new database (the table empty and
 * never written, as the service's first phase meets it; DESIGN.md:
 * Benchmark):
 *
 *   --passes limits: the limits PostgreSQL itself sets:
 *   limit_copy     the first crawl, plain COPY into the empty table: inserting;
 *   limit_update   the recrawl: COPY into a staging table, one UPDATE ... FROM
 *                  of the rows the table holds, plain COPY of the new ones:
 *                  updating;
 *   limit_probe    the recrawl again: SELECT review_id, last_synced_at ...
 *                  WHERE review_id = ANY($1): finding that nothing changes;
 *   --passes upsert: the service's first method (COPY into a per-session
 *   staging table + one INSERT ... SELECT ... ON CONFLICT ... RETURNING per
 *   batch), a second baseline:
 *   fresh          the first crawl into the empty table;
 *   reobserve      the recrawl;
 *   replay         the recrawl again, every row skipped by the guard.
 *
 * --prefilled: the table may hold rows already (make bench-scale: a table of
 * millions of rows, none of them the crawls' keys); the header line says how
 * many (prefilled_rows=N). Without it the table must be empty.
 *
 * --connections N (N > 1, with --partitions P, the topic's partition count):
 * the scale-out baseline (DESIGN.md: Benchmark). Every message goes to the
 * partition Kafka's producer puts it in (librdkafka's default partitioner,
 * CRC-32 of the key modulo P), partition p to connection p % N, as a group of
 * N members shares the topic; each connection, on a thread of its own, writes
 * its rows in batches of BATCH_SIZE by the staging upsert, and the pass lasts
 * from the start of the first batch to the end of the last one anywhere.
 * The fresh pass only (the database must start empty); its line adds
 * connections=N and partition_rows=COUNT,COUNT,... (messages per partition,
 * for the caller to check against the topic).
 *
 * The SQL is written here with libpq, independently of src/pg/store.c, so the
 * baselines do not move when the service's store changes; the conflict
 * clause is the reviews upsert of DESIGN.md: Tables and natural keys, and the
 * program says so loudly if the service's ever differs.
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
#include <pthread.h>
#include <search.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shipped_schema.h"
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
    "ON CONFLICT (\"review_id\") DO UPDATE SET "
    "\"thumbs_up_count\" = EXCLUDED.\"thumbs_up_count\", \"score\" = EXCLUDED.\"score\", "
    "\"content\" = EXCLUDED.\"content\", \"reply_content\" = EXCLUDED.\"reply_content\", "
    "\"replied_at\" = EXCLUDED.\"replied_at\", \"app_version\" = EXCLUDED.\"app_version\", "
    "\"last_synced_at\" = EXCLUDED.\"last_synced_at\" "
    "WHERE EXCLUDED.\"last_synced_at\" > t.\"last_synced_at\"";

static const char STAGE_SQL[] =
    "CREATE TEMP TABLE bare_stage ON COMMIT DELETE ROWS AS SELECT " COLUMN_LIST
    " FROM reviews WITH NO DATA";
static const char COPY_STAGE_SQL[] = "COPY bare_stage (" COLUMN_LIST ") FROM STDIN";
static const char COPY_TABLE_SQL[] = "COPY reviews (" COLUMN_LIST ") FROM STDIN";
static const char INSERT_PREFIX[] =
    "INSERT INTO reviews AS t (" COLUMN_LIST ") SELECT " COLUMN_LIST " FROM bare_stage ";
/* The update limit: what a re-observation changes, without a guard (the
 * rows are known newer). */
static const char UPDATE_SQL[] =
    "UPDATE reviews r SET thumbs_up_count = s.thumbs_up_count, score = s.score, content = s.content, "
    "reply_content = s.reply_content, replied_at = s.replied_at, app_version = s.app_version, "
    "last_synced_at = s.last_synced_at FROM bare_stage s WHERE r.review_id = s.review_id";
static const char PROBE_SQL[] =
    "SELECT review_id, last_synced_at FROM reviews WHERE review_id = ANY($1::varchar[])";

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
/* One batch of rows, in the forms the passes send: the COPY text of every
 * row, of those whose key the first crawl had (`old`) and of the others
 * (`new`), and the keys as an array literal. */
typedef struct {
    buf_t copy, copy_old, copy_new, keys;
    size_t rows, rows_new;
} batch_data_t;

/* A crawl cut into batches. */
typedef struct {
    batch_data_t *b;
    size_t n, cap;
} crawl_t;

/* The batch the next row of C goes to: a new one every BATCH rows. */
static batch_data_t *crawl_row_batch(crawl_t *c, size_t batch)
{
    if (c->n == 0 || c->b[c->n - 1].rows == batch) {
        if (c->n == c->cap) {
            c->cap = c->cap ? c->cap * 2 : 1024;
            c->b = realloc(c->b, c->cap * sizeof *c->b);
            if (!c->b) abort();
        }
        memset(&c->b[c->n++], 0, sizeof *c->b);
    }
    return &c->b[c->n - 1];
}

static void crawl_free(crawl_t *c)
{
    for (size_t i = 0; i < c->n; i++) {
        free(c->b[i].copy.data);
        free(c->b[i].copy_old.data);
        free(c->b[i].copy_new.data);
        free(c->b[i].keys.data);
    }
    free(c->b);
}

typedef struct worker worker_t;
/* A pass's way of writing one batch; adds to the worker's counts. */
typedef void method_fn(worker_t *w, const batch_data_t *b);

/* One connection's share of a pass: its crawl's batches, the method, and
 * what its timed run found. */
struct worker {
    PGconn *conn;
    long backend_pid;
    const char *insert_sql;
    const crawl_t *crawl;
    method_fn *method;
    double *ms; /* each batch's duration, filled by the run */
    size_t inserted, updated, rows_done;
};

/* CRC-32 (IEEE, reflected), the hash librdkafka's default partitioner
 * ("consistent_random") takes of a message key. */
static uint32_t crc32_ieee(const unsigned char *p, size_t n)
{
    uint32_t crc = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
    }
    return crc ^ 0xffffffffu;
}

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

/* COPY TEXT (the rows of one batch) with the COPY ... FROM STDIN query SQL. */
static void copy_in(PGconn *c, const char *sql, const buf_t *text)
{
    PQclear(expect(c, PQexec(c, sql), PGRES_COPY_IN, sql));
    if (PQputCopyData(c, text->data, (int)text->len) != 1 || PQputCopyEnd(c, NULL) != 1)
        die("COPY data: %s", PQerrorMessage(c));
    PGresult *res = PQgetResult(c);
    PQclear(expect(c, res, PGRES_COMMAND_OK, "COPY end"));
    while ((res = PQgetResult(c))) PQclear(res);
}

/* The service's first method: staging table, then the guarded upsert. */
static void method_upsert(worker_t *w, const batch_data_t *b)
{
    PGconn *c = w->conn;
    exec_ok(c, "BEGIN");
    copy_in(c, COPY_STAGE_SQL, &b->copy);
    PGresult *res = expect(c, PQexec(c, w->insert_sql), PGRES_TUPLES_OK, "INSERT ... ON CONFLICT");
    for (int r = 0; r < PQntuples(res); r++) {
        if (PQgetvalue(res, r, 0)[0] == 't') w->inserted++;
        else w->updated++;
    }
    PQclear(res);
    exec_ok(c, "COMMIT");
}

/* The insert limit: plain COPY into the table. */
static void method_copy(worker_t *w, const batch_data_t *b)
{
    exec_ok(w->conn, "BEGIN");
    copy_in(w->conn, COPY_TABLE_SQL, &b->copy);
    exec_ok(w->conn, "COMMIT");
    w->inserted += b->rows;
}

/* The update limit: the rows the table holds updated from the staging
 * table by one UPDATE ... FROM, the new ones copied in. */
static void method_update(worker_t *w, const batch_data_t *b)
{
    PGconn *c = w->conn;
    exec_ok(c, "BEGIN");
    if (b->rows > b->rows_new) {
        copy_in(c, COPY_STAGE_SQL, &b->copy_old);
        PGresult *res = expect(c, PQexec(c, UPDATE_SQL), PGRES_COMMAND_OK, "UPDATE ... FROM");
        w->updated += strtoul(PQcmdTuples(res), NULL, 10);
        PQclear(res);
    }
    if (b->rows_new) copy_in(c, COPY_TABLE_SQL, &b->copy_new);
    exec_ok(c, "COMMIT");
    w->inserted += b->rows_new;
}

/* The skip limit: the keys' stored versions, read. */
static void method_probe(worker_t *w, const batch_data_t *b)
{
    const char *param = b->keys.data;
    PGresult *res = expect(w->conn, PQexecParams(w->conn, PROBE_SQL, 1, NULL, &param, NULL, NULL, 0),
                           PGRES_TUPLES_OK, "probe");
    if ((size_t)PQntuples(res) != b->rows) die("the probe found %d of %zu keys", PQntuples(res), b->rows);
    PQclear(res);
}

/* Runs every batch of the worker W (a pthread start routine). */
static void *worker_run(void *arg)
{
    worker_t *w = arg;
    w->inserted = w->updated = w->rows_done = 0;
    for (size_t i = 0; i < w->crawl->n; i++) {
        double b0 = now_s(CLOCK_MONOTONIC);
        w->method(w, &w->crawl->b[i]);
        w->rows_done += w->crawl->b[i].rows;
        w->ms[i] = (now_s(CLOCK_MONOTONIC) - b0) * 1e3;
    }
    return NULL;
}

/* One timed pass over all batches of the NW workers, each on its own
 * connection (and thread, when there are several). Prints its line, EXTRA
 * (" key=value ...") at its end. */
static void run_pass(worker_t *ws, size_t nw, const char *name, long postmaster, const char *extra)
{
    size_t nbatches = 0, inserted = 0, updated = 0, rows = 0;
    for (size_t k = 0; k < nw; k++) {
        ws[k].ms = calloc(ws[k].crawl->n ? ws[k].crawl->n : 1, sizeof *ws[k].ms);
        if (!ws[k].ms) abort();
        nbatches += ws[k].crawl->n;
    }
    double *ms = calloc(nbatches ? nbatches : 1, sizeof *ms);
    pthread_t *threads = calloc(nw, sizeof *threads);
    if (!ms || !threads) abort();

    exec_ok(ws[0].conn, "CHECKPOINT"); /* untimed: start every pass from clean buffers */
    double be0 = 0, be1 = 0;
    for (size_t k = 0; k < nw; k++) be0 += proc_cpu_s(ws[k].backend_pid);
    double cpu0 = now_s(CLOCK_PROCESS_CPUTIME_ID), m0 = machine_busy_s();
    double pg0 = cluster_cpu_s(postmaster);
    double t0 = now_s(CLOCK_MONOTONIC), wall0 = now_s(CLOCK_REALTIME);
    if (nw == 1) {
        worker_run(&ws[0]);
    } else {
        for (size_t k = 0; k < nw; k++)
            if (pthread_create(&threads[k], NULL, worker_run, &ws[k]) != 0) die("cannot start a thread");
        for (size_t k = 0; k < nw; k++) pthread_join(threads[k], NULL);
    }
    double secs = now_s(CLOCK_MONOTONIC) - t0, wall1 = now_s(CLOCK_REALTIME);
    double cpu = now_s(CLOCK_PROCESS_CPUTIME_ID) - cpu0, m1 = machine_busy_s();
    double pg1 = cluster_cpu_s(postmaster);
    for (size_t k = 0; k < nw; k++) be1 += proc_cpu_s(ws[k].backend_pid);
    double sum = 0;
    size_t j = 0;
    for (size_t k = 0; k < nw; k++) {
        for (size_t i = 0; i < ws[k].crawl->n; i++) sum += ms[j++] = ws[k].ms[i];
        inserted += ws[k].inserted, updated += ws[k].updated, rows += ws[k].rows_done;
        free(ws[k].ms);
        ws[k].ms = NULL;
    }
    qsort(ms, nbatches, sizeof *ms, cmp_double);
    printf("pass=%s connections=%zu rows=%zu batches=%zu seconds=%.3f rows_per_s=%.0f inserted=%zu updated=%zu "
           "skipped=%zu batch_ms_mean=%.2f batch_ms_p50=%.2f batch_ms_p99=%.2f batch_ms_max=%.2f "
           "client_cpu_s=%.2f backend_cpu_s=%.2f pg_cpu_s=%.2f machine_cpu_s=%.2f start_ms=%.0f end_ms=%.0f%s\n",
           name, nw, rows, nbatches, secs, (double)rows / secs, inserted, updated,
           rows - inserted - updated, sum / (double)nbatches, percentile(ms, nbatches, 0.50),
           percentile(ms, nbatches, 0.99), ms[nbatches - 1], cpu,
           be0 >= 0 && be1 >= 0 ? be1 - be0 : -1.0, pg0 >= 0 && pg1 >= 0 ? pg1 - pg0 : -1.0,
           m0 >= 0 && m1 >= 0 ? m1 - m0 : -1.0,
           wall0 * 1e3, wall1 * 1e3, extra);
    fflush(stdout);
    free(threads);
    free(ms);
}

/* Untimed, between passes: the table as autovacuum would long since have
 * left it (and autovacuum must not pick it during the next pass). This
 * session's pending table statistics are flushed first: flushed after the
 * VACUUM, the last second of writes would count as new and wake autovacuum. */
static void settle(PGconn *c)
{
    PQclear(PQexec(c, "SELECT pg_stat_force_next_flush()")); /* PostgreSQL 15+; harmless if absent */
    PQclear(PQexec(c, "SELECT 1"));
    exec_ok(c, "VACUUM ANALYZE reviews");
}

/* A connection with the service's session settings (DESIGN.md: Errors) and
 * the staging table; the backend's pid in *BACKEND_PID. */
static PGconn *connect_session(const char *conninfo, long *backend_pid)
{
    PGconn *c = PQconnectdb(conninfo);
    if (PQstatus(c) != CONNECTION_OK) die("connect: %s", PQerrorMessage(c));
    exec_ok(c, "SET synchronous_commit = on");
    exec_ok(c, "SET client_encoding = 'UTF8'");
    PGresult *res = expect(c, PQexec(c, "SELECT pg_backend_pid()"), PGRES_TUPLES_OK, "backend pid");
    *backend_pid = strtol(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    exec_ok(c, STAGE_SQL);
    return c;
}

static void usage(void)
{
    fprintf(stderr, "usage: bare_pg CONNINFO MESSAGES_FILE [BATCH_SIZE] --recrawl RECRAWL_FILE --passes limits|upsert [--prefilled]\n"
                    "       bare_pg CONNINFO MESSAGES_FILE [BATCH_SIZE] --connections N --partitions P\n");
    exit(2);
}

/* A positive whole number of option OPT, or exit 2 naming it. */
static size_t positive_arg(const char *opt, const char *v)
{
    char *end;
    unsigned long n = strtoul(v, &end, 10);
    if (*v == '\0' || *end != '\0' || n == 0 || n > 1024) {
        fprintf(stderr, "bare_pg: %s must be a whole number from 1 to 1024, not '%s'\n", opt, v);
        exit(2);
    }
    return n;
}

/* What reading a message file needs and keeps. */
typedef struct {
    const pipeline_def_t *def;
    struct hsearch_data *apps;  /* package_name -> application id */
    struct hsearch_data *first; /* the first crawl's review ids (single connection) */
    bool recrawl;               /* reading the recrawl: rows split by `first` */
    size_t batch, nconn, nparts;
    size_t *part_rows; /* messages per partition (nparts) */
} reader_t;

/* Read and decode every message of PATH with the project's decoder, bind
 * its application id and append it to its batch, as the service would send
 * it: to CRAWLS[0], or with several connections to the crawl of the
 * connection that owns the message's partition. Returns the count. */
static size_t read_crawl(const reader_t *rd, const char *path, crawl_t *crawls)
{
    FILE *f = fopen(path, "r");
    if (!f) die("cannot open %s", path);
    size_t n = 0;
    event_t ev;
    rejection_t rej;
    char *line = NULL;
    size_t linecap = 0;
    ssize_t len;
    buf_t row = {0};
    event_init(&ev);
    while ((len = getline(&line, &linecap, f)) > 0) {
        if (line[len - 1] == '\n') line[--len] = '\0';
        char *value = memchr(line, '\t', (size_t)len);
        if (!value) die("line %zu of %s has no key/value tab", n + 1, path);
        size_t part = rd->nparts ? crc32_ieee((const unsigned char *)line, (size_t)(value - line)) % rd->nparts : 0;
        value++;
        if (decode_record(rd->def, value, (size_t)(line + len - value), &ev, &rej) != 0)
            die("message %zu of %s rejected by the decoder (%s: %s); the bench data must be valid", n + 1,
                path, rej.error_type, rej.detail);
        ENTRY q = {(char *)event_package_name(&ev), NULL}, *found;
        if (!hsearch_r(q, FIND, &found, rd->apps))
            die("message %zu: package_name %s is not registered", n + 1, event_package_name(&ev));
        row.len = 0;
        buf_str(&row, found->data);
        for (size_t col = 0; col < NCOLUMNS; col++) {
            const char *v = event_column(&ev, col);
            buf_add(&row, "\t", 1);
            if (v) copy_escape(&row, v);
            else buf_add(&row, "\\N", 2);
        }
        buf_add(&row, "\n", 1);
        batch_data_t *b = crawl_row_batch(&crawls[rd->nconn > 1 ? part % rd->nconn : 0], rd->batch);
        buf_add(&b->copy, row.data, row.len);
        /* review_id: hexadecimal digits and dashes, no quoting needed */
        const char *key = event_column(&ev, 0);
        buf_str(&b->keys, b->rows ? "," : "{");
        buf_str(&b->keys, key);
        ENTRY k = {(char *)key, NULL};
        if (rd->recrawl && !hsearch_r(k, FIND, &found, rd->first)) {
            buf_add(&b->copy_new, row.data, row.len);
            b->rows_new++;
        } else if (rd->recrawl) {
            buf_add(&b->copy_old, row.data, row.len);
        } else if (rd->first) {
            if (!(k.key = strdup(key)) || !hsearch_r(k, ENTER, &found, rd->first)) abort();
        }
        b->rows++;
        rd->part_rows[part]++;
        n++;
    }
    for (size_t k = 0; k < (rd->nconn > 1 ? rd->nconn : 1); k++)
        for (size_t i = 0; i < crawls[k].n; i++) buf_str(&crawls[k].b[i].keys, "}");
    fclose(f);
    free(line);
    free(row.data);
    event_free(&ev);
    if (n == 0) die("no messages in %s", path);
    return n;
}

int main(int argc, char **argv)
{
    const char *pos[3] = {NULL, NULL, NULL}, *recrawl_path = NULL, *series = NULL;
    size_t npos = 0, nconn = 1, nparts = 0;
    bool prefilled = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--prefilled")) {
            prefilled = true;
        } else if (!strcmp(argv[i], "--connections") || !strcmp(argv[i], "--partitions")) {
            if (i + 1 >= argc) usage();
            size_t v = positive_arg(argv[i], argv[i + 1]);
            if (argv[i][2] == 'c') nconn = v;
            else nparts = v;
            i++;
        } else if (!strcmp(argv[i], "--recrawl") || !strcmp(argv[i], "--passes")) {
            if (i + 1 >= argc) usage();
            *(argv[i][2] == 'r' ? &recrawl_path : &series) = argv[i + 1];
            i++;
        } else if (argv[i][0] == '-' || npos == 3) {
            usage();
        } else {
            pos[npos++] = argv[i];
        }
    }
    if (npos < 2) usage();
    if (nconn > 1 && nparts == 0) {
        fprintf(stderr, "bare_pg: --connections %zu needs --partitions (the topic's partition count), "
                        "to split the rows as Kafka does\n", nconn);
        return 2;
    }
    if ((nconn > 1) == (recrawl_path != NULL)) {
        fprintf(stderr, "bare_pg: give --recrawl (one connection: the limits and the production mix) "
                        "or --connections (the scale-out baseline), not both nor neither\n");
        return 2;
    }
    bool limits = series && !strcmp(series, "limits");
    if ((recrawl_path != NULL) != (series != NULL) || (series && !limits && strcmp(series, "upsert") != 0)) {
        fprintf(stderr, "bare_pg: --recrawl needs --passes limits or --passes upsert (each series on a new database)\n");
        return 2;
    }
    const char *conninfo = pos[0], *path = pos[1];
    const size_t batch = pos[2] ? positive_arg("BATCH_SIZE", pos[2]) : 500;
    shipped_schema_bind(); /* the reviews table as migrations/ makes it */
    const pipeline_def_t *def = pipeline_get(PIPELINE_REVIEWS);

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

    char *insert_sql;
    if (asprintf(&insert_sql, "%s%s RETURNING (xmax = 0)", INSERT_PREFIX, CONFLICT_SQL) < 0) abort();
    worker_t *ws = calloc(nconn, sizeof *ws);
    crawl_t *crawls = calloc(nconn, sizeof *crawls), recrawl = {0};
    if (!ws || !crawls) abort();
    long postmaster = -1;
    for (size_t k = 0; k < nconn; k++) {
        ws[k].conn = connect_session(conninfo, &ws[k].backend_pid);
        ws[k].insert_sql = insert_sql;
        ws[k].crawl = &crawls[k];
        ws[k].method = method_upsert;
    }
    PGconn *c = ws[0].conn;
    {
        double cpu[4];
        if (proc_stat(ws[0].backend_pid, &postmaster, cpu)) postmaster = -1; /* a remote server */
    }

    /* Untimed: every package_name, resolved once. */
    PGresult *apps_res = expect(c, PQexec(c, "SELECT package_name, id FROM apps_registry_application"),
                                PGRES_TUPLES_OK, "apps");
    struct hsearch_data apps, first;
    memset(&apps, 0, sizeof apps);
    memset(&first, 0, sizeof first);
    if (!hcreate_r((size_t)PQntuples(apps_res) * 2 + 16, &apps)) abort();
    for (int r = 0; r < PQntuples(apps_res); r++) {
        ENTRY e = {PQgetvalue(apps_res, r, 0), PQgetvalue(apps_res, r, 1)}, *found;
        if (!hsearch_r(e, ENTER, &found, &apps)) abort();
    }
    /* Untimed: the crawls decoded and cut into batches. */
    reader_t rd = {.def = def, .apps = &apps, .batch = batch, .nconn = nconn, .nparts = nparts};
    rd.part_rows = calloc(nparts ? nparts : 1, sizeof *rd.part_rows);
    if (!rd.part_rows || (recrawl_path && !hcreate_r(1 << 21, &first))) abort();
    if (recrawl_path) rd.first = &first;
    double d0 = now_s(CLOCK_MONOTONIC);
    size_t n = read_crawl(&rd, path, crawls), n2 = 0;
    if (recrawl_path) {
        rd.recrawl = true;
        n2 = read_crawl(&rd, recrawl_path, &recrawl);
    }
    double decode_s = now_s(CLOCK_MONOTONIC) - d0;

    PGresult *res = expect(c, PQexec(c, "SELECT count(*) FROM reviews"), PGRES_TUPLES_OK, "count");
    if (!prefilled && strcmp(PQgetvalue(res, 0, 0), "0") != 0)
        die("the reviews table must start empty (it has %s rows; --prefilled allows that)", PQgetvalue(res, 0, 0));
    printf("messages=%zu recrawl_messages=%zu batch_size=%zu decode_seconds=%.2f conflict_clause_matches_service=%d "
           "prefilled_rows=%s\n",
           n, n2, batch, decode_s, clause_matches, PQgetvalue(res, 0, 0));
    PQclear(res);
    fflush(stdout);
    if (nconn > 1) {
        buf_t extra = {0};
        buf_str(&extra, " partition_rows=");
        for (size_t p = 0; p < nparts; p++) {
            char num[32];
            snprintf(num, sizeof num, "%s%zu", p ? "," : "", rd.part_rows[p]);
            buf_str(&extra, num);
        }
        run_pass(ws, nconn, "fresh", postmaster, extra.data);
        free(extra.data);
    } else {
        /* The series' passes, in the order of the header; each crawl is the
         * first, or the recrawl (every row of its passes after the first
         * known). */
        static const struct {
            const char *name;
            method_fn *method;
            bool recrawl;
        } passes[2][3] = {{{"limit_copy", method_copy, false}, {"limit_update", method_update, true},
                           {"limit_probe", method_probe, true}},
                          {{"fresh", method_upsert, false}, {"reobserve", method_upsert, true},
                           {"replay", method_upsert, true}}};
        for (size_t i = 0; i < 3; i++) {
            if (i > 0) settle(c);
            ws[0].method = passes[!limits][i].method;
            ws[0].crawl = passes[!limits][i].recrawl ? &recrawl : &crawls[0];
            run_pass(ws, 1, passes[!limits][i].name, postmaster, "");
        }
        hdestroy_r(&first); /* its keys stay allocated until exit */
    }

    for (size_t k = 0; k < nconn; k++) {
        crawl_free(&crawls[k]);
        PQfinish(ws[k].conn);
    }
    crawl_free(&recrawl);
    hdestroy_r(&apps);
    PQclear(apps_res);
    free(crawls);
    free(ws);
    free(rd.part_rows);
    free(insert_sql);
    return 0;
}
