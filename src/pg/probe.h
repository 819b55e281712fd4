/* probe — which rows of a batch the table already holds, asked before the
 * batch is written (DESIGN.md: The write path). Versions only move forward:
 * a row stored at the incoming version or a newer one (for a pipeline
 * without a version, stored at all) is what the guarded upsert would skip,
 * so the batch need not send it. */
#ifndef STORAGE_PROBE_H
#define STORAGE_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/batch.h"
#include "core/retry.h"
#include "pg/db.h"

/* Ask, with the pipeline's probe (pipeline_def_t.probe_sql), which of the
 * events pending[0..n) of `b` are stored, without waiting for the answer
 * (probe_collect takes it): the worker decodes the next batch meanwhile
 * (DESIGN.md: The batch loop). One statement prepared in the session
 * (first, when *prepared is false: a new session, waited for; *prepared is
 * then set), sent by `deadline_ms`. Returns 0, or -1 with `err` and *cls
 * set. */
int probe_send(db_conn_t *conn, bool *prepared, int64_t deadline_ms, const batch_t *b, const size_t *pending,
               size_t n, char *err, size_t errlen, error_class_t *cls);

/* The answer to probe_send for the same pending[0..n), by `deadline_ms`:
 * marks each event found stored[i] (i its entry's index). Returns how many
 * were found, or -1 with `err` and *cls set. */
long probe_collect(db_conn_t *conn, int64_t deadline_ms, const size_t *pending, size_t n, bool *stored, char *err,
                   size_t errlen, error_class_t *cls);

#endif
