/* retry — error class → action, and the back-off schedule (DESIGN.md: Errors).
 *
 * Three classes, decided here so the rule is unit-tested without a server:
 * transient errors retry the same batch (never dead-letter healthy data
 * because PostgreSQL was restarting); data errors isolate the offending
 * record(s); everything else is fatal and stops the process. */
#ifndef STORAGE_RETRY_H
#define STORAGE_RETRY_H

#include <stdbool.h>

typedef enum {
    ERROR_CLASS_TRANSIENT, /* retry the same batch after a back-off and a reconnect */
    ERROR_CLASS_DATA,      /* a record the database refuses: isolate and dead-letter it */
    ERROR_CLASS_FATAL,     /* a bug or a broken deployment: stop every pipeline */
    /* The batch's partitions moved on in the database since this member read
     * them (another member owns them now, or a replay reset them): the
     * batch rolled back, its rows with it; the member starts again where the
     * database says (DESIGN.md: Progress in the database, fencing). */
    ERROR_CLASS_FENCED
} error_class_t;

/* The SQLSTATE storage_consumer_fence raises (migration 0010). */
#define RETRY_SQLSTATE_FENCED "SC001"

/* Classify an error by its SQLSTATE (NULL or "" when the server sent none)
 * and whether the connection is still usable. No SQLSTATE is a lost
 * connection: transient. */
error_class_t retry_classify(const char *sqlstate, bool connection_bad);

/* Delay before retry number `attempt` (1-based): base, 2*base, 4*base, ... */
long retry_backoff_ms(int attempt, long base_ms);

const char *retry_class_name(error_class_t cls);

/* The SQLSTATE an error description starts with ("40001: ...", as the
 * PostgreSQL adapter writes them), copied into `state`; NULL when there is
 * none (a lost connection), for the sqlstate field of a log line. */
const char *retry_sqlstate_of(const char *err, char state[6]);

#endif
