/* connect — how an operator command reaches PostgreSQL (DESIGN.md:
 * Operations): with the service's settings, within one database attempt, and
 * a refusal that names the server without its password. */
#ifndef STORAGE_OPS_CONNECT_H
#define STORAGE_OPS_CONNECT_H

#include "pg/db.h"
#include "settings.h"

/* A connection the caller closes, or NULL after printing on stderr
 * "storage-consumer: COMMAND: cannot connect to PostgreSQL (CONNINFO,
 * masked): REASON" followed by `suffix` (what that means for the command;
 * "" for nothing). */
db_conn_t *ops_connect(const settings_t *s, const char *command, const char *suffix);

#endif
