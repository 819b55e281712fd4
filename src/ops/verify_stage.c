/* verify_stage — how a stage of `storage-consumer verify` is reported
 * (DESIGN.md: Operations): its detail built up part by part, its status
 * raised, its line printed (or its JSON object kept). The stages call it;
 * it calls none of them. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/print.h"
#include "ops/verify.h"

/* Append one part to the stage's detail, "; "-separated. Truncates, never
 * overflows. */
__attribute__((format(printf, 2, 3))) void stage_add(stage_t *st, const char *fmt, ...)
{
    size_t room = sizeof st->detail - st->len;
    if (room <= 1) return;
    if (st->len > 0) {
        int n = snprintf(st->detail + st->len, room, "; ");
        st->len += (size_t)n < room ? (size_t)n : room - 1;
        room = sizeof st->detail - st->len;
        if (room <= 1) return;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(st->detail + st->len, room, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    size_t added = (size_t)n < room ? (size_t)n : room - 1;
    if (!st->parts) st->parts = json_array();
    json_array_append_new(st->parts, print_json_text(st->detail + st->len, added));
    st->len += added;
}

void stage_raise(stage_t *st, stage_status_t status)
{
    /* skip only stands when nothing else was said. */
    if (st->status == STAGE_SKIP) st->status = status;
    else if (status != STAGE_SKIP && status > st->status) st->status = status;
}

/* Print the stage's line and remember the first broken stage. */
void stage_finish(verify_t *v, const char *name, stage_t *st)
{
    static const char *const word[] = {"ok", "warn", "BROKEN", "skip"};
    static const char *const json_word[] = {"ok", "warn", "broken", "skip"};
    if (v->stages) {
        json_t *stage = json_pack("{s:s, s:s, s:o}", "name", name, "status", json_word[st->status], "details",
                                  st->parts ? st->parts : json_array());
        if (st->data) json_object_set_new(stage, "data", st->data);
        json_array_append_new(v->stages, stage);
    } else {
        /* One line per stage, safe for a terminal: text from the database
         * (an error_detail, a server message) is escaped (ops/print.h). */
        char *detail = print_escape(st->len ? st->detail : "-");
        printf("%-13s %-6s %s\n", name, word[st->status], detail);
        free(detail);
        fflush(stdout);
        json_decref(st->parts);
        json_decref(st->data);
    }
    st->parts = st->data = NULL;
    if (st->status == STAGE_BROKEN && !v->first_broken) v->first_broken = name;
    if (st->status == STAGE_WARN) {
        size_t n = strlen(v->warned);
        snprintf(v->warned + n, sizeof v->warned - n, "%s%s", n ? ", " : "", name);
    }
}

/* The first line of a server message: the rest (LINE 1: ..., a caret) does
 * not fit a one-line report. */
const char *first_line(char *err)
{
    err[strcspn(err, "\n")] = '\0';
    return err;
}
