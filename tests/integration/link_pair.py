"""One pqs-server and one pqs-timer run through a test topology's emulated link, for the
transport tests (tcp, quic, turbotls) of this folder."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import numpy as np

from pqshake.paths import binary


def wait_ready(log: Path, proc, timeout: float = 30.0) -> dict:
    """The server's ready line; fails the test if the server exits or never gets there."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"pqs-server exited early with {proc.returncode}: {proc.stderr.read()}")
        for line in log.read_text().splitlines() if log.exists() else []:
            rec = json.loads(line)
            if rec.get("type") == "ready":
                return rec
        time.sleep(0.05)
    raise AssertionError("pqs-server did not become ready")


def serve_and_time(topo, tmp_path: Path, name: str, transport: str, server_args, timer_args,
                   timeout: float = 300) -> tuple[list[dict], list[dict], list[dict]]:
    """pqs-server in the server namespace, one pqs-timer run against it from the client's;
    returns (attempt lines without warm-ups, conn lines, every server line)."""
    d = tmp_path / name
    d.mkdir()
    log = d / "server.jsonl"
    server = subprocess.Popen(
        topo.ns_argv("server", [str(binary("pqs-server")), "--transport", transport, "--listen",
                                f"{topo.server_addr}:4433", "--cert-dir", str(d), "--log", str(log),
                                *map(str, server_args)]),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        wait_ready(log, server)
        out = d / "timer.jsonl"
        r = subprocess.run(
            topo.ns_argv("client", [str(binary("pqs-timer")), "--transport", transport, "--connect",
                                    f"{topo.server_addr}:4433", "--ca", str(d / "ca.pem"), "--out", str(out),
                                    *map(str, timer_args)]),
            capture_output=True, text=True, timeout=timeout,
        )
        assert r.returncode == 0, r.stderr
    finally:
        server.terminate()
        server.wait(timeout=30)
    attempts = [json.loads(x) for x in out.read_text().splitlines()]
    recs = [json.loads(x) for x in log.read_text().splitlines()]
    return ([a for a in attempts if a["type"] == "attempt" and not a.get("warmup")],
            [c for c in recs if c["type"] == "conn"], recs)


def median_rtts(attempts: list[dict], rtt_ns: float) -> float:
    """Median handshake in round trips; every attempt must be ok."""
    assert attempts and all(a["ok"] for a in attempts), [a.get("message") for a in attempts if not a["ok"]]
    return float(np.median([a["handshake_ns"] for a in attempts])) / rtt_ns


# failure classes an attempt through a lossy link may end in (testbed/core/common.h, the error enum)
LOSS_FAILURES = {"timeout", "connect_timeout", "handshake_alert", "quic_closed", "tls_error", "eof", "io_error",
                 "tcp_reset"}
