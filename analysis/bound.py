"""The handshake lower bound per cell and the CPU terms from `pqs-speed`.

The model itself is the runner's pure functions (experiments/handshake_model.py, from
/work/shared/notes/handshake-model.md); this module only feeds it what a run measured:

    bound = RTT count x achieved RTT (median of the cell's probes)
          + serialization of the client flight at the up rate and the server flight at the
            down rate (0 on an unlimited link)
          + CPU: the crypto operations measured by pqs-speed, no library overhead
            (so it stays a lower bound); 0 without a pqs-speed file, and the output says so.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from pqshake.errors import UserError

from . import columns as C

SPEED_NAMES = ("speed.jsonl", "pqs-speed.jsonl", "analysis/speed.jsonl")


class Speed:
    """median_ns per (kind, name, op) from pqs-speed JSON lines, and where they came from."""

    def __init__(self, medians: dict[tuple[str, str, str], float], source: str, header: dict | None = None):
        self.medians = medians
        self.source = source
        self.header = header or {}

    def get(self, kind: str, name: str, op: str) -> float | None:
        return self.medians.get((kind, name, op))

    def __bool__(self) -> bool:
        return bool(self.medians)


def read_speed(path: Path | str) -> Speed:
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise UserError(f"{path}: cannot read the pqs-speed output ({e.strerror or e}); "
                        f"pass another with --speed FILE or --speed none") from None
    med: dict[tuple[str, str, str], float] = {}
    header = None
    for n, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            if n == len(lines):
                continue  # a torn last line
            raise UserError(f"{path}:{n}: not a JSON line; pass the output of 'build/bin/pqs-speed' "
                            f"(or --speed none)") from None
        if not isinstance(rec, dict):
            continue
        kind = rec.get(C.SPEED["type"])
        if kind == "header":
            header = rec
            continue
        if kind not in ("kex", "sig") or not rec.get(C.SPEED["ok"], True):
            continue
        m = rec.get(C.SPEED["median_ns"])
        if isinstance(m, (int, float)):
            med[(kind, str(rec.get(C.SPEED["name"])), str(rec.get(C.SPEED["op"])))] = float(m)
    if not med:
        raise UserError(f"{path}: no kex/sig timings in it; pass the output of 'build/bin/pqs-speed' (or --speed none)")
    return Speed(med, str(path), header)


def measure_speed(binary: Path, groups: list[str], sigs: list[str], out: Path) -> Speed | None:
    """Run pqs-speed for the run's algorithms (short budget) and keep its output at `out`."""
    if not os.access(binary, os.X_OK):
        return None
    argv = [str(binary), "--groups", ":".join(groups), "--sigs", ":".join(sigs), "--only", "kex,sig",
            "--samples", "11", "--min-sample", "1ms", "--budget", "200ms"]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode != 0 or not r.stdout.strip():
        return None
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(r.stdout)
    try:
        return read_speed(out)
    except UserError:
        return None


def find_speed(run_dirs: list[Path], option: str | None, *, groups: list[str], sigs: list[str],
               out_dir: Path) -> tuple[Speed | None, str]:
    """--speed FILE | none | auto (default): a speed.jsonl in the run directory, else run
    build/bin/pqs-speed (kept at out_dir/speed.jsonl), else none. Returns (speed, note)."""
    if option and option not in ("auto",):
        if option == "none":
            return None, "bound without CPU term (--speed none)"
        return read_speed(option), f"CPU terms from {option}"
    candidates = [d / name for d in run_dirs for name in SPEED_NAMES] + [out_dir / "speed.jsonl"]
    for p in candidates:
        if p.is_file():
            return read_speed(p), f"CPU terms from {p}"
    from pqshake.paths import build_dir

    binary = build_dir() / "bin" / "pqs-speed"
    sp = measure_speed(binary, groups, sigs, out_dir / "speed.jsonl")
    if sp is not None:
        return sp, f"CPU terms measured now on this machine by {binary} (kept at {out_dir / 'speed.jsonl'})"
    return None, "bound without CPU term (no pqs-speed output: build it with 'make build' or pass --speed FILE)"


def cpu_seconds(speed: Speed | None, group: str, sig: str, mode: str, chain_depth: int = 1) -> float | None:
    """Crypto CPU on the critical path: key exchange (KEM: keygen + encaps + decaps; ECDH/FFDH:
    client keygen + server keygen + derive on each side), and for a full handshake one signature
    (CertificateVerify) and chain_depth + 1 verifications (the chain and CertificateVerify).
    Resumption and 0-RTT sign nothing. HRR adds a second client keygen. None if a term is missing."""
    if not speed:
        return None
    kg = speed.get("kex", group, "keygen")
    enc, dec = speed.get("kex", group, "encaps"), speed.get("kex", group, "decaps")
    der = speed.get("kex", group, "derive")
    if kg is None:
        return None
    if enc is not None and dec is not None:
        kex = kg + enc + dec
    elif der is not None:
        kex = 2 * kg + 2 * der
    else:
        return None
    if mode == "hrr":
        kex += kg
    total = kex
    if mode not in ("resume", "0rtt"):
        s, v = speed.get("sig", sig, "sign"), speed.get("sig", sig, "verify")
        if s is None or v is None:
            return None
        total += s + (chain_depth + 1) * v
    return total / 1e9


def bound(group: str, sig: str, mode: str, *, rtt_s: float, rate_up: float | None, rate_down: float | None,
          mtu: int, cpu_s: float | None, chain_depth: int = 1, registry: Any = None) -> dict:
    """The lower bound's components in seconds (cpu 0 when unknown)."""
    from pqshake.experiments import handshake_model as hm

    if mode not in hm.MODES:
        raise UserError(f"mode '{mode}' in the run is unknown to the handshake model ({', '.join(hm.MODES)})")
    b = hm.handshake_bound(group, sig, rtt_s, rate_bps=None, mtu=int(mtu), chain_depth=chain_depth, mode=mode,
                           registry=registry, cpu_s=0.0)
    up = rate_up if rate_up and rate_up > 0 and rate_up != float("inf") else None
    down = rate_down if rate_down and rate_down > 0 and rate_down != float("inf") else None
    t_ser = hm.serialization_s(b.client_bytes, up, int(mtu)) * (2 if mode == "hrr" else 1) \
        + hm.serialization_s(b.server_bytes, down, int(mtu))
    cpu = cpu_s or 0.0
    return {"rtts": b.rtts, "t_rtt": b.rtts * rtt_s, "t_ser": t_ser, "t_cpu": cpu,
            "total": b.rtts * rtt_s + t_ser + cpu, "client_bytes": b.client_bytes, "server_bytes": b.server_bytes}
