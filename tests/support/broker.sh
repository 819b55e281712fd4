#!/usr/bin/env bash
# broker.sh — run the mock Kafka cluster helper (kafka-mock-broker) for tests
# and the demo.
#
#   broker.sh start DIR [BROKERS] [TOPIC:PARTITIONS...]  print bootstrap list
#   broker.sh stop DIR                                   idempotent
#   broker.sh ctl DIR COMMAND [ARGS...]                  print the reply line
#   broker.sh bootstrap DIR                              print bootstrap list
#
# DIR holds the helper's state: pid, bootstrap, control.sock, broker.log.
# ctl exits 0 on an "ok" reply, 1 on an "error" reply, 2 on usage errors and
# 3 when the helper cannot be reached.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
BROKER_BIN="${BROKER_BIN:-$repo/build/kafka-mock-broker}"

START_TIMEOUT_TICKS=100 # x 0.1 s: how long start waits for DIR/bootstrap
STOP_TERM_TICKS=50      # x 0.1 s: grace period after SIGTERM
STOP_KILL_TICKS=20      # x 0.1 s: wait after SIGKILL

die() {
    echo "broker.sh: $*" >&2
    exit 1
}

usage() {
    cat >&2 <<'USAGE'
usage: broker.sh start DIR [BROKERS] [TOPIC:PARTITIONS...]
       broker.sh stop DIR
       broker.sh ctl DIR COMMAND [ARGS...]
       broker.sh bootstrap DIR
USAGE
    exit 2
}

# Absolute path, so the helper's command line identifies its directory.
abs_dir() {
    (cd "$1" && pwd)
}

# Prints the helper's pid if DIR/pid names a live kafka-mock-broker serving
# DIR; guards against signalling an unrelated process that reused the pid.
live_pid() {
    local dir=$1 pid cmdline
    [[ -r $dir/pid ]] || return 1
    pid=$(<"$dir/pid")
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    [[ -r /proc/$pid/cmdline ]] || return 1
    cmdline=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
    grep -qx -- 'serve' <<<"$cmdline" || return 1
    grep -qxF -- "$dir" <<<"$cmdline" || return 1
    echo "$pid"
}

# True while PID is running.  kill -0 is not enough: once the helper has
# exited it stays a zombie until its reaper (often PID 1 of a container, which
# can be slow) collects it, and kill -0 still succeeds on a zombie.
proc_alive() {
    local state
    state=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
    [[ -n $state && $state != Z && $state != X ]]
}

cmd_start() {
    [[ $# -ge 1 ]] || usage
    local dir brokers=3 launcher rc tick pid
    mkdir -p "$1"
    dir=$(abs_dir "$1")
    shift
    if [[ $# -ge 1 ]]; then
        brokers=$1
        shift
    fi
    [[ $brokers =~ ^[0-9]+$ ]] || die "BROKERS must be a number, got '$brokers'"
    [[ -x $BROKER_BIN ]] || die "$BROKER_BIN not found; run: make build/kafka-mock-broker"
    if pid=$(live_pid "$dir"); then
        die "already running in $dir (pid $pid)"
    fi

    local -a args=(serve --brokers "$brokers" --dir "$dir")
    local topic
    for topic in "$@"; do
        args+=(--topic "$topic")
    done

    # Stale files from a killed run must not be mistaken for readiness.
    rm -f "$dir/bootstrap" "$dir/pid"
    # setsid: own session, so a test's Ctrl-C or process-group kill does not
    # take the cluster down mid-test; nohup: survives the terminal closing.
    setsid nohup "$BROKER_BIN" "${args[@]}" >>"$dir/broker.log" 2>&1 </dev/null &
    launcher=$!

    for ((tick = 0; tick < START_TIMEOUT_TICKS; tick++)); do
        if [[ -s $dir/bootstrap ]]; then
            cat "$dir/bootstrap"
            return 0
        fi
        # If setsid had to fork, the launcher exits 0 early; only a failing
        # exit status means the helper itself died.
        if ! kill -0 "$launcher" 2>/dev/null; then
            rc=0
            wait "$launcher" || rc=$?
            if [[ $rc -ne 0 ]]; then
                tail -n 20 "$dir/broker.log" >&2 || true
                die "helper exited with status $rc during startup (log: $dir/broker.log)"
            fi
        fi
        sleep 0.1
    done
    tail -n 20 "$dir/broker.log" >&2 || true
    cmd_stop "$dir" >/dev/null 2>&1 || true
    die "helper did not become ready within $((START_TIMEOUT_TICKS / 10)) s (log: $dir/broker.log)"
}

cmd_stop() {
    [[ $# -eq 1 ]] || usage
    local dir pid tick
    [[ -d $1 ]] || return 0
    dir=$(abs_dir "$1")
    if pid=$(live_pid "$dir"); then
        kill -TERM "$pid" 2>/dev/null || true
        for ((tick = 0; tick < STOP_TERM_TICKS; tick++)); do
            proc_alive "$pid" || break
            sleep 0.1
        done
        if proc_alive "$pid"; then
            echo "broker.sh: pid $pid ignored SIGTERM, sending SIGKILL" >&2
            kill -KILL "$pid" 2>/dev/null || true
            for ((tick = 0; tick < STOP_KILL_TICKS; tick++)); do
                proc_alive "$pid" || break
                sleep 0.1
            done
        fi
        if proc_alive "$pid"; then
            die "pid $pid is still alive"
        fi
    fi
    # A clean exit removes these itself; after SIGKILL they would be stale.
    rm -f "$dir/pid" "$dir/bootstrap" "$dir/control.sock"
}

cmd_ctl() {
    [[ $# -ge 2 ]] || usage
    local dir=$1
    shift
    exec "$BROKER_BIN" ctl "$dir" "$@"
}

cmd_bootstrap() {
    [[ $# -eq 1 ]] || usage
    [[ -s $1/bootstrap ]] || die "no helper running in $1"
    cat "$1/bootstrap"
}

[[ $# -ge 1 ]] || usage
sub=$1
shift
case $sub in
start) cmd_start "$@" ;;
stop) cmd_stop "$@" ;;
ctl) cmd_ctl "$@" ;;
bootstrap) cmd_bootstrap "$@" ;;
*) usage ;;
esac
