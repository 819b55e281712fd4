/* dead_letters — what the files of `storage-consumer dead-letters` share
 * (DESIGN.md: Operations): ops/dead_letters.c holds the command, list and
 * show; ops/dead_letters_change.c the subcommands that change dead letters
 * (redrive's arguments and output, resolve, purge); ops/dead_letters_args.c
 * the arguments and connection every subcommand uses. Calls go one way:
 * dead_letters.c dispatches to dead_letters_change.c, both use
 * dead_letters_args.c. The command itself is
 * ops_dead_letters (ops/ops.h). */
#ifndef STORAGE_OPS_DEAD_LETTERS_H
#define STORAGE_OPS_DEAD_LETTERS_H

#include <stdbool.h>

#include "pg/db.h"
#include "settings.h"

/* ---- dead_letters_args.c: what every subcommand shares ------------------ */

/* "storage-consumer: dead-letters SUB: WHATDETAIL" on stderr. */
void fail_msg(const char *sub, const char *what, const char *detail);

/* Connect for subcommand `sub` and check the schema knows resolution.
 * Returns a connection the caller owns, or NULL after reporting why on
 * stderr. */
db_conn_t *connect_checked(const settings_t *s, const char *sub);

/* Whether option `name` of subcommand `sub` got a value; reports the usage
 * error when it did not. */
bool value_given(const char *sub, const char *name, const char *value);

/* --pipeline P and --type T: 1 argv[*i] was one of them, 0 neither, -1 a
 * usage error (reported). */
int filter_option(const char *sub, int argc, char **argv, int *i, const pipeline_def_t **def,
                  const char **type);

/* ---- dead_letters_change.c: the subcommands that change dead letters ---- */

/* dead-letters redrive|resolve|purge; argv[0] is the subcommand's name.
 * Each returns its exit status (exit_code.h). */
int dl_redrive(const settings_t *s, int argc, char **argv);
int dl_resolve(const settings_t *s, int argc, char **argv);
int dl_purge(const settings_t *s, int argc, char **argv);

#endif
