/* status_page — the HTML page at GET / of the metrics address (DESIGN.md:
 * Status page): each pipeline's state, owned partitions and their committed
 * lag, throughput of the last minutes, unresolved dead letters by reason,
 * the last error with its time, the version and the uptime.
 *
 * Rendered from what the pipelines recorded in metrics_t (atomics, and the
 * last error under its lock): no database connection per request. Counts,
 * reasons and names only, never a message payload or a connection string;
 * every string printed is HTML-escaped. No script, no external asset: a
 * <meta http-equiv="refresh"> reloads it. */
#ifndef STORAGE_STATUS_PAGE_H
#define STORAGE_STATUS_PAGE_H

#include <stdint.h>

#include "metrics.h"

/* The page reloads itself this often. */
#define STATUS_PAGE_REFRESH_SECONDS 5
/* The throughput chart: this many seconds, one point per bucket. */
#define STATUS_PAGE_CHART_SECONDS 300
#define STATUS_PAGE_CHART_BUCKET_SECONDS 5

/* The page as of now_unix_ms. Returns a string the caller frees. */
char *status_page_render(metrics_t *m, int64_t now_unix_ms);

#endif
