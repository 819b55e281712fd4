/* Unit tests of the --env-file format (DESIGN.md: Settings catalog, the env
 * file): one test per rule, each line parsed as env_file_parse_line sees it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "env_file.h"

/* `text` must parse as an assignment of `name` to `value`. */
static void expect_assignment(const char *text, const char *name, const char *value)
{
    char line[512], why[256] = "", *n = NULL, *v = NULL;
    snprintf(line, sizeof line, "%s", text);
    int rc = env_file_parse_line(line, &n, &v, why, sizeof why);
    if (rc != 1) fail_msg("[%s]: expected an assignment, got %d (%s)", text, rc, why);
    if (strcmp(n, name) != 0) fail_msg("[%s]: name [%s], expected [%s]", text, n, name);
    if (strcmp(v, value) != 0) fail_msg("[%s]: value [%s], expected [%s]", text, v, value);
}

static void expect_skipped(const char *text)
{
    char line[512], why[256] = "", *n = NULL, *v = NULL;
    snprintf(line, sizeof line, "%s", text);
    int rc = env_file_parse_line(line, &n, &v, why, sizeof why);
    if (rc != 0) fail_msg("[%s]: expected a line to skip, got %d (%s)", text, rc, why);
}

/* `text` is malformed, the reason mentioning `reason`. */
static void expect_malformed(const char *text, const char *reason)
{
    char line[512], why[256] = "", *n = NULL, *v = NULL;
    snprintf(line, sizeof line, "%s", text);
    int rc = env_file_parse_line(line, &n, &v, why, sizeof why);
    if (rc != -1) fail_msg("[%s]: expected malformed, got %d", text, rc);
    if (!strstr(why, reason)) fail_msg("[%s]: reason [%s] does not mention [%s]", text, why, reason);
}

static void test_env_file_hash_and_semicolon_lines_are_comments(void **state)
{
    (void)state;
    expect_skipped("# STORAGE_LOG_LEVEL=debug");
    expect_skipped("   # indented comment");
    expect_skipped("; systemd's other comment");
    expect_skipped("\t; indented");
}

static void test_env_file_blank_lines_are_skipped(void **state)
{
    (void)state;
    expect_skipped("");
    expect_skipped("   \t ");
    expect_skipped("\r"); /* a file written on Windows */
}

static void test_env_file_leading_export_is_accepted(void **state)
{
    (void)state;
    expect_assignment("export STORAGE_LOG_LEVEL=debug", "STORAGE_LOG_LEVEL", "debug");
    expect_assignment("export\tA=b", "A", "b");
    /* A variable whose name starts with "export" is no export. */
    expect_assignment("exporter=x", "exporter", "x");
}

static void test_env_file_whitespace_around_the_equals_sign_is_ignored(void **state)
{
    (void)state;
    expect_assignment("  STORAGE_LOG_LEVEL = debug", "STORAGE_LOG_LEVEL", "debug");
    expect_assignment("A\t=\t'x'", "A", "x");
}

static void test_env_file_single_quotes_are_literal(void **state)
{
    (void)state;
    expect_assignment("A='a \\\" b \\\\ $HOME ${X} # not a comment '", "A", "a \\\" b \\\\ $HOME ${X} # not a comment ");
    expect_assignment("A=''", "A", "");
}

static void test_env_file_double_quotes_take_backslash_escapes(void **state)
{
    (void)state;
    expect_assignment("A=\"say \\\"hi\\\" \\\\ back\"", "A", "say \"hi\" \\ back");
    /* Any other backslash is kept; $ is never expanded. */
    expect_assignment("A=\"C:\\temp $HOME \\$X\"", "A", "C:\\temp $HOME $X");
    expect_assignment("A=\"  padded  \"", "A", "  padded  ");
}

static void test_env_file_unquoted_value_is_taken_as_written_with_trailing_whitespace_trimmed(void **state)
{
    (void)state;
    expect_assignment("STORAGE_DATABASE_URL=host=db port=5432   \t", "STORAGE_DATABASE_URL", "host=db port=5432");
    expect_assignment("A=a#b ; c", "A", "a#b ; c");
    expect_assignment("A=", "A", "");
    /* A quote past the first character is no quoting (systemd and Docker agree). */
    expect_assignment("A=it's \"x\"", "A", "it's \"x\"");
}

static void test_env_file_variables_are_never_expanded(void **state)
{
    (void)state;
    expect_assignment("A=$HOME/x", "A", "$HOME/x");
    expect_assignment("A=\"${HOME}\"", "A", "${HOME}");
}

static void test_env_file_malformed_lines_are_refused(void **state)
{
    (void)state;
    expect_malformed("this is not a setting", "NAME=value");
    expect_malformed("STORAGE_LOG_LEVEL", "NAME=value");
    expect_malformed("=value", "NAME=value");
    expect_malformed("1A=b", "NAME=value");
    expect_malformed("MY VAR=b", "NAME=value");
    expect_malformed("A='open", "unterminated single quote");
    expect_malformed("A=\"open", "unterminated double quote");
    expect_malformed("A=\"a\" b", "after the closing quote");
    expect_malformed("A=continued \\", "backslash");
    expect_malformed("A=C:\\temp", "backslash");
}

static void test_env_file_a_comment_ending_in_a_backslash_is_refused(void **state)
{
    (void)state;
    /* systemd 252 would join the next line to this comment and hide it. */
    expect_malformed("# the old URL was \\", "comment ending in a backslash");
    expect_malformed("; also \\", "comment ending in a backslash");
    expect_skipped("# a backslash \\ inside is fine");
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_env_file_the_last_assignment_wins_but_not_over_the_environment(void **state)
{
    (void)state;
    char dir[] = "/tmp/env-file-test.XXXXXX", first[64], second[64], err[256];
    assert_non_null(mkdtemp(dir));
    snprintf(first, sizeof first, "%s/first.env", dir);
    snprintf(second, sizeof second, "%s/second.env", dir);
    write_file(first, "ENVF_A=default\nENVF_B=default\nENVF_A=override\nENVF_C=file\n");
    write_file(second, "ENVF_B=later file\n");
    unsetenv("ENVF_A");
    unsetenv("ENVF_B");
    setenv("ENVF_C", "started with", 1);
    assert_int_equal(0, env_file_load(first, err, sizeof err));
    assert_int_equal(0, env_file_load(second, err, sizeof err));
    env_file_forget();
    assert_string_equal("override", getenv("ENVF_A"));
    assert_string_equal("later file", getenv("ENVF_B"));
    assert_string_equal("started with", getenv("ENVF_C"));
    unlink(first);
    unlink(second);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_env_file_hash_and_semicolon_lines_are_comments),
        cmocka_unit_test(test_env_file_blank_lines_are_skipped),
        cmocka_unit_test(test_env_file_leading_export_is_accepted),
        cmocka_unit_test(test_env_file_whitespace_around_the_equals_sign_is_ignored),
        cmocka_unit_test(test_env_file_single_quotes_are_literal),
        cmocka_unit_test(test_env_file_double_quotes_take_backslash_escapes),
        cmocka_unit_test(test_env_file_unquoted_value_is_taken_as_written_with_trailing_whitespace_trimmed),
        cmocka_unit_test(test_env_file_variables_are_never_expanded),
        cmocka_unit_test(test_env_file_malformed_lines_are_refused),
        cmocka_unit_test(test_env_file_a_comment_ending_in_a_backslash_is_refused),
        cmocka_unit_test(test_env_file_the_last_assignment_wins_but_not_over_the_environment),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
