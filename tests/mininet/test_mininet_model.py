"""engine: mininet in experiment files: schema, one-line errors, plans (no root needed)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pqshake.errors import UserError
from pqshake.experiments.model import load_experiment
from pqshake.experiments.plan import build_plan

REPO = Path(__file__).resolve().parents[2]
BASE = "name: t\ngroups: [x25519]\nsamples: 3\n"


def write(tmp_path, text):
    p = tmp_path / "e.yaml"
    p.write_text(BASE + textwrap.dedent(text).lstrip())
    return p


@pytest.mark.parametrize("text, want", [
    ("engine: mininet\nprofiles: [lan]\n", ":4 engine: mininet needs topology"),
    ("profiles: [lan]\ntopology: {kind: star}\n", "topology is for engine: mininet"),
    ("engine: mininet\nprofiles: [lan]\ntopology: {kind: ring}\n", ":6 topology.kind: "),
    ("engine: mininet\ntopology: {kind: chain}\n", "a chain needs hops"),
    ("engine: mininet\nprofiles: [lan]\ntopology: {kind: chain, hops: [lan]}\n", "a chain takes its profiles from topology.hops"),
    ("engine: mininet\nprofiles: [lan]\ntopology: {kind: star, hops: [lan]}\n", "hops is for kind: chain"),
    ("engine: mininet\nprofiles: [lan]\ntopology: {kind: star, competing: {flows: 1}}\n", "competing flows need kind: dumbbell"),
    ("engine: mininet\nprofiles: [lan]\ntopology: {kind: dumbbell, clients: 9}\n", "topology.clients: "),
    ("engine: mininet\nprofiles: [lan]\ntopology: {kind: dumbbell, switch: ovs}\n", "topology.switch: unknown field"),
    ("engine: mininet\ntopology:\n  kind: chain\n  hops: [lan, nosuch]\n", ":7 topology.hops[1]: unknown profile 'nosuch'"),
    ("engine: ns3\nprofiles: [lan]\n", "engine: "),
])
def test_errors_are_one_line_with_file_and_line(tmp_path, text, want):
    p = write(tmp_path, text)
    with pytest.raises(UserError) as e:
        build_plan(p, check_stack=False)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(str(p)), msg
    assert want in msg, msg


def test_single_link_default_unchanged(tmp_path):
    m = load_experiment(write(tmp_path, "profiles: [lan]\n")).model
    assert m.engine == "single-link" and m.topology is None


def test_chain_plan_carries_one_profile_with_the_summed_figures(tmp_path):
    p = write(tmp_path, """
        engine: mininet
        topology:
          kind: chain
          hops: [rtt10, {name: mid, uplink: {delay: 7ms, rate: 5Mbit}, downlink: {delay: 3ms}}, rtt10]
        """)
    plan = build_plan(p, check_stack=False)
    assert [h.name for h in plan.hops] == ["rtt10", "mid", "rtt10"]  # a profile may repeat along a chain
    (name,) = plan.profiles
    prof = plan.profiles[name]
    assert name == "chain-rtt10_mid_rtt10"
    assert prof.up.delay_ns == 17_000_000 and prof.down.delay_ns == 13_000_000
    assert prof.up.rate_bps == 5_000_000 and prof.down.rate_bps == 0
    assert {c.profile for c in plan.cells} == {name}
    assert plan.summary()["engine"] == "mininet" and plan.summary()["topology"]["kind"] == "chain"


def test_dumbbell_and_star_use_the_cell_profiles(tmp_path):
    p = write(tmp_path, """
        engine: mininet
        topology: {kind: dumbbell, clients: 2, competing: {flows: 2, direction: down}}
        profiles: [rtt10, rtt40]
        """)
    plan = build_plan(p, check_stack=False)
    assert list(plan.profiles) == ["rtt10", "rtt40"] and plan.hops == []
    assert any("dumbbell with 2 clients and 2 competing" in n for n in plan.notes)


@pytest.mark.parametrize("name", ["mininet-dumbbell", "mininet-chain", "mininet-star"])
def test_shipped_examples_plan(name):
    plan = build_plan(REPO / "experiments" / f"{name}.yaml")
    assert plan.model.engine == "mininet" and plan.cells


def test_mininet_missing_says_how_to_install(tmp_path, monkeypatch):
    import sys

    from pqshake.emulation import mininet_env

    monkeypatch.setattr(mininet_env, "DIST", tmp_path)
    monkeypatch.delitem(sys.modules, "mininet", raising=False)
    with pytest.raises(UserError) as e:
        mininet_env.import_mininet()
    assert "apt-get install mininet" in str(e.value)
    ok, detail = mininet_env.available()
    assert not ok and "not found" in detail
