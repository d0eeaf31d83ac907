"""The handshake lower bound per cell and the CPU terms from `pqs-speed`.

The model itself is the runner's pure functions (pqshake/rows/handshake_model.py; the reasoning
is in docs/methodology.md, "The handshake model"); this module only feeds it what a run
measured:

  - the propagation RTT: the achieved RTT (median of the cell's probes) minus the probes' own
    serialization at the configured rates, which the handshake's frames pay for themselves;
  - the configured up and down rates (unlimited = no serialization);
  - CPU: the fastest (min_ns) timing pqs-speed saw of each crypto operation, split by where it
    sits in the handshake, no library overhead, so it stays a lower bound; none without a
    pqs-speed file, and the output says so.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from pqshake import safe_write as sw
from pqshake.errors import UserError
from pqshake.rows import modes as M
from pqshake.rows import transports as T

from . import columns as C

SPEED_NAMES = ("speed.jsonl", "pqs-speed.jsonl", "analysis/speed.jsonl")
# The stack whose timings the bound takes: the programs' TLS is OpenSSL's (pqs-speed --stacks
# aws-lc adds s2n-tls's libcrypto's lines, with "stack":"aws-lc"; a line without it is OpenSSL's).
SPEED_STACK = "openssl"


class Speed:
    """median_ns per (kind, name, op) from pqs-speed JSON lines, and where they came from."""

    def __init__(self, medians: dict[tuple[str, str, str], float], source: str, header: dict | None = None,
                 mins: dict[tuple[str, str, str], float] | None = None):
        self.medians = medians
        self.mins = mins if mins is not None else dict(medians)
        self.source = source
        self.header = header or {}

    def get(self, kind: str, name: str, op: str) -> float | None:
        return self.medians.get((kind, name, op))

    def fastest(self, kind: str, name: str, op: str) -> float | None:
        """The fastest timing (a bound needs the least the operation can take)."""
        return self.mins.get((kind, name, op))

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
    mins: dict[tuple[str, str, str], float] = {}
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
        if rec.get(C.SPEED["stack"], SPEED_STACK) != SPEED_STACK:  # another TLS stack's libcrypto (--stacks)
            continue
        m = rec.get(C.SPEED["median_ns"])
        if isinstance(m, (int, float)):
            key = (kind, str(rec.get(C.SPEED["name"])), str(rec.get(C.SPEED["op"])))
            med[key] = float(m)
            lo = rec.get(C.SPEED["min_ns"])
            mins[key] = float(lo) if isinstance(lo, (int, float)) and 0 < lo <= m else float(m)
    if not med:
        raise UserError(f"{path}: no kex/sig timings in it; pass the output of 'build/bin/pqs-speed' (or --speed none)")
    return Speed(med, str(path), header, mins)


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
    sw.write_text(out, r.stdout, root=out.parent)  # never through a link planted in a run
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


def cpu_terms(speed: Speed | None, group: str, sig: str, mode: str, chain_depth: int = 1):
    """The crypto operations of one handshake, each placed where it runs (handshake_model.Cpu):
    key exchange (KEM: client keygen, server encaps, client decaps; ECDH/FFDH: keygen and
    derive on each side), and for a full handshake one signature and chain_depth + 1
    verifications (the chain, then CertificateVerify). Resumption and 0-RTT sign nothing. None
    if a term is missing."""
    from pqshake.rows import handshake_model as hm

    if not speed:
        return None
    ns = lambda kind, name, op: speed.fastest(kind, name, op)  # noqa: E731
    kg, enc, dec = ns("kex", group, "keygen"), ns("kex", group, "encaps"), ns("kex", group, "decaps")
    der = ns("kex", group, "derive")
    if kg is None or ((enc is None or dec is None) and der is None):
        return None
    kem = enc is not None and dec is not None
    s = v = 0.0
    if M.certificate(mode):
        s, v = ns("sig", sig, "sign"), ns("sig", sig, "verify")
        if s is None or v is None:
            return None
    if M.of(mode).tls1_2:  # the server's share comes first, the client's answers it
        t = dict(server_kex=kg, server_sign=s, client_chain=chain_depth * v, client_cv=v, client_keygen=kg,
                 client_kex=enc if kem else der, server_finish=dec if kem else der)
    else:
        t = dict(client_keygen=kg, server_kex=enc if kem else kg + der, server_sign=s,
                 client_kex=dec if kem else der, client_chain=chain_depth * v, client_cv=v)
    return hm.Cpu(**{k: x / 1e9 for k, x in t.items()})


def propagation_rtt_s(rtt_achieved_s: float, rate_up: float | None, rate_down: float | None) -> float:
    """The achieved RTT without the probes' own serialization (the handshake's frames pay theirs
    in the model); never below 0."""
    from pqshake.rows.profile import RTT_PROBE_PAYLOAD, probe_serialization_ns

    ser = sum(probe_serialization_ns(RTT_PROBE_PAYLOAD, r) for r in (rate_up, rate_down) if r) / 1e9
    return max(0.0, rtt_achieved_s - ser)


def _rate(r: float | None) -> float | None:
    return r if r and r > 0 and r != float("inf") else None


def bound(group: str, sig: str, mode: str, *, rtt_s: float, rate_up: float | None, rate_down: float | None,
          mtu: int, cpu, chain_depth: int = 1, registry: Any = None, iw_c: int | None = None,
          iw_s: int | None = None, transport: str = T.DEFAULT, **settings: Any) -> dict:
    """The lower bound's components in seconds for an achieved (probe) RTT; cpu: a
    handshake_model.Cpu or None (no CPU term); iw_c / iw_s: the client's / server's initial
    window where the profile sets one; settings: the transports' own (Run.settings). ValueError
    for an algorithm the registry does not size."""
    from pqshake.rows import bounds
    from pqshake.rows import handshake_model as hm

    if mode not in hm.MODES:
        raise UserError(f"mode '{mode}' in the run is unknown to the handshake model ({', '.join(hm.MODES)})")
    tr = T.find(transport)
    if tr is None:
        raise UserError(f"transport '{transport}' in the run is unknown to the handshake model ({', '.join(T.NAMES)})")
    if not tr.can_bound(mode, mtu):
        return {}  # nothing the transport can run: no bound
    up, down = _rate(rate_up), _rate(rate_down)
    prop = propagation_rtt_s(rtt_s, up, down)
    b = bounds.handshake_bound(bounds.BoundCell.of(
        group, sig, prop, mtu=int(mtu), chain_depth=chain_depth, mode=mode, registry=registry, rate_up=up or 0,
        rate_down=down or 0, cpu=cpu or hm.Cpu(), iw_c=iw_c, iw_s=iw_s, transport=transport, **settings))
    return {"rtts": b.rtts, "rtt_prop": prop, "t_rtt": b.t_rtt, "t_ser": b.t_ser, "t_cpu": b.t_cpu,
            "cpu_sum": b.cpu_sum, "total": b.total, "client_bytes": b.client_bytes, "server_bytes": b.server_bytes,
            "amp_rounds": b.amp_rounds}
