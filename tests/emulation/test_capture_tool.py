"""pqs-capture on its own (emulation/capture/): its ASan+UBSan build in a network namespace of
the test's own (`unshare -n`: nameless, gone with the process, so nothing to clean up) records
exactly the frames its BPF filter keeps, as pcapng that a strict reader of the format (below)
and tshark accept; it flushes what its sockets hold on SIGTERM, stops at --max-bytes with the
file below the cap, and refuses bad usage in one line. Needs root (AF_PACKET)."""

from __future__ import annotations

import json
import re
import shutil
import signal
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from needs import need
from pqshake.paths import build_dir

pytestmark = pytest.mark.netns
REPO = Path(__file__).resolve().parents[2]
SAN_ENV = {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:exitcode=23",
           "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1:exitcode=24"}
BAD = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")
PORT = 5555

# Run inside `unshare -n` as: python -c TRAFFIC CAPTURE_BIN OUT MAX_BYTES MODE. Brings lo up
# (MTU 1500, so a large datagram is fragmented), starts pqs-capture on lo for 127.0.0.1:PORT,
# sends frames that must and must not be kept, stops it (SIGTERM, or MODE=cap: until it stops
# itself at the cap), prints its stdout lines and {"rc": N, "stderr": ...}.
TRAFFIC = r"""
import json, os, signal, socket, subprocess, sys, time
exe, out, max_bytes, mode = sys.argv[1:5]
P = %d
subprocess.run(["ip", "link", "set", "lo", "up", "mtu", "1500"], check=True)
cap = subprocess.Popen([exe, "--iface", "lo", "--out", out, "--host", "127.0.0.1", "--port", str(P),
                        "--max-bytes", max_bytes], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
print(cap.stdout.readline().strip(), flush=True)

def udp(src, dst, payload=b"x", opts=None):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    if opts:
        s.setsockopt(socket.IPPROTO_IP, socket.IP_OPTIONS, opts)
    s.bind(src)
    s.sendto(payload, dst)
    s.close()

if mode == "cap":
    t0 = time.monotonic()
    while cap.poll() is None and time.monotonic() - t0 < 20:
        udp(("127.0.0.1", 0), ("127.0.0.1", P), b"c" * 200)
        time.sleep(0.002)
else:
    udp(("127.0.0.1", 40001), ("127.0.0.1", P), b"to-port")                    # kept: to HOST:PORT
    udp(("127.0.0.1", P), ("127.0.0.4", 6000), b"from-port")                   # kept: from HOST:PORT
    udp(("127.0.0.1", 40002), ("127.0.0.1", P + 1), b"other-port")             # not: another port
    udp(("127.0.0.2", P), ("127.0.0.3", 6000), b"other-host")                  # not: PORT, not HOST
    udp(("127.0.0.5", 40003), ("127.0.0.1", P + 1), b"host-only")              # not: HOST, not PORT
    udp(("127.0.0.1", 40004), ("127.0.0.1", P), b"ip-options", b"\x01\x01\x01\x00")  # kept: IHL 6
    udp(("127.0.0.1", 40005), ("127.0.0.1", P), b"f" * 3000)                   # first fragment kept
    l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("127.0.0.1", P)); l.listen()
    c = socket.create_connection(("127.0.0.1", P)); s, _ = l.accept()
    c.sendall(b"t" * 4000); got = 0
    while got < 4000:
        got += len(s.recv(65536))
    c.close(); s.close(); l.close()
    subprocess.run(["ping", "-c", "1", "-W", "1", "127.0.0.1"], capture_output=True)  # not: ICMP
    cap.send_signal(signal.SIGTERM)
rest, err = cap.communicate(timeout=20)
for line in rest.splitlines():
    print(line, flush=True)
print(json.dumps({"rc": cap.returncode, "stderr": err}), flush=True)
""" % PORT


@pytest.fixture(scope="module")
def capture_asan():
    """The ASan+UBSan build of pqs-capture (make asan builds it; built here when missing)."""
    need(shutil.which("tshark") is not None, "tshark missing: scripts/install-system-packages.sh installs it")
    exe = build_dir() / "asan" / "bin" / "pqs-capture"
    subprocess.run(["make", "-s", "-C", str(REPO / "emulation" / "capture"), f"BUILD={build_dir()}", "asan"],
                   check=True, capture_output=True)
    return exe


def record(exe: Path, out: Path, max_bytes: int = 1 << 20, mode: str = "signal") -> tuple[dict, dict, dict]:
    """(ready line, stats line, {rc, stderr}) of one recording in a namespace of its own."""
    import os

    cp = subprocess.run(["unshare", "-n", sys.executable, "-c", TRAFFIC, str(exe), str(out), str(max_bytes), mode],
                        capture_output=True, text=True, timeout=60, env={**os.environ, **SAN_ENV})
    assert cp.returncode == 0, cp.stderr[-3000:]
    lines = [json.loads(ln) for ln in cp.stdout.splitlines() if ln.strip()]
    ready, stats, end = lines[0], lines[-2], lines[-1]
    assert ready["type"] == "ready" and stats["type"] == "stats", lines
    assert end["rc"] == 0 and not any(b in end["stderr"] for b in BAD), end["stderr"][-3000:]
    return ready, stats, end


def read_pcapng(path: Path) -> dict:
    """A strict reader of what pqs-capture writes: every block whole (both length fields agree,
    32-bit aligned), one section, the interfaces' link type / snaplen / options, each EPB's
    fields and options. Returns {"interfaces": [...], "packets": [...]}."""
    data = path.read_bytes()
    pos, ifaces, packets = 0, [], []

    def options(body: bytes) -> dict[int, list[bytes]]:
        opts: dict[int, list[bytes]] = {}
        i = 0
        while i + 4 <= len(body):
            code, n = struct.unpack_from("<HH", body, i)
            if code == 0:
                assert n == 0 and i + 4 == len(body), "opt_endofopt must end the options"
                return opts
            opts.setdefault(code, []).append(body[i + 4:i + 4 + n])
            i += 4 + n + (-n % 4)
        raise AssertionError("options without opt_endofopt")

    while pos < len(data):
        btype, blen = struct.unpack_from("<II", data, pos)
        assert blen % 4 == 0 and blen >= 12 and pos + blen <= len(data), (pos, blen, len(data))
        assert struct.unpack_from("<I", data, pos + blen - 4)[0] == blen, f"block at {pos}: trailing length differs"
        body = data[pos + 8:pos + blen - 4]
        if pos == 0:
            assert btype == 0x0A0D0D0A, "the file begins with a Section Header Block"
            magic, major, minor, section_len = struct.unpack_from("<IHHq", body)
            assert (magic, major, minor, section_len) == (0x1A2B3C4D, 1, 0, -1)
            assert b"pqs-capture" in options(body[16:])[4][0]
        elif btype == 1:
            linktype, _, snaplen = struct.unpack_from("<HHI", body)
            o = options(body[8:])
            ifaces.append({"linktype": linktype, "snaplen": snaplen, "name": o[2][0].decode(),
                           "tsresol": o[9][0][0], "filter": o[11][0] if 11 in o else None})
        elif btype == 6:
            iid, hi, lo, caplen, origlen = struct.unpack_from("<IIIII", body)
            assert iid < len(ifaces) and caplen <= origlen and caplen <= ifaces[iid]["snaplen"]
            frame = body[20:20 + caplen]
            o = options(body[20 + caplen + (-caplen % 4):])
            packets.append({"iface": iid, "ts_ns": (hi << 32) | lo, "caplen": caplen, "origlen": origlen,
                            "flags": struct.unpack("<I", o[2][0])[0], "frame": frame})
        else:
            raise AssertionError(f"unexpected block type {btype:#x} at {pos}")
        pos += blen
    return {"interfaces": ifaces, "packets": packets, "size": len(data)}


def tshark(path: Path, *args: str) -> list[list[str]]:
    cp = subprocess.run(["tshark", "-r", str(path), "-T", "fields", "-E", "separator=/t", *args],
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    assert "cut short" not in cp.stderr and "malformed" not in cp.stderr.lower(), cp.stderr
    return [ln.split("\t") for ln in cp.stdout.splitlines()]


def test_records_exactly_the_filtered_flows(capture_asan, tmp_path):
    out = tmp_path / "c.pcapng"
    ready, stats, _ = record(capture_asan, out)
    assert ready["ifaces"][0]["name"] == "lo" and ready["direction"] == "in" and ready["snaplen"] == 262144
    assert "src host 127.0.0.1 and src port 5555" in ready["filter"]

    f = read_pcapng(out)
    assert f["size"] == stats["bytes"] and stats["capped"] is False and stats["stopped_by"] == "signal"
    assert f["interfaces"] == [{"linktype": 1, "snaplen": 262144, "name": "lo", "tsresol": 9,
                                "filter": b"\x00" + ready["filter"].encode()}]
    assert len(f["packets"]) == stats["frames"] == stats["per_iface"][0]["frames"] > 0
    assert stats["kernel_drops"] == 0 and stats["truncated"] == 0
    assert all(p["flags"] & 3 == 1 for p in f["packets"]), "direction in: inbound frames only (epb_flags)"
    ts = [p["ts_ns"] for p in f["packets"]]
    assert ts == sorted(ts) and 1.6e18 < ts[0] < 4e18, "nanosecond wall-clock times, in order"
    assert sum(p["origlen"] for p in f["packets"]) == stats["wire_bytes"]

    rows = tshark(out, "-e", "ip.src", "-e", "udp.srcport", "-e", "ip.dst", "-e", "udp.dstport", "-e", "tcp.srcport",
                  "-e", "tcp.dstport", "-e", "ip.hdr_len", "-e", "ip.frag_offset", "-e", "ip.flags.mf")
    udp = {(r[0], r[1], r[2], r[3], r[6]) for r in rows if r[1]}
    assert udp == {("127.0.0.1", "40001", "127.0.0.1", "5555", "20"),
                   ("127.0.0.1", "5555", "127.0.0.4", "6000", "20"),
                   ("127.0.0.1", "40004", "127.0.0.1", "5555", "24")}, rows   # behind IP options (IHL 6)
    # the 3000-byte datagram: its first fragment (the ports are in it), not the others (no ports);
    # tshark shows no UDP fields for a datagram it cannot reassemble
    frag = [r for r in rows if r[8] in ("1", "True") or r[7] not in ("", "0")]
    assert [(r[7], r[8]) for r in frag] in ([("0", "1")], [("0", "True")]), frag
    assert not any(r[0] in ("127.0.0.2", "127.0.0.5") or "5556" in (r[3], r[5]) for r in rows), rows
    tcp = [r for r in rows if r[4]]
    assert {r[4] for r in tcp} >= {"5555"} and {r[5] for r in tcp} >= {"5555"}, "both directions of the TCP flow"
    syn = tshark(out, "-Y", "tcp.flags.syn == 1", "-e", "tcp.flags.ack")
    assert sorted(r[0] for r in syn) in (["0", "1"], ["False", "True"]), syn
    payload = sum(int(r[0] or 0) for r in tshark(out, "-Y", "tcp.dstport == 5555", "-e", "tcp.len"))
    assert payload == 4000, "every byte of the TCP stream, including what was in flight at SIGTERM"
    assert len(rows) == len(f["packets"])


def test_stops_at_the_cap_with_a_whole_file(capture_asan, tmp_path):
    out = tmp_path / "cap.pcapng"
    _, stats, _ = record(capture_asan, out, max_bytes=2048, mode="cap")
    assert stats["capped"] is True and stats["stopped_by"] == "cap" and stats["max_bytes"] == 2048
    f = read_pcapng(out)
    assert f["size"] == stats["bytes"] <= 2048 and f["size"] > 2048 - 300, "stops at the frame that would cross it"
    assert len(f["packets"]) == stats["frames"] >= 4
    assert len(tshark(out, "-e", "udp.dstport")) == stats["frames"]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(build_dir() / "bin" / "pqs-capture"), *args], capture_output=True, text=True, timeout=20)


@pytest.mark.parametrize("args,code,pattern", [
    ([], 2, r"--iface NAME is required"),
    (["--iface", "lo"], 2, r"--out FILE is required"),
    (["--iface", "lo", "--out", "x", "--port", "70000"], 2, r'bad --port "70000": 1\.\.65535'),
    (["--iface", "lo", "--out", "x", "--host", "10.0.0"], 2, r'bad --host "10\.0\.0": an IPv4 address'),
    (["--iface", "lo", "--iface", "lo", "--out", "x"], 2, r"--iface lo given twice"),
    (["--iface", "lo", "--out", "x", "--direction", "up"], 2, r"in, out or both"),
    (["--iface", "lo", "--out", "x", "--max-bytes", "-1"], 2, r'bad --max-bytes "-1"'),
    (["--iface", "lo", "--out", "{tmp}/x", "--max-bytes", "100"], 1, r"--max-bytes 100 is smaller than the file's headers"),
    (["--iface", "pqs-nosuch0", "--out", "{tmp}/x"], 1, r"no interface pqs-nosuch0 in this network namespace"),
])
def test_bad_usage_is_one_line(args, code, pattern, tmp_path):
    need((build_dir() / "bin" / "pqs-capture").exists(), "pqs-capture not built: make build")
    cp = run(*[a.replace("{tmp}", str(tmp_path)) for a in args])
    assert cp.returncode == code and cp.stdout == "", (cp.returncode, cp.stdout, cp.stderr)
    assert len(cp.stderr.splitlines()) == 1 and cp.stderr.startswith("pqs-capture: "), cp.stderr
    assert re.search(pattern, cp.stderr), cp.stderr


def test_version_and_documented_options():
    need((build_dir() / "bin" / "pqs-capture").exists(), "pqs-capture not built: make build")
    v = run("--version")
    assert v.returncode == 0 and v.stderr == "" and re.fullmatch(r"pqs-capture \S+ \(git \S+\)\n", v.stdout), v
    h = run("--help")
    assert h.returncode == 0
    options = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]+", h.stdout)) - {"--help"}
    readme = (REPO / "docs" / "usage.md").read_text()
    block = readme[readme.index("## The programs"):]
    lines = block.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith("pqs-capture"))
    synopsis = " ".join([lines[i]] + [ln for ln in lines[i + 1:i + 4] if ln.startswith("     ")])
    assert options and not sorted(o for o in options if o not in synopsis), synopsis
    emu = (REPO / "emulation" / "README.md").read_text()
    assert all(o in emu for o in options), "emulation/README.md documents every option of pqs-capture"
