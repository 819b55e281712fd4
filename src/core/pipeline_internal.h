/* The pipeline registry's inside, shared by its two halves: reading the
 * definitions (pipeline.c) and binding them to their tables
 * (pipeline_bind.c). Nothing else includes this. */
#ifndef STORAGE_PIPELINE_INTERNAL_H
#define STORAGE_PIPELINE_INTERNAL_H

#include <stdio.h>

#include "core/pipeline.h"

/* The definition of pipeline `id`, writable (the built-in file loaded
 * first if nothing was). */
pipeline_def_t *pipeline_entry(pipeline_id_t id);

/* The field that fills `column`, or NULL. */
const field_spec_t *pipeline_field_by_column(const pipeline_def_t *d, const char *column);

/* `len` bytes of `name` quoted as an SQL identifier, appended to `f`:
 * between double quotes, a double quote doubled (any name PostgreSQL
 * allows, keyword, case and all, is then taken literally). */
void pipeline_quote_name(FILE *f, const char *name, size_t len);

/* Frees the SQL pipeline_bind built for `d` (each pointer left NULL). */
void pipeline_free_sql(pipeline_def_t *d);

#endif
