/* log — one line per event on stderr, text (key=value) or JSON.
 *
 * Messages quote strings from producers (package names, dead-letter
 * details), so the formatter escapes what would break a line or reach the
 * operator's terminal as a control: control characters, DEL, C1 controls,
 * the Unicode line separators, backslashes and invalid UTF-8 (as \n, \x1b,
 * \u009b in text; as JSON escapes and U+FFFD in JSON). Whatever a message
 * holds, one event is one line.
 *
 * The facts of an event (topic, partition, offsets, counts, error_type...)
 * are typed fields, not text inside the message: in the text format each
 * renders as " key=value" after the message (the value in double quotes,
 * with '"' as \", when it is empty or holds a space, '"', '=', or anything
 * escaped); in JSON as a member of the object, numbers as JSON numbers.
 * Field values go through the same escaping and the same secret redaction
 * as the message (DESIGN.md: Logs). Building fields allocates nothing.
 *
 * The level is checked before any formatting work (LOG_* macros), so a debug
 * line in the hot path costs one comparison when debug is off (the fields'
 * values are not even evaluated). Each line is written with a single
 * write(2), so lines from different pipeline threads never interleave. A
 * line holds at most LOG_LINE_MAX bytes: what outgrows it is cut on a whole
 * character or left out as a whole field, and the line stays one line (one
 * JSON object). */
#ifndef STORAGE_LOG_H
#define STORAGE_LOG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

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

/* The longest line written, newline included. */
#define LOG_LINE_MAX 16384

typedef enum {
    LOG_FIELD_STR,    /* text; NULL: the field is left out */
    LOG_FIELD_INT,    /* a signed integer */
    LOG_FIELD_FIXED,  /* a real number with a fixed count of decimals */
    LOG_FIELD_RANGES  /* per partition, first and last offset */
} log_field_type_t;

/* The offsets an event covers in one partition. */
typedef struct {
    int32_t partition;
    int64_t first, last;
    const char *topic; /* NULL: not shown (a pipeline of one topic) */
} log_range_t;

/* One fact of an event. `key` is a name of the documented set
 * (docs/OPERATIONS.md: JSON log fields), never "ts", "level", "component"
 * or "msg" (a JSON object holds each name once); the value is borrowed for
 * the call. Build with LF_*. */
typedef struct {
    const char *key;
    log_field_type_t type;
    union {
        const char *str;
        long long num;
        struct {
            double value;
            int decimals;
        } fixed;
        struct {
            const log_range_t *at;
            size_t count;
        } ranges;
    } v;
} log_field_t;

#define LF_STR(k, s) ((log_field_t){.key = (k), .type = LOG_FIELD_STR, .v.str = (s)})
#define LF_INT(k, n) ((log_field_t){.key = (k), .type = LOG_FIELD_INT, .v.num = (long long)(n)})
/* Text "41.3" with decimals 1; a JSON number (null if not finite). */
#define LF_FIXED(k, x, d) ((log_field_t){.key = (k), .type = LOG_FIELD_FIXED, .v.fixed = {(double)(x), (d)}})
/* Text "p0:17-41,p2:5-9"; JSON [{"partition":0,"first":17,"last":41},...]. */
#define LF_RANGES(k, r, n) ((log_field_t){.key = (k), .type = LOG_FIELD_RANGES, .v.ranges = {(r), (n)}})

/* The fields argument of the LOG_*_F macros (one field or more):
 * LOG_FIELDS(LF_STR("topic", t), LF_INT("partition", p)). A compound
 * literal on the caller's stack, built only when the level is enabled. */
#define LOG_FIELDS(...) \
    ((const log_field_t[]){__VA_ARGS__}), (sizeof((const log_field_t[]){__VA_ARGS__}) / sizeof(log_field_t))

/* Format and emit one line. `component` is a short tag such as a pipeline
 * name ("reviews") or "main". Use the LOG_* macros instead. */
void log_emit(log_level_t level, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The same, with `nfields` fields after the message. Use the LOG_*_F
 * macros instead. */
void log_emit_fields(log_level_t level, const char *component, const log_field_t *fields, size_t nfields,
                     const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#define LOG_AT(lvl, comp, ...)                                  \
    do {                                                        \
        if ((lvl) >= log_current_level())                       \
            log_emit((lvl), (comp), __VA_ARGS__);               \
    } while (0)

/* `fields` is LOG_FIELDS(...). */
#define LOG_AT_F(lvl, comp, fields, ...)                        \
    do {                                                        \
        if ((lvl) >= log_current_level())                       \
            log_emit_fields((lvl), (comp), fields, __VA_ARGS__); \
    } while (0)

#define LOG_DEBUG(comp, ...) LOG_AT(LOG_LEVEL_DEBUG, comp, __VA_ARGS__)
#define LOG_INFO(comp, ...)  LOG_AT(LOG_LEVEL_INFO, comp, __VA_ARGS__)
#define LOG_WARN(comp, ...)  LOG_AT(LOG_LEVEL_WARN, comp, __VA_ARGS__)
#define LOG_ERROR(comp, ...) LOG_AT(LOG_LEVEL_ERROR, comp, __VA_ARGS__)

#define LOG_DEBUG_F(comp, fields, ...) LOG_AT_F(LOG_LEVEL_DEBUG, comp, fields, __VA_ARGS__)
#define LOG_INFO_F(comp, fields, ...)  LOG_AT_F(LOG_LEVEL_INFO, comp, fields, __VA_ARGS__)
#define LOG_WARN_F(comp, fields, ...)  LOG_AT_F(LOG_LEVEL_WARN, comp, fields, __VA_ARGS__)
#define LOG_ERROR_F(comp, fields, ...) LOG_AT_F(LOG_LEVEL_ERROR, comp, fields, __VA_ARGS__)

#endif
