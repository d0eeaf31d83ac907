#!/usr/bin/env bash
# Container entry point: `pqshake doctor` first (a run starts only when it passes), then
# `pqshake ARGS...`; afterwards the results volume is handed back to the calling user
# (PQS_UID / PQS_GID, set by `make docker-run`), since runs need root inside the container.
set -uo pipefail
PQS=${PQS_BIN:-/pqshake/.venv/bin/pqshake}  # PQS_BIN: tests only
results=${PQS_RESULTS:-/results}

give_back() {
  if [ -n "${PQS_UID:-}" ] && [ -d "$results" ]; then
    chown -R "$PQS_UID:${PQS_GID:-$PQS_UID}" "$results" 2>/dev/null \
      || echo "entrypoint: could not chown $results to $PQS_UID:${PQS_GID:-$PQS_UID}" >&2
  fi
}

case "${1:-doctor}" in
  doctor|--help|-h|help) exec "$PQS" "${@:-doctor}" ;;
esac

"$PQS" doctor || { echo "entrypoint: pqshake doctor found a problem (FAIL lines above); not starting" >&2; exit 1; }

# Run pqshake as a child so the results are chowned on every exit path; forward stop signals
# (docker stop = SIGTERM, Ctrl-C = SIGINT) so the run tears its network down and stays resumable.
"$PQS" "$@" &
child=$!
trap 'kill -TERM "$child" 2>/dev/null' TERM HUP
trap 'kill -INT "$child" 2>/dev/null' INT
rc=0
while :; do
  wait "$child"; rc=$?
  kill -0 "$child" 2>/dev/null || break  # wait returned for a trapped signal: keep waiting
done
give_back
exit "$rc"
