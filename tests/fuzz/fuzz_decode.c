/* libFuzzer target: every byte string through every pipeline's decoder.
 * Under ASan+UBSan a crash, a leak or undefined behaviour is a finding; so
 * is an accepted record whose columns break the decoder's own promises (a
 * NUL-free text for every column, a package name of 1..255 characters), a
 * rejection whose detail is not valid UTF-8 (error_detail is TEXT: a dead
 * letter PostgreSQL refuses stops the pipeline), and any difference between
 * the decoder and its reference reader alone: the same outcome, error_type,
 * detail and column texts (DESIGN.md: Two parsers, one outcome). The
 * app-stats pipeline is also bound to other column types, so its members
 * meet every kind of field the decoder has.
 * Every crash found becomes a regression test in tests/unit/test_decode.c. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/decode.h"
#include "shipped_schema.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* app_stats with other column types, so every input also meets the
 * decoder's other kinds: numbers as sent (unconstrained NUMERIC, REAL),
 * json, CHAR(n), and arrays PostgreSQL judges. */
static column_fact_t alt_columns[32];
static table_facts_t alt_app_stats, app_stats;

static void alter(const char *name, column_type_t kind, const char *type, int length)
{
    for (size_t i = 0; i < alt_app_stats.column_count; i++) {
        column_fact_t *c = &alt_columns[i];
        if (strcmp(c->name, name) != 0) continue;
        c->kind = kind;
        snprintf(c->type, sizeof c->type, "%s", type);
        c->length = length;
        c->precision = c->scale = -1;
    }
}

/* The shipped pipelines, bound to the shipped tables' columns. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    shipped_schema_bind();
    app_stats = shipped_schema_table("app_stats");
    alt_app_stats = app_stats;
    memcpy(alt_columns, app_stats.columns, app_stats.column_count * sizeof *alt_columns);
    alt_app_stats.columns = alt_columns;
    alter("price", COLUMN_NUMERIC, "numeric", -1);
    alter("score", COLUMN_FLOAT4, "real", -1);
    alter("title", COLUMN_JSON, "json", -1);
    alter("version", COLUMN_CHAR, "character(8)", 8);
    alter("is_free", COLUMN_JSON_ARRAY, "jsonb[]", -1);
    alter("app_updated_at", COLUMN_TEXT_ARRAY, "date[]", -1);
    return 0;
}

static void bind_app_stats(const table_facts_t *t)
{
    char err[512];
    if (pipeline_bind(PIPELINE_APP_STATS, t, err, sizeof err)) {
        fprintf(stderr, "fuzz_decode: %s\n", err);
        abort();
    }
}

/* The reference reader's outcome must be the decoder's, to the byte. */
static void check_against_reference(const pipeline_def_t *def, const uint8_t *data, size_t size,
                                    int rc, const event_t *ev, const rejection_t *rej);

static void check_one(const pipeline_def_t *def, const uint8_t *data, size_t size, event_t *ev)
{
    rejection_t rej;
    int rc = decode_record(def, data, size, ev, &rej);
    if (rc == 0) {
        size_t n = strlen(event_package_name(ev));
        if (n == 0 || n > 255 * 4) abort();
        for (size_t i = 0; i < def->field_count; i++) {
            const char *c = event_column(ev, i);
            if (def->fields[i].required && !c) abort();
        }
    } else {
        char repaired[sizeof rej.detail];
        if (!rej.error_type || !rej.detail[0]) abort();
        memcpy(repaired, rej.detail, sizeof repaired);
        decode_repair_utf8(repaired);
        if (strcmp(repaired, rej.detail) != 0) abort();
    }
    check_against_reference(def, data, size, rc, ev, &rej);
}

static void check_against_reference(const pipeline_def_t *def, const uint8_t *data, size_t size,
                                    int rc, const event_t *ev, const rejection_t *rej)
{
    static event_t ref_ev;
    rejection_t ref_rej;
    int ref_rc = decode_record_reference(def, data, size, &ref_ev, &ref_rej);
    if (ref_rc != rc) abort();
    if (rc != 0) {
        if (strcmp(ref_rej.error_type, rej->error_type) != 0) abort();
        if (strcmp(ref_rej.detail, rej->detail) != 0) abort();
        return;
    }
    if (!event_equal(def, &ref_ev, ev)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static event_t ev;
    for (int p = 0; p < pipeline_count(); p++) check_one(pipeline_get(p), data, size, &ev);
    bind_app_stats(&alt_app_stats);
    check_one(pipeline_get(PIPELINE_APP_STATS), data, size, &ev);
    bind_app_stats(&app_stats);
    return 0;
}
