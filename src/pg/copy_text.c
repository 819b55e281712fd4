#include "pg/copy_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void reserve(copy_buf_t *b, size_t extra)
{
    if (b->len + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra + 1) cap *= 2;
    b->data = realloc(b->data, cap);
    if (!b->data) abort();
    b->cap = cap;
}

void copy_buf_add(copy_buf_t *b, const char *s, size_t n)
{
    reserve(b, n);
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void copy_buf_str(copy_buf_t *b, const char *s) { copy_buf_add(b, s, strlen(s)); }

/* COPY text format: backslash, tab, newline and carriage return escaped.
 * Runs without them (most texts are one run) are copied whole: this runs
 * for every column of every row. */
static void copy_escape(copy_buf_t *b, const char *s)
{
    for (;;) {
        size_t run = strcspn(s, "\\\t\n\r");
        reserve(b, run + 2);
        memcpy(b->data + b->len, s, run);
        b->len += run;
        s += run;
        if (!*s) break;
        b->data[b->len++] = '\\';
        b->data[b->len++] = *s == '\\' ? '\\' : *s == '\t' ? 't' : *s == '\n' ? 'n' : 'r';
        s++;
    }
    b->data[b->len] = '\0';
}

void copy_row_text(copy_buf_t *out, const batch_t *b, const entry_t *e)
{
    char num[24];
    if (b->def->app_column) {
        snprintf(num, sizeof num, "%lld", (long long)e->application_id);
        copy_buf_str(out, num);
    }
    for (size_t c = 0; c < b->def->field_count; c++) {
        const char *v = event_column(&e->event, c);
        if (c || b->def->app_column) copy_buf_add(out, "\t", 1);
        if (v) copy_escape(out, v);
        else copy_buf_add(out, "\\N", 2);
    }
    copy_buf_add(out, "\n", 1);
}
