/* clock — the one monotonic clock of the service.
 *
 * Deadlines, holds, waits and batch durations are measured on
 * CLOCK_MONOTONIC: a wall-clock step (NTP, an operator) must neither end a
 * wait early nor stretch it. */
#ifndef STORAGE_CLOCK_H
#define STORAGE_CLOCK_H

#include <stdint.h>

/* Milliseconds since an arbitrary start, never going back. */
int64_t clock_now_ms(void);

/* The same clock in microseconds, for durations reported below the
 * millisecond (a batch's duration_ms). */
int64_t clock_now_us(void);

#endif
