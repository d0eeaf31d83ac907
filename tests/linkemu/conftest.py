"""Fixtures for emulator-level tests of pqs-linkemu / pqs-probe.

These tests need root (network namespaces, AF_PACKET).  They build the two
binaries into a temporary directory with the project Makefile, create a dev
topology with emulation/linkemu/devnet.sh (namespaces pqs-t<hex>-*) and remove
it afterwards.
"""
import contextlib
import json
import os
import secrets
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from needs import need
from procs import stop

REPO = Path(__file__).resolve().parents[2]
LINKEMU_DIR = REPO / "emulation" / "linkemu"
DEVNET = LINKEMU_DIR / "devnet.sh"
CLIENT_IP = "10.77.0.1"
SERVER_IP = "10.77.0.2"
PROBE_PORT = 7777


def _can_netns():
    return os.geteuid() == 0 and shutil.which("ip") is not None


@pytest.fixture(scope="session")
def bins(tmp_path_factory):
    need(_can_netns(), "the namespace tests need root and iproute2 (CI must run them)")
    build = tmp_path_factory.mktemp("linkemu-build")
    subprocess.run(["make", "-s", "-C", str(LINKEMU_DIR), f"BUILD={build}", "all"],
                   check=True)
    return build / "bin"


class DevNet:
    """One devnet.sh topology plus a pqs-probe reflector in the server netns."""

    def __init__(self, bins, mtu=1500):
        self.bins = bins
        self.id = "t" + secrets.token_hex(3)
        self.mtu = mtu
        self.reflector = None

    def ns(self, role):
        return f"pqs-{self.id}-{role}"

    def nsexec(self, role, *cmd):
        return ["ip", "netns", "exec", self.ns(role), *map(str, cmd)]

    # What pqshake.emulation.check's iperf3 helpers read of a topology. Each test configures
    # its own emulator, so the profile only bounds their timeouts (up to 1 s each way).
    server_addr = SERVER_IP

    def ns_argv(self, role, cmd):
        return self.nsexec(role, *cmd)

    @property
    def profile(self):
        from pqshake.emulation.profiles import Profile
        return Profile.from_mapping({"name": "devnet", "rtt": "2s"})

    def up(self):
        subprocess.run([str(DEVNET), "up", self.id, str(self.mtu)], check=True,
                       stdout=subprocess.DEVNULL)
        self.reflector = subprocess.Popen(
            self.nsexec("server", self.bins / "pqs-probe", "--serve",
                        f"{SERVER_IP}:{PROBE_PORT}"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.reflector.stdout.readline()
        assert '"serving"' in line, line

    def down(self):
        if self.reflector is not None:
            self.reflector.kill()
            self.reflector.wait()
        subprocess.run([str(DEVNET), "down", self.id], check=False)

    @contextlib.contextmanager
    def emu(self, up="", down="", *extra, tmp):
        """Run pqs-linkemu in the link namespace; yields a dict that gets
        'ready' (the ready JSON) and, after exit, 'stats' and 'rc'."""
        stats = tmp / f"stats-{secrets.token_hex(3)}.json"
        ready = tmp / f"ready-{secrets.token_hex(3)}"
        cmd = self.nsexec("link", self.bins / "pqs-linkemu", "--a", f"pqs-{self.id}-la",
                          "--b", f"pqs-{self.id}-lb", "--up", up, "--down", down,
                          "--stats", stats, "--ready-file", ready, *extra)
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        info = {"stats_path": stats, "proc": p}
        try:
            deadline = time.monotonic() + 5
            while not ready.exists():
                if p.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"pqs-linkemu did not start: {p.stderr.read()}")
                time.sleep(0.01)
            info["ready"] = json.loads(p.stdout.readline())
            yield info
        finally:
            info["rc"] = stop(p)
            info["stderr"] = p.stderr.read()
            if stats.exists():
                info["stats"] = json.loads(stats.read_text())

    def probe(self, count, interval_us, size=64, df=False, timeout_ms=2000, two_step=False):
        cmd = self.nsexec("client", self.bins / "pqs-probe", "--connect",
                          f"{SERVER_IP}:{PROBE_PORT}", "--count", count, "--interval-us",
                          interval_us, "--size", size, "--timeout-ms", timeout_ms)
        if df:
            cmd.append("--df")
        if two_step:
            cmd.append("--two-step")
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        lines = [json.loads(x) for x in out.splitlines()]
        return lines[:-1], lines[-1]


@pytest.fixture
def devnet(bins):
    net = DevNet(bins)
    net.up()
    try:
        yield net
    finally:
        net.down()


@pytest.fixture
def devnet_jumbo(bins):
    net = DevNet(bins, mtu=9000)
    net.up()
    try:
        yield net
    finally:
        net.down()
