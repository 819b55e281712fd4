/* dead_letters_args — what every subcommand of `storage-consumer
 * dead-letters` shares (DESIGN.md: Operations): its usage errors, the
 * --pipeline and --type filters, and the connection that checks the schema
 * knows resolution. The subcommands (ops/dead_letters.c,
 * ops/dead_letters_change.c) call it; it calls none of them. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "core/decode.h"
#include "ops/args.h"
#include "ops/connect.h"
#include "ops/dead_letters.h"
#include "pg/dead_letters.h"

void fail_msg(const char *sub, const char *what, const char *detail)
{
    fprintf(stderr, "storage-consumer: dead-letters %s: %s%s\n", sub, what, detail);
}

/* Connect for a one-shot command and check the schema knows resolution
 * (migrations 0005 and 0007). Returns a connection the caller owns, or NULL after
 * reporting why on stderr. */
db_conn_t *connect_checked(const settings_t *s, const char *sub)
{
    char err[1024], command[64];
    snprintf(command, sizeof command, "dead-letters %s", sub);
    db_conn_t *conn = ops_connect(s, command, "");
    if (!conn) return NULL;
    int current = dead_letters_resolvable(conn, err, sizeof err);
    if (current < 0) fail_msg(sub, "checking the schema: ", err);
    if (current == 0)
        fail_msg(sub, "dead_letter_events lacks the resolution columns (migrations 0005_dead_letter_resolution.sql, "
                 "0007_dead_letter_acknowledgement.sql): ", "run `storage-consumer migrate` first");
    if (current != 1) {
        db_close(conn);
        return NULL;
    }
    return conn;
}

/* Whether option `name` of subcommand `sub` got a value; reports the usage
 * error when it did not. */
bool value_given(const char *sub, const char *name, const char *value)
{
    if (value && *value) return true;
    fprintf(stderr, "storage-consumer: dead-letters %s: %s needs a value\n", sub, name);
    return false;
}

/* --pipeline NAME: resolved to its definition. Returns NULL after a usage
 * error. */
static const pipeline_def_t *parse_pipeline(const char *sub, const char *name)
{
    const pipeline_def_t *def = pipeline_find(name, strlen(name));
    char names[1024];
    if (!def)
        fprintf(stderr, "storage-consumer: dead-letters %s: unknown pipeline %s (known: %s)\n", sub, name,
                pipeline_names(names, sizeof names));
    return def;
}

/* --type T: one of the error types the decoder and the store write.
 * Returns false after a usage error. */
static bool parse_type(const char *sub, const char *type)
{
    if (decode_error_type_index(type) >= 0) return true;
    fprintf(stderr, "storage-consumer: dead-letters %s: unknown error type %s (known:", sub, type);
    for (size_t i = 0; i < DECODE_ERROR_TYPE_COUNT; i++)
        fprintf(stderr, "%s %s", i ? "," : "", decode_error_types[i]);
    fputs(")\n", stderr);
    return false;
}

/* --pipeline P and --type T, which list, redrive and resolve share: 1
 * argv[*i] was one of them, 0 neither, -1 a usage error (reported). */
int filter_option(const char *sub, int argc, char **argv, int *i, const pipeline_def_t **def,
                         const char **type)
{
    const char *v;
    if (args_option(argc, argv, i, "--pipeline", &v))
        return value_given(sub, "--pipeline", v) && (*def = parse_pipeline(sub, v)) ? 1 : -1;
    if (args_option(argc, argv, i, "--type", type))
        return value_given(sub, "--type", *type) && parse_type(sub, *type) ? 1 : -1;
    return 0;
}
