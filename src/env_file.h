/* env_file — the --env-file format (DESIGN.md: Settings catalog, the env
 * file): what systemd's EnvironmentFile= and Docker's --env-file both read,
 * with the cases where they differ settled one way and written down there. */
#ifndef STORAGE_ENV_FILE_H
#define STORAGE_ENV_FILE_H

#include <stddef.h>

/* Parse one line (without its newline; a trailing '\r' is dropped) in
 * place. Returns 1 with *name and *value pointing into `line` for an
 * assignment, 0 for a blank or comment line, or -1 with the reason in
 * `why` for a malformed line. */
int env_file_parse_line(char *line, char **name, char **value, char *why, size_t whylen);

/* Read `path` into the environment, never overriding a variable the
 * process was started with; of the assignments in env files, the last one
 * wins (further down the file, or in a later file). Returns 0, or -1 with
 * "PATH:LINE: reason" (or "PATH: reason") in `err`. */
int env_file_load(const char *path, char *err, size_t errlen);

/* Release what env_file_load remembers of the names it set. */
void env_file_forget(void);

#endif
