/* number_text — a JSON number's text read by PostgreSQL's own input rules
 * (DESIGN.md: Pipelines are declared).
 *
 * A number reaches PostgreSQL as the text its producer sent, never through
 * a double: NUMERIC keeps every digit of its input. What PostgreSQL 15 would
 * answer is decided here on that text: numeric_in's limits and, for
 * NUMERIC(p,s), that the value fits without being rounded; float4in's and
 * float8in's refusal of a value that overflows or underflows to zero. */
#ifndef STORAGE_NUMBER_TEXT_H
#define STORAGE_NUMBER_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The decimal facts of a valid JSON number token: its value is
 * ±digits × 10^q with no trailing zero in the digits. */
typedef struct {
    bool negative, zero;
    int64_t exponent;  /* as written after e/E (saturated far beyond any limit) */
    int64_t fraction;  /* digits written after the point */
    int64_t q;         /* the last nonzero digit's power of ten */
    int64_t msd;       /* the first nonzero digit's: 10^msd <= |value| < 10^(msd+1) */
} number_text_t;

/* Read the token s[0..n) (the JSON grammar: -?int(.frac)?([eE][+-]?exp)?). */
void number_text_read(const char *s, size_t n, number_text_t *out);

typedef enum {
    NUMBER_FITS = 0,
    NUMBER_OVERFLOWS_NUMERIC, /* numeric_in: "value overflows numeric format" */
    NUMBER_BEYOND_PRECISION,  /* NUMERIC(p,s): |value| >= 10^(p-s) */
    NUMBER_MORE_DECIMALS      /* NUMERIC(p,s): more than s decimals, PostgreSQL would round */
} number_fit_t;

/* Whether NUMERIC (precision < 0: unconstrained) or NUMERIC(precision,
 * scale) takes the number as it is: PostgreSQL accepts it and stores that
 * very number (a value it would round to the scale does not fit). */
number_fit_t number_text_numeric_fit(const number_text_t *x, int precision, int scale);

/* The double (single: the float) PostgreSQL's float8in (float4in) reads
 * from s[0..n); returns -1 when it refuses the text as out of range (an
 * overflow, or a nonzero value that underflows to zero). */
int number_text_float(const char *s, size_t n, bool single, double *out);

/* The sign of (number - b), exactly: s[0..n) is the token x was read from. */
int number_text_compare(const number_text_t *x, const char *s, size_t n, double b);

#endif
