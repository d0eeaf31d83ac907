"""The kernel backend: one netem qdisc per direction on that direction's egress in the link
namespace (a Linux bridge joins the two link-side veths), read back with `tc -s -j`.

    uplink   (client -> server): root netem on pqs-<id>-ls (the link's veth facing the server)
    downlink (server -> client): root netem on pqs-<id>-lc (the link's veth facing the client)

Everything of a direction lives in that single netem qdisc: delay/jitter/distribution, loss
(random or gemodel), duplicate, corrupt, reorder/gap, rate + packet overhead, limit. netem's
rate counts skb->len (Ethernet header included, no FCS) + overhead; pqs-linkemu counts the same.
"""

from __future__ import annotations

import json
import shlex
from functools import lru_cache
from typing import Any

from pqshake.emulation import netns, units
from pqshake.emulation.profiles import Link, Profile
from pqshake.errors import UserError

NETEM_REFUSES = ("netem cannot replay traces, delay series or episodes, nor cap a run of losses; use the "
                 "userspace backend (--backend userspace, or backend: userspace in the experiment)")


@lru_cache(maxsize=1)
def tc_supports_seed() -> bool:
    """iproute2 >= 6.5 knows `netem ... seed N` (parsed in userspace, so no module needed)."""
    cp = netns.run(["tc", "qdisc", "add", "dev", "lo", "root", "netem", "help"], check=False)
    return " seed " in (cp.stdout + cp.stderr)


def netem_args(link: Link, seed: int | None = None, with_seed: bool = False) -> list[str]:
    """The netem options for one direction, in tc's own order. A trace, delay series, episode or
    loss-burst cap has no netem form (netem's `slot` is no replay of a delivery schedule, it
    cannot act per flow or per attempt, and its loss has no cap on a run): refused in one line
    naming the userspace backend."""
    if link.netem_lacks():
        raise UserError(NETEM_REFUSES)
    a = ["limit", str(link.limit)]
    if link.delay_ns or link.jitter_ns:
        a += ["delay", units.fmt_duration_tc(link.delay_ns)]
        if link.jitter_ns:
            a.append(units.fmt_duration_tc(link.jitter_ns))
            if link.dist != "uniform":  # no table = netem's uniform jitter
                a += ["distribution", link.dist]
    if link.ge is not None:
        p, r, one_h, one_k = link.ge
        a += ["loss", "gemodel", units.fmt_percent(p), units.fmt_percent(r), units.fmt_percent(one_h), units.fmt_percent(one_k)]
    elif link.loss > 0:
        a += ["loss", "random", units.fmt_percent(link.loss)]
        if link.loss_corr > 0:
            a.append(units.fmt_percent(link.loss_corr))
    if link.dup > 0:
        a += ["duplicate", units.fmt_percent(link.dup)]
    if link.corrupt > 0:
        a += ["corrupt", units.fmt_percent(link.corrupt)]
    if link.reorder > 0:
        a += ["reorder", units.fmt_percent(link.reorder)]
        if link.gap > 1:
            a += ["gap", str(link.gap)]
    if link.rate_bps > 0:
        a += ["rate", units.fmt_rate(link.rate_bps)]
        if link.overhead:
            a.append(str(link.overhead))
    if with_seed and seed is not None:
        a += ["seed", str(seed)]
    return a


def render(profile: Profile, names: netns.Names, seed: int | None = None, with_seed: bool | None = None) -> list[list[str]]:
    """Every command (argv) that sets the link up, in order."""
    why = profile.netem_problem()
    if why:
        raise UserError(f"profile '{profile.name}' ({profile.source}): {why}")
    if with_seed is None:
        with_seed = tc_supports_seed()
    cmds = []
    for dev, link in ((names.link_s_if, profile.up), (names.link_c_if, profile.down)):
        cmds.append(["tc", "-n", names.link_ns, "qdisc", "replace", "dev", dev, "root", "handle", "1:", "netem",
                     *netem_args(link, seed=None if seed is None else seed + (0 if dev == names.link_s_if else 1), with_seed=with_seed)])
    return cmds


# ------------------------------------------------------------ applied values --
# What netem really applies can differ from what the profile asks for, by less than a microsecond:
# tc passes delay and jitter to the kernel in whole microseconds (sub-microsecond digits are
# dropped) converted to psched ticks of 64 ns (rounded down), and the rate as whole bytes per
# second. The applied values are computed here, recorded with the run, and said when they differ;
# the UML lane checks them against tc's own read-back (which prints whole microseconds).
PSCHED_TICK_NS = 64


def _psched_ticks_per_us() -> float:
    """tc's tick_in_usec, from /proc/net/psched as iproute2 reads it (15.625 on every modern kernel)."""
    try:
        t2us, us2t, clock_res, _ = (int(x, 16) for x in open("/proc/net/psched").read().split()[:4])
    except (OSError, ValueError):
        return 1000 / PSCHED_TICK_NS
    if clock_res == 1_000_000_000:
        t2us = us2t
    return t2us / us2t * (clock_res / 1_000_000)


def applied_duration_ns(ns: int) -> int:
    ticks = int((int(ns) // 1000) * _psched_ticks_per_us())
    return ticks * PSCHED_TICK_NS


def applied(link: Link) -> dict[str, Any]:
    """One direction's values as netem will hold them, and a note per value that was rounded."""
    out = {"delay_ns": applied_duration_ns(link.delay_ns), "jitter_ns": applied_duration_ns(link.jitter_ns),
           "rate_bps": link.rate_bps // 8 * 8}
    notes = []
    for key, asked, what in (("delay_ns", link.delay_ns, "delay"), ("jitter_ns", link.jitter_ns, "jitter")):
        if out[key] != asked:
            notes.append(f"{what} {units.fmt_duration_tc(asked)} is applied as {out[key]} ns "
                         "(tc passes whole microseconds, netem holds 64 ns ticks)")
    if out["rate_bps"] != link.rate_bps:
        notes.append(f"rate {link.rate_bps} bit/s is applied as {out['rate_bps']} bit/s (netem counts whole bytes per second)")
    out["notes"] = notes
    return out


def applied_profile(profile: Profile) -> dict[str, Any]:
    return {"up": applied(profile.up), "down": applied(profile.down)}


def render_text(cmds: list[list[str]]) -> list[str]:
    return [shlex.join(c) for c in cmds]


def semantics_notes(profile: Profile) -> list[str]:
    notes = [f"{d}link: {n}" for d, a in applied_profile(profile).items() for n in a["notes"]]
    for name, l in (("uplink", profile.up), ("downlink", profile.down)):
        if l.jitter_ns and l.keep_order and not l.rate_bps:
            notes.append(f"{name}: netem without rate reorders frames whose jitter exceeds their spacing (keep_order cannot be enforced by netem)")
        if l.loss_corr > 0:
            notes.append(f"{name}: netem's loss correlation changes the loss rate (pqs-linkemu keeps it at {units.fmt_percent(l.loss)}); use gemodel for comparable bursty loss")
    return notes


def apply(profile: Profile, names: netns.Names, seed: int | None) -> list[list[str]]:
    cmds = render(profile, names, seed)
    for c in cmds:
        netns.run(c)
    return cmds


def parse_counters(tc_json: str, kind: str = "netem") -> dict[str, Any]:
    """One direction's counters from `tc -s -j qdisc show dev X`: the first qdisc of `kind`.
    The statistics keys are iproute2's generic ones (every qdisc kind prints them), which is
    why tests can check this parser against a real tbf on kernels that lack netem."""
    try:
        qd = [q for q in json.loads(tc_json or "[]") if q.get("kind") == kind]
    except json.JSONDecodeError:
        qd = []
    q = qd[0] if qd else {}
    return {
        "forwarded": q.get("packets", 0),
        "bytes": q.get("bytes", 0),
        "dropped": q.get("drops", 0),  # netem counts random loss AND tail drops here
        "overlimits": q.get("overlimits", 0),
        "requeues": q.get("requeues", 0),
        "backlog_packets": q.get("qlen", 0),
        "raw": q,
    }


def read_counters(names: netns.Names) -> dict[str, Any]:
    """`tc -s -j qdisc show` for both directions: sent packets/bytes, drops, overlimits, backlog."""
    out: dict[str, Any] = {}
    for direction, dev in (("up", names.link_s_if), ("down", names.link_c_if)):
        cp = netns.run(["tc", "-n", names.link_ns, "-s", "-j", "qdisc", "show", "dev", dev])
        out[direction] = parse_counters(cp.stdout)
    return out
