/*
 * hostile-produce — produce records byte-exact, the way kcat cannot: a value
 * from a file (any bytes, several MiB, or a NULL value), a key from a file
 * (any bytes), headers from a file (any bytes, NULL values), and a chosen
 * CreateTime, each record to the partition it names. All records of a
 * partition go out in one message set when they fit (long linger, huge batch
 * limits), so the consumer sees them in one fetch and one batch.
 *
 *   produce BOOTSTRAP TOPIC < PLAN
 *
 * PLAN: one record per line, five tab-separated columns:
 *   PARTITION  VALUE  KEY  HEADERS  TIMESTAMP_MS
 * VALUE is a file path, or NULL for a tombstone (a NULL value). KEY and
 * HEADERS are file paths or "-" (no key, no headers). A headers file holds
 * one header per line, "name=value" (split at the first '='); a line without
 * '=' is a header with a NULL value. TIMESTAMP_MS is a CreateTime in
 * milliseconds, or "-" for now.
 *
 * With PRODUCE_TRANSACTIONAL_ID set, the records are sent in one transaction
 * of that transactional.id, committed after the last (each partition then
 * ends with a commit marker, an offset no record holds).
 *
 * Prints one line per record, in plan order: "PARTITION OFFSET". Exit 0 only
 * if every record was acknowledged (and the transaction committed).
 *
 * Built by the suites at test time:
 *   cc -o produce produce.c $(pkg-config --cflags --libs rdkafka)
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

typedef struct {
    int32_t partition;
    int64_t offset;
    int err;
    int done;
} result_t;

static result_t *results;
static size_t delivered;

static void die(const char *fmt, const char *arg)
{
    fprintf(stderr, "produce: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    exit(1);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    size_t cap = 1 << 16, n = 0, got;
    char *buf = malloc(cap);
    if (!f) die("cannot open %s", path);
    if (!buf) die("out of memory reading %s", path);
    while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            if (!buf) die("out of memory reading %s", path);
        }
    }
    if (ferror(f)) die("cannot read %s", path);
    fclose(f);
    *len = n;
    return buf;
}

static rd_kafka_headers_t *read_headers(const char *path)
{
    size_t len;
    char *buf = slurp(path, &len);
    rd_kafka_headers_t *h = rd_kafka_headers_new(8);
    size_t start = 0;
    while (start < len) {
        char *nl = memchr(buf + start, '\n', len - start);
        size_t end = nl ? (size_t)(nl - buf) : len;
        char *eq = memchr(buf + start, '=', end - start);
        if (eq)
            rd_kafka_header_add(h, buf + start, (ssize_t)(eq - (buf + start)), eq + 1,
                                (ssize_t)(buf + end - (eq + 1)));
        else
            rd_kafka_header_add(h, buf + start, (ssize_t)(end - start), NULL, 0);
        start = end + 1;
    }
    free(buf);
    return h;
}

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk, (void)opaque;
    result_t *r = &results[(uintptr_t)m->_private];
    r->partition = m->partition;
    r->offset = m->offset;
    r->err = m->err;
    r->done = 1;
    delivered++;
    if (m->err) fprintf(stderr, "produce: delivery failed: %s\n", rd_kafka_err2str(m->err));
}

static void conf(rd_kafka_conf_t *c, const char *name, const char *value)
{
    char why[512];
    if (rd_kafka_conf_set(c, name, value, why, sizeof why) != RD_KAFKA_CONF_OK) die("%s", why);
}

int main(int argc, char **argv)
{
    char line[16384], why[512];
    size_t count = 0, cap = 256;
    int failed = 0;

    if (argc != 3) {
        fprintf(stderr, "usage: produce BOOTSTRAP TOPIC < PLAN\n");
        return 2;
    }
    results = calloc(cap, sizeof *results);
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    conf(c, "bootstrap.servers", argv[1]);
    /* One message set per partition: everything is queued long before the
     * linger expires, and no batch limit splits it. */
    conf(c, "linger.ms", "3000");
    conf(c, "batch.num.messages", "1000000");
    conf(c, "batch.size", "500000000");
    conf(c, "message.max.bytes", "500000000");
    conf(c, "compression.codec", "lz4");
    const char *txn = getenv("PRODUCE_TRANSACTIONAL_ID");
    if (txn) {
        conf(c, "transactional.id", txn);
    } else {
        conf(c, "enable.idempotence", "false");
        conf(c, "max.in.flight", "1");
    }
    rd_kafka_conf_set_dr_msg_cb(c, on_delivery);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, why, sizeof why);
    if (!rk) die("%s", why);
    rd_kafka_error_t *terr = NULL;
    if (txn && ((terr = rd_kafka_init_transactions(rk, 30000)) || (terr = rd_kafka_begin_transaction(rk))))
        die("transaction: %s", rd_kafka_error_string(terr));

    while (fgets(line, sizeof line, stdin)) {
        char *cols[5];
        char *save = NULL, *p = line;
        line[strcspn(line, "\n")] = '\0';
        if (!line[0]) continue;
        for (int i = 0; i < 5; i++) {
            cols[i] = strtok_r(p, "\t", &save);
            p = NULL;
            if (!cols[i]) die("plan line has fewer than 5 columns: %s", line);
        }
        if (count == cap) {
            cap *= 2;
            results = realloc(results, cap * sizeof *results);
            if (!results) die("%s", "out of memory");
        }
        memset(&results[count], 0, sizeof results[count]);

        size_t vlen = 0, klen = 0;
        char *value = strcmp(cols[1], "NULL") ? slurp(cols[1], &vlen) : NULL;
        char *key = strcmp(cols[2], "-") ? slurp(cols[2], &klen) : NULL;
        rd_kafka_headers_t *hdrs = strcmp(cols[3], "-") ? read_headers(cols[3]) : NULL;
        int64_t ts = strcmp(cols[4], "-") ? strtoll(cols[4], NULL, 10) : 0;
        rd_kafka_resp_err_t err;
        /* An empty file is an empty (not NULL) value: a non-NULL pointer. */
        static char empty[1];
        do {
            err = rd_kafka_producev(
                rk, RD_KAFKA_V_TOPIC(argv[2]), RD_KAFKA_V_PARTITION(atoi(cols[0])),
                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                RD_KAFKA_V_VALUE(value ? (vlen ? value : empty) : NULL, vlen),
                RD_KAFKA_V_KEY(key ? (klen ? key : empty) : NULL, klen),
                RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_TIMESTAMP(ts),
                RD_KAFKA_V_OPAQUE((void *)(uintptr_t)count), RD_KAFKA_V_END);
            if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) rd_kafka_poll(rk, 100);
        } while (err == RD_KAFKA_RESP_ERR__QUEUE_FULL);
        if (err) die("produce failed: %s", rd_kafka_err2str(err));
        free(value);
        free(key);
        count++;
    }
    if (txn && (terr = rd_kafka_commit_transaction(rk, 60000))) die("commit: %s", rd_kafka_error_string(terr));
    for (int i = 0; i < 600 && delivered < count; i++) rd_kafka_flush(rk, 100);
    for (size_t i = 0; i < count; i++) {
        if (!results[i].done || results[i].err) failed = 1;
        printf("%" PRId32 " %" PRId64 "\n", results[i].partition, results[i].offset);
    }
    rd_kafka_destroy(rk);
    free(results);
    if (delivered < count) fprintf(stderr, "produce: %zu of %zu records not acknowledged\n", count - delivered, count);
    return failed || delivered < count;
}
