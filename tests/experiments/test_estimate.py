"""Estimates you can plan by (issue 30): the plan's estimate prices what a run costs besides
its handshakes (per cell, per block, per link, per run; the probes a lossy or jittery link
needs), and the progress ETA follows this machine's pace once a tenth of the cells are done,
in interleaved order too. The ETA is driven here by a synthetic clock, not by a run."""

from __future__ import annotations

import io

import pytest

from pqshake.experiments import plan as P
from pqshake.experiments import progress as progress_mod
from pqshake.experiments.plan import build_plan
from pqshake.experiments.progress import Progress


def _plan(write_exp, extra: str = "", profiles: str = "[lan]"):
    return build_plan(write_exp(f"name: t\ngroups: [x25519]\nprofiles: {profiles}\n{extra}"), check_stack=False)


def test_cell_estimate_counts_each_block_timer_and_the_server(write_exp):
    """Interleaved order runs a cell as one pqs-timer per block of 20: each start costs the
    same, and the cell's server and probes come on top of its attempts."""
    one = _plan(write_exp, "samples: 100\nwarmup: 0\nrtt_probes: 0\norder: sequential\n")
    five = _plan(write_exp, "samples: 100\nwarmup: 0\nrtt_probes: 0\norder: interleaved\nblock: 20\n")
    assert one.blocks_per_cell() == 1 and five.blocks_per_cell() == 5
    c1, c5 = one.cells[0], five.cells[0]
    assert five.cell_estimate_s(c5) - one.cell_estimate_s(c1) == pytest.approx(4 * P.BLOCK_S)
    attempts = 100 * one.attempt_estimate_s(c1)
    assert one.cell_estimate_s(c1) == pytest.approx(attempts + P.CELL_SETUP_S + P.BLOCK_S)
    # measured on the demo (wake-ups held): its 8 LAN cells of 53 attempts in 4.4 s after their
    # link came up, ~0.55 s a cell, mostly not its handshakes
    demo_lan = _plan(write_exp, "samples: 50\nwarmup: 3\nrtt_probes: 50\nblock: 20\n")
    assert 0.8 * 0.55 < demo_lan.cell_estimate_s(demo_lan.cells[0]) < 1.2 * 0.55


def test_an_attempt_is_the_links_waiting_and_the_machines_work(write_exp):
    """At 40 ms an attempt waits two round trips on the link; what the machine adds (its CPU and
    a margin for scheduling, handshake_model.ATTEMPT_HOST_S) is the work part."""
    from pqshake.rows import bounds

    p = _plan(write_exp, "samples: 10\n", profiles="[rtt40]")
    one = p.attempt_estimate_s(p.cells[0])
    assert 0.080 <= one.wait_s < 0.081
    assert one - one.wait_s >= bounds.ATTEMPT_HOST_S + bounds.ATTEMPT_GAP_S
    assert float(one) == pytest.approx(bounds.expected_attempt_s(bounds.BoundCell.of("x25519", "ecdsa-p256", 0.04)))


def test_probes_on_a_jittery_lossy_link_cost_their_spacing_and_the_timeout(write_exp):
    """lte-good's jitter spaces probes 20 ms apart, and a lost probe makes pqs-probe wait out
    its timeout (about 1 s): its 50 probes took 1.05 s, or 2.1 s with a loss, in the demo."""
    from pqshake.emulation.check import probe_interval_us

    p = _plan(write_exp, "samples: 10\nrtt_probes: 50\n", profiles="[lte-good]")
    prof = p.profiles["lte-good"]
    iv = probe_interval_us(prof) / 1e6
    assert iv > 0.005
    s = P.probes_s(prof, 50)
    assert 50 * iv + 0.04 < s < 50 * iv + 1.1  # the expected timeout wait sits between
    assert P.probes_s(prof, 0) == 0.0
    lan = _plan(write_exp, "samples: 10\nrtt_probes: 50\n")
    assert P.probes_s(lan.profiles["lan"], 50) == pytest.approx(P.PROBE_START_S + 0.05 + 0.0002, abs=1e-4)


def test_estimate_is_its_cells_links_and_the_runs_fixed_costs(write_exp):
    p = _plan(write_exp, "samples: 10\n", profiles="[lan, rtt40]")
    cells = sum(p.cell_estimate_s(c) for c in p.cells)
    links = p.profile_setup_s("lan") + p.profile_setup_s("rtt40")
    assert p.estimate_s() == pytest.approx(cells + links + P.RUN_FIXED_S)
    lan = [c for c in p.cells if c.profile == "lan"]  # a part of the run: no run costs
    assert p.estimate_s(lan, keygen=False, fixed=False) == pytest.approx(sum(p.cell_estimate_s(c) for c in lan)
                                                            + p.profile_setup_s("lan"))
    assert p.profile_setup_s("rtt40") > P.PROFILE_SETUP_S + P.CHECK_PROBES * 0.001 + 0.04


def test_demo_estimate_near_its_measured_run():
    """experiments/demo.yaml ran in 122 s on the 2-vCPU VM the constants in experiments/plan.py
    were measured on (131 s and 148 s under heavier load from other work); the estimate
    before those costs were modelled said 92 s. A record of a measurement, not a timing."""
    from pathlib import Path

    import pqshake.experiments as pkg

    p = build_plan(Path(pkg.__file__).parent / "demo.yaml", check_stack=False)
    assert 0.8 * 122 <= p.estimate_s() <= 1.2 * 122


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(progress_mod.time, "monotonic", c)
    return c


def _progress(n: int, est_each: float) -> Progress:
    return Progress(n, 0, n * est_each, stream=io.StringIO(), rich=False)


def test_eta_after_a_tenth_follows_cells_twice_as_slow(clock):
    """Cells one after another, each taking twice its estimate: until a tenth are done the
    ETA is the plan's; from then on it is twice the estimate of what is left."""
    n, est = 20, 10.0
    pr = _progress(n, est)
    assert pr.eta_s() == pytest.approx(n * est)
    for i in range(2):
        pr.start_cell(f"c{i}", 10)
        clock.t += 2 * est
        pr.end_cell(f"c{i}", "complete", est)
        if i == 0:  # one of twenty: not a tenth yet, the plan's figure for what is left
            assert pr.eta_s() == pytest.approx((n - 1) * est)
    assert pr.eta_s() == pytest.approx(2 * (n - 2) * est)


def test_eta_in_interleaved_order_counts_the_open_cells(clock):
    """Interleaved order: two profiles of ten cells, each profile's link brought up, each cell
    opened (probes, server) and then run in three blocks, everything twice as slow as planned;
    the cells of a profile close one after another in the last round. At a tenth done the ETA
    is about the true time left (the first cell's opening is counted with its link), not the
    elapsed time over two cells' worth."""
    n, blocks, est_link, est_open, est_block = 20, 3, 2.0, 0.5, 3.0
    est = est_open + blocks * est_block
    pr = Progress(n, 0, n * est + 2 * est_link, stream=io.StringIO(), rich=False)
    first, done = [f"lan__g{i}__ecdsa-p256__full__r1" for i in range(10)], 0
    clock.t += 2 * est_link
    for rnd in range(blocks):
        for cid in first:
            if rnd == 0:
                clock.t += 2 * est_open  # its opening, before its first block
            pr.start_cell(cid, 20)
            clock.t += 2 * est_block
            pr.attempts(20)  # the runner's last report of a block, as its timer ends
            if rnd == blocks - 1:
                pr.end_cell(cid, "complete", est)
                done += 1
            if done == 2:
                break
    # the open cells' last blocks, the second profile's link and cells
    true_left = 8 * 2 * est_block + 2 * est_link + 10 * 2 * est
    assert pr.eta_s() == pytest.approx(true_left, rel=0.05)


def test_eta_stretches_what_the_load_stretches_not_the_links_waiting(clock):
    """A loaded machine doubles a LAN cell (program starts and CPU) but not the waiting of a
    40 ms cell: after two LAN cells at twice their estimate the ETA doubles the rest of each
    estimate, keeping the link's waiting (plan.Estimate.wait_s) as planned."""
    from pqshake.experiments.plan import Estimate, add

    lan, far = Estimate(2.0), Estimate(10.0, wait_s=8.0)
    cells = [("lan", lan)] * 10 + [("far", far)] * 10
    pr = Progress(len(cells), 0, add(*(e for _, e in cells)), stream=io.StringIO(), rich=False)
    for i, (_, est) in enumerate(cells[:2]):
        pr.start_cell(f"c{i}", 10)
        clock.t += 2 * est
        pr.end_cell(f"c{i}", "complete", est)
    true_left = 8 * 2 * lan + 10 * (far.wait_s + 2 * (far - far.wait_s))
    assert pr.eta_s() == pytest.approx(true_left)


def test_eta_with_slots_follows_the_schedule_not_one_speed_up(clock):
    """Slots: four long, mostly waiting chunks side by side, then four short CPU-leaning ones one
    at a time (as longest first schedules them), everything 10 % slower than planned. Once the
    long ones are done only the short ones are left, one at a time: the ETA is their 44 s, where
    the sequential ETA over the plan's overall speed-up said 14 s."""
    from pqshake.experiments.slots import Chunk, SlotPlan, simulate

    est = {f"long{i}": 100.0 for i in range(4)} | {f"short{i}": 10.0 for i in range(4)}
    chunks = [Chunk("far", [c], e, 0.01 if e > 50 else 0.25, False) for c, e in est.items()]
    span, schedule = simulate(chunks, 4, 0.3)
    assert span == pytest.approx(140.0)
    sp = SlotPlan(4, chunks, sum(est.values()), span, 2, "test", 0.3, schedule)
    curve = sp.finish_curve(est.__getitem__)
    assert curve[-1] == pytest.approx((140.0, 440.0)) and [c for _, c in curve] == sorted(c for _, c in curve)
    assert SlotPlan(1, chunks, 440.0, 440.0, 2, "one", 0.3).finish_curve(est.__getitem__) == []
    pr = Progress(len(est), 0, sum(est.values()), stream=io.StringIO(), rich=False, schedule=curve)
    assert pr.eta_s() == pytest.approx(140.0)  # nothing done: the schedule's span
    clock.t += 110.0
    for c in [c for c in est if c.startswith("long")]:
        pr.end_cell(c, "complete", est[c])
    assert pr.eta_s() == pytest.approx(4 * 11.0)
    for i in range(3):
        clock.t += 11.0
        pr.end_cell(f"short{i}", "complete", 10.0)
    assert pr.eta_s() == pytest.approx(11.0)


def test_quic_estimates_count_what_each_engine_adds_to_the_bound(write_exp):
    """The plan prices the engines' measured departures from the bound (docs/methodology.md,
    "What is an engine's"): after a Retry OpenSSL's client waits about a second (its first PTO)
    and three round trips more for frodo640aes's ten Initials, and one round trip for a hybrid's
    two; ngtcp2 one round trip for frodo640aes only. x25519 (one Initial) and TCP as before, and the
    bound itself unchanged. (A run of the stack bench's 240 cells took 8.1 min where the plan said
    5.4: every OpenSSL QUIC frodo640aes handshake was a second over.)"""
    from pqshake.rows import bounds

    p = build_plan(write_exp("name: q\ngroups: [x25519, X25519MLKEM768, frodo640aes]\nsigs: [ecdsa-p256]\n"
                             "profiles: [{name: r100, rtt: 100ms}]\ntransports: [tcp, quic]\n"
                             "quic_engines: [openssl, ngtcp2]\nsamples: 5\n"), check_stack=False)
    wait = {(c.transport, c.group): p.attempt_estimate_s(c).wait_s for c in p.cells}
    bound = {k: bounds.handshake_bound(bounds.BoundCell.of(k[1], "ecdsa-p256", 0.1,
                                                           transport=k[0])).total for k in wait}
    assert wait[("quic", "frodo640aes")] - wait[("quic+ngtcp2", "frodo640aes")] == pytest.approx(1.0 + 0.2, abs=0.01)
    assert wait[("quic", "X25519MLKEM768")] - wait[("quic+ngtcp2", "X25519MLKEM768")] == pytest.approx(0.1, abs=0.001)
    assert wait[("quic+ngtcp2", "frodo640aes")] - wait[("quic+ngtcp2", "x25519")] > 0.1
    assert wait[("quic", "x25519")] == pytest.approx(wait[("quic+ngtcp2", "x25519")])
    for k, b in bound.items():  # the bound knows none of it
        assert b < 0.25, (k, b)
    off = build_plan(write_exp("name: q\ngroups: [frodo640aes]\nsigs: [ecdsa-p256]\nprofiles: [{name: r100, rtt: 100ms}]\n"
                               "transports: [quic]\nquic_retry: \"off\"\nsamples: 5\n", name="off.yaml"), check_stack=False)
    c = off.cells[0]
    assert off.attempt_estimate_s(c).wait_s - bounds.handshake_bound(
        bounds.BoundCell.of("frodo640aes", "ecdsa-p256", 0.1, transport="quic", quic_retry=False)).total < 0.2
