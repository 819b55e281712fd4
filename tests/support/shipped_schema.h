/* shipped_schema — the column facts of the service's own migrations, for the
 * programs that decode without a database (unit tests, the fuzz target, the
 * decoding benchmark): what the catalog says of app_stats, reviews and
 * network_metrics once migrations/ is applied. The integration suites read
 * the real catalog; a test there fails if the two part ways (the pipelines
 * suite decodes every kind of value against the migrated tables). */
#ifndef STORAGE_SHIPPED_SCHEMA_H
#define STORAGE_SHIPPED_SCHEMA_H

#include "core/pipeline.h"

/* Load the built-in definitions and bind them to the shipped tables; aborts
 * if they do not bind. */
void shipped_schema_bind(void);

/* The facts of table `name` ("reviews"), for tests that change them. */
table_facts_t shipped_schema_table(const char *name);

#endif
