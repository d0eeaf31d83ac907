"""Authentication bytes as the variable (issue 32), end to end over the emulated link: a chain
padded past the initial window pays another round trip where the model puts the step, a
suppressed intermediate takes it back, compression is on the wire, and figure auth_size draws
it. Needs root (namespaces)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from exp_file import experiment_yaml

pytestmark = pytest.mark.netns  # skipped when not root, except in CI (tests/conftest.py)

RTT_MS = 20
# ML-DSA-44 with an X25519MLKEM768 ServerHello: 5 kB of padding at chain depth 2 takes the
# server's flight past the kernel's initial window (10 x 1448 bytes), the leaf alone does not
# (model: 16.8 and 12.8 kB of server flight)
EXP = experiment_yaml("auth", groups=["X25519MLKEM768"], sigs=["ml-dsa-44"],
                      profiles=[dict(name="auth-r20", rtt=f"{RTT_MS}ms")], chain_depth=2,
                      cert_pad_bytes=[0, 5000], suppress_intermediates=[False, True], cert_compression=["off", "brotli"],
                      exclude=[{"cert_pad_bytes": 5000, "cert_compression": "brotli"}],
                      samples=8, warmup=2, rtt_probes=5, seed=3)


def run_and_analyze(pqs, write_exp, tmp_path, text: str) -> Path:
    """The run's directory, run and analysed."""
    out = tmp_path / "results"
    cp = pqs("run", str(write_exp(text)), "--out", str(out))
    assert cp.returncode == 0, cp.stderr
    [path] = sorted(p.parent for p in out.glob("*/*/meta.json"))
    a = pqs("analyze", str(path))
    assert a.returncode == 0, a.stderr
    return path


SHOW = ["axis_cert_pad_bytes", "axis_suppress_intermediates", "axis_cert_compression", "p50_ms", "bound_ms",
        "bound_rtts", "retrans_share", "rtt_achieved_ms", "verdict", "suspect"]


def test_auth_bytes_step_where_the_model_puts_it(pqs, write_exp, tmp_path):
    """Each cell's median within half an RTT of the model's bound at its own settings. A fresh
    clone's CI once had one loss-free cell at 310 ms against 60 (retransmissions: the analysis'
    bound counted their bytes, 3 round trips where the model puts 2). A cell off its bound must
    be one the run itself marked suspect (its validity verdict: frames the emulator dropped or
    delayed, CPU the host took); then the run is taken again, up to three times. An off cell
    the run calls ok fails at once: that is a wrong number reported as right."""
    runs = []
    for k in range(3):
        path = run_and_analyze(pqs, write_exp, tmp_path / f"try{k}", EXP)
        t = pd.read_csv(path / "analysis" / "summary.csv")
        assert len(t) == 6 and (t["n_ok"] == 8).all(), t[SHOW].to_string()
        off = (t["p50_ms"] - t["bound_ms"]).abs() > RTT_MS / 2
        unflagged = off & (t["verdict"].astype(str) == "ok")
        assert not unflagged.any(), f"off the bound, yet verdict ok:\n{t.loc[unflagged, SHOW].to_string()}"
        if not off.any():
            break
        runs.append(t.loc[off, SHOW].to_string())
    else:
        raise AssertionError("every run had a cell off its bound (each marked suspect by the run: a disturbed "
                             "machine; rerun when it is quieter):\n" + "\n".join(runs))
    pad = t["axis_cert_pad_bytes"].astype(int)
    sup = t["axis_suppress_intermediates"].astype(str)
    # the padded chain pays a third round trip; without its intermediate it does not
    assert (t.loc[(pad == 5000) & (sup == "off"), "bound_rtts"] == 3).all()
    assert (t.loc[(pad == 5000) & (sup == "on"), "bound_rtts"] == 2).all()
    assert (t.loc[pad == 0, "bound_rtts"] == 2).all()
    # compression crossed the wire: a CompressedCertificate smaller than the Certificate it carries
    s = pd.read_parquet(path / "samples.parquet")
    comp = s[s["axis_cert_compression"].astype(str) == "brotli"]
    assert len(comp) and (comp["msgs_compressed_certificate"] < comp["msgs_certificate"]).all()
    f = pqs("figures", str(path), "--only", "auth_size")
    assert f.returncode == 0, f.stderr
    assert (path / "analysis" / "figures" / "auth_size.pdf").stat().st_size > 1000
    assert "6 of 6 cells within half an RTT" in Path(path / "analysis" / "report.md").read_text()


# Mutual TLS with ML-DSA-65 chains of 3 both ways on a 1 Mbit/s link: the client's last flight is
# about 20 kB, 160 ms of serialization after the client's clock has stopped.
MTLS = experiment_yaml("mtls-slow", groups=["X25519MLKEM768"], sigs=["ml-dsa-65"],
                       profiles=[dict(name="mtls-1mbit", rtt="37ms", rate="1Mbit")], chain_depth=3,
                       client_auth="ml-dsa-65", client_chain_depth=3, samples=5, warmup=1, rtt_probes=3, seed=3)


def test_an_attempt_does_not_queue_behind_the_previous_ones_last_flight(pqs, write_exp, tmp_path):
    """Back to back, each attempt's ClientHello used to wait behind the previous attempt's client
    chain still on the uplink: 405 ms per handshake where the bound is 265 ms. pqs-timer now lets
    that flight drain before the clock starts: within half an RTT of the bound, and the server
    reads each Finished after the client flight's serialization, not before."""
    path = run_and_analyze(pqs, write_exp, tmp_path, MTLS)
    [r] = pd.read_csv(path / "analysis" / "summary.csv").to_dict("records")
    assert r["bound_ms"] <= r["p50_ms"] <= r["bound_ms"] + 37 / 2, r
    # the server read the client's Finished after its ~20 kB flight crossed the 1 Mbit/s link
    assert r["server_fin_p50_ms"] >= r["p50_ms"] + 150, r
