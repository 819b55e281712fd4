#include "status_page.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Text as HTML: the five characters that could open markup or end an
 * attribute are escaped; other control characters are shown as '?'. */
static void put_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        switch (c) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default: fputc(c < 0x20 || c == 0x7f ? '?' : c, f);
        }
    }
}

/* "2026-12-01 13:45:02 UTC" */
static void put_time(FILE *f, int64_t unix_ms)
{
    time_t t = (time_t)(unix_ms / 1000);
    struct tm tm;
    char text[64];
    gmtime_r(&t, &tm);
    strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &tm);
    fputs(text, f);
}

/* "3d 4h 5m 6s", the leading zero units left out. */
static void put_duration(FILE *f, int64_t ms)
{
    long long s = ms > 0 ? ms / 1000 : 0;
    long long d = s / 86400, h = s / 3600 % 24, m = s / 60 % 60;
    if (d) fprintf(f, "%lldd ", d);
    if (d || h) fprintf(f, "%lldh ", h);
    if (d || h || m) fprintf(f, "%lldm ", m);
    fprintf(f, "%llds", s % 60);
}

/* What the pipeline is doing, as the page says it, and a class for its
 * colour. */
static const char *state_of(const pipeline_metrics_t *pm, const char **cls)
{
    switch (atomic_load_explicit(&pm->state, memory_order_relaxed)) {
    case PIPELINE_STATE_FAILED: *cls = "bad"; return "failed";
    case PIPELINE_STATE_STOPPED: *cls = "idle"; return "stopped";
    case PIPELINE_STATE_STARTING: *cls = "idle"; return "starting";
    default: break;
    }
    if (atomic_load_explicit(&pm->backing_off, memory_order_relaxed)) {
        *cls = "warn";
        return "backing off after a database error";
    }
    if (atomic_load_explicit(&pm->holding_commits, memory_order_relaxed)) {
        *cls = "warn";
        return "holding commits during a rebalance";
    }
    *cls = "ok";
    return "consuming";
}

/* Records per second over the last STATUS_PAGE_CHART_SECONDS, one point
 * per bucket, as an inline SVG polyline. */
static void put_chart(FILE *f, const pipeline_metrics_t *pm, const char *name, int64_t now)
{
    enum { N = STATUS_PAGE_CHART_SECONDS / STATUS_PAGE_CHART_BUCKET_SECONDS };
    uint64_t per_second[STATUS_PAGE_CHART_SECONDS], total = 0;
    double rate[N], max = 0;
    metrics_throughput(pm, now, per_second, STATUS_PAGE_CHART_SECONDS);
    for (int k = 0; k < N; k++) {
        uint64_t sum = 0;
        for (int j = 0; j < STATUS_PAGE_CHART_BUCKET_SECONDS; j++)
            sum += per_second[k * STATUS_PAGE_CHART_BUCKET_SECONDS + j];
        total += sum;
        rate[k] = (double)sum / STATUS_PAGE_CHART_BUCKET_SECONDS;
        if (rate[k] > max) max = rate[k];
    }
    fprintf(f, "<p>Records processed in the last %d minutes: <span id=\"throughput-", STATUS_PAGE_CHART_SECONDS / 60);
    put_text(f, name);
    fprintf(f, "\">%llu</span> (peak %.1f/s over %d s)</p>\n", (unsigned long long)total, max,
            STATUS_PAGE_CHART_BUCKET_SECONDS);
    fprintf(f, "<svg class=\"chart\" viewBox=\"0 0 %d 40\" preserveAspectRatio=\"none\" role=\"img\" "
               "aria-label=\"records per second, last %d minutes\"><polyline points=\"",
            (N - 1) * 4, STATUS_PAGE_CHART_SECONDS / 60);
    for (int k = 0; k < N; k++)
        fprintf(f, "%s%d,%.1f", k ? " " : "", k * 4, max > 0 ? 39.0 - rate[k] / max * 38.0 : 39.0);
    fputs("\"/></svg>\n", f);
}

static void put_pipeline(FILE *f, metrics_t *m, int i, int64_t now)
{
    pipeline_metrics_t *pm = &m->pipelines[i];
    const char *name = pipeline_get(i)->name, *cls;
    const char *state = state_of(pm, &cls);

    fputs("<section id=\"pipeline-", f);
    put_text(f, name);
    fputs("\"><h2>", f);
    put_text(f, name);
    fprintf(f, " <span class=\"state %s\" id=\"state-", cls);
    put_text(f, name);
    fputs("\">", f);
    put_text(f, state);
    fputs("</span></h2>\n<p>Topic <code>", f); /* a list: "a,b" */
    put_text(f, m->settings->topic[i]);
    int64_t owned = atomic_load_explicit(&pm->partitions_owned, memory_order_relaxed);
    fputs("</code>, partitions owned: <span id=\"owned-", f);
    put_text(f, name);
    fprintf(f, "\">%lld</span></p>\n", (long long)(owned < 0 ? 0 : owned));

    /* Committed lag: what a restart would read again. */
    fputs("<table><tr><th>topic</th><th>partition</th><th>committed lag</th></tr>\n", f);
    bool any = false;
    const topic_list_t *topics = &m->settings->topics[i];
    for (int t = 0; t < topics->count; t++)
        for (int p = 0; p < METRICS_MAX_PARTITIONS; p++) {
            int64_t lag = atomic_load_explicit(&pm->committed_lag[t * METRICS_MAX_PARTITIONS + p], memory_order_relaxed);
            if (lag < 0) continue;
            any = true;
            fputs("<tr id=\"lag-", f);
            put_text(f, name);
            fputc('-', f);
            put_text(f, topics->name[t]);
            fprintf(f, "-%d\"><td>", p);
            put_text(f, topics->name[t]);
            fprintf(f, "</td><td>%d</td><td>%lld</td></tr>\n", p, (long long)lag);
        }
    if (!any) fputs("<tr><td colspan=\"3\">no partition owned</td></tr>\n", f);
    fputs("</table>\n", f);

    put_chart(f, pm, name, now);

    fputs("<h3>Unresolved dead letters</h3>\n", f);
    int64_t read_at = atomic_load_explicit(&pm->unresolved_unix_ms, memory_order_acquire);
    if (read_at == 0) {
        fputs("<p>not read from the database yet</p>\n", f);
    } else {
        long long total = 0;
        fputs("<table><tr><th>reason</th><th>count</th></tr>\n", f);
        for (size_t t = 0; t < METRICS_ERROR_TYPES; t++) {
            int64_t n = atomic_load_explicit(&pm->unresolved_dead_letters[t], memory_order_relaxed);
            if (n <= 0) continue;
            total += n;
            fputs("<tr id=\"dl-", f);
            put_text(f, name);
            fputc('-', f);
            put_text(f, metrics_error_type_name(t));
            fputs("\"><td>", f);
            put_text(f, metrics_error_type_name(t));
            fprintf(f, "</td><td>%lld</td></tr>\n", (long long)n);
        }
        fputs("<tr><td>total</td><td id=\"dl-", f);
        put_text(f, name);
        fprintf(f, "-total\">%lld</td></tr></table>\n", total);
        fputs("<p class=\"note\">As of ", f);
        put_time(f, read_at);
        fputs(". List them: <code>storage-consumer dead-letters list --pipeline ", f);
        put_text(f, name);
        fputs("</code></p>\n", f);
    }

    char error[METRICS_LAST_ERROR_LEN];
    int64_t at = metrics_last_error_get(pm, error, sizeof error);
    fputs("<h3>Last error</h3>\n<p id=\"error-", f);
    put_text(f, name);
    fputs("\">", f);
    if (at == 0) {
        fputs("none", f);
    } else {
        fputs("<time>", f);
        put_time(f, at);
        fputs("</time> (", f);
        put_duration(f, now - at);
        fputs(" ago): ", f);
        put_text(f, error);
    }
    fputs("</p>\n</section>\n", f);
}

char *status_page_render(metrics_t *m, int64_t now)
{
    char *page = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&page, &len);
    if (!f) abort();
    fprintf(f,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta http-equiv=\"refresh\" content=\"%d\"><title>storage-consumer status</title>\n"
            "<style>body{font:14px sans-serif;margin:1em 2em;max-width:50em}"
            "table{border-collapse:collapse;margin:.3em 0}td,th{border:1px solid #ccc;padding:2px 8px;"
            "text-align:right}th{background:#eee}.state{padding:1px 6px;border-radius:3px;font-size:80%%}"
            ".ok{background:#cfc}.warn{background:#fe9}.bad{background:#f99}.idle{background:#ddd}"
            ".chart{width:100%%;height:60px;border:1px solid #ccc}polyline{fill:none;stroke:#36c;"
            "stroke-width:1.5}.note{color:#555}section{border-top:1px solid #999;margin-top:1em}"
            "</style></head><body>\n<h1>storage-consumer</h1>\n<p>Version <span id=\"version\">",
            STATUS_PAGE_REFRESH_SECONDS);
    put_text(f, m->version ? m->version : "unknown");
    fputs("</span>, up <span id=\"uptime\">", f);
    put_duration(f, now - m->started_unix_ms);
    fputs("</span>; as of ", f);
    put_time(f, now);
    fprintf(f, " (this page reloads every %d s)</p>\n", STATUS_PAGE_REFRESH_SECONDS);
    for (int i = 0; i < pipeline_count(); i++)
        if (m->settings->pipeline_enabled[i]) put_pipeline(f, m, i, now);
    fputs("</body></html>\n", f);
    if (fclose(f) != 0 || !page) abort();
    return page;
}
