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
    between the host's value before the boot and after it. (Before: 0 inside UML, while this VM
    had stolen 0.2 s since its boot; on a host with no steal at all both are 0.)"""
    before = host.steal_s()
    text = _in_uml([sys.executable, "-c", "import os; from pqshake.emulation import host; "
                    "print(os.environ.get('PQS_UML_HOST_STEAL')); print(host.steal_s())"])
    after = host.steal_s()
    path, inside = text.split()[-2:]
    assert path != "None", text
    assert before - 0.01 <= float(inside) <= after + 0.01, (before, inside, after)
