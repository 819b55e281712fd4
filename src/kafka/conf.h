/* conf — the one librdkafka configuration of every handle the service
 * makes: the pipelines' consumers, the operator commands' clients and the
 * replay's membership all reach the cluster and the group alike (their
 * group, the built-in settings, the STORAGE_RDKAFKA_ pass-through). */
#ifndef STORAGE_KAFKA_CONF_H
#define STORAGE_KAFKA_CONF_H

#include <stddef.h>

#include "settings.h"

/* Validate the librdkafka configuration of every enabled pipeline without
 * connecting: every rd_kafka_conf_set, built-in and STORAGE_RDKAFKA_, then
 * a trial client that reaches no broker (what only creating a client
 * checks: contradictions, unreadable files). Returns 0, or -1 naming the
 * variable at fault, never a secret's value (DESIGN.md: Settings catalog). */
int kafka_conf_check(const settings_t *s, char *err, size_t errlen);

/* librdkafka's version as loaded at run time, e.g. "2.0.2". */
const char *kafka_library_version(void);

#endif
