#include "env_file.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool blank(char c)
{
    return c == ' ' || c == '\t';
}

static int malformed(char *why, size_t whylen, const char *reason)
{
    snprintf(why, whylen, "%s", reason);
    return -1;
}

int env_file_parse_line(char *line, char **name, char **value, char *why, size_t whylen)
{
    size_t n = strlen(line);
    if (n > 0 && line[n - 1] == '\r') line[--n] = '\0';
    char *p = line;
    while (blank(*p)) p++;
    if (*p == '#' || *p == ';') {
        /* systemd before 254 (Debian 12 has 252) continues such a comment
         * onto the next line, hiding it: refused, not guessed. */
        if (n > 0 && line[n - 1] == '\\')
            return malformed(why, whylen,
                             "a comment ending in a backslash (systemd before 254 continues it onto the next line)");
        return 0;
    }
    if (*p == '\0') return 0;
    /* "export NAME=value": a file a shell can also source. */
    if (strncmp(p, "export", 6) == 0 && blank(p[6])) {
        p += 6;
        while (blank(*p)) p++;
    }
    char *start = p;
    if (!(isalpha((unsigned char)*p) || *p == '_'))
        return malformed(why, whylen, "expected NAME=value (NAME: letters, digits and '_', not starting with a digit)");
    while (isalnum((unsigned char)*p) || *p == '_') p++;
    char *name_end = p;
    while (blank(*p)) p++;
    if (*p != '=')
        return malformed(why, whylen, "expected NAME=value (NAME: letters, digits and '_', not starting with a digit)");
    *name_end = '\0';
    p++;
    while (blank(*p)) p++;

    char *v = p;
    if (*p == '\'') {
        /* Single quotes: every character literal, up to the next quote. */
        char *close = strchr(p + 1, '\'');
        if (!close) return malformed(why, whylen, "unterminated single quote");
        *close = '\0';
        v = p + 1;
        p = close + 1;
    } else if (*p == '"') {
        /* Double quotes: \" \\ \$ and \` stand for the character; any other
         * backslash is kept as written. */
        char *out = p, *in = p + 1;
        for (;; in++) {
            if (*in == '\0') return malformed(why, whylen, "unterminated double quote");
            if (*in == '"') break;
            if (*in == '\\' && (in[1] == '"' || in[1] == '\\' || in[1] == '$' || in[1] == '`')) in++;
            *out++ = *in;
        }
        *out = '\0';
        v = p;
        p = in + 1;
    } else {
        /* Unquoted: taken as written, trailing whitespace trimmed. */
        size_t len = strlen(p);
        while (len > 0 && blank(p[len - 1])) p[--len] = '\0';
        /* systemd takes a backslash here as an escape (at the end of the
         * line: a continuation), Docker keeps it: refused, not guessed. A
         * quote past the first character is literal to both. */
        if (strchr(p, '\\'))
            return malformed(why, whylen,
                             "a backslash in an unquoted value (systemd reads it as an escape, Docker keeps "
                             "it): single-quote the value");
        *name = start;
        *value = v;
        return 1;
    }
    while (blank(*p)) p++;
    if (*p != '\0') return malformed(why, whylen, "text after the closing quote");
    *name = start;
    *value = v;
    return 1;
}

/* The names the env files set so far: a later assignment of one of them
 * (further down, or in a later file) overrides it, as in systemd and
 * Docker, while a variable the process was started with still wins. */
static char **file_names;
static size_t file_name_count;

static bool set_by_a_file(const char *name)
{
    for (size_t i = 0; i < file_name_count; i++)
        if (strcmp(file_names[i], name) == 0) return true;
    return false;
}

static void assign(const char *name, const char *value)
{
    if (set_by_a_file(name)) {
        setenv(name, value, 1);
        return;
    }
    if (getenv(name)) return; /* the environment the process was started with */
    char **grown = realloc(file_names, (file_name_count + 1) * sizeof *grown);
    char *copy = strdup(name);
    if (!grown || !copy) abort();
    file_names = grown;
    file_names[file_name_count++] = copy;
    setenv(name, value, 1);
}

void env_file_forget(void)
{
    for (size_t i = 0; i < file_name_count; i++) free(file_names[i]);
    free(file_names);
    file_names = NULL;
    file_name_count = 0;
}

int env_file_load(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    char *line = NULL, why[256];
    size_t cap = 0;
    ssize_t got;
    int lineno = 0, rc = 0;
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    while ((got = getline(&line, &cap, f)) >= 0) {
        char *name, *value;
        lineno++;
        if (got > 0 && line[got - 1] == '\n') line[--got] = '\0';
        int r = (size_t)got != strlen(line) ? malformed(why, sizeof why, "a NUL byte")
                                            : env_file_parse_line(line, &name, &value, why, sizeof why);
        if (r < 0) {
            snprintf(err, errlen, "%s:%d: %s", path, lineno, why);
            rc = -1;
            break;
        }
        if (r > 0) assign(name, value);
    }
    free(line);
    fclose(f);
    return rc;
}
