#!/usr/bin/env bash
# make image-test: builds deploy/Containerfile and runs what the image holds
# (docs/DESIGN.md: Deployment). No registry is needed: the Debian 12 base is
# made with debootstrap (cached in BUILD/image, so a second run reuses it) and
# imported into podman; the image is built with chroot isolation, a container
# of it created and its root mounted, and its binary run with chroot against
# the test PostgreSQL and broker on loopback, as the image's user, with the
# image's own libraries.
#
#   tests/image/run.sh BUILD        (BUILD holds kafka-mock-broker)
#
# TAP output like the integration suites; exit status 0 only if every test
# passed.
set -uo pipefail

build=${1:?usage: tests/image/run.sh BUILD}
top=$(cd "$(dirname "$0")/../.." && pwd)
export STORAGE_TEST_TOP=$top
export STORAGE_TEST_BUILD=$(cd "$build" && pwd)
cache=$STORAGE_TEST_BUILD/image
base_image=localhost/storage-consumer-base:bookworm
image=localhost/storage-consumer:image-test
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

[ "$(id -u)" -eq 0 ] || { echo "tests/image/run.sh: needs root (debootstrap, chroot)" >&2; exit 1; }
started=$SECONDS

step() { echo "# $(date -u +%H:%M:%S) $*"; }

# The base root file system, built once.
mkdir -p "$cache"
if [ ! -f "$cache/rootfs/.complete" ]; then
    step "debootstrap --variant=minbase bookworm (once; cached in $cache/rootfs)"
    rm -rf "$cache/rootfs.tmp" "$cache/rootfs"
    debootstrap --variant=minbase bookworm "$cache/rootfs.tmp" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
        { tail -n 20 "$cache/debootstrap.log" >&2; exit 1; }
    mv "$cache/rootfs.tmp" "$cache/rootfs"
    touch "$cache/rootfs/.complete"
    podman image rm -f "$base_image" >/dev/null 2>&1 || true
fi
if ! podman image exists "$base_image"; then
    step "podman import $base_image"
    tar -C "$cache/rootfs" --exclude=./.complete -c . | podman import - "$base_image" >/dev/null || exit 1
fi

step "podman build deploy/Containerfile"
build_started=$SECONDS
# Docker format: the OCI image format has no HEALTHCHECK.
if ! podman build --format docker --isolation chroot --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 \
    --build-arg BASE="$base_image" -f "$top/deploy/Containerfile" -t "$image" "$top" \
    >"$cache/build.log" 2>&1; then
    tail -n 40 "$cache/build.log" >&2
    exit 1
fi
step "built in $((SECONDS - build_started)) s"

# A container's root file system (the image's layers and a writable one on
# top), mounted without starting the container: where podman run cannot
# start one (cgroups in hybrid mode, rlimits refused), chroot does the rest.
container=$(podman create --name storage-consumer-image-test --replace "$image") || exit 1
ROOT=$(podman mount "$container") || exit 1
export ROOT IMAGE=$image CONTAINER=$container
trap 'podman umount "$CONTAINER" >/dev/null 2>&1; podman rm -f "$CONTAINER" >/dev/null 2>&1' EXIT

# The suite itself, with the shared helpers (a subshell of its own: lib.sh
# installs its own exit trap).
bash "$top/tests/image/suite.sh" | tee "$cache/suite.log"
rc=${PIPESTATUS[0]}
passed=$(grep -cE '^ok [0-9]+' "$cache/suite.log")
failed=$(grep -cE '^not ok [0-9]+' "$cache/suite.log")
echo "# $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ] || rc=1
step "image test took $((SECONDS - started)) s"
exit "$rc"
