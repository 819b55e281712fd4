/* log — one line per event on stderr, text (key=value) or JSON.
 *
 * Messages quote strings from producers (package names, dead-letter
 * details), so the formatter escapes what would break a line or reach the
 * operator's terminal as a control: control characters, DEL, C1 controls,
 * the Unicode line separators, backslashes and invalid UTF-8 (as \n, \x1b,
 * \u009b in text; as JSON escapes and U+FFFD in JSON). Whatever a message
 * holds, one event is one line.
 *
 * The level is checked before any formatting work (LOG_* macros), so a debug
 * line in the hot path costs one comparison when debug is off. Each line is
 * written with a single write(2), so lines from different pipeline threads
 * never interleave. */
#ifndef STORAGE_LOG_H
#define STORAGE_LOG_H

#include <stdarg.h>
#include <stddef.h>

typedef enum {
    LOG_LEVEL_DEBUG = 0,
    LOG_LEVEL_INFO,
    LOG_LEVEL_WARN,
    LOG_LEVEL_ERROR,
    LOG_LEVEL_OFF
} log_level_t;

typedef enum { LOG_FORMAT_TEXT = 0, LOG_FORMAT_JSON } log_format_t;

/* Set once at start-up, before any thread starts. */
void log_configure(log_level_t level, log_format_t format);
log_level_t log_current_level(void);

/* Parse "debug", "info", "warn"/"warning", "error" (case-insensitive).
 * Returns 0 on success, -1 if the name is unknown. */
int log_level_parse(const char *name, log_level_t *out);
int log_format_parse(const char *name, log_format_t *out);

/* Never log `value`: from now on every occurrence of it in a message, and
 * of each of its space-separated words when it is one line of several
 * (librdkafka quotes the rest of a configuration string from the word it
 * cannot parse), is written as [redacted]. For the values of secret settings,
 * which a library's own message may quote. Values and words shorter than
 * 4 bytes are not searched for: they cannot be told from ordinary text.
 * Call before any thread starts; the log keeps its own copy for the life of
 * the process. */
void log_add_secret(const char *value);

/* Apply the redaction of log_add_secret to `text` (NUL-terminated, in a
 * buffer of `cap` bytes; the result is cut to fit), for a message printed
 * outside the log. */
void log_redact(char *text, size_t cap);

/* Replace every occurrence of `value` (any length but 0) in `text` by
 * [redacted], as log_redact does. */
void log_redact_value(char *text, size_t cap, const char *value);

/* Format and emit one line. `component` is a short tag such as a pipeline
 * name ("reviews") or "main". Use the LOG_* macros instead. */
void log_emit(log_level_t level, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define LOG_AT(lvl, comp, ...)                                  \
    do {                                                        \
        if ((lvl) >= log_current_level())                       \
            log_emit((lvl), (comp), __VA_ARGS__);               \
    } while (0)

#define LOG_DEBUG(comp, ...) LOG_AT(LOG_LEVEL_DEBUG, comp, __VA_ARGS__)
#define LOG_INFO(comp, ...)  LOG_AT(LOG_LEVEL_INFO, comp, __VA_ARGS__)
#define LOG_WARN(comp, ...)  LOG_AT(LOG_LEVEL_WARN, comp, __VA_ARGS__)
#define LOG_ERROR(comp, ...) LOG_AT(LOG_LEVEL_ERROR, comp, __VA_ARGS__)

#endif
