/* verify — what the files of `storage-consumer verify` share (DESIGN.md:
 * Operations): a stage's verdict and how it is reported, and the enabled
 * pipelines as the stages see them. ops/verify.c holds the command and the
 * schema, topics, messages, rows and dead-letters stages;
 * ops/verify_positions.c the positions and lag stages; ops/verify_stage.c
 * the report every stage writes to. Calls go one way: verify.c calls the
 * stages of verify_positions.c, both call verify_stage.c. The command itself
 * is ops_verify (ops/ops.h). */
#ifndef STORAGE_OPS_VERIFY_H
#define STORAGE_OPS_VERIFY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kafka/cluster.h"
#include "pg/db.h"
#include "settings.h"

#define VERIFY_KAFKA_TIMEOUT_MS 10000
#define VERIFY_DETAIL_MAX 4096

typedef enum { STAGE_OK = 0, STAGE_WARN, STAGE_BROKEN, STAGE_SKIP } stage_status_t;

/* One stage's verdict, built up while it checks. */
typedef struct {
    stage_status_t status;
    char detail[VERIFY_DETAIL_MAX];
    size_t len;
    json_t *parts; /* each stage_add's text, for --json (NULL: none yet) */
    json_t *data;  /* the stage's numbers, for --json (NULL: none) */
} stage_t;

/* One topic of an enabled pipeline as the stages see it. */
typedef struct {
    bool enabled;
    const pipeline_def_t *def;
    const char *topic;
    bool first_of_pipeline; /* the pipeline's first topic: its table is counted here */
    char group[512];
    cluster_client_t *client; /* never joins the group; NULL if it could not be created */
    int exists;          /* 1 the topic exists, 0 it does not, -1 not known */
    cluster_topic_t info;
    int64_t *lo, *hi;    /* watermarks per partition (-1: unknown); NULL before the messages stage */
    /* The positions stage's reads: Kafka's committed offsets (NULL: not
     * read) and the database's positions (-1: no row; NULL: not read). */
    cluster_offset_t *kafka;
    int64_t *db;
} target_t;

typedef struct {
    const settings_t *s;
    db_conn_t *conn; /* NULL: the database is unreachable, see db_error */
    char db_error[1024];
    target_t t[PIPELINE_MAX * PIPELINE_MAX_TOPICS];
    int nt;
    long long max_lag; /* -1: lag alone never breaks the lag stage */
    const char *first_broken;
    char warned[256];
    json_t *stages; /* --json: the stages' objects; NULL: print lines */
} verify_t;
/* ---- verify_stage.c: a stage's report ------------------------------------ */

/* Append one part to the stage's detail, "; "-separated. Truncates, never
 * overflows. */
__attribute__((format(printf, 2, 3))) void stage_add(stage_t *st, const char *fmt, ...);

/* Raise the stage's status to `status`; skip only stands when nothing else
 * was said. */
void stage_raise(stage_t *st, stage_status_t status);

/* Print the stage's line (--json: keep its object) and remember the first
 * broken stage. */
void stage_finish(verify_t *v, const char *name, stage_t *st);

/* The first line of a server message, cut in place. */
const char *first_line(char *err);

/* ---- verify_positions.c: the positions and lag stages ------------------- */

/* The positions stage; reads what the lag stage needs (target_t's kafka
 * and db). Runs after the messages stage. */
void check_positions(verify_t *v);

/* The lag stage; runs after the positions stage. */
void check_lag(verify_t *v);

#endif
