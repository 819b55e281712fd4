#!/bin/sh
# Installs the Debian packages storage-consumer needs to build, test and run
# its demo. Does nothing when they are all present, so `make test` can call
# it every time.
set -eu

PACKAGES="build-essential pkg-config librdkafka-dev libpq-dev libjansson-dev libmicrohttpd-dev libcmocka-dev
postgresql-15 postgresql-client-15 kcat procps clang libclang-rt-14-dev jq"

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
