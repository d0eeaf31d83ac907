"""Helpers for the testbed tests: locate the binaries, start pqs-server, run pqs-timer.
(A uniquely named module rather than conftest.py: other test folders have conftest.py too.)

Binaries come from $PQS_BUILD/bin (default <repo>/build/bin); sanitizer builds from
$PQS_BUILD/asan/bin. All traffic stays on 127.0.0.1.
"""
import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
from needs import need
from procs import stop

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("PQS_BUILD", REPO / "build")).resolve()
BIN = BUILD / "bin"


def pinned_versions():
    """KEY=value pairs of testbed/deps/versions.env, the one place the stack's versions live
    (tests compare the programs' headers with it rather than repeating a version)."""
    out = {}
    for line in (REPO / "testbed" / "deps" / "versions.env").read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip().strip('"')
    return out


PINNED = pinned_versions()


def binary(name, asan=False):
    path = (BUILD / "asan" / "bin" / name) if asan else (BIN / name)
    need(path.exists(), f"{path} not built (make -C testbed BUILD={BUILD}{' asan' if asan else ''})")
    return str(path)


def parse_lines(text):
    """Every non-empty line must be one JSON object."""
    out = []
    for ln in text.splitlines():
        if ln.strip():
            out.append(json.loads(ln))
    return out


class Server:
    """pqs-server on an ephemeral loopback port; stop() sends SIGTERM and parses the log."""

    def __init__(self, tmp_path, *args, asan=False, env=None, ready_timeout=60):
        self.dir = Path(tmp_path) / f"srv{time.monotonic_ns()}"
        self.dir.mkdir(parents=True)
        self.log = self.dir / "server.log"
        self.stderr_path = self.dir / "server.err"
        cmd = [binary("pqs-server", asan), "--listen", "127.0.0.1:0", "--cert-dir", str(self.dir),
               "--log", str(self.log), *map(str, args)]
        self._err = open(self.stderr_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self._err,
                                     env={**os.environ, **(env or {})})
        self.ready = None
        deadline = time.monotonic() + ready_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"pqs-server exited {self.proc.returncode}: {self.stderr_path.read_text()}")
            if self.log.exists():
                for rec in parse_lines_safe(self.log.read_text()):
                    if rec.get("type") == "ready":
                        self.ready = rec
                        break
            if self.ready:
                break
            time.sleep(0.05)
        if not self.ready:
            self.proc.kill()
            raise RuntimeError("pqs-server did not become ready")
        self.port = self.ready["port"]
        self.addr = f"127.0.0.1:{self.port}"
        self.ca = str(self.dir / "ca.pem")
        self.records = None
        self.returncode = None

    def stop(self, timeout=30):
        if self.records is not None:
            return self.records
        self.returncode = stop(self.proc, timeout)
        self._err.close()
        self.records = parse_lines(self.log.read_text())
        return self.records

    def stderr(self):
        return self.stderr_path.read_text()

    def conns(self):
        return [r for r in self.stop() if r["type"] == "conn"]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def parse_lines_safe(text):
    out = []
    for ln in text.splitlines():
        try:
            out.append(json.loads(ln))
        except ValueError:
            pass  # a line being written
    return out


class TimerResult:
    def __init__(self, proc):
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.records = parse_lines(proc.stdout) if proc.stdout else []

    def of(self, kind):
        return [r for r in self.records if r["type"] == kind]

    @property
    def header(self):
        return self.records[0]

    @property
    def attempts(self):
        return self.of("attempt")

    @property
    def summary(self):
        s = self.of("summary")
        return s[-1] if s else None


def run_timer(*args, asan=False, timeout=300, env=None):
    cmd = [binary("pqs-timer", asan), *map(str, args)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
    return TimerResult(proc)


def run_tool(name, *args, timeout=120):
    return subprocess.run([binary(name), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def free_port():
    """A loopback port with nothing listening on it."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run_fuzz(target, *args):
    """Builds the libFuzzer targets (clang -fsanitize=fuzzer,address,undefined) and runs one
    with args; returns the finished process (libFuzzer reports on stderr)."""
    need(shutil.which("clang") is not None, "clang missing (the fuzz targets need libFuzzer): make deps installs it")
    subprocess.run(["make", "-s", "-C", str(REPO / "testbed"), f"BUILD={BUILD}", "fuzz"], check=True)
    return subprocess.run([str(BUILD / "fuzz" / target), *map(str, args)], capture_output=True, text=True,
                          timeout=300)
