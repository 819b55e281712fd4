/* bench/speed_common — what the decoder's speed benches share: their
 * arguments (FILE [PASSES]), the messages of a bench data file (KEY<TAB>JSON
 * per line, as bench/gen-reviews.awk writes), a monotonic clock and the
 * median of the passes. */
#ifndef STORAGE_BENCH_SPEED_COMMON_H
#define STORAGE_BENCH_SPEED_COMMON_H

#include <stddef.h>

typedef struct {
    char **msg; /* each message's JSON, NUL-terminated */
    size_t *len;
    size_t n;
} speed_messages_t;

/* FILE [PASSES] (default 5, 1..100) into *passes and the file's messages
 * into *m. Returns 0, or the exit code after saying why as `name`: 2 for a
 * usage error, 1 for a file that cannot be read or holds no message. */
int speed_start(const char *name, int argc, char **argv, int *passes, speed_messages_t *m);
void speed_messages_free(speed_messages_t *m);

double speed_now_s(void);

/* The median of v[n] (sorted in place). */
double speed_median(double *v, int n);

#endif
