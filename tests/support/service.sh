# The service under test and the faults around it, shared by the integration
# suites (tests/integration/lib.sh) and the reliability suite
# (tests/reliability/lib.sh), which source this file: the service's
# processes and their exit codes, its log, PostgreSQL and the broker, and a
# lock that catches a batch in the middle of its write.
#
# The harness that sources it sets:
#   BIN           the storage-consumer binary
#   PG, PG_DIR    tests/support/pg.sh and the directory of the server it started
#   BROKER, BROKER_DIR  tests/support/broker.sh and the directory of its cluster
#   DB            the conninfo of the database under test
#   SVC_DIR       where the services' files go (see svc_start)
# and defines:
#   svc_env NAME     the settings of service NAME, one VAR=value a line
#   fail_check TEXT  a failed check: an integration test fails there, a
#                    reliability scenario records it and goes on
# After sourcing it may set the variables below and redefine svc_started.
#
# Works under `set -e` (the integration tests) and `set -u` (the
# reliability suite).

# A wait for something that moves (a lock granted, a log line) gives up
# after this long; the reliability suite derives it from its clocks.
STALL_S=${STALL_S:-30}
# How long a stopped service may take to exit (svc_stop, svc_kill).
STOP_WAIT_S=${STOP_WAIT_S:-40}
# pg_ctl -w waits up to 60 s (its default) for a start, crash recovery
# included.
PG_START_WAIT_S=60
# The application_name of the service's PostgreSQL sessions (a LIKE pattern).
SVC_SESSIONS=storage-consumer
# The application_name of hold_lock's session.
LOCKER_APP=test-locker
# 1: the service sees only PATH and its settings, nothing of the caller's
# environment.
SVC_CLEAN_ENV=

# ---------------------------------------------------------------------------
# Processes.

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# A loopback port nobody listens on (STORAGE_METRICS_ADDR).
free_port() { "$PG" free-port; }

# GET a path from 127.0.0.1:PORT with bash alone (no curl on a fresh machine).
http_get() { # port path
    exec 3<>"/dev/tcp/127.0.0.1/$1" || return 1
    printf 'GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n' "$2" >&3
    cat <&3
    exec 3<&-
}

# Processes are ended by their id only, and only while that id is still the
# process that was started: pids are reused (pid_max may be 32768), so each
# one is recorded with its start time (/proc/PID/stat, field 22) and checked
# before a signal is sent.
proc_start() { sed -E 's/^[0-9]+ \(.*\) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20; }

signal_if_same() { # signal pid start_time
    [ -n "$3" ] && [ "$(proc_start "$2")" = "$3" ] && kill "-$1" "$2" 2>/dev/null
    return 0
}

track() { # pid: a background process, ended by svc_cleanup
    echo "$1 $(proc_start "$1")" >>"$SVC_DIR/bg.pids"
}

# ---------------------------------------------------------------------------
# The service. Each process has a name; an integration test's services are
# named TEST_NAME-NAME in SVC_DIR (svc), so every log survives the test. Its
# log is SVC_DIR/NAME.log, its pid NAME.pid, and once it has exited its exit
# code is in NAME.rc: a watcher subshell waits for it, so exit codes are
# readable from any subshell, command substitutions included.

svc() { echo "${TEST_NAME:+$TEST_NAME-}$1"; }
svc_log() { echo "$SVC_DIR/${TEST_NAME:+$TEST_NAME-}$1.log"; }

# The stack a crashed process left in its log (src/crash.c) as one line:
# the signal, then the frames, innermost first, the service's own resolved
# to function (file:line), a library's as the library and glibc's nearest
# symbol. Prints nothing (status 1) if the log holds no crash.
crash_stack() { # log binary
    local f off where out
    out=$(sed -nE 's/.*crashed on (SIG[A-Z]+); the stack of the crashing thread follows.*/\1:/p' "$1" | head -n 1)
    [ -n "$out" ] || return 1
    while read -r f; do
        if [[ $f =~ /storage-consumer\(\+(0x[0-9a-f]+)\) ]]; then
            off=${BASH_REMATCH[1]}
            where=$(addr2line -f -i -p -s -e "$2" "$off" 2>/dev/null | head -n 1)
            out="$out ${where:-$off}"
        else
            f=${f##*/}
            out="$out ${f%%\[*}"
        fi
    done < <(sed -n '/; the stack of the crashing thread follows/,$p' "$1" | tail -n +2 |
        grep -E '^[^ ]+\([^ ]*\)\[0x[0-9a-f]+\]$')
    echo "$out"
}

# Called once service NAME has started, with its VAR=value arguments.
svc_started() { :; }

# Start `storage-consumer run` in the background as NAME with svc_env's
# settings; VAR=value arguments override them. Every setting stays one
# argument: a conninfo holds spaces.
svc_start() { # name [VAR=value...]
    local name=$1 f vars clean=()
    shift
    f=$SVC_DIR/$(svc "$name")
    mapfile -t vars < <(svc_env "$(svc "$name")")
    [ -n "$SVC_CLEAN_ENV" ] && clean=(-i "PATH=$PATH")
    rm -f "$f.rc" "$f.pid" "$f.start"
    (
        env "${clean[@]}" "${vars[@]}" "$@" "$BIN" run >"$f.log" 2>&1 3>&- &
        proc_start $! >"$f.start"
        echo $! >"$f.pid"
        rc=0
        wait $! || rc=$? # the integration tests run under set -e
        echo "$rc" >"$f.rc.tmp"
        mv "$f.rc.tmp" "$f.rc"
    ) &
    track $!
    while [ ! -s "$f.pid" ]; do sleep 0.01; done
    svc "$name" >>"$SVC_DIR/services"
    SVC_STARTED="${SVC_STARTED:-} $name"
    svc_started "$name" "$@"
}

svc_pid() { cat "$SVC_DIR/$(svc "$1").pid"; }

svc_running() { [ ! -f "$SVC_DIR/${TEST_NAME:+$TEST_NAME-}$1.rc" ]; }

# Signal NAME if it is still the process svc_start started.
svc_signal() { # name signal
    local f
    f=$SVC_DIR/$(svc "$1")
    [ -f "$f.rc" ] || signal_if_same "$2" "$(cat "$f.pid")" "$(cat "$f.start" 2>/dev/null)"
}

# Wait for NAME to exit (at most SECONDS) and print its exit code, or
# "timeout".
svc_wait() { # name seconds
    local f end=$((SECONDS + $2))
    f=$SVC_DIR/$(svc "$1").rc
    while [ "$SECONDS" -lt "$end" ]; do
        [ -f "$f" ] && break
        sleep 0.05
    done
    if [ -f "$f" ]; then cat "$f"; else echo timeout; fi
}

# SIGTERM NAME and print its exit code (or "timeout" after SECONDS).
svc_stop() { # name [seconds (STOP_WAIT_S)]
    svc_signal "$1" TERM
    svc_wait "$1" "${2:-$STOP_WAIT_S}"
}

# SIGKILL is not the service's to delay: the wait is for the watcher.
svc_kill() { # name -> exit code after SIGKILL (137)
    svc_signal "$1" KILL
    svc_wait "$1" "$STOP_WAIT_S"
}

# Every service started in SVC_DIR that is still running is killed, every
# tracked background process (watchers, lock holders) terminated.
svc_cleanup() {
    local n pid start
    for n in $(cat "$SVC_DIR/services" 2>/dev/null); do
        pid=$(cat "$SVC_DIR/$n.pid" 2>/dev/null) || continue
        [ -f "$SVC_DIR/$n.rc" ] || signal_if_same KILL "$pid" "$(cat "$SVC_DIR/$n.start" 2>/dev/null)"
    done
    [ -f "$SVC_DIR/bg.pids" ] || return 0
    while read -r pid start; do
        signal_if_same TERM "$pid" "$start"
    done <"$SVC_DIR/bg.pids"
}

# Lines of NAME's log matching an extended regex, counted.
log_count() { grep -cE -- "$2" "$SVC_DIR/${TEST_NAME:+$TEST_NAME-}$1.log" 2>/dev/null || true; } # name regex

# Wait until NAME's log has COUNT lines matching REGEX: 0 when seen, 1
# otherwise, at once if NAME exited without them.
wait_log() { # name regex [count (1)] [seconds (STALL_S)]
    local end=$((SECONDS + ${4:-$STALL_S}))
    while [ "$SECONDS" -lt "$end" ]; do
        [ "$(log_count "$1" "$2")" -ge "${3:-1}" ] && return 0
        svc_running "$1" || { [ "$(log_count "$1" "$2")" -ge "${3:-1}" ]; return; }
        sleep 0.05
    done
    return 1
}

# ---------------------------------------------------------------------------
# PostgreSQL and the broker.

sql() { psql "$DB" -X -q -v ON_ERROR_STOP=1 -At -c "$1"; }
pg_ctl_() { "$PG" ctl "$PG_DIR" "$@"; }
pg_root() { "$PG" conninfo "$PG_DIR"; }
broker_ctl() { "$BROKER" ctl "$BROKER_DIR" "$@"; }

pg_is_up() { pg_ctl_ status >/dev/null 2>&1 && psql "$(pg_root)" -X -q -At -c "SELECT 1" >/dev/null 2>&1; }

# The server must be up for what comes next, whatever a test or a scenario
# did to it: started if it is down, and waited for until it answers.
pg_ensure_up() {
    local end=$((SECONDS + PG_START_WAIT_S))
    pg_ctl_ status >/dev/null 2>&1 || pg_ctl_ start >/dev/null 2>&1 || true
    while [ "$SECONDS" -lt "$end" ]; do
        pg_is_up && return 0
        sleep 0.1
    done
    echo "# cannot bring PostgreSQL back within ${PG_START_WAIT_S} s" >&2
    return 1
}

# A claim of "nothing lost" needs the broker to hold everything produced:
# low watermark 0 on every partition of TOPIC.
assert_broker_kept_everything() { # topic [partitions (3)]
    local p wm
    for p in $(seq 0 $((${2:-3} - 1))); do
        wm=$(broker_ctl watermarks "$1" "$p") || { fail_check "cannot read the watermarks of $1 [$p]: $wm"; continue; }
        wm=${wm#ok }
        [ "${wm%% *}" = 0 ] || fail_check "the broker dropped records of $1 [$p] (watermarks $wm): nothing lost cannot be proven"
    done
}

# ---------------------------------------------------------------------------
# Catching a batch in the middle: an EXCLUSIVE lock on a table, held by a
# session named LOCKER_APP, blocks the service's INSERT into it, so a fault
# can be timed inside a batch.

hold_lock() { # table
    PGAPPNAME=$LOCKER_APP psql "$DB" -X -q -v ON_ERROR_STOP=1 -c "BEGIN" -c "LOCK TABLE $1 IN EXCLUSIVE MODE" \
        -c "SELECT pg_sleep(300)" >/dev/null 2>&1 &
    LOCKER_PID=$!
    track "$LOCKER_PID"
    # The lock may wait behind a batch in flight: as long as any wait.
    local end=$((SECONDS + STALL_S))
    while [ "$SECONDS" -lt "$end" ]; do
        [ "$(sql "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
                  WHERE a.application_name = '$LOCKER_APP' AND l.granted AND l.mode = 'ExclusiveLock'
                    AND l.relation = '$1'::regclass" 2>/dev/null)" = 1 ] && return 0
        sleep 0.05
    done
    fail_check "could not lock $1"
    return 1
}

# Wait until a session named like PATTERN (the service's) waits for a lock:
# its batch is stuck in the middle. 0 then, 1 after SECONDS, or as soon as
# SERVICE exited.
wait_blocked() { # [pattern (SVC_SESSIONS)] [seconds (STALL_S)] [service]
    local end=$((SECONDS + ${2:-$STALL_S}))
    while [ "$SECONDS" -lt "$end" ]; do
        [ -n "${3:-}" ] && ! svc_running "$3" && return 1
        [ "$(sql "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE '${1:-$SVC_SESSIONS}'
                  AND wait_event_type = 'Lock'" 2>/dev/null)" -ge 1 ] 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}

# End hold_lock's session: its backend, not only its client, which the
# server would notice only once pg_sleep ends.
release_lock() {
    sql "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = '$LOCKER_APP'" >/dev/null 2>&1 || true
    [ -n "${LOCKER_PID:-}" ] && { wait "$LOCKER_PID" 2>/dev/null || true; }
    LOCKER_PID=
}
