#include "core/timestamp.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define USEC_PER_SEC INT64_C(1000000)
#define SEC_PER_DAY INT64_C(86400)

static const char *const month_names[] = {"January", "February", "March",     "April",
                                          "May",     "June",     "July",      "August",
                                          "September", "October", "November", "December"};

/* Howard Hinnant's days_from_civil: exact for the whole proleptic Gregorian
 * calendar, no tables, no time zone database. */
int64_t timestamp_days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const unsigned yoe = (unsigned)(y - era * 400);
    const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
    z += 719468;
    const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    const unsigned doe = (unsigned)(z - era * 146097);
    const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const unsigned mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = (int64_t)yoe + era * 400 + (*m <= 2);
}

static bool is_leap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

static unsigned days_in_month(int64_t y, unsigned m)
{
    static const unsigned days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap(y) ? 29 : days[m - 1];
}

/* Read exactly n digits at s[*pos]; returns -1 if any is not a digit. */
static int read_digits(const char *s, size_t len, size_t *pos, int n, int *out)
{
    int v = 0;
    if (*pos + (size_t)n > len) return -1;
    for (int i = 0; i < n; i++) {
        char c = s[*pos + (size_t)i];
        if (c < '0' || c > '9') return -1;
        v = v * 10 + (c - '0');
    }
    *pos += (size_t)n;
    *out = v;
    return 0;
}

static int expect(const char *s, size_t len, size_t *pos, char c)
{
    if (*pos >= len || s[*pos] != c) return -1;
    (*pos)++;
    return 0;
}

#define FAIL(...)                                  \
    do {                                           \
        snprintf(err, errlen, __VA_ARGS__);        \
        return -1;                                 \
    } while (0)

int timestamp_parse(const char *s, size_t len, int64_t *out, char *err, size_t errlen)
{
    size_t pos = 0;
    int year, month, day, hour, minute, second;
    int64_t usec = 0;
    int64_t offset_sec = 0;

    if (read_digits(s, len, &pos, 4, &year) || expect(s, len, &pos, '-') ||
        read_digits(s, len, &pos, 2, &month) || expect(s, len, &pos, '-') ||
        read_digits(s, len, &pos, 2, &day) || expect(s, len, &pos, 'T') ||
        read_digits(s, len, &pos, 2, &hour) || expect(s, len, &pos, ':') ||
        read_digits(s, len, &pos, 2, &minute) || expect(s, len, &pos, ':') ||
        read_digits(s, len, &pos, 2, &second))
        FAIL("not an ISO 8601 timestamp (expected YYYY-MM-DDTHH:MM:SS[.ffffff][Z|+HH:MM])");

    if (year < 1) FAIL("year 0000 does not exist");
    if (month < 1 || month > 12) FAIL("month %02d does not exist", month);
    if (day < 1 || (unsigned)day > days_in_month(year, (unsigned)month))
        FAIL("day %02d is not in %s %04d", day, month_names[month - 1], year);
    if (hour > 23) FAIL("hour %02d is out of range", hour);
    if (minute > 59) FAIL("minute %02d is out of range", minute);
    if (second > 59) FAIL("second %02d is out of range", second);

    if (pos < len && (s[pos] == '.' || s[pos] == ',')) {
        int digits = 0;
        pos++;
        while (pos < len && s[pos] >= '0' && s[pos] <= '9') {
            if (digits < 6) usec = usec * 10 + (s[pos] - '0');
            else if (s[pos] != '0')
                FAIL("more than microsecond precision: PostgreSQL would round it");
            digits++;
            pos++;
        }
        if (digits == 0) FAIL("a decimal point must be followed by digits");
        for (int i = digits; i < 6; i++) usec *= 10;
    }

    if (pos < len && s[pos] == 'Z') {
        pos++;
    } else if (pos < len && (s[pos] == '+' || s[pos] == '-')) {
        int sign = s[pos] == '-' ? -1 : 1;
        int oh, om;
        pos++;
        if (read_digits(s, len, &pos, 2, &oh)) FAIL("malformed UTC offset");
        if (pos < len && s[pos] == ':') pos++;
        if (read_digits(s, len, &pos, 2, &om)) FAIL("malformed UTC offset");
        if (oh > 15 || om > 59) FAIL("UTC offset %c%02d:%02d is out of range", sign < 0 ? '-' : '+', oh, om);
        offset_sec = sign * (oh * 3600 + om * 60);
    }
    if (pos != len) FAIL("unexpected text after the timestamp");

    int64_t days = timestamp_days_from_civil(year, (unsigned)month, (unsigned)day);
    int64_t secs = days * SEC_PER_DAY + hour * 3600 + minute * 60 + second - offset_sec;
    int64_t micros = secs * USEC_PER_SEC + usec;

    /* The offset may move a timestamp across the edges of the supported range. */
    static const int64_t min_us = INT64_C(-62135596800) * USEC_PER_SEC; /* 0001-01-01 */
    static const int64_t max_us = INT64_C(253402300800) * USEC_PER_SEC;  /* 10000-01-01 */
    if (micros < min_us || micros >= max_us)
        FAIL("outside 0001-01-01..9999-12-31 once converted to UTC");

    *out = micros;
    return 0;
}

/* `width` decimal digits of 0 <= x < 10^width, zero-padded. */
static void put_digits(char *out, int width, int64_t x)
{
    for (int i = width - 1; i >= 0; i--) {
        out[i] = (char)('0' + x % 10);
        x /= 10;
    }
}

void timestamp_format(int64_t micros, char *out)
{
    int64_t secs = micros / USEC_PER_SEC;
    int64_t usec = micros % USEC_PER_SEC;
    if (usec < 0) {
        usec += USEC_PER_SEC;
        secs -= 1;
    }
    int64_t days = secs / SEC_PER_DAY;
    int64_t sod = secs % SEC_PER_DAY;
    if (sod < 0) {
        sod += SEC_PER_DAY;
        days -= 1;
    }
    int64_t y;
    unsigned m, d;
    civil_from_days(days, &y, &m, &d);
    if (y < 0 || y > 9999) { /* Kafka's timestamps may go beyond year 9999 */
        snprintf(out, TIMESTAMP_TEXT_SIZE, "%04lld-%02u-%02u %02lld:%02lld:%02lld.%06lld+00",
                 (long long)y, m, d, (long long)(sod / 3600), (long long)(sod / 60 % 60),
                 (long long)(sod % 60), (long long)usec);
        return;
    }
    /* The common case by hand: every decoded timestamp comes here, and
     * snprintf was a tenth of the decoder's time. */
    put_digits(out, 4, y);
    out[4] = '-';
    put_digits(out + 5, 2, m);
    out[7] = '-';
    put_digits(out + 8, 2, d);
    out[10] = ' ';
    put_digits(out + 11, 2, sod / 3600);
    out[13] = ':';
    put_digits(out + 14, 2, sod / 60 % 60);
    out[16] = ':';
    put_digits(out + 17, 2, sod % 60);
    out[19] = '.';
    put_digits(out + 20, 6, usec);
    memcpy(out + 26, "+00", 4);
}

int timestamp_format_kafka_ms(int64_t ms, char *out)
{
    /* Up to INT64_MAX microseconds (year 294247), within PostgreSQL's range. */
    if (ms < 0 || ms > INT64_MAX / 1000) return -1;
    timestamp_format(ms * 1000, out);
    return 0;
}
