"""Command lines of the C programs (the interface of testbed/README.md in one place): what every
cell passes to pqs-server and pqs-timer, then what its transport adds (its row in
pqshake/rows/transports/) and what its mode asks for (pqshake/rows/modes/)."""

from __future__ import annotations

from pathlib import Path

from pqshake.rows import axes as A
from pqshake.rows import modes as M
from . import sampling
from pqshake.rows.modes import fs0rtt as FS
from pqshake.rows import transports as T
from .plan import Cell


def transport_args(cell: Cell, exp, qlog: Path | None, server: bool) -> list[str]:
    """The cell's transport for pqs-server / pqs-timer. Nothing for tcp (the programs' default),
    so a tcp cell's command lines are what they were before transports existed."""
    tr = T.get(cell.transport)
    return tr.server_args(cell, exp, qlog) if server else tr.timer_args(cell, exp, qlog)


def turbo_requests(cell: Cell, exp) -> int:
    """TurboTLS's request datagrams for a cell (pqshake/rows/transports/turbotls.py)."""
    from pqshake.rows.transports.turbotls import requests_for

    return requests_for(cell, exp)


def bfe_key(exp) -> Path:
    """The BFE key folder of an fs0rtt cell (made beforehand by CellRunner, FS.ensure_key)."""
    from pqshake.paths import build_dir

    return FS.key_dir(exp.bfe_n, exp.bfe_p, build_dir())


def mode_args(cell: Cell, exp, server: bool) -> list[str]:
    """What the cell's mode adds (its row in pqshake/rows/modes/): the server's own options (ech:
    an ECH config), the BFE key for fs0rtt."""
    mode = M.get(cell.mode)
    extra = list(mode.server_args) if server else []
    if not mode.bfe_key:
        return extra
    return extra + (FS.server_args(bfe_key(exp)) if server else FS.timer_args(bfe_key(exp)))


def server_argv(binary: Path, listen: str, cell: Cell, exp, cert_dir: Path, log: Path,
                qlog: Path | None = None) -> list[str]:
    mode = M.get(cell.mode)
    # A handshake-only transport (QUIC) is planned without a response and without 0-RTT (the plan
    # refuses response_bytes and 0rtt for such cells), so its server gets neither option.
    tcp_only = [] if T.get(cell.transport).handshake_only else [
        "--response-bytes", str(exp.response_bytes), "--max-early-data", "16384" if mode.early_data else "0",
        "--early-response", exp.early_response, "--psk-ke", "on" if mode.psk_ke else "off"]
    return [str(binary), "--listen", listen, "--groups", cell.group, "--sig", cell.sig,
            "--chain-depth", str(exp.chain_depth), "--cert-dir", str(cert_dir), "--log", str(log),
            "--fsync", "0", *tcp_only[:2],
            "--tickets", "2" if mode.resumable else "0", *tcp_only[2:],
            "--threads", str(max(8, min(256, exp.concurrency * 2)))] + (
        ["--client-auth", exp.client_auth, "--client-chain-depth", str(exp.client_chain_depth)]
        if exp.client_auth else []) + mode_args(cell, exp, server=True) + transport_args(cell, exp, qlog, server=True) + (
        A.program_args(exp, cell, server=True))


def timer_argv(binary: Path, connect: str, cell: Cell, exp, ca: Path, out: Path,
               qlog: Path | None = None, samples: int | None = None, warmup: int | None = None,
               keylog: Path | None = None) -> list[str]:
    """samples / warmup: this block's (default: the experiment's, one block). keylog: the
    cell's TLS key log (`capture: true`), appended to by every block."""
    samples = sampling.Target.of(exp).max if samples is None else samples
    warmup = exp.warmup if warmup is None else warmup
    argv = [str(binary), "--connect", connect, "--groups", cell.group, "--ca", str(ca),
            "--samples", str(samples), "--warmup", str(warmup), "--mode", cell.mode,
            "--out", str(out), "--fsync", "0", "--concurrency", str(exp.concurrency),
            "--timeout", f"{max(1, exp.timeout // 1_000_000)}ms"]
    if exp.response_bytes:
        argv += ["--response-bytes", str(exp.response_bytes)]
    if exp.wait_acked and T.get(cell.transport).over_tcp:
        argv += ["--wait-acked"]
    if exp.client_auth:  # pqs-server --client-auth writes the client credentials next to ca.pem
        argv += ["--client-cert", str(Path(ca).parent)]
    return (argv + mode_args(cell, exp, server=False) + transport_args(cell, exp, qlog, server=False)
            + A.program_args(exp, cell, server=False) + (["--keylog", str(keylog)] if keylog is not None else []))
