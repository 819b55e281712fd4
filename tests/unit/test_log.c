/* Unit tests of the log line formatter: whatever a message holds (producer
 * strings reach log lines: package names, dead-letter details), one event is
 * one line, and no control character, terminal escape sequence or invalid
 * UTF-8 reaches the operator's terminal raw, in the text and the JSON
 * format; and a registered secret never reaches a line. The lines are read
 * back from stderr, as the service writes them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "core/utf8.h"
#include "log.h"

typedef struct {
    char *data;
    size_t len;
} captured_t;

/* Static, so that a failed assertion (which leaves the test at once) leaks
 * nothing. */
static char captured[65536];
static char decoded[65536];

/* Emit `msg` at warn level in `format`, with `n` fields (fields NULL: the
 * LOG_WARN macro), and return what reached stderr (valid until the next
 * call). */
static captured_t emit_fields(log_format_t format, const char *component, const log_field_t *fields, size_t nfields,
                              const char *msg)
{
    captured_t c = {captured, 0};
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    assert_true(dup2(fileno(tmp), STDERR_FILENO) >= 0);
    log_configure(LOG_LEVEL_DEBUG, format);
    if (fields) LOG_WARN_F(component, fields, nfields, "%s", msg);
    else LOG_WARN(component, "%s", msg);
    dup2(saved, STDERR_FILENO);
    close(saved);
    off_t n = lseek(fileno(tmp), 0, SEEK_END);
    assert_true(n >= 0);
    assert_true((size_t)n < sizeof captured);
    c.len = (size_t)n;
    c.data[c.len] = '\0';
    assert_int_equal(pread(fileno(tmp), c.data, c.len, 0), (ssize_t)c.len);
    fclose(tmp);
    return c;
}

static captured_t emit(log_format_t format, const char *component, const char *msg)
{
    return emit_fields(format, component, NULL, 0, msg);
}

/* Exactly one line, ending in its only newline; every other byte is a
 * printable character of well-formed UTF-8: no C0 control, no DEL, no C1
 * control, no Unicode line or paragraph separator. */
static void assert_one_safe_line(const captured_t *c)
{
    if (c->len == 0 || c->data[c->len - 1] != '\n') fail_msg("not one line ending in a newline: [%s]", c->data);
    const unsigned char *s = (const unsigned char *)c->data;
    for (size_t i = 0; i + 1 < c->len;) {
        uint32_t cp;
        size_t n = utf8_sequence(s + i, c->len - 1 - i, &cp);
        if (n == 0) fail_msg("invalid UTF-8 at byte %zu of [%s]", i, c->data);
        if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029)
            fail_msg("raw control character U+%04X at byte %zu of [%s]", cp, i, c->data);
        i += n;
    }
}

/* The message part of a text line ("<time> <level> [<component>] <msg>\n"). */
static const char *text_body(const captured_t *c)
{
    const char *p = strstr(c->data, "] ");
    if (!p) fail_msg("no component in [%s]", c->data);
    return p + 2;
}

static void assert_text_body(const captured_t *c, const char *expected)
{
    char want[8192];
    snprintf(want, sizeof want, "%s\n", expected);
    if (strcmp(text_body(c), want) != 0) fail_msg("logged [%s], expected [%s]", text_body(c), expected);
}

/* ------------------------------------------------------------------------ */
/* Text format                                                              */

static void a_package_name_with_a_newline_stays_on_one_text_log_line(void **state)
{
    (void)state;
    captured_t c = emit(LOG_FORMAT_TEXT, "reviews",
                        "dead_letter error_type=unregistered_app detail=\"package_name: com.x\n"
                        "2026-11-29T12:00:00.000Z error [reviews] pipeline failed: forged is not registered\"");
    assert_one_safe_line(&c);
    assert_text_body(&c, "dead_letter error_type=unregistered_app detail=\"package_name: com.x\\n"
                         "2026-11-29T12:00:00.000Z error [reviews] pipeline failed: forged is not registered\"");
}

static void terminal_escape_sequences_and_control_characters_are_escaped_in_text_logs(void **state)
{
    (void)state;
    /* ESC [ 31m colours, a bare CR rewrites the line, BEL, DEL, and the
     * C1 control CSI (U+009B, which some terminals take as ESC [). */
    captured_t c = emit(LOG_FORMAT_TEXT, "reviews", "a\x1b[31mred\x1b[0m\rover\ttab\a\x7f|\xc2\x9b" "2J|\xc2\x85|end");
    assert_one_safe_line(&c);
    assert_text_body(&c, "a\\x1b[31mred\\x1b[0m\\rover\\ttab\\x07\\x7f|\\u009b2J|\\u0085|end");
}

static void invalid_utf8_is_escaped_byte_by_byte_in_text_logs(void **state)
{
    (void)state;
    /* Stray bytes, an overlong '/', a surrogate, a truncated sequence, a
     * code point above U+10FFFF. */
    captured_t c = emit(LOG_FORMAT_TEXT, "reviews", "\xff\xfe|\xc0\xaf|\xed\xa0\x80|\xe2\x82|\xf4\x90\x80\x80|ok");
    assert_one_safe_line(&c);
    assert_text_body(&c, "\\xff\\xfe|\\xc0\\xaf|\\xed\\xa0\\x80|\\xe2\\x82|\\xf4\\x90\\x80\\x80|ok");
}

static void unicode_line_separators_are_escaped_in_text_logs(void **state)
{
    (void)state;
    captured_t c = emit(LOG_FORMAT_TEXT, "reviews", "a\xe2\x80\xa8" "b\xe2\x80\xa9" "c");
    assert_one_safe_line(&c);
    assert_text_body(&c, "a\\u2028b\\u2029c");
}

static void printable_text_and_multibyte_characters_are_logged_unchanged(void **state)
{
    (void)state;
    captured_t c = emit(LOG_FORMAT_TEXT, "reviews", "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x93\xb1 \xc2\xa0 key=\"v\" ~");
    assert_one_safe_line(&c);
    assert_text_body(&c, "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x93\xb1 \xc2\xa0 key=\"v\" ~");
}

/* A backslash is escaped too: a producer's literal "\n" must not read as
 * an escaped newline. */
static void a_backslash_is_doubled_in_text_logs(void **state)
{
    (void)state;
    captured_t c = emit(LOG_FORMAT_TEXT, "reviews", "literal \\n and \\x1b");
    assert_one_safe_line(&c);
    assert_text_body(&c, "literal \\\\n and \\\\x1b");
}

/* A message that outgrows the line when escaped is cut on a whole escape,
 * and still ends its line. */
static void a_message_of_control_characters_too_long_to_escape_is_cut_on_a_whole_escape(void **state)
{
    (void)state;
    char msg[4096];
    memset(msg, '\x1b', sizeof msg - 1);
    msg[sizeof msg - 1] = '\0';
    captured_t c = emit(LOG_FORMAT_TEXT, "reviews", msg);
    assert_one_safe_line(&c);
    const char *body = text_body(&c);
    size_t n = strlen(body) - 1;
    assert_true(n >= 4);
    for (size_t i = 0; i < n; i += 4)
        if (strncmp(body + i, "\\x1b", 4) != 0) fail_msg("not whole escapes at %zu: [%.12s]", i, body + i);
}

/* ------------------------------------------------------------------------ */
/* Fields                                                                   */

static const log_range_t two_ranges[] = {{0, 17, 41}, {2, 5, 9}};

static void fields_follow_the_message_as_key_value_pairs_in_text_logs(void **state)
{
    (void)state;
    const log_field_t f[] = {LF_STR("topic", "reviews"), LF_INT("partition", 2), LF_RANGES("offsets", two_ranges, 2),
                             LF_FIXED("duration_ms", 41.3, 1), LF_STR("sqlstate", NULL), LF_INT("offset", -1)};
    captured_t c = emit_fields(LOG_FORMAT_TEXT, "reviews", f, 6, "batch");
    assert_one_safe_line(&c);
    assert_text_body(&c, "batch topic=reviews partition=2 offsets=p0:17-41,p2:5-9 duration_ms=41.3 offset=-1");
}

/* A value that holds a space, a quote, '=' or anything escaped is quoted, so
 * " key=value" stays one token; inside the quotes a quote is \". */
static void a_hostile_text_field_value_is_quoted_escaped_and_stays_on_the_line(void **state)
{
    (void)state;
    const log_field_t f[] = {
        LF_STR("detail", "package_name: com.x\n2026-11-29T12:00:00.000Z error [reviews] forged \"q\" \x1b[31m\xff\xc2\x9b\\"),
        LF_STR("empty", ""), LF_STR("eq", "a=b"), LF_STR("tab", "a\tb"), LF_STR("plain", "caf\xc3\xa9-1.0"),
    };
    captured_t c = emit_fields(LOG_FORMAT_TEXT, "reviews", f, 5, "dead_letter");
    assert_one_safe_line(&c);
    assert_text_body(&c, "dead_letter detail=\"package_name: com.x\\n2026-11-29T12:00:00.000Z error [reviews] forged "
                         "\\\"q\\\" \\x1b[31m\\xff\\u009b\\\\\" empty=\"\" eq=\"a=b\" tab=\"a\\tb\" plain=caf\xc3\xa9-1.0");
}

/* ------------------------------------------------------------------------ */
/* JSON format                                                              */

/* The line is one JSON object; returns its "msg" (valid until the next
 * call). */
static char *json_msg(const captured_t *c, size_t *len)
{
    json_error_t jerr;
    json_t *o = json_loads(c->data, JSON_REJECT_DUPLICATES, &jerr);
    if (!o) fail_msg("not a JSON object (%s): [%s]", jerr.text, c->data);
    json_t *m = json_object_get(o, "msg");
    assert_true(json_is_string(m));
    *len = json_string_length(m);
    assert_true(*len < sizeof decoded);
    memcpy(decoded, json_string_value(m), *len + 1);
    bool component_ok = json_is_string(json_object_get(o, "component")) &&
                        strcmp(json_string_value(json_object_get(o, "component")), "reviews") == 0;
    json_decref(o);
    if (!component_ok) fail_msg("component is not \"reviews\": [%s]", c->data);
    return decoded;
}

static void a_package_name_with_control_characters_is_one_json_object_with_the_characters_escaped(void **state)
{
    (void)state;
    const char *msg = "detail=\"com.x\n{\"ts\":\"x\",\"level\":\"error\"} \x1b[31m\r\t\x7f\xc2\x9b \\ caf\xc3\xa9 \xe2\x80\xa8\"";
    captured_t c = emit(LOG_FORMAT_JSON, "reviews", msg);
    assert_one_safe_line(&c);
    size_t len;
    char *got = json_msg(&c, &len);
    assert_int_equal(len, strlen(msg));
    assert_memory_equal(got, msg, len);
}

/* JSON text is UTF-8: an invalid byte becomes U+FFFD, the replacement
 * character, and the line stays readable by any JSON parser. */
static void invalid_utf8_becomes_the_replacement_character_in_json_logs(void **state)
{
    (void)state;
    captured_t c = emit(LOG_FORMAT_JSON, "reviews", "a\xff" "b\xc0\xaf" "c\xe2\x82");
    assert_one_safe_line(&c);
    size_t len;
    char *got = json_msg(&c, &len);
    assert_string_equal(got, "a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd" "c\xef\xbf\xbd\xef\xbf\xbd");
}

static void a_json_message_too_long_to_escape_is_cut_and_stays_one_object(void **state)
{
    (void)state;
    char msg[4096];
    memset(msg, '\x01', sizeof msg - 1);
    msg[sizeof msg - 1] = '\0';
    captured_t c = emit(LOG_FORMAT_JSON, "reviews", msg);
    assert_one_safe_line(&c);
    size_t len;
    char *got = json_msg(&c, &len);
    assert_true(len > 0 && len <= strlen(msg));
    for (size_t i = 0; i < len; i++) assert_int_equal(got[i], '\x01');
}

/* The line as one JSON object (the caller decrefs), or the test fails. */
static json_t *json_line(const captured_t *c)
{
    json_error_t jerr;
    json_t *o = json_loads(c->data, JSON_REJECT_DUPLICATES, &jerr);
    if (!o || !json_is_object(o)) fail_msg("not a JSON object (%s): [%s]", jerr.text, c->data);
    return o;
}

static void fields_are_members_of_the_json_object_with_numbers_as_json_numbers(void **state)
{
    (void)state;
    const log_field_t f[] = {LF_STR("topic", "reviews"), LF_INT("partition", 2),
                             LF_INT("offset", 9223372036854775807LL), LF_RANGES("offsets", two_ranges, 2),
                             LF_FIXED("duration_ms", 41.3, 1), LF_STR("sqlstate", NULL), LF_INT("skipped", 0)};
    captured_t c = emit_fields(LOG_FORMAT_JSON, "reviews", f, 7, "batch");
    assert_one_safe_line(&c);
    const char *want = ",\"component\":\"reviews\",\"msg\":\"batch\",\"topic\":\"reviews\",\"partition\":2,"
                       "\"offset\":9223372036854775807,\"offsets\":[{\"partition\":0,\"first\":17,\"last\":41},"
                       "{\"partition\":2,\"first\":5,\"last\":9}],\"duration_ms\":41.3,\"skipped\":0}\n";
    const char *at = strstr(c.data, ",\"component\"");
    if (!at || strcmp(at, want) != 0) fail_msg("logged [%s]", c.data);
    json_t *o = json_line(&c);
    json_t *r0 = json_array_get(json_object_get(o, "offsets"), 0);
    bool typed = json_is_integer(json_object_get(o, "partition")) &&
                 json_integer_value(json_object_get(o, "offset")) == 9223372036854775807LL &&
                 json_is_integer(json_object_get(r0, "first")) && json_is_real(json_object_get(o, "duration_ms")) &&
                 json_is_string(json_object_get(o, "topic")) && !json_object_get(o, "sqlstate");
    json_decref(o);
    if (!typed) fail_msg("members not typed: [%s]", c.data);
}

static void a_hostile_field_value_stays_inside_its_json_member(void **state)
{
    (void)state;
    const char *v = "com.x\n{\"ts\":\"x\",\"level\":\"error\"}\",\"msg\":\"forged \x1b[31m\r\t\x7f\xc2\x9b \\ caf\xc3\xa9 \xe2\x80\xa8";
    const log_field_t f[] = {LF_STR("detail", v), LF_STR("bad_utf8", "a\xff" "b"), LF_INT("partition", 1)};
    captured_t c = emit_fields(LOG_FORMAT_JSON, "reviews", f, 3, "dead_letter");
    assert_one_safe_line(&c);
    json_t *o = json_line(&c);
    bool ok = json_object_size(o) == 7 && json_is_string(json_object_get(o, "detail")) &&
              strcmp(json_string_value(json_object_get(o, "detail")), v) == 0 &&
              strcmp(json_string_value(json_object_get(o, "bad_utf8")), "a\xef\xbf\xbd" "b") == 0 &&
              strcmp(json_string_value(json_object_get(o, "msg")), "dead_letter") == 0 &&
              json_integer_value(json_object_get(o, "partition")) == 1;
    json_decref(o);
    if (!ok) fail_msg("members not as given: [%s]", c.data);
}

/* Values that outgrow the line are cut (a string on a whole character, the
 * ranges after a whole range) or left out: the line stays within
 * LOG_LINE_MAX, one line, one JSON object, whatever room the cut leaves
 * (messages of every length shift it through every remainder). */
static void a_line_whose_fields_outgrow_it_stays_one_line_and_one_json_object(void **state)
{
    (void)state;
    static char big[20000];
    static char pad[80];
    static log_range_t many[2000];
    memset(big, '\x01', sizeof big - 1);
    for (int i = 0; i < 2000; i++) many[i] = (log_range_t){i, 1000000000000LL + i, 2000000000000LL + i};
    const log_field_t f[] = {LF_INT("partition", 1), LF_STR("detail", big), LF_RANGES("offsets", many, 2000),
                             LF_INT("offset", 7)};
    for (size_t len = 0; len < sizeof pad; len++) {
        memset(pad, 'm', len);
        pad[len] = '\0';
        for (int k = 0; k < 3; k++) {
            const log_field_t *use = k == 2 ? f + 2 : f;
            size_t n = k == 2 ? 2 : 4;
            captured_t c = emit_fields(k == 0 ? LOG_FORMAT_TEXT : LOG_FORMAT_JSON, "reviews", use, n, pad);
            assert_one_safe_line(&c);
            assert_true(c.len <= LOG_LINE_MAX);
            if (k == 0) continue;
            json_t *o = json_line(&c);
            bool ok = k == 1 ? json_integer_value(json_object_get(o, "partition")) == 1 &&
                                   json_is_string(json_object_get(o, "detail"))
                             : json_array_size(json_object_get(o, "offsets")) > 100;
            json_decref(o);
            if (!ok) fail_msg("case %d: fields not kept: [%.300s]", k, c.data);
        }
    }
}

static int evaluated;

static const char *counted(const char *s)
{
    evaluated++;
    return s;
}

/* The level is checked first: a disabled line does not even evaluate its
 * fields. */
static void the_fields_of_a_disabled_level_are_not_evaluated(void **state)
{
    (void)state;
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    assert_true(dup2(fileno(tmp), STDERR_FILENO) >= 0);
    log_configure(LOG_LEVEL_WARN, LOG_FORMAT_JSON);
    evaluated = 0;
    LOG_INFO_F("reviews", LOG_FIELDS(LF_STR("topic", counted("reviews"))), "batch");
    int after_info = evaluated;
    LOG_WARN_F("reviews", LOG_FIELDS(LF_STR("topic", counted("reviews"))), "batch");
    dup2(saved, STDERR_FILENO);
    close(saved);
    off_t n = lseek(fileno(tmp), 0, SEEK_END);
    fclose(tmp);
    assert_int_equal(after_info, 0);
    assert_int_equal(evaluated, 1);
    assert_true(n > 0);
}

/* ------------------------------------------------------------------------ */
/* Secrets                                                                  */
/* (Registered secrets stay for the process: these tests come last.)        */

static void a_registered_secret_is_never_logged_in_either_format(void **state)
{
    (void)state;
    log_add_secret("Pa55-w0rd\"x");
    captured_t c = emit(LOG_FORMAT_TEXT, "rdkafka", "fopen(/keys/Pa55-w0rd\"x.p12): no such file; Pa55-w0rd\"x");
    assert_text_body(&c, "fopen(/keys/[redacted].p12): no such file; [redacted]");
    c = emit(LOG_FORMAT_JSON, "reviews", "value Pa55-w0rd\"x");
    size_t len;
    assert_string_equal(json_msg(&c, &len), "value [redacted]");
}

/* Field values are redacted like the message, in both formats. */
static void a_registered_secret_is_redacted_inside_field_values(void **state)
{
    (void)state;
    log_add_secret("Pa55-w0rd\"x");
    const log_field_t f[] = {LF_STR("error", "password Pa55-w0rd\"x refused"), LF_STR("database", "Pa55-w0rd\"x")};
    captured_t c = emit_fields(LOG_FORMAT_TEXT, "main", f, 2, "starting");
    assert_text_body(&c, "starting error=\"password [redacted] refused\" database=[redacted]");
    c = emit_fields(LOG_FORMAT_JSON, "main", f, 2, "starting");
    json_t *o = json_line(&c);
    bool ok = strcmp(json_string_value(json_object_get(o, "error")), "password [redacted] refused") == 0 &&
              strcmp(json_string_value(json_object_get(o, "database")), "[redacted]") == 0;
    json_decref(o);
    if (!ok) fail_msg("not redacted: [%s]", c.data);
}

/* librdkafka quotes the rest of sasl.oauthbearer.config from the word it
 * cannot parse: each word of a value with spaces is redacted on its own. */
static void each_word_of_a_secret_with_spaces_is_redacted(void **state)
{
    (void)state;
    log_add_secret("principal=admin  secret=S3cr3tW0rd");
    captured_t c = emit(LOG_FORMAT_TEXT, "rdkafka",
                        "Unrecognized sasl.oauthbearer.config beginning at: secret=S3cr3tW0rd; whole: principal=admin  secret=S3cr3tW0rd");
    assert_text_body(&c, "Unrecognized sasl.oauthbearer.config beginning at: [redacted]; whole: [redacted]");
}

/* A PEM key is one secret, not a list of words: "PRIVATE" stays readable
 * in other lines. */
static void the_words_of_a_multi_line_secret_are_not_redacted_alone(void **state)
{
    (void)state;
    log_add_secret("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQ\n-----END PRIVATE KEY-----\n");
    captured_t c = emit(LOG_FORMAT_TEXT, "rdkafka", "Expecting: ANY PRIVATE KEY-----");
    assert_text_body(&c, "Expecting: ANY PRIVATE KEY-----");
    c = emit(LOG_FORMAT_TEXT, "rdkafka", "key: -----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQ\n-----END PRIVATE KEY-----\n!");
    assert_text_body(&c, "key: [redacted]!");
}

static void secrets_shorter_than_four_bytes_are_not_searched_for(void **state)
{
    (void)state;
    log_add_secret("abc");
    log_add_secret("");
    captured_t c = emit(LOG_FORMAT_TEXT, "main", "abc stays readable");
    assert_text_body(&c, "abc stays readable");
}

static void a_value_is_redacted_from_a_message_printed_outside_the_log(void **state)
{
    (void)state;
    char text[64] = "Invalid value \"xy\" for \"xy.z\"";
    log_redact_value(text, sizeof text, "xy");
    assert_string_equal(text, "Invalid value \"[redacted]\" for \"[redacted].z\"");
    char small[16] = "a Pa55-w0rd\"x b";
    log_redact(small, sizeof small);
    assert_string_equal(small, "a [redacted] b");
    char tiny[8] = "Pa55-w0";
    log_redact_value(tiny, sizeof tiny, "55");
    assert_string_equal(tiny, "Pa[reda");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_package_name_with_a_newline_stays_on_one_text_log_line),
        cmocka_unit_test(terminal_escape_sequences_and_control_characters_are_escaped_in_text_logs),
        cmocka_unit_test(invalid_utf8_is_escaped_byte_by_byte_in_text_logs),
        cmocka_unit_test(unicode_line_separators_are_escaped_in_text_logs),
        cmocka_unit_test(printable_text_and_multibyte_characters_are_logged_unchanged),
        cmocka_unit_test(a_backslash_is_doubled_in_text_logs),
        cmocka_unit_test(a_message_of_control_characters_too_long_to_escape_is_cut_on_a_whole_escape),
        cmocka_unit_test(fields_follow_the_message_as_key_value_pairs_in_text_logs),
        cmocka_unit_test(a_hostile_text_field_value_is_quoted_escaped_and_stays_on_the_line),
        cmocka_unit_test(a_package_name_with_control_characters_is_one_json_object_with_the_characters_escaped),
        cmocka_unit_test(invalid_utf8_becomes_the_replacement_character_in_json_logs),
        cmocka_unit_test(a_json_message_too_long_to_escape_is_cut_and_stays_one_object),
        cmocka_unit_test(fields_are_members_of_the_json_object_with_numbers_as_json_numbers),
        cmocka_unit_test(a_hostile_field_value_stays_inside_its_json_member),
        cmocka_unit_test(a_line_whose_fields_outgrow_it_stays_one_line_and_one_json_object),
        cmocka_unit_test(the_fields_of_a_disabled_level_are_not_evaluated),
        cmocka_unit_test(a_registered_secret_is_never_logged_in_either_format),
        cmocka_unit_test(a_registered_secret_is_redacted_inside_field_values),
        cmocka_unit_test(each_word_of_a_secret_with_spaces_is_redacted),
        cmocka_unit_test(the_words_of_a_multi_line_secret_are_not_redacted_alone),
        cmocka_unit_test(secrets_shorter_than_four_bytes_are_not_searched_for),
        cmocka_unit_test(a_value_is_redacted_from_a_message_printed_outside_the_log),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
