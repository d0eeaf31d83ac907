"""LinkCounters (emulation/link.py): the one record of a link's counters that each backend fills
from its own names, and `net check` (emulation/check.run_check) reading it instead of them."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from pqshake.emulation import backend_netem, check
from pqshake.emulation.link import DirectionCounters, LinkCounters, LinkDefaults
from pqshake.emulation.profiles import Profile

# What Topology.counters() gave for pqs-linkemu in a real run (its stats file, emulator
# figures under `emulator`); the shape linkemu.c's write_stats / write_dir_json print.
RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "run" / "net" / "r10-l5" / "a227c3"


def recorded(which: str) -> dict:
    return json.loads((RECORDED / f"counters-{which}.json").read_text())


TC_JSON = json.dumps([{"kind": "netem", "handle": "1:", "bytes": 123456, "packets": 980, "drops": 20,
                       "overlimits": 3, "requeues": 0, "backlog": 0, "qlen": 0},
                      {"kind": "fq_codel", "packets": 5, "drops": 99}])


# ------------------------------------------------------------ the record --


def test_from_userspace_reads_the_emulators_stats():
    raw = recorded("after")
    c = LinkCounters.of("userspace", raw)
    assert c == LinkCounters.from_userspace(raw) and c.queue_apart and c.rt_active is True
    for way in ("up", "down"):
        d, r = c.way(way), raw[way]
        assert (d.forwarded, d.bytes, d.lost, d.queue_dropped, d.late, d.rx_frames) == \
               (r["forwarded"], r["bytes"], r["lost"], r["queue_dropped"], r["late"], r["rx_frames"])
        assert d.lateness_p99_ns == r["lateness_ns"]["p99"] and d.overlimits is None
    assert c.up.rx_frames == 980 and c.up.lateness_p99_ns == 14079 and c.down.late == 1


def test_from_userspace_leaves_none_where_a_figure_is_missing():
    empty = LinkCounters.from_userspace({})
    assert empty == LinkCounters(DirectionCounters(), DirectionCounters(), queue_apart=True, rt_active=None)

    raw = recorded("after")
    del raw["up"]["rx_frames"], raw["up"]["late"], raw["down"]["lateness_ns"], raw["emulator"]["rt_active"]
    c = LinkCounters.from_userspace(raw)
    assert c.up.rx_frames is None and c.up.late is None and c.up.lateness_p99_ns == 14079
    assert c.down.rx_frames == 716 and c.down.lateness_p99_ns is None and c.rt_active is None
    assert c.up.forwarded == 918  # the rest still read

    odd = LinkCounters.from_userspace({"up": None, "down": "?", "emulator": None})
    assert odd.up == odd.down == DirectionCounters() and odd.rt_active is None
    odd = LinkCounters.from_userspace({"up": {"lost": True, "rx_frames": "7", "lateness_ns": 5},
                                       "emulator": {"rt_active": "yes"}})
    assert odd.up == DirectionCounters() and odd.rt_active is None  # no bool as a count, no string as a flag


def test_from_netem_has_no_userspace_figures():
    one = backend_netem.parse_counters(TC_JSON)
    c = LinkCounters.of("netem", {"up": one, "down": backend_netem.parse_counters("")})
    assert c == LinkCounters.from_netem({"up": one, "down": backend_netem.parse_counters("")})
    assert not c.queue_apart and c.rt_active is None
    assert (c.up.forwarded, c.up.bytes, c.up.lost, c.up.overlimits) == (980, 123456, 20, 3)
    assert (c.down.forwarded, c.down.lost) == (0, 0)  # no netem qdisc: tc's zeros
    for d in (c.up, c.down):
        assert d.rx_frames is None and d.late is None and d.lateness_p99_ns is None and d.queue_dropped is None
    assert LinkCounters.from_netem({}) == LinkCounters(queue_apart=False)
    # Mininet's netem counters carry only forwarded, bytes and dropped
    m = LinkCounters.of("netem", {"up": {"forwarded": 5, "bytes": 500, "dropped": 1}})
    assert m.up.lost == 1 and m.up.overlimits is None and m.down == DirectionCounters()


# ------------------------------------------------------- net check reads it --


class FakeLink(LinkDefaults):
    """A link whose counters come from a list (before the loss probes, after them, at the end)."""

    def __init__(self, backend: str, seq: list, profile: Profile):
        self.backend, self.profile, self.seq = backend, profile, list(seq)

    def counters(self) -> dict:
        return copy.deepcopy(self.seq.pop(0)) if self.seq else {}

    def link_counters(self) -> LinkCounters:
        c = self.counters()
        return c if isinstance(c, LinkCounters) else LinkCounters.of(self.backend, c)


@pytest.fixture
def measured(monkeypatch):
    """run_check with its measurements stubbed: only its reading of the counters is real."""
    monkeypatch.setattr(check, "measure_rtt", lambda topo, count: {"received": count, "interval_us": 1000,
                                                                   "p50_ns": 10e6, "p99_ns": 12e6})
    monkeypatch.setattr(check, "measure_loss", lambda topo: {"count": 1000, "lost": 90, "ratio": .09, "expected": .0975,
                                                             "interval_999": [60, 130], "ok": True})
    monkeypatch.setattr(check, "measure_mtu", lambda topo: {"mtu": 1500, "fits_received": True,
                                                            "over_received": False, "ok": True})

    def run(topo):
        logs: list[str] = []
        ok, rows = check.run_check(topo, throughput=False, rtt_count=100, log=logs.append)
        return ok, {(r["what"], r["dir"]): r for r in rows}, logs
    return run


L5 = Profile.from_mapping({"name": "l5", "rtt": "10ms", "loss": "5%"})


def test_check_rows_from_the_userspace_counters(measured):
    b, a = recorded("before"), recorded("after")
    ok, rows, logs = measured(FakeLink("userspace", [b, a, a], L5))
    assert list(rows) == [("RTT p50", "both"), ("RTT p99", "both"), ("loss", "round trip"), ("loss", "up"),
                          ("loss", "down"), ("path MTU", "both"), ("emulator timing", "both")]
    for d in ("up", "down"):
        lost, seen = a[d]["lost"] - b[d]["lost"], a[d]["rx_frames"] - b[d]["rx_frames"]
        lo, hi = check.binom_interval(seen, 0.05)
        assert rows[("loss", d)]["achieved"].endswith(f"({lost}/{seen} frames)")
        assert rows[("loss", d)]["tolerance"] == f"{lo}..{hi} (99.9 %)" and rows[("loss", d)]["ok"] == (lo <= lost <= hi)
    t = rows[("emulator timing", "both")]
    fw, late = a["up"]["forwarded"] + a["down"]["forwarded"], a["up"]["late"] + a["down"]["late"]
    p99 = max(a["up"]["lateness_ns"]["p99"], a["down"]["lateness_ns"]["p99"])
    assert t["achieved"] == f"{late / fw * 100:.2f} % late, p99 {p99 / 1e3:.0f}us" and t["ok"] is None
    assert t["tolerance"].endswith(", rt True)")
    assert ok and not any("note" in m for m in logs)


def test_check_rows_from_netem_counters(measured):
    c0 = {w: backend_netem.parse_counters("") for w in ("up", "down")}
    c1 = {w: backend_netem.parse_counters(TC_JSON) for w in ("up", "down")}
    ok, rows, _ = measured(FakeLink("netem", [c0, c1, c1], L5))
    assert list(rows) == [("RTT p50", "both"), ("RTT p99", "both"), ("loss", "round trip"), ("path MTU", "both")]


def test_check_decides_by_what_is_counted_not_by_the_backends_name(measured):
    a = LinkCounters.from_userspace(recorded("after"))
    b = LinkCounters.from_userspace(recorded("before"))
    # a backend of another name whose record has the figures: judged like pqs-linkemu
    _, rows, _ = measured(FakeLink("loopback", [b, a, a], L5))
    assert ("loss", "up") in rows and ("emulator timing", "both") in rows
    # no frames-seen figure: no per-direction loss; no timing apart from loss: no timing row
    nothing = LinkCounters(queue_apart=False)
    _, rows, _ = measured(FakeLink("userspace", [nothing, nothing, nothing], L5))
    assert ("loss", "up") not in rows and ("emulator timing", "both") not in rows
    # an emulator that has not written its stats yet: no loss per direction, timing shown as zeros
    _, rows, _ = measured(FakeLink("userspace", [{}, {}, {}], L5))
    assert ("loss", "up") not in rows
    assert rows[("emulator timing", "both")]["achieved"] == "0.00 % late, p99 0us"
    assert rows[("emulator timing", "both")]["tolerance"].endswith(", rt None)")


def test_check_notes_a_busy_emulator_when_something_failed(measured):
    b, a = recorded("before"), recorded("after")
    a["up"]["lost"] += 500  # far outside the loss bound: a failing row
    a["up"]["late"] = a["up"]["forwarded"]
    ok, rows, logs = measured(FakeLink("userspace", [b, a, a], L5))
    assert not ok and rows[("loss", "up")]["ok"] is False
    assert any("frames late - the machine is busy" in m for m in logs)


# --------------------------------------------------- a real userspace link --


@pytest.mark.netns
def test_check_on_a_real_userspace_link_reads_the_emulators_frames():
    """The per-direction loss rows of `net check` count what pqs-linkemu reports in its own
    names (rx_frames, lost), read through LinkCounters."""
    from pqshake.emulation.topology import Topology

    p = Profile.from_mapping({"name": "lc", "rtt": "4ms", "loss": "2%"})
    raw: list[dict] = []
    with Topology(p, backend="userspace") as topo:
        real = topo.counters

        def recording() -> dict:
            raw.append(real())
            return raw[-1]
        topo.counters = recording  # link_counters() reads through counters()
        ok, rows = check.run_check(topo, throughput=False, rtt_count=50, log=lambda m: None)
    by = {(r["what"], r["dir"]): r for r in rows}
    assert len(raw) == 3 and ("emulator timing", "both") in by, rows
    before, after = raw[0], raw[1]
    for d in ("up", "down"):
        lost, seen = after[d]["lost"] - before[d]["lost"], after[d]["rx_frames"] - before[d]["rx_frames"]
        assert seen > 0 and by[("loss", d)]["achieved"].endswith(f"({lost}/{seen} frames)"), by[("loss", d)]
    assert by[("emulator timing", "both")]["tolerance"].endswith(f", rt {raw[2]['emulator']['rt_active']})")
