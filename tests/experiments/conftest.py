"""Helpers for the experiment tests: writing experiment files, a loopback stand-in for the
topology (plan/IO tests only; the end-to-end tests use the real Topology)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pqshake.emulation.link import LinkDefaults

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def write_exp(tmp_path):
    def write(text: str, name: str = "exp.yaml") -> Path:
        p = tmp_path / name
        p.write_text(textwrap.dedent(text).lstrip())
        return p

    return write


class LoopbackTopology(LinkDefaults):
    """A Link (pqshake.emulation.link) on the loopback interface of the test's own namespace:
    for runner I/O tests without root. No link is emulated."""

    instances: list["LoopbackTopology"] = []

    def __init__(self, profile, run_id=None, backend="auto"):
        self.profile = profile
        self.run_id = run_id
        self.backend = "loopback"
        self.client_ns = self.server_ns = None
        self.client_addr = self.server_addr = "127.0.0.1"
        self.entered = self.exited = 0
        LoopbackTopology.instances.append(self)

    def __enter__(self):
        self.entered += 1
        return self

    def __exit__(self, *exc):
        self.exited += 1

    def ns_argv(self, role, cmd):
        return list(cmd)

    def flush_tcp_metrics(self):
        pass

    def link_problem(self):
        # loopback cannot die; a test sets `dead` to a reason to stand for a link that did
        return self.dead

    dead = None

    def counters(self):
        return {"up": {"forwarded": 0}, "down": {"forwarded": 0}}

    def describe(self):
        return {"backend": self.backend, "profile": self.profile.name}


def fake_measure_rtt(topo, count=50, **kw):
    return {"count": count, "received": count, "lost": 0, "p50_ns": 50_000.0, "p99_ns": 90_000.0, "samples_ns": [50_000] * count}


@pytest.fixture
def loopback(monkeypatch):
    """Patch measure_rtt (it needs pqs-probe in a namespace) and return the topology class."""
    import pqshake.emulation.check as check

    monkeypatch.setattr(check, "measure_rtt", fake_measure_rtt)
    LoopbackTopology.instances.clear()
    return LoopbackTopology


def pqs_argv(*args: str) -> list[str]:
    """The `pqshake` command, run by this interpreter (the virtualenv's)."""
    return [sys.executable, "-m", "pqshake.cli", *args]


def _pqs(*args: str, **kw) -> subprocess.CompletedProcess:
    """Run the experiment commands of `pqshake` in a child process."""
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    return subprocess.run(pqs_argv(*args), cwd=REPO, **kw)


@pytest.fixture
def pqs():
    return _pqs


@pytest.fixture
def pqs_spawn():
    """Start the experiment commands in the background (stdout/stderr piped)."""

    def spawn(*args: str) -> subprocess.Popen:
        return subprocess.Popen(pqs_argv(*args), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    return spawn
