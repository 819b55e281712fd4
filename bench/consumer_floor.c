/* bench/consumer_floor — the floor of reading Kafka: what a bare librdkafka
 * consumer spends to read the records the service reads, with the service's
 * own consumer settings (src/kafka/conf.c: a group member, cooperative-sticky,
 * an 8 MiB local queue, 256 KiB fetches per partition, no auto commit), its
 * allocator settings (src/alloc_settings.h) and the service's rhythm (records
 * taken in batches of BATCH, each batch's offsets committed synchronously
 * before the next, at most RATE records a second), and nothing else: no
 * decoding, no database (docs/DESIGN.md: Benchmark, the Kafka floor).
 *
 *   consumer_floor BOOTSTRAP TOPIC GROUP COUNT [BATCH [RATE]]
 *
 * Reads TOPIC from its earliest offset as a member of GROUP until COUNT
 * records were read and committed, then closes (leaving the group) and
 * prints one line. RATE (records per second; 0, the default: as fast as
 * librdkafka delivers) paces the batches: after each, the floor sleeps until
 * the records read so far are due, so it reads at the rate the service
 * stored them: what librdkafka spends per record depends on how fast it is
 * read (docs/PERFORMANCE.md: At scale). The line:
 *   messages=N batches=B seconds=S msgs_per_s=R cpu_s=C cpu_us_per_message=U
 *   bytes=P peak_rss_mb=M rate=RATE
 * (cpu: the whole process from before the client was made to after it was
 * destroyed, every thread, user and system, as the service's own figure is
 * taken; seconds: from the first record to the last commit). Exit 1 on any
 * error, or when COUNT records do not come within 300 s. */
#include <librdkafka/rdkafka.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "alloc_settings.h"

#define WAIT_S 300

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double cpu_s(long *maxrss_kb)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    if (maxrss_kb) *maxrss_kb = u.ru_maxrss;
    return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec / 1e6 + (double)u.ru_stime.tv_sec +
           (double)u.ru_stime.tv_usec / 1e6;
}

static void set(rd_kafka_conf_t *conf, const char *name, const char *value)
{
    char why[512];
    if (rd_kafka_conf_set(conf, name, value, why, sizeof why) != RD_KAFKA_CONF_OK) {
        fprintf(stderr, "consumer_floor: %s=%s: %s\n", name, value, why);
        exit(1);
    }
}

static long whole(const char *what, const char *s, long least)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < least) {
        fprintf(stderr, "consumer_floor: %s must be a whole number of at least %ld, not '%s'\n", what, least, s);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    alloc_settings_apply();
    if (argc < 5 || argc > 7) {
        fprintf(stderr, "usage: consumer_floor BOOTSTRAP TOPIC GROUP COUNT [BATCH [RATE]]\n");
        return 2;
    }
    const long count = whole("COUNT", argv[4], 1), batch = argc >= 6 ? whole("BATCH", argv[5], 1) : 500;
    const long rate = argc == 7 ? whole("RATE", argv[6], 0) : 0;
    const double c0 = cpu_s(NULL);

    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    set(conf, "bootstrap.servers", argv[1]);
    set(conf, "group.id", argv[3]);
    set(conf, "client.id", argv[3]);
    set(conf, "enable.auto.commit", "false");
    set(conf, "enable.auto.offset.store", "false");
    set(conf, "auto.offset.reset", "earliest");
    set(conf, "session.timeout.ms", "6000");
    set(conf, "partition.assignment.strategy", "cooperative-sticky");
    set(conf, "queued.max.messages.kbytes", "8192");
    set(conf, "max.partition.fetch.bytes", "262144");
    char why[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, why, sizeof why);
    if (!rk) {
        fprintf(stderr, "consumer_floor: %s\n", why);
        return 1;
    }
    rd_kafka_poll_set_consumer(rk);
    rd_kafka_topic_partition_list_t *topics = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(topics, argv[2], RD_KAFKA_PARTITION_UA);
    rd_kafka_resp_err_t e = rd_kafka_subscribe(rk, topics);
    rd_kafka_topic_partition_list_destroy(topics);
    if (e) {
        fprintf(stderr, "consumer_floor: subscribe: %s\n", rd_kafka_err2str(e));
        return 1;
    }

    rd_kafka_message_t **held = calloc((size_t)batch, sizeof *held);
    if (!held) abort();
    long got = 0, batches = 0;
    uint64_t bytes = 0;
    double first = 0, deadline = now_s() + WAIT_S;
    while (got < count) {
        /* One batch: block for its first record, then take what is queued. */
        long n = 0;
        while (n < batch && got + n < count) {
            if (now_s() > deadline) {
                fprintf(stderr, "consumer_floor: %ld of %ld records within %d s\n", got + n, count, WAIT_S);
                return 1;
            }
            rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, n ? 0 : 100);
            if (!m) {
                if (n) break;
                continue;
            }
            if (m->err) {
                if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                    fprintf(stderr, "consumer_floor: %s\n", rd_kafka_message_errstr(m));
                rd_kafka_message_destroy(m);
                continue;
            }
            if (!first) first = now_s();
            bytes += m->len + m->key_len;
            held[n++] = m;
        }
        if (!n) continue;
        /* The next offset of every partition the batch read, committed
         * before the batch's records are let go, as the service does. */
        rd_kafka_topic_partition_list_t *offs = rd_kafka_topic_partition_list_new(8);
        for (long i = 0; i < n; i++) {
            rd_kafka_topic_partition_t *p =
                rd_kafka_topic_partition_list_find(offs, rd_kafka_topic_name(held[i]->rkt), held[i]->partition);
            if (!p) p = rd_kafka_topic_partition_list_add(offs, rd_kafka_topic_name(held[i]->rkt), held[i]->partition);
            if (held[i]->offset + 1 > p->offset) p->offset = held[i]->offset + 1;
        }
        e = rd_kafka_commit(rk, offs, 0);
        rd_kafka_topic_partition_list_destroy(offs);
        if (e) {
            fprintf(stderr, "consumer_floor: commit: %s\n", rd_kafka_err2str(e));
            return 1;
        }
        for (long i = 0; i < n; i++) rd_kafka_message_destroy(held[i]);
        got += n;
        batches++;
        if (rate) {
            double due = first + (double)got / (double)rate, now = now_s();
            if (due > now) usleep((useconds_t)((due - now) * 1e6));
        }
    }
    double secs = now_s() - first;
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    free(held);
    long rss_kb;
    double cpu = cpu_s(&rss_kb) - c0;
    printf("messages=%ld batches=%ld seconds=%.3f msgs_per_s=%.0f cpu_s=%.3f cpu_us_per_message=%.2f bytes=%llu "
           "peak_rss_mb=%.1f rate=%ld\n",
           got, batches, secs, (double)got / secs, cpu, cpu * 1e6 / (double)got, (unsigned long long)bytes,
           (double)rss_kb / 1024.0, rate);
    return 0;
}
