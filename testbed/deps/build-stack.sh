#!/usr/bin/env bash
# Build the pinned OpenSSL, liboqs and oqs-provider, then relic and bfe-bf (Bloom Filter Encryption),
# ngtcp2 (the second QUIC engine), and AWS-LC with s2n-tls on it (every AWS-LC symbol renamed with
# a prefix, so that s2n-tls links into one program with OpenSSL),
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
# AWS-LC: libcrypto.a and libssl.a, static and position-independent; no tests, no bssl tool, and
# neither Go nor Perl (the crate's pre-generated sources are used). Built with a symbol prefix: the
# crate's prefix headers (generated-include/openssl/, beside aws-lc/) name every symbol of libcrypto
# as aws-lc-sys builds it, and rename it to AWSLC_SYMBOL_PREFIX_<name> (their default prefix, the
# crate's aws_lc_<version>, replaced by ours in build_awslc, so that code including the installed
# headers gets the prefixed names even without -DBORINGSSL_PREFIX). Their list lacks libssl's own
# symbols (SSL_*, TLS_method, ...), which would clash with OpenSSL's libssl.a: build_awslc renames
# whatever global C symbol the archives still define unprefixed (objcopy --redefine-syms, in both
# archives, references included) and adds it to the installed prefix header, then checks that none is
# left. AWSLC_SYMBOL_PREFIX is part of the cache key and goes into deps.mk.
AWSLC_OPTS="-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DBUILD_TESTING=OFF \
-DBUILD_TOOL=OFF -DDISABLE_GO=ON -DDISABLE_PERL=ON"
AWSLC_SYMBOL_PREFIX=pqs_awslc
# s2n-tls: libs2n.a, static and position-independent, against the AWS-LC build (its CMake config,
# AWS::crypto; -DBORINGSSL_PREFIX in CMAKE_C_FLAGS, which also reaches s2n's configure-time libcrypto
# feature probes); no tests and no s2nc/s2nd (BUILD_TESTING=OFF), no seccomp (libseccomp) and no
# integration tests (Python). S2N_ENFORCE_PROPER_LIBCRYPTO_FEATURE_PROBE stops the configure when the
# probes cannot link the libcrypto at all; build_s2n also requires the probes S2N_PROBES to succeed
# (ML-KEM key exchange, ML-DSA signatures: what the stack is for), which a libcrypto linked with the
# wrong symbol names would fail silently. Warnings are not errors (a newer compiler's warnings must
# not stop a pinned build).
S2N_OPTS="-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DBUILD_TESTING=OFF \
-DSECCOMP=OFF -DS2N_INTEG_TESTS=OFF -DS2N_INSTALL_S2NC_S2ND=OFF -DS2N_INTERN_LIBCRYPTO=OFF \
-DS2N_ENFORCE_PROPER_LIBCRYPTO_FEATURE_PROBE=ON -DUNSAFE_TREAT_WARNINGS_AS_ERRORS=OFF"
S2N_PROBES="S2N_LIBCRYPTO_SANITY_PROBE S2N_LIBCRYPTO_SUPPORTS_EVP_KEM S2N_LIBCRYPTO_SUPPORTS_MLKEM S2N_LIBCRYPTO_SUPPORTS_MLDSA"
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

# awslc_unprefixed LIBS...: the global C symbols the archives define without AWSLC_SYMBOL_PREFIX_
# (C++ names, _Z..., are left out: AWS-LC's C++ code is in namespace bssl::AWSLC_SYMBOL_PREFIX, and
# no C library defines one).
awslc_unprefixed() {
  nm -g --defined-only "$@" | awk 'NF == 3 && $2 ~ /^[A-Za-z]$/ { print $3 }' \
    | grep -v -e "^${AWSLC_SYMBOL_PREFIX}_" -e '^_Z' | LC_ALL=C sort -u || true
}

build_awslc() {
  local prefix=$1 work
  work=$(mktemp -d "$PQS_CACHE/work.XXXXXX")
  unpack_source AWSLC "$work"
  say "building AWS-LC $AWSLC_VERSION from $SOURCE_DESC (a minute or two, once)"
  # The crate's prefix headers, beside its aws-lc/ folder, copied with our prefix as their default.
  local gen="$SRC_ROOT/../generated-include/openssl" hdrs="$work/prefix-include" def f
  for f in boringssl_prefix_symbols.h boringssl_prefix_symbols_asm.h boringssl_prefix_symbols_nasm.inc; do
    [ -f "$gen/$f" ] || die "the crate $AWSLC_CRATE $AWSLC_CRATE_VERSION has no generated-include/openssl/$f (the symbol-prefix headers)"
  done
  def=$(sed -n 's/^#define BORINGSSL_PREFIX \([A-Za-z0-9_]*\)$/\1/p' "$gen/boringssl_prefix_symbols.h")
  [ -n "$def" ] || die "$gen/boringssl_prefix_symbols.h has no '#define BORINGSSL_PREFIX <name>' line to set the prefix in"
  mkdir -p "$hdrs/openssl"
  cp "$gen"/boringssl_prefix_symbols* "$hdrs/openssl/"
  sed -i "s/\\b$def\\b/$AWSLC_SYMBOL_PREFIX/g" "$hdrs"/openssl/boringssl_prefix_symbols*
  (
    # shellcheck disable=SC2086
    cmake -S "$SRC_ROOT" -B "$work/build" -G Ninja -DCMAKE_INSTALL_PREFIX="$prefix.tmp" -DCMAKE_INSTALL_LIBDIR=lib \
      -DBORINGSSL_PREFIX="$AWSLC_SYMBOL_PREFIX" -DBORINGSSL_PREFIX_HEADERS="$hdrs" $AWSLC_OPTS >"$work/configure.log" 2>&1
    ninja -C "$work/build" -j"$JOBS" >"$work/build.log" 2>&1
    ninja -C "$work/build" install >>"$work/build.log" 2>&1
  ) || { tail -n 30 "$work"/*.log >&2; die "AWS-LC build failed; logs in $work"; }
  local inc="$prefix.tmp/include/openssl" libs="$prefix.tmp/lib/libcrypto.a $prefix.tmp/lib/libssl.a"
  [ -f "$prefix.tmp/lib/libcrypto.a" ] && [ -f "$prefix.tmp/lib/libssl.a" ] && [ -f "$inc/ssl.h" ] \
    || die "AWS-LC build installed no lib/libcrypto.a + lib/libssl.a + include/openssl/ssl.h; logs in $work"
  grep -qx "#define BORINGSSL_PREFIX $AWSLC_SYMBOL_PREFIX" "$inc/boringssl_prefix_symbols.h" \
    && grep -q '^#include <openssl/boringssl_prefix_symbols.h>' "$inc/base.h" \
    || die "AWS-LC's installed headers do not rename to $AWSLC_SYMBOL_PREFIX (include/openssl/boringssl_prefix_symbols.h, base.h); logs in $work"
  # What the crate's list does not name: renamed in both archives (definitions and references) and
  # added to the installed prefix header, so that code compiled against it calls the new names.
  local left n
  # shellcheck disable=SC2086
  left=$(awslc_unprefixed $libs)
  n=$(printf '%s' "$left" | grep -c . || true)
  if [ "$n" -gt 0 ]; then
    if printf '%s\n' "$left" | grep -vqE '^[A-Za-z_][A-Za-z0-9_]*$'; then
      die "AWS-LC defines unprefixed symbols that are no C names: $(printf '%s\n' "$left" | grep -vE '^[A-Za-z_][A-Za-z0-9_]*$' | head -n 5 | tr '\n' ' ')"
    fi
    printf '%s\n' "$left" | awk -v p="$AWSLC_SYMBOL_PREFIX" '{ print $1, p "_" $1 }' >"$work/rename.map"
    for f in $libs; do
      { objcopy --redefine-syms="$work/rename.map" "$f" && ranlib "$f"; } || die "objcopy --redefine-syms failed on $f"
    done
    printf '%s\n' "$left" | awk '{ print "#define " $1 " BORINGSSL_ADD_PREFIX(BORINGSSL_PREFIX, " $1 ")" }' >"$work/rename.h"
    awk -v add="$work/rename.h" '/^#endif \/\/ BORINGSSL_PREFIX_SYMBOLS_H/ && !done {
        print "// Added by pqshake (testbed/deps/build-stack.sh): the symbols the list above lacks."
        while ((getline l < add) > 0) print l
        done = 1 } { print }' "$inc/boringssl_prefix_symbols.h" >"$work/prefix.h"
    grep -qxF "$(head -n1 "$work/rename.h")" "$work/prefix.h" \
      || die "no '#endif // BORINGSSL_PREFIX_SYMBOLS_H' in $inc/boringssl_prefix_symbols.h to add the renamed symbols before"
    cp "$work/prefix.h" "$inc/boringssl_prefix_symbols.h"
  fi
  # shellcheck disable=SC2086
  left=$(awslc_unprefixed $libs)
  [ -z "$left" ] || die "AWS-LC still defines symbols without the prefix $AWSLC_SYMBOL_PREFIX: $(printf '%s\n' "$left" | head -n 10 | tr '\n' ' ')"
  printf 'AWS-LC %s\nsource: %s\noptions: %s\nsymbol prefix: %s (the crate'"'"'s prefix headers; %s symbols they lack renamed in the archives and added to include/openssl/boringssl_prefix_symbols.h)\n' \
    "$AWSLC_VERSION" "$SOURCE_DESC" "$AWSLC_OPTS" "$AWSLC_SYMBOL_PREFIX" "$n" >"$prefix.tmp/PQS-BUILD-INFO"
  mv "$prefix.tmp" "$prefix"
  rm -rf "$work"
}

build_s2n() {
  local prefix=$1 work
  work=$(mktemp -d "$PQS_CACHE/work.XXXXXX")
  unpack_source S2N "$work"
  say "building s2n-tls $S2N_VERSION from $SOURCE_DESC against AWS-LC (under a minute, once)"
  (
    # shellcheck disable=SC2086
    cmake -S "$SRC_ROOT" -B "$work/build" -G Ninja -DCMAKE_INSTALL_PREFIX="$prefix.tmp" -DCMAKE_INSTALL_LIBDIR=lib \
      -DCMAKE_PREFIX_PATH="$awslc_prefix" -Dcrypto_DIR="$awslc_prefix/lib/crypto/cmake" \
      -DCMAKE_C_FLAGS="-DBORINGSSL_PREFIX=$AWSLC_SYMBOL_PREFIX" $S2N_OPTS >"$work/configure.log" 2>&1
    ninja -C "$work/build" -j"$JOBS" >"$work/build.log" 2>&1
    ninja -C "$work/build" install >>"$work/build.log" 2>&1
  ) || { tail -n 30 "$work"/*.log >&2; die "s2n-tls build failed; logs in $work"; }
  grep -q 'FOUND AWS-LC CRYPTO cmake config - static' "$work/configure.log" \
    || die "s2n-tls's configure did not take AWS-LC's static libcrypto from $awslc_prefix; logs in $work"
  local p
  for p in $S2N_PROBES; do
    grep -qx -- "-- feature $p: TRUE" "$work/configure.log" \
      || die "s2n-tls's libcrypto feature probe $p failed against $awslc_prefix (see $work/build/CMakeFiles/CMakeError.log); logs in $work"
  done
  [ -f "$prefix.tmp/lib/libs2n.a" ] && [ -f "$prefix.tmp/include/s2n.h" ] \
    || die "s2n-tls build installed no lib/libs2n.a + include/s2n.h; logs in $work"
  # libs2n.a calls AWS-LC by the prefixed names only: no undefined symbol AWS-LC defines prefixed.
  local bad
  bad=$(LC_ALL=C comm -12 <(nm -u "$prefix.tmp/lib/libs2n.a" | awk '$1 == "U" { print $2 }' | LC_ALL=C sort -u) \
    <(nm -g --defined-only "$awslc_prefix/lib/libcrypto.a" | awk -v p="${AWSLC_SYMBOL_PREFIX}_" \
      'NF == 3 && index($3, p) == 1 { print substr($3, length(p) + 1) }' | LC_ALL=C sort -u))
  [ -z "$bad" ] || die "libs2n.a calls AWS-LC without the prefix $AWSLC_SYMBOL_PREFIX: $(printf '%s\n' "$bad" | head -n 10 | tr '\n' ' ')"
  printf 's2n-tls %s\nsource: %s\noptions: %s\nsymbol prefix: %s (-DBORINGSSL_PREFIX, AWS-LC'"'"'s prefix headers)\nprobes: %s: TRUE\nagainst: %s\n' \
    "$S2N_VERSION" "$SOURCE_DESC" "$S2N_OPTS" "$AWSLC_SYMBOL_PREFIX" "$S2N_PROBES" "$(basename "$awslc_prefix")" >"$prefix.tmp/PQS-BUILD-INFO"
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
# Keyed by the crate too (its prefix headers are part of the build) and by the symbol prefix.
awslc_prefix="$PQS_CACHE/$(cache_key aws-lc "$AWSLC_VERSION" "$AWSLC_OPTS" "$AWSLC_CRATE $AWSLC_CRATE_VERSION" \
  "$AWSLC_SYMBOL_PREFIX")"
# Keyed by the AWS-LC build it links against (and its symbol prefix, in that build's key).
s2n_prefix="$PQS_CACHE/$(cache_key s2n-tls "$S2N_VERSION" "$S2N_OPTS" "$S2N_PROBES" "$(basename "$awslc_prefix")")"

# PQS_DEPS_VERIFY_ONLY=1: fetch/unpack and verify the sources, build nothing (tests use it);
# a list of components (e.g. OQSPROVIDER) verifies only those.
if [ -n "${PQS_DEPS_VERIFY_ONLY:-}" ]; then
  comps=$PQS_DEPS_VERIFY_ONLY
  [ "$comps" = 1 ] && comps="OPENSSL LIBOQS OQSPROVIDER RELIC BFE NGTCP2 AWSLC S2N"
  for comp in $comps; do
    work=$(mktemp -d "$PQS_CACHE/work.XXXXXX")
    case $comp in
      OPENSSL|RELIC|AWSLC|S2N) unpack_source "$comp" "$work" ;;
      LIBOQS|BFE|NGTCP2) unpack_release "$comp" "$work" ;;
      OQSPROVIDER) unpack_release "$comp" "$work"; apply_patches "$SRC_ROOT" $OQSPROVIDER_PATCHES ;;
      *) die "PQS_DEPS_VERIFY_ONLY: unknown component $comp (OPENSSL, LIBOQS, OQSPROVIDER, RELIC, BFE, NGTCP2, AWSLC, S2N or 1)" ;;
    esac
    say "$comp: $SOURCE_DESC -> $SRC_ROOT"
    rm -rf "$work"
  done
  exit 0
fi

for pair in "openssl:$ossl_prefix" "liboqs:$oqs_prefix" "oqsprovider:$oqsprov_prefix" \
  "relic:$relic_prefix" "bfe:$bfe_prefix" "ngtcp2:$ngtcp2_prefix" "awslc:$awslc_prefix" "s2n:$s2n_prefix"; do
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
# AWS-LC (static libcrypto.a, libssl.a) with every symbol renamed AWSLC_SYMBOL_PREFIX_<name> (its
# installed headers rename on their own), and s2n-tls (static libs2n.a) on it: a program links
# libs2n.a, AWS-LC's libcrypto.a, -lpthread -ldl -lrt -lm beside OpenSSL's libraries. A file that
# includes s2n.h needs only S2N_PREFIX/include; never AWS-LC's and OpenSSL's include/ in one file.
AWSLC_VERSION := $AWSLC_VERSION
AWSLC_PREFIX := $awslc_prefix
AWSLC_SYMBOL_PREFIX := $AWSLC_SYMBOL_PREFIX
S2N_VERSION := $S2N_VERSION
S2N_PREFIX := $s2n_prefix
MK
mv "$out_mk.tmp" "$out_mk"
