/* Unit tests of core/retry: the three error classes of DESIGN.md: Errors and the
 * back-off schedule. A transient error must never dead-letter healthy data;
 * a data error must never stall a partition; anything else stops the
 * process. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/retry.h"

static void expect_class(const char *sqlstate, bool connection_bad, error_class_t want)
{
    error_class_t got = retry_classify(sqlstate, connection_bad);
    if (got != want)
        fail_msg("SQLSTATE %s (connection %s): %s, expected %s", sqlstate ? sqlstate : "(none)",
                 connection_bad ? "bad" : "fine", retry_class_name(got), retry_class_name(want));
}

/* A SQLSTATE's class does not depend on whether the server closed the
 * connection afterwards for the transient and data classes. */
static void expect_transient(const char *sqlstate)
{
    expect_class(sqlstate, false, ERROR_CLASS_TRANSIENT);
    expect_class(sqlstate, true, ERROR_CLASS_TRANSIENT);
}

static void expect_data(const char *sqlstate) { expect_class(sqlstate, false, ERROR_CLASS_DATA); }

static void expect_fatal(const char *sqlstate) { expect_class(sqlstate, false, ERROR_CLASS_FATAL); }

#define TEST(name, body)                                                                          \
    static void name(void **state)                                                                \
    {                                                                                             \
        (void)state;                                                                              \
        body;                                                                                     \
    }

/* Transient: retry the same batch after a back-off and a reconnect. */
TEST(connection_failure_08006_is_transient, expect_transient("08006"))
TEST(unable_to_connect_08001_is_transient, expect_transient("08001"))
TEST(other_connection_exceptions_of_class_08_are_transient,
     expect_transient("08000"); expect_transient("08003"); expect_transient("08004");
     expect_transient("08P01"))
TEST(admin_shutdown_57P01_is_transient, expect_transient("57P01"))
TEST(crash_shutdown_57P02_is_transient, expect_transient("57P02"))
TEST(cannot_connect_now_57P03_is_transient, expect_transient("57P03"))
TEST(serialization_failure_40001_is_transient, expect_transient("40001"))
TEST(deadlock_40P01_is_transient, expect_transient("40P01"))
/* The position fence's own SQLSTATE (migration 0010): neither retried nor
 * isolated as data; the worker reads its partitions again. */
TEST(the_position_fence_SC001_is_fenced, expect_class(RETRY_SQLSTATE_FENCED, false, ERROR_CLASS_FENCED))
TEST(too_many_connections_53300_is_transient, expect_transient("53300"))
TEST(disk_full_53100_is_transient, expect_transient("53100"))
TEST(other_insufficient_resources_of_class_53_are_transient,
     expect_transient("53000"); expect_transient("53200"); expect_transient("53400"))
TEST(statement_timeout_57014_is_transient, expect_transient("57014"))
TEST(read_only_after_failover_25006_is_transient, expect_transient("25006"))
TEST(lost_connection_without_sqlstate_is_transient,
     expect_class(NULL, true, ERROR_CLASS_TRANSIENT);
     expect_class("", true, ERROR_CLASS_TRANSIENT))

/* Data: isolate the offending record and dead-letter it. */
TEST(numeric_out_of_range_22003_is_data, expect_data("22003"))
TEST(string_too_long_22001_is_data, expect_data("22001"))
TEST(unique_violation_23505_is_data, expect_data("23505"))
TEST(check_violation_23514_is_data, expect_data("23514"))
TEST(statement_too_complex_54001_is_data, expect_data("54001"))
/* "index row size exceeds btree version 4 maximum": a key too long for the
 * table's index is that row's, as is any other value past a limit. */
TEST(a_key_too_long_for_its_index_54000_is_data, expect_data("54000"))
/* An exception a user's trigger raises for one row (RAISE EXCEPTION: P0001;
 * or another code of class P0). */
TEST(an_exception_a_users_trigger_raises_is_data, expect_data("P0001"); expect_data("P0004"))
/* "ON CONFLICT DO UPDATE command cannot affect row a second time": two rows
 * of one batch that the table's key equates and the batch's de-duplication
 * did not. Fatal, the restarted process met the same batch again: a crash
 * loop. Isolated, the halves store them one after the other. */
TEST(a_row_affected_twice_21000_is_isolated_not_a_crash_loop, expect_data("21000"))
TEST(other_data_exceptions_of_class_22_and_23_are_data,
     expect_data("22000"); expect_data("22007"); expect_data("22008"); expect_data("22021");
     expect_data("22P02"); expect_data("22P05"); expect_data("23502"); expect_data("23503"))

/* Fatal: stop every pipeline, exit non-zero. */
TEST(undefined_table_42P01_is_fatal, expect_fatal("42P01"))
TEST(syntax_error_42601_is_fatal, expect_fatal("42601"))
TEST(other_sql_bugs_of_class_42_are_fatal,
     expect_fatal("42501"); expect_fatal("42703"); expect_fatal("42P10"))
/* The server sends a SQLSTATE with every error it reports; an error
 * without one comes from libpq itself: the server closed the connection
 * (an immediate restart), and PQstatus may still say OK at that moment. */
TEST(no_sqlstate_is_a_lost_connection_even_while_the_status_still_says_ok,
     expect_class(NULL, false, ERROR_CLASS_TRANSIENT);
     expect_class("", false, ERROR_CLASS_TRANSIENT))
TEST(unexpected_sqlstates_are_fatal,
     expect_fatal("XX000"); expect_fatal("XX001"); expect_fatal("3D000"); expect_fatal("28P01");
     expect_fatal("25P02"); expect_fatal("0A000"); expect_fatal("54011"); expect_fatal("57000"))

/* Class codes are matched exactly, not by a looser prefix. */
TEST(transient_codes_match_exactly,
     expect_fatal("57P04"); expect_fatal("40002"); expect_fatal("25007");
     expect_fatal("57015"); expect_data("22000"))

static void backoff_doubles_from_1_second_over_5_attempts(void **state)
{
    (void)state;
    static const long want[] = {1000, 2000, 4000, 8000, 16000};
    long total = 0;
    for (int attempt = 1; attempt <= 5; attempt++) {
        long got = retry_backoff_ms(attempt, 1000);
        if (got != want[attempt - 1])
            fail_msg("attempt %d: %ld ms, expected %ld ms", attempt, got, want[attempt - 1]);
        total += got;
    }
    /* Covers a full PostgreSQL restart: 1 + 2 + 4 + 8 + 16 s. */
    assert_int_equal(total, 31000);
}

static void backoff_scales_with_the_base(void **state)
{
    (void)state;
    assert_int_equal(retry_backoff_ms(1, 250), 250);
    assert_int_equal(retry_backoff_ms(2, 250), 500);
    assert_int_equal(retry_backoff_ms(3, 250), 1000);
    assert_int_equal(retry_backoff_ms(4, 250), 2000);
    assert_int_equal(retry_backoff_ms(1, 1), 1);
    assert_int_equal(retry_backoff_ms(10, 1), 512);
}

static void backoff_does_not_overflow_for_many_attempts(void **state)
{
    (void)state;
    long prev = 0;
    for (int attempt = 1; attempt <= 200; attempt++) {
        long d = retry_backoff_ms(attempt, 600000);
        assert_true(d >= 600000);
        assert_true(d >= prev); /* never shrinks */
        assert_true(d <= 2 * 3600000L);
        prev = d;
    }
}

static void class_names_are_stable_words(void **state)
{
    (void)state;
    assert_string_equal(retry_class_name(ERROR_CLASS_TRANSIENT), "transient");
    assert_string_equal(retry_class_name(ERROR_CLASS_DATA), "data");
    assert_string_equal(retry_class_name(ERROR_CLASS_FATAL), "fatal");
}

/* The sqlstate field of a log line comes from the "SQLSTATE: message"
 * descriptions the PostgreSQL adapter writes; a lost connection has none. */
static void the_sqlstate_is_read_from_the_start_of_an_error_description(void **state)
{
    (void)state;
    char st[6];
    assert_string_equal(retry_sqlstate_of("40P01: deadlock detected", st), "40P01");
    assert_null(retry_sqlstate_of("server closed the connection unexpectedly", st));
    assert_null(retry_sqlstate_of("4000: short", st));
    assert_null(retry_sqlstate_of("40p01: lower case", st));
    assert_null(retry_sqlstate_of("", st));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_sqlstate_is_read_from_the_start_of_an_error_description),
        cmocka_unit_test(connection_failure_08006_is_transient),
        cmocka_unit_test(unable_to_connect_08001_is_transient),
        cmocka_unit_test(other_connection_exceptions_of_class_08_are_transient),
        cmocka_unit_test(admin_shutdown_57P01_is_transient),
        cmocka_unit_test(crash_shutdown_57P02_is_transient),
        cmocka_unit_test(cannot_connect_now_57P03_is_transient),
        cmocka_unit_test(serialization_failure_40001_is_transient),
        cmocka_unit_test(deadlock_40P01_is_transient),
        cmocka_unit_test(the_position_fence_SC001_is_fenced),
        cmocka_unit_test(too_many_connections_53300_is_transient),
        cmocka_unit_test(disk_full_53100_is_transient),
        cmocka_unit_test(other_insufficient_resources_of_class_53_are_transient),
        cmocka_unit_test(statement_timeout_57014_is_transient),
        cmocka_unit_test(read_only_after_failover_25006_is_transient),
        cmocka_unit_test(lost_connection_without_sqlstate_is_transient),
        cmocka_unit_test(numeric_out_of_range_22003_is_data),
        cmocka_unit_test(string_too_long_22001_is_data),
        cmocka_unit_test(unique_violation_23505_is_data),
        cmocka_unit_test(check_violation_23514_is_data),
        cmocka_unit_test(statement_too_complex_54001_is_data),
        cmocka_unit_test(a_key_too_long_for_its_index_54000_is_data),
        cmocka_unit_test(an_exception_a_users_trigger_raises_is_data),
        cmocka_unit_test(a_row_affected_twice_21000_is_isolated_not_a_crash_loop),
        cmocka_unit_test(other_data_exceptions_of_class_22_and_23_are_data),
        cmocka_unit_test(undefined_table_42P01_is_fatal),
        cmocka_unit_test(syntax_error_42601_is_fatal),
        cmocka_unit_test(other_sql_bugs_of_class_42_are_fatal),
        cmocka_unit_test(no_sqlstate_is_a_lost_connection_even_while_the_status_still_says_ok),
        cmocka_unit_test(unexpected_sqlstates_are_fatal),
        cmocka_unit_test(transient_codes_match_exactly),
        cmocka_unit_test(backoff_doubles_from_1_second_over_5_attempts),
        cmocka_unit_test(backoff_scales_with_the_base),
        cmocka_unit_test(backoff_does_not_overflow_for_many_attempts),
        cmocka_unit_test(class_names_are_stable_words),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
