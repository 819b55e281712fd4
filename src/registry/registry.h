/* registry — the schema registry's client (DESIGN.md: Formats): the
 * writer's schemas by id, over the registry's REST API with libcurl, kept
 * in a bounded cache (an id's schema never changes). The endpoints used are
 * those Confluent Schema Registry, Karapace, Redpanda's registry and
 * Apicurio's compatible API all serve:
 *   GET /schemas/ids/{id}                   the decoder's schemas
 *   GET /subjects/{subject}/versions/latest verify: a subject's latest
 *   GET /subjects                           verify: reachable, credentials taken
 * One client per thread: it holds one connection and its own cache. */
#ifndef STORAGE_REGISTRY_H
#define STORAGE_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/pipeline.h"
#include "formats/schemas.h"
#include "metrics.h"
#include "settings.h"

typedef struct registry registry_t;

/* A client of the registry at s->registry_url (which must be set); its
 * requests are counted in `pm` (NULL: nowhere). */
registry_t *registry_new(const settings_t *s, pipeline_metrics_t *pm);
void registry_free(registry_t *r);

/* The decoder's view of the client (valid while the client lives). */
const schema_source_t *registry_source(registry_t *r);

/* GET `path` (below the URL; "/subjects"), into a new string *body (the
 * caller frees it) and *status. Returns 0 when an HTTP answer came, or -1
 * with why[len] (unreachable, timed out, TLS refused). */
int registry_get(registry_t *r, const char *path, char **body, long *status, char *why, size_t len);

/* How a definition stands against its subject's latest schema: one
 * call of say() per finding, at level REGISTRY_OK, _WARN or _BROKEN. */
enum { REGISTRY_OK = 0, REGISTRY_WARN, REGISTRY_BROKEN };
typedef void (*registry_say_t)(void *ctx, int level, const char *text);

/* Whether the registry answers with the configured credentials (GET
 * /subjects): 0, or -1 with why[len]. */
int registry_reachable(registry_t *r, char *why, size_t len);

/* Compare pipeline def's value fields with the latest schema of subject
 * "<topic>-value" (the default naming strategy): each field's path must
 * exist in it, a required one's or the definition is broken (a warning
 * for an optional one). Returns the worst level said. */
int registry_compare(registry_t *r, const pipeline_def_t *def, const char *topic, registry_say_t say, void *ctx);

#endif
