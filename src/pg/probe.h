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
 * events pending[0..n) of `b` are stored; mark each found stored[i] (i its
 * entry's index). One query, by `deadline_ms`, of a statement prepared in
 * the session (first, when *prepared is false: a new session; *prepared is
 * then set). Returns how many were found, or -1 with `err` and *cls set. */
long probe_stored(db_conn_t *conn, bool *prepared, int64_t deadline_ms, const batch_t *b, const size_t *pending,
                  size_t n, bool *stored, char *err, size_t errlen, error_class_t *cls);

#endif
