/* exit_code — what the exit status of the service and of every operator
 * command means (DESIGN.md: Supervisor, health, shutdown; Operations). */
#ifndef STORAGE_EXIT_CODE_H
#define STORAGE_EXIT_CODE_H

typedef enum {
    /* A clean stop; a command that did its work; verify and health: every
     * stage healthy. */
    EXIT_OK = 0,
    /* A runtime failure: a pipeline failed, the database or the cluster
     * refused, the shutdown timeout passed; verify and health: something is
     * broken. */
    EXIT_FAILED = 1,
    /* A bad setting or argument, found before anything was done. */
    EXIT_USAGE = 2,
} exit_code_t;

#endif
