/* args — the command-line conventions every operator command shares
 * (DESIGN.md: Operations): `--help`/`-h`, options given as `--name VALUE` or
 * `--name=VALUE`, and numbers written as plain decimal digits. */
#ifndef STORAGE_OPS_ARGS_H
#define STORAGE_OPS_ARGS_H

#include <stdbool.h>

/* Whether `arg` asks for help. */
bool args_is_help(const char *arg);

/* Whether argv[*i] is option `name` ("--to"), as "--to VALUE" or
 * "--to=VALUE". If so, *value is its value (NULL when none was given) and *i
 * is moved past a separate value. */
bool args_option(int argc, char **argv, int *i, const char *name, const char **value);

/* A decimal integer within [min, max], digits only (no sign, no spaces).
 * Returns 0 with *out set, or -1. */
int args_integer(const char *text, long long min, long long max, long long *out);

#endif
