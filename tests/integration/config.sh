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
# The settings catalog, Kubernetes' service variables, and configuration
# errors refused before anything runs (DESIGN.md: Settings catalog).

# The names --help lists under "settings:".
help_settings() {
    run_clean "$BIN" --help | sed -n '/^settings:$/,$p' | grep -oE '^  STORAGE_[A-Z0-9_]+' | sed 's/^  //'
}

test_help_lists_every_setting() {
    local listed name missing=""
    listed=$(help_settings)
    [ -n "$listed" ] || fail "--help has no settings: section"
    # Every variable settings.c reads by name, the per-pipeline ones
    # expanded for each pipeline.
    for name in $(grep -oE '"STORAGE_[A-Z0-9_]+(%s)?"' "$TOP/src/settings.c" | tr -d '"' | sort -u); do
        case "$name" in
        *%s) for p in APP_STATS REVIEWS NETWORK_METRICS; do
                 grep -qx "${name%\%s}$p" <<<"$listed" || missing="$missing ${name%\%s}$p"
             done ;;
        STORAGE_RDKAFKA_) grep -qx 'STORAGE_RDKAFKA_' <<<"$listed" || missing="$missing $name" ;;
        *) grep -qx "$name" <<<"$listed" || missing="$missing $name" ;;
        esac
    done
    assert_eq "" "$missing" "settings read but not in --help"
    # And every listed setting is one the service accepts.
    for name in $listed; do
        [ "$name" = STORAGE_RDKAFKA_ ] && continue
        out=$(run_clean "$name=" "$BIN" migrate --bogus 2>&1) || true
        case "$out" in *"unknown setting"*) fail "--help lists $name, which is refused: $out" ;; esac
    done
}

test_kubernetes_service_variables_are_ignored() {
    fresh_db config_k8s
    create_applications_table
    local out rc=0
    out=$(run_clean STORAGE_DATABASE_URL="$DB" STORAGE_LOG_LEVEL=debug \
        STORAGE_SERVICE_HOST=10.96.0.12 STORAGE_SERVICE_PORT=9100 STORAGE_PORT=tcp://10.96.0.12:9100 \
        STORAGE_CONSUMER_SERVICE_HOST=10.96.0.13 STORAGE_CONSUMER_SERVICE_PORT=9100 \
        STORAGE_CONSUMER_SERVICE_PORT_METRICS=9100 STORAGE_CONSUMER_PORT=tcp://10.96.0.13:9100 \
        STORAGE_CONSUMER_PORT_9100_TCP=tcp://10.96.0.13:9100 STORAGE_CONSUMER_PORT_9100_TCP_PROTO=tcp \
        STORAGE_CONSUMER_PORT_9100_TCP_PORT=9100 STORAGE_CONSUMER_PORT_9100_TCP_ADDR=10.96.0.13 \
        "$BIN" migrate 2>&1) || rc=$?
    assert_eq 0 "$rc" "exit code: $out"
    assert_contains "$out" "schema is current"
    assert_contains "$out" "ignoring STORAGE_CONSUMER_PORT_9100_TCP_ADDR: a variable Kubernetes sets"
}

test_a_misspelt_setting_still_stops_start_up() {
    local out rc=0
    out=$(run_clean STORAGE_DATABSE_URL="host=db" STORAGE_CONSUMER_PORT_9100_TCP_ADDR=10.96.0.13 \
        "$BIN" migrate 2>&1) || rc=$?
    assert_eq 2 "$rc" "exit code: $out"
    assert_contains "$out" "STORAGE_DATABSE_URL: unknown setting"
}

# Run COMMAND against a fresh database with the applications table and
# VAR=value settings; it must exit 2 naming NAME, without having created a
# single table of the schema.
assert_refused_before_migrating() { # name command var=value...
    local name=$1 command=$2 out rc=0
    shift 2
    fresh_db config_refused
    create_applications_table
    # shellcheck disable=SC2086
    out=$(run_clean STORAGE_DATABASE_URL="$DB" STORAGE_KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:1 \
        STORAGE_HEARTBEAT_DIR="$WORK/hb-refused" "$@" timeout 60 "$BIN" $command 2>&1) || rc=$?
    assert_eq 2 "$rc" "exit code of $command with $*: $out"
    assert_contains "$out" "$name" "$command with $*: the setting is not named"
    assert_eq "f" "$(sql "SELECT to_regclass('storage_consumer_migrations') IS NOT NULL")" \
        "the migrations ran before $* was refused"
    echo "$out"
}

test_a_bad_sslmode_exits_2_before_any_migration() {
    local out base
    base=$(pg_root | sed "s/dbname=postgres/dbname=config_refused/")
    for command in run migrate; do
        out=$(assert_refused_before_migrating STORAGE_DATABASE_URL "$command" \
            STORAGE_DATABASE_URL="$base sslmode=bogus password=s3cret")
        assert_contains "$out" "sslmode=bogus"
        case "$out" in *s3cret*) fail "the password was printed: $out" ;; esac
    done
}

test_a_malformed_database_url_exits_2_before_any_migration() {
    local out base
    base=$(pg_root | sed "s/dbname=postgres/dbname=config_refused/")
    out=$(assert_refused_before_migrating STORAGE_DATABASE_URL run \
        STORAGE_DATABASE_URL="$(sed 's/port=[0-9]*/port=99999/' <<<"$base") password=s3cret")
    assert_contains "$out" "port=99999"
    out=$(assert_refused_before_migrating STORAGE_DATABASE_URL run STORAGE_DATABASE_URL="$base sslmod=require")
    assert_contains "$out" "sslmod"
    out=$(assert_refused_before_migrating STORAGE_DATABASE_URL run \
        STORAGE_DATABASE_URL="postgresql://u:s3cret@127.0.0.1:5432/db?sslmode=require&bogus=1")
    assert_contains "$out" "bogus"
    out=$(assert_refused_before_migrating STORAGE_DATABASE_URL run \
        STORAGE_DATABASE_URL="postgresql://u:s3cret@127.0.0.1:port/db")
    case "$out" in *s3cret*) fail "the password was printed: $out" ;; esac
    # A password with an unencoded '/' spills into the port and the
    # database name of a URI: no part of it may be printed.
    out=$(assert_refused_before_migrating STORAGE_DATABASE_URL run \
        STORAGE_DATABASE_URL="postgresql://svc:Pw9xQ/Kq3zR@127.0.0.1:5432/db")
    case "$out" in *Pw9xQ* | *Kq3zR*) fail "a part of the password was printed: $out" ;; esac
    assert_contains "$out" "percent-encode"
}

test_a_refused_librdkafka_value_exits_2_naming_the_variable() {
    local out
    # Refused by rd_kafka_conf_set: not a number.
    out=$(assert_refused_before_migrating STORAGE_RDKAFKA_FETCH_WAIT_MAX_MS run STORAGE_RDKAFKA_FETCH_WAIT_MAX_MS=soon)
    # Accepted property by property, refused when a client is made.
    out=$(assert_refused_before_migrating STORAGE_RDKAFKA_FETCH_MAX_BYTES run STORAGE_RDKAFKA_FETCH_MAX_BYTES=1000)
    assert_contains "$out" "message.max.bytes"
}

test_version_flags_print_the_library_versions() {
    local v V cmd
    v=$(run_clean "$BIN" --version)
    V=$(run_clean "$BIN" -V)
    cmd=$(run_clean "$BIN" version)
    assert_eq "$v" "$V" "-V and --version"
    assert_eq "$v" "$cmd" "the version command and --version"
    assert_contains "$v" "storage-consumer "
    assert_contains "$v" "librdkafka $(pkg-config --modversion rdkafka)"
    assert_contains "$v" "libpq 15."
    assert_contains "$v" "jansson $(pkg-config --modversion jansson)"
    assert_contains "$v" "libmicrohttpd $(pkg-config --modversion libmicrohttpd)"
}

# The env file, end to end: quoting, export and comments reach the settings;
# a malformed line names file:line (the rules one by one: tests/unit/test_env_file.c).
test_env_file_single_quotes_are_literal() {
    fresh_db config_quotes
    create_applications_table
    printf "; a systemd comment\nexport STORAGE_DATABASE_URL = '%s'\nSTORAGE_LOG_FORMAT=\"json\"   \n" "$DB" >"$WORK/quoted.env"
    local out rc=0
    out=$(run_clean "$BIN" --env-file "$WORK/quoted.env" migrate 2>&1) || rc=$?
    assert_eq 0 "$rc" "exit code: $out"
    assert_contains "$out" '"component":"migrate"'
    # A $ inside single quotes is no expansion: the group prefix keeps it and
    # librdkafka gets it as written (an invalid topic name would say so).
    printf "STORAGE_TOPIC_REVIEWS='\$HOME'\n" >"$WORK/dollar.env"
    rc=0
    out=$(run_clean HOME=/root "$BIN" --env-file "$WORK/dollar.env" migrate 2>&1) || rc=$?
    assert_eq 2 "$rc" "exit code: $out"
    assert_contains "$out" 'STORAGE_TOPIC_REVIEWS=$HOME'
    printf 'STORAGE_LOG_LEVEL=info\nSTORAGE_LOG_FORMAT="json\n' >"$WORK/open.env"
    rc=0
    out=$(run_clean "$BIN" --env-file "$WORK/open.env" migrate 2>&1) || rc=$?
    assert_eq 2 "$rc" "exit code: $out"
    assert_contains "$out" "open.env:2: unterminated double quote"
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

# librdkafka accepts each setting but creating a client fails, quoting the
# value of ssl.keystore.location (a secret's place: its name holds "key") in
# the message: a configuration error, found by the trial client at start.
test_a_secret_quoted_by_librdkafka_when_the_client_fails_is_not_shown() {
    fresh_schema config_keystore
    local settings=(STORAGE_RDKAFKA_SECURITY_PROTOCOL=ssl
        "STORAGE_RDKAFKA_SSL_KEYSTORE_LOCATION=$WORK/missing/$SECRET.p12"
        "STORAGE_RDKAFKA_SSL_KEYSTORE_PASSWORD=$SECRET")
    local out rc=0
    out=$(run_clean STORAGE_DATABASE_URL="$DB" STORAGE_KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:1 \
        STORAGE_HEARTBEAT_DIR="$WORK/hb-keystore" "${settings[@]}" "$BIN" run 2>&1) || rc=$?
    assert_eq 2 "$rc" "exit code of run: $out"
    case "$out" in *"$SECRET"*) fail "run printed the secret: $out" ;; esac
    assert_contains "$out" "ssl.keystore.location"
    assert_contains "$out" "[redacted]"
    rc=0
    out=$(run_clean STORAGE_DATABASE_URL="$DB" STORAGE_KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:1 \
        "${settings[@]}" timeout 60 "$BIN" verify 2>&1) || rc=$?
    assert_eq 2 "$rc" "exit code of verify: $out"
    case "$out" in *"$SECRET"*) fail "verify printed the secret: $out" ;; esac
    assert_contains "$out" "ssl.keystore.location"
}

# librdkafka's own log, at run time: the unsecured OAUTHBEARER token handler
# quotes the part of sasl.oauthbearer.config it cannot parse.
test_a_secret_quoted_in_librdkafkas_own_log_is_not_logged() {
    fresh_schema config_oauth
    local log=$WORK/oauth.log pid
    run_clean STORAGE_DATABASE_URL="$DB" STORAGE_KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:1 \
        STORAGE_PIPELINES=reviews STORAGE_HEARTBEAT_DIR="$WORK/hb-oauth" \
        STORAGE_RDKAFKA_SECURITY_PROTOCOL=sasl_plaintext STORAGE_RDKAFKA_SASL_MECHANISMS=OAUTHBEARER \
        STORAGE_RDKAFKA_ENABLE_SASL_OAUTHBEARER_UNSECURE_JWT=true \
        STORAGE_RDKAFKA_SASL_OAUTHBEARER_CONFIG="principal=admin secret=$SECRET" \
        "$BIN" run >"$log" 2>&1 &
    pid=$!
    # The line that quotes the configuration, not just any line about it.
    local quoted='Unrecognized sasl.oauthbearer.config beginning at: ' end=$((SECONDS + STALL_S))
    until grep -qF -- "$quoted" "$log" || [ "$SECONDS" -ge "$end" ]; do sleep 0.2; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    assert_contains "$(cat "$log")" "$quoted[redacted]" "librdkafka's error quoting the configuration, redacted"
    if grep -q -- "$SECRET" "$log"; then
        fail "the secret reached the log: $(grep -- "$SECRET" "$log")"
    fi
}

run_tests
