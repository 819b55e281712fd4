/* copy_text — a batch's rows in COPY's text format, the form every write of
 * the store sends them in (DESIGN.md: The batch loop). */
#ifndef STORAGE_COPY_TEXT_H
#define STORAGE_COPY_TEXT_H

#include <stddef.h>

#include "core/batch.h"

/* A growing, NUL-terminated text. */
typedef struct {
    char *data;
    size_t len, cap;
} copy_buf_t;

void copy_buf_add(copy_buf_t *b, const char *s, size_t n);
void copy_buf_str(copy_buf_t *b, const char *s);

/* The COPY text of entry `e`'s row (its application id, then each field's
 * column, in the pipeline's order), appended to `out`. */
void copy_row_text(copy_buf_t *out, const batch_t *b, const entry_t *e);

#endif
