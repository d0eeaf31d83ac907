"""fs0rtt in experiment files (issue 22): bfe_n / bfe_p bounds with one-line errors naming the field,
the transports that carry no early data refusing the mode, the plan counting key generation only
when the key is not in the cache, and a loopback run that makes the key once and keeps it."""

from __future__ import annotations

import os

import pytest
from needs import need

from pqshake.errors import UserError
from pqshake.experiments.plan import build_plan
from pqshake.experiments import runner as runner_mod
from pqshake.rows.modes import fs0rtt as FS

EXP = """
name: fs
groups: [x25519]
profiles: [lan]
modes: [full, fs0rtt]
samples: 4
warmup: 1
rtt_probes: 0
seed: 1
{extra}
"""


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PQS_CACHE", str(tmp_path / "cache"))


def _error(write_exp, extra: str) -> str:
    with pytest.raises(UserError) as e:
        build_plan(write_exp(EXP.format(extra=extra)))
    msg = str(e.value)
    assert "\n" not in msg and "Traceback" not in msg
    return msg


@pytest.mark.parametrize("extra,words", [
    ("bfe_n: 0", ["exp.yaml:9", "bfe_n", "greater than or equal to 1"]),
    ("bfe_n: 2000000", ["bfe_n", "less than or equal to 1048576"]),
    ("bfe_n: 3", ["exp.yaml:9", "bfe_n", "up to 5", "raise bfe_n to at least 5"]),
    ("bfe_p: 0.9", ["exp.yaml:9", "bfe_p", "0.9", "out of range"]),
    ("bfe_p: 0", ["bfe_p", "out of range"]),
    ('bfe_p: "2^-x"', ["bfe_p", "not a probability", "'2^-10'"]),
    # below 2^-15 the key would need more than bfe-bf's 16 hash functions (it failed at keygen)
    ('bfe_p: "2^-16"', ["exp.yaml:9", "bfe_p", "out of range", "2^-15", "16 hash functions"]),
    ("bfe_p: 0.000001", ["bfe_p", "out of range", "2^-15"]),
])
def test_bfe_bounds_are_one_line_errors_naming_the_field(write_exp, extra, words):
    msg = _error(write_exp, extra)
    assert all(w in msg for w in words), msg


def test_bfe_p_takes_powers_of_two(write_exp):
    p = build_plan(write_exp(EXP.format(extra='bfe_n: 64\nbfe_p: "2^-12"')))
    assert p.model.bfe_p == 2.0 ** -12 and p.model.bfe_n == 64


@pytest.mark.parametrize("transport", ["quic", "turbotls"])
def test_transports_without_early_data_refuse_fs0rtt(write_exp, transport):
    msg = _error(write_exp, f"transports: [tcp, {transport}]")
    assert f"mode fs0rtt cannot run over {transport}" in msg and "0-RTT" in msg
    assert f"{{transport: {transport}, mode: fs0rtt}}" in msg


def test_the_plan_counts_key_generation_until_the_key_is_cached(write_exp, tmp_path):
    exp = write_exp(EXP.format(extra="bfe_n: 4096"))
    p = build_plan(exp)
    key = p.summary()["bfe_key"]
    assert key["n"] == 4096 and key["slots"] == FS.slots(4096, 2.0 ** -10) == 59_093  # as bfe-bf makes it (docs/methodology.md)
    assert not key["cached"] and 15 < key["keygen_estimate_s"] < 40  # about 24 s measured
    assert p.estimate_s() - p.estimate_s(keygen=False) == pytest.approx(key["keygen_estimate_s"])
    # without fs0rtt cells: no key, nothing counted
    p2 = build_plan(write_exp(EXP.format(extra="").replace("modes: [full, fs0rtt]", "modes: [full]"), "b.yaml"))
    assert p2.summary()["bfe_key"] is None
    # a key in the cache: nothing to generate
    from pqshake.paths import binary, build_dir

    need(os.access(build_dir() / "bin" / "pqs-bfe-keygen", os.X_OK), "pqs-bfe-keygen not built (make build)")
    small = build_plan(write_exp(EXP.format(extra="bfe_n: 8"), "c.yaml"))
    assert not small.summary()["bfe_key"]["cached"]
    first = FS.ensure_key(8, 2.0 ** -10, build_dir(), binary("pqs-bfe-keygen"))
    again = FS.ensure_key(8, 2.0 ** -10, build_dir(), binary("pqs-bfe-keygen"))
    assert not first["cached"] and again["cached"] and first["dir"] == again["dir"]
    assert str(tmp_path / "cache" / "bfe-keys") in first["dir"] and "relic0.6.0" in first["dir"]
    assert small.summary()["bfe_key"]["cached"] and small.summary()["bfe_key"]["keygen_estimate_s"] == 0


def test_a_loopback_run_makes_the_key_once_and_records_it(write_exp, tmp_path, loopback):
    from pqshake.paths import build_dir

    need(all(os.access(build_dir() / "bin" / n, os.X_OK) for n in ("pqs-server", "pqs-timer", "pqs-bfe-keygen")),
         "programs not built (make build)")
    exp = write_exp(EXP.format(extra="bfe_n: 16\nbfe_p: 0.03125\nrepetitions: 2\nresponse_bytes: 200")
                    .replace("modes: [full, fs0rtt]", "modes: [full, 0rtt, fs0rtt]"))
    path = runner_mod.start_run(exp, out=tmp_path / "results", quiet=True, topology_factory=loopback)
    from pqshake.experiments import load
    s = load(path)
    fs = s[(s["mode"] == "fs0rtt") & ~s["warmup"]]
    assert len(fs) == 8 and fs["ok"].all() and (fs["early_data"] == "accepted").all()
    assert (fs["fs0rtt_ct_bytes"] == FS.ct_bytes(16, 0.03125)).all() and (fs["fs0rtt_encaps_cpu_ns"] > 0).all()
    srv = load(path, "server")
    assert set(srv.loc[srv["mode"] == "fs0rtt", "fs0rtt_outcome"]) == {"accepted"}
    cells = load(path, "cells")
    fc = cells[cells["mode"] == "fs0rtt"]
    # the first fs0rtt cell generated the key, the second found it (each server starts from it)
    assert sorted(fc["bfe_key_cached"]) == [False, True] and fc["bfe_key_dir"].nunique() == 1
    assert (fc["bfe_key_n"] == 16).all() and (fc["bfe_key_slots"] == FS.slots(16, 0.03125)).all()
    # each server's key after its cell: 5 punctures (4 samples + 1 warm-up), fewer bytes
    assert (fc["bfe_server_punctures"] == 5).all() and (fc["bfe_server_accepted"] == 5).all()
    assert (fc["bfe_server_secret_bytes_end"] < fc["bfe_key_secret_bytes"]).all()
    assert cells.loc[cells["mode"] != "fs0rtt", "bfe_key_n"].isna().all()
    # the figure: server CPU per connection (fs0rtt's decapsulation is milliseconds, 0-RTT's
    # whole connection well under that), key memory, time to first byte
    srv_ok = srv[srv["ok"].astype(bool)]
    cpu = srv_ok.groupby("mode")["cpu_ns"].median()
    assert cpu["fs0rtt"] > 2 * cpu["0rtt"] > 0, cpu
    from pqshake.cli import main

    assert main(["figures", str(path), "--only", "fs0rtt", "--speed", "none"]) == 0
    fig = path / "analysis" / "figures"
    assert (fig / "fs0rtt.pdf").stat().st_size > 5000 and (fig / "fs0rtt.png").stat().st_size > 20000
    rep = (path / "analysis" / "report.md").read_text()
    assert "Forward-secure 0-RTT (BFE) vs 0-RTT" in rep and "n = " in rep and "paper reports about 8x" in rep
