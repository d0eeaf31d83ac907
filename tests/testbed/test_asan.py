"""A few hundred handshakes through the ASan+UBSan builds of pqs-server and pqs-timer, all
modes, with leak checking on exit."""
import os
import subprocess

import pytest

from testbed_helpers import BUILD, REPO, Server, run_timer
from needs import need

SAN_ENV = {
    "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:exitcode=23",
    "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1:exitcode=24",
}
BAD = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")


@pytest.fixture(scope="module")
def asan_built():
    if not (BUILD / "asan" / "bin" / "pqs-timer").exists():
        need((BUILD / "deps.mk").exists(), "no build/deps.mk: run make build")
        subprocess.run(["make", "-s", "-C", str(REPO / "testbed"), f"BUILD={BUILD}", "asan"], check=True)
    return True


def test_sanitized_server_and_timer_all_modes(tmp_path, asan_built):
    srv = Server(tmp_path, "--groups", "X25519MLKEM768:x25519:secp256r1", "--threads", "4", asan=True,
                 env=SAN_ENV)
    total = 0
    runs = [("full", "X25519MLKEM768", ["--response-bytes", 3000]),
            ("resume", "X25519MLKEM768", []),
            ("0rtt", "x25519", ["--response-bytes", 100]),
            ("hrr", "X25519MLKEM768", []),
            ("tls12", "x25519", [])]
    for mode, group, extra in runs:
        r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", group, "--mode", mode,
                      "--samples", 60, "--concurrency", 2, *extra, asan=True, env=SAN_ENV)
        assert r.returncode == 0, r.stderr[-3000:]
        assert not any(b in r.stderr for b in BAD), r.stderr[-3000:]
        assert r.summary["ok"] == 60, (mode, r.summary)
        total += r.summary["ok"]
    # failures through the sanitizers too: group mismatch and refused connections
    r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", "MLKEM1024", "--samples", 5,
                  asan=True, env=SAN_ENV)
    assert r.returncode == 0 and r.summary["failed"] == 5
    recs = srv.stop()
    err = srv.stderr()
    assert srv.returncode == 0, err[-3000:]
    assert not any(b in err for b in BAD), err[-3000:]
    assert total >= 300
    assert recs[-1]["type"] == "summary"



def test_sanitized_oqsprovider_mutual_tls(tmp_path, asan_built):
    """oqs-provider built in (the default) under the sanitizers: falcon512 server chain of depth
    2, a required p256_falcon512 client chain, frodo640aes and x25519_mlkem512, two connections
    at once (the first-query race of oqs-provider, see testbed/README.md)."""
    srv = Server(tmp_path, "--sig", "falcon512", "--chain-depth", 2, "--client-auth", "p256_falcon512",
                 "--groups", "frodo640aes:x25519_mlkem512:x25519", "--threads", "4", asan=True, env=SAN_ENV)
    for mode, group in (("full", "frodo640aes"), ("resume", "x25519_mlkem512"), ("hrr", "x25519_mlkem512")):
        r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--client-cert", srv.dir, "--mode", mode,
                      "--groups", f"x25519:{group}" if mode == "hrr" else group, "--samples", 20,
                      "--concurrency", 2, "--response-bytes", 100, asan=True, env=SAN_ENV)
        assert r.returncode == 0, r.stderr[-3000:]
        assert not any(b in r.stderr for b in BAD), r.stderr[-3000:]
        assert r.summary["ok"] == 20, (mode, r.summary, r.attempts[:1])
        assert {a["client_sig"] for a in r.attempts} == {None if mode == "resume" else "p256_falcon512"}
    srv.stop()
    err = srv.stderr()
    assert srv.returncode == 0, err[-3000:]
    assert not any(b in err for b in BAD), err[-3000:]


def test_sanitized_fs0rtt_accepted_replayed_and_used_up(tmp_path, asan_built):
    """fs0rtt (testbed/fs0rtt/, issue 22) through the sanitizers: two clients at once on a key of
    n = 24 (the relic lock, the punctures), then past n (the used-up key's refusals), a damaged
    identity and a replay (test_fs0rtt.py's relay), with leak checking on exit."""
    from test_fs0rtt import keygen

    key = keygen(tmp_path / "key", n=24)
    with Server(tmp_path, "--groups", "X25519MLKEM768", "--bfe-key", key, "--threads", "4", asan=True,
                env=SAN_ENV) as srv:  # stopped whatever happens (stop() is idempotent)
        _fs0rtt_through_the_sanitizers(srv, key)


def _fs0rtt_through_the_sanitizers(srv, key):
    from test_fs0rtt import Relay, _identity_at, send_raw

    args = ("--connect", srv.addr, "--ca", srv.ca, "--groups", "X25519MLKEM768", "--mode", "fs0rtt",
            "--bfe-public", key / "public.bin")
    r = run_timer(*args, "--samples", 20, "--concurrency", 2, "--response-bytes", 100, asan=True, env=SAN_ENV)
    assert r.returncode == 0 and not any(b in r.stderr for b in BAD), r.stderr[-3000:]
    assert r.summary["ok"] == 20, r.summary
    relay = Relay(("127.0.0.1", srv.port))
    run_timer(*args[2:], "--connect", f"127.0.0.1:{relay.port}", "--samples", 1, asan=True, env=SAN_ENV)
    relay.thread.join(10)
    flight = bytearray(relay.client_bytes)
    send_raw(srv.addr, bytes(flight))  # a replay
    flight[_identity_at(bytes(flight), srv.ready["fs0rtt"]["k"])] ^= 0xFF  # a length that lies
    send_raw(srv.addr, bytes(flight))
    r = run_timer(*args, "--samples", 6, asan=True, env=SAN_ENV)  # 21 punctures so far: 3 left
    assert r.returncode == 0 and not any(b in r.stderr for b in BAD), r.stderr[-3000:]
    assert r.summary["ok"] == 3 and r.summary["errors"] == {"early_data_rejected": 3}, r.summary
    recs = srv.stop()
    err = srv.stderr()
    assert srv.returncode == 0 and not any(b in err for b in BAD), err[-3000:]
    fs = recs[-1]["fs0rtt"]
    assert (fs["accepted"], fs["replay"], fs["malformed"], fs["exhausted"]) == (24, 1, 1, 3), fs


def test_sanitized_ngtcp2_quic(tmp_path, asan_built):
    """The ngtcp2 QUIC engine (testbed/ngtcp2/) at both ends under the sanitizers: Retry, full
    handshakes with a response, resumption, two connections at once, a failed handshake and
    datagrams that open nothing, with leak checking at exit."""
    import socket
    srv = Server(tmp_path, "--transport", "quic", "--quic-engine", "ngtcp2", "--quic-retry", "on",
                 "--groups", "X25519MLKEM768:x25519", asan=True, env=SAN_ENV)

    def timer(*args):
        return run_timer("--transport", "quic", "--quic-engine", "ngtcp2", "--connect", srv.addr, "--ca", srv.ca,
                         *args, asan=True, env=SAN_ENV)

    for mode, n, extra in (("full", 10, ["--response-bytes", 30000]), ("resume", 6, [])):
        r = timer("--groups", "X25519MLKEM768", "--mode", mode, "--samples", n, "--concurrency", 2, *extra)
        assert r.returncode == 0, r.stderr[-3000:]
        assert not any(b in r.stderr for b in BAD), r.stderr[-3000:]
        assert r.summary["ok"] == n, (mode, r.records[-1])
        assert all(a["quic"]["retry"] for a in r.attempts)
        assert mode != "resume" or all(a["resumed"] for a in r.attempts)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for d in (b"", b"\x40" * 30, bytes([0xc0, 0, 0, 0, 1, 8]) + b"\x11" * 8 + b"\0" * 1300,
              bytes([0xc0, 0x1a, 0x2a, 0x3a, 0x4a, 8]) + b"\x11" * 8 + b"\0" * 1300):
        s.sendto(d, ("127.0.0.1", srv.port))
    s.close()
    r = timer("--groups", "MLKEM1024", "--samples", 2, "--timeout", "3s")
    assert r.returncode == 0 and r.summary["failed"] == 2, r.records[-1]
    recs = srv.stop()
    err = srv.stderr()
    assert srv.returncode == 0, err[-3000:]
    assert not any(b in err for b in BAD), err[-3000:]
    assert sum(1 for c in recs if c["type"] == "conn" and c["ok"]) == 10 + 6 + 2  # a prime per worker
