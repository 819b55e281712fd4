#!/usr/bin/env bash
# --env-file, JSON logs, and secrets kept out of logs (DESIGN.md: Settings and budgets; Operations).
. "$(dirname "$0")/lib.sh"

pg_start

# Run the binary with only the variables given (no STORAGE_* from outside).
run_clean() { # args...
    env -i PATH="$PATH" ${ASAN_OPTIONS:+ASAN_OPTIONS=$ASAN_OPTIONS} \
        ${TSAN_OPTIONS:+TSAN_OPTIONS=$TSAN_OPTIONS} "$@"
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
    assert_eq "$(ls "$TOP"/migrations/*.sql | wc -l)" "$(sql "SELECT count(*) FROM storage_consumer_migrations")" "migrations applied through the file's database"
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
    bad=$(echo "$out" | jq -R 'fromjson? // "NOT JSON: \(.)" | strings' | head -n 3)
    assert_eq "" "$bad" "lines that are not JSON objects"
}


# ---------------------------------------------------------------------------
# Secrets among the librdkafka pass-through (STORAGE_RDKAFKA_*): a refused
# property names its variable, never its value, and librdkafka's own messages
# (which may quote a value) reach neither the terminal nor the log with it.

SECRET=Sup3rS3cretV4lue-do-not-print

# Start-up with settings that fail before any connection.
startup_env() {
    echo "STORAGE_DATABASE_URL=host=127.0.0.1 port=1 dbname=x connect_timeout=2"
    echo "STORAGE_KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:1"
}

# Run COMMAND (a word list) with VAR=value, expect exit EXPECTED and a
# message naming NAME, without $SECRET anywhere in stdout or stderr.
assert_secret_not_shown() { # expected-rc name command var=value...
    local expected=$1 name=$2 command=$3 out rc=0 vars
    shift 3
    mapfile -t vars < <(startup_env)
    # shellcheck disable=SC2086
    out=$(run_clean "${vars[@]}" "$@" "$BIN" $command 2>&1) || rc=$?
    assert_eq "$expected" "$rc" "exit code of $command with $*: $out"
    case "$out" in *"$SECRET"*) fail "$command printed the secret value of $name: $out" ;; esac
    assert_contains "$out" "$name" "$command with $*: the variable is not named"
}

test_a_refused_secret_librdkafka_property_names_its_variable_but_never_its_value() {
    local command var
    for command in run verify "replay reviews"; do
        # Refused by this librdkafka build (OAuth/OIDC support not built in).
        assert_secret_not_shown 2 STORAGE_RDKAFKA_SASL_OAUTHBEARER_CLIENT_SECRET "$command" \
            STORAGE_RDKAFKA_SASL_OAUTHBEARER_CLIENT_SECRET="$SECRET"
        # A Java client's JAAS line holds the password.
        assert_secret_not_shown 2 STORAGE_RDKAFKA_SASL_JAAS_CONFIG "$command" \
            STORAGE_RDKAFKA_SASL_JAAS_CONFIG="org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"$SECRET\";"
        # Properties librdkafka does not know: a Java client's, and a
        # misspelt one (whose name cannot tell it is a secret).
        for var in STORAGE_RDKAFKA_SSL_TRUSTSTORE_PASSWORD STORAGE_RDKAFKA_SASL_PASSWRD; do
            assert_secret_not_shown 2 "$var" "$command" "$var=$SECRET"
        done
    done
    # No property name at all.
    assert_secret_not_shown 2 STORAGE_RDKAFKA_ run STORAGE_RDKAFKA_="$SECRET"
}

# librdkafka accepts the settings but its client creation fails, quoting
# the value of ssl.keystore.location (a secret's place: its name holds
# "key") in the message.
test_a_secret_quoted_by_librdkafka_when_the_client_fails_is_not_shown() {
    fresh_schema config_keystore
    local settings=(STORAGE_RDKAFKA_SECURITY_PROTOCOL=ssl
        "STORAGE_RDKAFKA_SSL_KEYSTORE_LOCATION=$WORK/missing/$SECRET.p12"
        "STORAGE_RDKAFKA_SSL_KEYSTORE_PASSWORD=$SECRET")
    local out rc=0
    out=$(run_clean STORAGE_DATABASE_URL="$DB" STORAGE_KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:1 \
        STORAGE_HEARTBEAT_DIR="$WORK/hb-keystore" "${settings[@]}" "$BIN" run 2>&1) || rc=$?
    assert_eq 1 "$rc" "exit code of run: $out"
    case "$out" in *"$SECRET"*) fail "run printed the secret: $out" ;; esac
    assert_contains "$out" "ssl.keystore.location"
    assert_contains "$out" "[redacted]"
    rc=0
    out=$(run_clean STORAGE_DATABASE_URL="$DB" STORAGE_KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:1 \
        "${settings[@]}" timeout 60 "$BIN" verify 2>&1) || rc=$?
    assert_eq 1 "$rc" "exit code of verify: $out"
    case "$out" in *"$SECRET"*) fail "verify printed the secret: $out" ;; esac
    assert_contains "$out" "ssl.keystore.location"
}

# librdkafka's own log, at run time: the unsecured OAUTHBEARER token handler
# quotes the part of sasl.oauthbearer.config it cannot parse.
test_a_secret_quoted_in_librdkafkas_own_log_is_not_logged() {
    fresh_schema config_oauth
    local log=$WORK/oauth.log pid i
    run_clean STORAGE_DATABASE_URL="$DB" STORAGE_KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:1 \
        STORAGE_PIPELINES=reviews STORAGE_HEARTBEAT_DIR="$WORK/hb-oauth" \
        STORAGE_RDKAFKA_SECURITY_PROTOCOL=sasl_plaintext STORAGE_RDKAFKA_SASL_MECHANISMS=OAUTHBEARER \
        STORAGE_RDKAFKA_ENABLE_SASL_OAUTHBEARER_UNSECURE_JWT=true \
        STORAGE_RDKAFKA_SASL_OAUTHBEARER_CONFIG="principal=admin secret=$SECRET" \
        "$BIN" run >"$log" 2>&1 &
    pid=$!
    for i in $(seq 1 100); do
        grep -q 'OAUTHBEARER' "$log" && break
        sleep 0.2
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    grep -q 'OAUTHBEARER' "$log" || fail "librdkafka logged no OAUTHBEARER error: $(cat "$log")"
    if grep -q -- "$SECRET" "$log"; then
        fail "the secret reached the log: $(grep -- "$SECRET" "$log")"
    fi
}

run_tests
