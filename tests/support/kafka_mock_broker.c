/*
 * kafka-mock-broker — a stand-in Kafka cluster for tests and the demo.
 *
 * No real Kafka broker can be installed where the tests run, so this helper
 * hosts librdkafka's mock cluster (rdkafka_mock.h) in its own process and
 * exposes its fault-injection knobs over a line-oriented control protocol on
 * a Unix domain socket.  Any Kafka client (the service under test, kcat) talks
 * to the mock brokers over ordinary loopback TCP.
 *
 *   kafka-mock-broker serve --dir DIR [--brokers N] [--topic NAME:PARTITIONS]...
 *                           [--debug CONTEXTS]
 *   kafka-mock-broker ctl DIR COMMAND [ARGS...]
 *
 * serve writes DIR/pid, then DIR/bootstrap (atomically, last, so its presence
 * means "ready"), prints the bootstrap list and serves DIR/control.sock until
 * SIGTERM/SIGINT.  Each request is one line; each reply is one line starting
 * with "ok" or "error: <reason>".  Run "ctl DIR help" for the command list.
 *
 * ctl exit status: 0 reply was ok, 1 reply was an error, 2 usage error,
 * 3 the helper could not be reached or answered garbage.
 *
 * Everything below is written against librdkafka 2.0.2, whose mock API is
 * explicitly experimental; the validation rules mirror what that version's
 * implementation can survive (see the comments at each check).
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#define DEFAULT_BROKERS 3
#define MAX_BROKERS 64
#define MAX_TOPICS 64
/* The mock allocates every partition up front; keep typos from eating RAM. */
#define MAX_PARTITIONS 10000
#define MAX_RTT_MS 3600000L
#define TOPIC_NAME_MAX 249 /* Kafka's own limit */
#define LINE_MAX_LEN 4096
#define MAX_ARGS 256
#define REPLY_MAX 4096
/* A silent client must not monopolise the single-connection server. */
#define CLIENT_IDLE_MS 10000
#define WATERMARK_TIMEOUT_MS 5000
#define CTL_TIMEOUT_S 30

#define CONTROL_SOCK_NAME "control.sock"
#define BOOTSTRAP_NAME "bootstrap"
#define PID_NAME "pid"

enum { EXIT_REPLY_OK = 0, EXIT_REPLY_ERROR = 1, EXIT_USAGE = 2, EXIT_IO = 3 };

/* ------------------------------------------------------------------------ */
/* Small utilities                                                          */
/* ------------------------------------------------------------------------ */

/* Strict decimal parse: the whole string must be a number within range. */
static bool parse_long(const char *s, long min, long max, long *out) {
    char *end = NULL;
    long v;

    if (s == NULL || *s == '\0' || isspace((unsigned char)*s))
        return false;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == NULL || *end != '\0' || v < min || v > max)
        return false;
    *out = v;
    return true;
}

/* Kafka topic names: 1..249 of [A-Za-z0-9._-], and not "." or "..". */
static bool topic_name_valid(const char *name) {
    size_t len = strlen(name);
    size_t i;

    if (len == 0 || len > TOPIC_NAME_MAX || !strcmp(name, ".") || !strcmp(name, ".."))
        return false;
    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        if (!isalnum(c) && c != '.' && c != '_' && c != '-')
            return false;
    }
    return true;
}

static int write_all(int fd, const char *buf, size_t len) {
    while (len > 0) {
        /* MSG_NOSIGNAL: a client that hung up must not kill the helper. */
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Builds "DIR/NAME"; fails rather than truncating. */
static int path_join(char *out, size_t size, const char *dir, const char *name) {
    int n = snprintf(out, size, "%s/%s", dir, name);
    return (n < 0 || (size_t)n >= size) ? -1 : 0;
}

/* Fills a sockaddr_un for DIR/control.sock; sun_path is only ~108 bytes. */
static int control_addr_make(const char *dir, struct sockaddr_un *addr) {
    memset(addr, 0, sizeof(*addr));
    addr->sun_family = AF_UNIX;
    if (path_join(addr->sun_path, sizeof(addr->sun_path), dir, CONTROL_SOCK_NAME) != 0) {
        fprintf(stderr, "kafka-mock-broker: %s/%s is longer than a Unix socket path may be\n",
                dir, CONTROL_SOCK_NAME);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Replies                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct {
    bool ok;
    char text[REPLY_MAX];
} reply_t;

static void reply_ok(reply_t *r) {
    r->ok = true;
    snprintf(r->text, sizeof(r->text), "ok");
}

__attribute__((format(printf, 2, 3))) static void reply_okf(reply_t *r, const char *fmt, ...) {
    va_list ap;
    int n;

    r->ok = true;
    n = snprintf(r->text, sizeof(r->text), "ok ");
    va_start(ap, fmt);
    vsnprintf(r->text + n, sizeof(r->text) - (size_t)n, fmt, ap);
    va_end(ap);
}

__attribute__((format(printf, 2, 3))) static void reply_errorf(reply_t *r, const char *fmt, ...) {
    va_list ap;
    int n;

    r->ok = false;
    n = snprintf(r->text, sizeof(r->text), "error: ");
    va_start(ap, fmt);
    vsnprintf(r->text + n, sizeof(r->text) - (size_t)n, fmt, ap);
    va_end(ap);
}

/* Turns a mock API result into a reply, naming the librdkafka error. */
static void reply_from_err(reply_t *r, rd_kafka_resp_err_t err, const char *what) {
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
        reply_ok(r);
    else
        reply_errorf(r, "%s: %s (%s)", what, rd_kafka_err2name(err), rd_kafka_err2str(err));
}

/* ------------------------------------------------------------------------ */
/* Argument vocabularies: API keys and error codes                          */
/* ------------------------------------------------------------------------ */

typedef struct {
    int16_t key;
    const char *name;
    /* false when the 2.0.2 mock handler never pops the error stack. */
    bool injects;
} api_key_t;

/*
 * Only the APIs the 2.0.2 mock implements (rdkafka_mock_handlers.c): errors
 * pushed for any other key could never be consumed, so they are rejected
 * instead of silently queued forever.
 */
static const api_key_t api_keys[] = {
    {0, "Produce", true},          {1, "Fetch", true},
    {2, "ListOffsets", true},      {3, "Metadata", false},
    {8, "OffsetCommit", true},     {9, "OffsetFetch", true},
    {10, "FindCoordinator", true}, {11, "JoinGroup", true},
    {12, "Heartbeat", true},       {13, "LeaveGroup", true},
    {14, "SyncGroup", true},       {18, "ApiVersion", true},
    {22, "InitProducerId", true},  {24, "AddPartitionsToTxn", true},
    {25, "AddOffsetsToTxn", true}, {26, "EndTxn", true},
    {28, "TxnOffsetCommit", true},
};

static const api_key_t *api_key_parse(const char *s, reply_t *r) {
    long num;
    bool numeric = parse_long(s, INT16_MIN, INT16_MAX, &num);
    size_t i;

    for (i = 0; i < sizeof(api_keys) / sizeof(api_keys[0]); i++) {
        if (numeric ? api_keys[i].key == num : !strcasecmp(api_keys[i].name, s))
            return &api_keys[i];
    }
    reply_errorf(r, "unknown or unsupported API key '%s' (use a name or number the mock "
                 "implements, e.g. Produce, Fetch, OffsetCommit, JoinGroup)", s);
    return NULL;
}

/*
 * Only codes a broker can put on the wire make sense to inject: the broker
 * codes (>= -1, UNKNOWN included) plus _TRANSPORT, which the mock interprets
 * as "drop the client's connection".  Other local (negative) codes would be
 * sent as nonsense error numbers.
 */
static bool err_injectable(rd_kafka_resp_err_t err) {
    return err >= RD_KAFKA_RESP_ERR_UNKNOWN || err == RD_KAFKA_RESP_ERR__TRANSPORT;
}

/* Accepts a number or an enum name with or without "RD_KAFKA_RESP_ERR_". */
static bool err_parse(const char *s, rd_kafka_resp_err_t *out, reply_t *r) {
    static const char prefix[] = "RD_KAFKA_RESP_ERR_";
    const struct rd_kafka_err_desc *descs = NULL;
    const char *name = s;
    size_t cnt = 0;
    size_t i;
    long num;
    bool numeric = parse_long(s, INT_MIN, INT_MAX, &num);

    if (!strncasecmp(s, prefix, sizeof(prefix) - 1))
        name = s + sizeof(prefix) - 1;
    /* The table is static inside librdkafka; nothing to free. */
    rd_kafka_get_err_descs(&descs, &cnt);
    for (i = 0; i < cnt; i++) {
        if (descs[i].name == NULL)
            continue;
        if (numeric ? (long)descs[i].code == num : !strcasecmp(descs[i].name, name)) {
            if (!err_injectable(descs[i].code)) {
                reply_errorf(r, "error code %s (%d) is local to librdkafka and cannot be "
                             "injected (only broker codes and _TRANSPORT)",
                             descs[i].name, (int)descs[i].code);
                return false;
            }
            *out = descs[i].code;
            return true;
        }
    }
    reply_errorf(r, "unknown error code '%s'", s);
    return false;
}

/* ------------------------------------------------------------------------ */
/* The server                                                               */
/* ------------------------------------------------------------------------ */

typedef struct {
    const char *dir;
    int broker_cnt;
    const char *debug;            /* librdkafka debug contexts, or NULL */
    const char *topics[MAX_TOPICS];
    int topic_cnt;
} serve_opts_t;

typedef struct {
    const serve_opts_t *opts;
    rd_kafka_t *rk;               /* bookkeeping handle the cluster hangs off */
    rd_kafka_mock_cluster_t *mcluster;
    rd_kafka_t *wm_rk;            /* lazily created consumer for watermarks */
    int listen_fd;
    int signal_fd;
    bool stopping;
    bool wrote_pid;
    bool wrote_bootstrap;
    struct sockaddr_un addr;
} server_t;

/* Replication factor the brief asks for; the 2.0.2 mock ignores the
 * argument and always uses min(3, brokers) itself, so they agree. */
static int server_replication_factor(const server_t *srv) {
    return srv->opts->broker_cnt < 3 ? srv->opts->broker_cnt : 3;
}

static bool arg_broker_id(const server_t *srv, const char *s, bool allow_all, int32_t *out,
                          reply_t *r) {
    long v;

    if (allow_all && parse_long(s, -1, -1, &v)) {
        *out = -1;
        return true;
    }
    if (!parse_long(s, 1, srv->opts->broker_cnt, &v)) {
        reply_errorf(r, "broker id '%s' must be 1..%d%s", s, srv->opts->broker_cnt,
                     allow_all ? " or -1 (all/none)" : "");
        return false;
    }
    *out = (int32_t)v;
    return true;
}

static bool arg_topic(const char *s, reply_t *r) {
    if (!topic_name_valid(s)) {
        reply_errorf(r, "invalid topic name '%s'", s);
        return false;
    }
    return true;
}

/* Negative partitions must never reach the mock: 2.0.2 indexes its
 * partition array with them unchecked. */
static bool arg_partition(const char *s, long max, int32_t *out, reply_t *r) {
    long v;

    if (!parse_long(s, 0, max, &v)) {
        reply_errorf(r, "partition '%s' must be 0..%ld", s, max);
        return false;
    }
    *out = (int32_t)v;
    return true;
}

static bool arg_rtt(const char *s, int *out, reply_t *r) {
    long v;

    if (!parse_long(s, 0, MAX_RTT_MS, &v)) {
        reply_errorf(r, "delay '%s' must be 0..%ld ms", s, MAX_RTT_MS);
        return false;
    }
    *out = (int)v;
    return true;
}

/* ---- commands ---------------------------------------------------------- */

typedef void (*command_fn)(server_t *srv, int argc, char **argv, reply_t *r);

typedef struct {
    const char *name;
    int min_args; /* excluding the command name */
    int max_args; /* -1: unbounded */
    command_fn fn;
    const char *usage;
} command_t;

static void cmd_help(server_t *srv, int argc, char **argv, reply_t *r);

static void cmd_ping(server_t *srv, int argc, char **argv, reply_t *r) {
    (void)srv, (void)argc, (void)argv;
    reply_ok(r);
}

static void cmd_bootstrap(server_t *srv, int argc, char **argv, reply_t *r) {
    (void)argc, (void)argv;
    reply_okf(r, "%s", rd_kafka_mock_cluster_bootstraps(srv->mcluster));
}

static void cmd_topic_create(server_t *srv, int argc, char **argv, reply_t *r) {
    long parts;

    (void)argc;
    if (!arg_topic(argv[1], r))
        return;
    if (!parse_long(argv[2], 1, MAX_PARTITIONS, &parts)) {
        reply_errorf(r, "partition count '%s' must be 1..%d", argv[2], MAX_PARTITIONS);
        return;
    }
    reply_from_err(r,
                   rd_kafka_mock_topic_create(srv->mcluster, argv[1], (int)parts,
                                              server_replication_factor(srv)),
                   "topic-create");
}

static void cmd_broker_down(server_t *srv, int argc, char **argv, reply_t *r) {
    int32_t id;

    (void)argc;
    if (arg_broker_id(srv, argv[1], true, &id, r))
        reply_from_err(r, rd_kafka_mock_broker_set_down(srv->mcluster, id), "broker-down");
}

static void cmd_broker_up(server_t *srv, int argc, char **argv, reply_t *r) {
    int32_t id;

    (void)argc;
    if (arg_broker_id(srv, argv[1], true, &id, r))
        reply_from_err(r, rd_kafka_mock_broker_set_up(srv->mcluster, id), "broker-up");
}

static void cmd_broker_rtt(server_t *srv, int argc, char **argv, reply_t *r) {
    int32_t id;
    int rtt;

    (void)argc;
    if (arg_broker_id(srv, argv[1], true, &id, r) && arg_rtt(argv[2], &rtt, r))
        reply_from_err(r, rd_kafka_mock_broker_set_rtt(srv->mcluster, id, rtt), "broker-rtt");
}

static void cmd_request_errors(server_t *srv, int argc, char **argv, reply_t *r) {
    rd_kafka_resp_err_t errs[MAX_ARGS];
    const api_key_t *api = api_key_parse(argv[1], r);
    int i;

    if (api == NULL)
        return;
    /* Validate everything before pushing anything: all or nothing. */
    for (i = 2; i < argc; i++) {
        if (!err_parse(argv[i], &errs[i - 2], r))
            return;
    }
    rd_kafka_mock_push_request_errors_array(srv->mcluster, api->key, (size_t)(argc - 2), errs);
    if (api->injects)
        reply_ok(r);
    else
        reply_okf(r, "warning: queued, but the librdkafka 2.0.2 mock never injects %s errors",
                  api->name);
}

static void cmd_broker_request_errors(server_t *srv, int argc, char **argv, reply_t *r) {
    rd_kafka_resp_err_t errs[MAX_ARGS];
    int rtts[MAX_ARGS];
    const api_key_t *api;
    int32_t id;
    int i;

    if (!arg_broker_id(srv, argv[1], false, &id, r) || (api = api_key_parse(argv[2], r)) == NULL)
        return;
    for (i = 3; i < argc; i++) {
        char *colon = strchr(argv[i], ':');
        if (colon == NULL) {
            reply_errorf(r, "'%s' is not ERR:RTT_MS", argv[i]);
            return;
        }
        *colon = '\0';
        if (!err_parse(argv[i], &errs[i - 3], r) || !arg_rtt(colon + 1, &rtts[i - 3], r))
            return;
    }
    /* 2.0.2 has only a varargs form; pushing one tuple at a time appends in
     * order, which is exactly what one call with all tuples would do. */
    for (i = 0; i < argc - 3; i++) {
        rd_kafka_resp_err_t err = rd_kafka_mock_broker_push_request_error_rtts(
            srv->mcluster, id, api->key, 1, errs[i], rtts[i]);
        if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
            reply_from_err(r, err, "broker-request-errors");
            return;
        }
    }
    if (api->injects)
        reply_ok(r);
    else
        reply_okf(r, "warning: queued, but the librdkafka 2.0.2 mock never injects %s errors",
                  api->name);
}

static void cmd_clear_request_errors(server_t *srv, int argc, char **argv, reply_t *r) {
    const api_key_t *api = api_key_parse(argv[1], r);

    (void)argc;
    if (api == NULL)
        return;
    /* Clears the cluster-wide stack only; the mock offers no way to clear
     * per-broker stacks other than letting requests drain them. */
    rd_kafka_mock_clear_request_errors(srv->mcluster, api->key);
    reply_ok(r);
}

/*
 * The error every Metadata response gives for TOPIC from now on (NO_ERROR
 * clears it): UNKNOWN_TOPIC_OR_PART makes clients see no such topic (no
 * partitions), TOPIC_AUTHORIZATION_FAILED a topic they may not read.  Only
 * Metadata carries it in the 2.0.2 mock (Fetch and the group APIs do not),
 * which is how a broker reports both conditions to a consumer.  The mock
 * creates TOPIC first (with its default partition count) if it does not
 * exist, so a name nobody created yet can be made "unknown" before a client
 * asks for it (and auto-creates it).
 */
static void cmd_topic_error(server_t *srv, int argc, char **argv, reply_t *r) {
    rd_kafka_resp_err_t err;

    (void)argc;
    if (!arg_topic(argv[1], r) || !err_parse(argv[2], &err, r))
        return;
    if (err == RD_KAFKA_RESP_ERR__TRANSPORT) {
        reply_errorf(r, "a topic error must be a broker error code, not _TRANSPORT");
        return;
    }
    /* Returns nothing: the mock thread applies it before answering. */
    rd_kafka_mock_topic_set_error(srv->mcluster, argv[1], err);
    reply_ok(r);
}

/* Beware: the mock creates an unknown TOPIC (PARTITION+1 partitions) rather
 * than failing; checking first would need a working broker, which tests that
 * move leaders while brokers are down may not have. */
static void cmd_leader(server_t *srv, int argc, char **argv, reply_t *r) {
    int32_t part;
    int32_t id;

    (void)argc;
    if (!arg_topic(argv[1], r) || !arg_partition(argv[2], MAX_PARTITIONS - 1, &part, r) ||
        !arg_broker_id(srv, argv[3], true, &id, r))
        return;
    reply_from_err(r, rd_kafka_mock_partition_set_leader(srv->mcluster, argv[1], part, id),
                   "leader");
}

static void cmd_coordinator(server_t *srv, int argc, char **argv, reply_t *r) {
    int32_t id;

    (void)argc;
    if (strcmp(argv[1], "group") != 0 && strcmp(argv[1], "transaction") != 0) {
        reply_errorf(r, "coordinator type '%s' must be 'group' or 'transaction'", argv[1]);
        return;
    }
    /* A real broker id is mandatory: the 2.0.2 FindCoordinator handler
     * asserts (aborting the helper) if the configured broker is unknown. */
    if (!arg_broker_id(srv, argv[3], false, &id, r))
        return;
    reply_from_err(r, rd_kafka_mock_coordinator_set(srv->mcluster, argv[1], argv[2], id),
                   "coordinator");
}

/* Logs of the watermark consumer are tagged so they are not mistaken for the
 * mock cluster's own in broker.log. */
static void watermark_log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf) {
    (void)rk;
    fprintf(stderr, "kafka-mock-broker: watermarks consumer: %d %s: %s\n", level, fac, buf);
}

static int conf_set(rd_kafka_conf_t *conf, const char *key, const char *value) {
    char errstr[512];

    if (rd_kafka_conf_set(conf, key, value, errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK) {
        fprintf(stderr, "kafka-mock-broker: config %s=%s: %s\n", key, value, errstr);
        return -1;
    }
    return 0;
}

/* Creates the consumer used only to ask the cluster for watermarks. */
static rd_kafka_t *watermark_client_new(server_t *srv, reply_t *r) {
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char errstr[512];
    rd_kafka_t *rk;

    if (conf_set(conf, "bootstrap.servers", rd_kafka_mock_cluster_bootstraps(srv->mcluster)) ||
        conf_set(conf, "client.id", "kafka-mock-broker-watermarks") ||
        conf_set(conf, "allow.auto.create.topics", "false")) {
        rd_kafka_conf_destroy(conf);
        reply_errorf(r, "watermarks: cannot configure consumer");
        return NULL;
    }
    rd_kafka_conf_set_log_cb(conf, watermark_log_cb);
    /* rd_kafka_new takes ownership of conf only on success. */
    rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
    if (rk == NULL) {
        rd_kafka_conf_destroy(conf);
        reply_errorf(r, "watermarks: cannot create consumer: %s", errstr);
    }
    return rk;
}

/*
 * The 2.0.2 mock speaks Metadata v0-v2 only, which cannot carry
 * "allow.auto.create.topics=false", so it auto-creates (4 partitions) every
 * topic a client names.  Asking about an unknown topic would therefore
 * create it; an all-topics Metadata request creates nothing, so look there
 * first.  Returns true when TOPIC [PARTITION] exists; sets *r otherwise.
 */
static bool watermark_partition_exists(server_t *srv, const char *topic, int32_t part,
                                       reply_t *r) {
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t err;
    bool found = false;
    int i;

    err = rd_kafka_metadata(srv->wm_rk, 1, NULL, &md, WATERMARK_TIMEOUT_MS);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        reply_from_err(r, err, "watermarks: metadata");
        return false;
    }
    for (i = 0; i < md->topic_cnt; i++) {
        if (strcmp(md->topics[i].topic, topic) != 0)
            continue;
        found = true;
        if (part >= md->topics[i].partition_cnt) {
            reply_errorf(r, "watermarks: topic %s has %d partition(s)", topic,
                         md->topics[i].partition_cnt);
            found = false;
        }
        break;
    }
    if (i == md->topic_cnt)
        reply_errorf(r, "watermarks: unknown topic %s", topic);
    rd_kafka_metadata_destroy(md);
    return found;
}

static void cmd_watermarks(server_t *srv, int argc, char **argv, reply_t *r) {
    int64_t lo = -1;
    int64_t hi = -1;
    int32_t part;
    rd_kafka_resp_err_t err;

    (void)argc;
    if (!arg_topic(argv[1], r) || !arg_partition(argv[2], INT32_MAX, &part, r))
        return;
    if (srv->wm_rk == NULL && (srv->wm_rk = watermark_client_new(srv, r)) == NULL)
        return;
    if (!watermark_partition_exists(srv, argv[1], part, r))
        return;
    err = rd_kafka_query_watermark_offsets(srv->wm_rk, argv[1], part, &lo, &hi,
                                           WATERMARK_TIMEOUT_MS);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
        reply_from_err(r, err, "watermarks");
    else
        reply_okf(r, "%" PRId64 " %" PRId64, lo, hi);
}

/*
 * committed GROUP TOPIC PARTITION -> "ok OFFSET" (-1001, RD_KAFKA_OFFSET_INVALID,
 * when the group has committed nothing there).  A short-lived consumer handle
 * with group.id GROUP sends one OffsetFetch to the group's coordinator: it
 * never subscribes, so it never joins or rebalances the group, and the 2.0.2
 * mock answers OffsetFetch without a membership check.  It is destroyed with
 * RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE: there is no membership to leave and
 * no offset to commit on the way out.
 */
#define COMMITTED_TIMEOUT_MS 10000

static void committed_log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf) {
    (void)rk;
    fprintf(stderr, "kafka-mock-broker: committed consumer: %d %s: %s\n", level, fac, buf);
}

static void cmd_committed(server_t *srv, int argc, char **argv, reply_t *r) {
    rd_kafka_conf_t *conf;
    rd_kafka_topic_partition_list_t *parts = NULL;
    rd_kafka_resp_err_t err;
    rd_kafka_t *rk;
    char errstr[512];
    int32_t part;

    (void)argc;
    if (*argv[1] == '\0' || strlen(argv[1]) > 255) {
        reply_errorf(r, "group id must be 1..255 characters");
        return;
    }
    if (!arg_topic(argv[2], r) || !arg_partition(argv[3], MAX_PARTITIONS - 1, &part, r))
        return;
    conf = rd_kafka_conf_new();
    if (conf_set(conf, "bootstrap.servers", rd_kafka_mock_cluster_bootstraps(srv->mcluster)) ||
        conf_set(conf, "client.id", "kafka-mock-broker-committed") ||
        conf_set(conf, "group.id", argv[1]) ||
        conf_set(conf, "enable.auto.commit", "false") ||
        conf_set(conf, "allow.auto.create.topics", "false")) {
        rd_kafka_conf_destroy(conf);
        reply_errorf(r, "committed: cannot configure consumer");
        return;
    }
    rd_kafka_conf_set_log_cb(conf, committed_log_cb);
    /* rd_kafka_new takes ownership of conf only on success. */
    rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
    if (rk == NULL) {
        rd_kafka_conf_destroy(conf);
        reply_errorf(r, "committed: cannot create consumer: %s", errstr);
        return;
    }
    parts = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(parts, argv[2], part);
    err = rd_kafka_committed(rk, parts, COMMITTED_TIMEOUT_MS);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
        reply_from_err(r, err, "committed");
    else if (parts->elems[0].err != RD_KAFKA_RESP_ERR_NO_ERROR)
        reply_from_err(r, parts->elems[0].err, "committed");
    else
        reply_okf(r, "%" PRId64, parts->elems[0].offset);
    rd_kafka_topic_partition_list_destroy(parts);
    rd_kafka_destroy_flags(rk, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
}

static const command_t commands[] = {
    {"help", 0, 0, cmd_help, "help"},
    {"ping", 0, 0, cmd_ping, "ping"},
    {"bootstrap", 0, 0, cmd_bootstrap, "bootstrap"},
    {"topic-create", 2, 2, cmd_topic_create, "topic-create NAME PARTITIONS"},
    {"topic-error", 2, 2, cmd_topic_error, "topic-error NAME ERR"},
    {"broker-down", 1, 1, cmd_broker_down, "broker-down ID|-1"},
    {"broker-up", 1, 1, cmd_broker_up, "broker-up ID|-1"},
    {"broker-rtt", 2, 2, cmd_broker_rtt, "broker-rtt ID|-1 MS"},
    {"request-errors", 2, -1, cmd_request_errors, "request-errors APIKEY ERR [ERR...]"},
    {"broker-request-errors", 3, -1, cmd_broker_request_errors,
     "broker-request-errors BROKER_ID APIKEY ERR:RTT_MS [ERR:RTT_MS...]"},
    {"clear-request-errors", 1, 1, cmd_clear_request_errors, "clear-request-errors APIKEY"},
    {"leader", 3, 3, cmd_leader, "leader TOPIC PARTITION BROKER_ID|-1"},
    {"coordinator", 3, 3, cmd_coordinator, "coordinator group|transaction KEY BROKER_ID"},
    {"watermarks", 2, 2, cmd_watermarks, "watermarks TOPIC PARTITION"},
    {"committed", 3, 3, cmd_committed, "committed GROUP TOPIC PARTITION"},
};

#define COMMAND_CNT (sizeof(commands) / sizeof(commands[0]))

static void cmd_help(server_t *srv, int argc, char **argv, reply_t *r) {
    size_t i;
    size_t off;

    (void)srv, (void)argc, (void)argv;
    reply_ok(r);
    off = strlen(r->text);
    for (i = 0; i < COMMAND_CNT && off < sizeof(r->text); i++) {
        int n = snprintf(r->text + off, sizeof(r->text) - off, "%s%s", i ? "; " : " ",
                         commands[i].usage);
        if (n < 0)
            break;
        off += (size_t)n;
    }
}

/* Splits a request line in place; returns the word count or -1 if too many. */
static int line_tokenize(char *line, char **argv, int max) {
    char *save = NULL;
    char *tok;
    int argc = 0;

    for (tok = strtok_r(line, " \t\r", &save); tok != NULL; tok = strtok_r(NULL, " \t\r", &save)) {
        if (argc == max)
            return -1;
        argv[argc++] = tok;
    }
    return argc;
}

static void server_dispatch(server_t *srv, char *line, reply_t *r) {
    char *argv[MAX_ARGS];
    int argc = line_tokenize(line, argv, MAX_ARGS);
    size_t i;

    if (argc < 0) {
        reply_errorf(r, "too many arguments (max %d)", MAX_ARGS - 1);
        return;
    }
    if (argc == 0) {
        reply_errorf(r, "empty request");
        return;
    }
    for (i = 0; i < COMMAND_CNT; i++) {
        const command_t *c = &commands[i];
        if (strcmp(c->name, argv[0]) != 0)
            continue;
        if (argc - 1 < c->min_args || (c->max_args >= 0 && argc - 1 > c->max_args))
            reply_errorf(r, "usage: %s", c->usage);
        else
            c->fn(srv, argc, argv, r);
        return;
    }
    reply_errorf(r, "unknown command '%.64s' (try 'help')", argv[0]);
}

/* Executes one request line and writes its reply; -1 if the client is gone. */
static int server_answer(server_t *srv, int fd, char *line) {
    char request[128];
    reply_t r;
    size_t len;

    /* Keep a copy for the log: dispatch tokenizes the line in place. */
    snprintf(request, sizeof(request), "%s", line);
    server_dispatch(srv, line, &r);
    fprintf(stderr, "kafka-mock-broker: control: %s -> %s\n", request, r.text);
    len = strlen(r.text);
    /* The reply is one line: never let an argument echo break framing. */
    for (size_t i = 0; i < len; i++) {
        if (r.text[i] == '\n' || r.text[i] == '\r')
            r.text[i] = ' ';
    }
    if (len + 1 >= sizeof(r.text))
        len = sizeof(r.text) - 2;
    r.text[len] = '\n';
    return write_all(fd, r.text, len + 1);
}

/* Consumes the pending termination signal, if any. */
static void server_drain_signal(server_t *srv) {
    struct signalfd_siginfo si;
    ssize_t n = read(srv->signal_fd, &si, sizeof(si));

    if (n == (ssize_t)sizeof(si))
        fprintf(stderr, "kafka-mock-broker: received signal %u, shutting down\n", si.ssi_signo);
    srv->stopping = true;
}

/* Waits for input on fd while staying responsive to SIGTERM.
 * Returns 1 readable, 0 timeout, -1 stop requested or error. */
static int server_wait_readable(server_t *srv, int fd, int timeout_ms) {
    struct pollfd pfd[2] = {{fd, POLLIN, 0}, {srv->signal_fd, POLLIN, 0}};

    for (;;) {
        int n = poll(pfd, 2, timeout_ms);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            perror("kafka-mock-broker: poll");
            return -1;
        }
        if (pfd[1].revents != 0) {
            server_drain_signal(srv);
            return -1;
        }
        return n == 0 ? 0 : 1;
    }
}

typedef struct {
    char buf[LINE_MAX_LEN];
    size_t used;
    /* Inside an over-long line: drop bytes up to its newline, then answer
     * with one error, so framing survives and the client sees a reply. */
    bool discarding;
} line_reader_t;

static int client_reject_long_line(int fd) {
    static const char too_long[] = "error: request line too long\n";
    return write_all(fd, too_long, sizeof(too_long) - 1);
}

/* Answers every complete line in the buffer; -1 if the client is gone. */
static int client_process_lines(server_t *srv, int fd, line_reader_t *lr) {
    char *nl;

    while ((nl = memchr(lr->buf, '\n', lr->used)) != NULL) {
        size_t line_len = (size_t)(nl - lr->buf) + 1;
        int rc;

        *nl = '\0';
        rc = lr->discarding ? client_reject_long_line(fd) : server_answer(srv, fd, lr->buf);
        lr->discarding = false;
        if (rc != 0)
            return -1;
        memmove(lr->buf, lr->buf + line_len, lr->used - line_len);
        lr->used -= line_len;
    }
    if (lr->used == sizeof(lr->buf) - 1) {
        lr->discarding = true;
        lr->used = 0;
    }
    return 0;
}

/* Serves one connection: any number of lines until EOF, idle timeout or a
 * termination signal. */
static void server_serve_client(server_t *srv, int fd) {
    line_reader_t lr;

    memset(&lr, 0, sizeof(lr));
    for (;;) {
        ssize_t n;

        if (server_wait_readable(srv, fd, CLIENT_IDLE_MS) <= 0)
            return;
        n = recv(fd, lr.buf + lr.used, sizeof(lr.buf) - 1 - lr.used, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0 && lr.discarding) {
            (void)client_reject_long_line(fd);
            return;
        }
        if (n == 0 && lr.used > 0) {
            /* A final request without newline is still a request. */
            lr.buf[lr.used] = '\0';
            (void)server_answer(srv, fd, lr.buf);
            return;
        }
        if (n <= 0)
            return;
        lr.used += (size_t)n;
        lr.buf[lr.used] = '\0';
        if (client_process_lines(srv, fd, &lr) != 0)
            return;
    }
}

static void server_accept_one(server_t *srv) {
    int fd = accept4(srv->listen_fd, NULL, NULL, SOCK_CLOEXEC);

    if (fd < 0) {
        if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED)
            perror("kafka-mock-broker: accept");
        return;
    }
    server_serve_client(srv, fd);
    close(fd);
}

static void server_loop(server_t *srv) {
    while (!srv->stopping) {
        if (server_wait_readable(srv, srv->listen_fd, -1) > 0)
            server_accept_one(srv);
    }
}

/* ---- startup and teardown ---------------------------------------------- */

/*
 * SIGTERM/SIGINT are blocked before librdkafka starts any thread (threads
 * inherit the mask), then read synchronously through a signalfd.  That way
 * no signal handler ever runs inside librdkafka's threads and shutdown is
 * race-free.  SIGPIPE is ignored because clients may vanish mid-reply.
 */
static int signals_setup(server_t *srv) {
    sigset_t set;

    if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
        return -1;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0)
        return -1;
    srv->signal_fd = signalfd(-1, &set, SFD_CLOEXEC);
    if (srv->signal_fd < 0) {
        perror("kafka-mock-broker: signalfd");
        return -1;
    }
    return 0;
}

/* The mock cluster needs an rd_kafka_t for bookkeeping only; a producer with
 * no bootstrap servers is the cheapest handle that never talks to anyone.
 * (Its one-time CONFWARN "No `bootstrap.servers` configured" in broker.log is
 * expected and harmless.) */
static int cluster_create(server_t *srv) {
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char errstr[512];

    if (conf_set(conf, "client.id", "kafka-mock-broker") ||
        (srv->opts->debug != NULL && conf_set(conf, "debug", srv->opts->debug))) {
        rd_kafka_conf_destroy(conf);
        return -1;
    }
    srv->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    if (srv->rk == NULL) {
        rd_kafka_conf_destroy(conf);
        fprintf(stderr, "kafka-mock-broker: rd_kafka_new: %s\n", errstr);
        return -1;
    }
    srv->mcluster = rd_kafka_mock_cluster_new(srv->rk, srv->opts->broker_cnt);
    if (srv->mcluster == NULL) {
        fprintf(stderr, "kafka-mock-broker: cannot create mock cluster\n");
        return -1;
    }
    return 0;
}

/* Parses NAME:PARTITIONS (split at the last ':'). */
static int topic_spec_parse(const char *spec, char *name, size_t name_size, int *parts) {
    const char *colon = strrchr(spec, ':');
    long v;
    size_t len;

    if (colon == NULL)
        return -1;
    len = (size_t)(colon - spec);
    if (len >= name_size)
        return -1;
    memcpy(name, spec, len);
    name[len] = '\0';
    if (!topic_name_valid(name) || !parse_long(colon + 1, 1, MAX_PARTITIONS, &v))
        return -1;
    *parts = (int)v;
    return 0;
}

static int topics_create(server_t *srv) {
    int i;

    for (i = 0; i < srv->opts->topic_cnt; i++) {
        char name[TOPIC_NAME_MAX + 1];
        int parts;
        rd_kafka_resp_err_t err;

        if (topic_spec_parse(srv->opts->topics[i], name, sizeof(name), &parts) != 0) {
            fprintf(stderr, "kafka-mock-broker: bad --topic '%s' (want NAME:PARTITIONS)\n",
                    srv->opts->topics[i]);
            return -1;
        }
        err = rd_kafka_mock_topic_create(srv->mcluster, name, parts,
                                         server_replication_factor(srv));
        if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
            fprintf(stderr, "kafka-mock-broker: topic %s: %s\n", name, rd_kafka_err2str(err));
            return -1;
        }
    }
    return 0;
}

/* Refuses to steal the socket of a helper that is still alive; removes a
 * stale socket left behind by one that was SIGKILLed. */
static int control_stale_remove(const struct sockaddr_un *addr) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int rc;

    if (fd < 0)
        return -1;
    rc = connect(fd, (const struct sockaddr *)addr, sizeof(*addr));
    close(fd);
    if (rc == 0) {
        fprintf(stderr, "kafka-mock-broker: another helper is serving %s\n", addr->sun_path);
        return -1;
    }
    if (unlink(addr->sun_path) != 0 && errno != ENOENT) {
        perror("kafka-mock-broker: unlink stale socket");
        return -1;
    }
    return 0;
}

static int control_listen(server_t *srv) {
    mode_t old_mask;
    int rc;

    if (control_addr_make(srv->opts->dir, &srv->addr) != 0 || control_stale_remove(&srv->addr) != 0)
        return -1;
    srv->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (srv->listen_fd < 0) {
        perror("kafka-mock-broker: socket");
        return -1;
    }
    /* The socket can inject faults: only its owner may connect. */
    old_mask = umask(077);
    rc = bind(srv->listen_fd, (const struct sockaddr *)&srv->addr, sizeof(srv->addr));
    umask(old_mask);
    if (rc != 0 || listen(srv->listen_fd, 8) != 0) {
        perror("kafka-mock-broker: bind/listen control socket");
        return -1;
    }
    return 0;
}

/* Write to a temporary name, then rename: readers polling for the file see
 * either nothing or the complete line. */
static int file_write_atomic(const char *dir, const char *name, const char *content) {
    char path[PATH_MAX];
    char tmp[PATH_MAX];
    char tmp_name[64];
    size_t len = strlen(content);
    int fd;
    int rc = 0;

    snprintf(tmp_name, sizeof(tmp_name), ".%s.tmp.%ld", name, (long)getpid());
    if (path_join(path, sizeof(path), dir, name) != 0 ||
        path_join(tmp, sizeof(tmp), dir, tmp_name) != 0)
        return -1;
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "kafka-mock-broker: %s: %s\n", tmp, strerror(errno));
        return -1;
    }
    while (len > 0 && rc == 0) {
        ssize_t n = write(fd, content, len);
        if (n < 0 && errno != EINTR)
            rc = -1;
        else if (n > 0)
            content += n, len -= (size_t)n;
    }
    if (close(fd) != 0)
        rc = -1;
    if (rc == 0 && rename(tmp, path) != 0)
        rc = -1;
    if (rc != 0) {
        fprintf(stderr, "kafka-mock-broker: writing %s: %s\n", path, strerror(errno));
        unlink(tmp);
    }
    return rc;
}

/* pid first, bootstrap last: once bootstrap exists the helper is ready. */
static int server_announce(server_t *srv) {
    const char *bootstraps = rd_kafka_mock_cluster_bootstraps(srv->mcluster);
    char line[REPLY_MAX];

    snprintf(line, sizeof(line), "%ld\n", (long)getpid());
    if (file_write_atomic(srv->opts->dir, PID_NAME, line) != 0)
        return -1;
    srv->wrote_pid = true;
    if (snprintf(line, sizeof(line), "%s\n", bootstraps) >= (int)sizeof(line) ||
        file_write_atomic(srv->opts->dir, BOOTSTRAP_NAME, line) != 0)
        return -1;
    srv->wrote_bootstrap = true;
    printf("%s\n", bootstraps);
    fflush(stdout);
    fprintf(stderr, "kafka-mock-broker: %d broker(s) at %s, control socket %s\n",
            srv->opts->broker_cnt, bootstraps, srv->addr.sun_path);
    return 0;
}

static void file_remove(const char *dir, const char *name) {
    char path[PATH_MAX];

    if (path_join(path, sizeof(path), dir, name) == 0 && unlink(path) != 0 && errno != ENOENT)
        fprintf(stderr, "kafka-mock-broker: unlink %s: %s\n", path, strerror(errno));
}

/* Tears down in dependency order: clients of the cluster first, then the
 * cluster, then the handle it was created on. */
static void server_destroy(server_t *srv) {
    if (srv->listen_fd >= 0) {
        close(srv->listen_fd);
        unlink(srv->addr.sun_path);
    }
    if (srv->wrote_bootstrap)
        file_remove(srv->opts->dir, BOOTSTRAP_NAME);
    if (srv->wrote_pid)
        file_remove(srv->opts->dir, PID_NAME);
    if (srv->wm_rk != NULL)
        rd_kafka_destroy(srv->wm_rk);
    if (srv->mcluster != NULL)
        rd_kafka_mock_cluster_destroy(srv->mcluster);
    if (srv->rk != NULL)
        rd_kafka_destroy(srv->rk);
    if (srv->signal_fd >= 0)
        close(srv->signal_fd);
    /* Lets librdkafka's background threads finish so leak checkers see a
     * fully released process. */
    if (rd_kafka_wait_destroyed(5000) != 0)
        fprintf(stderr, "kafka-mock-broker: librdkafka handles still alive at exit\n");
}

static int serve_run(const serve_opts_t *opts) {
    server_t srv;
    int rc = 1;

    memset(&srv, 0, sizeof(srv));
    srv.opts = opts;
    srv.listen_fd = -1;
    srv.signal_fd = -1;
    if (signals_setup(&srv) == 0 && cluster_create(&srv) == 0 && topics_create(&srv) == 0 &&
        control_listen(&srv) == 0 && server_announce(&srv) == 0) {
        server_loop(&srv);
        rc = 0;
    }
    server_destroy(&srv);
    fprintf(stderr, "kafka-mock-broker: exiting (%d)\n", rc);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Command line                                                             */
/* ------------------------------------------------------------------------ */

static void usage_print(void) {
    size_t i;

    fprintf(stderr,
            "usage: kafka-mock-broker serve --dir DIR [--brokers N] [--topic NAME:PARTITIONS]...\n"
            "                               [--debug CONTEXTS]\n"
            "       kafka-mock-broker ctl DIR COMMAND [ARGS...]\n"
            "commands:\n");
    for (i = 0; i < COMMAND_CNT; i++)
        fprintf(stderr, "  %s\n", commands[i].usage);
}

static int serve_opts_parse(int argc, char **argv, serve_opts_t *opts) {
    int i;

    memset(opts, 0, sizeof(*opts));
    opts->broker_cnt = DEFAULT_BROKERS;
    for (i = 0; i < argc; i++) {
        const char *opt = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        long v;

        if (val == NULL) {
            fprintf(stderr, "kafka-mock-broker: %s needs a value\n", opt);
            return -1;
        }
        i++;
        if (!strcmp(opt, "--brokers") && parse_long(val, 1, MAX_BROKERS, &v)) {
            opts->broker_cnt = (int)v;
        } else if (!strcmp(opt, "--dir") && *val != '\0') {
            opts->dir = val;
        } else if (!strcmp(opt, "--debug") && *val != '\0') {
            opts->debug = val;
        } else if (!strcmp(opt, "--topic") && opts->topic_cnt < MAX_TOPICS) {
            opts->topics[opts->topic_cnt++] = val;
        } else {
            fprintf(stderr, "kafka-mock-broker: bad option %s %s\n", opt, val);
            return -1;
        }
    }
    if (opts->dir == NULL) {
        fprintf(stderr, "kafka-mock-broker: --dir is required\n");
        return -1;
    }
    return 0;
}

/* Joins the words into one request line; they must be protocol-safe. */
static int ctl_line_build(int argc, char **argv, char *line, size_t size) {
    size_t off = 0;
    int i;

    for (i = 0; i < argc; i++) {
        size_t len = strlen(argv[i]);
        size_t j;

        if (len == 0)
            return -1;
        for (j = 0; j < len; j++) {
            if (isspace((unsigned char)argv[i][j]))
                return -1;
        }
        if (off + len + 2 > size)
            return -1;
        if (i > 0)
            line[off++] = ' ';
        memcpy(line + off, argv[i], len);
        off += len;
    }
    line[off++] = '\n';
    line[off] = '\0';
    return 0;
}

static int ctl_connect(const char *dir) {
    struct sockaddr_un addr;
    struct timeval tv = {CTL_TIMEOUT_S, 0};
    int fd;

    if (control_addr_make(dir, &addr) != 0)
        return -1;
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        perror("kafka-mock-broker: socket");
        return -1;
    }
    /* Bounded waits: a wedged helper must not hang a test forever. */
    if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0 ||
        connect(fd, (const struct sockaddr *)&addr, sizeof(addr)) != 0) {
        fprintf(stderr, "kafka-mock-broker: cannot reach %s: %s\n", addr.sun_path,
                strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads one reply line (without the newline); -1 on error or timeout. */
static int ctl_read_reply(int fd, char *buf, size_t size) {
    size_t used = 0;

    while (used + 1 < size) {
        ssize_t n = recv(fd, buf + used, size - 1 - used, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        used += (size_t)n;
        buf[used] = '\0';
        if (memchr(buf, '\n', used) != NULL)
            break;
    }
    buf[used] = '\0';
    if (used == 0 || strchr(buf, '\n') == NULL) {
        fprintf(stderr, "kafka-mock-broker: no complete reply from helper\n");
        return -1;
    }
    *strchr(buf, '\n') = '\0';
    return 0;
}

static int ctl_run(int argc, char **argv) {
    char line[LINE_MAX_LEN];
    char reply[REPLY_MAX + 2];
    int fd;
    int rc;

    if (argc < 2 || ctl_line_build(argc - 1, argv + 1, line, sizeof(line)) != 0) {
        fprintf(stderr, "kafka-mock-broker: ctl needs DIR COMMAND [ARGS...], each argument "
                        "non-empty and without whitespace\n");
        return EXIT_USAGE;
    }
    if ((fd = ctl_connect(argv[0])) < 0)
        return EXIT_IO;
    rc = write_all(fd, line, strlen(line));
    if (rc == 0)
        shutdown(fd, SHUT_WR); /* one request per ctl invocation */
    if (rc != 0 || ctl_read_reply(fd, reply, sizeof(reply)) != 0) {
        close(fd);
        return EXIT_IO;
    }
    close(fd);
    printf("%s\n", reply);
    if (!strcmp(reply, "ok") || !strncmp(reply, "ok ", 3))
        return EXIT_REPLY_OK;
    if (!strncmp(reply, "error", 5))
        return EXIT_REPLY_ERROR;
    return EXIT_IO;
}

int main(int argc, char **argv) {
    serve_opts_t opts;

    if (argc >= 2 && !strcmp(argv[1], "serve")) {
        if (serve_opts_parse(argc - 2, argv + 2, &opts) != 0) {
            usage_print();
            return EXIT_USAGE;
        }
        return serve_run(&opts);
    }
    if (argc >= 2 && !strcmp(argv[1], "ctl"))
        return ctl_run(argc - 2, argv + 2);
    usage_print();
    return EXIT_USAGE;
}
