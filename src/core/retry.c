#include "core/retry.h"

#include <string.h>

error_class_t retry_classify(const char *sqlstate, bool connection_bad)
{
    /* The server sends a SQLSTATE with every error it reports. None means
     * libpq's own error: the server closed the connection (an immediate
     * restart), even while PQstatus still says OK. Retries are bounded. */
    if (!sqlstate || !*sqlstate) return ERROR_CLASS_TRANSIENT;
    if (strcmp(sqlstate, RETRY_SQLSTATE_FENCED) == 0) return ERROR_CLASS_FENCED;
    /* Class 08: connection exceptions. Class 53: insufficient resources (too
     * many connections, disk full, out of memory) pass once the operator or
     * the server frees them. */
    if (strncmp(sqlstate, "08", 2) == 0 || strncmp(sqlstate, "53", 2) == 0)
        return ERROR_CLASS_TRANSIENT;
    static const char *const transient[] = {
        "57P01", /* admin_shutdown: server restart or pg_terminate_backend */
        "57P02", /* crash_shutdown */
        "57P03", /* cannot_connect_now: starting up */
        "40001", /* serialization_failure */
        "40P01", /* deadlock_detected */
        "57014", /* query_canceled: statement timeout */
        "25006", /* read_only_sql_transaction: a standby after a failover */
    };
    for (size_t i = 0; i < sizeof transient / sizeof transient[0]; i++)
        if (strcmp(sqlstate, transient[i]) == 0) return ERROR_CLASS_TRANSIENT;
    /* Class 22 (data exception), 23 (integrity constraint: the natural
     * key's and any other rule of the table's own), 54000 (a value past a
     * limit, as a key too long for its btree index), 54001 (statement too
     * complex, e.g. deep jsonb), 21000 (an ON CONFLICT DO UPDATE that would
     * affect a row twice: two rows of the batch the key equates) and class
     * P0 (an exception a user's PL/pgSQL trigger raises, P0001 by default)
     * are caused by records, not by the database: isolating them keeps the
     * partition moving, where a fatal error would meet the same batch after
     * every restart (DESIGN.md: Errors). */
    if (strncmp(sqlstate, "22", 2) == 0 || strncmp(sqlstate, "23", 2) == 0 || strncmp(sqlstate, "P0", 2) == 0 ||
        strcmp(sqlstate, "54000") == 0 || strcmp(sqlstate, "54001") == 0 || strcmp(sqlstate, "21000") == 0)
        return ERROR_CLASS_DATA;
    if (connection_bad) return ERROR_CLASS_TRANSIENT;
    return ERROR_CLASS_FATAL;
}

long retry_backoff_ms(int attempt, long base_ms)
{
    long d = base_ms;
    for (int i = 1; i < attempt && d < 3600000L; i++) d *= 2;
    return d;
}

const char *retry_class_name(error_class_t cls)
{
    switch (cls) {
    case ERROR_CLASS_TRANSIENT: return "transient";
    case ERROR_CLASS_DATA: return "data";
    case ERROR_CLASS_FATAL: return "fatal";
    case ERROR_CLASS_FENCED: return "fenced";
    }
    return "unknown";
}

const char *retry_sqlstate_of(const char *err, char state[6])
{
    for (int i = 0; i < 5; i++)
        if (!((err[i] >= '0' && err[i] <= '9') || (err[i] >= 'A' && err[i] <= 'Z'))) return NULL;
    if (err[5] != ':' || err[6] != ' ') return NULL;
    memcpy(state, err, 5);
    state[5] = '\0';
    return state;
}
