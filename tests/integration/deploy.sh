#!/usr/bin/env bash
# deploy/, make install and the man page (docs/DESIGN.md: Deployment): each
# file is checked by the tool that will read it (systemd-analyze, promtool, a
# YAML parser, groff and man) and against the binary's own settings. The
# container image itself is make image-test's (tests/image/).
. "$(dirname "$0")/lib.sh"

pg_start
broker_start

DEPLOY=$TOP/deploy
MAN=$TOP/docs/storage-consumer.1

# The built-in default of a numeric setting, from the settings loader.
setting_default() { # NAME
    grep -oE "\"$1\", [0-9]+" "$TOP/src/settings.c" | head -n 1 | awk '{print $2}'
}

# The STORAGE_* names the man page's ENVIRONMENT section lists (a tag line
# ".B NAME" each), sorted; not the STORAGE_RDKAFKA_ prefix.
man_settings() {
    awk '/^\.SH ENVIRONMENT/ {on = 1; next} /^\.SH / {on = 0} on' "$MAN" |
        grep -oE '^\.B STORAGE_[A-Z0-9_]+$' | awk '{print $2}' | grep -v '_$' | sort -u
}

# The STORAGE_* names `storage-consumer --help` lists under "settings:".
help_settings() {
    "$BIN" --help | awk '/^settings:/ {on = 1; next} on && /^[^ ]/ {on = 0} on' |
        grep -oE '^  STORAGE_[A-Z0-9_]+' | tr -d ' ' | grep -v '_$' | sort -u
}

# make install into a scratch tree, with the suite's binary.
install_into() { # make variables...
    make -s -C "$TOP" install INSTALL_BIN="$BIN" "$@" >/dev/null
}

# Run python CODE with `docs`, the YAML documents of FILES; a failed assert
# prints its message alone.
yaml_py() { # code files...
    local code=$1
    shift
    YAML_PY_CODE=$code python3 -c '
import os, sys, yaml
docs = []
for path in sys.argv[1:]:
    docs.extend(d for d in yaml.safe_load_all(open(path)) if d is not None)
try:
    exec(os.environ["YAML_PY_CODE"])
except AssertionError as e:
    sys.exit("assertion failed: %s" % e)
' "$@"
}

test_make_install_puts_binary_unit_and_man_page_under_prefix() {
    local d=$WORK/destdir
    install_into DESTDIR="$d" PREFIX=/usr
    [ -x "$d/usr/bin/storage-consumer" ] || fail "no executable $d/usr/bin/storage-consumer"
    assert_contains "$("$d/usr/bin/storage-consumer" version)" "storage-consumer "
    [ -f "$d/usr/share/man/man1/storage-consumer.1" ] || fail "no man page in $d/usr/share/man/man1"
    local unit=$d/usr/lib/systemd/system/storage-consumer.service
    [ -f "$unit" ] || fail "no unit file at $unit"
    assert_eq "ExecStart=/usr/bin/storage-consumer run" "$(grep '^ExecStart=' "$unit")" "ExecStart follows PREFIX"
    # Nothing outside DESTDIR/PREFIX.
    assert_eq "$(printf '%s\n' usr/bin/storage-consumer usr/lib/systemd/system/storage-consumer.service \
        usr/share/man/man1/storage-consumer.1 usr/share/storage-consumer/pipelines.json)" \
        "$(cd "$d" && find . -type f | sed 's|^\./||' | sort)" "installed files"
    # The installed definitions are the built-in ones, and load as a file.
    assert_contains "$(env -i STORAGE_PIPELINES_FILE="$d/usr/share/storage-consumer/pipelines.json" \
        "$d/usr/bin/storage-consumer" --help)" "STORAGE_MAX_POLL_RECORDS_NETWORK_METRICS  batch size of network-metrics"
    # The default prefix is /usr/local.
    install_into DESTDIR="$WORK/destdir-default"
    [ -x "$WORK/destdir-default/usr/local/bin/storage-consumer" ] || fail "default PREFIX is not /usr/local"
    assert_eq "ExecStart=/usr/local/bin/storage-consumer run" \
        "$(grep '^ExecStart=' "$WORK/destdir-default/usr/local/lib/systemd/system/storage-consumer.service")"
}

test_installed_unit_passes_systemd_analyze_verify_and_security() {
    # A prefix of its own (no DESTDIR): ExecStart names a binary that exists,
    # and the unit's Documentation=man: page is found on MANPATH.
    local p=$WORK/prefix out
    install_into PREFIX="$p"
    local unit=$p/lib/systemd/system/storage-consumer.service
    out=$(MANPATH=$p/share/man systemd-analyze verify "$unit" 2>&1) || fail "systemd-analyze verify: $out"
    # It reports unknown keys and bad values as warnings, exit status 0.
    [ -z "$out" ] || fail "systemd-analyze verify warned: $out"
    # Exposure 2.0 or less (systemd's "OK" band; 1.5 when written).
    out=$(systemd-analyze security --offline=true --threshold=20 "$unit" 2>&1) ||
        fail "systemd-analyze security: exposure above 2.0: $(echo "$out" | tail -n 1)"
}

# The system calls in a systemd filter expression (@group or name),
# expanded recursively.
syscall_set() { # @group
    systemd-analyze syscall-filter "$1" | awk '/^    [@a-z]/ {print $1}' | while read -r s; do
        case $s in
        @*) syscall_set "$s" ;;
        *) echo "$s" ;;
        esac
    done
}

test_service_stays_within_the_units_system_call_filter_and_restrictions() {
    # The unit's SystemCallFilter=, RestrictAddressFamilies=,
    # MemoryDenyWriteExecute= and file system protections would kill or
    # refuse the service at the first call outside them; systemd cannot run here, so strace records every
    # call of a real run (start, migrate, consume, serve /metrics, SIGTERM)
    # and each is checked against the unit. The release binary: the
    # sanitizers' own calls are not the service's.
    local rel=$BIN
    ldd "$BIN" | grep -qE 'lib(asan|tsan)' && rel=$(dirname "$BUILD")/storage-consumer
    [ -x "$rel" ] || fail "no release build at $rel (make all)"
    local unit=$DEPLOY/storage-consumer.service
    grep -qx 'SystemCallFilter=@system-service' "$unit" || fail "the unit's filter changed: update this test"
    grep -qx 'SystemCallFilter=~@privileged @resources' "$unit" || fail "the unit's deny list changed: update this test"
    grep -qx 'RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX AF_NETLINK' "$unit" ||
        fail "the unit's address families changed: update this test"
    begin_test syscalls
    local APP=com.example.syscalls port vars spid child rc=0
    register_apps "$APP"
    gen_reviews 1 20 | produce "$TOPIC_REVIEWS"
    port=$(free_port)
    mapfile -t vars < <(svc_env syscalls)
    env -i "${vars[@]}" STORAGE_METRICS_ADDR="127.0.0.1:$port" \
        strace -f -qq -o "$WORK/syscalls.trace" "$rel" run >"$WORK/syscalls.log" 2>&1 &
    spid=$!
    # On the way out: the traced service killed (by its id) if still there;
    # end_test sees the test's own status.
    trap 'rc_=$?; c=$(ps --ppid '"$spid"' -o pid= | tr -d " "); [ -z "$c" ] || kill -KILL $c; (exit $rc_); end_test' EXIT
    wait_for_sql "SELECT count(*) FROM reviews" 20
    http_get "$port" /metrics | grep -q storage_consumer_ || fail "no metrics from the traced service"
    child=$(ps --ppid "$spid" -o pid= | tr -d ' ')
    [ -n "$child" ] || fail "the traced service is gone: $(tail -n 5 "$WORK/syscalls.log")"
    kill -TERM "$child"
    wait "$spid" || rc=$?
    assert_eq 0 "$rc" "exit code of the traced service: $(tail -n 3 "$WORK/syscalls.log")"

    local allowed denied used name bad=""
    allowed=$(syscall_set @system-service | sort -u)
    denied=$( (syscall_set @privileged; syscall_set @resources) | sort -u)
    used=$(sed -E 's/^[0-9]+ +//' "$WORK/syscalls.trace" | grep -oE '^[a-z_0-9]+\(' | tr -d '(' | sort -u)
    [ "$(echo "$used" | wc -l)" -gt 20 ] || fail "strace recorded too little: $used"
    for name in $used; do
        [ "$name" = execve ] && continue # strace's own start of the binary; systemd's too
        if ! echo "$allowed" | grep -qx "$name"; then bad="$bad $name(not in @system-service)"; fi
        if echo "$denied" | grep -qx "$name"; then bad="$bad $name(denied)"; fi
    done
    [ -z "$bad" ] || fail "system calls the unit's SystemCallFilter= refuses:$bad"
    if grep -E '^[0-9]+ +(mmap|mprotect|pkey_mprotect)\(' "$WORK/syscalls.trace" | grep -E 'PROT_WRITE' | grep -q 'PROT_EXEC'; then
        fail "writable and executable memory (MemoryDenyWriteExecute=): $(grep -E 'PROT_WRITE\|PROT_EXEC|PROT_EXEC.*PROT_WRITE' "$WORK/syscalls.trace" | head -n 2)"
    fi
    # ProtectSystem=strict, ProtectHome=, ProcSubset=pid: nothing written
    # outside /tmp (PrivateTmp=), the runtime directory and /dev/null, nothing
    # read under /home or /root, nothing of /proc but the process's own
    # (glibc's malloc reads /proc/sys/vm/overcommit_memory and, refused,
    # keeps its default: harmless).
    local paths
    paths=$(grep -E '^[0-9]+ +(openat|open|mkdir|mkdirat|creat|unlink|unlinkat|rename|renameat2?|utimensat)\(' \
        "$WORK/syscalls.trace" | grep -v ' = -1 ' || true)
    local written
    written=$(echo "$paths" | grep -E 'O_WRONLY|O_RDWR|O_CREAT|mkdir|creat\(|unlink|rename|utimensat' |
        grep -oE '"[^"]*"' | tr -d '"' | grep -vE '^(/tmp/|/run/storage-consumer|/dev/null$)' | sort -u || true)
    [ -z "$written" ] || fail "writes outside what ProtectSystem=strict leaves writable: $written"
    local hidden
    hidden=$(echo "$paths" | grep -oE '"[^"]*"' | tr -d '"' |
        grep -E '^(/home|/root|/proc/)' | grep -vE '^/proc/(self|thread-self|[0-9]+)(/|$)' |
        grep -vx /proc/sys/vm/overcommit_memory | sort -u || true)
    [ -z "$hidden" ] || fail "reads what ProtectHome= or ProcSubset=pid hide: $hidden"
    if grep -E '^[0-9]+ +socket(pair)?\(' "$WORK/syscalls.trace" | grep -vqE '\((AF_INET|AF_INET6|AF_UNIX|AF_NETLINK),'; then
        fail "an address family outside RestrictAddressFamilies=: $(grep -E '^[0-9]+ +socket(pair)?\(' "$WORK/syscalls.trace" | grep -vE '\((AF_INET|AF_INET6|AF_UNIX|AF_NETLINK),' | head -n 2)"
    fi
}

test_unit_stops_with_sigterm_and_waits_longer_than_the_shutdown_timeout() {
    local unit=$DEPLOY/storage-consumer.service shutdown stop d
    shutdown=$(setting_default STORAGE_SHUTDOWN_TIMEOUT_SECONDS)
    [ -n "$shutdown" ] || fail "no default of STORAGE_SHUTDOWN_TIMEOUT_SECONDS in src/settings.c"
    stop=$(sed -n 's/^TimeoutStopSec=\([0-9]*\)$/\1/p' "$unit")
    [ -n "$stop" ] || fail "no TimeoutStopSec= in seconds in $unit"
    [ "$stop" -gt "$shutdown" ] || fail "TimeoutStopSec=$stop is not above the shutdown timeout $shutdown"
    for d in KillSignal=SIGTERM Restart=on-failure RestartPreventExitStatus=2 \
        EnvironmentFile=/etc/storage-consumer/storage-consumer.env NoNewPrivileges=yes ProtectSystem=strict \
        ProtectHome=yes PrivateTmp=yes MemoryDenyWriteExecute=yes SystemCallFilter=@system-service \
        "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX AF_NETLINK" DynamicUser=yes; do
        grep -qxF "$d" "$unit" || fail "$unit lacks $d"
    done
}

test_kubernetes_manifests_parse_and_grace_period_exceeds_shutdown_timeout() {
    local out
    out=$(yaml_py '
kinds = {d["kind"]: d for d in docs}
for k in ("ConfigMap", "Secret", "Deployment", "Service"):
    assert k in kinds, "no " + k
cm = kinds["ConfigMap"]["data"]
secret = kinds["Secret"]["stringData"]
assert "STORAGE_DATABASE_URL" in secret, "the database URL is not in the Secret"
assert "STORAGE_DATABASE_URL" not in cm, "the database URL (with its password) is in the ConfigMap"
spec = kinds["Deployment"]["spec"]["template"]["spec"]
assert spec["enableServiceLinks"] is False, "enableServiceLinks is not false"
grace, shutdown = spec["terminationGracePeriodSeconds"], int(cm["STORAGE_SHUTDOWN_TIMEOUT_SECONDS"])
assert grace > shutdown, "terminationGracePeriodSeconds %d is not above STORAGE_SHUTDOWN_TIMEOUT_SECONDS %d" % (grace, shutdown)
c = spec["containers"][0]
port = int(cm["STORAGE_METRICS_ADDR"].rsplit(":", 1)[1])
ports = {p["name"]: p["containerPort"] for p in c["ports"]}
assert ports["metrics"] == port, "container port %s is not STORAGE_METRICS_ADDR port %d" % (ports, port)
for probe, path in (("startupProbe", "/healthz"), ("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
    get = c[probe]["httpGet"]
    assert (get["path"], get["port"]) == (path, "metrics"), "%s: %s" % (probe, get)
assert [i["args"] for i in spec["initContainers"]] == [["migrate"]], "no migrate init container"
svc = kinds["Service"]["spec"]
assert svc["ports"][0]["targetPort"] == "metrics", "the Service does not expose the metrics port"
print(grace, shutdown)
' "$DEPLOY"/kubernetes/*.yaml 2>&1) || fail "kubernetes manifests: $out"
}

# Every setting deploy/ sets is one the binary accepts, with its values: no
# exit 2 (configuration error) from `health`, which loads the settings
# first (it then exits 1: nothing runs).
assert_settings_accepted() { # file NAME=value...
    local file=$1 out rc=0
    shift
    out=$(env -i "$@" "$BIN" health 2>&1) || rc=$?
    [ "$rc" != 2 ] || fail "$file: a setting the binary refuses: $out"
}

test_kubernetes_and_compose_settings_are_accepted_by_the_binary() {
    local vars
    mapfile -t vars < <(yaml_py '
for d in docs:
    for k in ("data", "stringData"):
        for name, value in (d.get(k) or {}).items():
            if name.startswith("STORAGE_"):
                print("%s=%s" % (name, value))
' "$DEPLOY/kubernetes/configmap.yaml" "$DEPLOY/kubernetes/secret.yaml")
    [ "${#vars[@]}" -gt 3 ] || fail "no settings read from the ConfigMap and Secret: ${vars[*]}"
    assert_settings_accepted kubernetes "${vars[@]}"
    mapfile -t vars < <(yaml_py '
env = docs[0]["services"]["storage-consumer"]["environment"]
for name, value in env.items():
    print("%s=%s" % (name, value.replace("${POSTGRES_PASSWORD:-change-me}", "change-me")))
' "$DEPLOY/compose.yaml")
    [ "${#vars[@]}" -gt 2 ] || fail "no settings read from compose.yaml: ${vars[*]}"
    assert_settings_accepted compose.yaml "${vars[@]}"
}

test_compose_starts_the_service_after_migrate_succeeded() {
    local out
    # The Compose file schema, by a Compose implementation (docker-compose
    # validates without a container engine).
    out=$(cd "$DEPLOY" && POSTGRES_PASSWORD=x docker-compose -f compose.yaml config -q 2>&1) ||
        fail "docker-compose config: $out"
    out=$(yaml_py '
s = docs[0]["services"]
for name in ("postgres", "kafka", "migrate", "storage-consumer"):
    assert name in s, "no service " + name
assert s["kafka"]["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller", "kafka not in KRaft mode"
assert s["migrate"]["command"] == ["migrate"], "migrate runs %s" % s["migrate"]["command"]
assert s["migrate"]["restart"] == "no", "migrate is not one-shot"
dep = s["storage-consumer"]["depends_on"]["migrate"]["condition"]
assert dep == "service_completed_successfully", "the service waits for migrate: " + dep
assert s["storage-consumer"]["command"] == ["run"]
assert any(str(p).endswith(":9464") for p in s["storage-consumer"]["ports"]), "no metrics port"
grace = int(s["storage-consumer"]["stop_grace_period"].rstrip("s"))
shutdown = int(s["storage-consumer"]["environment"]["STORAGE_SHUTDOWN_TIMEOUT_SECONDS"])
assert grace > shutdown, "stop_grace_period %d is not above the shutdown timeout %d" % (grace, shutdown)
' "$DEPLOY/compose.yaml" 2>&1) || fail "compose.yaml: $out"
}

test_containerfile_builds_with_every_library_and_runs_only_their_runtime_packages() {
    local cf=$DEPLOY/Containerfile dev
    grep -qx 'ARG BASE=docker.io/library/debian:bookworm-slim' "$cf" || fail "BASE does not default to debian:bookworm-slim"
    # Every library -dev package the build needs (scripts/install-deps.sh)
    # is in the build stage, and its runtime package in the final stage.
    for dev in librdkafka-dev libpq-dev libjansson-dev libmicrohttpd-dev libavro-dev libcurl4-openssl-dev; do
        grep -q "$dev" "$TOP/scripts/install-deps.sh" || fail "$dev is not in scripts/install-deps.sh"
        grep -q " $dev" "$cf" || fail "the build stage lacks $dev"
    done
    for pkg in librdkafka1 libpq5 libjansson4 libmicrohttpd12 libavro23 libcurl4; do
        grep -q " $pkg" "$cf" || fail "the runtime stage lacks $pkg"
    done
    grep -qx 'STOPSIGNAL SIGTERM' "$cf" || fail "no STOPSIGNAL SIGTERM"
    grep -qx 'ENTRYPOINT \["/usr/local/bin/storage-consumer"\]' "$cf" || fail "ENTRYPOINT is not the binary (exec form)"
    grep -qx 'CMD \["run"\]' "$cf" || fail "default CMD is not run"
    grep -q '^USER storage-consumer$' "$cf" || fail "the image does not run as its own user"
}

test_alert_rules_pass_promtool_check_and_their_unit_tests() {
    local out
    out=$(promtool check rules "$DEPLOY/prometheus/alerts.yml" 2>&1) || fail "promtool check rules: $out"
    out=$(cd "$DEPLOY/prometheus" && promtool test rules alerts_test.yml 2>&1) || fail "promtool test rules: $out"
    # Every alert has a test that expects it to fire.
    local a
    for a in $(grep -oE 'alert: [A-Za-z]+' "$DEPLOY/prometheus/alerts.yml" | awk '{print $2}'); do
        grep -A3 "alertname: $a\$" "$DEPLOY/prometheus/alerts_test.yml" | grep -q exp_alerts ||
            fail "no test in alerts_test.yml expects $a to fire"
    done
}

test_alert_rules_use_only_metrics_the_service_exports() {
    begin_test alert_metrics
    local port body name APP=com.example.deploy
    register_apps "$APP"
    gen_reviews 1 5 | produce "$TOPIC_REVIEWS" -p 0
    port=$(free_port)
    start_service m STORAGE_METRICS_ADDR="127.0.0.1:$port"
    wait_for_sql "SELECT count(*) FROM reviews" 5
    # Lag is served per owned partition: once partitions are assigned.
    body=$(wait_metrics "$port" "storage_consumer_lag{")
    assert_contains "$body" "200 OK" "/metrics"
    for name in $(grep -oE 'storage_consumer_[a-z_]+' "$DEPLOY/prometheus/alerts.yml" | sort -u); do
        echo "$body" | grep -qE "^$name(\{| )" || fail "alerts.yml uses $name, which /metrics does not serve"
    done
    stop_clean m
}

test_man_page_renders_without_warnings() {
    local out
    out=$(groff -man -ww -z "$MAN" 2>&1) || fail "groff: $out"
    [ -z "$out" ] || fail "groff warns: $out"
    out=$(man --warnings -l "$MAN" 2>&1 >/dev/null) || fail "man: $out"
    [ -z "$out" ] || fail "man warns: $out"
    for s in NAME SYNOPSIS DESCRIPTION COMMANDS OPTIONS "EXIT STATUS" ENVIRONMENT FILES "SEE ALSO"; do
        grep -qx "\.SH \"*$s\"*" "$MAN" || fail "the man page has no $s section"
    done
}

test_man_page_settings_are_all_accepted_by_the_binary() {
    local names name out rc value
    names=$(man_settings)
    [ "$(echo "$names" | wc -l)" -ge 20 ] || fail "the man page's ENVIRONMENT lists only: $names"
    # The binary rejects a STORAGE_* name it does not know; every name the
    # man page documents is known (with its documented default as value).
    for name in $names; do
        value=$(man_default "$name")
        rc=0
        out=$(env -i STORAGE_DATABASE_URL=host=127.0.0.1 STORAGE_HEARTBEAT_DIR="$WORK/none" \
            "$name=${value:-x}" "$BIN" health 2>&1) || rc=$?
        case "$out" in
        *"$name: unknown setting"*) fail "the man page documents $name, which the binary does not know: $out" ;;
        esac
        # A documented default is a value the binary accepts.
        [ -z "$value" ] || [ "$rc" != 2 ] || fail "$name=$value (the man page's default) is refused: $out"
    done
}

# The default the man page gives a setting: the bold word after "Default:",
# or empty.
man_default() { # NAME
    awk -v n="$1" '/^\.TP/ {cur = ""} $0 == ".B " n {cur = n; next}
        cur == n && /^Default:$/ {want = 1; next}
        cur == n && want && /^\.BR? / {sub(/^\.BR? /, ""); sub(/ \.$/, ""); print; exit}
        cur == n && /^Default: / {exit}' "$MAN"
}

test_man_page_lists_exactly_the_settings_help_lists() {
    local help man_names
    help=$(help_settings)
    [ -n "$help" ] ||
        fail "storage-consumer --help lists no settings (expected a 'settings:' line, then '  STORAGE_NAME  default  description' lines)"
    man_names=$(man_settings)
    local only_help only_man
    only_help=$(comm -23 <(echo "$help") <(echo "$man_names") | tr '\n' ' ')
    only_man=$(comm -13 <(echo "$help") <(echo "$man_names") | tr '\n' ' ')
    [ -z "$only_help$only_man" ] ||
        fail "settings in --help but not in the man page: [$only_help]; in the man page but not in --help: [$only_man]"
}

run_tests
