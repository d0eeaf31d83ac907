#!/usr/bin/env bash
# Build the pinned OpenSSL, liboqs and oqs-provider, then relic and bfe-bf (Bloom Filter Encryption)
# and ngtcp2 (the second QUIC engine),
# once into $PQS_CACHE and write build/deps.mk, which the testbed Makefile includes. A second run
# finds the builds and only rewrites deps.mk.
# Usage: testbed/deps/build-stack.sh OUT_MK
. "$(dirname "$0")/common.sh"

out_mk=${1:?usage: build-stack.sh OUT_MK}

# TLS certificate compression (RFC 8879: zlib, brotli, zstd) on, against the system's libraries
# (zlib1g-dev, libbrotli-dev, libzstd-dev): the static libcrypto then needs them on every link line
# (COMPRESSION_LIBS, written into deps.mk for testbed/Makefile and given to ngtcp2's configure).
OPENSSL_OPTS="no-shared no-module no-legacy no-tests no-docs enable-zlib enable-brotli enable-zstd"
COMPRESSION_LIBS="-lbrotlienc -lbrotlidec -lbrotlicommon -lzstd -lz"
# oqs-provider as a static library (entry point oqs_provider_init) for OSSL_PROVIDER_add_builtin,
# position-independent so that testbed/ can also link it into a module for the openssl program;
# its tests and examples are not built (BUILD_TESTING=OFF).
OQSPROVIDER_OPTS="-DCMAKE_BUILD_TYPE=Release -DOQS_PROVIDER_BUILD_STATIC=ON -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DBUILD_TESTING=OFF"
# The patches applied to the verified tree (OQSPROVIDER_PATCHES in versions.env, name:sha256 each):
# part of the cache key and of PQS-BUILD-INFO, so a changed patch list means a new build.
OQSPROVIDER_PATCH="${OQSPROVIDER_PATCHES:-none}"
LIBOQS_OPTS="-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DOQS_BUILD_ONLY_LIB=ON -DOQS_USE_OPENSSL=OFF -DOQS_DIST_BUILD=ON -DOQS_ENABLE_KEM_HQC=ON"
# relic 0.6.0 for bfe-bf: BLS12-381 (FP_PRIME=381) with the x64 assembly for 6-limb fields
# (ARITH=x64-asm-6l), lazy-reduction pairings (close to relic's own BLS12-381 preset); static and
# position-independent; no tests, benchmarks or timers. Not the crate's build.rs options: it asks
# for ARITH=x64-asm-382, which 0.6.0 lacks, and relic silently falls back to portable C (about 3x
# slower). CHECK=OFF is required: with CHECK=ON bfe-bf's core.c does not compile (RLC_TRY without
# RLC_CATCH). Semicolons are CMake list separators inside one value.
RELIC_OPTS="-DCMAKE_BUILD_TYPE=Release -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DWSIZE=64 -DRAND=UDEV -DSHLIB=OFF \
-DSTLIB=ON -DSTBIN=OFF -DTIMER= -DCHECK=OFF -DBENCH=0 -DTESTS=0 -DVERBS=OFF -DFP_PRIME=381 \
-DFP_METHD=INTEG;INTEG;INTEG;MONTY;LOWER;LOWER;SLIDE -DFP_PMERS=off -DFP_QNRES=on -DFPX_METHD=INTEG;INTEG;LAZYR \
-DEP_PLAIN=off -DEP_SUPER=off -DPP_METHD=LAZYR;OATEP -DARCH=X64 -DARITH=x64-asm-6l"
# bfe-bf: only its static library (target bfe_static), position-independent; its tests (cgreen,
# not in Debian), benchmark (cxxopts) and documentation (Doxygen) are not looked for.
# BFE_PATCH: its CMakeLists.txt turns on link-time optimisation for the library when gcc can;
# the archive would then hold GCC bytecode only, which clang (the sanitizer and fuzz builds)
# cannot link. build_bfe switches it off in the unpacked copy (after the tree is verified).
BFE_OPTS="-DCMAKE_BUILD_TYPE=Release -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DCMAKE_DISABLE_FIND_PACKAGE_cgreen=ON \
-DCMAKE_DISABLE_FIND_PACKAGE_cxxopts=ON -DCMAKE_DISABLE_FIND_PACKAGE_Doxygen=ON"
BFE_PATCH="LTO off (check_ipo_supported replaced by LTO_SUPPORTED OFF)"
# ngtcp2: libngtcp2.a and its OpenSSL backend libngtcp2_crypto_ossl.a (OpenSSL >= 3.5's QUIC TLS
# interface), static and position-independent, against the pinned OpenSSL (static); no examples
# (they need nghttp3 and libev), no tests (the tag's archive lacks the munit submodule).
NGTCP2_OPTS="-DCMAKE_BUILD_TYPE=Release -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DENABLE_OPENSSL=ON -DENABLE_LIB_ONLY=ON \
-DENABLE_STATIC_LIB=ON -DENABLE_SHARED_LIB=OFF -DBUILD_TESTING=OFF -DENABLE_GNUTLS=OFF -DENABLE_BORINGSSL=OFF \
-DENABLE_PICOTLS=OFF -DENABLE_WOLFSSL=OFF -DENABLE_JEMALLOC=OFF"
# relic and bfe-bf are built everywhere, the container image's build (PQS_IMAGE_BUILD) included:
# every program links them (testbed/Makefile, the mode fs0rtt), statically, so the image's
# runtime stage needs none of their libraries (only libsodium, GMP and libgomp: the --runtime
# list of scripts/install-system-packages.sh), just their PQS-BUILD-INFO for `pqshake doctor`.

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
  unpack_release LIBOQS "$work"
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
  apply_patches "$SRC_ROOT" $OQSPROVIDER_PATCHES
  say "building oqs-provider $OQSPROVIDER_VERSION from $SOURCE_DESC (about a minute, once)"
  (
    # shellcheck disable=SC2086
    cmake -S "$SRC_ROOT" -B "$work/build" -G Ninja -DCMAKE_INSTALL_PREFIX="$prefix.tmp" \
      -DCMAKE_INSTALL_LIBDIR=lib -DOPENSSL_ROOT_DIR="$ossl_prefix" -DOPENSSL_USE_STATIC_LIBS=TRUE \
      -Dliboqs_DIR="$oqs_prefix/lib/cmake/liboqs" $OQSPROVIDER_OPTS >"$work/configure.log" 2>&1
    ninja -C "$work/build" -j"$JOBS" >"$work/build.log" 2>&1
    ninja -C "$work/build" install >>"$work/build.log" 2>&1
  ) || { tail -n 30 "$work"/*.log >&2; die "oqs-provider build failed; logs in $work"; }
  printf 'oqs-provider %s\nsource: %s\noptions: %s\npatch: %s\nagainst: %s %s\n' "$OQSPROVIDER_VERSION" "$SOURCE_DESC" \
    "$OQSPROVIDER_OPTS" "$OQSPROVIDER_PATCH" "$(basename "$ossl_prefix")" "$(basename "$oqs_prefix")" >"$prefix.tmp/PQS-BUILD-INFO"
  mv "$prefix.tmp" "$prefix"
  rm -rf "$work"
}

build_relic() {
  local prefix=$1 work
  work=$(mktemp -d "$PQS_CACHE/work.XXXXXX")
  unpack_source RELIC "$work"
  say "building relic $RELIC_VERSION from $SOURCE_DESC (under a minute, once)"
  (
    # relic takes $CFLAGS from the environment instead of its -O2 defaults: not from ours.
    # shellcheck disable=SC2086
    env -u CFLAGS cmake -S "$SRC_ROOT" -B "$work/build" -G Ninja -DCMAKE_INSTALL_PREFIX="$prefix.tmp" \
      $RELIC_OPTS >"$work/configure.log" 2>&1
    ninja -C "$work/build" -j"$JOBS" >"$work/build.log" 2>&1
    ninja -C "$work/build" install >>"$work/build.log" 2>&1
  ) || { tail -n 30 "$work"/*.log >&2; die "relic build failed; logs in $work"; }
  [ -f "$prefix.tmp/lib/librelic_s.a" ] && [ -f "$prefix.tmp/include/relic/relic.h" ] \
    || die "relic build installed no lib/librelic_s.a + include/relic/relic.h; logs in $work"
  printf 'relic %s\nsource: %s\noptions: %s\n' "$RELIC_VERSION" "$SOURCE_DESC" "$RELIC_OPTS" >"$prefix.tmp/PQS-BUILD-INFO"
  mv "$prefix.tmp" "$prefix"
  rm -rf "$work"
}

build_bfe() {
  local prefix=$1 work
  work=$(mktemp -d "$PQS_CACHE/work.XXXXXX")
  unpack_release BFE "$work"
  say "building bfe-bf $BFE_VERSION from $SOURCE_DESC (under a minute, once)"
  local ipo='check_ipo_supported(RESULT LTO_SUPPORTED)'
  grep -qxF "$ipo" "$SRC_ROOT/CMakeLists.txt" || die "bfe-bf's CMakeLists.txt has no line '$ipo' to switch LTO off (BFE_PATCH)"
  sed -i "s/^check_ipo_supported(RESULT LTO_SUPPORTED)\$/set(LTO_SUPPORTED OFF)/" "$SRC_ROOT/CMakeLists.txt"
  (
    # relic 0.6.0 installs no pkg-config file and names its library librelic_s.a: both given.
    # shellcheck disable=SC2086
    cmake -S "$SRC_ROOT" -B "$work/build" -G Ninja -DRELIC_INCLUDE_DIR="$relic_prefix/include" \
      -DRELIC_LIBRARY="$relic_prefix/lib/librelic_s.a" $BFE_OPTS >"$work/configure.log" 2>&1
    ninja -C "$work/build" -j"$JOBS" bfe_static >"$work/build.log" 2>&1
    # upstream's install step installs the shared library only: the static one by hand, with
    # the public headers where upstream installs them (include/bfe/).
    mkdir -p "$prefix.tmp/lib" "$prefix.tmp/include/bfe"
    cp "$work/build/libbfe_static.a" "$prefix.tmp/lib/"
    cp "$SRC_ROOT"/include/*.h "$prefix.tmp/include/bfe/"
  ) || { tail -n 30 "$work"/*.log >&2; die "bfe-bf build failed; logs in $work"; }
  printf 'bfe-bf %s\nsource: %s\noptions: %s\npatch: %s\nagainst: %s\n' "$BFE_VERSION" "$SOURCE_DESC" "$BFE_OPTS" \
    "$BFE_PATCH" "$(basename "$relic_prefix")" >"$prefix.tmp/PQS-BUILD-INFO"
  mv "$prefix.tmp" "$prefix"
  rm -rf "$work"
}

build_ngtcp2() {
  local prefix=$1 work
  work=$(mktemp -d "$PQS_CACHE/work.XXXXXX")
  unpack_release NGTCP2 "$work"
  say "building ngtcp2 $NGTCP2_VERSION from $SOURCE_DESC (under a minute, once)"
  # Its configure checks (SSL_set_quic_tls_cbs, which turns the crypto/ossl backend on) link
  # against the static libcrypto, which needs the compression libraries: given with it, as a
  # CMake list (FindOpenSSL does not know about them). CMake takes every entry of that list as
  # a file (it would make "-lz" a path under the current directory), so each -lNAME becomes the
  # file the compiler's linker would pick for it.
  local crypto_libs="$ossl_prefix/lib/libcrypto.a" l f
  for l in $COMPRESSION_LIBS; do
    f=$(${CC:-cc} -print-file-name="lib${l#-l}.so")
    [ "$f" != "lib${l#-l}.so" ] || die "lib${l#-l}.so not found for $l (scripts/install-system-packages.sh installs it)"
    crypto_libs="$crypto_libs;$f"
  done
  (
    # shellcheck disable=SC2086
    cmake -S "$SRC_ROOT" -B "$work/build" -G Ninja -DCMAKE_INSTALL_PREFIX="$prefix.tmp" \
      -DCMAKE_INSTALL_LIBDIR=lib -DOPENSSL_ROOT_DIR="$ossl_prefix" -DOPENSSL_USE_STATIC_LIBS=TRUE \
      -DOPENSSL_CRYPTO_LIBRARY="$crypto_libs" $NGTCP2_OPTS >"$work/configure.log" 2>&1
    ninja -C "$work/build" -j"$JOBS" >"$work/build.log" 2>&1
    ninja -C "$work/build" install >>"$work/build.log" 2>&1
  ) || { tail -n 30 "$work"/*.log >&2; die "ngtcp2 build failed; logs in $work"; }
  [ -f "$prefix.tmp/lib/libngtcp2.a" ] && [ -f "$prefix.tmp/lib/libngtcp2_crypto_ossl.a" ] \
    || die "ngtcp2 build installed no lib/libngtcp2.a + lib/libngtcp2_crypto_ossl.a (is the OpenSSL backend on?); logs in $work"
  printf 'ngtcp2 %s\nsource: %s\noptions: %s\nagainst: %s\n' "$NGTCP2_VERSION" "$SOURCE_DESC" "$NGTCP2_OPTS" \
    "$(basename "$ossl_prefix")" >"$prefix.tmp/PQS-BUILD-INFO"
  mv "$prefix.tmp" "$prefix"
  rm -rf "$work"
}

ossl_prefix="$PQS_CACHE/$(cache_key openssl "$OPENSSL_VERSION" "$OPENSSL_OPTS")"
oqs_prefix="$PQS_CACHE/$(cache_key liboqs "$LIBOQS_VERSION" "$LIBOQS_OPTS")"
# Keyed by the two builds it links against too: a new OpenSSL or liboqs build means a new one.
oqsprov_prefix="$PQS_CACHE/$(cache_key oqs-provider "$OQSPROVIDER_VERSION" "$OQSPROVIDER_OPTS" \
  "$OQSPROVIDER_PATCH" "$(basename "$ossl_prefix")" "$(basename "$oqs_prefix")")"
relic_prefix="$PQS_CACHE/$(cache_key relic "$RELIC_VERSION" "$RELIC_OPTS")"
bfe_prefix="$PQS_CACHE/$(cache_key bfe-bf "$BFE_VERSION" "$BFE_OPTS" "$BFE_PATCH" "$(basename "$relic_prefix")")"
# Keyed by the OpenSSL build it links against (and the libraries that build needs).
ngtcp2_prefix="$PQS_CACHE/$(cache_key ngtcp2 "$NGTCP2_VERSION" "$NGTCP2_OPTS" "$COMPRESSION_LIBS" "$(basename "$ossl_prefix")")"

# PQS_DEPS_VERIFY_ONLY=1: fetch/unpack and verify the sources, build nothing (tests use it);
# a list of components (e.g. OQSPROVIDER) verifies only those.
if [ -n "${PQS_DEPS_VERIFY_ONLY:-}" ]; then
  comps=$PQS_DEPS_VERIFY_ONLY
  [ "$comps" = 1 ] && comps="OPENSSL LIBOQS OQSPROVIDER RELIC BFE NGTCP2"
  for comp in $comps; do
    work=$(mktemp -d "$PQS_CACHE/work.XXXXXX")
    case $comp in
      OPENSSL|RELIC) unpack_source "$comp" "$work" ;;
      LIBOQS|BFE|NGTCP2) unpack_release "$comp" "$work" ;;
      OQSPROVIDER) unpack_release "$comp" "$work"; apply_patches "$SRC_ROOT" $OQSPROVIDER_PATCHES ;;
      *) die "PQS_DEPS_VERIFY_ONLY: unknown component $comp (OPENSSL, LIBOQS, OQSPROVIDER, RELIC, BFE, NGTCP2 or 1)" ;;
    esac
    say "$comp: $SOURCE_DESC -> $SRC_ROOT"
    rm -rf "$work"
  done
  exit 0
fi

for pair in "openssl:$ossl_prefix" "liboqs:$oqs_prefix" "oqsprovider:$oqsprov_prefix" \
  "relic:$relic_prefix" "bfe:$bfe_prefix" "ngtcp2:$ngtcp2_prefix"; do
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
# What the static libcrypto needs besides libc (certificate compression, OPENSSL_OPTS): every
# program that links libcrypto.a links these after it.
OPENSSL_EXTRA_LIBS := $COMPRESSION_LIBS
LIBOQS_PREFIX := $oqs_prefix
OQSPROVIDER_VERSION := $OQSPROVIDER_VERSION
OQSPROVIDER_PREFIX := $oqsprov_prefix
# relic and bfe-bf (static libraries), linked into every program (the mode fs0rtt), the
# container image's included; testbed/Makefile refuses to link with these empty.
RELIC_VERSION := $RELIC_VERSION
RELIC_PREFIX := $relic_prefix
BFE_VERSION := $BFE_VERSION
BFE_PREFIX := $bfe_prefix
# ngtcp2 (static libraries), the QUIC engine of --quic-engine ngtcp2, linked into every program.
NGTCP2_VERSION := $NGTCP2_VERSION
NGTCP2_PREFIX := $ngtcp2_prefix
MK
mv "$out_mk.tmp" "$out_mk"
