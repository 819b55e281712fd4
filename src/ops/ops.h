/* ops — the operator's one-shot commands (DESIGN.md: Operations). Each takes the
 * validated settings and the command's own arguments (argv[0] is the
 * command name), prints its result on stdout, and returns its exit status
 * (exit_code.h; for verify, EXIT_FAILED means a stage is broken). */
#ifndef STORAGE_OPS_H
#define STORAGE_OPS_H

#include "settings.h"

/* storage-consumer verify */
int ops_verify(const settings_t *s, int argc, char **argv);

/* storage-consumer replay PIPELINE [--to earliest|latest|ISO-8601] */
int ops_replay(const settings_t *s, int argc, char **argv);

/* storage-consumer dead-letters list|show ID|redrive [...] */
int ops_dead_letters(const settings_t *s, int argc, char **argv);

#endif
