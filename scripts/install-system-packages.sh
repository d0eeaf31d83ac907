#!/usr/bin/env bash
# Install the Debian/Ubuntu packages pqshake needs, only those missing, only as root.
# Three tables, each the one before plus more, so that `make demo` installs no test lab:
#   --runtime  what running needs (no compilers): the final stage of docker/Dockerfile.
#   (default)  plus what building needs (make build, make venv): `make demo`, `make deps`, and the
#              build stage of docker/Dockerfile.
#   --test     plus the test lab `make test` drives (sanitizers, user-mode Linux, Slurm, podman,
#              tshark, ...): `make test`, `make asan`, `make test-netem`.
# --list: print the table of the mode ("command-or-file:package" lines), install nothing
#         (tests/test_system_packages.py holds every program the code runs against these tables).
# Usage: install-system-packages.sh [--runtime | --test] [--list]
set -euo pipefail
mode=build list=
for arg in "$@"; do
  case $arg in
    --runtime) mode=runtime ;;
    --test) mode=test ;;
    --list) list=1 ;;
    *) echo "usage: $0 [--runtime | --test] [--list]" >&2; exit 2 ;;
  esac
done

# command-or-file : package
runtime=(
  "ip:iproute2" "tc:iproute2" "ethtool:ethtool" "ping:iputils-ping" "iperf3:iperf3"
  "flock:util-linux" "setsid:util-linux" "nice:coreutils" "python3:python3" "sysctl:procps"
  # engine: mininet (Debian's package; --no-install-recommends: no Open vSwitch, Linux bridges)
  "mnexec:mininet"
  # the shared libraries the programs in build/bin load (testbed/Makefile links relic and bfe-bf
  # statically, and with them -lsodium -lgmp -lgomp): libsodium, GMP, gcc's OpenMP runtime
  # (tests/test_system_packages.py checks each library a built program needs against this list)
  "/usr/lib/*/libsodium.so.23:libsodium23" "/usr/lib/*/libgmp.so.10:libgmp10" "/usr/lib/*/libgomp.so.1:libgomp1"
  # and the compression libraries of TLS certificate compression, which the static libcrypto
  # (OpenSSL built with enable-zlib enable-brotli enable-zstd, testbed/deps/build-stack.sh) needs
  "/usr/lib/*/libz.so.1:zlib1g" "/usr/lib/*/libbrotlienc.so.1:libbrotli1" "/usr/lib/*/libbrotlidec.so.1:libbrotli1"
  "/usr/lib/*/libbrotlicommon.so.1:libbrotli1" "/usr/lib/*/libzstd.so.1:libzstd1"
)
build=(
  "cc:gcc" "gcc:gcc" "make:make" "cmake:cmake" "ninja:ninja-build" "pkg-config:pkg-config"
  # perl, not only perl-base (which gives /usr/bin/perl on minimal images): OpenSSL's Configure
  # needs FindBin and friends
  "/usr/share/perl/*/FindBin.pm:perl"
  "cargo:cargo" "sha256sum:coreutils"
  # oqs-provider's patches for OpenSSL 4 (testbed/deps/common.sh apply_patches)
  "patch:patch"
  # certificate compression in the static OpenSSL (-lz -lbrotlienc -lbrotlidec -lzstd: the .so
  # the linker looks for)
  "/usr/lib/*/libz.so:zlib1g-dev" "/usr/lib/*/libbrotlienc.so:libbrotli-dev" "/usr/lib/*/libzstd.so:libzstd-dev"
  # testbed/Makefile renames bfe-bf's copy of the Keccak symbols (nm, objcopy) in its archive;
  # build-stack.sh renames AWS-LC's unprefixed symbols (objcopy, ranlib) and checks libs2n.a's
  # references against them (nm, comm)
  "nm:binutils" "objcopy:binutils" "ranlib:binutils" "comm:coreutils"
  # Bloom Filter Encryption (issue 22): bfe-bf and what links it (testbed/deps/build-stack.sh,
  # testbed/Makefile) need libsodium and GMP (-lsodium -lgmp: the .so the linker looks for);
  # bfe-bf's CMake project declares C++ as well (its benchmark), so CMake wants a C++ compiler
  "/usr/lib/*/libsodium.so:libsodium-dev" "/usr/lib/*/libgmp.so:libgmp-dev" "g++:g++"
  # the oqs-provider release tarball's download when no local copy has it (testbed/deps/common.sh),
  # and cargo's crate fetches: https needs the CA bundle (minimal images lack it)
  "curl:curl" "/usr/sbin/update-ca-certificates:ca-certificates"
  # the netem backend on this host loads sch_netem (emulation/backend.py); not in the image's
  # runtime list: a container cannot load the host's modules
  "modprobe:kmod"
)
testlab=(
  # the sanitizer and fuzz builds (make asan, part of make test; make fuzz): clang and its
  # sanitizer runtime (any installed clang's is fine)
  "clang:clang"
  "/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.asan-x86_64.a:libclang-rt-14-dev"
  # a test only (tests/oqsprov/test_provider_module.py): a provider built against the system's
  # libcrypto, as distributions ship them; and the provider module's symbols and dependencies
  "/usr/include/openssl/core_dispatch.h:libssl-dev" "readelf:binutils"
  # the netem lane of `make test` on kernels without sch_netem: a user-mode Linux kernel
  # (6.1, netem as a module; `pqshake uml run`, docs/netem-in-uml.md)
  "linux.uml:user-mode-linux"
  # the Slurm test of `make test` (tests/slurm): a one-node cluster of its own daemons, started
  # and stopped by the test (the packages' system services are not used). A run submitted to a
  # real cluster uses that cluster's Slurm.
  "slurmctld:slurmctld" "slurmd:slurmd" "sbatch:slurm-client" "munged:munge"
  "scontrol:slurm-client" "squeue:slurm-client" "scancel:slurm-client" "mungekey:munge"
  # TurboTLS's fallback test drops UDP with iptables
  "iptables:iptables"
  # the container test of `make test` (tests/test_container.py) and `make podman-build`: a Debian
  # base made by debootstrap, the image built by podman and run with `--runtime runc`
  # (docker/podman-run.sh: crun, podman's default runtime, refuses hybrid cgroups; docker/README.md)
  "podman:podman" "runc:runc" "debootstrap:debootstrap"
  # the tests list the clone's files (a run records its commit when git is there; the image's
  # build has no .git)
  "git:git"
  # a real pcapng reader for pqs-capture's files and the timer's key log
  # (tests/experiments/test_capture_netns.py). Its debconf question (may non-root users
  # capture?) is answered below: no.
  "tshark:tshark" "debconf-set-selections:debconf"
)
needs=("${runtime[@]}")
[ "$mode" = runtime ] || needs+=("${build[@]}")
[ "$mode" != test ] || needs+=("${testlab[@]}")
if [ -n "$list" ]; then
  printf '%s\n' "${needs[@]}"
  exit 0
fi
# A rustup-installed cargo counts (it lives outside the default PATH of non-login shells).
[ -x "${CARGO_HOME:-$HOME/.cargo}/bin/cargo" ] && PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
missing=()
for pair in "${needs[@]}"; do
  what=${pair%%:*} pkg=${pair#*:}
  if [[ $what == /* ]]; then
    compgen -G "$what" >/dev/null && continue  # a file (pattern) the package installs
  else
    command -v "$what" >/dev/null 2>&1 && continue
  fi
  [[ " ${missing[*]-} " == *" $pkg "* ]] || missing+=("$pkg")
done
# python3-venv: the interpreter must be able to make a virtualenv with pip (make venv).
if [ "$mode" != runtime ] && ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then missing+=("python3-venv"); fi

what=$([ "$mode" = test ] && echo "required packages and the test lab's" || echo "required packages")
if [ ${#missing[@]} -eq 0 ]; then
  echo "system: all $what present"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "system: missing packages: ${missing[*]} (run as root, or: sudo apt-get install ${missing[*]})" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null; then
  echo "system: missing ${missing[*]} and no apt-get here; install them with your package manager" >&2
  exit 1
fi
echo "system: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# tshark (wireshark-common) asks whether non-root users may capture: no (no setuid dumpcap)
if [[ " ${missing[*]} " == *" tshark "* ]] && command -v debconf-set-selections >/dev/null; then
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
fi
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
