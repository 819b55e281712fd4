#!/bin/sh
# Installs the Debian packages storage-consumer needs to build, test and run
# its demo. Does nothing when they are all present, so `make test` can call
# it every time.
#
#   scripts/install-deps.sh         build, tests, demo
#   scripts/install-deps.sh image   those, and what make image-test needs to
#                                   build and open the container image
#
# prometheus is there for promtool, the reference checker of the /metrics
# exposition (tests/integration/metrics.sh) and of the alert rules: a 19 MB
# download, 96 MB installed, about 12 s. On a machine that runs systemd the
# package also enables a Prometheus server on port 9090; a container or CI
# runner without it gets the tools only.
#
# openssl makes the tls suite's certificate authorities and certificates.
#
# python3-confluent-kafka (the Python binding of librdkafka) produces the
# model suite's streams: records with the keys, partitions and timestamps
# the model chose, which kcat cannot set per record. With python3-avro (its
# legacy Avro serializer's library) and python3-requests and
# python3-jsonschema (its schema registry client's), it is Confluent's own
# serializer encoding the formats suite's records.
#
# libavro-dev (Apache Avro's C library) decodes Avro records, and
# libcurl4-openssl-dev asks the schema registry for their schemas.
#
# iproute2 (ip netns) and nftables (nft) give each reliability scenario a
# network namespace of its own, where the network scenarios drop and reset
# packets by port without touching the machine's network or another
# scenario's; the suite fails without them.
#
# postgresql-15-partman (pg_partman) is for the partitions suite, which runs
# docs/OPERATIONS.md's conversion of app_stats into a table partitioned by
# day and pg_partman's maintenance against it; the service never needs it.
#
# chromium (headless) loads the status page in the status suite; with
# --no-install-recommends it comes without fonts, hence fonts-liberation
# for a readable screenshot.
set -eu

# The deploy suite checks deploy/ with systemd-analyze, promtool, a YAML
# parser, docker-compose (the Compose schema; no engine needed), groff/man, and
# strace (a run against the unit's sandbox). make bench draws its charts with
# gnuplot (gnuplot-nox: no X11); the bench suite checks them with xmllint.
PACKAGES="build-essential pkg-config librdkafka-dev libpq-dev libjansson-dev libsimdjson-dev libmicrohttpd-dev libcmocka-dev
libavro-dev libcurl4-openssl-dev python3-avro python3-requests python3-jsonschema
postgresql-15 postgresql-client-15 postgresql-15-partman kcat procps clang libclang-rt-14-dev
systemd prometheus python3-yaml docker-compose groff-base man-db strace jq gnuplot-nox libxml2-utils
chromium fonts-liberation openssl iproute2 nftables python3-confluent-kafka"

case "${1:-}" in
"") ;;
image) PACKAGES="$PACKAGES debootstrap podman uidmap fuse-overlayfs" ;;
*) echo "usage: scripts/install-deps.sh [image]" >&2; exit 2 ;;
esac

missing=""
for p in $PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
    SUDO=sudo
else
    SUDO=
fi
echo "install-deps: installing:$missing"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
