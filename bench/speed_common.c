#include "speed_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double speed_now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double speed_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

int speed_start(const char *name, int argc, char **argv, int *passes, speed_messages_t *m)
{
    memset(m, 0, sizeof *m);
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s FILE [PASSES]\n", name);
        return 2;
    }
    *passes = argc == 3 ? atoi(argv[2]) : 5;
    if (*passes < 1 || *passes > 100) {
        fprintf(stderr, "%s: PASSES must be 1..100\n", name);
        return 2;
    }
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    size_t cap = 0;
    char *line = NULL;
    size_t line_cap = 0;
    ssize_t got;
    while ((got = getline(&line, &line_cap, f)) > 0) {
        char *tab = memchr(line, '\t', (size_t)got);
        if (!tab) continue;
        if (m->n == cap) {
            cap = cap ? cap * 2 : 1024;
            m->msg = realloc(m->msg, cap * sizeof *m->msg);
            m->len = realloc(m->len, cap * sizeof *m->len);
            if (!m->msg || !m->len) abort();
        }
        size_t l = (size_t)got - (size_t)(tab + 1 - line);
        if (l && tab[l] == '\n') l--;
        m->msg[m->n] = strndup(tab + 1, l);
        if (!m->msg[m->n]) abort();
        m->len[m->n++] = l;
    }
    free(line);
    fclose(f);
    if (m->n == 0) {
        fprintf(stderr, "%s: no messages in %s\n", name, argv[1]);
        return 1;
    }
    return 0;
}

void speed_messages_free(speed_messages_t *m)
{
    for (size_t i = 0; i < m->n; i++) free(m->msg[i]);
    free(m->msg);
    free(m->len);
    memset(m, 0, sizeof *m);
}
