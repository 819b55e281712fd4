#include "settings.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

typedef struct {
    char *const *envp;
    char *err;
    size_t errlen;
} loader_t;

static int fail(loader_t *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(loader_t *l, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->err, l->errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* The value of `name`, or NULL when unset. An empty value counts as unset so
 * that `FOO=` in an env file means "use the default". */
static const char *env_get(const loader_t *l, const char *name)
{
    size_t n = strlen(name);
    for (char *const *e = l->envp; e && *e; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
            return (*e)[n + 1] ? *e + n + 1 : NULL;
    return NULL;
}

static char *xstrdup(const char *s)
{
    char *p = strdup(s);
    if (!p) abort();
    return p;
}

static int get_int(loader_t *l, const char *name, int def, long min, long max, int *out)
{
    const char *v = env_get(l, name);
    char *end;
    long x;
    if (!v) {
        *out = def;
        return 0;
    }
    errno = 0;
    x = strtol(v, &end, 10);
    if (errno || end == v || *end != '\0' || !(isdigit((unsigned char)v[0]) || v[0] == '-'))
        return fail(l, "%s=%s: not an integer", name, v);
    if (x < min || x > max)
        return fail(l, "%s=%s: out of range %ld..%ld", name, v, min, max);
    *out = (int)x;
    return 0;
}

static int get_string(loader_t *l, const char *name, const char *def, char **out)
{
    const char *v = env_get(l, name);
    *out = xstrdup(v ? v : def);
    return 0;
}

static int load_pipelines(loader_t *l, settings_t *s)
{
    const char *v = env_get(l, "STORAGE_PIPELINES");
    if (!v) {
        for (int i = 0; i < pipeline_count(); i++) s->pipeline_enabled[i] = true;
        return 0;
    }
    const char *p = v;
    int count = 0;
    while (*p) {
        const char *start = p;
        while (*p && *p != ',') p++;
        const char *end = p;
        while (start < end && isspace((unsigned char)*start)) start++;
        while (end > start && isspace((unsigned char)end[-1])) end--;
        const pipeline_def_t *def = pipeline_find(start, (size_t)(end - start));
        if (!def) {
            char names[1024];
            return fail(l, "STORAGE_PIPELINES=%s: unknown pipeline \"%.*s\" (known: %s)", v,
                        (int)(end - start), start, pipeline_names(names, sizeof names));
        }
        if (s->pipeline_enabled[def->id])
            return fail(l, "STORAGE_PIPELINES=%s: pipeline %s is listed twice", v, def->name);
        s->pipeline_enabled[def->id] = true;
        count++;
        if (*p == ',') p++;
    }
    if (count == 0) return fail(l, "STORAGE_PIPELINES=%s: names no pipeline", v);
    return 0;
}

bool settings_kafka_property_is_secret(const char *name)
{
    static const char *const secret_words[] = {"password", "secret", "key", "token", "jaas",
                                               "credential"};
    /* librdkafka's own sensitive properties that no word above names. */
    static const char *const sensitive[] = {"sasl.username", "sasl.oauthbearer.config",
                                            "ssl.ca.pem"};
    for (size_t i = 0; i < sizeof secret_words / sizeof secret_words[0]; i++)
        if (strcasestr(name, secret_words[i])) return true;
    for (size_t i = 0; i < sizeof sensitive / sizeof sensitive[0]; i++)
        if (strcasecmp(name, sensitive[i]) == 0) return true;
    return false;
}

/* STORAGE_RDKAFKA_SSL_CA_LOCATION -> ssl.ca.location */
static int load_kafka_properties(loader_t *l, settings_t *s)
{
    static const char *const reserved[] = {
        "enable.auto.commit", "enable.auto.offset.store", "group.id", "bootstrap.servers",
        "auto.offset.reset", "session.timeout.ms", "max.poll.interval.ms",
    };
    const size_t plen = strlen(SETTINGS_RDKAFKA_PREFIX);
    for (char *const *e = l->envp; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (strncmp(*e, SETTINGS_RDKAFKA_PREFIX, plen) != 0 || !eq) continue;
        size_t nlen = (size_t)(eq - *e) - plen;
        /* Only the variable's name: its value may be a secret. */
        if (nlen == 0) return fail(l, "%.*s: a librdkafka property needs a name", (int)plen, *e);
        char *name = malloc(nlen + 1);
        if (!name) abort();
        for (size_t i = 0; i < nlen; i++) {
            char c = (*e)[plen + i];
            name[i] = c == '_' ? '.' : (char)tolower((unsigned char)c);
        }
        name[nlen] = '\0';
        for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++) {
            if (strcmp(name, reserved[i]) == 0) {
                fail(l, "%.*s: %s is set by storage-consumer itself%s", (int)(eq - *e), *e, name,
                     strcmp(name, "enable.auto.commit") == 0
                         ? " (auto-commit is time-based, not write-based: it would lose messages)"
                         : " (use its STORAGE_ variable)");
                free(name);
                return -1;
            }
        }
        kafka_property_t *grown =
            realloc(s->kafka_properties, (s->kafka_property_count + 1) * sizeof *grown);
        if (!grown) abort();
        s->kafka_properties = grown;
        s->kafka_properties[s->kafka_property_count].name = name;
        s->kafka_properties[s->kafka_property_count].value = xstrdup(eq + 1);
        s->kafka_property_count++;
    }
    return 0;
}

/* Every STORAGE_ variable we read, with its default and what it does
 * (DESIGN.md: Settings catalog). `--help` prints this table, and the
 * unknown-variable check below derives from it: anything else with the
 * prefix is a typo, and a typo silently ignored is a setting silently not
 * applied. The per-pipeline variables are added for each loaded pipeline
 * (settings_catalog). */
static const settings_doc_t catalog_head[] = {
    {"STORAGE_DATABASE_URL", "libpq's PG* variables", "libpq conninfo (host=... dbname=...) or URI (postgresql://...)"},
    {"STORAGE_KAFKA_BOOTSTRAP_SERVERS", "localhost:9092", "Kafka brokers, host:port,..."},
    {"STORAGE_PIPELINES", "every defined pipeline", "the pipelines this process runs"},
    {"STORAGE_PIPELINES_FILE", "the built-in definitions", "the pipelines' definitions (JSON; docs/OPERATIONS.md: Pipelines of your own)"},
    {"STORAGE_GROUP_PREFIX", "storage-consumer", "consumer group = prefix + \".\" + pipeline"},
};
static const settings_doc_t catalog_batch = {"STORAGE_MAX_POLL_RECORDS", "per pipeline", "batch size of every pipeline"};
static const settings_doc_t catalog_tail[] = {
    {"STORAGE_POLL_TIMEOUT_MS", "1000", "how long a poll waits for the first record"},
    {"STORAGE_MAX_POLL_INTERVAL_MS", "300000", "must hold the worst-case batch (checked at start)"},
    {"STORAGE_SESSION_TIMEOUT_MS", "45000", "Kafka group session timeout"},
    {"STORAGE_AUTO_OFFSET_RESET", "earliest", "where a new group starts: earliest or latest"},
    {"STORAGE_DB_RETRY_MAX_ATTEMPTS", "5", "retries of a batch after a transient database error"},
    {"STORAGE_DB_RETRY_BASE_MS", "1000", "first back-off between retries, doubled each time"},
    {"STORAGE_DB_STATEMENT_TIMEOUT_MS", "15000", "per statement; one database attempt ends 1 s later"},
    {"STORAGE_COMMIT_TIMEOUT_MS", "10000", "deadline of one offset commit"},
    {"STORAGE_APPLICATION_CACHE_TTL_SECONDS", "300", "package name -> application id cache; 0: none"},
    {"STORAGE_SHUTDOWN_TIMEOUT_SECONDS", "30", "time to finish the batch in flight and leave the group"},
    {"STORAGE_COMMIT_FAILURE_LIMIT", "5", "offset commits failing in a row before exit 1"},
    {"STORAGE_FETCH_STALL_SECONDS", "60", "a partition with records its leader holds and none fetched this long fails its pipeline; 0: never"},
    {"STORAGE_HEARTBEAT_DIR", "/tmp/storage-consumer", "one heartbeat file per pipeline"},
    {"STORAGE_HEALTH_MAX_AGE_SECONDS", "90", "`health` reports a staler heartbeat as unhealthy"},
    {"STORAGE_LOG_LEVEL", "info", "debug, info, warn or error"},
    {"STORAGE_LOG_FORMAT", "text", "text or json"},
    {"STORAGE_METRICS_ADDR", "none", "host:port of the Prometheus endpoint"},
    {"STORAGE_MIGRATE", "auto", "run: auto applies pending migrations; off only checks the schema"},
    {"STORAGE_SCHEMA_REGISTRY_URL", "none", "schema registry for avro and json_schema pipelines: http(s)://host:port[/path]"},
    {"STORAGE_SCHEMA_REGISTRY_USER_INFO", "none", "user:password for the registry's basic auth (a secret)"},
    {"STORAGE_SCHEMA_REGISTRY_CA_FILE", "the system's", "CA certificates (PEM) that sign an https registry's"},
    {"STORAGE_SCHEMA_REGISTRY_TIMEOUT_MS", "10000", "deadline of one registry request, connecting included"},
    {"STORAGE_SCHEMA_REGISTRY_CACHE_SCHEMAS", "1000", "writer's schemas each pipeline keeps (an id never changes)"},
};

void settings_print_catalog(FILE *out)
{
    size_t count;
    const settings_doc_t *catalog = settings_catalog(&count);
    fputs("settings:\n", out);
    for (size_t i = 0; i < count; i++)
        fprintf(out, "  %-40s  %s (default: %s)\n", catalog[i].name, catalog[i].description,
                catalog[i].default_value);
    fprintf(out, "  %-40s  any librdkafka property, upper-cased, '.' as '_'\n", SETTINGS_RDKAFKA_PREFIX "<PROPERTY>");
}

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))
#define CATALOG_MAX (N_OF(catalog_head) + 1 + N_OF(catalog_tail) + 2 * PIPELINE_MAX)

/* The catalog: the fixed settings, and a topic and a batch size for each
 * loaded pipeline, in --help's order. Built at start-up (one thread). */
const settings_doc_t *settings_catalog(size_t *count)
{
    static settings_doc_t catalog[CATALOG_MAX];
    static char text[PIPELINE_MAX][5][160];
    size_t n = 0;
    int pipelines = pipeline_count();
    for (size_t i = 0; i < N_OF(catalog_head); i++) catalog[n++] = catalog_head[i];
    for (int i = 0; i < pipelines; i++) {
        const pipeline_def_t *def = pipeline_get(i);
        snprintf(text[i][0], sizeof text[i][0], "STORAGE_TOPIC_%s", def->env_suffix);
        snprintf(text[i][1], sizeof text[i][1], "topic of the %s pipeline (a list: comma-separated)", def->name);
        catalog[n++] = (settings_doc_t){text[i][0], def->default_topic, text[i][1]};
    }
    catalog[n++] = catalog_batch;
    for (int i = 0; i < pipelines; i++) {
        const pipeline_def_t *def = pipeline_get(i);
        snprintf(text[i][2], sizeof text[i][2], "STORAGE_MAX_POLL_RECORDS_%s", def->env_suffix);
        snprintf(text[i][3], sizeof text[i][3], "%d", def->default_batch_size);
        snprintf(text[i][4], sizeof text[i][4], "batch size of %s (beats the shared one)", def->name);
        catalog[n++] = (settings_doc_t){text[i][2], text[i][3], text[i][4]};
    }
    for (size_t i = 0; i < N_OF(catalog_tail); i++) catalog[n++] = catalog_tail[i];
    *count = n;
    return catalog;
}

static bool all_digits(const char *v)
{
    if (!*v) return false;
    for (; *v; v++)
        if (!isdigit((unsigned char)*v)) return false;
    return true;
}

/* An IPv4 or IPv6 address as Kubernetes writes a cluster IP. */
static bool ip_text(const char *v)
{
    if (!*v) return false;
    for (; *v; v++)
        if (!isxdigit((unsigned char)*v) && *v != '.' && *v != ':') return false;
    return true;
}

/* "tcp", "udp" or "sctp" in [v, v+n). */
static bool protocol(const char *v, size_t n, bool upper)
{
    static const char *const protos[] = {"tcp", "udp", "sctp"};
    for (size_t i = 0; i < sizeof protos / sizeof protos[0]; i++)
        if (n == strlen(protos[i]) && (upper ? strncasecmp(v, protos[i], n) == 0 && isupper((unsigned char)*v)
                                             : strncmp(v, protos[i], n) == 0))
            return true;
    return false;
}

/* tcp://10.0.0.1:9100 or tcp://[fd00::1]:9100 */
static bool port_url(const char *v)
{
    const char *sep = strstr(v, "://");
    const char *colon = strrchr(v, ':');
    if (!sep || !protocol(v, (size_t)(sep - v), false) || colon <= sep + 3 || !all_digits(colon + 1)) return false;
    const char *host = sep + 3;
    size_t n = (size_t)(colon - host);
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']') host++, n -= 2;
    char ip[64];
    if (n == 0 || n >= sizeof ip) return false;
    memcpy(ip, host, n);
    ip[n] = '\0';
    return ip_text(ip);
}

/* Whether `suffix` (from the '_' after the service's name to the '=') and
 * `value` have the shape of one of the variables Kubernetes sets. */
static bool kubernetes_shape(const char *suffix, size_t n, const char *value)
{
#define IS(lit) (n == sizeof lit - 1 && strncmp(suffix, lit, n) == 0)
#define STARTS(lit) (n > sizeof lit - 1 && strncmp(suffix, lit, sizeof lit - 1) == 0)
    if (IS("_SERVICE_HOST")) return ip_text(value);
    if (IS("_SERVICE_PORT")) return all_digits(value);
    if (IS("_PORT")) return port_url(value);
    if (STARTS("_SERVICE_PORT_")) {
        /* A port's name: lower-case letters, digits and '-', so upper-case
         * letters, digits and '_' here. */
        for (size_t i = sizeof "_SERVICE_PORT_" - 1; i < n; i++)
            if (!isupper((unsigned char)suffix[i]) && !isdigit((unsigned char)suffix[i]) && suffix[i] != '_')
                return false;
        return all_digits(value);
    }
    if (STARTS("_PORT_")) {
        /* _PORT_<N>_<PROTO>[_PROTO|_PORT|_ADDR] */
        const char *p = suffix + sizeof "_PORT_" - 1, *end = suffix + n;
        const char *num = p;
        while (p < end && isdigit((unsigned char)*p)) p++;
        if (p == num || p == end || *p != '_') return false;
        const char *proto = ++p;
        while (p < end && *p != '_') p++;
        if (!protocol(proto, (size_t)(p - proto), true)) return false;
        size_t left = (size_t)(end - p);
        if (left == 0) return port_url(value);
        if (left == 6 && strncmp(p, "_PROTO", 6) == 0) return protocol(value, strlen(value), false);
        if (left == 5 && strncmp(p, "_PORT", 5) == 0)
            return strlen(value) == (size_t)(proto - 1 - num) && strncmp(value, num, strlen(value)) == 0;
        if (left == 5 && strncmp(p, "_ADDR", 5) == 0) return ip_text(value);
    }
    return false;
#undef IS
#undef STARTS
}

bool settings_is_kubernetes_service_variable(const char *entry)
{
    /* Kubernetes sets, for every Service of the namespace (its name
     * upper-cased, '-' as '_'), <S>_SERVICE_HOST, <S>_SERVICE_PORT,
     * <S>_SERVICE_PORT_<PORT NAME>, <S>_PORT, <S>_PORT_<N>_<PROTO> and
     * <S>_PORT_<N>_<PROTO>_{PROTO,PORT,ADDR}, each with a value of its own
     * shape (an IP, a port, tcp://IP:port). Both name and value must match:
     * STORAGE_METRICS_PORT=9100 is no Service's variable. */
    const char *eq = strchr(entry, '=');
    if (!eq) return false;
    for (const char *p = entry + 1; p < eq; p++)
        if (*p == '_' && kubernetes_shape(p, (size_t)(eq - p), eq + 1)) return true;
    return false;
}

static int reject_unknown_variables(loader_t *l)
{
    size_t count;
    const settings_doc_t *catalog = settings_catalog(&count);
    for (char *const *e = l->envp; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (strncmp(*e, "STORAGE_", 8) != 0 || !eq) continue;
        if (strncmp(*e, SETTINGS_RDKAFKA_PREFIX, strlen(SETTINGS_RDKAFKA_PREFIX)) == 0) continue;
        size_t n = (size_t)(eq - *e);
        int known = 0;
        for (size_t i = 0; i < count; i++)
            if (strlen(catalog[i].name) == n && strncmp(*e, catalog[i].name, n) == 0) known = 1;
        if (known) continue;
        if (settings_is_kubernetes_service_variable(*e)) continue; /* main logs it at debug */
        return fail(l, "%.*s: unknown setting (a misspelt variable would be silently ignored)", (int)n, *e);
    }
    return 0;
}

/* host:port with a numeric port 1..65535. */
static int valid_listen_addr(const char *a)
{
    const char *colon = strrchr(a, ':');
    char *end;
    if (!colon || colon == a) return 0;
    long port = strtol(colon + 1, &end, 10);
    return *end == '\0' && end != colon + 1 && port >= 1 && port <= 65535;
}

long long settings_db_attempt_ms(const settings_t *s)
{
    return (long long)s->db_statement_timeout_ms + SETTINGS_DB_DEADLINE_GRACE_MS;
}

long long settings_db_silence_ms(const settings_t *s)
{
    long long period = s->poll_timeout_ms > SETTINGS_DB_PING_MS ? s->poll_timeout_ms : SETTINGS_DB_PING_MS;
    return period + settings_db_attempt_ms(s);
}

long long settings_worst_case_batch_ms(const settings_t *s)
{
    /* Every attempt may run to its deadline, and between attempts the
     * back-off doubles: base * (2^attempts - 1) in all. Two commits: the
     * batch's own, and the one a rebalance may make in the poll between
     * batches (offsets of partitions given up). */
    long long backoff = (long long)s->db_retry_base_ms * ((1LL << s->db_retry_max_attempts) - 1);
    return (long long)(s->db_retry_max_attempts + 1) * settings_db_attempt_ms(s) + backoff +
           2LL * s->commit_timeout_ms;
}

long long settings_worst_case_stop_ms(const settings_t *s)
{
    /* A stop interrupts a back-off at once, so only the attempt in flight
     * counts, not the retries. */
    return (long long)s->poll_timeout_ms + settings_db_attempt_ms(s) + s->commit_timeout_ms +
           SETTINGS_STOP_CLOSE_MS;
}

static int load(loader_t *l, settings_t *s)
{
    const char *v;
    char name[96];

    /* The definitions first: they name the per-pipeline variables. */
    get_string(l, "STORAGE_PIPELINES_FILE", "", &s->pipelines_file);
    if (pipelines_load(s->pipelines_file, l->err, l->errlen)) {
        char why[1024];
        snprintf(why, sizeof why, "%s", l->err);
        return fail(l, "STORAGE_PIPELINES_FILE=%s: %s", s->pipelines_file, why);
    }
    if (reject_unknown_variables(l)) return -1;
    get_string(l, "STORAGE_DATABASE_URL", "", &s->database_url);
    get_string(l, "STORAGE_KAFKA_BOOTSTRAP_SERVERS", "localhost:9092", &s->bootstrap_servers);
    get_string(l, "STORAGE_GROUP_PREFIX", "storage-consumer", &s->group_prefix);
    if (load_pipelines(l, s)) return -1;

    int all_batch;
    if (get_int(l, "STORAGE_MAX_POLL_RECORDS", 0, 1, 100000, &all_batch)) return -1;
    for (int i = 0; i < pipeline_count(); i++) {
        const pipeline_def_t *def = pipeline_get(i);
        snprintf(name, sizeof name, "STORAGE_TOPIC_%s", def->env_suffix);
        get_string(l, name, def->default_topic, &s->topic[i]);
        char why[400];
        if (topic_list_parse(s->topic[i], &s->topics[i], why, sizeof why))
            return fail(l, "%s=%s: %s", name, s->topic[i], why);
        /* Precedence: the pipeline's own variable, then the shared one, then
         * the built-in default. */
        snprintf(name, sizeof name, "STORAGE_MAX_POLL_RECORDS_%s", def->env_suffix);
        if (get_int(l, name, all_batch ? all_batch : def->default_batch_size, 1, 100000,
                    &s->max_poll_records[i]))
            return -1;
    }
    char shared[256];
    for (int i = 0; i < pipeline_count(); i++)
        for (int j = i + 1; j < pipeline_count(); j++)
            if (s->pipeline_enabled[i] && s->pipeline_enabled[j] &&
                topics_shared(s->topic[i], s->topic[j], shared, sizeof shared))
                return fail(l, "STORAGE_TOPIC_%s=%s: topic %s is STORAGE_TOPIC_%s's too",
                            pipeline_get(j)->env_suffix, s->topic[j], shared, pipeline_get(i)->env_suffix);

    if (get_int(l, "STORAGE_POLL_TIMEOUT_MS", 1000, 1, 60000, &s->poll_timeout_ms) ||
        get_int(l, "STORAGE_MAX_POLL_INTERVAL_MS", 300000, 1000, 86400000,
                &s->max_poll_interval_ms) ||
        get_int(l, "STORAGE_SESSION_TIMEOUT_MS", 45000, 1000, 3600000, &s->session_timeout_ms) ||
        get_int(l, "STORAGE_DB_RETRY_MAX_ATTEMPTS", 5, 0, 20, &s->db_retry_max_attempts) ||
        get_int(l, "STORAGE_DB_RETRY_BASE_MS", 1000, 1, 600000, &s->db_retry_base_ms) ||
        get_int(l, "STORAGE_DB_STATEMENT_TIMEOUT_MS", 15000, 1, 3600000,
                &s->db_statement_timeout_ms) ||
        get_int(l, "STORAGE_COMMIT_TIMEOUT_MS", 10000, 100, 600000, &s->commit_timeout_ms) ||
        get_int(l, "STORAGE_APPLICATION_CACHE_TTL_SECONDS", 300, 0, 86400,
                &s->application_cache_ttl_seconds) ||
        get_int(l, "STORAGE_SHUTDOWN_TIMEOUT_SECONDS", 30, 1, 3600,
                &s->shutdown_timeout_seconds) ||
        get_int(l, "STORAGE_COMMIT_FAILURE_LIMIT", 5, 1, 1000, &s->commit_failure_limit) ||
        get_int(l, "STORAGE_FETCH_STALL_SECONDS", 60, 0, 86400, &s->fetch_stall_seconds) ||
        get_int(l, "STORAGE_HEALTH_MAX_AGE_SECONDS", 90, 1, 86400, &s->health_max_age_seconds))
        return -1;

    if (s->session_timeout_ms > s->max_poll_interval_ms)
        return fail(l, "STORAGE_SESSION_TIMEOUT_MS=%d: must not exceed STORAGE_MAX_POLL_INTERVAL_MS=%d",
                    s->session_timeout_ms, s->max_poll_interval_ms);
    if (s->poll_timeout_ms >= s->max_poll_interval_ms)
        return fail(l, "STORAGE_POLL_TIMEOUT_MS=%d: must be below STORAGE_MAX_POLL_INTERVAL_MS=%d",
                    s->poll_timeout_ms, s->max_poll_interval_ms);
    /* The broker evicts a member that does not poll within the interval: a
     * batch still retrying then would be processed twice by two owners. */
    long long worst = settings_worst_case_batch_ms(s);
    if (worst > s->max_poll_interval_ms)
        return fail(l,
                    "STORAGE_DB_RETRY_MAX_ATTEMPTS=%d, STORAGE_DB_RETRY_BASE_MS=%d: the worst-case batch "
                    "(%lld ms of back-off, statement timeouts of STORAGE_DB_STATEMENT_TIMEOUT_MS=%d and two "
                    "commits of STORAGE_COMMIT_TIMEOUT_MS=%d) exceeds STORAGE_MAX_POLL_INTERVAL_MS=%d",
                    s->db_retry_max_attempts, s->db_retry_base_ms, worst,
                    s->db_statement_timeout_ms, s->commit_timeout_ms, s->max_poll_interval_ms);

    /* A clean stop finishes the batch in flight, commits its offsets and
     * leaves the group; past the shutdown timeout the process exits 1 with
     * the batch uncommitted. Settings under which that can happen even when
     * every step keeps to its own deadline are refused now, not found out at
     * a rolling restart. */
    long long stop = settings_worst_case_stop_ms(s);
    if (stop > s->shutdown_timeout_seconds * 1000LL)
        return fail(l,
                    "STORAGE_SHUTDOWN_TIMEOUT_SECONDS=%d: a clean stop may take %lld ms (a poll of "
                    "STORAGE_POLL_TIMEOUT_MS=%d, the database attempt in flight: "
                    "STORAGE_DB_STATEMENT_TIMEOUT_MS=%d + %d ms, the offset commit: "
                    "STORAGE_COMMIT_TIMEOUT_MS=%d, leaving the group: %d ms)",
                    s->shutdown_timeout_seconds, stop, s->poll_timeout_ms, s->db_statement_timeout_ms,
                    SETTINGS_DB_DEADLINE_GRACE_MS, s->commit_timeout_ms, SETTINGS_STOP_CLOSE_MS);

    get_string(l, "STORAGE_AUTO_OFFSET_RESET", "earliest", &s->auto_offset_reset);
    if (strcmp(s->auto_offset_reset, "earliest") != 0 && strcmp(s->auto_offset_reset, "latest") != 0)
        return fail(l, "STORAGE_AUTO_OFFSET_RESET=%s: must be earliest or latest", s->auto_offset_reset);

    get_string(l, "STORAGE_HEARTBEAT_DIR", "/tmp/storage-consumer", &s->heartbeat_dir);

    v = env_get(l, "STORAGE_LOG_LEVEL");
    s->log_level = LOG_LEVEL_INFO;
    if (v && log_level_parse(v, &s->log_level))
        return fail(l, "STORAGE_LOG_LEVEL=%s: must be debug, info, warn or error", v);
    v = env_get(l, "STORAGE_LOG_FORMAT");
    s->log_format = LOG_FORMAT_TEXT;
    if (v && log_format_parse(v, &s->log_format))
        return fail(l, "STORAGE_LOG_FORMAT=%s: must be text or json", v);

    v = env_get(l, "STORAGE_MIGRATE");
    s->migrate = true;
    if (v && strcmp(v, "off") == 0)
        s->migrate = false;
    else if (v && strcmp(v, "auto") != 0)
        return fail(l, "STORAGE_MIGRATE=%s: must be auto or off", v);

    get_string(l, "STORAGE_SCHEMA_REGISTRY_URL", "", &s->registry_url);
    if (*s->registry_url && strncmp(s->registry_url, "http://", 7) != 0 && strncmp(s->registry_url, "https://", 8) != 0)
        return fail(l, "STORAGE_SCHEMA_REGISTRY_URL=%s: expected http://host:port or https://host:port", s->registry_url);
    get_string(l, "STORAGE_SCHEMA_REGISTRY_USER_INFO", "", &s->registry_user_info);
    if (*s->registry_user_info && !strchr(s->registry_user_info, ':'))
        return fail(l, "STORAGE_SCHEMA_REGISTRY_USER_INFO: expected user:password");
    get_string(l, "STORAGE_SCHEMA_REGISTRY_CA_FILE", "", &s->registry_ca_file);
    if (*s->registry_ca_file && access(s->registry_ca_file, R_OK) != 0)
        return fail(l, "STORAGE_SCHEMA_REGISTRY_CA_FILE=%s: cannot be read: %s", s->registry_ca_file, strerror(errno));
    if (get_int(l, "STORAGE_SCHEMA_REGISTRY_TIMEOUT_MS", 10000, 100, 600000, &s->registry_timeout_ms) ||
        get_int(l, "STORAGE_SCHEMA_REGISTRY_CACHE_SCHEMAS", 1000, 1, 1000000, &s->registry_cache_schemas))
        return -1;
    for (int i = 0; i < pipeline_count() && !*s->registry_url; i++) {
        const pipeline_def_t *d = pipeline_get(i);
        if (s->pipeline_enabled[i] && (FORMAT_NEEDS_REGISTRY(d->format) || FORMAT_NEEDS_REGISTRY(d->key_format)))
            return fail(l, "STORAGE_SCHEMA_REGISTRY_URL: not set, and pipeline %s reads the schema registry's wire "
                           "format (%s)", d->name, FORMAT_NEEDS_REGISTRY(d->format) ? "its value" : "its key");
    }

    v = env_get(l, "STORAGE_METRICS_ADDR");
    if (v) {
        if (!valid_listen_addr(v))
            return fail(l, "STORAGE_METRICS_ADDR=%s: expected host:port", v);
        s->metrics_addr = xstrdup(v);
    }
    return load_kafka_properties(l, s);
}

int settings_load(settings_t *out, char *const *envp, char *err, size_t errlen)
{
    loader_t l = {envp, err, errlen};
    memset(out, 0, sizeof *out);
    if (load(&l, out)) {
        settings_free(out);
        return -1;
    }
    return 0;
}

void settings_free(settings_t *s)
{
    free(s->database_url);
    free(s->bootstrap_servers);
    free(s->group_prefix);
    free(s->pipelines_file);
    for (int i = 0; i < PIPELINE_MAX; i++) {
        free(s->topic[i]);
        topic_list_free(&s->topics[i]);
    }
    free(s->auto_offset_reset);
    free(s->heartbeat_dir);
    free(s->metrics_addr);
    free(s->registry_url);
    free(s->registry_user_info);
    free(s->registry_ca_file);
    for (size_t i = 0; i < s->kafka_property_count; i++) {
        free(s->kafka_properties[i].name);
        free(s->kafka_properties[i].value);
    }
    free(s->kafka_properties);
    memset(s, 0, sizeof *s);
}

void settings_group_id(const settings_t *s, pipeline_id_t id, char *buf, size_t len)
{
    const pipeline_def_t *def = pipeline_get(id);
    if (def->group)
        snprintf(buf, len, "%s", def->group);
    else
        snprintf(buf, len, "%s.%s", s->group_prefix, def->name);
}
