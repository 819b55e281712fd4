#!/bin/sh
# Installs the Debian packages storage-consumer needs to build, test and run
# its demo. Does nothing when they are all present, so `make test` can call
# it every time.
#
# prometheus is there for promtool, the reference checker of the /metrics
# exposition (tests/integration/metrics.sh): a 19 MB download, 96 MB
# installed, about 12 s. On a machine that runs systemd the package also
# enables a Prometheus server on port 9090; a container or CI runner without
# it gets the tools only.
set -eu

PACKAGES="build-essential pkg-config librdkafka-dev libpq-dev libjansson-dev libmicrohttpd-dev libcmocka-dev
postgresql-15 postgresql-client-15 kcat procps clang libclang-rt-14-dev prometheus"

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
