#!/usr/bin/env bash
# Run the image docker/podman-build.sh built, from its storage of its own:
#   docker/podman-run.sh [IMAGE] -- [podman run options...] -- [pqshake args...]   (default: doctor)
# e.g. docker/podman-run.sh localhost/pqshake:local -- -v "$PWD/results:/results" -- run /exp/x.yaml --yes
#
# Two settings make a container start where root lacks CAP_SYS_RESOURCE (this is the case in
# many sandboxes and CI containers; see docker/README.md):
# - rlimits: podman asks the runtime for RLIMIT_NOFILE/RLIMIT_NPROC of 1048576, above the hard
#   limits conmon runs with; raising a hard limit needs CAP_SYS_RESOURCE, so setrlimit() fails
#   with EPERM. The container gets the caller's hard limits instead (NPROC at most conmon's 32768).
# - runtime: runc. crun refuses a "hybrid" cgroup layout (v1 controllers plus a v2 mount)
#   ("cgroups in hybrid mode not supported"); runc runs there.
# Privileges as make docker-run's plus NET_RAW (in Docker's default set, not in podman's: the
# emulator's AF_PACKET sockets); no network (everything runs between the run's own namespaces).
set -euo pipefail
cache=${PQS_CACHE:-$HOME/.cache/pqshake}
store=$cache/podman
image=localhost/pqshake:local
if [ $# -gt 0 ] && [ "$1" != -- ]; then image=$1; shift; fi
opts=()
if [ "${1:-}" = -- ]; then
  shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
  [ "${1:-}" = -- ] && shift
fi
nofile=$(ulimit -Hn); nproc=$(ulimit -Hu)
[ "$nofile" = unlimited ] && nofile=1048576
{ [ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ]; } && nproc=32768
exec podman --root "$store/root" --runroot "$store/runroot" --storage-driver overlay \
  run --rm --runtime runc --network none \
  --ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc" \
  --cap-add NET_ADMIN --cap-add SYS_ADMIN --cap-add SYS_NICE --cap-add NET_RAW \
  --security-opt systempaths=unconfined --security-opt apparmor=unconfined \
  "${opts[@]}" "$image" "$@"
