"""Experiment files and plan expansion: cross product, exclusions, sets, reproducible shuffle,
one-line file:line errors, refusal of groups the stack does not offer."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from needs import need
from exp_helpers import one_line, refusal

from pqshake.errors import UserError
from pqshake.rows import bounds
from pqshake.rows import handshake_model as hm
from pqshake.experiments import plan as P
from pqshake.experiments.model import load_experiment
from pqshake.experiments.plan import build_plan, cell_id, offered_groups, shuffle_cells

BASE = """
name: t
groups: [x25519, X25519MLKEM768, MLKEM768]
sigs: [ecdsa-p256, ml-dsa-44]
profiles: [lan, rtt40, {name: inline20, rtt: 20ms}]
modes: [full, resume]
samples: 10
repetitions: 2
"""


def test_cross_product(write_exp):
    p = build_plan(write_exp(BASE), check_stack=False)
    assert len(p.cells) == 3 * 3 * 2 * 2 * 2
    assert len({c.cell_id for c in p.cells}) == len(p.cells)
    assert Counter(c.profile for c in p.cells) == {"lan": 24, "rtt40": 24, "inline20": 24}
    assert p.groups == ["x25519", "X25519MLKEM768", "MLKEM768"]
    assert {c.repetition for c in p.cells} == {1, 2}


def test_defaults_and_include_override(write_exp, tmp_path):
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "d.yaml").write_text("samples: 77\nwarmup: 9\nsigs: [ml-dsa-44]\norder: sequential\n")
    p = write_exp("include: shared/d.yaml\nname: t\ngroups: [x25519]\nprofiles: [lan]\nwarmup: 2\n")
    ef = load_experiment(p)
    m = ef.model
    assert (m.samples, m.warmup, m.sigs, m.order) == (77, 2, ["ml-dsa-44"], "sequential")
    assert m.concurrency == 1 and m.timeout == 10_000_000_000
    assert len(ef.files) == 2


def test_shipped_defaults_include(write_exp):
    import pqshake.experiments as pkg
    from pathlib import Path

    shipped = Path(pkg.__file__).parent / "defaults.yaml"
    p = write_exp(f"include: {shipped}\nname: t\ngroups: [x25519]\nprofiles: [lan]\nsamples: 3\n")
    m = load_experiment(p).model
    assert m.rtt_probes == 50 and m.order == "interleaved" and m.block == 20


def test_error_in_included_file_points_there(write_exp, tmp_path):
    (tmp_path / "d.yaml").write_text("samples: 10\nwarmpu: 3\n")
    p = write_exp("include: d.yaml\nname: t\ngroups: [x25519]\nprofiles: [lan]\n")
    with pytest.raises(UserError) as e:
        load_experiment(p)
    assert re.match(rf"^{re.escape(str(tmp_path / 'd.yaml'))}:2 warmpu: unknown field \(did you mean warmup\?\); allowed: .*warmup", one_line(e))


def test_circular_include(write_exp, tmp_path):
    (tmp_path / "a.yaml").write_text("include: exp.yaml\n")
    p = write_exp("include: a.yaml\nname: t\ngroups: [x25519]\nprofiles: [lan]\nsamples: 1\n")
    with pytest.raises(UserError) as e:
        load_experiment(p)
    assert "circular include" in one_line(e)


@pytest.mark.parametrize("text,expect", [
    ("name: t\ngroups: [x25519]\nprofiles: [lan]\nsamples: 10\nmodes: [full, fast]\n", r":5 modes\[1\]: .*'fast'"),
    ("name: t\ngroups: [x25519]\nprofiles: [lan]\nsamples: 0\n", r":4 samples: .*greater than or equal to 1"),
    ("name: t\ngroups: [x25519]\nprofiles: [lan]\nsamples: 10\nsampels: 3\n", r":5 sampels: unknown field"),
    ("name: t\ngroups: [x25519]\nprofiles: [lan]\nsamples: 10\ntimeout: 10\n", r":5 timeout: .*no unit"),
    ("name: t\ngroups: [x25519]\nprofiles: [lan]\n", r":1 samples: required field is missing"),
    ("name: 'a b'\ngroups: [x25519]\nprofiles: [lan]\nsamples: 1\n", r":1 name: .*letters, digits"),
    ("name: t\ngroups: [x25519]\nprofiles: [lan]\nsamples: 1\nexclude: [{}]\n", r"exclude\[0\]: an exclude rule needs"),
    ("name: t\ngroups: [x25519\n", r":\d+ YAML syntax"),
])
def test_bad_fields_one_line(write_exp, text, expect):
    refusal(load_experiment, write_exp(text), expect)


def test_unknown_group_and_sig_suggest(write_exp):
    p = write_exp("name: t\ngroups: [x25519, X25519MLKEM786]\nprofiles: [lan]\nsamples: 1\n")
    with pytest.raises(UserError) as e:
        build_plan(p, check_stack=False)
    msg = one_line(e)
    assert f"{p}:2 groups" in msg and "X25519MLKEM786" in msg and "X25519MLKEM768" in msg
    p = write_exp("name: t\ngroups: [x25519]\nsigs: [mldsa44]\nprofiles: [lan]\nsamples: 1\n")
    with pytest.raises(UserError) as e:
        build_plan(p, check_stack=False)
    assert "signature algorithm 'mldsa44'" in one_line(e) and "ml-dsa-44" in str(e.value)


def test_unknown_profile_suggests(write_exp):
    p = write_exp("name: t\ngroups: [x25519]\nprofiles: [lan, lte-godo]\nsamples: 1\n")
    with pytest.raises(UserError) as e:
        build_plan(p, check_stack=False)
    msg = one_line(e)
    assert msg.startswith(f"{p}:3 profiles[1]") and "lte-good" in msg


def test_bad_inline_profile_points_at_line(write_exp):
    p = write_exp("name: t\ngroups: [x25519]\nprofiles:\n  - lan\n  - {name: x, rtt: 20}\nsamples: 1\n")
    with pytest.raises(UserError) as e:
        build_plan(p, check_stack=False)
    msg = one_line(e)
    assert msg.startswith(f"{p}:5") and "rtt" in msg, msg


def test_profile_file_with_errors(write_exp, tmp_path):
    (tmp_path / "bad.yaml").write_text("name: bad\ndescription: x\nrtt: 20ms\nloss: 50\n")
    p = write_exp("name: t\ngroups: [x25519]\nprofiles: [bad.yaml]\nsamples: 1\n")
    with pytest.raises(UserError) as e:
        build_plan(p, check_stack=False)
    msg = one_line(e)
    assert "bad.yaml:4" in msg and "loss" in msg, msg


def test_profile_glob(write_exp):
    p = write_exp("name: t\ngroups: [x25519]\nprofiles: ['paquin-rtt5.6-*']\nsamples: 1\n")
    plan = build_plan(p, check_stack=False)
    names = list(plan.profiles)
    assert len(names) == 10 and names[0] == "paquin-rtt5.6-loss0" and names[-1] == "paquin-rtt5.6-loss20"


def test_sets_expand(write_exp):
    from pqshake.registry import load_registry

    p = write_exp("name: t\ngroups: ['@mlkem', x25519]\nsigs: ['@classical']\nprofiles: [lan]\nsamples: 1\n"
                  "exclude: [{group: '@hybrids'}]\n")
    plan = build_plan(p, check_stack=False)
    reg = load_registry()
    assert plan.groups == reg.sets("group")["mlkem"] + ["x25519"]
    assert plan.sigs == reg.sets("sig")["classical"]
    hybrids = set(reg.sets("group")["hybrids"])
    assert hybrids and not any(c.group in hybrids for c in plan.cells)
    assert {c.group for c in plan.cells} == set(plan.groups) - hybrids


def test_exclusions(write_exp):
    p = write_exp(BASE + "exclude:\n  - {group: '@pqc', sig: ml-dsa-44}\n  - {profile: lan, mode: resume}\n")
    plan = build_plan(p, check_stack=False)
    assert not any(c.group != "x25519" and c.sig == "ml-dsa-44" for c in plan.cells)
    assert not any(c.profile == "lan" and c.mode == "resume" for c in plan.cells)
    # 72 cells - (2 groups x 1 sig x 3 profiles x 2 modes x 2 reps = 24) - (lan,resume: 3x2x2 = 12, of which
    # 4 already gone) = 72 - 24 - 8
    assert len(plan.cells) == 40
    assert plan.excluded == 32


def test_exclude_unknown_profile(write_exp):
    p = write_exp(BASE + "exclude:\n  - {profile: lna}\n")
    with pytest.raises(UserError) as e:
        build_plan(p, check_stack=False)
    assert "exclude[0].profile" in one_line(e) and "lan" in str(e.value)


def test_exclude_everything(write_exp):
    p = write_exp(BASE + "exclude:\n  - {mode: [full, resume]}\n")
    with pytest.raises(UserError) as e:
        build_plan(p, check_stack=False)
    assert "remove every cell" in one_line(e)


def test_shuffle_reproducible_and_profiles_contiguous(write_exp):
    p = write_exp(BASE + "seed: 42\n")
    a = build_plan(p, check_stack=False)
    b = build_plan(p, check_stack=False)
    c = build_plan(p, seed=43, check_stack=False)
    assert [x.cell_id for x in a.cells] == [x.cell_id for x in b.cells]
    assert [x.cell_id for x in a.cells] != [x.cell_id for x in c.cells]
    assert sorted(x.cell_id for x in a.cells) == sorted(x.cell_id for x in c.cells)
    for plan in (a, c):
        blocks = plan.profile_blocks()
        assert len(blocks) == 3  # one topology per profile
    # shuffled within a profile, not the cross-product order
    seq = build_plan(write_exp(BASE + "order: sequential\n"), check_stack=False)
    assert [x.cell_id for x in a.cells] != [x.cell_id for x in seq.cells]
    assert [x.cell_id for x in seq.cells][:2] == [cell_id("lan", "x25519", "ecdsa-p256", "full", 1),
                                                  cell_id("lan", "x25519", "ecdsa-p256", "full", 2)]


def test_shuffle_between_profiles_varies():
    from pqshake.experiments.plan import Cell

    cells = [Cell(f"{p}-{i}", p, "g", "s", "full", i) for p in "abcdef" for i in range(3)]
    orders = {tuple(dict.fromkeys(c.profile for c in shuffle_cells(cells, s))) for s in range(20)}
    assert len(orders) > 5


def test_seed_recorded_when_absent(write_exp):
    p = write_exp(BASE)
    a = build_plan(p, check_stack=False)
    assert isinstance(a.seed, int)
    b = build_plan(p, seed=a.seed, check_stack=False)
    assert [x.cell_id for x in a.cells] == [x.cell_id for x in b.cells]


needs_stack = pytest.mark.usefixtures("_stack_built")


@pytest.fixture
def _stack_built():
    need(bool(offered_groups()[0]), "crypto stack not built (make build)")


def test_group_not_offered_message(write_exp, monkeypatch):
    import pqshake.experiments.plan as plan_mod

    monkeypatch.setattr(plan_mod, "offered_groups", lambda: (frozenset({"x25519", "MLKEM768", "MLKEM1024"}), "test"))
    p = write_exp("name: t\ngroups: [x25519, MLKEM512]\nprofiles: [lan]\nsamples: 1\n")
    msg = refusal(build_plan, p)
    assert msg.startswith(f"{p}:2 groups") and "'MLKEM512' is not offered by the built stack" in msg
    assert "closest offered: MLKEM1024, MLKEM768" in msg
    # excluded cells do not need the group
    p = write_exp("name: t\ngroups: [x25519, MLKEM512]\nprofiles: [lan]\nsamples: 1\nexclude: [{group: MLKEM512}]\n")
    assert {c.group for c in build_plan(p).cells} == {"x25519"}


@pytest.fixture
def stack_without_oqs(monkeypatch):
    """The built stack with the liboqs provider switched off, for one test (the answer of
    offered_groups() is cached: cleared before and after)."""
    monkeypatch.setenv("PQS_PROVIDER", "none")
    offered_groups.cache_clear()
    yield
    monkeypatch.undo()
    offered_groups.cache_clear()


@needs_stack
def test_group_not_offered_by_stack(write_exp, stack_without_oqs):
    """A stack without the liboqs provider (PQS_PROVIDER=none: the timer loads OpenSSL's groups
    only) does not offer frodo640aes: refused before any network, with the closest names."""
    offered, source = offered_groups()
    assert "X25519MLKEM768" in offered and "frodo640aes" not in offered, source
    p = write_exp("name: t\ngroups: [x25519, frodo640aes]\nprofiles: [lan]\nsamples: 1\n")
    msg = refusal(build_plan, p)
    assert msg.startswith(f"{p}:2 groups") and "'frodo640aes' is not offered by the built stack" in msg
    assert "closest offered" in msg


def test_estimate_uses_model(write_exp):
    p = write_exp("name: t\ngroups: [x25519]\nprofiles: [rtt100]\nsamples: 100\nwarmup: 0\nrtt_probes: 0\n")
    plan = build_plan(p, check_stack=False)
    c = plan.cells[0]
    per_cell = plan.cell_estimate_s(c)
    assert 100 * 0.2 <= per_cell  # 2 RTT per handshake at least
    # the model's attempts plus the cell's fixed costs: its server, one timer per block
    assert per_cell == pytest.approx(100 * plan.attempt_estimate_s(c) + P.CELL_SETUP_S + plan.blocks_per_cell() * P.BLOCK_S)


def test_days_long_plan_is_flagged(write_exp):
    from pqshake.experiments.runner import LONG_RUN_S, confirm_long

    p = write_exp("name: t\ngroups: ['@mlkem']\nsigs: ['@all']\nprofiles: ['paquin-*']\nsamples: 20000\n")
    plan = build_plan(p, check_stack=False)
    assert plan.estimate_s() > 3 * LONG_RUN_S
    with pytest.raises(UserError) as e:  # stdin is not a terminal under pytest
        confirm_long(plan, yes=False)
    assert "--yes" in one_line(e)
    confirm_long(plan, yes=True)


@pytest.mark.parametrize("n,x", [(1, 0), (10, 0), (11, 1), (30, 1), (31, 2), (70, 2), (71, 3), (150, 3)])
def test_model_extra_rounds(n, x):
    assert hm.extra_rounds(n) == x


def test_model_cross_check():
    rtt = 0.05
    small = bounds.handshake_bound(bounds.BoundCell.of("x25519", "ecdsa-p256", rtt, cpu_s=0))
    assert small.rtts == 2 and small.total == pytest.approx(2 * rtt)
    assert hm.mss(1500) == 1448 and hm.mss(1280) == 1228
    big = bounds.handshake_bound(bounds.BoundCell.of("x25519", "slh-dsa-sha2-128f", rtt, cpu_s=0))
    assert big.x_s >= 1 and big.rtts >= 3
    assert bounds.handshake_bound(bounds.BoundCell.of("x25519", "ecdsa-p256", rtt, mode="hrr")).rtts == 3
    slow = bounds.handshake_bound(bounds.BoundCell.of("MLKEM768", "ml-dsa-44", rtt, rate_bps=1e6))
    assert slow.t_ser > 0.05  # ~7 KB server flight at 1 Mbit/s
    assert hm.loss_penalty_s(rtt, 0.0, 10) == 0.0 and hm.loss_penalty_s(rtt, 0.1, 10) > 0.2


def test_loss_penalty_counts_backoff():
    # each retry fails with q; waits 1, 2, 4 s (8 more would pass the 10 s timeout)
    assert hm._backoff_s(0.5, 1.0) == pytest.approx(0.5 + 0.5 + 0.5)
    assert hm._backoff_s(0.1, 1.0) == pytest.approx(0.1 + 0.02 + 0.004, rel=1e-3)
    # at 20 % loss a SYN exchange fails 36 % of the time: the first-order 0.36 s is a third of it
    first_order = 0.36 * 1.0 + (1 - 0.8 ** 6) * 0.2
    assert hm.loss_penalty_s(0.0787, 0.2, 6) > 2 * first_order
    pens = [hm.loss_penalty_s(0.03, p, 6) for p in (0.001, 0.01, 0.05, 0.1, 0.2, 0.4)]
    assert pens == sorted(pens) and pens[-1] < 30  # grows with loss, bounded by the timeouts


def test_model_windows_per_end_and_the_client_second_flight():
    rtt = 0.05
    # A server flight of ~14 segments (ML-DSA-65, depth 2): one round more at IW 10, none at 24.
    b = bounds.handshake_bound(bounds.BoundCell.of("x25519", "ml-dsa-65", rtt, chain_depth=2, cpu_s=0))
    assert b.x_s == 1 and b.x_c == 0
    assert bounds.handshake_bound(bounds.BoundCell.of("x25519", "ml-dsa-65", rtt, chain_depth=2, cpu_s=0,
                                                      iw_s=24)).x_s == 0
    assert bounds.handshake_bound(bounds.BoundCell.of("x25519", "ml-dsa-65", rtt, chain_depth=2, cpu_s=0,
                                                      iw_c=24)).x_s == 1
    # Without mutual TLS the client's second flight is Finished + request: no extra round.
    plain = bounds.handshake_bound(bounds.BoundCell.of("x25519", "ecdsa-p256", rtt, cpu_s=0))
    assert plain.x_cc == 0 and plain.ttfb == pytest.approx(3 * rtt)
    # Linux grows the client's window only if the ClientHello used more than half of it.
    assert hm.cwnd_after(1, 10) == 10 and hm.cwnd_after(6, 10) == 16
    # The client's signature delays the client's handshake end; verification on the server
    # delays the first response byte, not the client's handshake.
    cpu = hm.Cpu(client_sign=0.004, server_chain=0.003, server_cv=0.001)
    m = bounds.handshake_bound(bounds.BoundCell.of("x25519", "ecdsa-p256", rtt, client_auth="ml-dsa-44", cpu=cpu))
    assert m.total == pytest.approx(2 * rtt + 0.004) and m.ttfb == pytest.approx(3 * rtt + 0.008)


def test_model_refuses_an_algorithm_without_checked_sizes():
    with pytest.raises(ValueError, match="group 'nosuchkem' has no checked sizes"):
        bounds.handshake_bound(bounds.BoundCell.of("nosuchkem", "ecdsa-p256", 0.01))
    with pytest.raises(ValueError, match="signature 'nosuchsig' has no checked sizes"):
        bounds.handshake_bound(bounds.BoundCell.of("x25519", "nosuchsig", 0.01))
    with pytest.raises(ValueError, match="signature 'nosuchsig'"):
        bounds.handshake_bound(bounds.BoundCell.of("x25519", "ecdsa-p256", 0.01, client_auth="nosuchsig"))


def test_shipped_experiments_plan():
    from pathlib import Path

    import pqshake.experiments as pkg

    d = Path(pkg.__file__).parent
    est = {}
    for name in ("demo", "paquin2020", "thesis", "modes"):
        plan = build_plan(d / f"{name}.yaml", check_stack=bool(offered_groups()[0]))
        est[name] = plan.estimate_s()
        assert plan.cells
    demo = build_plan(d / "demo.yaml", check_stack=False)
    assert len(demo.groups) >= 3 and len(demo.sigs) == 2 and len(demo.profiles) == 3
    assert est["demo"] < 240
    paquin = build_plan(d / "paquin2020.yaml", check_stack=False)
    assert len(paquin.profiles) == 40
    modes = build_plan(d / "modes.yaml", check_stack=False)
    assert set(modes.model.modes) == {"full", "resume", "0rtt", "hrr", "tls12"}
