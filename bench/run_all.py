"""`make bench`: run every benchmark in this folder, one after another, and say which failed.

Benchmarks print configured-vs-achieved figures and ratios against a reference measured in the
same run; they are not tests and assert nothing tight. Pass names to run a subset:
`make bench BENCH="emulation testbed"`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Order of the pipeline; any other *_bench.py here runs after these.
ORDER = ["testbed", "quic", "retry_tag", "provider", "emulation", "plan", "runner", "analysis"]


def available() -> list[str]:
    found = sorted(p.name[: -len("_bench.py")] for p in HERE.glob("*_bench.py"))
    return [n for n in ORDER if n in found] + [n for n in found if n not in ORDER]


def main(argv: list[str]) -> int:
    wanted = argv or os.environ.get("BENCH", "").split() or available()
    failed = []
    for name in wanted:
        script = HERE / f"{name}_bench.py"
        if not script.exists():
            print(f"bench: no benchmark named '{name}' (have: {', '.join(available())})", file=sys.stderr)
            return 2
        print(f"\n=== {name} ({script.name}) ===", flush=True)
        if subprocess.run([sys.executable, str(script)]).returncode != 0:
            failed.append(name)
    if failed:
        print(f"\nbench: failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
