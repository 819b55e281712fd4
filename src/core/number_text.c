#include "core/number_text.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An exponent is saturated here: far beyond numeric_in's INT_MAX / 2, and
 * far from overflowing once digit counts are added to it. */
#define EXPONENT_SATURATED ((int64_t)1 << 40)
/* numeric_in's limits (PostgreSQL 15): a written exponent below INT_MAX / 2
 * in magnitude; at most 16383 digits after the point (the display scale);
 * a first digit below 10^131072 (a weight of 32767 base-10000 digits). */
#define NUMERIC_EXPONENT_LIMIT (INT_MAX / 2)
#define NUMERIC_DSCALE_MAX 16383
#define NUMERIC_MSD_MAX 131071

/* Where a token's digits are: `whole` digits at s[w..], then `fraction`
 * digits at s[f..]. */
typedef struct {
    const char *s;
    size_t w, f;
    int64_t whole, fraction, exponent;
} token_t;

static void token_read(const char *s, size_t n, token_t *t, bool *negative)
{
    size_t i = 0;
    *negative = n > 0 && s[0] == '-';
    i += *negative;
    t->s = s;
    t->w = i;
    while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    t->whole = (int64_t)(i - t->w);
    t->f = i;
    t->fraction = 0;
    if (i < n && s[i] == '.') {
        t->f = ++i;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
        t->fraction = (int64_t)(i - t->f);
    }
    t->exponent = 0;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        bool minus = ++i < n && s[i] == '-';
        if (i < n && (s[i] == '-' || s[i] == '+')) i++;
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++)
            if (t->exponent < EXPONENT_SATURATED) t->exponent = t->exponent * 10 + (s[i] - '0');
        if (minus) t->exponent = -t->exponent;
    }
}

/* The k-th written digit (whole digits first, then the fraction's). */
static int token_digit(const token_t *t, int64_t k)
{
    return k < t->whole ? t->s[t->w + (size_t)k] - '0' : t->s[t->f + (size_t)(k - t->whole)] - '0';
}

void number_text_read(const char *s, size_t n, number_text_t *out)
{
    token_t t;
    token_read(s, n, &t, &out->negative);
    int64_t digits = t.whole + t.fraction, first = 0, last = digits - 1;
    while (first < digits && token_digit(&t, first) == 0) first++;
    while (last >= first && token_digit(&t, last) == 0) last--;
    out->zero = first == digits;
    out->exponent = t.exponent;
    out->fraction = t.fraction;
    /* The digit written k-th stands for 10^(whole - 1 - k + exponent). */
    out->msd = t.whole - 1 - first + t.exponent;
    out->q = t.whole - 1 - last + t.exponent;
}

number_fit_t number_text_numeric_fit(const number_text_t *x, int precision, int scale)
{
    if (x->exponent >= NUMERIC_EXPONENT_LIMIT || x->exponent <= -NUMERIC_EXPONENT_LIMIT)
        return NUMBER_OVERFLOWS_NUMERIC;
    /* The display scale as written (trailing zeros count), before any
     * typmod rounds it: refused for every NUMERIC, constrained or not. */
    if (x->fraction - x->exponent > NUMERIC_DSCALE_MAX) return NUMBER_OVERFLOWS_NUMERIC;
    if (precision < 0) return !x->zero && x->msd > NUMERIC_MSD_MAX ? NUMBER_OVERFLOWS_NUMERIC : NUMBER_FITS;
    if (x->zero) return NUMBER_FITS;
    if (x->q < -(int64_t)scale) return NUMBER_MORE_DECIMALS;
    if (x->msd >= (int64_t)precision - scale) return NUMBER_BEYOND_PRECISION;
    return NUMBER_FITS;
}

int number_text_float(const char *s, size_t n, bool single, double *out)
{
    char small[64], *copy = n < sizeof small ? small : malloc(n + 1);
    if (!copy) abort();
    memcpy(copy, s, n);
    copy[n] = '\0';
    errno = 0;
    double v = single ? (double)strtof(copy, NULL) : strtod(copy, NULL);
    int range = errno;
    if (copy != small) free(copy);
    *out = v;
    /* float4in and float8in: ERANGE is an error only when the value became
     * zero or infinite (a subnormal result is kept). */
    return range == ERANGE && (v == 0.0 || isinf(v)) ? -1 : 0;
}

/* The sign of |x| - |y| for two nonzero tokens. */
static int compare_magnitudes(const token_t *x, const number_text_t *nx, const token_t *y, const number_text_t *ny)
{
    if (nx->msd != ny->msd) return nx->msd > ny->msd ? 1 : -1;
    int64_t low = nx->q < ny->q ? nx->q : ny->q;
    for (int64_t power = nx->msd; power >= low; power--) {
        /* The digit for 10^power: written k-th where power = whole - 1 - k + exponent. */
        int64_t kx = x->whole - 1 + x->exponent - power, ky = y->whole - 1 + y->exponent - power;
        int dx = kx >= 0 && kx < x->whole + x->fraction ? token_digit(x, kx) : 0;
        int dy = ky >= 0 && ky < y->whole + y->fraction ? token_digit(y, ky) : 0;
        if (dx != dy) return dx > dy ? 1 : -1;
    }
    return 0;
}

int number_text_compare(const number_text_t *x, const char *s, size_t n, double b)
{
    int sx = x->zero ? 0 : x->negative ? -1 : 1;
    if (b == 0.0) return sx;
    /* Rounding is monotonic: a double above or below b says so of x. */
    double d;
    (void)number_text_float(s, n, false, &d);
    if (d != b) return d > b ? 1 : -1;
    /* The same double: compare with b's exact decimal expansion (a double
     * has at most 767 significant digits). */
    char exact[840];
    int len = snprintf(exact, sizeof exact, "%.800e", b);
    number_text_t nb;
    token_t tx, tb;
    bool neg;
    number_text_read(exact, (size_t)len, &nb);
    int sb = nb.negative ? -1 : 1;
    if (sx != sb) return sx > sb ? 1 : -1;
    token_read(s, n, &tx, &neg);
    token_read(exact, (size_t)len, &tb, &neg);
    return sx * compare_magnitudes(&tx, x, &tb, &nb);
}
