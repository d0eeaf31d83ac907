#!/usr/bin/env bash
# Build the pinned OpenSSL, liboqs and oqs-provider once into $PQS_CACHE and write build/deps.mk, which the
# testbed Makefile includes. A second run finds the builds and only rewrites deps.mk.
# Usage: testbed/deps/build-stack.sh OUT_MK
. "$(dirname "$0")/common.sh"

out_mk=${1:?usage: build-stack.sh OUT_MK}

OPENSSL_OPTS="no-shared no-module no-legacy no-tests no-docs"
# oqs-provider as a static library (entry point oqs_provider_init) for OSSL_PROVIDER_add_builtin,
# position-independent so that testbed/ can also link it into a module for the openssl program;
# its tests and examples are not built (BUILD_TESTING=OFF).
OQSPROVIDER_OPTS="-DCMAKE_BUILD_TYPE=Release -DOQS_PROVIDER_BUILD_STATIC=ON -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DBUILD_TESTING=OFF"
LIBOQS_OPTS="-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DOQS_BUILD_ONLY_LIB=ON -DOQS_USE_OPENSSL=OFF -DOQS_DIST_BUILD=ON -DOQS_ENABLE_KEM_HQC=ON"

mkdir -p "$PQS_CACHE"
exec 9>"$PQS_CACHE/.lock"
flock 9 || die "cannot lock $PQS_CACHE/.lock"

build_openssl() {
  local prefix=$1 work
  work=$(mktemp -d "$PQS_CACHE/work.XXXXXX")
  unpack_source OPENSSL "$work"
  say "building OpenSSL $OPENSSL_VERSION from $SOURCE_DESC (a few minutes, once)"
  (
    cd "$SRC_ROOT"
    # shellcheck disable=SC2086
    ./Configure --prefix="$prefix.tmp" --libdir=lib $OPENSSL_OPTS >"$work/configure.log" 2>&1
    # build_libs and build_programs race when run in one parallel make, so two steps.
    make -j"$JOBS" build_libs >"$work/build.log" 2>&1
    make -j"$JOBS" build_programs >>"$work/build.log" 2>&1
    make install_sw >>"$work/build.log" 2>&1
  ) || { tail -n 30 "$work"/*.log >&2; die "OpenSSL build failed; logs in $work"; }
  printf 'OpenSSL %s\nsource: %s\noptions: %s\n' "$OPENSSL_VERSION" "$SOURCE_DESC" "$OPENSSL_OPTS" >"$prefix.tmp/PQS-BUILD-INFO"
  mv "$prefix.tmp" "$prefix"
  rm -rf "$work"
}

build_liboqs() {
  local prefix=$1 work
  work=$(mktemp -d "$PQS_CACHE/work.XXXXXX")
  unpack_source LIBOQS "$work"
  say "building liboqs $LIBOQS_VERSION from $SOURCE_DESC (a few minutes, once)"
  (
    # shellcheck disable=SC2086
    cmake -S "$SRC_ROOT" -B "$work/build" -G Ninja -DCMAKE_INSTALL_PREFIX="$prefix.tmp" \
      -DCMAKE_INSTALL_LIBDIR=lib $LIBOQS_OPTS >"$work/configure.log" 2>&1
    ninja -C "$work/build" -j"$JOBS" >"$work/build.log" 2>&1
    ninja -C "$work/build" install >>"$work/build.log" 2>&1
  ) || { tail -n 30 "$work"/*.log >&2; die "liboqs build failed; logs in $work"; }
  printf 'liboqs %s\nsource: %s\noptions: %s\n' "$LIBOQS_VERSION" "$SOURCE_DESC" "$LIBOQS_OPTS" >"$prefix.tmp/PQS-BUILD-INFO"
  mv "$prefix.tmp" "$prefix"
  rm -rf "$work"
}

build_oqsprovider() {
  local prefix=$1 work
  work=$(mktemp -d "$PQS_CACHE/work.XXXXXX")
  unpack_release OQSPROVIDER "$work"
  say "building oqs-provider $OQSPROVIDER_VERSION from $SOURCE_DESC (about a minute, once)"
  (
    # shellcheck disable=SC2086
    cmake -S "$SRC_ROOT" -B "$work/build" -G Ninja -DCMAKE_INSTALL_PREFIX="$prefix.tmp" \
      -DCMAKE_INSTALL_LIBDIR=lib -DOPENSSL_ROOT_DIR="$ossl_prefix" -DOPENSSL_USE_STATIC_LIBS=TRUE \
      -Dliboqs_DIR="$oqs_prefix/lib/cmake/liboqs" $OQSPROVIDER_OPTS >"$work/configure.log" 2>&1
    ninja -C "$work/build" -j"$JOBS" >"$work/build.log" 2>&1
    ninja -C "$work/build" install >>"$work/build.log" 2>&1
  ) || { tail -n 30 "$work"/*.log >&2; die "oqs-provider build failed; logs in $work"; }
  printf 'oqs-provider %s\nsource: %s\noptions: %s\nagainst: %s %s\n' "$OQSPROVIDER_VERSION" "$SOURCE_DESC" \
    "$OQSPROVIDER_OPTS" "$(basename "$ossl_prefix")" "$(basename "$oqs_prefix")" >"$prefix.tmp/PQS-BUILD-INFO"
  mv "$prefix.tmp" "$prefix"
  rm -rf "$work"
}

ossl_prefix="$PQS_CACHE/$(cache_key openssl "$OPENSSL_VERSION" "$OPENSSL_OPTS")"
oqs_prefix="$PQS_CACHE/$(cache_key liboqs "$LIBOQS_VERSION" "$LIBOQS_OPTS")"
# Keyed by the two builds it links against too: a new OpenSSL or liboqs build means a new one.
oqsprov_prefix="$PQS_CACHE/$(cache_key oqs-provider "$OQSPROVIDER_VERSION" "$OQSPROVIDER_OPTS" \
  "$(basename "$ossl_prefix")" "$(basename "$oqs_prefix")")"

# PQS_DEPS_VERIFY_ONLY=1: fetch/unpack and verify the sources, build nothing (tests use it);
# a list of components (e.g. OQSPROVIDER) verifies only those.
if [ -n "${PQS_DEPS_VERIFY_ONLY:-}" ]; then
  comps=$PQS_DEPS_VERIFY_ONLY
  [ "$comps" = 1 ] && comps="OPENSSL LIBOQS OQSPROVIDER"
  for comp in $comps; do
    work=$(mktemp -d "$PQS_CACHE/work.XXXXXX")
    case $comp in
      OPENSSL|LIBOQS) unpack_source "$comp" "$work" ;;
      OQSPROVIDER) unpack_release "$comp" "$work" ;;
      *) die "PQS_DEPS_VERIFY_ONLY: unknown component $comp (OPENSSL, LIBOQS, OQSPROVIDER or 1)" ;;
    esac
    say "$comp: $SOURCE_DESC -> $SRC_ROOT"
    rm -rf "$work"
  done
  exit 0
fi

for pair in "openssl:$ossl_prefix" "liboqs:$oqs_prefix" "oqsprovider:$oqsprov_prefix"; do
  comp=${pair%%:*} prefix=${pair#*:}
  if [ -f "$prefix/PQS-BUILD-INFO" ]; then
    say "$comp: cached build $prefix"
  else
    rm -rf "$prefix.tmp"
    "build_$comp" "$prefix"
  fi
  sed -n 's/^/deps:   /p' "$prefix/PQS-BUILD-INFO" >&2
done

mkdir -p "$(dirname "$out_mk")"
cat >"$out_mk.tmp" <<MK
# Written by testbed/deps/build-stack.sh; do not edit.
OPENSSL_VERSION := $OPENSSL_VERSION
LIBOQS_VERSION := $LIBOQS_VERSION
OPENSSL_PREFIX := $ossl_prefix
LIBOQS_PREFIX := $oqs_prefix
OQSPROVIDER_VERSION := $OQSPROVIDER_VERSION
OQSPROVIDER_PREFIX := $oqsprov_prefix
MK
mv "$out_mk.tmp" "$out_mk"
