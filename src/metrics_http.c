#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "metrics.h"
#include "status_page.h"

static enum MHD_Result serve(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                             const char *version, const char *upload_data, size_t *upload_size,
                             void **req_cls)
{
    metrics_t *m = cls;
    struct MHD_Response *resp;
    enum MHD_Result rc;
    unsigned status = MHD_HTTP_OK;
    (void)version, (void)upload_data, (void)upload_size, (void)req_cls;

    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        static const char msg[] = "only GET and HEAD\n";
        resp = MHD_create_response_from_buffer(sizeof msg - 1, (void *)msg, MHD_RESPMEM_PERSISTENT);
        status = MHD_HTTP_METHOD_NOT_ALLOWED;
    } else if (strcmp(url, "/healthz") == 0 || strcmp(url, "/readyz") == 0) {
        /* DESIGN.md: Probes and metrics: judged from what the pipelines
         * recorded, never by opening a connection per request. */
        char *text;
        bool ok = metrics_probe(m, url[1] == 'h' ? PROBE_LIVENESS : PROBE_READINESS, metrics_now_unix_ms(), &text);
        resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
        MHD_add_response_header(resp, "Content-Type", "text/plain; charset=utf-8");
        MHD_add_response_header(resp, "Cache-Control", "no-store");
        status = ok ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE;
    } else if (strcmp(url, "/") == 0) {
        /* DESIGN.md: Status page: from the same recorded state. */
        char *text = status_page_render(m, metrics_now_unix_ms());
        resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
        MHD_add_response_header(resp, "Content-Type", "text/html; charset=utf-8");
        MHD_add_response_header(resp, "Cache-Control", "no-store");
    } else if (strcmp(url, "/metrics") != 0) {
        static const char msg[] = "not found: the paths are /, /metrics, /healthz and /readyz\n";
        resp = MHD_create_response_from_buffer(sizeof msg - 1, (void *)msg, MHD_RESPMEM_PERSISTENT);
        status = MHD_HTTP_NOT_FOUND;
    } else {
        char *text = metrics_render(m);
        resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
        MHD_add_response_header(resp, "Content-Type", "text/plain; version=0.0.4");
    }
    rc = MHD_queue_response(conn, status, resp);
    MHD_destroy_response(resp);
    return rc;
}

int metrics_http_start(metrics_t *m, const char *addr, char *err, size_t errlen)
{
    char host[256];
    const char *colon = strrchr(addr, ':');
    snprintf(host, sizeof host, "%.*s", (int)(colon - addr), addr);
    /* [::1]:9100 */
    char *h = host;
    if (h[0] == '[' && h[strlen(h) - 1] == ']') {
        h[strlen(h) - 1] = '\0';
        h++;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *ai = NULL;
    int gai = getaddrinfo(h, colon + 1, &hints, &ai);
    if (gai != 0) {
        snprintf(err, errlen, "STORAGE_METRICS_ADDR=%s: %s", addr, gai_strerror(gai));
        return -1;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    m->daemon = MHD_start_daemon(flags, 0, NULL, NULL, serve, m, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                                 MHD_OPTION_CONNECTION_LIMIT, 16U, MHD_OPTION_CONNECTION_TIMEOUT, 10U,
                                 MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!m->daemon) {
        snprintf(err, errlen, "STORAGE_METRICS_ADDR=%s: cannot listen (address in use or not local?)", addr);
        return -1;
    }
    return 0;
}

void metrics_http_stop(metrics_t *m)
{
    if (m->daemon) MHD_stop_daemon(m->daemon);
    m->daemon = NULL;
}
