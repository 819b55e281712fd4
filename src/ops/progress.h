/* progress — the progress line of long commands on a terminal (DESIGN.md:
 * Progress of long work): "done/total (percent), rate, time left" on
 * stderr, rewritten in place with \r at most PROGRESS_PER_SECOND times a
 * second, and a last line when the work ends. Nothing at all when stderr
 * is not a terminal: a script or a log file gets only the command's own
 * output. */
#ifndef STORAGE_PROGRESS_H
#define STORAGE_PROGRESS_H

#include <stdbool.h>

#define PROGRESS_PER_SECOND 4

typedef struct progress progress_t;

/* Whether a progress line would be shown (stderr is a terminal): a command
 * may skip the work of counting its total when not. */
bool progress_wanted(void);

/* A progress line headed `label` (copied) for `total` units of `unit`
 * ("dead letters"). Returns NULL when not progress_wanted(); every function
 * below accepts NULL and then does nothing. The caller frees it with
 * progress_end. */
progress_t *progress_new(const char *label, long long total, const char *unit);

/* `done` units so far: the line is rewritten unless it was less than
 * 1/PROGRESS_PER_SECOND s ago. */
void progress_update(progress_t *p, long long done);

/* The last line (done as last updated), ended with a newline if any line
 * was shown, and frees p. */
void progress_end(progress_t *p);

#endif
