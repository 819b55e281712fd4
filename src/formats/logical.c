#include "formats/logical.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

char *logical_decimal_text(const unsigned char *in, size_t n, int scale)
{
    unsigned char *b = malloc(n ? n : 1);
    if (!b) abort();
    memcpy(b, in, n);
    bool negative = n > 0 && (b[0] & 0x80);
    if (negative) { /* its magnitude: invert and add one */
        for (size_t i = 0; i < n; i++) b[i] = (unsigned char)~b[i];
        for (size_t i = n; i-- > 0;)
            if (++b[i] != 0) break;
    }
    /* Digits, least significant first: divide the magnitude by 10 again and again. */
    size_t cap = n * 3 + 2, d = 0;
    char *digits = malloc(cap);
    if (!digits) abort();
    for (;;) {
        unsigned rem = 0;
        bool zero = true;
        for (size_t i = 0; i < n; i++) {
            unsigned cur = (rem << 8) | b[i];
            b[i] = (unsigned char)(cur / 10);
            rem = cur % 10;
            zero = zero && b[i] == 0;
        }
        digits[d++] = (char)('0' + rem);
        if (zero) break;
    }
    free(b);
    /* Sign, digits, the point `scale` digits from the right (zeros before it
     * as needed), or zeros after them for a negative scale. */
    size_t width = scale > 0 && (size_t)scale >= d ? (size_t)scale + 1 : d;
    size_t size = width + (scale > 0 ? 1 : 0) + (scale < 0 ? (size_t)-scale : 0) + 2;
    char *out = malloc(size), *o = out;
    if (!out) abort();
    bool all_zero = d == 1 && digits[0] == '0';
    if (negative && !all_zero) *o++ = '-';
    for (size_t i = width; i-- > 0;) {
        if (scale > 0 && i + 1 == (size_t)scale) *o++ = '.';
        *o++ = i < d ? digits[i] : '0';
    }
    for (int z = 0; scale < 0 && z < -scale; z++) *o++ = '0';
    *o = '\0';
    free(digits);
    return out;
}

static int too_far(const char *what, int64_t v, char *why, size_t len)
{
    snprintf(why, len, "%s %" PRId64 " is out of range", what, v);
    return -1;
}

/* Year, month and day of `days` since 1970-01-01 in the proleptic
 * Gregorian calendar (the era arithmetic of "chrono-compatible low-level
 * date algorithms", H. Hinnant): no gmtime, no locale, no lock. */
static void civil_from_days(int64_t days, int64_t *y, unsigned *m, unsigned *d)
{
    days += 719468;
    int64_t era = (days >= 0 ? days : days - 146096) / 146097;
    unsigned doe = (unsigned)(days - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = (int64_t)yoe + era * 400 + (*m <= 2);
}

/* `value` as `width` digits at p (value < 10^width). */
static char *digits(char *p, int64_t value, int width)
{
    for (int i = width - 1; i >= 0; i--) {
        p[i] = (char)('0' + value % 10);
        value /= 10;
    }
    return p + width;
}

/* Year, month and day of `secs` since the epoch, years before 1 written
 * as PostgreSQL reads them (year 0 is 1 BC), into buf; *tm for the time. */
static int civil(int64_t secs, struct tm *tm, char *buf, size_t len, const char **bc)
{
    time_t tt = (time_t)secs;
    if (!gmtime_r(&tt, tm)) return -1;
    long year = (long)tm->tm_year + 1900;
    *bc = year <= 0 ? " BC" : "";
    if (year <= 0) year = 1 - year;
    snprintf(buf, len, "%04ld-%02d-%02d", year, tm->tm_mon + 1, tm->tm_mday);
    return 0;
}

int logical_date_text(int64_t days, char *buf, size_t len, char *why, size_t why_len)
{
    /* PostgreSQL's dates: 4713 BC to 5874897 AD. */
    if (days < -2440588 || days > 2145031948) return too_far("a date of days", days, why, why_len);
    struct tm tm;
    const char *bc;
    char day[48];
    if (civil(days * 86400, &tm, day, sizeof day, &bc)) return too_far("a date of days", days, why, why_len);
    snprintf(buf, len, "%s%s", day, bc);
    return 0;
}

static int64_t per_second(int digits) { return digits == 6 ? 1000000 : 1000; }

int logical_time_text(int64_t units, int digits, char *buf, size_t len, char *why, size_t why_len)
{
    int64_t second = per_second(digits);
    if (units < 0 || units >= 86400 * second)
        return too_far(digits == 6 ? "a time of microseconds" : "a time of milliseconds", units, why, why_len);
    int64_t s = units / second;
    snprintf(buf, len, "%02d:%02d:%02d.%0*" PRId64, (int)(s / 3600), (int)(s / 60 % 60), (int)(s % 60), digits,
             units % second);
    return 0;
}

int logical_timestamp_text(int64_t units, int digits_after, int utc, char *buf, size_t len, char *why, size_t why_len)
{
    int64_t second = per_second(digits_after);
    const char *what = digits_after == 6 ? "a timestamp of microseconds" : "a timestamp of milliseconds";
    /* Years 1 to 9999: the ISO 8601 form the decoder reads. */
    if (units < -62135596800LL * second || units > 253402300799LL * second + second - 1)
        return too_far(what, units, why, why_len);
    if (len < 32) return too_far(what, units, why, why_len);
    int64_t secs = units / second - (units % second < 0);
    int64_t frac = units - secs * second;
    int64_t days = secs / 86400 - (secs % 86400 < 0), in_day = secs - days * 86400, year;
    unsigned month, day;
    civil_from_days(days, &year, &month, &day);
    char *p = digits(buf, year, 4);
    *p++ = '-';
    p = digits(p, month, 2);
    *p++ = '-';
    p = digits(p, day, 2);
    *p++ = 'T';
    p = digits(p, in_day / 3600, 2);
    *p++ = ':';
    p = digits(p, in_day / 60 % 60, 2);
    *p++ = ':';
    p = digits(p, in_day % 60, 2);
    *p++ = '.';
    p = digits(p, frac, digits_after);
    if (utc) *p++ = 'Z';
    *p = '\0';
    return 0;
}
