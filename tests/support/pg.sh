#!/usr/bin/env bash
# A throw-away PostgreSQL 15 for tests, the demo and the benchmark.
#
#   pg.sh start DIR     initdb into DIR/data (unless it holds one), start on a
#                       Unix socket in DIR and a private loopback port; prints
#                       the conninfo
#   pg.sh init DIR      initdb into DIR/data only (a copy of it starts faster)
#   pg.sh stop DIR      stop it (fast shutdown) and keep DIR
#   pg.sh destroy DIR   stop it and remove DIR
#   pg.sh conninfo DIR  print the conninfo of a started server
#   pg.sh free-port     print a loopback port nobody listens on, below the
#                       kernel's ephemeral range (for a server of a test)
#   pg.sh ctl DIR ARGS  run pg_ctl on it (e.g. "restart -m fast")
#   pg.sh backup DIR DEST   pg_basebackup of the running server into DEST, with
#                       the WAL it needs (-X stream)
#   pg.sh restore DIR SRC   stop the server, replace its data directory with
#                       the backup SRC (moved, not copied), start it
#
# initdb and postgres refuse to run as root, so as root they run as the
# postgres user, which owns DIR.
set -euo pipefail

PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}

as_owner() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

free_port() {
    # A loopback port nobody listens on, below the kernel's ephemeral range:
    # a port from that range can be handed meanwhile to any socket bound to
    # port 0 (a broker helper of a suite running beside this one) or to an
    # outgoing connection, and the server meant for it then fails to start.
    # A port taken between this check and the bind still fails loudly.
    local port low
    read -r low _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || low=32768
    [ "$low" -gt 12000 ] || { echo "pg.sh: the ephemeral port range starts at $low: no room below it" >&2; return 1; }
    for _ in $(seq 1 50); do
        port=$((10000 + RANDOM % (low - 10000)))
        if ! (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; then
            echo "$port"
            return 0
        fi
    done
    echo "pg.sh: no free port found" >&2
    return 1
}

conninfo() {
    echo "host=$1 port=$(cat "$1/port") dbname=postgres user=postgres"
}

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && { [ -n "$dir" ] || [ "$cmd" = free-port ]; } || { sed -n '2,20p' "$0" >&2; exit 2; }

init() {
    mkdir -p "$1"
    [ "$(id -u)" -eq 0 ] && chown postgres: "$1"
    if [ ! -f "$1/data/PG_VERSION" ]; then
        as_owner "$PGBIN/initdb" -D "$1/data" -A trust -U postgres -E UTF8 --locale=C.UTF-8 \
            --no-instructions >"$1/initdb.log" 2>&1 || { cat "$1/initdb.log" >&2; exit 1; }
    fi
}

case "$cmd" in
free-port)
    free_port
    ;;
init)
    init "$dir"
    ;;
start)
    init "$dir"
    dir=$(cd "$dir" && pwd)
    port=$(free_port)
    echo "$port" >"$dir/port"
    # fsync stays on: tests that kill the server must see real durability.
    as_owner "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=${PG_MAX_CONNECTIONS:-100}" \
        start >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
    conninfo "$dir"
    ;;
stop)
    dir=$(cd "$dir" && pwd)
    if [ -f "$dir/data/postmaster.pid" ]; then
        as_owner "$PGBIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
    fi
    ;;
destroy)
    if [ -d "$dir" ]; then
        dir=$(cd "$dir" && pwd)
        if [ -f "$dir/data/postmaster.pid" ]; then
            as_owner "$PGBIN/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
        fi
        rm -rf "$dir"
    fi
    ;;
conninfo)
    dir=$(cd "$dir" && pwd)
    conninfo "$dir"
    ;;
ctl)
    dir=$(cd "$dir" && pwd)
    shift 2
    as_owner "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w "$@" \
        -o "-p $(cat "$dir/port") -k $dir -c listen_addresses=127.0.0.1"
    ;;
backup)
    dir=$(cd "$dir" && pwd)
    dest=${3:?pg.sh backup DIR DEST}
    mkdir -p "$dest"
    [ "$(id -u)" -eq 0 ] && chown postgres: "$dest"
    # A fast checkpoint: the backup starts at once, not after a spread one.
    as_owner "$PGBIN/pg_basebackup" -h "$dir" -p "$(cat "$dir/port")" -U postgres -D "$dest" \
        -X stream --checkpoint=fast --no-sync
    ;;
restore)
    dir=$(cd "$dir" && pwd)
    src=$(cd "${3:?pg.sh restore DIR SRC}" && pwd)
    [ -f "$src/PG_VERSION" ] || { echo "pg.sh: $src is not a data directory" >&2; exit 1; }
    if [ -f "$dir/data/postmaster.pid" ]; then
        as_owner "$PGBIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
    fi
    rm -rf "$dir/data.replaced"
    mv "$dir/data" "$dir/data.replaced"
    mv "$src" "$dir/data"
    chmod 700 "$dir/data"
    rm -rf "$dir/data.replaced"
    # Recovery replays the WAL the backup streamed, then the server is a
    # primary again (no standby.signal).
    as_owner "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-p $(cat "$dir/port") -k $dir -c listen_addresses=127.0.0.1" start >/dev/null
    ;;
*)
    sed -n '2,18p' "$0" >&2
    exit 2
    ;;
esac
