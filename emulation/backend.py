"""Which backend: `netem` when the kernel accepts a netem qdisc, else `userspace`.

The probe adds a netem qdisc to a veth inside a scratch namespace `pqs-<runid>-probe` (never
the host's interfaces), then removes the namespace. The answer is cached per process.
"""

from __future__ import annotations

import shutil
from typing import Literal

from pqshake.emulation import netns
from pqshake.errors import UserError

BackendName = Literal["netem", "userspace"]
CHOICES = ("auto", "netem", "userspace")

NO_NETEM = (
    "the kernel has no sch_netem module (modprobe sch_netem fails / 'Specified qdisc kind is unknown'); "
    "use --backend userspace, which works here"
)

_cache: dict[str, tuple[bool, str]] = {}


def netem_available(run_id: str | None = None) -> tuple[bool, str]:
    """(available, detail). Needs root."""
    if "netem" in _cache:
        return _cache["netem"]
    netns.require_root()
    rid = netns.new_run_id()  # its own id: the scratch namespace has its own record
    ns = f"pqs-{rid}-probe"
    with netns.scratch(rid, [ns], purpose="netem probe"):
        netns.run(["ip", "-n", ns, "link", "add", f"pqs-{rid}-p0", "type", "veth", "peer", "name", f"pqs-{rid}-p1"])
        cp = netns.run(["tc", "-n", ns, "qdisc", "add", "dev", f"pqs-{rid}-p0", "root", "netem", "delay", "1ms"], check=False)
        if cp.returncode == 0:
            result = (True, "netem qdisc accepted")
        else:
            err = (cp.stderr or cp.stdout).strip().splitlines()
            detail = err[0] if err else "tc failed"
            if shutil.which("modprobe"):
                mp = netns.run(["modprobe", "-q", "sch_netem"], check=False)
                if mp.returncode == 0:
                    cp2 = netns.run(["tc", "-n", ns, "qdisc", "add", "dev", f"pqs-{rid}-p0", "root", "netem", "delay", "1ms"], check=False)
                    if cp2.returncode == 0:
                        result = (True, "netem qdisc accepted after modprobe sch_netem")
                        _cache["netem"] = result
                        return result
                detail += "; modprobe sch_netem failed"
            else:
                detail += "; no modprobe"
            result = (False, detail)
    _cache["netem"] = result
    return result


def resolve(requested: str, run_id: str | None = None, profile=None) -> tuple[BackendName, str]:
    """(backend, why). UserError for netem on a kernel without it. A profile only the userspace
    emulator can run (a trace, a delay series, episodes: Profile.netem_problem) makes auto pick
    userspace, and netem an error naming the userspace backend."""
    if requested not in CHOICES:
        raise UserError(f"--backend {requested!r}: choose auto, netem or userspace")
    if requested == "userspace":
        return "userspace", "requested"
    needs = profile.netem_problem() if hasattr(profile, "netem_problem") else None
    if needs and requested == "auto":
        return "userspace", f"auto: the profile needs the userspace emulator ({needs.split(':')[0]})"
    if needs:
        raise UserError(f"--backend netem: profile '{profile.name}': {needs}", exit_code=2)
    ok, detail = netem_available(run_id)
    if requested == "netem":
        if not ok:
            raise UserError(NO_NETEM, exit_code=1)
        return "netem", "requested"
    return ("netem", f"auto: {detail}") if ok else ("userspace", f"auto: netem unavailable ({detail})")
