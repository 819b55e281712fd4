/* bench/decode_speed — the decoder alone, both ways, side by side: every
 * message of a bench data file (KEY<TAB>JSON per line, as bench/gen-reviews.awk
 * writes) through decode_record (the fast reader, falling back to jansson)
 * and through decode_record_reference (jansson alone), alternating passes so
 * both see the same machine (docs/DESIGN.md: Two parsers, one outcome).
 *
 *   decode_speed FILE [PASSES]
 *
 * Prints one line: "fast_us=F reference_us=R passes=P messages=N declined=D"
 * (µs per message, the median of the passes; D: messages the fast reader
 * left to jansson, so F is known to measure the fast reader). Exits 1 if a
 * message is rejected or the two ways disagree on it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shipped_schema.h"
#include "speed_common.h"
#include "core/decode.h"
#include "core/json_value.h"

typedef int (*decode_fn)(const pipeline_def_t *, const void *, size_t, event_t *, rejection_t *);

/* One pass over every message; µs per message, or -1 on a rejection. */
static double pass(decode_fn fn, const pipeline_def_t *def, char **msg, size_t *len, size_t n, event_t *ev)
{
    rejection_t rej;
    double t0 = speed_now_s();
    for (size_t i = 0; i < n; i++) {
        if (fn(def, msg[i], len[i], ev, &rej) != 0) {
            fprintf(stderr, "decode_speed: message %zu rejected: %s: %s\n", i + 1, rej.error_type, rej.detail);
            return -1;
        }
    }
    return (speed_now_s() - t0) / (double)n * 1e6;
}

int main(int argc, char **argv)
{
    int passes;
    speed_messages_t m;
    int start = speed_start("decode_speed", argc, argv, &passes, &m);
    if (start) return start;
    char **msg = m.msg;
    size_t *len = m.len, n = m.n;

    shipped_schema_bind(); /* the reviews table as migrations/ makes it */
    const pipeline_def_t *def = pipeline_get(PIPELINE_REVIEWS);
    event_t ev = {0}, ref = {0};
    rejection_t rej;
    int rc = 0;
    jv_t vals[PIPELINE_MAX_FIELDS + 1];
    size_t n_names = def->field_count + 1, declined = 0;
    /* The same outcome both ways, before any timing. */
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (decode_record(def, msg[i], len[i], &ev, &rej) != 0 ||
            decode_record_reference(def, msg[i], len[i], &ref, &rej) != 0) {
            fprintf(stderr, "decode_speed: message %zu rejected: %s: %s\n", i + 1, rej.error_type, rej.detail);
            rc = 1;
            break;
        }
        if (!event_equal(def, &ev, &ref)) {
            fprintf(stderr, "decode_speed: message %zu decodes differently with the two readers\n", i + 1);
            rc = 1;
        }
        declined += !json_fast_read(msg[i], len[i], def->members, n_names, vals);
    }
    double *fast = calloc((size_t)passes, sizeof *fast), *slow = calloc((size_t)passes, sizeof *slow);
    if (!fast || !slow) abort();
    /* Alternating, and each goes first in every other pass. */
    for (int p = 0; p < passes && rc == 0; p++) {
        if (p % 2 == 0) {
            fast[p] = pass(decode_record, def, msg, len, n, &ev);
            slow[p] = pass(decode_record_reference, def, msg, len, n, &ref);
        } else {
            slow[p] = pass(decode_record_reference, def, msg, len, n, &ref);
            fast[p] = pass(decode_record, def, msg, len, n, &ev);
        }
        if (fast[p] < 0 || slow[p] < 0) rc = 1;
    }
    if (rc == 0) {
        printf("fast_us=%.3f reference_us=%.3f passes=%d messages=%zu declined=%zu\n", speed_median(fast, passes),
               speed_median(slow, passes), passes, n, declined);
    }
    free(fast);
    free(slow);
    event_free(&ev);
    event_free(&ref);
    speed_messages_free(&m);
    return rc;
}
