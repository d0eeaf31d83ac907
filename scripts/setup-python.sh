#!/usr/bin/env bash
# Create the project-local virtualenv .venv with the hash-pinned dependencies, then install
# pqshake itself (editable). Re-running is cheap: it reinstalls only when requirements change.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
venv="$top/.venv"
py=${PYTHON:-python3}

if ! "$py" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
  echo "setup-python: $py is older than 3.11; install python3 >= 3.11 or set PYTHON=/path/to/python3.11" >&2
  exit 1
fi
if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv "$venv" || { echo "setup-python: 'python3 -m venv' failed; install Debian's python3-venv (make deps does it as root)" >&2; exit 1; }
fi
stamp="$venv/.requirements.sha256"
want=$(cat "$top/requirements.txt" "$top/pyproject.toml" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --require-hashes -r "$top/requirements.txt"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e "$top"
  echo "$want" > "$stamp"
fi
