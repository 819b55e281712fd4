/* catalog — the target tables as PostgreSQL's catalog describes them, bound
 * to the pipelines' definitions (DESIGN.md: Pipelines are declared). */
#ifndef STORAGE_CATALOG_H
#define STORAGE_CATALOG_H

#include <stdbool.h>
#include <stddef.h>

#include "core/pipeline.h"
#include "pg/db.h"

/* Read table `table`'s columns and UNIQUE indexes into *t (t->exists false
 * when there is no such table). `table` is written as SQL names it, each
 * part quoted (pipeline_def_t.table_sql): exactly that table is read. 0, or -1 with the reason in `err`. Free
 * with catalog_table_free. */
int catalog_read_table(db_conn_t *conn, const char *table, table_facts_t *t, char *err, size_t errlen);

void catalog_table_free(table_facts_t *t);

/* Read pipeline `id`'s table and bind it: 0; 1 when the definition
 * disagrees with the table (`err` names the pipeline, the field and the
 * column); -1 when the catalog cannot be read. */
int catalog_bind_pipeline(db_conn_t *conn, pipeline_id_t id, char *err, size_t errlen);

/* Read and bind the table of every pipeline `enabled` marks (NULL: every
 * pipeline). Returns 0; 1 when a definition disagrees with its table
 * (`err` names the pipeline, the field and the column); -1 when the
 * catalog cannot be read. */
int catalog_bind_pipelines(db_conn_t *conn, const bool *enabled, char *err, size_t errlen);

#endif
