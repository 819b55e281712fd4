/* settings — the environment, parsed once at start-up into an immutable
 * structure (DESIGN.md: Settings and budgets; Operations).
 *
 * Every invalid value stops start-up with a message that names the variable
 * and the value (never the value of a secret), never hours later mid-batch. After settings_load returns,
 * the structure is only read, so pipeline threads share it without locks. */
#ifndef STORAGE_SETTINGS_H
#define STORAGE_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "core/pipeline.h"
#include "log.h"

/* Any librdkafka property can be set as STORAGE_RDKAFKA_<NAME>, the name
 * upper-cased with dots as underscores: STORAGE_RDKAFKA_SECURITY_PROTOCOL=ssl
 * sets security.protocol. */
#define SETTINGS_RDKAFKA_PREFIX "STORAGE_RDKAFKA_"

typedef struct {
    char *name;  /* librdkafka property, e.g. "security.protocol" */
    char *value;
} kafka_property_t;

/* Whether the value of librdkafka property `name` is a secret, never to be
 * printed or logged: its name holds password, secret, key (ssl.key.pem,
 * ssl.keystore.password), token, jaas or credential, or librdkafka itself
 * counts it sensitive (sasl.username, sasl.oauthbearer.config, ssl.ca.pem).
 * Case-insensitive. */
bool settings_kafka_property_is_secret(const char *name);

typedef struct {
    char *database_url; /* libpq conninfo or URI; "" means libpq's PG* variables */
    char *bootstrap_servers;
    char *pipelines_file; /* "" means the built-in definitions */
    bool pipeline_enabled[PIPELINE_MAX];
    char *group_prefix;
    char *topic[PIPELINE_MAX];         /* as given: "reviews-eu,reviews-us" */
    topic_list_t topics[PIPELINE_MAX]; /* the same, one name each */
    int max_poll_records[PIPELINE_MAX];
    int poll_timeout_ms;
    int max_poll_interval_ms;
    int session_timeout_ms;
    char *auto_offset_reset; /* "earliest" or "latest" */
    int db_retry_max_attempts;
    int db_retry_base_ms;
    int db_statement_timeout_ms;
    int commit_timeout_ms;
    int application_cache_ttl_seconds;
    int shutdown_timeout_seconds;
    int commit_failure_limit;
    char *heartbeat_dir;
    int health_max_age_seconds;
    int fetch_stall_seconds; /* 0: never judged */
    log_level_t log_level;
    log_format_t log_format;
    char *metrics_addr; /* NULL: no metrics endpoint */
    bool migrate;       /* STORAGE_MIGRATE=auto (true) or off: run applies pending migrations */
    kafka_property_t *kafka_properties;
    size_t kafka_property_count;
    /* The schema registry (DESIGN.md: Formats); "" url: none. */
    char *registry_url;       /* http(s)://host:port[/path] */
    char *registry_user_info; /* "user:password" for basic auth; "" none: a secret */
    char *registry_ca_file;   /* CA certificates for https; "": the system's */
    int registry_timeout_ms;  /* one request, connection included */
    int registry_cache_schemas; /* schemas each pipeline keeps */
} settings_t;

/* One setting of the catalog (DESIGN.md: Settings catalog). */
typedef struct {
    const char *name;          /* "STORAGE_DATABASE_URL" */
    const char *default_value; /* as text */
    const char *description;   /* one line */
} settings_doc_t;

/* Every STORAGE_ variable the service reads, each per-pipeline one of the
 * loaded pipelines listed on its own (STORAGE_RDKAFKA_<PROPERTY> aside):
 * what --help prints and what the unknown-variable check accepts. Sets
 * *count; valid until the next call. */
const settings_doc_t *settings_catalog(size_t *count);

/* "settings:", then one line per setting ("  NAME  description (default:
 * ...)") and one for STORAGE_RDKAFKA_<PROPERTY>. */
void settings_print_catalog(FILE *out);

/* Whether `entry` ("NAME=value") is one of the variables Kubernetes sets
 * for every Service of a namespace (<S>_SERVICE_HOST, <S>_PORT_9100_TCP_ADDR,
 * ...), name and value both of their shape: a Service named storage or
 * storage-consumer gives such variables a STORAGE_ prefix, and they are
 * ignored rather than refused as unknown settings. */
bool settings_is_kubernetes_service_variable(const char *entry);

/* Parse and validate the variables in `envp` (a NULL-terminated array of
 * "NAME=value", as `environ`). On success returns 0 and `out` owns its
 * strings (release with settings_free). On failure returns -1, writes a
 * message naming the variable and its value to `err`, and leaves nothing to
 * free. */
int settings_load(settings_t *out, char *const *envp, char *err, size_t errlen)
    __attribute__((warn_unused_result));

void settings_free(settings_t *s);

/* The consumer group of a pipeline: its definition's "group", else
 * "prefix.pipeline". Writes into buf. */
void settings_group_id(const settings_t *s, pipeline_id_t id, char *buf, size_t len);

/* One database attempt (resolving a batch's apps and writing it, connecting
 * first if needed) ends within the statement timeout plus this grace, by a
 * deadline of the service's own: the server's statement_timeout normally
 * answers first, but it does not end everything (a COMMIT waiting for a
 * synchronous standby). */
#define SETTINGS_DB_DEADLINE_GRACE_MS 1000
long long settings_db_attempt_ms(const settings_t *s);

/* An idle pipeline asks PostgreSQL this often; a busy one learns it from
 * its batches (DESIGN.md: Probes and metrics). */
#define SETTINGS_DB_PING_MS 2000
/* The longest a pipeline goes without PostgreSQL's answer while PostgreSQL
 * answers: a ping period (or a poll timeout, when longer: the ping is sent
 * at a turn of the loop) and one attempt. Past it, /readyz says not ready. */
long long settings_db_silence_ms(const settings_t *s);

/* Worst-case time of one batch with every database retry and its offset
 * commits, in ms: what must fit inside the max poll interval. */
long long settings_worst_case_batch_ms(const settings_t *s);

/* What leaving the group takes at a stop, beyond the offset commit: the
 * LeaveGroup request and librdkafka's teardown. */
#define SETTINGS_STOP_CLOSE_MS 2000

/* Worst-case time of a clean stop, in ms: a poll already waiting, the
 * database attempt in flight, the stop's offset commit (a refused one is
 * retried within the same commit timeout) and leaving the group. What must
 * fit inside the shutdown timeout, or a clean stop could exit 1. */
long long settings_worst_case_stop_ms(const settings_t *s);

#endif
