#!/usr/bin/env bash
# --env-file, JSON logs, and secrets kept out of logs (SPEC 10, 13).
. "$(dirname "$0")/lib.sh"

pg_start

# Run the binary with only the variables given (no STORAGE_* from outside).
run_clean() { # args...
    env -i PATH="$PATH" ${ASAN_OPTIONS:+ASAN_OPTIONS=$ASAN_OPTIONS} "$@"
}

test_env_file_values_apply_and_the_environment_wins() {
    fresh_db config_envfile
    create_applications_table
    cat >"$WORK/app.env" <<ENV
# a comment, then a blank line

STORAGE_DATABASE_URL="$DB"
export STORAGE_LOG_FORMAT=json
ENV
    local out rc=0
    out=$(run_clean "$BIN" --env-file "$WORK/app.env" migrate 2>&1) || rc=$?
    assert_eq 0 "$rc" "exit code: $out"
    assert_contains "$out" '{"ts":"'
    assert_contains "$out" '"component":"migrate"'
    assert_eq 5 "$(sql "SELECT count(*) FROM storage_consumer_migrations")" "migrations applied through the file's database"
    # A variable already in the environment beats the file.
    out=$(run_clean STORAGE_LOG_FORMAT=text "$BIN" --env-file "$WORK/app.env" migrate 2>&1)
    case "$out" in *'{"ts"'*) fail "the file overrode the environment: $out" ;; esac
    assert_contains "$out" "info  [migrate] schema is current"
}

test_a_malformed_env_file_exits_2_naming_the_line() {
    printf 'STORAGE_LOG_LEVEL=info\nthis is not a setting\n' >"$WORK/bad.env"
    local out rc=0
    out=$(run_clean "$BIN" --env-file "$WORK/bad.env" migrate 2>&1) || rc=$?
    assert_eq 2 "$rc" "exit code: $out"
    assert_contains "$out" "bad.env:2"
    rc=0
    out=$(run_clean "$BIN" --env-file "$WORK/missing.env" migrate 2>&1) || rc=$?
    assert_eq 2 "$rc" "exit code for a missing file: $out"
}

test_json_logs_escape_and_never_show_the_password() {
    local out rc=0
    out=$(run_clean STORAGE_LOG_FORMAT=json \
        STORAGE_DATABASE_URL="host=127.0.0.1 port=1 dbname=x user=u password=s3cr\"et connect_timeout=2" \
        "$BIN" run 2>&1) || rc=$?
    assert_eq 1 "$rc" "exit code: $out"
    case "$out" in *s3cr*) fail "the password appears in the log: $out" ;; esac
    assert_contains "$out" 'password=********'
    # Every line is one JSON object.
    local bad
    bad=$(echo "$out" | grep -v '^{"ts":"[^"]*","level":"[a-z]*","component":"[^"]*","msg":".*"}$' || true)
    assert_eq "" "$bad" "lines that are not JSON objects"
}

run_tests
