"""The mode fs0rtt's Python half: forward-secure 0-RTT with Bloom Filter Encryption (the C half is
testbed/fs0rtt/, the protocol is in testbed/README.md "fs0rtt").

A cell of this mode needs the server's BFE key pair for the experiment's `bfe_n` (connections per
key) and `bfe_p` (false-positive probability at n). Key generation costs about 0.4 ms of CPU per
secret-key slot (n = 4096 at p = 2^-10: about 24 s), so a key is made once per parameter set by
pqs-bfe-keygen and kept, like a build, in the cache (pqshake.paths.cache_dir: PQS_CACHE, else
$XDG_CACHE_HOME/pqshake or ~/.cache/pqshake) under a name with n, p and the relic and bfe-bf versions of the build; pqs-server verifies it against its
key.json when it loads it. Each cell's server starts from that unpunctured key, so a cell makes
at most n connections (the plan refuses fewer), and punctures live in that server's memory only.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from pqshake.paths import cache_dir

# The C bounds (testbed/fs0rtt/fs0rtt.h PQS_FS0RTT_N_*, PQS_FS0RTT_P_*). P_MIN is bfe-bf's: at
# most 16 hash functions, which p = 2^-15 needs for any n (hash_count below); smaller p failed
# only when the cell's key was generated.
N_MIN, N_MAX = 1, 1 << 20
P_MIN, P_MAX = 2.0 ** -15, 0.5
MAX_HASH_COUNT = 16
DEFAULT_N = 4096
DEFAULT_P = 2.0 ** -10
# Key generation CPU per secret-key slot (pqs-bfe-keygen, relic's x64 backend, one thread): the
# plan's estimate when the key is not in the cache yet (0.41 ms measured here, docs/methodology.md).
KEYGEN_S_PER_SLOT = 0.00041
# What the fs0rtt identity adds to a ClientHello: the pre_shared_key extension (type, length,
# identities, the ciphertext, its obfuscated age; binders, one SHA-384 binder). The ciphertext is
# 4 + 97 + 32 k bytes for k hash functions (hash_count: 11 at p = 2^-10, 453 bytes); the handshake
# model's rows do not know p, so they count k = 1, fewer than any key has: the bound stays a bound.
PSK_EXT_BYTES = 4 + 2 + 2 + 4 + 2 + 1 + 48
CH_EXTRA_BYTES = PSK_EXT_BYTES + 4 + 97 + 32


def parse_p(value: Any) -> float:
    """bfe_p as an experiment file gives it: a number, or '2^-10'. ValueError names the fix."""
    given = value
    if isinstance(value, str):
        m = re.fullmatch(r"\s*2\s*\^\s*(-\d+)\s*", value)
        if m is None:
            raise ValueError(f"{value!r} is not a probability: write a number without quotes (e.g. 0.001) or '2^-10'")
        # 2^-N for N of more than a few digits is far below P_MIN: refused below, without
        # reading a huge N (int() of 5000 digits raises, 2.0 ** -10^400 overflows).
        value = 2.0 ** int(m.group(1)) if len(m.group(1)) <= 6 else 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not P_MIN <= float(value) <= P_MAX:
        raise ValueError(f"{given!r} is out of range: a false-positive probability from 2^-15 ({P_MIN:.3g}; the Bloom "
                         f"Filter Encryption library takes at most {MAX_HASH_COUNT} hash functions) to {P_MAX:g} "
                         "(e.g. 0.001 or '2^-10')")
    return float(value)


def p_text(p: float) -> str:
    """'2^-10' for a power of two, else the number ('0.001')."""
    e = round(math.log2(p))
    return f"2^{e}" if 2.0 ** e == p else f"{p:g}"


def slots(n: int, p: float) -> int:
    """The Bloom filter's bits (= secret-key slots) for n elements at p: bfe-bf's m = -n ln p / ln(2)^2."""
    return math.ceil(-n * math.log(p) / (math.log(2) ** 2))


def hash_count(n: int, p: float) -> int:
    """bfe-bf's k for (n, p): ceil(m ln 2 / n) with m = slots(n, p)."""
    return math.ceil(slots(n, p) * math.log(2) / n)


def ct_bytes(n: int, p: float) -> int:
    """A ciphertext's bytes: length field, the point u, one 32-byte block per hash function."""
    return 4 + 97 + 32 * hash_count(n, p)


def keygen_estimate_s(n: int, p: float) -> float:
    return slots(n, p) * KEYGEN_S_PER_SLOT


def _stack_versions(build: Path) -> tuple[str, str]:
    text = (build / "deps.mk").read_text() if (build / "deps.mk").is_file() else ""
    got = dict(re.findall(r"^(RELIC_VERSION|BFE_VERSION) :=[ \t]*(\S*)", text, re.M))
    return got.get("RELIC_VERSION") or "unknown", got.get("BFE_VERSION") or "unknown"


def cache_root() -> Path:
    return cache_dir() / "bfe-keys"


def key_dir(n: int, p: float, build: Path) -> Path:
    """Where the key of (n, p) for this build's relic and bfe-bf is kept."""
    relic, bfe = _stack_versions(build)
    return cache_root() / f"n{n}-p{p!r}-relic{relic}-bfe{bfe}"


def _complete(d: Path, n: int) -> dict | None:
    """key.json of a finished key folder for n (pqs-server verifies the files' hashes)."""
    try:
        info = json.loads((d / "key.json").read_text())
    except (OSError, ValueError):
        return None
    if info.get("n") != n or not (d / "public.bin").is_file() or not (d / "secret.bin").is_file():
        return None
    return info


def cached(n: int, p: float, build: Path) -> bool:
    return _complete(key_dir(n, p, build), n) is not None


def ensure_key(n: int, p: float, build: Path, keygen: Path) -> dict[str, Any]:
    """The key folder of (n, p), generated now if the cache lacks it: {dir, cached, key.json's
    members}. Generated in a fresh folder beside the final one and renamed into place, so a
    crash or a concurrent run never leaves a half key under the final name."""
    final = key_dir(n, p, build)
    info = _complete(final, n)
    if info is not None:
        return {"dir": str(final), "cached": True, **info}
    final.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        t0 = time.monotonic()
        r = subprocess.run([str(keygen), "--n", str(n), "--p", repr(p), "--out", str(work)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            from pqshake.errors import UserError

            last = (r.stderr.strip().splitlines() or ["no message"])[-1]
            raise UserError(f"fs0rtt: {keygen.name} --n {n} --p {p!r} failed (exit {r.returncode}): {last}")
        try:
            os.rename(work, final)
        except OSError:  # another run made it meanwhile: theirs is as good
            if _complete(final, n) is None:
                raise
        info = _complete(final, n) or {}
        return {"dir": str(final), "cached": False, "keygen_wall_s": round(time.monotonic() - t0, 3), **info}
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)


# Its columns in the run tables (table, column as written, analysis name): the members of the
# timer's and the server's "fs0rtt" objects and the cell's key and server-summary records.
COLUMNS = (
    *(("samples", f"fs0rtt_{k}", f"fs0rtt_{k}") for k in ("offered", "ct_bytes", "encaps_ns", "encaps_cpu_ns",
                                                        "dropped_hrr")),
    *(("server", f"fs0rtt_{k}", f"fs0rtt_{k}") for k in ("outcome", "detail", "ct_bytes", "decaps_ns", "decaps_cpu_ns",
                                                       "puncture_ns", "puncture_cpu_ns", "lock_wait_ns")),
)


# Members of a cell's DONE record (flat: the cells table keeps scalars), from the key ...
KEY_INFO = ("cached", "n", "p", "k", "slots", "public_bytes", "secret_bytes", "public_sha256", "keygen_ns",
            "keygen_cpu_ns", "keygen_wall_s", "relic_version")
# ... and from pqs-server's summary line after the cell (its "fs0rtt" member).
SUMMARY_INFO = ("punctures", "punctured_slots", "secret_bytes_start", "secret_bytes_end", "secret_ram_bytes",
                "accepted", "replay", "false_positive", "exhausted", "malformed", "cipher", "decaps_failed")


CELL_COLUMNS = ("bfe_key_dir", *(f"bfe_key_{k}" for k in KEY_INFO), *(f"bfe_server_{k}" for k in SUMMARY_INFO))
COLUMNS += tuple(("cells", c, c) for c in CELL_COLUMNS)


def cell_info(key: dict[str, Any]) -> dict[str, Any]:
    """bfe_key_<member> of the key a cell's server loaded (ensure_key's record)."""
    return {"bfe_key_dir": key.get("dir"), **{f"bfe_key_{k}": key.get(k) for k in KEY_INFO}}


def server_summary(lines: list[dict]) -> dict[str, Any]:
    """bfe_server_<member> of the server's last summary line (nothing if it wrote none)."""
    fs = (lines[-1].get("fs0rtt") if lines else None) or {}
    return {f"bfe_server_{k}": fs.get(k) for k in SUMMARY_INFO} if fs else {}


def server_args(key: Path) -> list[str]:
    return ["--bfe-key", str(key)]


def timer_args(key: Path) -> list[str]:
    return ["--bfe-public", str(key / "public.bin")]
