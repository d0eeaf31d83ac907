"""CPU placement (emulation/placement.py): the plan for a machine's CPUs, refusals with the field
named, and for real: the emulator's threads and everything started in the namespaces run where
the plan says (read back from /proc)."""

from __future__ import annotations

import os
import subprocess

import pytest

from pqshake.emulation import placement as P
from pqshake.errors import UserError


def test_auto_gives_the_emulator_the_highest_cpu():
    pl = P.plan("auto", "userspace", cpus=[0, 1, 2, 3])
    assert (pl.emulator, pl.endpoints, pl.active) == ([3], [0, 1, 2], True)
    assert pl.describe() == "emulator on CPU 3, client and server on CPU 0,1,2"
    assert P.taskset(pl.endpoints) == ["taskset", "-c", "0,1,2"]


def test_where_it_cannot_it_says_why():
    one = P.plan("auto", "userspace", cpus=[0])
    assert not one.active and "1 usable CPU" in one.note
    netem = P.plan("auto", "netem", cpus=[0, 1])
    assert not netem.active and "netem runs in the kernel" in netem.note
    off = P.plan("off", "userspace", cpus=[0, 1])
    assert not off.active and off.mode == "off"
    assert P.taskset([]) == []


def test_explicit_placement_is_checked():
    pl = P.plan({"emulator": [1], "endpoints": [0]}, "userspace", cpus=[0, 1])
    assert pl.mode == "explicit" and pl.active
    with pytest.raises(UserError, match=r"exp.yaml:3 cpu_placement.emulator: \[7\] — this machine lets pqshake use CPUs 0,1"):
        P.plan({"emulator": [7], "endpoints": [0]}, "userspace", cpus=[0, 1], where="exp.yaml:3 cpu_placement")
    with pytest.raises(UserError, match="CPU 0 is given to both the emulator and the endpoints"):
        P.plan({"emulator": [0], "endpoints": [0, 1]}, "userspace", cpus=[0, 1])
    with pytest.raises(UserError, match="write auto, off, or"):
        P.plan("sometimes", "userspace", cpus=[0, 1])


def test_the_experiment_key_is_validated_at_plan_time(tmp_path):
    from pqshake.experiments.plan import build_plan

    cpus = sorted(os.sched_getaffinity(0))
    f = tmp_path / "exp.yaml"
    f.write_text("name: p\ngroups: [x25519]\nprofiles: [{name: a, rtt: 1ms}]\nsamples: 1\n"
                 f"cpu_placement: {{emulator: [{max(cpus) + 5}], endpoints: [{cpus[0]}]}}\n")
    with pytest.raises(UserError, match=rf"exp.yaml:5 cpu_placement.emulator: \[{max(cpus) + 5}\]"):
        build_plan(f, check_stack=False)
    f.write_text("name: p\ngroups: [x25519]\nprofiles: [{name: a, rtt: 1ms}]\nsamples: 1\ncpu_placement: {emulator: [0]}\n")
    with pytest.raises(UserError, match="cpu_placement.*endpoints"):
        build_plan(f, check_stack=False)
    # a bare `off` is YAML 1.1's false: it still means off
    f.write_text("name: p\ngroups: [x25519]\nprofiles: [{name: a, rtt: 1ms}]\nsamples: 1\ncpu_placement: off\n")
    assert build_plan(f, check_stack=False).model.cpu_placement == "off"


def _allowed(path: str) -> str:
    with open(path) as fh:
        return fh.read().split("Cpus_allowed_list:")[1].split()[0]


@pytest.mark.netns
def test_the_emulator_and_the_endpoints_run_where_placed():
    from pqshake.emulation.profiles import Profile
    from pqshake.emulation.topology import Topology

    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.fail("this test needs a machine with at least 2 CPUs (placement is not possible on 1)")
    t = Topology(Profile.from_mapping({"name": "pl", "rtt": "2ms"}), backend="userspace")
    t.placement_spec = "auto"
    with t as topo:
        pid = topo.emulator.pid
        tasks = os.listdir(f"/proc/{pid}/task")
        assert tasks and {_allowed(f"/proc/{pid}/task/{x}/status") for x in tasks} == {str(cpus[-1])}
        out = subprocess.run(topo.ns_argv("server", ["grep", "Cpus_allowed_list", "/proc/self/status"]),
                             capture_output=True, text=True, check=True).stdout
        want = ",".join(str(c) for c in cpus[:-1]) if len(cpus) > 2 else str(cpus[0])
        assert out.split()[-1] in (want, f"{cpus[0]}-{cpus[-2]}"), out
        assert topo.describe()["placement"]["emulator"] == [cpus[-1]]
    # Off: nothing pinned.
    t = Topology(Profile.from_mapping({"name": "pl", "rtt": "2ms"}), backend="userspace")
    t.placement_spec = "off"
    with t as topo:
        assert topo.ns_argv("client", ["true"])[0] == "ip"
