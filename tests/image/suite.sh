#!/usr/bin/env bash
# The container image's contents, run from its mounted root with chroot
# (tests/image/run.sh builds and mounts it: ROOT, IMAGE). The binary runs as
# the image's user with the image's libraries only, against the suite's
# PostgreSQL and broker over loopback (docs/DESIGN.md: Deployment).
. "$STORAGE_TEST_TOP/tests/integration/lib.sh"

: "${ROOT:?mounted image root}" "${IMAGE:?image name}"
IMAGE_BIN=/usr/local/bin/storage-consumer
APP=com.example.image

# The image's user, numerically: chroot looks names up in the host's files.
image_user() {
    awk -F: '$1 == "storage-consumer" { print $3 ":" $4 }' "$ROOT/etc/passwd"
}

# Run the image's binary inside its root as its user; the environment passes
# through. The service helpers start this in place of the build's binary.
BIN=$WORK/in-image
cat >"$BIN" <<SH
#!/bin/sh
exec chroot --userspec=$(image_user) "$ROOT" $IMAGE_BIN "\$@"
SH
chmod 755 "$BIN"

pg_start
broker_start

# The image has no access to the host's Unix socket directory: the database
# over TCP on loopback.
use_tcp() { DB=$(echo "$DB" | sed "s|host=[^ ]*|host=127.0.0.1|"); export DB; }

test_image_binary_finds_every_library_in_the_image() {
    local libs
    libs=$(chroot "$ROOT" /usr/bin/ldd "$IMAGE_BIN") || fail "ldd in the image failed: $libs"
    if echo "$libs" | grep -q 'not found'; then
        fail "libraries missing from the runtime stage: $(echo "$libs" | grep 'not found')"
    fi
    for lib in librdkafka.so.1 libpq.so.5 libjansson.so.4 libsimdjson.so.14 libmicrohttpd.so.12; do
        assert_contains "$libs" "$lib" "the binary links $lib"
    done
    assert_contains "$("$BIN" version)" "storage-consumer " "version from the image"
    # The built-in definitions, as a file to start a STORAGE_PIPELINES_FILE from.
    cmp "$ROOT/usr/local/share/storage-consumer/pipelines.json" "$STORAGE_TEST_TOP/pipelines/default.json" ||
        fail "the image's pipelines.json is not pipelines/default.json"
}

test_image_holds_no_compiler_or_headers() {
    local f
    for f in usr/bin/gcc usr/bin/cc usr/bin/make usr/include/librdkafka/rdkafka.h \
        usr/include/postgresql/libpq-fe.h usr/include/jansson.h usr/include/simdjson.h; do
        [ ! -e "$ROOT/$f" ] || fail "the runtime stage holds /$f"
    done
}

test_image_declares_an_unprivileged_user_sigterm_healthcheck_and_entrypoint() {
    local user
    user=$(image_user)
    [ -n "$user" ] || fail "no storage-consumer user in the image"
    [ "${user%%:*}" != 0 ] || fail "the image's user is root"
    assert_eq "storage-consumer" "$(podman image inspect --format '{{.Config.User}}' "$IMAGE")" "USER"
    assert_eq "SIGTERM" "$(podman image inspect --format '{{.Config.StopSignal}}' "$IMAGE")" "STOPSIGNAL"
    assert_eq '["/usr/local/bin/storage-consumer"]' \
        "$(podman image inspect --format '{{json .Config.Entrypoint}}' "$IMAGE")" "ENTRYPOINT"
    assert_eq '["run"]' "$(podman image inspect --format '{{json .Config.Cmd}}' "$IMAGE")" "CMD"
    assert_contains "$(podman image inspect --format '{{json .HealthCheck}}' "$IMAGE")" \
        '"/usr/local/bin/storage-consumer","health"' "HEALTHCHECK"
}

test_image_migrate_creates_the_schema() {
    fresh_db image_migrate
    create_applications_table
    use_tcp
    local out
    out=$(env -i STORAGE_DATABASE_URL="$DB" "$BIN" migrate 2>&1) || fail "migrate in the image failed: $out"
    assert_contains "$out" "schema is current"
    assert_eq 1 "$(sql "SELECT count(*) FROM pg_tables WHERE tablename = 'reviews'")" "reviews table"
}

test_image_run_stores_messages_reports_healthy_and_stops_cleanly() {
    # begin_test, with the schema applied by the image's binary over TCP.
    TEST_NAME=image_run
    SVC_STARTED=""
    trap end_test EXIT
    fresh_db test_image_run
    create_applications_table
    use_tcp
    env -i STORAGE_DATABASE_URL="$DB" "$BIN" migrate >/dev/null 2>&1 || fail "migrate failed"
    fresh_topics image_run
    register_apps "$APP"
    gen_reviews 1 200 | produce "$TOPIC_REVIEWS"
    start_service img STORAGE_HEARTBEAT_DIR=/run/storage-consumer
    wait_for_sql "SELECT count(*) FROM reviews" 200 60
    local vars out i
    mapfile -t vars < <(svc_env img)
    for i in $(seq 1 50); do
        out=$(env "${vars[@]}" STORAGE_HEARTBEAT_DIR=/run/storage-consumer "$BIN" health 2>&1) && break
        sleep 0.2
    done
    assert_contains "$out" "reviews: healthy" "health inside the image"
    assert_running img
    stop_clean img
}

run_tests
