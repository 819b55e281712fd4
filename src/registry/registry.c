#include "registry/registry.h"

#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    format_schema_t *schema;
    uint64_t used; /* the client's clock at its last use: the least recent goes first */
} cached_t;

struct registry {
    const settings_t *settings;
    CURL *curl;
    schema_source_t source;
    cached_t *cache;
    size_t cached, capacity;
    uint64_t clock;
    const format_schema_t *last; /* the schema asked for last: most records share one */
    /* Answers that hold until the next batch (schema_source_t.begin). */
    int32_t *unknown;
    size_t unknown_count, unknown_cap;
    bool down;
    char down_why[400];
    pipeline_metrics_t *metrics;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_start(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

static void begin(void *ctx)
{
    registry_t *r = ctx;
    r->unknown_count = 0;
    r->down = false;
}

static size_t take_body(char *data, size_t size, size_t n, void *opaque)
{
    char **body = opaque;
    size_t have = *body ? strlen(*body) : 0, add = size * n;
    if (have + add > (size_t)64 << 20) return 0; /* a schema is not 64 MiB: refuse the answer */
    char *grown = realloc(*body, have + add + 1);
    if (!grown) abort();
    memcpy(grown + have, data, add);
    grown[have + add] = '\0';
    *body = grown;
    return add;
}

int registry_get(registry_t *r, const char *path, char **body, long *status, char *why, size_t len)
{
    const settings_t *s = r->settings;
    char *url;
    size_t base = strlen(s->registry_url);
    while (base > 0 && s->registry_url[base - 1] == '/') base--;
    if (asprintf(&url, "%.*s%s", (int)base, s->registry_url, path) < 0) abort();
    *body = NULL;
    *status = 0;
    char error[CURL_ERROR_SIZE] = "";
    struct curl_slist *headers = curl_slist_append(NULL, "Accept: application/vnd.schemaregistry.v1+json, "
                                                         "application/vnd.schemaregistry+json, application/json");
    CURL *c = r->curl;
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)s->registry_timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)s->registry_timeout_ms);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L); /* threads: no SIGALRM for timeouts */
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, take_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
    if (*s->registry_user_info) {
        curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        curl_easy_setopt(c, CURLOPT_USERPWD, s->registry_user_info);
    }
    if (*s->registry_ca_file) curl_easy_setopt(c, CURLOPT_CAINFO, s->registry_ca_file);
    CURLcode rc = curl_easy_perform(c);
    curl_slist_free_all(headers);
    if (rc != CURLE_OK) {
        /* The URL may hold credentials: the path alone is named. */
        snprintf(why, len, "GET %s: %s", path, *error ? error : curl_easy_strerror(rc));
        free(url);
        free(*body);
        *body = NULL;
        metrics_registry_request(r->metrics, false);
        return -1;
    }
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    free(url);
    metrics_registry_request(r->metrics, *status == 200 || *status == 404);
    if (!*body) {
        *body = strdup("");
        if (!*body) abort();
    }
    return 0;
}

/* The registry's error message in an error answer, or the status. */
static void answer_error(const char *body, long status, char *why, size_t len)
{
    json_t *root = json_loads(body, 0, NULL);
    const char *message = json_string_value(json_object_get(root, "message"));
    if (message) snprintf(why, len, "HTTP %ld: %s", status, message);
    else snprintf(why, len, "HTTP %ld", status);
    json_decref(root);
}

static void keep(registry_t *r, format_schema_t *schema)
{
    if (r->cached == r->capacity) { /* full: the least recently used goes */
        size_t oldest = 0;
        for (size_t i = 1; i < r->cached; i++)
            if (r->cache[i].used < r->cache[oldest].used) oldest = i;
        if (r->last == r->cache[oldest].schema) r->last = NULL;
        format_schema_free(r->cache[oldest].schema);
        r->cache[oldest] = r->cache[--r->cached];
    }
    r->cache[r->cached++] = (cached_t){schema, ++r->clock};
}

static schema_answer_t get(void *ctx, int32_t id, const format_schema_t **schema, char *why, size_t len)
{
    registry_t *r = ctx;
    if (r->last && r->last->id == id) {
        *schema = r->last;
        return SCHEMA_FOUND;
    }
    for (size_t i = 0; i < r->cached; i++)
        if (r->cache[i].schema->id == id) {
            r->cache[i].used = ++r->clock;
            *schema = r->last = r->cache[i].schema;
            return SCHEMA_FOUND;
        }
    for (size_t i = 0; i < r->unknown_count; i++)
        if (r->unknown[i] == id) {
            snprintf(why, len, "the registry answered 404");
            return SCHEMA_UNKNOWN;
        }
    if (r->down) {
        snprintf(why, len, "%s", r->down_why);
        return SCHEMA_UNAVAILABLE;
    }
    char path[64], *body;
    long status;
    snprintf(path, sizeof path, "/schemas/ids/%d", (int)id);
    if (registry_get(r, path, &body, &status, r->down_why, sizeof r->down_why) != 0) {
        r->down = true;
        snprintf(why, len, "%s", r->down_why);
        return SCHEMA_UNAVAILABLE;
    }
    schema_answer_t answer = SCHEMA_UNAVAILABLE;
    if (status == 404) {
        if (r->unknown_count == r->unknown_cap) {
            r->unknown_cap = r->unknown_cap ? 2 * r->unknown_cap : 8;
            r->unknown = realloc(r->unknown, r->unknown_cap * sizeof *r->unknown);
            if (!r->unknown) abort();
        }
        r->unknown[r->unknown_count++] = id;
        answer_error(body, status, why, len);
        answer = SCHEMA_UNKNOWN;
    } else if (status != 200) {
        /* 401, 403, 5xx: the registry's or its configuration's trouble, not
         * the record's: the batch waits. */
        char e[200];
        answer_error(body, status, e, sizeof e);
        snprintf(r->down_why, sizeof r->down_why, "GET %s: %s", path, e);
        r->down = true;
        snprintf(why, len, "%s", r->down_why);
    } else {
        json_error_t jerr;
        json_t *root = json_loads(body, 0, &jerr);
        const char *text = json_string_value(json_object_get(root, "schema"));
        if (!text) {
            snprintf(r->down_why, sizeof r->down_why, "GET %s: the answer holds no \"schema\" string", path);
            r->down = true;
            snprintf(why, len, "%s", r->down_why);
        } else {
            format_schema_t *s = format_schema_new(id, json_string_value(json_object_get(root, "schemaType")), text,
                                                   strlen(text));
            keep(r, s);
            *schema = r->last = s;
            answer = SCHEMA_FOUND;
        }
        json_decref(root);
    }
    free(body);
    return answer;
}

registry_t *registry_new(const settings_t *s, pipeline_metrics_t *pm)
{
    pthread_once(&curl_once, curl_start);
    registry_t *r = calloc(1, sizeof *r);
    if (!r) abort();
    r->settings = s;
    r->curl = curl_easy_init();
    if (!r->curl) abort();
    r->capacity = (size_t)s->registry_cache_schemas;
    r->cache = calloc(r->capacity, sizeof *r->cache);
    if (!r->cache) abort();
    r->source = (schema_source_t){r, begin, get};
    r->metrics = pm;
    return r;
}

void registry_free(registry_t *r)
{
    if (!r) return;
    for (size_t i = 0; i < r->cached; i++) format_schema_free(r->cache[i].schema);
    free(r->cache);
    free(r->unknown);
    curl_easy_cleanup(r->curl);
    free(r);
}

const schema_source_t *registry_source(registry_t *r) { return &r->source; }

int registry_reachable(registry_t *r, char *why, size_t len)
{
    char *body;
    long status;
    if (registry_get(r, "/subjects", &body, &status, why, len) != 0) return -1;
    int rc = 0;
    if (status != 200) {
        char e[200];
        answer_error(body, status, e, sizeof e);
        snprintf(why, len, "GET /subjects: %s", e);
        rc = -1;
    }
    free(body);
    return rc;
}

static int say_f(registry_say_t say, void *ctx, int level, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int say_f(registry_say_t say, void *ctx, int level, const char *fmt, ...)
{
    char text[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    say(ctx, level, text);
    return level;
}

int registry_compare(registry_t *r, const pipeline_def_t *def, const char *topic, registry_say_t say, void *ctx)
{
    char path[512], why[400], *body;
    long status;
    snprintf(path, sizeof path, "/subjects/%s-value/versions/latest", topic);
    if (registry_get(r, path, &body, &status, why, sizeof why) != 0)
        return say_f(say, ctx, REGISTRY_BROKEN, "schema registry unreachable: %s", why);
    int worst = REGISTRY_OK;
    json_t *root = NULL;
    if (status == 404) {
        worst = say_f(say, ctx, REGISTRY_WARN, "subject %s-value has no schema yet: pipeline %s's fields are not checked",
                      topic, def->name);
    } else if (status != 200) {
        answer_error(body, status, why, sizeof why);
        worst = say_f(say, ctx, REGISTRY_BROKEN, "GET %s: %s", path, why);
    } else {
        root = json_loads(body, 0, NULL);
        const char *text = json_string_value(json_object_get(root, "schema"));
        const char *type = json_string_value(json_object_get(root, "schemaType"));
        int version = (int)json_integer_value(json_object_get(root, "version"));
        int id = (int)json_integer_value(json_object_get(root, "id"));
        if (!text) {
            worst = say_f(say, ctx, REGISTRY_BROKEN, "GET %s: the answer holds no \"schema\" string", path);
        } else if (type && *type && strcmp(type, "AVRO") != 0) {
            say_f(say, ctx, REGISTRY_OK, "%s-value: version %d, id %d, a %s schema (its fields are not checked)", topic,
                  version, id, type);
        } else {
            size_t found = 0, checked = 0;
            for (size_t i = 0; i < def->field_count; i++) {
                const field_spec_t *f = &def->fields[i];
                if (f->source != SOURCE_VALUE || f->whole) continue;
                char *const one[1] = {f->name};
                char at[200];
                checked++;
                int rc = avro_schema_path(text, strlen(text), f->path_count ? f->path : one,
                                          f->path_count ? f->path_count : 1, at, sizeof at);
                if (rc == 1) {
                    found++;
                    continue;
                }
                int level = f->required ? REGISTRY_BROKEN : REGISTRY_WARN;
                if (level > worst) worst = level;
                say_f(say, ctx, level, "pipeline %s, field %s: %s in %s-value's latest schema (version %d, id %d)%s",
                      def->name, f->name, rc < 0 ? "the schema is not JSON" : "not found", topic, version, id,
                      f->required ? ": records written with it are missing_field dead letters" : "");
            }
            if (found == checked)
                say_f(say, ctx, REGISTRY_OK, "%s-value: version %d, id %d: the %zu fields of pipeline %s are in it",
                      topic, version, id, checked, def->name);
        }
    }
    json_decref(root);
    free(body);
    return worst;
}
