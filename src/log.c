#include "log.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static log_level_t current_level = LOG_LEVEL_INFO;
static log_format_t current_format = LOG_FORMAT_TEXT;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

void log_configure(log_level_t level, log_format_t format)
{
    current_level = level;
    current_format = format;
}

log_level_t log_current_level(void) { return current_level; }

int log_level_parse(const char *name, log_level_t *out)
{
    if (strcasecmp(name, "debug") == 0) *out = LOG_LEVEL_DEBUG;
    else if (strcasecmp(name, "info") == 0) *out = LOG_LEVEL_INFO;
    else if (strcasecmp(name, "warn") == 0 || strcasecmp(name, "warning") == 0)
        *out = LOG_LEVEL_WARN;
    else if (strcasecmp(name, "error") == 0) *out = LOG_LEVEL_ERROR;
    else return -1;
    return 0;
}

int log_format_parse(const char *name, log_format_t *out)
{
    if (strcasecmp(name, "text") == 0) *out = LOG_FORMAT_TEXT;
    else if (strcasecmp(name, "json") == 0) *out = LOG_FORMAT_JSON;
    else return -1;
    return 0;
}

/* Append `s` to buf as the body of a JSON string (without quotes). */
static size_t json_escape(char *buf, size_t cap, size_t len, const char *s)
{
    for (; *s && len + 7 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            buf[len++] = '\\';
            buf[len++] = (char)c;
        } else if (c < 0x20) {
            len += (size_t)snprintf(buf + len, cap - len, "\\u%04x", c);
        } else {
            buf[len++] = (char)c;
        }
    }
    return len;
}

void log_emit(log_level_t level, const char *component, const char *fmt, ...)
{
    char msg[4096];
    char line[8192];
    va_list ap;
    struct timespec ts;
    struct tm tm;
    char when[32];
    size_t len;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);

    if (current_format == LOG_FORMAT_JSON) {
        len = (size_t)snprintf(line, sizeof line,
                               "{\"ts\":\"%s.%03ldZ\",\"level\":\"%s\",\"component\":\"",
                               when, ts.tv_nsec / 1000000, level_names[level]);
        len = json_escape(line, sizeof line, len, component);
        len += (size_t)snprintf(line + len, sizeof line - len, "\",\"msg\":\"");
        len = json_escape(line, sizeof line, len, msg);
        len += (size_t)snprintf(line + len, sizeof line - len, "\"}\n");
    } else {
        len = (size_t)snprintf(line, sizeof line, "%s.%03ldZ %-5s [%s] %s\n", when,
                               ts.tv_nsec / 1000000, level_names[level], component, msg);
    }
    if (len >= sizeof line) {
        len = sizeof line - 1;
        line[len - 1] = '\n';
    }
    /* One write per line: lines of concurrent threads never interleave. */
    if (write(STDERR_FILENO, line, len) < 0) {
        /* Nothing sensible left to do when stderr is gone. */
    }
}
