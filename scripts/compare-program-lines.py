#!/usr/bin/env python3
"""Two builds of pqs-server and pqs-timer on loopback, the same cases: every line both write (header,
attempt, prime, summary, ready, conn) compared by its members and by each value that is not a time,
a port, a path, a counter of the kernel's or a size that varies between two runs of one build (a
fresh ECDSA signature is 70-72 bytes). A refactor of the C programs should show the same members
and no value differences but those noise ones; run it with the build before the change and after:

    scripts/compare-program-lines.py OLD_BIN_DIR NEW_BIN_DIR [--cases full,quic,...]

Prints each difference and, per case, the lines and members compared. Exit status 1 when a line
type or a member set differs (the lines are not the same), else 0; value differences are printed
for a reader to judge. Loopback only; each server is stopped by its pid."""
import argparse
import json
import re
import subprocess
import tempfile
import time
from pathlib import Path

CASES = {
    "full": ((), ()),
    "resume": ((), ("--mode", "resume")),
    "0rtt": (("--max-early-data", "16384"), ("--mode", "0rtt", "--response-bytes", "100")),
    "hrr": ((), ("--mode", "hrr")),
    "hrr-decoy": ((), ("--mode", "hrr", "--hrr-decoy", "secp256r1")),
    "tls12": ((), ("--mode", "tls12")),
    "resume_psk": (("--psk-ke", "on"), ("--mode", "resume_psk")),
    "ech": (("--ech", "localhost"), ("--mode", "ech")),
    "fs0rtt": (("--bfe-key", "@KEY", "--max-early-data", "16384"), ("--mode", "fs0rtt", "--bfe-public", "@KEY/public.bin")),
    "s2n-resume": (("--tls-stack", "s2n"), ("--tls-stack", "s2n", "--mode", "resume")),
    "s2n-cross": (("--tls-stack", "s2n"), ()),
    "tfo-0rtt": (("--tcp-fastopen", "64", "--max-early-data", "16384"), ("--tcp-fastopen", "--mode", "0rtt")),
    "quic": (("--transport", "quic"), ("--transport", "quic", "--response-bytes", "100")),
    "quic-resume": (("--transport", "quic"), ("--transport", "quic", "--mode", "resume")),
    "quic-hrr": (("--transport", "quic"), ("--transport", "quic", "--mode", "hrr")),
    "quic-ech": (("--transport", "quic", "--ech", "localhost"), ("--transport", "quic", "--mode", "ech")),
    "ngtcp2-resume": (("--transport", "quic", "--quic-engine", "ngtcp2"), ("--transport", "quic", "--quic-engine", "ngtcp2", "--mode", "resume")),
    "turbotls-resume": (("--transport", "turbotls"), ("--transport", "turbotls", "--mode", "resume")),
    "tcp-noinstr": ((), ("--no-instrument",)),
}
VOLATILE = re.compile(r".*(_ns|_mono_ns|_ns_.*|port|pid|^argv|^ca$|cert_dir|^listen$|^connect$|commit|elapsed|_per_s|"
                      r"_us|rtt.*|^peer$|^time|^start|^out$|^log$|tcp_.*|cookie|calib|^ech_config|^fs0rtt$|secret.*|"
                      r"^bfe.*|^key.*|^path$|^conn$|^i$|^worker$|^local_port$|^rst_guard|^cpu.*|msg_callbacks|^age.*|"
                      r"ticket.*|^client_random|^identity.*|^sni$|^cid.*|^dcid|^scid|^token.*|^retry_.*|"
                      r"^datagrams.*|^packets.*|^bytes.*|.*_bytes_sent|.*_segs.*|.*_sent$|.*_received$|^rx.*|^tx.*|"
                      r"^ack.*|^loss.*|^cwnd.*|^srtt|^pto.*|^segments.*|^flights?$|^callbacks$|^certificate.*|chain_der_bytes|"
                      r"handshake_bytes|record_bytes|datagram_bytes|flight_bytes|udp_flight_bytes|client_had|to_connection|"
                      r"dropped_replay|^server_hello$|^finished$)")

def flat(d, pre=""):
    out = {}
    for k, v in d.items():
        key = pre + k
        if isinstance(v, dict):
            out[key] = "{}"
            out.update(flat(v, key + "."))
        else:
            out[key] = v
    return out

def run(bins, case, tmp):
    sargs, targs = CASES[case]
    key = tmp / "bfe"
    if any(a == "@KEY" for a in sargs) and not key.exists():
        subprocess.run([str(bins / "pqs-bfe-keygen"), "--n", "64", "--p", "2^-5", "--out", str(key)], check=True, capture_output=True)
    sub = lambda a: [str(x).replace("@KEY", str(key)) for x in a]
    d = tmp / f"certs-{case}"; d.mkdir()
    log = tmp / f"s-{case}.jsonl"; out = tmp / f"t-{case}.jsonl"
    srv = subprocess.Popen([str(bins / "pqs-server"), "--listen", "127.0.0.1:0", "--cert-dir", str(d), "--log", str(log),
                            "--groups", "x25519", *sub(sargs)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(600):
            if log.exists() and '"ready"' in log.read_text():
                break
            assert srv.poll() is None, srv.stderr.read()
            time.sleep(0.05)
        ready = next(json.loads(l) for l in log.read_text().splitlines() if '"ready"' in l)
        r = subprocess.run([str(bins / "pqs-timer"), "--connect", f"127.0.0.1:{ready['port']}", "--ca", ready["ca"],
                            "--groups", "x25519", "--samples", "4", "--out", str(out), *sub(targs)],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, (case, r.stderr)
    finally:
        srv.terminate(); srv.wait(10)
    lines = [json.loads(l) for l in out.read_text().splitlines() if l.strip()]
    lines += [json.loads(l) for l in log.read_text().splitlines() if l.strip()]
    return lines

ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
ap.add_argument("old", type=Path, help="the bin/ folder of the build before")
ap.add_argument("new", type=Path, help="the bin/ folder of the build after")
ap.add_argument("--cases", default=",".join(CASES), help="comma-separated subset of: " + ", ".join(CASES))
args = ap.parse_args()
OLD, NEW = args.old, args.new
chosen = [c for c in args.cases.split(",") if c]
unknown = [c for c in chosen if c not in CASES]
if unknown:
    ap.error(f"unknown case {unknown[0]!r}; cases: {', '.join(CASES)}")
diffs = structural = 0
with tempfile.TemporaryDirectory() as t:
    t = Path(t)
    for case in chosen:
        (t / "o").mkdir(exist_ok=True); (t / "n").mkdir(exist_ok=True)
        a, b = run(OLD, case, t / "o"), run(NEW, case, t / "n")
        ta, tb = [x["type"] for x in a], [x["type"] for x in b]
        if ta != tb:
            print(case, "line types differ", ta, tb); structural += 1; continue
        nmem = 0
        for x, y in zip(a, b):
            fx, fy = flat(x), flat(y)
            nmem += len(fx)
            if set(fx) != set(fy):
                print(case, x["type"], "members:", sorted(set(fx) ^ set(fy))); structural += 1
            for k in fx:
                if k in fy and not VOLATILE.match(k.split(".")[-1]) and fx[k] != fy[k]:
                    print(case, x["type"], k, repr(fx[k])[:80], "->", repr(fy[k])[:80]); diffs += 1
        print(f"{case}: {len(a)} lines, {nmem} members compared")
print(f"member differences: {structural}, value differences: {diffs}")
raise SystemExit(1 if structural else 0)
