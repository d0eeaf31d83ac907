#!/usr/bin/env bash
# Build docker/Dockerfile with podman, without a registry: a local Debian base made by debootstrap
# stands in for the pinned one (the Dockerfile takes its base as the build argument BASE).
#
#   docker/podman-build.sh            # prints the image name (localhost/pqshake:local)
#   PQS_PODMAN=... to see the podman command line this uses (for podman run / image mount)
#
# Everything lives under $PQS_CACHE/podman (default ~/.cache/pqshake/podman), a storage of its
# own (--root/--runroot): a user's own images and containers are never seen or touched, and a
# second build reuses the base and every unchanged layer. The base is keyed by suite and month
# (debootstrap fetches the suite's current packages: a new month, a new base, a full rebuild).
# Steps run with --isolation=chroot (no OCI runtime needed to build; see docker/README.md for
# running). Needs root, debootstrap and podman (scripts/install-system-packages.sh --test installs both).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cache=${PQS_CACHE:-$HOME/.cache/pqshake}
store=$cache/podman
suite=${PQS_BASE_SUITE:-bookworm}
key=$suite-$(date -u +%Y-%m)
base=localhost/pqs-base:$key
image=${1:-localhost/pqshake:local}
podman=(podman --root "$store/root" --runroot "$store/runroot" --storage-driver overlay)

die() { echo "podman-build: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (debootstrap, podman storage of its own)"
for t in podman debootstrap; do
  command -v "$t" >/dev/null || die "$t not installed (bash scripts/install-system-packages.sh --test)"
done
mkdir -p "$store"
exec 9>"$store/.lock"
flock 9 || die "cannot lock $store/.lock"

if ! "${podman[@]}" image exists "$base"; then
  rootfs=$(mktemp -d "$store/pqs-base.XXXXXX")
  trap 'rm -rf "$rootfs"' EXIT
  echo "podman-build: debootstrap --variant=minbase $suite (about 30 s, once a month)" >&2
  # shellcheck disable=SC2086  # PQS_DEBIAN_MIRROR: optional mirror URL (debootstrap's default otherwise)
  debootstrap --variant=minbase "$suite" "$rootfs" ${PQS_DEBIAN_MIRROR:-} >"$store/debootstrap.log" 2>&1 \
    || { tail -n 20 "$store/debootstrap.log" >&2; die "debootstrap failed (log: $store/debootstrap.log)"; }
  # Caches of the bootstrap itself are not part of a base image.
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" --numeric-owner -c . | "${podman[@]}" import --message "debootstrap $suite minbase" - "$base" >/dev/null
  rm -rf "$rootfs"
  trap - EXIT
fi

# The pinned stack's sources, when this machine has them (verified by the same sha256 checks
# inside): the OpenSSL, relic, AWS-LC and s2n-tls crates, the liboqs, oqs-provider, bfe-bf and ngtcp2 tarballs and
# oqs-provider's patches, staged and mounted read-only for the build steps only (PQS_SOURCES_DIR),
# so the image builds without reaching a crate registry or code hosting. All or none: missing
# any, none is mounted and the build fetches them all (the patches are never downloaded: without
# them staged, the oqs-provider build stops naming the missing file). The lookup is testbed/deps/common.sh's (find_source), as for
# `make deps`.
# shellcheck disable=SC1091
PQS_CACHE=$cache . "$top/testbed/deps/common.sh"
die() { echo "podman-build: $*" >&2; exit 1; }  # ours again, not common.sh's "deps:" one
want=("$OPENSSL_CRATE-$OPENSSL_CRATE_VERSION.crate" "$LIBOQS_TARBALL" "$OQSPROVIDER_TARBALL"
  "$RELIC_CRATE-$RELIC_CRATE_VERSION.crate" "$BFE_TARBALL" "$NGTCP2_TARBALL"
  "$AWSLC_CRATE-$AWSLC_CRATE_VERSION.crate" "$S2N_CRATE-$S2N_CRATE_VERSION.crate")
# (the project's own patches are in the build context already: testbed/deps/patches/)
for p in $OQSPROVIDER_PATCHES; do [ -f "$top/testbed/deps/patches/${p%%:*}" ] || want+=("${p%%:*}"); done
stage=$store/sources
rm -rf "$stage"; mkdir -p "$stage"
for f in "${want[@]}"; do
  src=$(PQS_CACHE=$cache find_source "$f")
  [ -z "$src" ] || cp "$src" "$stage/"
done
srcs=()
if [ "$(ls "$stage" | wc -l)" = "${#want[@]}" ]; then
  srcs=(--volume "$stage:/pqs-sources:ro" --build-arg PQS_SOURCES_DIR=/pqs-sources)
else
  missing=()
  for f in "${want[@]}"; do [ -f "$stage/$f" ] || missing+=("$f"); done
  echo "podman-build: not staged (${missing[*]} not found): the build fetches the sources" >&2
fi
# The host's CA bundle for pip, when the host names one (a local CA in front of the index).
cert=${PIP_CERT:-${SSL_CERT_FILE:-}}
if [ -n "$cert" ] && [ -f "$cert" ]; then
  srcs+=(--volume "$cert:/pqs-host-ca.crt:ro" --build-arg PIP_CERT=/pqs-host-ca.crt)
fi
cd "$top"
"${podman[@]}" build --isolation=chroot --layers --build-arg "BASE=$base" "${srcs[@]}" \
  --ignorefile docker/Dockerfile.dockerignore -f docker/Dockerfile -t "$image" . >&2
echo "$image"
