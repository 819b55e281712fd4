/* latency — publish-to-visible latency of network-metrics messages.
 *
 *   latency BOOTSTRAP CONNINFO PACKAGE_NAME [OPTIONS]
 *     --topic NAME       network-metrics
 *     --interval-ms N    100   one message per tick
 *     --poll-ms N        2     how often to look for the row
 *     --timeout-ms N     30000 give a message up after this long
 *     --count N          0     stop after N messages (0: until SIGTERM/SIGINT)
 *
 * For each message: take the time just before producing it (librdkafka
 * producer, acks=all, linger.ms=0), then every 2 ms run
 * `SELECT 1 FROM network_metrics WHERE analysis_id = $1` until the row is
 * there — committed by storage-consumer and visible to another session —
 * and record the latency; then wait for the next 100 ms tick (a tick that
 * passed while waiting is skipped, never bunched up).
 *
 * stdout, one line per message:
 *   PUBLISHED_AT_EPOCH_MS LATENCY_MS ACK_MS
 * (LATENCY_MS -1: not visible within --timeout-ms; ACK_MS: when the broker
 * acknowledged the produce, -1 if not yet). A summary goes to stderr at the
 * end. The caller picks the samples of the window it cares about by
 * PUBLISHED_AT. Exit 1 on a setup error. */
#include <fcntl.h>
#include <libpq-fe.h>
#include <librdkafka/rdkafka.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static double epoch_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void sleep_until_us(int64_t when)
{
    int64_t left = when - mono_us();
    if (left <= 0) return;
    struct timespec ts = {(time_t)(left / 1000000), (long)(left % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* Delivery report: when the broker acknowledged (acks=all). */
typedef struct {
    int64_t acked_us; /* 0: not yet */
    bool failed;
} delivery_t;

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk, (void)opaque;
    delivery_t *d = m->_private;
    if (!d) return;
    if (m->err) {
        d->failed = true;
        fprintf(stderr, "latency: delivery failed: %s\n", rd_kafka_err2str(m->err));
    }
    d->acked_us = mono_us();
}

static void random_uuid(int urandom, char out[37])
{
    unsigned char b[16];
    if (read(urandom, b, sizeof b) != (ssize_t)sizeof b) {
        for (size_t i = 0; i < sizeof b; i++) b[i] = (unsigned char)rand();
    }
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* variant 1 */
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
             b[15]);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void usage(void)
{
    fprintf(stderr, "usage: latency BOOTSTRAP CONNINFO PACKAGE_NAME [--topic NAME] [--interval-ms N] "
                    "[--poll-ms N] [--timeout-ms N] [--count N]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *topic = "network-metrics";
    long interval_ms = 100, poll_ms = 2, timeout_ms = 30000, count = 0;
    char errstr[512];

    if (argc < 4) usage();
    const char *bootstrap = argv[1], *conninfo = argv[2], *package = argv[3];
    for (int i = 4; i < argc; i++) {
        if (i + 1 >= argc) usage();
        const char *opt = argv[i], *val = argv[++i];
        if (!strcmp(opt, "--topic")) topic = val;
        else if (!strcmp(opt, "--interval-ms")) interval_ms = strtol(val, NULL, 10);
        else if (!strcmp(opt, "--poll-ms")) poll_ms = strtol(val, NULL, 10);
        else if (!strcmp(opt, "--timeout-ms")) timeout_ms = strtol(val, NULL, 10);
        else if (!strcmp(opt, "--count")) count = strtol(val, NULL, 10);
        else usage();
    }
    if (interval_ms <= 0 || poll_ms <= 0 || timeout_ms <= 0 || count < 0) usage();

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    const char *props[][2] = {{"bootstrap.servers", bootstrap},
                              {"acks", "all"},
                              {"linger.ms", "0"},
                              {"client.id", "bench-latency"}};
    for (size_t i = 0; i < sizeof props / sizeof props[0]; i++) {
        if (rd_kafka_conf_set(conf, props[i][0], props[i][1], errstr, sizeof errstr) != RD_KAFKA_CONF_OK) {
            fprintf(stderr, "latency: %s: %s\n", props[i][0], errstr);
            return 1;
        }
    }
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    if (!rk) {
        fprintf(stderr, "latency: producer: %s\n", errstr);
        return 1;
    }

    PGconn *db = PQconnectdb(conninfo);
    if (PQstatus(db) != CONNECTION_OK) {
        fprintf(stderr, "latency: connect: %s", PQerrorMessage(db));
        return 1;
    }
    PGresult *res = PQprepare(db, "visible", "SELECT 1 FROM network_metrics WHERE analysis_id = $1",
                              1, NULL);
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        fprintf(stderr, "latency: prepare: %s", PQerrorMessage(db));
        return 1;
    }
    PQclear(res);

    int urandom = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    size_t cap = 1024, n = 0, timeouts = 0;
    double *lat = malloc(cap * sizeof *lat);
    if (!lat) abort();
    /* Delivery slots in a ring: a late report never lands on a newer message. */
    enum { RING = 4096 };
    delivery_t *deliveries = calloc(RING, sizeof *deliveries);
    if (!deliveries) abort();
    const int64_t start = mono_us();
    int64_t tick = 0;

    for (long k = 0; !stop_requested && (count == 0 || k < count); k++) {
        char id[37], msg[1024], now_iso[40];
        time_t wall = time(NULL);
        struct tm tm;
        gmtime_r(&wall, &tm);
        strftime(now_iso, sizeof now_iso, "%Y-%m-%dT%H:%M:%SZ", &tm);
        random_uuid(urandom, id);
        int len = snprintf(msg, sizeof msg,
                           "{\"package_name\":\"%s\",\"analysis_id\":\"%s\",\"analyzed_at\":\"%s\","
                           "\"duration_seconds\":%.1f,\"total_packets\":%ld,\"total_bytes\":%ld,"
                           "\"unique_hosts\":%ld,\"dns_queries\":%ld,\"tls_handshakes\":%ld,"
                           "\"avg_packet_size\":%.2f,\"protocols\":{\"tcp\":%ld,\"udp\":%ld,\"quic\":%ld}}",
                           package, id, now_iso, 30.0 + (double)(k % 90), 5000 + k * 7, 3000000 + k * 911,
                           20 + k % 40, 40 + k % 70, 12 + k % 20, 600.0 + (double)(k % 300) / 3.0,
                           4000 + k, 800 + k % 500, 200 + k % 100);
        delivery_t *d = &deliveries[k % RING];
        memset(d, 0, sizeof *d);

        double published_at = epoch_ms();
        int64_t t0 = mono_us();
        rd_kafka_resp_err_t err = rd_kafka_producev(
            rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(id, strlen(id)),
            RD_KAFKA_V_VALUE(msg, (size_t)len), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_OPAQUE(d), RD_KAFKA_V_END);
        if (err) {
            fprintf(stderr, "latency: produce: %s\n", rd_kafka_err2str(err));
            return 1;
        }
        const char *params[1] = {id};
        bool visible = false;
        int64_t next_poll = t0;
        while (!stop_requested && mono_us() - t0 < timeout_ms * 1000) {
            rd_kafka_poll(rk, 0); /* delivery reports */
            sleep_until_us(next_poll);
            next_poll = mono_us() + poll_ms * 1000;
            res = PQexecPrepared(db, "visible", 1, params, NULL, NULL, 0);
            if (PQresultStatus(res) != PGRES_TUPLES_OK) {
                fprintf(stderr, "latency: query: %s", PQerrorMessage(db));
                return 1;
            }
            visible = PQntuples(res) > 0;
            PQclear(res);
            if (visible) break;
        }
        int64_t t1 = mono_us();
        rd_kafka_poll(rk, 0);
        if (!visible && stop_requested) break; /* interrupted: not a sample */
        double ms = visible ? (double)(t1 - t0) / 1e3 : -1.0;
        printf("%.3f %.3f %.3f\n", published_at, ms, d->acked_us ? (double)(d->acked_us - t0) / 1e3 : -1.0);
        fflush(stdout);
        if (visible) {
            if (n == cap) {
                lat = realloc(lat, (cap *= 2) * sizeof *lat);
                if (!lat) abort();
            }
            lat[n++] = ms;
        } else {
            timeouts++;
        }
        /* The next tick that has not passed yet. */
        int64_t elapsed = mono_us() - start;
        tick = elapsed / (interval_ms * 1000) + 1;
        while (!stop_requested && mono_us() < start + tick * interval_ms * 1000) {
            rd_kafka_poll(rk, 0);
            int64_t left = start + tick * interval_ms * 1000 - mono_us();
            if (left > 10000) left = 10000;
            if (left > 0) sleep_until_us(mono_us() + left);
        }
    }

    rd_kafka_flush(rk, 5000);
    if (n > 0) {
        qsort(lat, n, sizeof *lat, cmp_double);
        fprintf(stderr, "latency: %zu messages visible, %zu timed out; p50=%.1f ms p99=%.1f ms max=%.1f ms\n",
                n, timeouts, lat[(size_t)(0.50 * (double)n)], lat[(size_t)(0.99 * (double)n)], lat[n - 1]);
    } else {
        fprintf(stderr, "latency: no message became visible (%zu timed out)\n", timeouts);
    }
    free(lat);
    free(deliveries);
    if (urandom >= 0) close(urandom);
    PQfinish(db);
    rd_kafka_destroy(rk);
    return 0;
}
