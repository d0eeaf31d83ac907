"""One run's network: three namespaces joined by two veth pairs, the link emulated in the
middle.

    pqs-<id>-client            pqs-<id>-link                       pqs-<id>-server
    [pqs-<id>-c] <--veth--> [pqs-<id>-lc]  ~~wire~~  [pqs-<id>-ls] <--veth--> [pqs-<id>-s]
     10.a.b.1/24                 egress = downlink     egress = uplink          10.a.b.2/24

The wire is pqs-linkemu (userspace backend, AF_PACKET between lc and ls) or a Linux bridge with
a netem qdisc on each egress (netem backend). Same addresses, MACs, MTU, offloads and sysctls
either way. Addresses exist only inside the client/server namespaces; the link namespace has
none. Neighbour entries are static (no ARP in the timings); IPv6 is off everywhere (no router
solicitations or DAD on the wire).

    with Topology(profile, run_id="ab12cd", backend="auto") as topo:
        subprocess.run(topo.ns_argv("client", ["ping", "-c1", topo.server_addr]))
"""

from __future__ import annotations

import os
import shutil
from typing import Any

from pqshake.emulation import backend_netem, backend_userspace, host, netns, placement
from pqshake.emulation.lifecycle import RunLifecycle
from pqshake.emulation.link import LinkDefaults
from pqshake.emulation.profiles import Profile
from pqshake.emulation.signals import TerminateOnSignals, signals_ignored
from pqshake.errors import UserError
from pqshake.paths import scratch_dir


class Topology(RunLifecycle, LinkDefaults):
    places_cpus = True  # the emulator and the endpoints on separate CPUs (placement_spec)

    def __init__(
        self,
        profile: Profile,
        run_id: str | None = None,
        backend: str = "auto",
        *,
        persistent: bool = False,
        seed: int | None = None,
        emulator_args: list[str] | None = None,
        clean_dead: bool = True,
    ):
        self.profile = profile
        self.run_id = netns.check_run_id(run_id) if run_id else netns.new_run_id()
        self.requested_backend = backend
        self.backend: str = ""
        self.backend_reason = ""
        self.persistent = persistent
        self.seed = seed if seed is not None else (profile.seed if profile.seed is not None else int.from_bytes(os.urandom(4), "little"))
        self.emulator_args = list(emulator_args or [])
        self.clean_dead = clean_dead
        self.names = netns.Names(self.run_id)
        self.addr = netns.addressing(self.run_id)
        self.workdir = scratch_dir(self.run_id)
        self.commands: list[list[str]] = []
        self.sysctls: dict[str, dict[str, Any]] = {}
        self.emulator: backend_userspace.Emulator | None = None
        self.final_counters: dict[str, Any] | None = None
        self._record: dict[str, Any] | None = None
        self._signals = TerminateOnSignals()
        self._up = False
        # CPU placement (emulation/placement.py): the runner sets the spec before the link comes
        # up; with the backend known, the emulator and everything ns_argv starts (server, timer,
        # probes) go to separate CPUs.
        self.placement_spec: Any = None
        self.placement: placement.Placement | None = None

    # ------------------------------------------------------------ names --
    client_ns = property(lambda self: self.names.client_ns)
    server_ns = property(lambda self: self.names.server_ns)
    link_ns = property(lambda self: self.names.link_ns)
    client_addr = property(lambda self: self.addr.client_ip)
    server_addr = property(lambda self: self.addr.server_ip)

    def ns_name(self, role: str) -> str:
        if role not in netns.ROLES:
            raise ValueError(f"role {role!r}: client, link or server")
        return self.names.ns(role)

    def ns_argv(self, role: str, cmd: list[str]) -> list[str]:
        """argv that runs cmd inside the role's namespace (on the endpoints' CPUs when placed)."""
        pin = placement.taskset(self.placement.endpoints) if self.placement is not None and self.placement.active else []
        return [*pin, "ip", "netns", "exec", self.ns_name(role), *cmd]

    # -------------------------------------------------------- lifecycle --
    def _claim(self) -> dict[str, Any]:
        return netns.claim_run(
            self.run_id, persistent=self.persistent, backend=self.backend,
            profile=self.profile.name, files=[], workdir=str(self.workdir),
            client_addr=self.client_addr, server_addr=self.server_addr,
        )

    def detach(self) -> dict[str, Any]:
        """For `net up`: leave everything running; the record (persistent) lets `net down`
        remove it. The emulator was started in its own session, not tied to this process."""
        self._signals.restore()
        assert self._record is not None
        self._record["persistent"] = True
        netns.write_record(self._record)
        self._up = False
        self._record = None
        return self.describe()

    def _teardown(self) -> None:
        if self._record is None:
            return
        # A second Ctrl-C / SIGTERM must not leave half a topology behind.
        with signals_ignored():
            try:
                if self.emulator is not None:
                    try:
                        self.final_counters = self._normalize_userspace(self.emulator.stop())
                    except Exception:
                        pass
                elif self.backend == "netem" and self._up:
                    try:
                        self.final_counters = backend_netem.read_counters(self.names)
                    except Exception:
                        pass
                netns.remove_run(self._record)
                shutil.rmtree(self.workdir, ignore_errors=True)
            finally:
                self._record = None
                self._up = False

    # ------------------------------------------------------------- build --
    def _build(self) -> None:
        n, a, p = self.names, self.addr, self.profile
        if self.placement_spec is not None:
            self.placement = placement.plan(self.placement_spec, self.backend)
        for role in netns.ROLES:
            netns.ns_add(n.ns(role))
        for ns in n.namespaces():
            netns.sysctl(ns, {"net.ipv6.conf.all.disable_ipv6": 1, "net.ipv6.conf.default.disable_ipv6": 1})
        netns.run(["ip", "-n", n.link_ns, "link", "add", n.link_c_if, "type", "veth", "peer", "name", n.client_if, "netns", n.client_ns])
        netns.run(["ip", "-n", n.link_ns, "link", "add", n.link_s_if, "type", "veth", "peer", "name", n.server_if, "netns", n.server_ns])
        netns.run(["ip", "-n", n.client_ns, "link", "set", n.client_if, "address", a.client_mac, "mtu", str(p.mtu)])
        netns.run(["ip", "-n", n.server_ns, "link", "set", n.server_if, "address", a.server_mac, "mtu", str(p.mtu)])
        for dev in (n.link_c_if, n.link_s_if):
            netns.run(["ip", "-n", n.link_ns, "link", "set", dev, "mtu", str(p.mtu)])
        for ns, dev in ((n.client_ns, n.client_if), (n.link_ns, n.link_c_if), (n.link_ns, n.link_s_if), (n.server_ns, n.server_if)):
            netns.offloads_off(ns, dev)
        # endpoints
        for ns, dev, mine, peer, peer_mac in (
            (n.client_ns, n.client_if, a.client_ip, a.server_ip, a.server_mac),
            (n.server_ns, n.server_if, a.server_ip, a.client_ip, a.client_mac),
        ):
            netns.run(["ip", "-n", ns, "addr", "add", f"{mine}/{a.prefix}", "dev", dev])
            netns.run(["ip", "-n", ns, "link", "set", dev, "up"])
            netns.run(["ip", "-n", ns, "neigh", "replace", peer, "lladdr", peer_mac, "dev", dev, "nud", "permanent"])
        self._endpoint_tcp()
        # the wire
        for dev in (n.link_c_if, n.link_s_if):
            netns.run(["ip", "-n", n.link_ns, "link", "set", dev, "up"])
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.backend == "netem":
            netns.run(["ip", "-n", n.link_ns, "link", "add", n.bridge, "type", "bridge", "stp_state", "0", "forward_delay", "0"])
            netns.run(["ip", "-n", n.link_ns, "link", "set", n.bridge, "mtu", str(p.mtu)])
            for dev in (n.link_c_if, n.link_s_if):
                netns.run(["ip", "-n", n.link_ns, "link", "set", dev, "master", n.bridge])
            netns.offloads_off(n.link_ns, n.bridge, strict=False)
            netns.run(["ip", "-n", n.link_ns, "link", "set", n.bridge, "up"])
            self.commands = backend_netem.apply(p, n, self.seed)
        else:
            cmd = backend_userspace.argv(p, n, self.seed, self.workdir / "linkemu-stats.json",
                                         self.workdir / "linkemu-ready.json", self.emulator_args)
            if self.placement is not None and self.placement.active:
                cmd = placement.taskset(self.placement.emulator) + cmd
            self.commands = [cmd]
            self.emulator = backend_userspace.Emulator(cmd, self.workdir, tie_to_parent=not self.persistent)
            self.emulator.start()
            assert self._record is not None and self.emulator.pid is not None
            self._record["processes"].append({"pid": self.emulator.pid, "start": netns.proc_start_time(self.emulator.pid), "name": "pqs-linkemu"})
            netns.write_record(self._record)

    def _endpoint_tcp(self) -> None:
        n, a, p = self.names, self.addr, self.profile
        bufs = p.tcp_buffers()
        cc = p.tcp.congestion_control
        if cc:
            if cc not in host.congestion_controls():
                netns.run(["modprobe", "-q", f"tcp_{cc}"], check=False)
            if cc not in host.congestion_controls():
                raise UserError(f"profile '{p.name}': {p.machine_problem() or f'tcp.congestion_control {cc!r}: modprobe tcp_{cc} failed'}",
                                exit_code=1)
        for role, ns, dev, mine in (("client", n.client_ns, n.client_if, a.client_ip), ("server", n.server_ns, n.server_if, a.server_ip)):
            # TCP Fast Open allowed as client (bit 1) and server (bit 2): it takes effect only
            # for sockets that ask for it (pqs-server --tcp-fastopen, pqs-timer --tcp-fastopen).
            vals: dict[str, Any] = {"net.ipv4.tcp_no_metrics_save": 1, "net.ipv4.tcp_fastopen": 3}
            vals.update({f"net.ipv4.{k}": v for k, v in bufs[role].items()})
            if cc:
                vals["net.ipv4.tcp_congestion_control"] = cc
            netns.sysctl(ns, vals)
            self.sysctls[role] = vals
            cwnd, rwnd = p.tcp.window("initcwnd", role), p.tcp.window("initrwnd", role)
            if cwnd or rwnd:
                subnet = ".".join(mine.split(".")[:3]) + ".0/24"
                route = ["ip", "-n", ns, "route", "replace", subnet, "dev", dev, "proto", "kernel", "scope", "link", "src", mine]
                if cwnd:
                    route += ["initcwnd", str(cwnd)]
                if rwnd:
                    route += ["initrwnd", str(rwnd)]
                netns.run(route)
                self.sysctls[role]["route"] = " ".join(route[3:])

    # ----------------------------------------------------------- runtime --
    def flush_tcp_metrics(self) -> None:
        """Between cells: forget cached per-destination TCP metrics (ssthresh, RTT) in both
        endpoints (tcp_no_metrics_save=1 already stops new ones being saved)."""
        for ns in (self.client_ns, self.server_ns):
            netns.run(["ip", "-n", ns, "tcp_metrics", "flush", "all"], check=False)

    def link_problem(self) -> str | None:
        """Why the link can no longer carry a cell's traffic (its emulator died, a namespace was
        removed under it), or None. Cheap enough to ask every runner poll: a wait() on the
        emulator and a stat per namespace."""
        if not self._up:
            return None
        if self.emulator is not None:
            why = self.emulator.died()
            if why:
                return why
        gone = [ns for ns in self.names.namespaces() if not netns.ns_exists(ns)]
        return f"network namespace {gone[0]} was removed" if gone else None

    def counters(self) -> dict[str, Any]:
        """Per direction (`up`, `down`): forwarded, bytes, lost, queue_dropped, ... (userspace)
        or forwarded, bytes, dropped, overlimits, backlog (netem, from `tc -s -j`)."""
        if not self._up:
            return self.final_counters or {}
        if self.backend == "netem":
            return backend_netem.read_counters(self.names)
        assert self.emulator is not None
        return self._normalize_userspace(self.emulator.stats())

    def emulator_pid(self) -> int | None:
        return self.emulator.pid if self.emulator is not None else None

    @staticmethod
    def _normalize_userspace(st: dict[str, Any]) -> dict[str, Any]:
        if not st:
            return {}
        out = {"up": st.get("up", {}), "down": st.get("down", {})}
        out["emulator"] = {k: v for k, v in st.items() if k not in ("up", "down")}
        return out

    def describe(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "run_id": self.run_id,
            "backend": self.backend,
            "backend_requested": self.requested_backend,
            "backend_reason": self.backend_reason,
            "seed": self.seed,
            "profile": self.profile.describe(),
            "namespaces": {"client": self.client_ns, "link": self.link_ns, "server": self.server_ns},
            "interfaces": {"client": self.names.client_if, "link_client_side": self.names.link_c_if,
                           "link_server_side": self.names.link_s_if, "server": self.names.server_if},
            "addresses": {"client": self.client_addr, "server": self.server_addr, "prefix": self.addr.prefix,
                          "client_mac": self.addr.client_mac, "server_mac": self.addr.server_mac},
            "mtu": self.profile.mtu,
            "sysctls": self.sysctls,
            "offloads": "tx rx tso gso gro off on every veth of the path",
            "commands": backend_netem.render_text(self.commands),
            "placement": self.placement.as_dict() if self.placement is not None else None,
        }
        if self.backend == "userspace":
            d["spec"] = {"up": backend_userspace.spec(self.profile.up), "down": backend_userspace.spec(self.profile.down)}
            if self.emulator is not None:
                d["emulator"] = {"pid": self.emulator.pid, "ready": self.emulator.ready}
        else:
            d["notes"] = backend_netem.semantics_notes(self.profile)
            d["applied"] = backend_netem.applied_profile(self.profile)
        if self.final_counters:
            d["final_counters"] = self.final_counters
        return d

