/* libFuzzer target: every byte string through every pipeline's decoder.
 * Under ASan+UBSan a crash, a leak or undefined behaviour is a finding; so
 * is an accepted record whose columns break the decoder's own promises (a
 * NUL-free text for every column, a package name of 1..255 characters), a
 * rejection whose detail is not valid UTF-8 (error_detail is TEXT: a dead
 * letter PostgreSQL refuses stops the pipeline), and any difference between
 * the decoder and its reference reader alone: the same outcome, error_type,
 * detail and column texts (DESIGN.md: Two parsers, one outcome).
 * Every crash found becomes a regression test in tests/unit/test_decode.c. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/decode.h"
#include "shipped_schema.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The shipped pipelines, bound to the shipped tables' columns. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    shipped_schema_bind();
    return 0;
}

/* The reference reader's outcome must be the decoder's, to the byte. */
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
    for (int p = 0; p < pipeline_count(); p++) {
        const pipeline_def_t *def = pipeline_get(p);
        rejection_t rej;
        int rc = decode_record(def, data, size, &ev, &rej);
        if (rc == 0) {
            size_t n = strlen(event_package_name(&ev));
            if (n == 0 || n > 255 * 4) abort();
            for (size_t i = 0; i < def->field_count; i++) {
                const char *c = event_column(&ev, i);
                if (def->fields[i].required && !c) abort();
            }
        } else {
            char repaired[sizeof rej.detail];
            if (!rej.error_type || !rej.detail[0]) abort();
            memcpy(repaired, rej.detail, sizeof repaired);
            decode_repair_utf8(repaired);
            if (strcmp(repaired, rej.detail) != 0) abort();
        }
        check_against_reference(def, data, size, rc, &ev, &rej);
    }
    return 0;
}
