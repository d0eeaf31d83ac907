#!/usr/bin/env bash
# Shared helpers for fetching and building the pinned crypto stack. Sourced, not run.
set -euo pipefail

DEPS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
. "$DEPS_DIR/versions.env"

# Builds live outside the clone so a fresh clone (CI) reuses them; keyed by version + options.
PQS_CACHE=${PQS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pqshake}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}

say() { printf 'deps: %s\n' "$*" >&2; }
die() { printf 'deps: error: %s\n' "$*" >&2; exit 1; }

sha256_of() { sha256sum "$1" | awk '{print $1}'; }

# verify FILE EXPECTED: stop with both hashes named when they differ.
verify() {
  local file=$1 want=$2 got
  got=$(sha256_of "$file")
  if [ "$got" != "$want" ]; then
    die "checksum mismatch for $file: expected sha256 $want, got $got (delete the file or fix testbed/deps/versions.env)"
  fi
}

# key COMPONENT VERSION OPTIONS...: cache directory name for one build configuration.
cache_key() {
  local comp=$1 ver=$2; shift 2
  local h
  h=$(printf '%s\n' "$RECIPE_REVISION" "$@" | sha256sum | cut -c1-12)
  printf '%s-%s-%s' "$comp" "$ver" "$h"
}

# fetch_crate NAME VERSION SHA256 -> prints the path of the verified .crate archive.
# cargo downloads by package name through whatever registry the machine is set up for.
fetch_crate() {
  local name=$1 ver=$2 want=$3
  local dl="$PQS_CACHE/downloads"
  local out="$dl/$name-$ver.crate"
  mkdir -p "$dl"
  if [ -f "$out" ] && [ "$(sha256_of "$out")" = "$want" ]; then
    printf '%s\n' "$out"; return
  fi
  [ -x "${CARGO_HOME:-$HOME/.cargo}/bin/cargo" ] && PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
  command -v cargo >/dev/null || die "cargo not found: install Rust (rustup or Debian's 'cargo') or set PQS_SOURCES_DIR to a directory with the upstream tarballs"
  local tmp; tmp=$(mktemp -d)
  local base=${ver%%+*}
  mkdir -p "$tmp/src"; : > "$tmp/src/lib.rs"
  cat > "$tmp/Cargo.toml" <<TOML
[package]
name = "pqs-fetch"
version = "0.0.0"
edition = "2021"
[lib]
path = "src/lib.rs"
[dependencies]
$name = { version = "=$base", default-features = false }
TOML
  local home=${CARGO_HOME:-$HOME/.cargo}
  (cd "$tmp" && CARGO_HOME="$home" cargo fetch -q) >&2 || die "cargo fetch of $name $ver failed (is the crate registry reachable? offline: set PQS_SOURCES_DIR)"
  local found
  found=$(ls -1 "$home"/registry/cache/*/"$name-$ver.crate" 2>/dev/null | head -n1)
  [ -n "$found" ] || die "cargo fetched $name but $name-$ver.crate is not in $home/registry/cache"
  verify "$found" "$want"
  cp "$found" "$out.tmp" && mv "$out.tmp" "$out"
  rm -rf "$tmp"
  printf '%s\n' "$out"
}

# tree_sha256 DIR PATHS...: sha256 over the sorted sha256sum lines of every file under PATHS.
tree_sha256() {
  local dir=$1; shift
  (cd "$dir" && find "$@" -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
}

# unpack_tarball COMPONENT FILE DEST: unpacks a release tarball of COMPONENT into DEST, verified by
# ${COMPONENT}_TARBALL_SHA256 (the archive's bytes) when one is pinned, else by
# ${COMPONENT}_TREE_SHA256 over the unpacked tree; sets SRC_ROOT and SOURCE_DESC.
unpack_tarball() {
  local comp=$1 f=$2 dest=$3 tar_sub tar_sha tree_sha tree_paths got url_sub
  eval "tar_sub=\$${comp}_TARBALL_SUBDIR tar_sha=\${${comp}_TARBALL_SHA256:-} url_sub=\${${comp}_URL_SUBDIR:-}"
  eval "tree_sha=\${${comp}_TREE_SHA256:-} tree_paths=\${${comp}_TREE_PATHS:-}"
  mkdir -p "$dest"
  if [ -n "$tar_sha" ]; then
    verify "$f" "$tar_sha"
    tar -xzf "$f" -C "$dest"
    SOURCE_DESC="$f (sha256 verified)"
  elif [ -n "$tree_sha" ]; then
    tar -xzf "$f" -C "$dest" || die "$f: not a gzip tarball"
    # A code host's archive of a commit (not a tag) names its top folder after the full commit
    # id (${COMPONENT}_URL_SUBDIR): the same tree under the short name.
    if [ ! -d "$dest/$tar_sub" ] && [ -n "$url_sub" ] && [ -d "$dest/$url_sub" ]; then
      mv "$dest/$url_sub" "$dest/$tar_sub"
    fi
    [ -d "$dest/$tar_sub" ] || die "$f: has no top-level folder $tar_sub/ (is it the $comp release tarball?)"
    # shellcheck disable=SC2086
    got=$(tree_sha256 "$dest/$tar_sub" $tree_paths)
    [ "$got" = "$tree_sha" ] || die "checksum mismatch for $f: expected tree sha256 $tree_sha over $tree_paths, got $got (delete the file or fix testbed/deps/versions.env)"
    SOURCE_DESC="$f (source tree sha256 verified)"
  else
    die "no pinned sha256 for $f: set ${comp}_TARBALL_SHA256 in testbed/deps/versions.env to the hash published with the release"
  fi
  SRC_ROOT="$dest/$tar_sub"
}

# unpack_release COMPONENT DEST: a component no package registry carries (oqs-provider, bfe-bf). Its
# release tarball is looked for in $PQS_SOURCES_DIR, then in ../shared/sources next to the
# clone (machines without access to code hosting keep it there), else downloaded from
# ${COMPONENT}_URL into the cache; always verified by its source tree (unpack_tarball).
# find_source FILE: prints the first of those folders holding FILE (also docker/podman-build.sh's
# lookup), or nothing.
find_source() {
  local top d
  top=$(cd "$DEPS_DIR/../.." && pwd)
  for d in ${PQS_SOURCES_DIR:+"$PQS_SOURCES_DIR"} "$top/../shared/sources" "$PQS_CACHE/downloads"; do
    if [ -f "$d/$1" ]; then printf '%s\n' "$d/$1"; return; fi
  done
}

unpack_release() {
  local comp=$1 dest=$2 tarball url f
  eval "tarball=\$${comp}_TARBALL url=\$${comp}_URL"
  f=$(find_source "$tarball")
  if [ -z "$f" ]; then
    f="$PQS_CACHE/downloads/$tarball"
    mkdir -p "$PQS_CACHE/downloads"
    command -v curl >/dev/null || die "$tarball not found (looked in \$PQS_SOURCES_DIR, ../shared/sources) and curl is missing to download $url"
    say "downloading $url"
    curl -fsSL -o "$f.tmp" "$url" || { rm -f "$f.tmp"; die "cannot download $url: put $tarball into \$PQS_SOURCES_DIR"; }
    mv "$f.tmp" "$f"
  fi
  unpack_tarball "$comp" "$f" "$dest"
}

# apply_patches DIR NAME:SHA256...: applies each patch file (the project's own from
# testbed/deps/patches/, else found like a release tarball: find_source), verified by its sha256
# first, with `patch -p1` in DIR, in the order given. Only ever on an unpacked copy whose tree was
# verified (the patches are written against that tree).
apply_patches() {
  local dir=$1 entry name want f; shift
  for entry in "$@"; do
    name=${entry%%:*} want=${entry#*:}
    f=$DEPS_DIR/patches/$name
    [ -f "$f" ] || f=$(find_source "$name")
    [ -n "$f" ] || die "patch $name not found (looked in testbed/deps/patches, \$PQS_SOURCES_DIR, ../shared/sources, $PQS_CACHE/downloads)"
    verify "$f" "$want"
    command -v patch >/dev/null || die "patch not found: install Debian's 'patch' (scripts/install-system-packages.sh)"
    patch -d "$dir" -p1 --batch --forward --quiet <"$f" >&2 || die "patch $f does not apply to $dir"
    SOURCE_DESC="$SOURCE_DESC + $name (sha256 verified)"
  done
}

# unpack_source COMPONENT DEST: unpacks the verified source tree of COMPONENT (OPENSSL|RELIC|AWSLC|S2N)
# into DEST; sets SRC_ROOT (the source root) and SOURCE_DESC (where it came from). The whole crate
# is unpacked: files beside its subdirectory are "$SRC_ROOT/..". An empty ${COMPONENT}_TARBALL means
# the crate is the only source (AWSLC, S2N).
unpack_source() {
  local comp=$1 dest=$2
  local crate_name crate_ver crate_sha crate_sub tarball
  eval "crate_name=\$${comp}_CRATE crate_ver=\$${comp}_CRATE_VERSION crate_sha=\$${comp}_CRATE_SHA256"
  eval "crate_sub=\$${comp}_CRATE_SUBDIR tarball=\$${comp}_TARBALL"
  mkdir -p "$dest"
  if [ -n "${PQS_SOURCES_DIR:-}" ]; then
    local f
    if [ -n "$tarball" ] && [ -f "$PQS_SOURCES_DIR/$tarball" ]; then
      f="$PQS_SOURCES_DIR/$tarball"
      unpack_tarball "$comp" "$f" "$dest"; return
    elif [ -f "$PQS_SOURCES_DIR/$crate_name-$crate_ver.crate" ]; then
      f="$PQS_SOURCES_DIR/$crate_name-$crate_ver.crate"
      verify "$f" "$crate_sha"
      tar -xzf "$f" -C "$dest"
      SOURCE_DESC="$f (sha256 verified)"
      SRC_ROOT="$dest/$crate_name-$crate_ver/$crate_sub"; return
    fi
    [ -n "$tarball" ] || die "PQS_SOURCES_DIR=$PQS_SOURCES_DIR has no $crate_name-$crate_ver.crate"
    die "PQS_SOURCES_DIR=$PQS_SOURCES_DIR has neither $tarball nor $crate_name-$crate_ver.crate"
  fi
  local crate
  crate=$(fetch_crate "$crate_name" "$crate_ver" "$crate_sha")
  tar -xzf "$crate" -C "$dest"
  SOURCE_DESC="crate $crate_name $crate_ver (sha256 verified)"
  SRC_ROOT="$dest/$crate_name-$crate_ver/$crate_sub"
}
