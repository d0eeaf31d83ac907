"""`capture: true` end to end (root): tiny real runs over the userspace link, real pqs-server,
pqs-timer and pqs-capture. Each cell's pcapng holds its connections and nothing else, tshark
finds every ClientHello and the server's first flight in it, and with the cell's key log it
decrypts the encrypted handshake (Certificate, CertificateVerify, Finished) over TCP and QUIC;
the cap stops the recording, leaves a whole file below it and is recorded in DONE."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

from exp_file import experiment_yaml
from needs import need

pytestmark = pytest.mark.netns  # skipped when not root, except in CI (tests/conftest.py)

SAMPLES, WARMUP = 3, 1
CONNS = SAMPLES + WARMUP


def exp_text(backend: str, transports: str) -> str:
    return experiment_yaml("capture", groups=["x25519"], sigs=["ecdsa-p256"], profiles=[dict(name="cap-a", rtt="10ms")],
                           samples=SAMPLES, warmup=WARMUP, seed=3, transports=transports, rtt_probes=5,
                           capture="true", backend=backend)


# NSS key log: LABEL <client random, 32 bytes hex> <secret hex>
KEYLOG_LINE = re.compile(r"^(CLIENT_HANDSHAKE_TRAFFIC_SECRET|SERVER_HANDSHAKE_TRAFFIC_SECRET|CLIENT_TRAFFIC_SECRET_0|"
                         r"SERVER_TRAFFIC_SECRET_0|EXPORTER_SECRET) ([0-9a-f]{64}) ([0-9a-f]{64,96})$")
CLIENT_HELLO, SERVER_HELLO, ENC_EXT, CERTIFICATE, CERT_VERIFY, FINISHED = 1, 2, 8, 11, 15, 20
FIELDS = ("frame.interface_name", "ip.src", "ip.dst", "tcp.srcport", "tcp.dstport", "udp.srcport", "udp.dstport",
          "tls.handshake.type", "tcp.flags.syn", "tcp.flags.ack", "quic.long.packet_type")


@pytest.fixture(scope="module")
def have_tshark():
    need(shutil.which("tshark") is not None, "tshark missing: scripts/install-system-packages.sh --test installs it")


def the_run(out: Path) -> Path:
    [meta] = list(out.glob("*/*/meta.json"))
    return meta.parent


def tshark(pcap: Path, *args: str, keys: Path | None = None) -> list[list[str]]:
    """tshark's fields of pcap (tab-separated rows); keys: decrypt with this key log. The file
    must read whole (no block cut short)."""
    opts = ["-o", f"tls.keylog_file:{keys}"] if keys else []
    cp = subprocess.run(["tshark", "-r", str(pcap), *opts, "-T", "fields", "-E", "separator=/t", *args],
                        capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr
    assert "cut short" not in cp.stderr, cp.stderr
    return [ln.split("\t") for ln in cp.stdout.splitlines()]


def frames(pcap: Path, keys: Path | None = None) -> list[dict[str, str]]:
    """Every frame of pcap as {field: value} (FIELDS; several values comma-separated)."""
    return [dict(zip(FIELDS, r)) for r in tshark(pcap, *[a for f in FIELDS for a in ("-e", f)], keys=keys)]


def handshake_types(rows: list[dict[str, str]]) -> dict[tuple[str, str], set[int]]:
    """{(client port, sending side lc|ls): TLS handshake message types seen}."""
    seen: dict[tuple[str, str], set[int]] = defaultdict(set)
    for r in rows:
        sport, dport = r["tcp.srcport"] or r["udp.srcport"], r["tcp.dstport"] or r["udp.dstport"]
        side = r["frame.interface_name"][-2:]
        seen[(sport if side == "lc" else dport, side)] |= {int(t) for t in r["tls.handshake.type"].split(",") if t}
    return seen


def yes(v: str) -> bool:
    return v in ("1", "True")


# Both backends record the same frames, each once (netem: in its lane, user-mode Linux here,
# where every step is several times slower: TCP cells only).
@pytest.mark.parametrize("backend,transports", [("userspace", ["tcp", "quic"]),
                                                pytest.param("netem", ["tcp"], marks=pytest.mark.netem)])
def test_capture_tcp_and_quic_cells(pqs, write_exp, tmp_path, have_tshark, backend, transports):
    out = tmp_path / "results"
    cp = pqs("run", str(write_exp(exp_text(backend, f"[{', '.join(transports)}]"))), "--out", str(out))
    assert cp.returncode == 0, cp.stderr
    path = the_run(out)
    meta = json.loads((path / "meta.json").read_text())
    assert meta["capture"]["enabled"] is True and meta["capture"]["max_bytes"] == 4 << 20
    assert meta["tools"]["pqs-capture"]["sha256"]
    cells = {json.loads(p.read_text())["transport"]: p.parent for p in (path / "raw").glob("*/DONE")}
    assert sorted(cells) == sorted(transports)

    for transport, d in cells.items():
        done = json.loads((d / "DONE").read_text())
        cap = done["capture"]
        pcap, keys = d / f"{d.name}.pcapng", d / f"{d.name}.keys"
        assert done["status"] == "complete" and done["n_ok"] == SAMPLES and done["backend"] == backend, done.get("reason")
        assert cap["enabled"] and cap["rc"] == 0 and cap["pcapng"] == pcap.name and cap["keylog"] == keys.name
        assert cap["capped"] is False and cap["stopped_by"] == "signal" and cap["kernel_drops"] == 0
        assert cap["bytes"] == pcap.stat().st_size and cap["frames"] == sum(i["frames"] for i in cap["per_iface"]) > 0
        assert [i[-3:] for i in cap["ifaces"]] == ["-lc", "-ls"], cap["ifaces"]
        timer_argv = json.loads((d / "timer.argv.json").read_text())
        assert timer_argv[timer_argv.index("--keylog") + 1] == keys.name

        # the key log: whole NSS lines, one TLS 1.3 set of five per connection
        lines = keys.read_text().splitlines()
        assert all(KEYLOG_LINE.match(ln) for ln in lines), lines[:3]
        randoms = {KEYLOG_LINE.match(ln).group(2) for ln in lines}
        assert len(randoms) == CONNS and len(lines) == 5 * CONNS, (transport, len(randoms), len(lines))

        # only this cell's flows: every frame from or to the server's address and the cell's port
        ready = json.loads((d / "server.jsonl").read_text().splitlines()[1])
        server = tuple(ready["listen"].rsplit(":", 1))  # (address, port) of this cell's server
        plain_rows, clear_rows = frames(pcap), frames(pcap, keys)
        assert len(plain_rows) == len(clear_rows) == cap["frames"]
        for r in plain_rows:
            # lc: frames the client sent (to the server), ls: frames the server sent
            end = ((r["ip.dst"], r["tcp.dstport"] or r["udp.dstport"]) if r["frame.interface_name"].endswith("-lc")
                   else (r["ip.src"], r["tcp.srcport"] or r["udp.srcport"]))
            assert end == server, r

        plain, clear = handshake_types(plain_rows), handshake_types(clear_rows)
        clients = {c for c, _ in clear}
        assert len(clients) == CONNS, clear  # every connection (warm-up included) is in the file
        for c in clients:
            # the ClientHello from the client's side, ServerHello + the encrypted first flight from
            # the server's; the client's Finished too once decrypted
            assert CLIENT_HELLO in plain[(c, "lc")] and SERVER_HELLO in plain[(c, "ls")], plain
            assert {SERVER_HELLO, ENC_EXT, CERTIFICATE, CERT_VERIFY, FINISHED} <= clear[(c, "ls")], (transport, clear)
            assert FINISHED in clear[(c, "lc")], (transport, clear)
            assert CERTIFICATE not in plain.get((c, "ls"), set()), "without the key log it stays encrypted"
        if transport == "tcp":  # each connection's SYN, once (netem's bridge would add a second copy)
            syns = [r["tcp.srcport"] for r in plain_rows if yes(r["tcp.flags.syn"]) and not yes(r["tcp.flags.ack"])]
            assert sorted(syns) == sorted(set(syns)) and len(syns) == CONNS, syns
        else:  # quic_retry: on: one Retry per connection, from the server
            retry = [r for r in plain_rows if "3" in r["quic.long.packet_type"].split(",")]
            assert len(retry) == CONNS and all(r["frame.interface_name"].endswith("-ls") for r in retry), retry


def test_cap_is_honoured_and_recorded(pqs, write_exp, tmp_path, have_tshark):
    exp = experiment_yaml("capcap", groups=["x25519"], sigs=["ecdsa-p256"], profiles=[dict(name="cap-b", rtt="4ms")],
                          samples=6, warmup=0, seed=4, rtt_probes=0, capture="true", capture_max_bytes=4096)
    out = tmp_path / "results"
    cp = pqs("run", str(write_exp(exp)), "--out", str(out))
    assert cp.returncode == 0, cp.stderr
    path = the_run(out)
    assert json.loads((path / "meta.json").read_text())["capture"]["max_bytes"] == 4096
    [d] = [p.parent for p in (path / "raw").glob("*/DONE")]
    done = json.loads((d / "DONE").read_text())
    cap, pcap = done["capture"], d / f"{d.name}.pcapng"
    # the cap ends the recording, not the cell
    assert done["status"] == "complete" and done["n_ok"] == 6, done.get("reason")
    assert cap["capped"] is True and cap["stopped_by"] == "cap" and cap["rc"] == 0 and cap["max_bytes"] == 4096
    assert cap["bytes"] == pcap.stat().st_size <= 4096 and cap["frames"] > 0
    rows = tshark(pcap, "-e", "frame.number", "-e", "tls.handshake.type")
    assert len(rows) == cap["frames"]  # every block whole: tshark reads them all, nothing cut short
    assert any(r[1].split(",")[0] == "1" for r in rows), "the first connection's ClientHello is in it"
    # 6 handshakes need about 6 x 2.4 kB here: the file holds the first one or two
    syns = tshark(pcap, "-Y", "tcp.flags.syn == 1 && tcp.flags.ack == 0", "-e", "tcp.srcport")
    assert 1 <= len(syns) < 6, syns


def _alive(pid: int) -> bool:
    """pid is a running pqs-capture (not a zombie, not a reused pid)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"pqs-capture" in cmd and stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.parametrize("how", ["SIGINT", "SIGKILL"])
def test_capture_dies_with_the_run(pqs, pqs_spawn, write_exp, tmp_path, how, have_tshark):
    """Ctrl-C stops the cell's pqs-capture with the rest (exit 130, no namespace left); kill -9 of
    the runner takes it along too (PR_SET_PDEATHSIG), and `pqshake clean` removes the network. The
    file recorded so far reads."""
    import os
    import signal
    import time

    exp = experiment_yaml("capkill", groups=["x25519"], sigs=["ecdsa-p256"], profiles=[dict(name="cap-k", rtt="10ms")],
                          samples=400, warmup=0, seed=5, rtt_probes=0, capture="true")
    out = tmp_path / "results"
    proc = pqs_spawn("run", str(write_exp(exp)), "--out", str(out))
    try:
        deadline, pid, d = time.monotonic() + 60, None, None
        while time.monotonic() < deadline and proc.poll() is None:
            cells = list(out.glob("*/*/raw/*"))
            if cells and (cells[0] / "capture.stdout").exists() and (cells[0] / "timer.jsonl").exists():
                d = cells[0]
                ready = [json.loads(ln) for ln in (d / "capture.stdout").read_text().splitlines() if ln.strip()]
                pcap = d / f"{d.name}.pcapng"
                # a few attempts in, and some of their frames written (flushed every 0.2 s)
                if (ready and (d / "timer.jsonl").read_text().count('"type":"attempt"') >= 3
                        and pcap.stat().st_size > ready[0]["header_bytes"] + 1000):
                    pid = ready[0]["pid"]
                    break
            time.sleep(0.05)
        assert pid is not None and _alive(pid), proc.communicate(timeout=60) if proc.poll() is not None else "no capture"
        proc.send_signal(getattr(signal, how))
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for _ in range(100):  # PR_SET_PDEATHSIG is delivered as the runner exits
        if not _alive(pid):
            break
        time.sleep(0.02)
    assert not _alive(pid), f"pqs-capture {pid} outlived the run ({how})"
    session = json.loads((the_run(out) / "meta.json").read_text())["sessions"][0]["session"]
    if how == "SIGINT":
        assert proc.returncode == 130, err
    else:
        assert proc.returncode == -signal.SIGKILL
        cp = pqs("clean")
        assert cp.returncode == 0, cp.stderr
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"pqs-{session}-" not in ns, ns
    # SIGINT: stopped with SIGTERM by the runner (all it held is written); SIGKILL: killed, the
    # file ends with the last whole block written (never in the middle of one: tshark reads it)
    assert len(tshark(pcap, "-Y", "tls.handshake.type == 1", "-e", "frame.number")) >= 1
    assert os.path.getsize(pcap) > 0


def test_capture_cells_only_the_matching_cell_records(pqs, write_exp, tmp_path):
    """capture_cells: of a tcp and a quic cell only the quic one records and has a key log; the
    other's DONE says capture was off for it, and its timer had no --keylog."""
    out = tmp_path / "results"
    text = exp_text("userspace", "[tcp, quic]") + "capture_cells: [{transport: quic}]\n"
    cp = pqs("run", str(write_exp(text)), "--out", str(out))
    assert cp.returncode == 0, cp.stderr
    path = the_run(out)
    assert json.loads((path / "meta.json").read_text())["capture"]["cells"] == [{"transport": ["quic"]}]
    cells = {json.loads(p.read_text())["transport"]: p.parent for p in (path / "raw").glob("*/DONE")}
    quic, tcp = json.loads((cells["quic"] / "DONE").read_text()), json.loads((cells["tcp"] / "DONE").read_text())
    assert quic["capture"]["enabled"] and quic["capture"]["frames"] > 0 and tcp["capture"] == {"enabled": False}
    assert (cells["quic"] / f"{cells['quic'].name}.pcapng").exists()
    assert not list(cells["tcp"].glob("*.pcapng")) and not list(cells["tcp"].glob("*.keys"))
    assert "--keylog" not in json.loads((cells["tcp"] / "timer.argv.json").read_text())
