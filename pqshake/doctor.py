"""`pqshake doctor`: what a run needs, one line per item, each with its fix.

    [ ok ] privileges        root (uid 0)
    [warn] cpu governor      powersave on 2 cpus: timings drift with frequency scaling (fix: ...)
    [FAIL] network namespaces  ... (fix: ...)

Exit status 0 when a run can start (no FAIL line; warnings are for timing quality), 1 otherwise.
Kernel features are tried, not guessed: a scratch namespace `pqs-<id>-doctor` (recorded like
every run's, removed at the end) gets a veth pair, a tbf and an htb qdisc and an AF_PACKET
socket; the netem probe is the one the backends use (`backend.netem_available`). Nothing is
created outside that namespace and no traffic is sent.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from pqshake.errors import UserError
from pqshake.results.jsonl import text_records

OK, WARN, FAIL, INFO = "ok", "warn", "FAIL", "info"
CAP_NET_ADMIN, CAP_SYS_ADMIN, CAP_NET_RAW, CAP_SYS_NICE = 12, 21, 13, 23
BINARIES = ("pqs-server", "pqs-timer", "pqs-linkemu", "pqs-probe", "pqs-speed")
TOOLS = {"ip": "iproute2", "tc": "iproute2", "ethtool": "ethtool", "iperf3": "iperf3"}
DISK_FAIL = 100 << 20  # below this a run cannot start
DISK_WARN = 2 << 30  # a big matrix writes hundreds of MB of JSON lines + parquet


@dataclass
class Item:
    name: str
    status: str  # ok | warn | FAIL | info
    detail: str
    fix: str = ""

    def line(self, width: int = 20) -> str:
        s = f"[{self.status:^4}] {self.name:<{width}} {self.detail}"
        return s + (f" (fix: {self.fix})" if self.fix and self.status != OK else "")


# ----------------------------------------------------------------------------- helpers --


def cap_eff(status_text: str | None = None) -> int:
    """The effective capability mask of this process (/proc/self/status CapEff)."""
    if status_text is None:
        try:
            status_text = Path("/proc/self/status").read_text()
        except OSError:
            return 0
    m = re.search(r"^CapEff:\s*([0-9a-fA-F]+)", status_text, re.M)
    return int(m.group(1), 16) if m else 0


def privileges(uid: int | None = None, caps: int | None = None) -> Item:
    uid = os.geteuid() if uid is None else uid
    caps = cap_eff() if caps is None else caps
    have = {n: bool(caps >> b & 1) for n, b in (("NET_ADMIN", CAP_NET_ADMIN), ("SYS_ADMIN", CAP_SYS_ADMIN),
                                                 ("NET_RAW", CAP_NET_RAW), ("SYS_NICE", CAP_SYS_NICE))}
    missing = [n for n in ("NET_ADMIN", "SYS_ADMIN", "NET_RAW") if not have[n]]
    who = "root (uid 0)" if uid == 0 else f"uid {uid}"
    from pqshake.emulation import rootless

    if uid == 0 and rootless.inside():
        who = f"rootless (uid 0 in a user namespace of host uid {rootless.host_uid()})"
    if not missing:
        extra = "" if have["SYS_NICE"] else "; no CAP_SYS_NICE: the userspace emulator runs without SCHED_FIFO (less accurate timing)"
        return Item("privileges", WARN if extra else OK, f"{who}, CAP_NET_ADMIN + CAP_SYS_ADMIN + CAP_NET_RAW{extra}",
                    "run as root / add --cap-add SYS_NICE to the container" if extra else "")
    if uid != 0:
        ok, detail = rootless.available()
        if ok:
            return Item("privileges", OK, f"{who}, not root: rootless mode ({detail}); 'pqshake run' re-executes "
                        "itself inside them (netem only if sch_netem is loaded on the host, no SCHED_FIFO)")
        return Item("privileges", FAIL, f"{who}, not root, and no rootless mode: {detail}", rootless.how_to_enable())
    fix = ("run as root (sudo)" if uid != 0 else
           "in a container: docker run --cap-add NET_ADMIN --cap-add SYS_ADMIN ... (see docker/README, or make docker-run)")
    return Item("privileges", FAIL, f"{who} without CAP_{', CAP_'.join(missing)} (namespaces, veths and qdiscs need them)", fix)


def _run(argv: list[str], timeout: float = 10) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None


def _first_line(cp: subprocess.CompletedProcess | None) -> str:
    if cp is None:
        return "not runnable"
    text = (cp.stderr or cp.stdout or "").strip().splitlines()
    return text[0] if text else f"exit status {cp.returncode}"


# ------------------------------------------------------------------- kernel features --


def kernel_items(can_root: bool) -> list[Item]:
    """netns, veth, tbf, htb, AF_PACKET in a scratch namespace; netem via the backends' probe."""
    names = ("network namespaces", "veth", "tbf/htb", "AF_PACKET", "netem / backend")
    if not can_root:
        return [Item(n, FAIL, "not checked: needs root / CAP_NET_ADMIN + CAP_SYS_ADMIN", "run 'sudo pqshake doctor'") for n in names]
    from pqshake.emulation import backend, netns

    out: list[Item] = []
    rid = netns.new_run_id()
    ns = f"pqs-{rid}-doctor"
    a, b = f"pqs-{rid}-d0", f"pqs-{rid}-d1"
    try:
        netns.claim_run(rid, namespaces=[ns], purpose="doctor")
    except Exception as e:  # noqa: BLE001 - a doctor reports, it does not crash
        return [Item(names[0], FAIL, f"cannot write the run record: {e}", "check PQS_STATE_DIR / /run is writable")]
    try:
        cp = _run(["ip", "netns", "add", ns])
        if cp is None or cp.returncode != 0:
            out.append(Item("network namespaces", FAIL, f"'ip netns add' fails: {_first_line(cp)}",
                            "root with CAP_SYS_ADMIN; in a container add --cap-add SYS_ADMIN (and apparmor=unconfined on AppArmor hosts)"))
            out += [Item(n, FAIL, "not checked (no namespace)", "fix network namespaces first") for n in names[1:4]]
        else:
            out.append(Item("network namespaces", OK, "ip netns add/exec work"))
            cp = _run(["ip", "-n", ns, "link", "add", a, "type", "veth", "peer", "name", b])
            if cp is None or cp.returncode != 0:
                out.append(Item("veth", FAIL, f"cannot create a veth pair: {_first_line(cp)}", "a kernel with CONFIG_VETH (modprobe veth)"))
            else:
                out.append(Item("veth", OK, "veth pair created"))
                res = []
                for kind, args in (("tbf", ["tbf", "rate", "10mbit", "burst", "32kb", "latency", "50ms"]),
                                   ("htb", ["htb", "default", "1"])):
                    cp = _run(["tc", "-n", ns, "qdisc", "replace", "dev", a, "root", *args])
                    res.append((kind, cp is not None and cp.returncode == 0, _first_line(cp)))
                bad = [f"{k}: {m}" for k, ok, m in res if not ok]
                out.append(Item("tbf/htb", WARN if bad else OK,
                                "; ".join(bad) if bad else "both accepted (rate-only shaping in the kernel)",
                                "modprobe sch_tbf sch_htb (not needed by the userspace backend)" if bad else ""))
            out.append(_af_packet(ns))
        ok, detail = backend.netem_available()
        if ok:
            out.append(Item("netem / backend", OK, f"netem present ({detail}): backend auto = netem"))
        else:
            out.append(Item("netem / backend", OK,
                            f"no netem ({detail}): backend auto = userspace (pqs-linkemu), same profile semantics"))
            out.append(_uml_item())
    finally:
        netns.remove_run({"run_id": rid, "namespaces": [ns]})
    return out


def _af_packet(ns: str) -> Item:
    """Open (and close) an AF_PACKET socket inside the scratch namespace: what pqs-linkemu needs."""
    code = "import socket; socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0).close(); print('ok')"
    cp = _run(["ip", "netns", "exec", ns, os.environ.get("PQS_PYTHON", __import__("sys").executable), "-c", code])
    if cp is not None and cp.returncode == 0 and "ok" in cp.stdout:
        return Item("AF_PACKET", OK, "raw packet sockets open (pqs-linkemu can bridge)")
    return Item("AF_PACKET", FAIL, f"no AF_PACKET socket: {_first_line(cp)}",
                "needs CAP_NET_RAW and a kernel with CONFIG_PACKET (the userspace emulator depends on it)")


# ------------------------------------------------------------------------ the stack --


def stack_item() -> Item:
    from pqshake.paths import REPO, build_dir

    bindir = build_dir() / "bin"
    missing = [b for b in BINARIES if not os.access(bindir / b, os.X_OK)]
    if missing:
        return Item("crypto stack", FAIL, f"not built: {', '.join(missing)} missing in {bindir}", f"make build (in {REPO})")
    cp = _run([str(bindir / "pqs-speed"), "--only", "aead", "--aeads", "AES-128-GCM", "--samples", "3",
               "--min-sample", "100us", "--budget", "1ms"], timeout=20)
    header = {}
    if cp is not None and cp.returncode == 0:
        header = next((rec for rec in text_records(cp.stdout) if rec.get("type") == "header"), {})
    if not header:
        return Item("crypto stack", FAIL, f"pqs-speed gives no header: {_first_line(cp)}", "make build")
    pins = {}
    vf = REPO / "testbed" / "deps" / "versions.env"
    if vf.is_file():
        for line in vf.read_text().splitlines():
            m = re.match(r"^(OPENSSL|LIBOQS)_VERSION=(\S+)", line)
            if m:
                pins[m.group(1).lower()] = m.group(2)
    got = {"openssl": header.get("openssl_version"), "liboqs": header.get("liboqs_version")}
    oqsprov = oqsprovider_build(build_dir())
    detail = (f"OpenSSL {got['openssl']}, liboqs {got['liboqs']}, providers {header.get('providers')}"
              f"{', ' + oqsprov if oqsprov else ''}, pqshake {header.get('pqshake_commit', '?')}")
    off = [f"{k} {got[k]} != pinned {v}" for k, v in pins.items() if got.get(k) and got[k] != v]
    if off:
        return Item("crypto stack", WARN, detail + "; " + "; ".join(off), "make build (rebuilds against the pinned stack)")
    return Item("crypto stack", OK, detail + (" (as pinned)" if pins else ""))


def oqsprovider_build(build: Path) -> str | None:
    """"oqs-provider VERSION + N patches" of the build build/deps.mk names, from its
    PQS-BUILD-INFO (its "patch:" line lists the patches applied to the release, name:sha256
    each), or None when deps.mk or the record is not there (the programs say nothing of it)."""
    mk = _deps_mk(build / "deps.mk")
    if not mk or not mk.get("OQSPROVIDER_PREFIX"):
        return None
    try:
        info = (Path(mk["OQSPROVIDER_PREFIX"]) / "PQS-BUILD-INFO").read_text().splitlines()
    except OSError:
        return None
    first = info[0].split() if info else []
    patches = next((ln.split(":", 1)[1].split() for ln in info if ln.startswith("patch:")), [])
    patches = [p for p in patches if p != "none"]
    ver = first[1] if len(first) > 1 else "?"
    return f"oqs-provider {ver}" + (f" + {len(patches)} patch{'es' if len(patches) != 1 else ''}" if patches else "")


def _deps_mk(path: Path) -> dict[str, str] | None:
    """The NAME := value lines of build/deps.mk (testbed/deps/build-stack.sh writes it), or None."""
    try:
        text = path.read_text()
    except OSError:
        return None
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"^([A-Z][A-Z0-9_]*) :=[ \t]*(.*)$", text, re.M)}


def _home(p: str) -> str:
    home = str(Path.home())
    return "~" + p[len(home):] if p == home or p.startswith(home + "/") else p


def _cached_libs_item(name: str, comps: tuple[tuple[str, str], ...], why: str, note: str,
                      build: Path | None, versions: Path | None, users: str = "the programs link them") -> Item:
    """Static libraries of the pinned stack that every program links: the builds build/deps.mk
    names (COMP_PREFIX), whether the cache has them, their versions against versions.env. A build
    without them is a FAIL; why says what needs them, note what the OK line adds."""
    from pqshake.paths import REPO, build_dir

    fix = f"make deps (in {REPO})"
    labels = ", ".join(label for _, label in comps)
    mk = _deps_mk((build or build_dir()) / "deps.mk")
    if mk is None:
        return Item(name, INFO, f"{labels}: not built (no build/deps.mk)", fix)
    if any(f"{comp}_PREFIX" not in mk for comp, _ in comps):
        return Item(name, FAIL, f"{labels}: not built (build/deps.mk predates them; {users})", fix)
    if any(not mk[f"{comp}_PREFIX"] for comp, _ in comps):
        have = ", ".join(f"{label} {mk.get(f'{comp}_VERSION', '?')}" for comp, label in comps)
        return Item(name, FAIL, f"{have}: not part of this build (an image or build from before {why}; "
                    f"{users})", fix)
    pins: dict[str, str] = {}
    vf = versions or REPO / "testbed" / "deps" / "versions.env"
    if vf.is_file():
        text = vf.read_text()
        pins = {comp: m.group(1) for comp, _ in comps
                if (m := re.search(rf"^{comp}_VERSION=(\S+)", text, re.M))}
    got, absent, off = [], [], []
    for comp, label in comps:
        prefix = mk[f"{comp}_PREFIX"]
        try:
            first = (Path(prefix) / "PQS-BUILD-INFO").read_text().split("\n", 1)[0].split()
        except OSError:
            absent.append(f"{label} {mk.get(f'{comp}_VERSION', '?')} ({_home(prefix)})")
            continue
        ver = first[1] if len(first) > 1 else "?"
        got.append(f"{label} {ver}")
        if comp in pins and ver != pins[comp]:
            off.append(f"{label} {ver} != pinned {pins[comp]}")
    if absent:
        return Item(name, FAIL, f"not in the cache: {', '.join(absent)}" + (f"; cached: {', '.join(got)}" if got else ""), fix)
    cache = _home(str(Path(mk[f"{comps[-1][0]}_PREFIX"]).parent))
    detail = f"{', '.join(got)} (static, cached in {cache}){note}"
    if off:
        return Item(name, WARN, f"{detail}; {'; '.join(off)}", fix)
    return Item(name, OK, detail + (" (as pinned)" if pins else ""))


def bfe_item(build: Path | None = None, versions: Path | None = None) -> Item:
    """relic and bfe-bf, Bloom Filter Encryption's libraries (issue 22); every program links them
    (the mode fs0rtt, testbed/fs0rtt/)."""
    return _cached_libs_item("bfe stack", (("RELIC", "relic"), ("BFE", "bfe-bf")), "the mode fs0rtt",
                             "; pairing-based, not post-quantum", build, versions)


def ngtcp2_item(build: Path | None = None, versions: Path | None = None) -> Item:
    """ngtcp2, the second QUIC engine (issue 23, --quic-engine ngtcp2); every program links it."""
    return _cached_libs_item("quic engines", (("NGTCP2", "ngtcp2"),), "the QUIC engine ngtcp2",
                             "; beside OpenSSL's own QUIC", build, versions)


def tls_stacks_item(build: Path | None = None, versions: Path | None = None) -> Item:
    """s2n-tls on AWS-LC, the second TLS stack (issue 33): built beside OpenSSL (AWS-LC's
    symbols prefixed); its interop test links it, the programs do not yet."""
    return _cached_libs_item("tls stacks", (("AWSLC", "AWS-LC"), ("S2N", "s2n-tls")), "the second TLS stack",
                             "; beside OpenSSL, symbols prefixed (make check: test_s2n_stack)", build, versions,
                             users="make check's test_s2n_stack links them")


def tools_item() -> Item:
    missing, found = [], []
    for t, pkg in TOOLS.items():
        p = shutil.which(t)
        if p is None:
            missing.append((t, pkg))
            continue
        ver = ""
        if t == "ip":
            ver = _first_line(_run(["ip", "-V"])).replace("ip utility, ", "")
        elif t == "iperf3":
            ver = _first_line(_run(["iperf3", "--version"])).split(" (")[0]
        found.append(f"{t}{' ' + ver if ver else ''}")
    if missing:
        pkgs = sorted({p for _, p in missing})
        return Item("tools", FAIL, f"missing: {', '.join(t for t, _ in missing)}",
                    f"apt-get install {' '.join(pkgs)} (make system)")
    return Item("tools", OK, ", ".join(found))


def mininet_item() -> Item:
    from pqshake.emulation import mininet_env

    ok, detail = mininet_env.available()
    if ok:
        return Item("mininet", OK, f"{detail} (engine: mininet usable)")
    return Item("mininet", INFO, f"{detail}; only experiments with engine: mininet need it", "apt-get install mininet (make system)")


def disk_item(root: Path | None = None) -> Item:
    if root is None:
        from pqshake.results.layout import default_results_root

        root = default_results_root()
    probe = Path(root)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        free = shutil.disk_usage(probe).free
    except OSError as e:
        return Item("disk for results", FAIL, f"{root}: {e.strerror or e}", "set PQS_RESULTS to a writable directory")
    gib = free / (1 << 30)
    if not os.access(probe, os.W_OK):
        return Item("disk for results", FAIL, f"{probe} is not writable", "set PQS_RESULTS or pqshake run --out DIR")
    if free < DISK_FAIL:
        return Item("disk for results", FAIL, f"{gib:.2f} GiB free under {root}", "free space or pqshake run --out DIR elsewhere")
    if free < DISK_WARN:
        return Item("disk for results", WARN, f"{gib:.2f} GiB free under {root} (large matrices write GBs)",
                    "free space or pqshake run --out DIR elsewhere")
    return Item("disk for results", OK, f"{gib:.1f} GiB free under {root}")


def cpu_item(sysfs: Path = Path("/sys/devices/system/cpu")) -> Item:
    govs: dict[str, int] = {}
    for g in sorted(sysfs.glob("cpu[0-9]*/cpufreq/scaling_governor")):
        try:
            v = g.read_text().strip()
        except OSError:
            continue
        govs[v] = govs.get(v, 0) + 1
    ncpu = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    boost = None
    for p in (sysfs / "cpufreq" / "boost", sysfs / "intel_pstate" / "no_turbo"):
        try:
            val = p.read_text().strip()
        except OSError:
            continue
        boost = (val == "1") if p.name == "boost" else (val == "0")
    if not govs:
        return Item("cpu frequency", INFO, f"{ncpu} usable cpus; no cpufreq in sysfs (a VM or fixed clock): "
                    "scaling cannot be checked; share the machine with nobody while timing")
    detail = ", ".join(f"{g} on {n} cpu{'s' if n > 1 else ''}" for g, n in govs.items())
    notes = []
    if set(govs) != {"performance"}:
        notes.append("the clock follows the load: handshake timings drift")
    if boost:
        notes.append("turbo/boost on: timings depend on temperature")
    if notes:
        return Item("cpu frequency", WARN, f"{detail}; {'; '.join(notes)} ({ncpu} usable cpus)",
                    "cpupower frequency-set -g performance (and disable boost) for timing work")
    return Item("cpu frequency", OK, f"{detail} ({ncpu} usable cpus)")


def placement_item() -> Item:
    """Can the link emulator get CPUs of its own (emulation/placement.py)?"""
    import shutil

    from pqshake.emulation import placement

    pl = placement.plan("auto", "userspace")
    if not pl.active:
        return Item("cpu placement", WARN, f"{pl.note}: the emulator's real-time workers share the CPUs with the "
                    "crypto being timed", "a machine (or VM) with at least 2 CPUs")
    if shutil.which("taskset") is None:
        return Item("cpu placement", FAIL, "taskset not found (it pins the emulator and the endpoints)",
                    "apt-get install util-linux")
    return Item("cpu placement", OK, f"userspace backend: {pl.describe()}; netem: not possible (kernel softirq)")


def leftovers_item() -> Item:
    from pqshake.emulation import clean, netns

    try:
        dead = [r for r in netns.read_records() if not r.get("persistent") and not netns.record_live(r)]
        kept = [r["run_id"] for r in netns.read_records() if r.get("persistent")]
        # Not root: the host's /run/netns is not ours (rootless runs keep theirs private).
        foreign = clean.unrecorded() if os.geteuid() == 0 else []
    except OSError as e:
        return Item("leftovers", WARN, f"cannot read the run records: {e}", "check PQS_STATE_DIR")
    parts = []
    if dead:
        what = sum(len(r.get("namespaces", [])) + len(r.get("processes", [])) + len(r.get("links", [])) for r in dead)
        parts.append(f"{len(dead)} dead run{'s' if len(dead) > 1 else ''} ({', '.join(r['run_id'] for r in dead[:5])}) "
                     f"left {what} namespaces/processes/links")
    if foreign:
        parts.append(f"pqs- namespaces no record lists: {', '.join(foreign[:5])}")
    if kept:
        parts.append(f"kept by net up: {', '.join(kept)}")
    if dead:
        return Item("leftovers", WARN, "; ".join(parts), "pqshake clean")
    if foreign:
        return Item("leftovers", WARN, "; ".join(parts), "not ours to remove: check them, then 'ip netns del NAME'")
    return Item("leftovers", OK if not kept else INFO, "; ".join(parts) or "none", "pqshake net down --id ID" if kept else "")


def _uml_item() -> Item:
    """Where the kernel lacks netem, the netem backend can still run inside user-mode Linux."""
    from pqshake.emulation import uml

    try:
        k = uml.kernel_info()
    except UserError as e:
        return Item("netem in UML", INFO, f"not available: {e}", "only needed to run the netem backend on this machine")
    return Item("netem in UML", INFO, f"user-mode Linux {k['version']} ({k['origin']}): "
                "'pqshake uml run -- CMD' runs CMD with netem (make test does for the netem tests)")


# ----------------------------------------------------------------------------- run --


def rootless_kernel_items() -> list[Item]:
    """Not root: the kernel checks, run where `pqshake run` would run (a rootless namespace)."""
    import sys

    from pqshake.emulation import rootless

    cmd = rootless.wrap([sys.executable, "-m", "pqshake.cli", "doctor", "--json", "--kernel-only"])
    try:
        cp = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=rootless.env())
    except (OSError, subprocess.TimeoutExpired) as e:
        return [Item("network namespaces", FAIL, f"rootless check failed: {e}", rootless.how_to_enable())]
    items = []
    for line in cp.stdout.splitlines():
        try:
            items.append(Item(**json.loads(line)))
        except (json.JSONDecodeError, TypeError):
            continue
    if not items:
        return [Item("network namespaces", FAIL, f"rootless check gave nothing: {_first_line(cp)}", rootless.how_to_enable())]
    return items


def run_checks() -> list[Item]:
    from pqshake.emulation import rootless

    items: list[Item] = []
    priv = privileges()
    items.append(priv)
    if os.geteuid() != 0 and priv.status != FAIL and not rootless.inside():
        items += rootless_kernel_items()
    else:
        items += kernel_items(priv.status != FAIL)
    checks: list[Callable[[], Item]] = [stack_item, bfe_item, ngtcp2_item, tls_stacks_item, tools_item, mininet_item, disk_item, cpu_item, placement_item,
                                        leftovers_item]
    for fn in checks:
        try:
            items.append(fn())
        except Exception as e:  # noqa: BLE001
            items.append(Item(fn.__name__.replace("_item", ""), FAIL, f"check crashed: {type(e).__name__}: {e}", "report this"))
    return items


def exit_code(items: list[Item]) -> int:
    return 1 if any(i.status == FAIL for i in items) else 0


def render(items: list[Item]) -> str:
    width = max(len(i.name) for i in items)
    lines = [i.line(width) for i in items]
    rc = exit_code(items)
    nwarn = sum(i.status == WARN for i in items)
    lines.append("doctor: a run can start" + (f" ({nwarn} warning{'s' if nwarn != 1 else ''})" if nwarn else "")
                 if rc == 0 else "doctor: a run cannot start: fix the FAIL lines above")
    return "\n".join(lines)


def register(app) -> None:
    import typer

    @app.command("doctor")
    def doctor(as_json: bool = typer.Option(False, "--json", help="one JSON object per item"),
               kernel_only: bool = typer.Option(False, "--kernel-only", hidden=True,
                                                help="only the kernel checks (what a non-root doctor runs rootless)")) -> int:
        """Check what a run needs (privileges, kernel features, backend, stack, tools, disk, CPU,
        leftovers); one line per item with its fix. Exit 0 when a run can start. Not root: says
        whether the rootless mode (user namespaces) is possible and checks the kernel inside one."""
        items = kernel_items(privileges().status != FAIL) if kernel_only else run_checks()
        if as_json:
            for i in items:
                print(json.dumps(asdict(i)), flush=True)
        else:
            print(render(items), flush=True)
        rc = exit_code(items)
        if rc:
            raise typer.Exit(rc)
        return 0
