/* Unit tests of core/timestamp: ISO 8601 text of the message contract to exact
 * UTC microseconds, and back to the text PostgreSQL reads (DESIGN.md: The message contract). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/timestamp.h"

#define US INT64_C(1000000)

/* Parses `s`; fails the test (with the reason) if it is rejected. */
static int64_t parse_ok(const char *s)
{
    int64_t us = 0;
    char err[160] = "";
    if (timestamp_parse(s, strlen(s), &us, err, sizeof err) != 0)
        fail_msg("\"%s\" rejected: %s", s, err);
    return us;
}

/* `s` parses and formats to exactly `want`. */
static void expect_utc(const char *s, const char *want)
{
    char out[TIMESTAMP_TEXT_SIZE];
    timestamp_format(parse_ok(s), out);
    assert_string_equal(out, want);
}

/* `s` is rejected and the reason mentions `why`; *out is left alone. */
static void expect_rejected(const char *s, const char *why)
{
    int64_t us = 12345;
    char err[160] = "";
    int rc = timestamp_parse(s, strlen(s), &us, err, sizeof err);
    if (rc != -1) fail_msg("\"%s\" accepted, expected a rejection mentioning \"%s\"", s, why);
    assert_int_equal(us, 12345);
    if (why && !strstr(err, why)) fail_msg("\"%s\": reason \"%s\" does not mention \"%s\"", s, err, why);
}

static void formats_as_postgresql_utc_text_with_six_fraction_digits(void **state)
{
    (void)state;
    char out[TIMESTAMP_TEXT_SIZE];
    timestamp_format(0, out);
    assert_string_equal(out, "1970-01-01 00:00:00.000000+00");
    timestamp_format(INT64_C(1795953600123456), out);
    assert_string_equal(out, "2026-11-29 12:00:00.123456+00");
    timestamp_format(1, out);
    assert_string_equal(out, "1970-01-01 00:00:00.000001+00");
}

static void format_before_1970_borrows_correctly(void **state)
{
    (void)state;
    char out[TIMESTAMP_TEXT_SIZE];
    timestamp_format(-1, out);
    assert_string_equal(out, "1969-12-31 23:59:59.999999+00");
    timestamp_format(-US, out);
    assert_string_equal(out, "1969-12-31 23:59:59.000000+00");
    timestamp_format(-86400 * US, out);
    assert_string_equal(out, "1969-12-31 00:00:00.000000+00");
    timestamp_format(INT64_C(-62135596800) * US, out);
    assert_string_equal(out, "0001-01-01 00:00:00.000000+00");
}

static void parse_then_format_round_trips(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"2026-11-29T12:00:00Z", "2026-11-29 12:00:00.000000+00"},
        {"2026-11-29T12:00:00.123456Z", "2026-11-29 12:00:00.123456+00"},
        {"1970-01-01T00:00:00Z", "1970-01-01 00:00:00.000000+00"},
        {"1969-07-20T20:17:40.5Z", "1969-07-20 20:17:40.500000+00"},
        {"2000-02-29T23:59:59.999999Z", "2000-02-29 23:59:59.999999+00"},
        {"0001-01-01T00:00:00Z", "0001-01-01 00:00:00.000000+00"},
        {"9999-12-31T23:59:59.999999Z", "9999-12-31 23:59:59.999999+00"},
        {"1900-03-01T00:00:00Z", "1900-03-01 00:00:00.000000+00"},
        {"2038-01-19T03:14:08Z", "2038-01-19 03:14:08.000000+00"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) expect_utc(cases[i][0], cases[i][1]);
}

static void format_then_parse_round_trips(void **state)
{
    (void)state;
    /* The formatted text, written back in ISO 8601, is the same instant. */
    static const int64_t values[] = {0, 1, -1, INT64_C(1795953600123456), INT64_C(-62135596800) * US,
                                     INT64_C(253402300799999999), INT64_C(951782400000000)};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        char out[TIMESTAMP_TEXT_SIZE];
        timestamp_format(values[i], out);
        /* "YYYY-MM-DD HH:MM:SS.ffffff+00" -> "YYYY-MM-DDTHH:MM:SS.ffffff+00:00" */
        char iso[TIMESTAMP_TEXT_SIZE + 4];
        snprintf(iso, sizeof iso, "%.10sT%.15s+00:00", out, out + 11);
        assert_int_equal(parse_ok(iso), values[i]);
    }
}

static void epoch_values_are_exact_microseconds(void **state)
{
    (void)state;
    assert_int_equal(parse_ok("1970-01-01T00:00:00Z"), 0);
    assert_int_equal(parse_ok("1970-01-01T00:00:00.000001Z"), 1);
    assert_int_equal(parse_ok("1969-12-31T23:59:59.999999Z"), -1);
    assert_int_equal(parse_ok("2026-11-29T12:00:00.123456Z"), INT64_C(1795953600123456));
    assert_int_equal(parse_ok("0001-01-01T00:00:00Z"), INT64_C(-62135596800000000));
    assert_int_equal(parse_ok("9999-12-31T23:59:59.999999Z"), INT64_C(253402300799999999));
}

static void naive_timestamp_is_utc(void **state)
{
    (void)state;
    assert_int_equal(parse_ok("2026-11-29T12:00:00"), parse_ok("2026-11-29T12:00:00Z"));
    assert_int_equal(parse_ok("2026-11-29T12:00:00.5"), parse_ok("2026-11-29T12:00:00.5+00:00"));
    expect_utc("2026-11-29T12:00:00", "2026-11-29 12:00:00.000000+00");
}

static void positive_offset_is_subtracted(void **state)
{
    (void)state;
    expect_utc("2026-11-29T15:30:00.123456+03:30", "2026-11-29 12:00:00.123456+00");
    expect_utc("2026-11-29T15:30:00+0330", "2026-11-29 12:00:00.000000+00");
    expect_utc("2026-11-29T21:00:00+09:00", "2026-11-29 12:00:00.000000+00");
}

static void negative_offset_is_added(void **state)
{
    (void)state;
    expect_utc("2026-11-29T08:30:00-03:30", "2026-11-29 12:00:00.000000+00");
    expect_utc("2026-11-29T07:00:00-0500", "2026-11-29 12:00:00.000000+00");
}

static void offset_crossing_midnight_changes_the_day(void **state)
{
    (void)state;
    expect_utc("2026-11-29T02:00:00+03:30", "2026-11-28 22:30:00.000000+00");
    expect_utc("2026-11-29T22:00:00-03:00", "2026-11-30 01:00:00.000000+00");
    /* Across the end of February in a leap year and a common year. */
    expect_utc("2024-02-28T23:00:00-02:00", "2024-02-29 01:00:00.000000+00");
    expect_utc("2026-02-28T23:00:00-02:00", "2026-03-01 01:00:00.000000+00");
    expect_utc("2024-03-01T01:00:00+02:00", "2024-02-29 23:00:00.000000+00");
}

static void offset_crossing_the_year_boundary_changes_the_year(void **state)
{
    (void)state;
    expect_utc("2026-01-01T01:00:00+03:00", "2025-12-31 22:00:00.000000+00");
    expect_utc("2025-12-31T23:30:00-01:00", "2026-01-01 00:30:00.000000+00");
    expect_utc("2026-01-01T00:00:00.000001+00:01", "2025-12-31 23:59:00.000001+00");
}

static void minus_zero_and_compact_zero_offsets_are_utc(void **state)
{
    (void)state;
    const int64_t z = parse_ok("2026-11-29T12:00:00Z");
    assert_int_equal(parse_ok("2026-11-29T12:00:00-00:00"), z);
    assert_int_equal(parse_ok("2026-11-29T12:00:00+00:00"), z);
    assert_int_equal(parse_ok("2026-11-29T12:00:00+0000"), z);
    assert_int_equal(parse_ok("2026-11-29T12:00:00-0000"), z);
}

static void offset_limits_are_those_of_postgresql(void **state)
{
    (void)state;
    expect_utc("2026-11-29T12:00:00+15:59", "2026-11-28 20:01:00.000000+00");
    expect_utc("2026-11-29T12:00:00-15:59", "2026-11-30 03:59:00.000000+00");
    expect_rejected("2026-11-29T12:00:00+16:00", "offset");
    expect_rejected("2026-11-29T12:00:00+03:60", "offset");
}

static void malformed_offset_is_rejected(void **state)
{
    (void)state;
    expect_rejected("2026-11-29T12:00:00+03", "offset");
    expect_rejected("2026-11-29T12:00:00+3:30", "offset");
    expect_rejected("2026-11-29T12:00:00+03:3", "offset");
    expect_rejected("2026-11-29T12:00:00+", "offset");
    expect_rejected("2026-11-29T12:00:00+03:30:00", NULL);
    expect_rejected("2026-11-29T12:00:00Z+01:00", NULL);
    expect_rejected("2026-11-29T12:00:00z", NULL);
}

static void leap_day_2024_is_accepted(void **state)
{
    (void)state;
    expect_utc("2024-02-29T00:00:00Z", "2024-02-29 00:00:00.000000+00");
    assert_int_equal(parse_ok("2024-02-29T00:00:00Z"), INT64_C(1709164800000000));
    expect_utc("2000-02-29T12:00:00Z", "2000-02-29 12:00:00.000000+00"); /* divisible by 400 */
}

static void leap_day_2026_is_rejected(void **state)
{
    (void)state;
    expect_rejected("2026-02-29T00:00:00Z", "day 29 is not in February 2026");
    expect_rejected("1900-02-29T00:00:00Z", "February 1900"); /* divisible by 100 */
    expect_rejected("2024-02-30T00:00:00Z", "day 30 is not in February 2024");
}

static void day_beyond_the_month_is_rejected(void **state)
{
    (void)state;
    expect_rejected("2026-04-31T00:00:00Z", "April");
    expect_rejected("2026-11-31T00:00:00Z", "November");
    expect_rejected("2026-01-32T00:00:00Z", "January");
    expect_rejected("2026-01-00T00:00:00Z", "day 00");
    expect_utc("2026-12-31T00:00:00Z", "2026-12-31 00:00:00.000000+00");
}

static void month_out_of_range_is_rejected(void **state)
{
    (void)state;
    expect_rejected("2026-13-01T00:00:00Z", "month 13");
    expect_rejected("2026-00-01T00:00:00Z", "month 00");
}

static void time_of_day_out_of_range_is_rejected(void **state)
{
    (void)state;
    expect_rejected("2026-11-29T24:00:00Z", "hour 24");
    expect_rejected("2026-11-29T12:60:00Z", "minute 60");
    expect_rejected("2026-11-29T23:59:60Z", "second 60");
    expect_utc("2026-11-29T23:59:59Z", "2026-11-29 23:59:59.000000+00");
}

static void year_0000_is_rejected(void **state)
{
    (void)state;
    expect_rejected("0000-01-01T00:00:00Z", "0000");
    expect_rejected("0000-12-31T23:59:59", "0000");
}

static void instant_outside_years_1_to_9999_is_rejected(void **state)
{
    (void)state;
    /* In range as written, outside once converted to UTC. */
    expect_rejected("0001-01-01T00:30:00+01:00", "0001-01-01..9999-12-31");
    expect_rejected("9999-12-31T23:30:00-01:00", "0001-01-01..9999-12-31");
    expect_utc("0001-01-01T01:00:00+01:00", "0001-01-01 00:00:00.000000+00");
    expect_utc("9999-12-31T22:59:59.999999-01:00", "9999-12-31 23:59:59.999999+00");
}

static void fraction_is_scaled_to_microseconds(void **state)
{
    (void)state;
    const int64_t base = parse_ok("2026-11-29T12:00:00Z");
    assert_int_equal(parse_ok("2026-11-29T12:00:00.5Z") - base, 500000);
    assert_int_equal(parse_ok("2026-11-29T12:00:00.05Z") - base, 50000);
    assert_int_equal(parse_ok("2026-11-29T12:00:00.123Z") - base, 123000);
    assert_int_equal(parse_ok("2026-11-29T12:00:00.000001Z") - base, 1);
    assert_int_equal(parse_ok("2026-11-29T12:00:00.999999Z") - base, 999999);
}

static void comma_fraction_is_accepted(void **state)
{
    (void)state;
    expect_utc("2026-11-29T12:00:00,5Z", "2026-11-29 12:00:00.500000+00");
    expect_utc("2026-11-29T12:00:00,123456+01:00", "2026-11-29 11:00:00.123456+00");
}

static void zeros_beyond_microseconds_are_accepted(void **state)
{
    (void)state;
    expect_utc("2026-11-29T12:00:00.1234560Z", "2026-11-29 12:00:00.123456+00");
    expect_utc("2026-11-29T12:00:00.000001000000000", "2026-11-29 12:00:00.000001+00");
}

static void nonzero_digit_beyond_microseconds_is_rejected(void **state)
{
    (void)state;
    expect_rejected("2026-11-29T12:00:00.1234567Z", "microsecond");
    expect_rejected("2026-11-29T12:00:00.9999999Z", "microsecond");
    expect_rejected("2026-11-29T12:00:00.0000000001", "microsecond");
}

static void decimal_point_without_digits_is_rejected(void **state)
{
    (void)state;
    expect_rejected("2026-11-29T12:00:00.Z", "digits");
    expect_rejected("2026-11-29T12:00:00.", "digits");
    expect_rejected("2026-11-29T12:00:00,", "digits");
}

static void text_after_the_timestamp_is_rejected(void **state)
{
    (void)state;
    expect_rejected("2026-11-29T12:00:00Z ", "after");
    expect_rejected("2026-11-29T12:00:00 UTC", "after");
    expect_rejected("2026-11-29T12:00:00.5x", "after");
    expect_rejected("2026-11-29T12:00:00+03:30 Asia/Tehran", "after");
    expect_rejected("2026-11-29T12:00:00:00", "after");
}

static void non_iso_text_is_rejected(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",
        "infinity",
        "-infinity",
        "epoch",
        "now",
        "2026-11-29",
        "2026-11-29 12:00:00",  /* space instead of T */
        "2026-11-29t12:00:00",  /* lower-case t */
        "26-11-29T12:00:00",
        "2026-1-29T12:00:00",
        "2026-11-29T1:00:00",
        "2026-11-29T12:00",
        "20261129T120000Z",
        "1764417600",
        " 2026-11-29T12:00:00",
        "+2026-11-29T12:00:00",
        "12026-11-29T12:00:00",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) expect_rejected(bad[i], "ISO 8601");
}

static void parse_reads_only_len_bytes(void **state)
{
    (void)state;
    /* Kafka values are not NUL-terminated: bytes past len are not read. */
    const char s[] = "2026-11-29T12:00:00Zjunk";
    int64_t us = 0;
    char err[160];
    assert_int_equal(timestamp_parse(s, 20, &us, err, sizeof err), 0);
    assert_int_equal(us, parse_ok("2026-11-29T12:00:00Z"));
    assert_int_equal(timestamp_parse(s, 21, &us, err, sizeof err), -1);
    /* Cut inside the seconds: no read past the end (ASan would see it). */
    char *heap = strndup(s, 18);
    assert_non_null(heap);
    int rc = timestamp_parse(heap, 18, &us, err, sizeof err);
    free(heap);
    assert_int_equal(rc, -1);
    /* An embedded NUL is text after the timestamp. */
    const char nul[] = "2026-11-29T12:00:00\0Z";
    assert_int_equal(timestamp_parse(nul, sizeof nul - 1, &us, err, sizeof err), -1);
}

static void reason_is_truncated_to_the_buffer(void **state)
{
    (void)state;
    char err[8];
    memset(err, 'x', sizeof err);
    int64_t us;
    assert_int_equal(timestamp_parse("2026-02-30T00:00:00Z", 20, &us, err, sizeof err), -1);
    assert_int_equal(strlen(err), sizeof err - 1);
    assert_string_equal(err, "day 30 ");
}

static void kafka_timestamps_beyond_int64_microseconds_have_no_text(void **state)
{
    (void)state;
    char out[TIMESTAMP_TEXT_SIZE];
    assert_int_equal(timestamp_format_kafka_ms(1764417600123LL, out), 0);
    assert_string_equal(out, "2025-11-29 12:00:00.123000+00");
    assert_int_equal(timestamp_format_kafka_ms(0, out), 0);
    assert_string_equal(out, "1970-01-01 00:00:00.000000+00");
    /* Producers may set any int64: ms * 1000 must not overflow. */
    assert_int_equal(timestamp_format_kafka_ms(INT64_MAX, out), -1);
    assert_int_equal(timestamp_format_kafka_ms(INT64_MAX / 1000 + 1, out), -1);
    assert_int_equal(timestamp_format_kafka_ms(-1, out), -1); /* none */
    /* Years past 9999 that PostgreSQL holds are kept exactly. */
    assert_int_equal(timestamp_format_kafka_ms(253402300800000LL, out), 0);
    assert_string_equal(out, "10000-01-01 00:00:00.000000+00");
}

static void days_from_civil_matches_known_dates(void **state)
{
    (void)state;
    assert_int_equal(timestamp_days_from_civil(1970, 1, 1), 0);
    assert_int_equal(timestamp_days_from_civil(1970, 1, 2), 1);
    assert_int_equal(timestamp_days_from_civil(1969, 12, 31), -1);
    assert_int_equal(timestamp_days_from_civil(2000, 3, 1), 11017);
    assert_int_equal(timestamp_days_from_civil(2024, 2, 29), 19782);
    assert_int_equal(timestamp_days_from_civil(1, 1, 1), -719162);
    assert_int_equal(timestamp_days_from_civil(9999, 12, 31), 2932896);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(formats_as_postgresql_utc_text_with_six_fraction_digits),
        cmocka_unit_test(format_before_1970_borrows_correctly),
        cmocka_unit_test(parse_then_format_round_trips),
        cmocka_unit_test(format_then_parse_round_trips),
        cmocka_unit_test(epoch_values_are_exact_microseconds),
        cmocka_unit_test(naive_timestamp_is_utc),
        cmocka_unit_test(positive_offset_is_subtracted),
        cmocka_unit_test(negative_offset_is_added),
        cmocka_unit_test(offset_crossing_midnight_changes_the_day),
        cmocka_unit_test(offset_crossing_the_year_boundary_changes_the_year),
        cmocka_unit_test(minus_zero_and_compact_zero_offsets_are_utc),
        cmocka_unit_test(offset_limits_are_those_of_postgresql),
        cmocka_unit_test(malformed_offset_is_rejected),
        cmocka_unit_test(leap_day_2024_is_accepted),
        cmocka_unit_test(leap_day_2026_is_rejected),
        cmocka_unit_test(day_beyond_the_month_is_rejected),
        cmocka_unit_test(month_out_of_range_is_rejected),
        cmocka_unit_test(time_of_day_out_of_range_is_rejected),
        cmocka_unit_test(year_0000_is_rejected),
        cmocka_unit_test(instant_outside_years_1_to_9999_is_rejected),
        cmocka_unit_test(fraction_is_scaled_to_microseconds),
        cmocka_unit_test(comma_fraction_is_accepted),
        cmocka_unit_test(zeros_beyond_microseconds_are_accepted),
        cmocka_unit_test(nonzero_digit_beyond_microseconds_is_rejected),
        cmocka_unit_test(decimal_point_without_digits_is_rejected),
        cmocka_unit_test(text_after_the_timestamp_is_rejected),
        cmocka_unit_test(non_iso_text_is_rejected),
        cmocka_unit_test(parse_reads_only_len_bytes),
        cmocka_unit_test(reason_is_truncated_to_the_buffer),
        cmocka_unit_test(kafka_timestamps_beyond_int64_microseconds_have_no_text),
        cmocka_unit_test(days_from_civil_matches_known_dates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
