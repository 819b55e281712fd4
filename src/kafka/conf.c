#include "kafka/conf.h"

#include <stdio.h>
#include <string.h>

#include "crash.h"
#include "kafka/internal.h"
#include "log.h"

static int set_conf(rd_kafka_conf_t *conf, const char *name, const char *value,
                    const char *variable, char *err, size_t errlen)
{
    char why[512];
    rd_kafka_conf_res_t res = rd_kafka_conf_set(conf, name, value, why, sizeof why);
    if (res == RD_KAFKA_CONF_OK) return 0;
    /* A secret's value is never shown, nor that of a property librdkafka
     * does not know (a misspelt secret's name does not say it is one), and
     * librdkafka's message may quote the value too. */
    if (res == RD_KAFKA_CONF_UNKNOWN || settings_kafka_property_is_secret(name)) {
        log_redact_value(why, sizeof why, value);
        log_redact(why, sizeof why);
        snprintf(err, errlen, "%s: librdkafka property %s (value not shown): %s", variable, name, why);
    } else {
        snprintf(err, errlen, "%s: librdkafka property %s=%s: %s", variable, name, value, why);
    }
    return -1;
}

static void on_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    (void)rk;
    /* librdkafka 2.0.2 resets an offset the broker no longer holds without
     * telling the application, only its log: retention deleted messages
     * that were never stored. That must be loud. */
    if (strstr(buf, "offset reset") && strstr(buf, "Offset out of range")) {
        LOG_ERROR("rdkafka", "MESSAGES LOST BEFORE THEY WERE STORED: the broker no longer holds the "
                             "offset this group had reached (retention deleted them); consumption "
                             "resumes where STORAGE_AUTO_OFFSET_RESET says (earliest: the first offset "
                             "the broker holds; latest: the end): %s", buf);
        return;
    }
    /* syslog levels: 0..3 error, 4 warning, 5..6 info, 7 debug. */
    log_level_t lvl = level <= 3 ? LOG_LEVEL_ERROR : level == 4 ? LOG_LEVEL_WARN
                    : level <= 6 ? LOG_LEVEL_INFO : LOG_LEVEL_DEBUG;
    LOG_AT(lvl, "rdkafka", "%s: %s", fac, buf);
}

#define CRASH_INTERCEPTOR "crash-report"

/* librdkafka starts each of its threads with every signal blocked: a fault
 * there would kill the process without the crash report (DESIGN.md: Logs).
 * Each thread lets the fault signals through first thing. */
static rd_kafka_resp_err_t on_thread_start(rd_kafka_t *rk, rd_kafka_thread_type_t type, const char *name,
                                           void *opaque)
{
    (void)rk;
    (void)type;
    (void)name;
    (void)opaque;
    crash_report_thread();
    return RD_KAFKA_RESP_ERR_NO_ERROR;
}

static rd_kafka_resp_err_t on_new(rd_kafka_t *rk, const rd_kafka_conf_t *conf, void *opaque, char *err,
                                  size_t errlen)
{
    (void)conf;
    (void)err;
    (void)errlen;
    return rd_kafka_interceptor_add_on_thread_start(rk, CRASH_INTERCEPTOR, on_thread_start, opaque);
}

/* The STORAGE_RDKAFKA_ variable of librdkafka property `name`. */
static void variable_of(const char *name, char *var, size_t len)
{
    size_t n = (size_t)snprintf(var, len, "%s", SETTINGS_RDKAFKA_PREFIX);
    for (const char *p = name; *p && n + 1 < len; p++)
        var[n++] = *p == '.' ? '_' : (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
    var[n < len ? n : len - 1] = '\0';
}

rd_kafka_conf_t *kafka_conf_new(const settings_t *s, pipeline_id_t id, char *err, size_t errlen)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char group[512], num[32];
    settings_group_id(s, id, group, sizeof group);

#define SET(name, value, var)                                          \
    if (set_conf(conf, name, value, var, err, errlen)) goto error

    SET("bootstrap.servers", s->bootstrap_servers, "STORAGE_KAFKA_BOOTSTRAP_SERVERS");
    SET("group.id", group, "STORAGE_GROUP_PREFIX");
    /* Auto-commit is time-based, not write-based: it would commit offsets of
     * messages whose rows were never committed. */
    SET("enable.auto.commit", "false", "(built in)");
    SET("enable.auto.offset.store", "false", "(built in)");
    SET("auto.offset.reset", s->auto_offset_reset, "STORAGE_AUTO_OFFSET_RESET");
    snprintf(num, sizeof num, "%d", s->session_timeout_ms);
    SET("session.timeout.ms", num, "STORAGE_SESSION_TIMEOUT_MS");
    snprintf(num, sizeof num, "%d", s->max_poll_interval_ms);
    SET("max.poll.interval.ms", num, "STORAGE_MAX_POLL_INTERVAL_MS");
    /* Incremental rebalancing: a member joining or leaving does not stop
     * the partitions that stay where they are. */
    SET("partition.assignment.strategy", "cooperative-sticky", "(built in)");
    SET("client.id", group, "(built in)");
    /* Bounded local queue: memory stays flat with any backlog. librdkafka
     * (2.0) fetches again only after the queue fell below this bound and a
     * broker thread next wakes, at most 1 s later, so the bound is also a
     * rate: with 8 MiB a replay ran at 21,500 records/s, with 16 MiB at
     * 35,000-39,000. 16 MiB made members join and take over partitions more
     * slowly under load (the reliability suite's group_churn failed twice,
     * 5 and 7 rounds of the mock's rebalance), so 8 MiB stays until that is
     * understood (DESIGN.md: Settings and budgets). Fetches of 256 KiB per
     * partition (librdkafka grows them for a larger record) keep what
     * arrives after the bound is crossed small. */
    SET("queued.max.messages.kbytes", "8192", "(built in)");
    SET("max.partition.fetch.bytes", "262144", "(built in)");
    for (size_t i = 0; i < s->kafka_property_count; i++) {
        char var[256];
        variable_of(s->kafka_properties[i].name, var, sizeof var);
        SET(s->kafka_properties[i].name, s->kafka_properties[i].value, var);
    }
#undef SET
    rd_kafka_conf_set_log_cb(conf, on_log);
    return conf;
error:
    rd_kafka_conf_destroy(conf);
    return NULL;
}

/* The check's trial handle talks to no broker: its log is debug detail. */
static void on_check_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    (void)rk;
    (void)level;
    LOG_DEBUG("rdkafka", "configuration check: %s: %s", fac, buf);
}

int kafka_conf_check(const settings_t *s, char *err, size_t errlen)
{
    /* Every rd_kafka_conf_set of every enabled pipeline's configuration
     * (DESIGN.md: Settings catalog, refused at start). */
    rd_kafka_conf_t *conf = NULL;
    for (int i = 0; i < pipeline_count(); i++) {
        if (!s->pipeline_enabled[i]) continue;
        rd_kafka_conf_t *c = kafka_conf_new(s, i, err, errlen);
        if (!c) {
            if (conf) rd_kafka_conf_destroy(conf);
            return -1;
        }
        if (conf)
            rd_kafka_conf_destroy(c);
        else
            conf = c;
    }
    /* What only creating a client checks: properties that contradict each
     * other, files that cannot be read (ssl.*.location), mechanisms this
     * build lacks. A trial consumer with no bootstrap servers reaches no
     * broker and is gone at once. */
    char why[512];
    if (!conf && !(conf = kafka_conf_new(s, 0, err, errlen))) return -1;
    rd_kafka_conf_set_log_cb(conf, on_check_log);
    if (rd_kafka_conf_set(conf, "bootstrap.servers", "", why, sizeof why) != RD_KAFKA_CONF_OK) {
        rd_kafka_conf_destroy(conf);
        snprintf(err, errlen, "STORAGE_KAFKA_BOOTSTRAP_SERVERS: %s", why);
        return -1;
    }
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, why, sizeof why);
    if (rk) {
        rd_kafka_destroy(rk);
        return 0;
    }
    rd_kafka_conf_destroy(conf);
    log_redact(why, sizeof why); /* may quote a secret property's value */
    /* Name the variable of the property librdkafka's reason names, the
     * longest match first (ssl.keystore.location before ssl.key...). */
    const char *named = NULL;
    for (size_t i = 0; i < s->kafka_property_count; i++) {
        const char *n = s->kafka_properties[i].name;
        if (strstr(why, n) && (!named || strlen(n) > strlen(named))) named = n;
    }
    char var[256] = "STORAGE_RDKAFKA_*";
    if (named) variable_of(named, var, sizeof var);
    snprintf(err, errlen, "%s: librdkafka refuses the configuration: %s", var, why);
    return -1;
}

rd_kafka_t *kafka_handle_new(const settings_t *s, pipeline_id_t id, kafka_rebalance_cb_t rebalance,
                             kafka_stats_cb_t stats, void *opaque, const char *what, bool *invalid_setting, char *err,
                             size_t errlen)
{
    char why[512];
    rd_kafka_conf_t *conf = kafka_conf_new(s, id, err, errlen);
    *invalid_setting = !conf;
    if (!conf) return NULL;
    if (rebalance) {
        rd_kafka_conf_set_opaque(conf, opaque);
        rd_kafka_conf_set_rebalance_cb(conf, rebalance);
    }
    /* librdkafka's statistics tell /readyz whether a broker is connected,
     * when the operator turns them on (statistics.interval.ms): off by
     * default, because with them every second librdkafka 2.0.2 left a
     * partition unfetched after rapid leader changes several times as often
     * (DESIGN.md: Probes and metrics). */
    if (stats) rd_kafka_conf_set_stats_cb(conf, stats);
    if (rd_kafka_conf_interceptor_add_on_new(conf, CRASH_INTERCEPTOR, on_new, NULL) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        rd_kafka_conf_destroy(conf);
        snprintf(err, errlen, "cannot create %s: librdkafka refused the thread-start interceptor", what);
        return NULL;
    }
    /* rd_kafka_new takes ownership of conf on success only; on failure
     * librdkafka 2.0.2 has already freed the interceptor lists the conf
     * shares with the handle, so destroying the conf would free them again:
     * it is left (once per failed handle, and kafka_conf_check has made the
     * same configuration into a trial handle first, without interceptors). */
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, why, sizeof why);
    if (!rk) {
        log_redact(why, sizeof why); /* may quote a secret property's value */
        snprintf(err, errlen, "cannot create %s: %s", what, why);
        return NULL;
    }
    /* A member's rebalances and errors come with its consumer poll. */
    if (rebalance) rd_kafka_poll_set_consumer(rk);
    return rk;
}

const char *kafka_library_version(void)
{
    return rd_kafka_version_str();
}
