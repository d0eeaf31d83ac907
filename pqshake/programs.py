"""What the built C programs run, as they say it themselves (`pqs-timer --describe`).

The document lists the transports, each one's implementations (TLS stacks, QUIC engines), and
for each implementation the modes, options and settings it refuses with the words of its usage
error, its groups and signature algorithms, and what only it has (s2n-tls's security policies, a
QUIC engine's settings). The plan reads it here instead of keeping a copy of the C's tables, so
its refusals quote the C. Asked once per process and build folder, as the offered groups are. None when the programs are not built: the caller says so and
checks nothing against them.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from typing import Any


@dataclass(frozen=True)
class Implementation:
    """One implementation of a transport, as the programs describe it: what the plan reads of it
    by name, and the whole member (data) for what only this implementation has (s2n-tls's
    policies)."""

    transport: str
    name: str
    modes: dict[str, str | None]  # every mode: None where it runs, else why not
    options: dict[str, str | None]  # OpenSSL's own options: why refused (None: taken)
    data: dict[str, Any]

    def mode_why(self, mode: str) -> str | None:
        return self.modes.get(mode)


@dataclass(frozen=True)
class Description:
    program: str
    implementations: dict[tuple[str, str], Implementation]

    def get(self, transport: str, implementation: str) -> Implementation | None:
        return self.implementations.get((transport, implementation))


def parse(text: str) -> Description:
    """The document pqs-timer --describe prints; ValueError when it is not one."""
    doc = json.loads(text)
    if not isinstance(doc, dict) or doc.get("type") != "describe":
        raise ValueError("not a --describe document")
    impls = {(t["name"], im["name"]): Implementation(transport=t["name"], name=im["name"], modes=dict(im["modes"]),
                                                     options=dict(im["options"]), data=im)
             for t in doc["transports"] for im in t["implementations"]}
    return Description(program=doc["program"], implementations=impls)


def _timer() -> str:
    from pqshake.paths import build_dir

    return str(build_dir() / "bin" / "pqs-timer")


@lru_cache(maxsize=4)
def _describe(path: str) -> Description | None:
    if not os.access(path, os.X_OK):
        return None
    try:
        r = subprocess.run([path, "--describe"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode != 0:
        return None
    try:
        return parse(r.stdout)
    except (ValueError, KeyError, TypeError):
        return None


def describe() -> Description | None:
    """What the built pqs-timer runs, asked once per process (a plan asks per cell); None when it
    is not built, or predates --describe."""
    return _describe(_timer())


NOT_BUILT = "the programs are not built yet (make build): what they run was not checked against them"
