#!/usr/bin/env bash
# The decoder against PostgreSQL, value for value (DESIGN.md: Pipelines are
# declared): the same edge values given to both, through a pipeline bound to
# a real table by the catalog, must be accepted by both or refused by both,
# and an accepted value's column must read back as PostgreSQL reads the
# published text. The decoder's one rule stricter than PostgreSQL's:
# NUMERIC(p,s) refuses a number PostgreSQL would round to its scale (the
# decoder never stores another number than the one sent).
. "$(dirname "$0")/lib.sh"

pg_start

DVP=$BUILD/tests/decoder_vs_postgres

# TYPE<TAB>JSON value, one case a line.
cases() {
    local type=$1 v
    shift
    for v in "$@"; do printf '%s\t%s\n' "$type" "$v"; done
}

number_cases() {
    # float4in: strtof, out of range when a nonzero value underflows to
    # zero or overflows; subnormals kept.
    cases real 0 -0 -0.0 0.1 1 16777217 1e-45 1.4e-45 7e-46 1e-46 1e-38 1.17549435e-38 \
        3.4028234e38 3.4028235e38 3.40282356e38 3.4028236e38 -3.4028236e38 1e39 1e400 1e-400 -1e-400 0e-400 \
        123456789012345678901234567890 0.30000000000000004
    # float8in: strtod, the same rules.
    cases 'double precision' 0 -0 -0.0 0.1 4.9e-324 5e-324 2.5e-324 2.4e-324 1e-320 2.2250738585072014e-308 \
        1.7976931348623157e308 1.7976931348623158e308 1.7976931348623159e308 1e309 -1e309 1e-400 0e-999 \
        9007199254740993 12345678901234567890123 123456789.123456789
    # numeric_in: every digit kept; its own limits on the exponent, the
    # scale (16383) and the weight (131071 decimal digits before the point).
    cases numeric 0.1 12345678901234567 123456789.123456789 -0 0 1.10 2.5E+3 1e400 1e-400 \
        9e131071 1e131072 1e-16383 1e-16384 0e-16384 0e-16383 1e1073741822 1e-1073741823 1e2000000000 \
        123456789012345678901234567890.123456789 -9223372036854775809
    # NUMERIC(p,s): below 10^(p-s); a value PostgreSQL would round is refused.
    cases 'numeric(5,2)' 999.99 999.995 999.994 1000 -999.99 0.001 0.005 1.50000 1e2 1e3 0e-20000 0e-16383 0e-16384 -0 \
        1e-20000 0.1 12.3
    cases 'numeric(20,18)' 12.345678901234567891 99.999999999999999999 100 0.0000000000000000001
    cases 'numeric(3,-2)' 12300 12345 99900 100000 -99900
    cases 'numeric(2,5)' 0.00012 0.00099 0.001 0.000001
    cases 'numeric(1000,0)' 1e999 1e1000 9.5
    # Integers: their ranges (a fraction is refused by both).
    cases smallint 32767 32768 -32768 -32769 1.5 0 -0
    cases integer 2147483647 2147483648 -2147483648 -2147483649
    cases bigint 9223372036854775807 9223372036854775808 -9223372036854775808 -9223372036854775809 \
        123456789012345678901234567890
}

string_cases() {
    # varchar_input and bpchar_input: characters beyond n that are all
    # spaces are cut away, anything else is too long (22001).
    cases 'varchar(3)' '"ab"' '"abc"' '"ab   "' '"abc  "' '"abcd"' '"ab\t"' '"abc\t"' '"abc \t"' '"\u00e9\u00e9\u00e9  "' \
        '"\u00e9\u00e9\u00e9\u00e9"' '""' '"a\u0000b"'
    cases 'character(3)' '"a"' '"abc"' '"abc   "' '"abcd"' '"ab "' '""' '"\u00e9"'
    cases 'character varying' '"any length at all, trailing spaces kept   "'
    cases text '"x  "' '"\u2605"'
    # uuid_in: braces, no hyphens, upper case, a hyphen after any group of four.
    cases uuid '"3f2504e0-4f89-11d3-9a0c-0305e82c3301"' '"3F2504E0-4F89-11D3-9A0C-0305E82C3301"' \
        '"{3f2504e0-4f89-11d3-9a0c-0305e82c3301}"' '"3f2504e04f8911d39a0c0305e82c3301"' \
        '"{3f2504e04f8911d39a0c0305e82c3301}"' '"3f25-04e0-4f89-11d3-9a0c-0305-e82c-3301"' \
        '"3f2504e0-4f89-11d3-9a0c-0305e82c3301-"' '"3f2504e0--4f89-11d3-9a0c-0305e82c3301"' \
        '"{3f2504e0-4f89-11d3-9a0c-0305e82c3301"' '"3f2504e0-4f89-11d3-9a0c-0305e82c3301}"' \
        '"3f-2504e0-4f89-11d3-9a0c-0305e82c3301"' '" 3f2504e0-4f89-11d3-9a0c-0305e82c3301"' \
        '"3f2504e0-4f89-11d3-9a0c-0305e82c3301 "' '"3f2504e0-4f89-11d3-9a0c-0305e82c330"' '"3g2504e0-4f89-11d3-9a0c-0305e82c3301"'
}

# Domains are bound as their base type (their CHECKs are PostgreSQL's to
# judge: a value the base type takes and a CHECK refuses is the
# end-to-end suites' business, tests/integration/declared.sh).
domain_cases() {
    cases public.int8 5 9223372036854775807 9223372036854775808 1.5
    cases short_code '"abcd"' '"abcd  "' '"abcde"'
    cases shorter_code '"abc"' '"abcd"'
    cases money_amount 0.1 12345678901234567 1.005 1e10
}

# Types PostgreSQL judges: the decoder hands the JSON string (an array,
# for arrays; any JSON value, for json and jsonb) over as text.
judged_cases() {
    cases date '"2026-11-29"' '"2026-02-30"' '"infinity"' '"20261129"' '" 2026-11-29 "' '"2026-11-29 BC"' '""' '"epoch"'
    cases time '"12:34:56.789"' '"24:00:00"' '"25:00:00"' '"allballs"' '"12:34:56.1234567"'
    cases 'timestamp without time zone' '"2026-11-29T12:34:56.1234567"' '"2026-11-29 12:34:56+03"' '"infinity"' \
        '"294277-01-01"' '"2026-13-01"'
    cases bytea '"\\x00ff"' '"\\xzz"' '"abc"' '"\\\\"'
    cases 'character(3)[]' '"{a,b}"'
    cases json '{"a": [1, 2.50, "x"], "b": {}}' '1e400' '"str"' 'true' '[ ]' '"\u0000"' '-0.0'
    cases jsonb '{"b": 1, "a": [1.50, null]}' '"\u0000"' '1e400' '1e131072' '"x"'
    cases 'date[]' '["2026-11-29", null]' '["2026-02-30"]' '[]' '"{2026-11-29,NULL}"' '"{2026-02-30}"'
    cases 'text[]' '["a,b", "\"q\"", "back\\slash", "NULL", "", null, "{}", " x "]'
    cases 'timestamp[]' '["2026-11-29T12:34:56", "infinity"]'
    cases 'bytea[]' '["\\x00ff", "abc"]' '["\\xzz"]'
    cases 'json[]' '[{"a": 1}, null, "s", [1, 2], 2.50]'
    cases 'jsonb[]' '[{"b": 2, "a": 1}, 1.50]'
}

# Run the cases; fail naming every value where the two part ways.
# Every case fed must be compared: a case the program skipped (or a run cut
# short) would agree by saying nothing.
agree_on() { # cases on stdin
    local cases out rc=0
    cases=$(cat)
    out=$("$DVP" "$DB" "$WORK" <<<"$cases" 2>&1) || rc=$?
    [ "$rc" -ne 2 ] || fail "decoder_vs_postgres could not set up: $out"
    echo "$out" | sed 's/^/# /' >&2
    assert_eq "$(grep -c . <<<"$cases")" "$(grep -cE '^(agree|DISAGREE) ' <<<"$out")" "cases compared, of the cases fed"
    assert_eq 0 "$(grep -c '^DISAGREE' <<<"$out")" "values where the decoder and PostgreSQL part ways:
$(grep '^DISAGREE' <<<"$out")"
    assert_eq 0 "$rc" "decoder_vs_postgres's exit"
}

test_the_decoder_and_postgresql_agree_on_every_edge_number() {
    fresh_db dvp_numbers
    number_cases | agree_on
}

test_the_decoder_and_postgresql_agree_on_every_edge_string_and_uuid() {
    fresh_db dvp_strings
    string_cases | agree_on
}

test_the_decoder_and_postgresql_agree_on_domains_by_their_base_type() {
    fresh_db dvp_domains
    sql "CREATE DOMAIN public.int8 AS pg_catalog.int8 CHECK (VALUE > 0);
         CREATE DOMAIN short_code AS varchar(4);
         CREATE DOMAIN shorter_code AS short_code CHECK (VALUE <> '');
         CREATE DOMAIN money_amount AS numeric(12,2)" >/dev/null
    domain_cases | agree_on
}

test_the_decoder_hands_postgresql_its_judged_types_as_postgresql_reads_them() {
    fresh_db dvp_judged
    judged_cases | agree_on
}

run_tests
