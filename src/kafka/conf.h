/* conf — the one librdkafka configuration of every handle the service
 * makes: the pipelines' consumers, the operator commands' clients and the
 * replay's membership all reach the cluster and the group alike (their
 * group, the built-in settings, the STORAGE_RDKAFKA_ pass-through). */
#ifndef STORAGE_KAFKA_CONF_H
#define STORAGE_KAFKA_CONF_H

#include <stddef.h>

#include "settings.h"

/* Validate the librdkafka pass-through properties without connecting.
 * Returns 0, or -1 naming the STORAGE_RDKAFKA_ variable at fault. */
int kafka_conf_check(const settings_t *s, char *err, size_t errlen);

#endif
