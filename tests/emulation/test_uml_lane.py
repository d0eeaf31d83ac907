"""The user-mode Linux kernel of the netem lane (emulation/uml.py) as the lane's tests see it
(root; boots a small UML kernel, ~5 s)."""

from __future__ import annotations

import sys

import pytest

from needs import need
from pqshake.emulation import host

pytestmark = pytest.mark.netns


def _in_uml(argv: list[str]) -> str:
    from pqshake.emulation import uml

    try:
        uml.kernel_path()
        uml.preload_lib()
    except Exception as e:  # noqa: BLE001 - the one-line reason is the skip's
        need(False, str(e))
    out: list[str] = []
    rc = uml.run(argv, mem="512M", out=lambda line: None, write=out.append, timeout=300)
    assert rc == 0, "".join(out)
    return "".join(out)


def test_the_lane_sees_the_hosts_steal():
    """UML's own /proc/stat counts no steal, so inside it a VM stall looked like the emulator's
    fault (judge_undisturbed, the cells' validity): the kernel's commands read the host's steal,
    which emulation/uml.py publishes into the job. Read there through host.steal_s(), it lies
    at least the host's value before the boot, and at most that of after it plus the time the
    kernel waited for a CPU (which it counts too: test_run_delay_is_counted_and_never_shrinks).
    (Before: 0 inside UML, while this VM had stolen 0.2 s since its boot; on a host with no
    steal at all both are 0.)"""
    import time

    before, t0 = host.steal_s(), time.monotonic()
    text = _in_uml([sys.executable, "-c", "import os; from pqshake.emulation import host; "
                    "print(os.environ.get('PQS_UML_HOST_STEAL')); print(host.steal_s())"])
    after, wall = host.steal_s(), time.monotonic() - t0
    path, inside = text.split()[-2:]
    assert path != "None", text
    assert before - 0.01 <= float(inside) <= after + wall, (before, inside, after, wall)


def test_run_delay_is_counted_and_never_shrinks():
    """What the lane publishes as steal includes the run delay of the UML kernel's processes: the
    host's other work (the host lane's tests beside it) holding the guest off a CPU is, for the
    guest, stolen time. Three busy processes of one group on one CPU each wait about two thirds
    of the time; the count grows by about that and keeps what exited processes had."""
    import os
    import subprocess
    import time

    from pqshake.emulation.uml import _RunDelay

    cpu = str(min(os.sched_getaffinity(0)))
    loop = "import time; t = time.monotonic() + 1.5\nwhile time.monotonic() < t: pass"
    # one process group (a new session): a shell and its three busy children on one CPU
    group = subprocess.Popen(["sh", "-c", f"for i in 1 2 3; do taskset -c {cpu} {sys.executable} -c '{loop}' & done; wait"],
                             start_new_session=True)
    delay = _RunDelay(group.pid)
    seen = []
    while group.poll() is None:
        seen.append(delay.seconds())
        time.sleep(0.05)
    seen.append(delay.seconds())
    assert seen == sorted(seen), "the count went down"
    # 3 x 1.5 s of wanted CPU on one CPU: about 3 s of waiting among them; at least 1 s, whatever
    # else the machine runs
    assert seen[-1] >= 1.0, seen[-1]
