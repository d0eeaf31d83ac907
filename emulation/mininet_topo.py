"""Mininet topologies (`engine: mininet`): dumbbell, star and chain, every shaped link emulated
by the same backends as the single-link topology.

Built with Mininet's Python API from the Debian package (emulation/mininet_env.py): hosts are
Mininet `Host`s (a bash in its own network namespace), switches are Linux bridges inside their
own namespaces (class `PqsBridge`, iproute2 only: no Open vSwitch, no controller, nothing in the
host's namespace). Each shaped link is a **wire host** `pqs-<id>-wN` with two interfaces,
`...-wNa` (client side) and `...-wNb` (server side), exactly like the single-link topology's link
namespace: `pqs-linkemu --a wNa --b wNb` (userspace backend) or a bridge `pqs-<id>-wNbr` with one
root netem qdisc per egress rendered by backend_netem (netem backend; the qdisc is read back and a
link that is not shaped stops the run - Mininet's TCLink would print netem's error and carry on
unshaped, and cannot express the profile's distribution, Gilbert-Elliott loss, overhead or limit).

    dumbbell  c1..cN - pqs-<id>-bl == w1 (bottleneck profile) == pqs-<id>-br - s1..sN
    star      c1..cN each through its own wire wI (the profile) to the centre bridge pqs-<id>-bc - s1
    chain     c1 - w1 - w2 - ... - wK - s1        (hop I with profile I; one L2 segment)

Names: every node `pqs-<id>-<tag>`, every interface `pqs-<id>-<tag><port>` (<= 15 characters,
run ids 1-6 characters). One /24 from the run id; clients .11.., servers .21..; fixed MACs,
static neighbour entries, IPv6 off, offloads off, the path MTU on every interface.

Lifecycle: a record (state_dir()/runs/<id>.json) lists every node's shell pid + start time, its
network namespace inode, and every interface, before traffic starts; emulators and bulk flows are
added as they start. `netns.remove_run` (exit, Ctrl-C, `pqshake clean` after kill -9) calls
`remove_leftovers`: processes inside the run's hosts (the recorded pair of network + mount
namespace inodes), the recorded processes, any recorded interface found in the host namespace. Mininet's pattern-based cleanup (`mn -c`) is never used.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from pqshake.emulation.signals import TerminateOnSignals, signals_ignored
from pqshake.emulation import backend_netem, backend_userspace, netns
from pqshake.emulation.lifecycle import RunLifecycle
from pqshake.emulation.link import LinkDefaults
from pqshake.emulation.profiles import Profile
from pqshake.errors import UserError
from pqshake.paths import binary, scratch_dir

KINDS = ("dumbbell", "star", "chain")
MAX_HOSTS = 8  # per side: keeps bridge port names <= 15 characters
MAX_HOPS = 8


# --------------------------------------------------------------------------- profiles --


def chain_profile(hops: list[Profile], name: str | None = None) -> Profile:
    """The end-to-end figures of a chain as one profile (for the runner's configured figures,
    estimates and probe spacing; each hop is emulated with its own profile): delays add, jitter
    adds in variance, the slowest rate, loss 1 - prod(1 - loss), the smallest MTU."""
    name = name or "chain-" + "_".join(h.name for h in hops)

    def direction(links) -> dict[str, Any]:
        d: dict[str, Any] = {"delay": f"{sum(l.delay_ns for l in links)}ns"}
        jit = math.sqrt(sum(l.jitter_ns ** 2 for l in links))
        if jit:
            d["jitter"] = f"{int(round(jit))}ns"
            d["distribution"] = "normal" if len(links) > 1 else links[0].dist
        rates = [l.rate_bps for l in links if l.rate_bps]
        if rates:
            d["rate"] = f"{min(rates)}bit"
        loss = 1 - math.prod(1 - l.expected_loss() for l in links)
        if loss:
            d["loss"] = f"{loss * 100:.10g}%"
        return d

    return Profile.from_mapping({
        "name": name[:64].lower(),
        "description": f"end-to-end figures of a {len(hops)}-hop chain ({', '.join(h.name for h in hops)})",
        "uplink": direction([h.up for h in hops]), "downlink": direction([h.down for h in hops]),
        "mtu": min(h.mtu for h in hops),
    }, source="<chain>")


# ---------------------------------------------------------------------- the topology --


class MininetTopology(RunLifecycle, LinkDefaults):
    """A Link (emulation/link.py) of several hosts: `clients`/`servers` (host tags) and
    `addr_of(tag)` beyond the single link's; the counters are the first shaped link's.
    Roles for ns_argv: `client`/`server` (= c1/s1) or any tag (`c2`, `s2`, `w1`)."""

    def __init__(self, kind: str, links: list[Profile], *, clients: int = 1, run_id: str | None = None,
                 backend: str = "auto", seed: int | None = None, competing: dict[str, Any] | None = None,
                 profile: Profile | None = None, emulator_args: list[str] | None = None, clean_dead: bool = True):
        if kind not in KINDS:
            raise UserError(f"topology {kind!r}: choose dumbbell, star or chain")
        if not links:
            raise UserError("a Mininet topology needs at least one shaped link")
        if kind == "chain" and len(links) > MAX_HOPS:
            raise UserError(f"chain: at most {MAX_HOPS} hops")
        if not 1 <= clients <= MAX_HOSTS:
            raise UserError(f"clients: 1..{MAX_HOSTS}")
        self.kind = kind
        self.links = list(links) if kind != "star" else [links[0]] * clients
        self.n_clients = clients if kind != "chain" else 1
        self.n_servers = self.n_clients if kind == "dumbbell" else 1
        self.run_id = netns.check_run_id(run_id) if run_id else netns.new_run_id()
        self.requested_backend = backend
        self.backend = ""
        self.backend_reason = ""
        self.seed = seed if seed is not None else int.from_bytes(os.urandom(4), "little")
        self.competing = dict(competing or {})
        self.profile = profile or (self.links[0] if kind != "chain" else chain_profile(self.links))
        self.emulator_args = list(emulator_args or [])
        self.clean_dead = clean_dead
        self.mtu = min(p.mtu for p in self.links)
        a = netns.addressing(self.run_id)
        self._base = ".".join(a.client_ip.split(".")[:3])
        self._mac = a.client_mac.rsplit(":", 1)[0]
        self.workdir = scratch_dir(self.run_id)
        self.clients = [f"c{i}" for i in range(1, self.n_clients + 1)]
        self.servers = [f"s{i}" for i in range(1, self.n_servers + 1)]
        self.net = None
        self.nodes: dict[str, Any] = {}
        self.interfaces: list[str] = []
        self.emulators: list[backend_userspace.Emulator] = []
        self.bulk: list[subprocess.Popen] = []
        self.commands: list[list[str]] = []
        self.final_counters: dict[str, Any] | None = None
        self._record: dict[str, Any] | None = None
        self._signals = TerminateOnSignals()
        self._up = False

    # ---------------------------------------------------------------- names --
    def name(self, tag: str) -> str:
        return f"pqs-{self.run_id}-{tag}"

    def addr_of(self, tag: str) -> str:
        kind, i = tag[0], int(tag[1:])
        return f"{self._base}.{(10 if kind == 'c' else 20) + i}"

    def mac_of(self, tag: str) -> str:
        kind, i = tag[0], int(tag[1:])
        return f"{self._mac}:{(0x10 if kind == 'c' else 0x20) + i:02x}"

    client_addr = property(lambda self: self.addr_of("c1"))
    server_addr = property(lambda self: self.addr_of("s1"))

    def _tag(self, role: str) -> str:
        return {"client": "c1", "server": "s1"}.get(role, role)

    def pid_of(self, role: str) -> int:
        tag = self._tag(role)
        if tag not in self.nodes:
            raise ValueError(f"role {role!r}: client, server or one of {', '.join(self.nodes)}")
        return int(self.nodes[tag].pid)

    def ns_argv(self, role: str, cmd: list[str]) -> list[str]:
        """argv that runs cmd in that Mininet host's namespaces (mnexec -a execs it, so a
        PR_SET_PDEATHSIG set before survives)."""
        return ["mnexec", "-a", str(self.pid_of(role)), *cmd]

    # ------------------------------------------------------------ lifecycle --
    def _claim(self) -> dict[str, Any]:
        return netns.claim_run(
            self.run_id, namespaces=[], backend=self.backend, profile=self.profile.name, files=[],
            workdir=str(self.workdir), engine="mininet", topology=self.kind,
            mininet={"nodes": {}, "interfaces": []}, removers=[f"{__name__}:remove_leftovers"],
        )

    def _save_record(self) -> None:
        assert self._record is not None
        self._record["mininet"] = {
            "nodes": {t: {"name": self.name(t), "pid": int(n.pid), "start": netns.proc_start_time(int(n.pid)),
                          "netns_inode": _netns_inode(int(n.pid)), "mntns_inode": _netns_inode(int(n.pid), "mnt")}
                      for t, n in self.nodes.items()},
            "interfaces": list(self.interfaces),
        }
        procs = [{"pid": int(n.pid), "start": netns.proc_start_time(int(n.pid)), "name": f"mininet {self.name(t)}"}
                 for t, n in self.nodes.items()]
        procs += [{"pid": e.pid, "start": netns.proc_start_time(e.pid), "name": "pqs-linkemu"} for e in self.emulators if e.pid]
        procs += [{"pid": p.pid, "start": netns.proc_start_time(p.pid), "name": "iperf3"} for p in self.bulk]
        self._record["processes"] = procs
        netns.write_record(self._record)

    def _teardown(self) -> None:
        if self._record is None:
            return
        # A second Ctrl-C / SIGTERM must not leave half a topology behind.
        with signals_ignored():
            try:
                try:
                    self.final_counters = self.counters() if self._up else None
                except Exception:  # noqa: BLE001
                    pass
                for p in self.bulk:
                    netns.stop(p, 3)
                for e in self.emulators:
                    try:
                        e.stop()
                    except Exception:  # noqa: BLE001
                        pass
                for n in self.nodes.values():  # Mininet's own per-node teardown (SIGHUP to its shell's group)
                    try:
                        n.terminate()
                    except Exception:  # noqa: BLE001
                        pass
                netns.remove_run(self._record)  # whatever is left: by the record, not by pattern
                shutil.rmtree(self.workdir, ignore_errors=True)
            finally:
                self._record = None
                self._up = False

    # ----------------------------------------------------------------- build --
    def _build(self) -> None:
        mn_net, mn_node, mn_link, _ = __import__("pqshake.emulation.mininet_env", fromlist=["x"]).import_mininet()
        bridge_cls = _bridge_class(mn_node)
        self.workdir.mkdir(parents=True, exist_ok=True)
        net = mn_net.Mininet(topo=None, build=False, controller=None, autoSetMacs=False, autoStaticArp=False,
                             inNamespace=False, waitConnected=False)
        self.net = net
        add_host = lambda tag: self.nodes.setdefault(tag, net.addHost(self.name(tag), ip=None, inNamespace=True))  # noqa: E731
        # A datapath id of our own: Mininet derives one from the digits in a switch's name and
        # fails on a name without any (a run id of letters only, e.g. pqs-abcdef-bc).
        add_bridge = lambda tag: self.nodes.setdefault(tag, net.addSwitch(  # noqa: E731
            self.name(tag), cls=bridge_cls, inNamespace=True, dpid=f"{len(self.nodes) + 1:016x}"))
        for t in self.clients + self.servers:
            add_host(t)
        wires = [f"w{i}" for i in range(1, len(self.links) + 1)]
        for w in wires:
            add_host(w)
        self._save_record()  # shells exist: recorded before any interface
        ports: dict[str, int] = {}

        def link(a: str, b: str, ia: str | None = None, ib: str | None = None) -> None:
            def port_name(tag: str) -> str:
                ports[tag] = ports.get(tag, 0) + 1
                return f"{tag}p{ports[tag]}"
            ia = self.name(ia or (port_name(a) if a.startswith("b") else a))
            ib = self.name(ib or (port_name(b) if b.startswith("b") else b))
            for n in (ia, ib):
                if len(n) > 15:
                    raise UserError(f"interface name {n} is longer than 15 characters (use a shorter run id)")
            self.interfaces += [ia, ib]
            assert self._record is not None
            self._record["mininet"]["interfaces"] = list(self.interfaces)
            netns.write_record(self._record)
            net.addLink(self.nodes[a], self.nodes[b], intfName1=ia, intfName2=ib, cls=mn_link.Link)

        if self.kind == "chain":
            prev, prev_if = "c1", None
            for w in wires:
                link(prev, w, prev_if, f"{w}a")
                prev, prev_if = w, f"{w}b"
            link(prev, "s1", prev_if, None)
        elif self.kind == "dumbbell":
            add_bridge("bl")
            add_bridge("br")
            self._save_record()
            for c in self.clients:
                link(c, "bl")
            link("bl", "w1", None, "w1a")
            link("w1", "br", "w1b", None)
            for s in self.servers:
                link("br", s)
        else:  # star
            add_bridge("bc")
            self._save_record()
            for c, w in zip(self.clients, wires):
                link(c, w, None, f"{w}a")
                link(w, "bc", f"{w}b", None)
            link("bc", "s1")
        for t in ("bl", "br", "bc"):
            if t in self.nodes:
                self.nodes[t].start([])
        self._save_record()
        self._configure()
        for i, (w, prof) in enumerate(zip(wires, self.links)):
            self._shape(w, prof, self.seed + 2 * i)
        self._save_record()
        if self.competing.get("flows"):
            self._start_bulk()
            self._save_record()

    def exec(self, tag: str, argv: list[str], check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
        return netns.run(["mnexec", "-a", str(self.pid_of(tag)), *argv], check=check, timeout=timeout)

    def _configure(self) -> None:
        endpoints = self.clients + self.servers
        for tag, node in self.nodes.items():
            self.exec(tag, ["sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"])
            self.exec(tag, ["ip", "link", "set", "lo", "up"])
            for intf in node.intfNames():
                if intf == "lo":
                    continue
                self.exec(tag, ["ip", "link", "set", intf, "mtu", str(self.mtu)])
                self._offloads_off(tag, intf)
                self.exec(tag, ["ip", "link", "set", intf, "up"])
        for t in ("bl", "br", "bc"):
            if t in self.nodes:
                self.exec(t, ["ip", "link", "set", self.name(t), "mtu", str(self.mtu)])
        bufs = self.profile.tcp_buffers()
        for tag in endpoints:
            dev = self.nodes[tag].intfNames()[0]
            self.exec(tag, ["ip", "link", "set", dev, "address", self.mac_of(tag)])
            self.exec(tag, ["ip", "addr", "add", f"{self.addr_of(tag)}/24", "dev", dev])
            role = "client" if tag.startswith("c") else "server"
            vals = {"net.ipv4.tcp_no_metrics_save": 1, "net.ipv4.tcp_fastopen": 3, **{f"net.ipv4.{k}": v for k, v in bufs[role].items()}}
            if self.profile.tcp.congestion_control:
                vals["net.ipv4.tcp_congestion_control"] = self.profile.tcp.congestion_control
            self.exec(tag, ["sysctl", "-q", "-w", *[f"{k}={' '.join(map(str, v)) if isinstance(v, (list, tuple)) else v}" for k, v in vals.items()]])
            for peer in endpoints:
                if peer != tag:
                    self.exec(tag, ["ip", "neigh", "replace", self.addr_of(peer), "lladdr", self.mac_of(peer), "dev", dev, "nud", "permanent"])

    def _offloads_off(self, tag: str, dev: str) -> None:
        """As netns.offloads_off: checksum/segmentation/receive offloads off, verified."""
        import re

        cp = self.exec(tag, ["ethtool", "-K", dev, "tx", "off", "rx", "off", "tso", "off", "gso", "off", "gro", "off"], check=False)
        if cp.returncode != 0:
            feats = self.exec(tag, ["ethtool", "-k", dev]).stdout
            for f in ("tx-checksumming", "tcp-segmentation-offload", "generic-segmentation-offload", "generic-receive-offload"):
                m = re.search(rf"^{f}: (on|off)", feats, re.M)
                if m and m.group(1) == "on":
                    raise UserError(f"{self.name(tag)}/{dev}: cannot turn off {f} ({cp.stderr.strip()})", exit_code=1)

    def _shape(self, wire: str, prof: Profile, seed: int) -> None:
        a, b = self.name(f"{wire}a"), self.name(f"{wire}b")
        if self.backend == "netem":
            br = self.name(f"{wire}br")
            self.exec(wire, ["ip", "link", "add", br, "type", "bridge", "stp_state", "0", "forward_delay", "0"])
            self.exec(wire, ["ip", "link", "set", br, "mtu", str(self.mtu)])
            for dev in (a, b):
                self.exec(wire, ["ip", "link", "set", dev, "master", br])
            self.exec(wire, ["ip", "link", "set", br, "up"])
            with_seed = backend_netem.tc_supports_seed()
            for dev, link, s in ((b, prof.up, seed), (a, prof.down, seed + 1)):
                cmd = ["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", "netem",
                       *backend_netem.netem_args(link, seed=s, with_seed=with_seed)]
                self.commands.append(["mnexec", "-a", f"<{wire}>", *cmd])
                self.exec(wire, cmd)  # raises on failure: never silently unshaped
                shown = self.exec(wire, ["tc", "-j", "qdisc", "show", "dev", dev]).stdout
                if '"netem"' not in shown:
                    raise UserError(f"{wire}: the netem qdisc on {dev} is not there after tc accepted it ({shown.strip()[:120]})", exit_code=1)
            return
        stats, ready = self.workdir / f"{wire}-stats.json", self.workdir / f"{wire}-ready.json"
        cmd = ["mnexec", "-a", str(self.pid_of(wire)), str(binary("pqs-linkemu")), "--a", a, "--b", b,
               "--up", backend_userspace.spec(prof.up), "--down", backend_userspace.spec(prof.down),
               "--seed", str(seed), "--stats", str(stats), "--ready-file", str(ready), *self.emulator_args]
        self.commands.append(cmd)
        emu = backend_userspace.Emulator(cmd, self.workdir / wire)
        (self.workdir / wire).mkdir(parents=True, exist_ok=True)
        self.emulators.append(emu)
        emu.start()  # raises when the emulator does not come up: never silently unshaped

    def _start_bulk(self) -> None:
        """Competing bulk TCP flows through the bottleneck: iperf3 from client i to server i
        (direction up) or back (down), for the whole life of the topology."""
        flows = int(self.competing.get("flows", 0))
        down = self.competing.get("direction", "up") == "down"
        for k in range(flows):
            c, s = self.clients[k % len(self.clients)], self.servers[k % len(self.servers)]
            port = 5201 + k
            srv = subprocess.Popen(self.ns_argv(s, ["iperf3", "-s", "-B", self.addr_of(s), "-p", str(port)]),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=_die_with_parent)
            self.bulk.append(srv)
        time.sleep(0.3)
        for k in range(flows):
            c, s = self.clients[k % len(self.clients)], self.servers[k % len(self.servers)]
            argv = ["iperf3", "-c", self.addr_of(s), "-p", str(5201 + k), "-t", "86400", "--connect-timeout", "5000"]
            if down:
                argv.append("-R")
            cl = subprocess.Popen(self.ns_argv(c, argv), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  preexec_fn=_die_with_parent)
            self.bulk.append(cl)
        time.sleep(0.5)
        dead = [p for p in self.bulk if p.poll() is not None]
        if dead:
            raise UserError(f"competing iperf3 flows did not start (exit status {dead[0].returncode})", exit_code=1)

    # --------------------------------------------------------------- runtime --
    def flush_tcp_metrics(self) -> None:
        for t in self.clients + self.servers:
            self.exec(t, ["ip", "tcp_metrics", "flush", "all"], check=False)

    def link_problem(self) -> str | None:
        """Why the topology can no longer carry a cell's traffic, or None: a link emulator died,
        a host's shell (its namespaces) is gone, or a competing bulk flow stopped (the cell would
        measure without the competition it asked for)."""
        if not self._up:
            return None
        for e in self.emulators:
            why = e.died()
            if why:
                return why
        for tag, n in self.nodes.items():
            if not netns.pid_alive(int(n.pid)):
                return f"Mininet host {self.name(tag)} (pid {n.pid}) is gone"
        for p in self.bulk:
            if p.poll() is not None:
                return f"competing iperf3 flow (pid {p.pid}) exited with status {p.returncode}"
        return None

    def counters(self) -> dict[str, Any]:
        """Per shaped link (`w1`, ...): `up`/`down` counters as the single-link topology gives
        them; the first link's are also at the top level (`up`, `down`)."""
        if not self._up:
            return self.final_counters or {}
        out: dict[str, Any] = {}
        for i in range(len(self.links)):
            w = f"w{i + 1}"
            if self.backend == "netem":
                c: dict[str, Any] = {}
                for d, dev in (("up", self.name(f"{w}b")), ("down", self.name(f"{w}a"))):
                    cp = self.exec(w, ["tc", "-s", "-j", "qdisc", "show", "dev", dev], check=False)
                    try:
                        q = next((q for q in json.loads(cp.stdout or "[]") if q.get("kind") == "netem"), {})
                    except json.JSONDecodeError:
                        q = {}
                    c[d] = {"forwarded": q.get("packets", 0), "bytes": q.get("bytes", 0), "dropped": q.get("drops", 0)}
            else:
                st = self.emulators[i].stats() if i < len(self.emulators) else {}
                c = {"up": st.get("up", {}), "down": st.get("down", {}),
                     "emulator": {k: v for k, v in st.items() if k not in ("up", "down")}}
            out[w] = c
        if "w1" in out:
            out.update({k: v for k, v in out["w1"].items()})
        return out

    def describe(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id, "engine": "mininet", "topology": self.kind,
            "backend": self.backend, "backend_requested": self.requested_backend, "backend_reason": self.backend_reason,
            "seed": self.seed, "profile": self.profile.describe(),
            "links": [{"wire": self.name(f"w{i + 1}"), "profile": p.describe(),
                       "spec": {"up": backend_userspace.spec(p.up), "down": backend_userspace.spec(p.down)}
                       if self.backend == "userspace" else None,
                       "applied": backend_netem.applied_profile(p) if self.backend == "netem" else None}
                      for i, p in enumerate(self.links)],
            "hosts": {t: {"name": self.name(t), "addr": self.addr_of(t), "mac": self.mac_of(t)} for t in self.clients + self.servers},
            "nodes": {t: self.name(t) for t in self.nodes},
            "interfaces": list(self.interfaces),
            "addresses": {"client": self.client_addr, "server": self.server_addr, "prefix": 24},
            "competing": self.competing or None,
            "mtu": self.mtu,
            "offloads": "tx rx tso gso gro off on every interface",
            "commands": backend_netem.render_text(self.commands),
            "mininet": "Debian package, Linux bridges in their own namespaces, no controller",
        }


# ------------------------------------------------------------------------ helpers --


def _bridge_class(mn_node):
    class PqsBridge(mn_node.Switch):
        """A Linux bridge made with iproute2 inside the switch's own namespace (Mininet's
        LinuxBridge needs brctl and would live in the host's namespace)."""

        def start(self, _controllers):
            netns.run(["mnexec", "-a", str(self.pid), "ip", "link", "add", self.name, "type", "bridge",
                       "stp_state", "0", "forward_delay", "0"])
            for i in self.intfList():
                if i.name != "lo":
                    netns.run(["mnexec", "-a", str(self.pid), "ip", "link", "set", i.name, "master", self.name])
            netns.run(["mnexec", "-a", str(self.pid), "ip", "link", "set", self.name, "up"])

        def stop(self, deleteIntfs=True):  # noqa: N803 - Mininet's signature
            self.terminate()

        def connected(self):
            return True

    return PqsBridge


def _netns_inode(pid: int, kind: str = "net") -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/{kind}").st_ino
    except OSError:
        return None


def _die_with_parent() -> None:
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
    except Exception:  # noqa: BLE001
        pass


def _netdev_names(pid: int) -> set[str]:
    """Interface names of the network namespace process pid is in (/proc/PID/net/dev)."""
    try:
        lines = Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]
    except OSError:
        return set()
    return {ln.split(":", 1)[0].strip() for ln in lines if ":" in ln}


def remove_leftovers(rec: dict[str, Any]) -> list[str]:
    """Called by netns.remove_run for the records that name it (`removers`), before it kills the
    recorded processes: every process inside one of the run's Mininet hosts, then any recorded
    interface left in the host's namespace.

    A process is inside when its (network, mount) namespace inodes are the pair recorded for one
    node (mnexec gives every host both; two recycled inode numbers matching together is not a
    coincidence that happens), or - for a node without a private mount namespace - its network
    namespace has the recorded inode and shows one of the run's own interface names."""
    removed: list[str] = []
    mn = rec.get("mininet") or {}
    rid = rec.get("run_id")
    ours = {i for i in mn.get("interfaces") or [] if i.startswith(f"pqs-{rid}-")}
    host_net, host_mnt = _netns_inode(1), _netns_inode(1, "mnt")
    pairs, net_only = set(), set()
    for n in (mn.get("nodes") or {}).values():
        net, mnt = n.get("netns_inode"), n.get("mntns_inode")
        if not net or net == host_net:
            continue
        if mnt and mnt != host_mnt:
            pairs.add((net, mnt))
        else:
            net_only.add(net)
    if pairs or net_only:
        me = os.getpid()
        inside = []
        for d in Path("/proc").iterdir():
            if not d.name.isdigit() or int(d.name) == me:
                continue
            pid = int(d.name)
            net = _netns_inode(pid)
            if net is None or (net not in net_only and net not in {p[0] for p in pairs}):
                continue
            if (net, _netns_inode(pid, "mnt")) in pairs or (net in net_only and _netdev_names(pid) & ours):
                inside.append(pid)
        if inside:
            netns.kill_pids(inside)
            removed += [f"process {p} (in a mininet host of run {rid})" for p in inside]
    for intf in sorted(ours):
        if Path("/sys/class/net", intf).exists():
            netns.run(["ip", "link", "del", intf], check=False)
            removed.append(f"interface {intf}")
    return removed
