#include "ops/connect.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/clock.h"

db_conn_t *ops_connect(const settings_t *s, const char *command, const char *suffix)
{
    char err[1024];
    db_conn_t *conn = db_connect(s->database_url, s->db_statement_timeout_ms,
                                 clock_now_ms() + settings_db_attempt_ms(s), err, sizeof err);
    if (!conn) {
        char *masked = db_mask_conninfo(s->database_url);
        fprintf(stderr, "storage-consumer: %s: cannot connect to PostgreSQL (%s): %s%s\n", command, masked, err,
                suffix);
        free(masked);
    }
    return conn;
}
