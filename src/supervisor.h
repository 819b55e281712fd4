/* supervisor — one thread per pipeline, signals, heartbeats, exit code
 * (DESIGN.md: Supervisor, health, shutdown).
 *
 * A half-alive process is a dead process: if any pipeline fails, all stop
 * and the process exits 1 so the orchestrator restarts it. On SIGTERM or
 * SIGINT each pipeline finishes and commits its in-flight batch, closes its
 * consumer (leaving the group, so the broker rebalances at once) and the
 * process exits 0 — or 1 if that takes longer than the shutdown timeout.
 * Every pipeline that stops (or never started) marks its heartbeat file
 * stopped, so `health` reports a stopped process at once. */
#ifndef STORAGE_SUPERVISOR_H
#define STORAGE_SUPERVISOR_H

#include "settings.h"

/* Run the enabled pipelines until a signal or a failure. Returns the exit
 * code: 0 clean stop, 1 a pipeline failed or the shutdown timed out.
 * `version` is the service's, for storage_consumer_build_info. */
int supervisor_run(const settings_t *s, const char *version);

/* `storage-consumer health`: 0 if every enabled pipeline's heartbeat file is
 * younger than the health max age and does not say the pipeline stopped,
 * else 1. Prints one line per pipeline. */
int supervisor_health(const settings_t *s);

#endif
