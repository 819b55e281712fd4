#include "ops/progress.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"

struct progress {
    char label[128];
    const char *unit;
    long long total, done;
    int64_t start_ms, shown_ms; /* shown_ms: 0 until a line was shown */
    int width;                  /* of the last line, to blank a longer one */
};

bool progress_wanted(void) { return isatty(STDERR_FILENO) == 1; }

progress_t *progress_new(const char *label, long long total, const char *unit)
{
    if (!progress_wanted()) return NULL;
    progress_t *p = calloc(1, sizeof *p);
    if (!p) abort();
    snprintf(p->label, sizeof p->label, "%s", label);
    p->unit = unit;
    p->total = total;
    p->start_ms = clock_now_ms();
    return p;
}

/* "1h 2m", "3m 4s" or "5s". */
static void format_left(char *out, size_t len, long long s)
{
    if (s >= 3600) snprintf(out, len, "%lldh %lldm", s / 3600, s / 60 % 60);
    else if (s >= 60) snprintf(out, len, "%lldm %llds", s / 60, s % 60);
    else snprintf(out, len, "%llds", s);
}

static void show(progress_t *p, int64_t now)
{
    char line[512], left[32] = "";
    double seconds = (double)(now - p->start_ms) / 1000.0;
    double rate = seconds > 0 ? (double)p->done / seconds : 0;
    if (rate > 0 && p->total > p->done) {
        format_left(left, sizeof left, (long long)((double)(p->total - p->done) / rate + 0.5));
    }
    int n = snprintf(line, sizeof line, "%s: %lld/%lld %s (%d%%), %.0f/s%s%s", p->label, p->done, p->total,
                     p->unit, p->total > 0 ? (int)(p->done * 100 / p->total) : 100, rate,
                     left[0] ? ", about " : "", left[0] ? left : "");
    if (n < 0) return;
    if (n >= (int)sizeof line) n = (int)sizeof line - 1;
    /* Blank what a longer previous line leaves behind. */
    fprintf(stderr, "\r%s%*s", line, p->width > n ? p->width - n : 0, "");
    fflush(stderr);
    p->width = n;
    p->shown_ms = now;
}

void progress_update(progress_t *p, long long done)
{
    if (!p) return;
    p->done = done;
    int64_t now = clock_now_ms();
    if (p->shown_ms && now - p->shown_ms < 1000 / PROGRESS_PER_SECOND) return;
    show(p, now);
}

void progress_end(progress_t *p)
{
    if (!p) return;
    if (p->shown_ms) {
        show(p, clock_now_ms());
        fputc('\n', stderr);
    }
    free(p);
}
