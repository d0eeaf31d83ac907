"""From an experiment file to an ordered list of cells (group x sig x profile x mode x
transport x repetition, minus exclusions), with a duration estimate from the handshake model.

Everything here runs before any network is touched: unknown profiles, groups, signature
algorithms and groups the built stack does not offer are refused here, with the closest names.
"""

from __future__ import annotations

import difflib
import itertools
import json
import os
import random
import re
import secrets
import subprocess
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel

from pqshake.errors import UserError
from pqshake.registry import load_registry

from pqshake.rows import axes as A
from pqshake.rows import bounds
from pqshake.rows import handshake_model as hm
from pqshake.rows import modes as M
from pqshake.rows import transports as T
from pqshake.rows.axes import core as C
from pqshake.rows.modes import fs0rtt as FS
from pqshake.rows.profile import profile_figures  # noqa: F401 (the runner's modules import it from here)

from . import feasibility
from .model import SEED_MAX, ExperimentFile, load_experiment

# What a run costs besides its handshakes (seconds). Measured on a quiet 2-vCPU VM (8-10 % steal)
# with the run's CPU wake-up request held (cpu_wakeup: held, the default; the program starts were
# 2-3x slower without it and under a load average of 3.7, when these were first measured):
# runs of 1 cell and of 3 profiles x 1 cell (the run's fixed part and a link's), of 16 cells
# one timer each and of the same 16 cells two timers each (a cell's and a block's), each cell's
# wall time from its DONE, its attempts from the timer's monotonic stamps. The estimate is a sum
# of these per run, per profile's link, per cell and per block, so the same pieces price a part
# of a run (a shard, a slot) as they price the whole.
RUN_FIXED_S = 1.0  # the runner's start (imports, plan, run folder, provenance) and end (tables, meta)
PROFILE_SETUP_S = 0.17  # namespaces and emulator up and torn down; the check's probes apart
CELL_SETUP_S = 0.08  # pqs-server up with its chain, ready; closing: server stop, validity, DONE
BLOCK_S = 0.09  # a pqs-timer: exec, providers, set-up, its exit seen and counted
PROBE_START_S = 0.025  # the pqs-probe server and client processes of one RTT measurement
# What of those occupies a CPU (slots.py packs links side by side by it; the rest is processes
# starting and being waited for). The program starts, with wake-ups held, are mostly CPU: the
# runner's process tree over the 16-cell run took 5.2 s of CPU in 14.4 s, of which the
# handshakes (client and server cpu_ns) 1.1 s and the run's fixed part 1.5 s, leaving about
# 0.12 s per cell of its programs' 0.17 s. A link's set-up: 0.06 s of CPU (/proc/stat over the
# slots bench's far cells, 21 more links with slots than without).
PROGRAMS_CPU_SHARE = 0.7
PROFILE_SETUP_CPU_S = 0.06
CHECK_PROBES = 100  # RTT probes per profile when its link comes up
# The most cells one plan (and so one run, or one run's shards together) may have. The plan holds
# every cell in memory and prices each (a 100,000-cell plan: about 5 s and 300 MB here); 200,000
# keeps a plan within seconds and under a gigabyte, and is far beyond any shipped experiment (the
# largest has a few hundred cells) and any run one machine finishes: at about 1 s per cell, 200,000
# cells are two days. Checked while the cells are built, so a file of millions is refused at once
# instead of filling the memory (a 1.35 M-cell matrix took 2.1 GB before).
CELL_CAP = 200_000
# A list of values shown to the user (not data: --cells and plan.json keep every value) is shortened
# beyond this many: its first ones, '…', its last, and the count.
SHOWN_VALUES = 12


@dataclass(frozen=True)
class Cell:
    cell_id: str
    profile: str
    group: str
    sig: str
    mode: str
    repetition: int
    transport: str = T.DEFAULT
    # The values of the swept settings that change this cell (pqshake/rows/axes/), in the rows'
    # order: each in its id and a column of its rows in the run's tables.
    settings: tuple[tuple[str, Any], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        del d["settings"]
        return {**d, **{A.column(k): v for k, v in self.settings}}

    @property
    def values(self) -> dict[str, str]:
        """Its value of each matrix axis (pqshake/rows/axes/core.py), by key."""
        return {a.key: getattr(self, a.key) for a in C.CORE}

    @classmethod
    def of(cls, values: dict[str, str], repetition: int, settings: tuple[tuple[str, Any], ...] = ()) -> "Cell":
        """The cell with these axis values, repetition and swept settings, and its id."""
        return cls(A.cell_id(values, repetition, settings), repetition=repetition, settings=settings, **values)


def cell_id(profile: str, group: str, sig: str, mode: str, repetition: int, transport: str = T.DEFAULT,
            settings: tuple[tuple[str, Any], ...] = ()) -> str:
    """Stable across runs and resumes (does not depend on the order): the matrix axes' parts
    (pqshake/rows/axes/core.py: <profile>__<group>__<sig>__<mode>, and __<transport> for any but
    tcp, whose cells keep the ids they had before transports existed), one part per swept setting
    that changes the cell (__chain2), then __r<repetition>."""
    return Cell.of({"profile": profile, "group": group, "sig": sig, "mode": mode, "transport": transport}, repetition,
                   settings).cell_id


def id_profile(cell_id_: str) -> str:
    """The profile field of a cell id (as cell_id slugs it): cells sharing it share a link."""
    return cell_id_.split("__", 1)[0]


# ---------------------------------------------------------------------------------------------
# Profiles


def rates_text(f: dict[str, Any]) -> str:
    """A profile's rates as `pqshake plan` shows them, each direction its own: 'up 10 / down
    0.064 Mbit/s', 'unlimited' when neither has a limit."""
    up, down = f["rate_bps_up"], f["rate_bps_down"]
    if not up and not down:
        return "rate unlimited"
    one = lambda r: f"{r / 1e6:g}" if r else "unlimited"  # noqa: E731
    return f"rate {one(up)} Mbit/s" if up == down else f"rate up {one(up)} / down {one(down)} Mbit/s"


def resolve_profiles(ef: ExperimentFile) -> dict[str, Any]:
    """name -> Profile, in the order the experiment lists them. Entries: a library name, a
    glob over library names ('paquin-*'), a path (relative to the experiment file; 'f.yaml#name'
    for one of several), or an inline mapping."""
    return _resolve_entries(ef, ef.model.profiles, ("profiles",))


def _resolve_entries(ef: ExperimentFile, entries: list, loc: tuple, unique: bool = True) -> dict[str, Any]:
    """Profile entries at location `loc` of the experiment (('profiles',) or ('topology',
    'hops')) -> name -> Profile. With unique=False (chain hops) a profile may repeat: the keys
    are then '<index>:<name>'."""
    import fnmatch

    from pqshake.emulation.profiles import Profile, library, load_profile

    out: dict[str, Any] = {}
    src = ef.key_doc.get(loc[0])
    source = src.source if src else str(ef.path)
    label = "".join(loc[:1]) + "".join(f".{x}" for x in loc[1:])

    def add(prof: Any, line: int, i: int) -> None:
        key = prof.name if unique else f"{len(out)}:{prof.name}"
        if key in out:
            raise UserError(f"{source}:{line} {label}[{i}]: profile '{prof.name}' is listed twice (keep one)")
        out[key] = prof

    for i, entry in enumerate(entries):
        line = src.line_of((*loc, i)) if src else 1
        if isinstance(entry, dict):
            add(Profile.from_mapping(entry, source=source, line=line,
                                     lines=src.lines if src else None, loc_prefix=(*loc, i)), line, i)
            continue
        try:
            if any(ch in entry for ch in "*?[") and "/" not in entry:
                lib = library()
                names = sorted((n for n in lib if fnmatch.fnmatchcase(n, entry)), key=_natural)
                if not names:
                    raise UserError(f"no library profile matches '{entry}' (list them with 'pqshake net profiles')")
                for n in names:
                    add(lib[n], line, i)
                continue
            ref = entry
            base = entry.split("#", 1)[0]
            if (base.endswith((".yaml", ".yml")) or "/" in base) and not Path(base).is_absolute():
                cand = ef.path.parent / base
                if cand.exists():
                    ref = str(cand) + (entry[len(base):])
            add(load_profile(ref), line, i)
        except UserError as e:
            msg = str(e)
            if not msg.startswith(source):
                msg = f"{source}:{line} {label}[{i}]: {msg}"
            raise UserError(msg, e.exit_code) from None
    return out


def _natural(s: str) -> list:
    return [float(t) if re.fullmatch(r"\d+(\.\d+)?", t) else t for t in re.split(r"(\d+(?:\.\d+)?)", s)]


# ---------------------------------------------------------------------------------------------
# What the built stack offers


def _openssl_binary() -> Path | None:
    from pqshake.paths import build_dir

    deps = build_dir() / "deps.mk"
    if deps.is_file():
        for line in deps.read_text().splitlines():
            m = re.match(r"^\s*OPENSSL_PREFIX\s*:?=\s*(\S+)", line)
            if m:
                p = Path(m.group(1)) / "bin" / "openssl"
                if os.access(p, os.X_OK):
                    return p
    return None


@lru_cache(maxsize=1)
def offered_groups() -> tuple[frozenset[str], str]:
    """(groups the built stack offers for TLS 1.3, where that answer came from). Asks the
    built timer (`pqs-timer --list-groups`), else the pinned OpenSSL's `openssl list`.
    An empty set means the stack is not built (the caller decides what that means)."""
    from pqshake.paths import build_dir

    timer = build_dir() / "bin" / "pqs-timer"
    if os.access(timer, os.X_OK):
        try:
            r = subprocess.run([str(timer), "--list-groups"], capture_output=True, text=True, timeout=20)
            if r.returncode == 0 and r.stdout.strip():
                names = _parse_group_listing(r.stdout)
                if names:
                    return frozenset(names), f"{timer} --list-groups"
        except (OSError, subprocess.TimeoutExpired):
            pass
    ossl = _openssl_binary()
    if ossl is not None:
        for args in (["list", "-tls1_3", "-tls-groups"], ["list", "-tls-groups"]):
            try:
                r = subprocess.run([str(ossl), *args], capture_output=True, text=True, timeout=20)
            except (OSError, subprocess.TimeoutExpired):
                continue
            if r.returncode == 0 and r.stdout.strip():
                return frozenset(_parse_group_listing(r.stdout)), f"{ossl} {' '.join(args)}"
    return frozenset(), ""


def _parse_group_listing(text: str) -> list[str]:
    text = text.strip()
    if text.startswith("{") or text.startswith("["):
        try:
            data = json.loads(text.splitlines()[0] if text.startswith("{") and "\n" in text else text)
        except json.JSONDecodeError:
            data = None
        if isinstance(data, dict):
            data = data.get("groups", [])
        if isinstance(data, list):
            return [g["name"] if isinstance(g, dict) else str(g) for g in data]
    names: list[str] = []
    for line in text.splitlines():
        if "\t" in line:  # pqs-timer --list-groups: name, tab, the provider implementing it
            line = line.split("\t", 1)[0]
        for tok in re.split(r"[:,\s]+", line.strip()):
            if tok and re.match(r"^[A-Za-z0-9_.-]+$", tok):
                names.append(tok)
    return names


def check_offered(groups: list[str], where: str) -> str | None:
    """Refuse groups the built stack does not offer. Returns a note when the stack is not
    built (nothing to check against), None when every group is offered."""
    offered, source = offered_groups()
    if not offered:
        return "the crypto stack is not built yet (make build): groups not checked against it"
    lower = {o.lower(): o for o in offered}
    for g in groups:
        if g in offered or g.lower() in lower:
            continue
        close = difflib.get_close_matches(g, sorted(offered), n=3, cutoff=0.4)
        hint = f"closest offered: {', '.join(close)}" if close else f"offered: {', '.join(sorted(offered))}"
        raise UserError(f"{where}: group '{g}' is not offered by the built stack ({source}); {hint}")
    return None


# ---------------------------------------------------------------------------------------------
# Estimates


class Estimate(float):
    """A duration in seconds (a float wherever one is expected) that also says how much of it
    is the emulated link's waiting (wait_s): propagation, serialization, loss recovery, probe
    spacing. The machine's load does not stretch that part; it stretches the rest (CPU,
    program starts), so the progress ETA scales only the rest by the pace it observes. Of the
    rest, cpu_s occupies a CPU (default: all of it); slots.py packs links by it."""

    wait_s: float
    cpu_s: float

    def __new__(cls, total: float, wait_s: float = 0.0, cpu_s: float | None = None) -> "Estimate":
        e = super().__new__(cls, total)
        e.wait_s = float(wait_s)
        e.cpu_s = float(total) - e.wait_s if cpu_s is None else float(cpu_s)
        return e


def _cpu_of(x: float) -> float:
    return float(getattr(x, "cpu_s", float(x) - getattr(x, "wait_s", 0.0)))


def add(*parts: float) -> Estimate:
    """The sum of estimates, with the sum of their waits and CPU (a plain float is all CPU)."""
    waits, cpus = [], []
    for x in parts:  # one pass (a plan sums each of its cells' parts several times); the same sums
        if type(x) is Estimate:
            waits.append(x.wait_s)
            cpus.append(x.cpu_s)
        else:
            waits.append(getattr(x, "wait_s", 0.0))
            cpus.append(_cpu_of(x))
    return Estimate(sum(parts), sum(waits), sum(cpus))


def values_text(values: list[Any], show: Callable[[Any], str] = str, most: int = SHOWN_VALUES) -> str:
    """A list of values as the user reads it: all of them up to `most`, else the first ones, '…',
    the last and the count ('0, 1, 2, 3, 4, 5, … 39,999 (40,000 values)'), so a 40,000-value sweep
    is one short line instead of 270 kB. Data (--cells, plan.json) keeps every value."""
    values = list(values)
    if len(values) <= most:
        return ", ".join(show(v) for v in values)
    last = show(values[-1])
    if isinstance(values[-1], int) and not isinstance(values[-1], bool):
        last = f"{values[-1]:,}"
    return f"{', '.join(show(v) for v in values[:most // 2])}, … {last} ({len(values):,} values)"


# ---------------------------------------------------------------------------------------------
# RTT probes (emulation/check.py measure_rtt): their wall time


def probes_s(profile: Any, count: int) -> Estimate:
    """One RTT measurement of `count` probes: paced at the profile's probe interval (wider
    under jitter or a slow rate), the last answer one RTT later, and when a probe is lost
    pqs-probe waits out its timeout (as run_probe sets it) instead."""
    if not count:
        return Estimate(0.0)
    from pqshake.emulation.check import expected_roundtrip_loss, probe_interval_us, probe_timeout_ms

    up, down = profile.up, profile.down
    rtt = (up.delay_ns + down.delay_ns) / 1e9
    timeout = probe_timeout_ms(profile) / 1e3
    p_lost = 1 - (1 - expected_roundtrip_loss(profile)) ** count
    wait = count * probe_interval_us(profile) / 1e6 + (1 - p_lost) * rtt + p_lost * timeout
    return Estimate(PROBE_START_S + wait, wait, PROGRAMS_CPU_SHARE * PROBE_START_S)


# ---------------------------------------------------------------------------------------------
# The plan


def _per_cell(fn: Callable) -> Callable:
    """A Plan method of one cell computed once per kind of cell: its value depends on the cell's
    axes and settings, not on its repetition or id, nor on the cells around it. The plan's
    estimate, its slots and shards ask each cell's several times (a 36,000-cell plan took 38 s,
    most of it the handshake model again for the same cell)."""
    import functools

    @functools.wraps(fn)
    def memo(self: "Plan", c: Cell) -> Any:
        key = (fn.__name__, *_kind(c))
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = fn(self, c)
        return hit

    return memo


def _kind(c: Cell) -> tuple:
    """What _per_cell's values depend on: the cell without its repetition and id."""
    return (c.profile, c.group, c.sig, c.mode, c.transport, c.settings)


# A plan with at least this many kinds of cell prices them on two CPUs (Plan.price_in_parallel):
# a 100,000-cell plan spent about 6 of its 10 s in the handshake model, one cell after another.
PARALLEL_PRICING_MIN = 20_000
_PRICING: "Plan | None" = None  # the plan a forked pricing worker reads (inherited, not sent)
_PRICING_KINDS: list[Cell] = []  # one cell per kind, the workers' shares cut from it


def _price(share: tuple[int, int]) -> list[tuple[float, float, float] | None]:
    """A forked worker's share (every `step`-th of the kinds from `first`: indices, so no cell
    is pickled): each cell's attempt estimate as (total, wait, cpu), or None where the model
    raised (the parent prices that cell again and raises as it would have)."""
    first, step = share
    out: list[tuple[float, float, float] | None] = []
    for c in _PRICING_KINDS[first::step]:
        try:
            e = _PRICING.attempt_estimate_s(c)
            out.append((float(e), e.wait_s, e.cpu_s))
        except Exception:  # noqa: BLE001 - the parent's own call reports it
            out.append(None)
    return out


@dataclass
class Plan:
    experiment: ExperimentFile
    groups: list[str]
    sigs: list[str]
    profiles: dict[str, Any]
    cells: list[Cell]
    seed: int
    excluded: int
    notes: list[str] = field(default_factory=list)
    hops: list[Any] = field(default_factory=list)  # engine: mininet, kind: chain: one profile per hop
    capture_rules: list[Any] | None = None  # capture_cells, expanded (None: every cell, with capture: true)
    _memo: dict = field(default_factory=dict, repr=False, compare=False)  # _per_cell's

    def captures(self, c: Cell) -> bool:
        """capture: true and, with capture_cells, the cell matches one of its rules."""
        if not self.model.capture:
            return False
        return self.capture_rules is None or any(cell_matches(r, c, self.model) for r in self.capture_rules)

    @property
    def model(self):
        return self.experiment.model

    def axis_values(self, key: str) -> list[str]:
        """A matrix axis's values in this plan (pqshake/rows/axes/core.py): the resolved profiles,
        the expanded groups and sigs, the file's modes and transports."""
        a = C.get(key)
        if a.link:
            return list(self.profiles)
        return list(getattr(self, a.field) if a.algorithms else getattr(self.model, a.field))

    def profile_blocks(self) -> list[tuple[str, list[Cell]]]:
        """Consecutive runs of cells sharing a profile (one topology each)."""
        out: list[tuple[str, list[Cell]]] = []
        for c in self.cells:
            if out and out[-1][0] == c.profile:
                out[-1][1].append(c)
            else:
                out.append((c.profile, [c]))
        return out

    def attempts_per_cell(self) -> int:
        hit = self._memo.get("attempts_per_cell")  # the model's alone: once, not per cell
        if hit is None:
            from .sampling import Target

            # samples: auto: the planner's expectation between min and max (sampling.Target.expected)
            hit = self._memo["attempts_per_cell"] = int(round(Target.of(self.model).expected())) + self.model.warmup
        return hit

    def blocks_per_cell(self) -> int:
        """pqs-timer runs per cell: one, or one per `block` attempts (interleaved order,
        samples: auto), as experiments/cell.py splits them."""
        import math

        from .sampling import Target, block_size

        hit = self._memo.get("blocks_per_cell")  # the model's alone: once, not per cell
        if hit is None:
            size = block_size(self.model)
            hit = self._memo["blocks_per_cell"] = max(1, math.ceil(Target.of(self.model).expected() / size)) if size else 1
        return hit

    def kinds(self) -> list[Cell]:
        """One cell per kind (the cell without its repetition and id), in the plan's order: what
        every per-kind judgement walks (pricing, feasibility and its test)."""
        kinds: dict[tuple, Cell] = {}
        for c in self.cells:
            kinds.setdefault(_kind(c), c)
        return list(kinds.values())

    def price_in_parallel(self, workers: int = 2) -> int:
        """Each kind of cell's attempt estimate worked out by `workers` forked processes into the
        plan's memo (the same function on the same inputs: the same floats), when the plan has
        PARALLEL_PRICING_MIN kinds or more and this process may use as many CPUs; the number of
        kinds priced so (0: none, the plan prices its cells as it asks for them)."""
        import multiprocessing as mp

        global _PRICING, _PRICING_KINDS
        kinds = self.kinds()
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        if len(kinds) < PARALLEL_PRICING_MIN or cpus < workers or "fork" not in mp.get_all_start_methods():
            return 0
        cells = _PRICING_KINDS = kinds
        _PRICING = self
        try:
            with mp.get_context("fork").Pool(workers) as pool:
                priced = pool.map(_price, [(i, workers) for i in range(workers)])
        except (OSError, AssertionError):  # no fork here (a daemonic process, no resources): one by one
            return 0
        finally:
            _PRICING, _PRICING_KINDS = None, []
        n = 0
        for i, values in enumerate(priced):
            for c, v in zip(cells[i::workers], values):
                if v is not None:
                    self._memo[("attempt_estimate_s", *_kind(c))] = Estimate(*v)
                    n += 1
        return n

    @_per_cell
    def attempt_estimate_s(self, c: Cell) -> Estimate:
        """One attempt of the cell (bounds.expected_attempt_parts on its profile's figures)."""
        m = self._view(c)
        f = self._figures(c.profile)
        losses = [x for x in (f["loss_up"], f["loss_down"]) if x]
        reg = load_registry()
        tr = T.get(c.transport)
        # The response's body after its first byte, where the transport carries one (a
        # handshake-only one, QUIC, has none): the timer reads all of it.
        body = m.response_bytes if not tr.handshake_only else 0
        # Each direction at its own rate (0 = unlimited): a slow downlink is not hidden behind a
        # fast uplink.
        wait, work = bounds.expected_attempt_parts(
            bounds.BoundCell.on_profile(c, f, registry=reg, **self._bound_kwargs(c, m)),
            loss=max(losses) if losses else 0.0, response=m.response_bytes > 0, response_body=body)
        # what the cell's implementation adds to the bound (OpenSSL's QUIC client and a long
        # ClientHello: up to a second); the bound itself stays a bound
        wait += tr.engine_extra_s(f["rtt_ns"] / 1e9, hm.sizes_for(c.group, c.sig, reg), m, c.mode)
        return Estimate(wait + work, wait)

    def _view(self, c: Cell) -> Any:
        """The experiment as the cell sees it (model.for_cell), once per combination of settings."""
        key = ("view", c.settings)
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = self.model.for_cell(c)
        return hit

    def _figures(self, profile: str) -> dict[str, Any]:
        """profile_figures of one of the plan's profiles (once per profile, not per cell)."""
        key = ("figures", profile)
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = profile_figures(self.profiles[profile])
        return hit

    def _bound_kwargs(self, c: Cell, view: Any) -> dict[str, Any]:
        """axes.bound_kwargs of the cell's view of the experiment: it depends on the cell's swept
        settings alone (once per combination of them, not per cell)."""
        key = ("bound_kwargs", c.settings)
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = A.bound_kwargs(view)
        return hit

    def _probes_s(self, profile: str, count: int) -> Estimate:
        """probes_s of one of the plan's profiles (once per profile and count)."""
        key = ("probes", profile, count)
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = probes_s(self.profiles[profile], count)
        return hit

    @_per_cell
    def cell_parts_s(self, c: Cell) -> dict[str, Estimate]:
        """The cell's wall time by what it is spent on: its attempts (handshakes), its RTT
        probes, and its programs (the server, one timer per block)."""
        m = self.model
        attempts = self.attempts_per_cell()
        if M.resumable(c.mode):
            attempts += 1  # the priming full handshake
        one = self.attempt_estimate_s(c)
        k = attempts / max(1, min(m.concurrency, attempts))
        programs = CELL_SETUP_S + self.blocks_per_cell() * BLOCK_S
        return {"handshakes": Estimate(k * one, k * one.wait_s),
                "probes": self._probes_s(c.profile, m.rtt_probes),
                "programs": Estimate(programs, 0.0, PROGRAMS_CPU_SHARE * programs)}

    @_per_cell
    def cell_estimate_s(self, c: Cell) -> Estimate:
        return add(*self.cell_parts_s(c).values())

    def profile_setup_s(self, name: str) -> Estimate:
        """Bringing a profile's link up, checking it (CHECK_PROBES probes) and tearing it down."""
        return add(Estimate(PROFILE_SETUP_S, 0.0, PROFILE_SETUP_CPU_S), probes_s(self.profiles[name], CHECK_PROBES))

    def bfe_key(self, cells: list[Cell] | None = None) -> dict[str, Any] | None:
        """fs0rtt cells' BFE key: its parameters, whether the cache has it, and if not the key
        generation the run starts with (pqshake/rows/modes/fs0rtt.py)."""
        cells = self.cells if cells is None else cells
        if not any(M.get(c.mode).bfe_key for c in cells):
            return None
        from pqshake.paths import build_dir

        m = self.model
        have = FS.cached(m.bfe_n, m.bfe_p, build_dir())
        return {"n": m.bfe_n, "p": m.bfe_p, "slots": FS.slots(m.bfe_n, m.bfe_p), "cached": have,
                "keygen_estimate_s": 0.0 if have else round(FS.keygen_estimate_s(m.bfe_n, m.bfe_p), 1)}

    def estimate_parts_s(self, cells: list[Cell] | None = None, keygen: bool = True,
                         fixed: bool = True) -> dict[str, Estimate]:
        """estimate_s by what the time is spent on: the cells' parts (cell_parts_s), the
        profiles' links, and the run's own costs."""
        whole = cells is None or cells is self.cells  # the plan's own list: its cells' sums once, not per caller
        cells = self.cells if cells is None else cells
        hit = self._memo.get("cells_parts") if whole else None
        if hit is not None and hit[0] is cells:  # the same list object (resume and shards replace it)
            out = dict(hit[1])
        else:
            per = [self.cell_parts_s(c) for c in cells]
            out = {k: add(*(p[k] for p in per)) for k in ("handshakes", "probes", "programs")}
            if whole:
                self._memo["cells_parts"] = (cells, dict(out))
        out["links"] = add(*(self.profile_setup_s(name) for name in {c.profile for c in cells}))
        key = self.bfe_key(cells) if keygen else None
        out["run"] = Estimate((key["keygen_estimate_s"] if key else 0.0) + (RUN_FIXED_S if fixed and cells else 0.0))
        return out

    def estimate_s(self, cells: list[Cell] | None = None, keygen: bool = True, fixed: bool = True) -> Estimate:
        """Wall time of running `cells` (default all) one after another: each cell's estimate,
        each profile's link; keygen: the BFE key generation these cells start with, fixed: the
        run's own start and end (RUN_FIXED_S). Neither for a part of a run that shares them,
        such as one profile's line."""
        return add(*self.estimate_parts_s(cells, keygen, fixed).values())

    def summary(self) -> dict[str, Any]:
        m = self.model
        return {
            "name": m.name,
            "cells": len(self.cells),
            "excluded": self.excluded,
            "groups": self.groups,
            "sigs": self.sigs,
            "profiles": list(self.profiles),
            "modes": list(m.modes),
            "transports": list(m.transports),
            "sweeps": {k: v for k, v in m.dump().items() if k in m.sweeps},  # swept settings (pqshake/rows/axes/)
            "cells_per_transport": {t: sum(1 for c in self.cells if c.transport == t) for t in m.transports},
            **{k: v for t in T.REGISTRY for k, v in t.plan_settings(m, t.name in m.transports).items()},
            "repetitions": m.repetitions,
            "samples_per_cell": m.samples,
            "warmup_per_cell": m.warmup,
            "attempts": len(self.cells) * self.attempts_per_cell(),
            "order": m.order,
            "seed": self.seed,
            "bfe_key": self.bfe_key(),
            "estimate_s": round(self.estimate_s(), 1),
            "engine": m.engine,
            "topology": m.topology.model_dump(mode="json") if m.topology is not None else None,
            "capture_cells": sum(1 for c in self.cells if self.captures(c)),
        }


# A rule's values for each matrix axis it names (pqshake/rows/axes/core.py key -> names; an axis it
# does not name matches any) and for each swept setting it names (key -> values as shown).
CellRule = tuple[dict[str, list[str]], dict[str, list[str]]]


def _cell_rules(ef: ExperimentFile, reg: Any, profs: dict[str, Any], key: str, given: list[Any]) -> list[CellRule]:
    """Rules that pick cells (exclude, capture_cells): their @sets expanded, their names checked."""
    rules = []
    for i, r in enumerate(given):
        core: dict[str, list[str]] = {}
        for ax in C.CORE:
            names = getattr(r, ax.key)
            if not names:
                continue
            where = ef.where(key, i, ax.key)
            if ax.algorithms:
                names = reg.expand(ax.key, names, where)
            elif ax.link:  # only this experiment's profiles have cells
                for p in names:
                    if p not in profs:
                        close = difflib.get_close_matches(p, list(profs), n=3, cutoff=0.5)
                        raise UserError(f"{where}: profile '{p}' is not in this experiment's profiles"
                                        + (f"; did you mean {', '.join(close)}?" if close else f" ({', '.join(profs)})"))
            core[ax.key] = names
        settings = {k: [A.get(k).show(v) for v in vs] for k, vs in r.settings().items()}
        m = ef.model
        for k, shown in settings.items():  # a value the run never has would match nothing, silently
            have = [A.get(k).show(v) for v in m.sweeps.get(k, [getattr(m, k)])]
            for v in shown:
                if v not in have:
                    raise UserError(f"{ef.where(key, i, k)}: {v} is not a value of {k} in this experiment "
                                    f"({', '.join(have)})")
        rules.append((core, settings))
    return rules


def cell_matches(rule: CellRule, c: Cell, m: Any) -> bool:
    """The cell matches every key of the rule; a swept setting's by the value the cell runs with
    (m: the experiment, whose view of the cell says it)."""
    core, settings = rule
    if not all(getattr(c, k) in names for k, names in core.items()):
        return False
    view = m.for_cell(c) if settings else m
    return all(A.get(k).show(getattr(view, k)) in vs for k, vs in settings.items())


def build_plan(ef: ExperimentFile | Path | str, *, seed: int | None = None,
               check_stack: bool = True, profiles: dict[str, Any] | None = None) -> Plan:
    """Expand an experiment into its ordered cells. `seed` overrides the file's (resume passes
    the recorded one); `profiles` lets tests pass profile objects without the library."""
    if seed is not None and not 0 <= seed <= SEED_MAX:  # the same range as the file's seed:
        raise UserError(f"--seed {seed}: out of range; give a whole number from 0 to {SEED_MAX}, or leave it out")
    if not isinstance(ef, ExperimentFile):
        ef = load_experiment(ef)
    m = ef.model
    reg = load_registry()
    lists = {a.key: reg.expand(a.key, getattr(m, a.field), ef.where(a.field)) for a in C.CORE if a.algorithms}
    groups, sigs = lists["group"], lists["sig"]
    for a in A.REGISTRY:  # a setting that names signature algorithms: checked like the sigs
        key = a.key
        for i, name in enumerate(m.sweeps.get(key, [getattr(m, key)]) if a.sig else ()):
            if name is not None:
                reg.expand("sig", [name], ef.where(key, *((i,) if key in m.sweeps else ())))
    if isinstance(m.cpu_placement, BaseModel):  # CPUs this machine lets us use, none on both sides
        from pqshake.emulation import placement

        placement.plan(m.cpu_placement.model_dump(), where=ef.where("cpu_placement"))
    notes: list[str] = []
    hops: list[Any] = []
    if m.engine == "mininet" and m.topology is not None and m.topology.kind == "chain":
        # A chain's cells carry one profile: the end-to-end figures of its hops.
        from pqshake.emulation.mininet_topo import chain_profile

        hops = list(_resolve_entries(ef, m.topology.hops or [], ("topology", "hops"), unique=False).values())
        chain = chain_profile(hops, m.topology.name)
        profs = {chain.name: chain} if profiles is None else profiles
    else:
        profs = resolve_profiles(ef) if profiles is None else profiles

    # Exclusion rules (and capture_cells, of the same shape): expand their @sets and check their
    # names too.
    rules = _cell_rules(ef, reg, profs, "exclude", m.exclude)
    capture_rules = _cell_rules(ef, reg, profs, "capture_cells", m.capture_cells) if m.capture_cells else None

    cells: list[Cell] = []
    excluded = 0
    lists.update({a.key: list(profs) for a in C.CORE if a.link})  # the library's profiles, resolved
    reps = range(1, m.repetitions + 1)
    for combo in itertools.product(*(lists.get(a.key, getattr(m, a.field)) for a in C.LOOP)):
        values = dict(zip((a.key for a in C.LOOP), combo))
        prefix = C.id_parts(values)  # Cell.of's id, its axis parts made once per combination
        for settings in A.expand(m, Cell.of(values, 0)):
            if rules and any(cell_matches(r, Cell.of(values, 0, settings), m) for r in rules):
                excluded += m.repetitions
                continue
            stem = f"{prefix}{A.id_suffix(settings)}__r"
            cells += [Cell(f"{stem}{rep}", repetition=rep, settings=settings, **values) for rep in reps]
        if len(cells) > CELL_CAP:  # before the rest is built (a matrix of millions: at once, not gigabytes later)
            raise UserError(too_many_cells(ef), exit_code=2)
    if not cells:
        raise UserError(f"{ef.where('exclude')}: the exclude rules remove every cell (nothing to run)")
    for t in T.REGISTRY:  # each transport refuses what its programs or the link cannot run
        _check_one(t, ef, cells, profs)
    check_cells_can_run(ef, reg, cells)
    check_settings_matter(ef, cells, capture_rules)
    check_machine(ef, [*profs.values(), *hops])
    if check_stack:
        # Only groups some cell uses: an exclude rule may drop one the stack lacks.
        used = [g for g in groups if any(c.group == g for c in cells)]
        note = check_offered(used, ef.where("groups"))
        if note:
            notes.append(note)
        from pqshake.programs import NOT_BUILT, describe

        if describe() is None:  # the transports' checks had only the plan's own refusals
            notes.append(NOT_BUILT)

    if m.engine == "mininet" and m.topology is not None:
        t = m.topology
        what = (f"a {len(hops)}-hop chain ({', '.join(h.name for h in hops)})" if t.kind == "chain"
                else f"a {t.kind} with {t.clients} client{'s' if t.clients > 1 else ''}"
                + (f" and {t.competing.flows} competing bulk flow(s) {t.competing.direction}" if t.competing and t.competing.flows else ""))
        notes.append(f"engine: mininet, {what}" + (" (c1's handshakes are the cells' samples; c2.. run concurrently "
                                                     "into raw/<cell>/timer-cN.jsonl)" if t.clients > 1 else ""))

    if seed is None:
        seed = m.seed if m.seed is not None else secrets.randbits(32)
    plan = Plan(ef, groups, sigs, profs, cells, seed, excluded, notes, hops, capture_rules)
    plan.price_in_parallel()
    # Cells the model knows cannot finish (each kind's planned attempt is kept for the estimate).
    feasibility.check_cells_can_finish(plan)
    if m.order in ("shuffled", "interleaved"):  # interleaved: each round's turns are shuffled again
        plan.cells = shuffle_cells(cells, seed)
    return plan


def too_many_cells(ef: ExperimentFile) -> str:
    """The refusal of a plan beyond CELL_CAP: the file, the count, and the way out."""
    m = ef.model
    swept = max(m.sweeps.items(), key=lambda kv: len(kv[1]), default=None)
    part = (f" (e.g. {swept[0]}'s {len(swept[1]):,} values in parts)" if swept and len(swept[1]) > 1 else "")
    return (f"{ef.path}: more than {CELL_CAP:,} cells, the most one plan takes (it holds and prices every cell; "
            f"shards are cut from the whole plan); split the file into experiments of at most {CELL_CAP:,} "
            f"cells each{part}, or remove values, groups or profiles; each part can run in shards: "
            f"pqshake run PART.yaml --shard 0/K")


def _exclude_hint(**rule: str) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in rule.items()) + "}"


def check_cells_can_run(ef: ExperimentFile, reg: Any, cells: list[Cell]) -> None:
    """Refuse cells that cannot measure what they are labelled with (each would fail every
    attempt, or succeed without it, and the run would still say complete): a TLS 1.2 cell on an
    algorithm TLS 1.2 does not have (algorithms.yaml tls1_2), and mutual TLS in a mode whose
    handshake sends no certificate (a resumed or 0-RTT handshake authenticates by its key)."""
    views: dict[tuple, Any] = {}  # the cell's view of the experiment, once per combination of settings
    for c in cells:
        m = views.get(c.settings)
        if m is None:
            m = views[c.settings] = ef.model.for_cell(c)
        mode = M.get(c.mode)
        if mode.tls1_2:
            named = [("sig", key, name) for key, name in m.chain_sigs(c)]
            for role, key, name in (("group", "groups", c.group), ("sig", "sigs", c.sig), *named):
                a = reg.get(name) if name else None
                if a is not None and not a.tls1_2:
                    table = reg.groups if role == "group" else reg.sigs
                    have = ", ".join(n for n, x in table.items() if x.tls1_2)
                    fix = (f"choose a {key} TLS 1.2 has, or remove {c.mode} from modes" if role == "sig" and key != "sigs"
                           else f"add the exclude rule {_exclude_hint(mode=c.mode, **{role: name})}, or remove "
                                f"{c.mode} from modes")
                    raise UserError(f"{ef.where(key)}: mode {c.mode} cannot use {name}: TLS 1.2 has no {a.family_label} "
                                    f"{'group' if role == 'group' else 'signature scheme'} (every handshake would fail; "
                                    f"TLS 1.2 has {have}); {fix}")
        if mode.tls1_2 and m.cert_compression != "off":  # RFC 8879 extends TLS 1.3 alone
            raise UserError(f"{ef.where('cert_compression')}: {m.cert_compression}: mode {c.mode} cannot compress "
                            f"certificates (RFC 8879 is TLS 1.3 only), so its cells would be labelled compressed and "
                            f"send the chain whole; set cert_compression: off, remove {c.mode} from modes, or add the "
                            f"exclude rule {_exclude_hint(mode=c.mode, cert_compression=m.cert_compression)}")
        if m.client_auth is not None and not mode.certificate:
            raise UserError(f"{ef.where('client_auth')}: mode {c.mode} sends no client certificate (its handshake "
                            f"authenticates by the resumed or pre-shared key), so its cells would be labelled mutual "
                            f"TLS and measure none; remove {c.mode} from modes, or remove client_auth")


@dataclass(frozen=True)
class Setting:
    """A setting that only matters for some cells: given (in the file, or an include) while no
    cell is one of them, it would change nothing in the run and is refused with `why` (the QUIC
    engine's knobs are refused the same way when no cell runs that engine)."""

    keys: tuple[str, ...]
    matters: Callable[[Any, list[Cell]], bool]  # (the experiment model, the plan's cells)
    why: str  # what it is for and the way out; {keys} names the given ones


_QUIC_ROWS = frozenset(t.name for t in T.QUIC_ENGINES.values())

# The swept settings' rows say the same with `unused` (pqshake/rows/axes/): refused when their
# `applies` holds for no cell.
SETTINGS: tuple[Setting, ...] = (
    Setting(("wait_acked",), lambda m, cells: any(T.get(c.transport).over_tcp for c in cells),
            "a stop point of TCP's (every byte the client sent acknowledged), but no cell runs over TCP (add tcp to "
            "transports, or remove {keys})"),
    Setting(("bfe_n", "bfe_p"), lambda m, cells: any(M.get(c.mode).bfe_key for c in cells),
            "settings of the fs0rtt key, but no cell runs fs0rtt (add fs0rtt to modes, or remove {keys})"),
    Setting(("qlog",), lambda m, cells: any(c.transport in _QUIC_ROWS for c in cells),
            "settings of the QUIC cells, but no cell runs over QUIC (add quic to transports, or remove {keys})"),
    Setting(("turbo_requests", "turbo_fallback"), lambda m, cells: any(c.transport == T.TURBOTLS.name for c in cells),
            f"settings of the {T.TURBOTLS.name} cells, but there is none (add {T.TURBOTLS.name} to transports, or "
            "remove {keys})"),
    Setting(T.ENGINE_KNOBS, lambda m, cells: any(T.takes_engine_knobs(c.transport) for c in cells),
            "settings of the ngtcp2 QUIC engine, but no cell runs it (the exclude rules remove every ngtcp2 cell; "
            "keep one, or remove {keys})"),
)


def check_settings_matter(ef: ExperimentFile, cells: list[Cell], capture_rules: list[Any] | None) -> None:
    """One rule: a setting that changes nothing in the run is refused, with the reason (SETTINGS),
    and so is a capture_cells rule that matches no cell."""
    m = ef.model
    for a in A.REGISTRY:
        if a.unused and a.key in m.model_fields_set and not any(a.applies(m.for_cell(c), c) for c in cells):
            raise UserError(f"{ef.where(a.key)}: {a.unused.format(keys=a.key)}")
    for s in SETTINGS:
        given = [k for k in s.keys if k in m.model_fields_set]
        if given and not s.matters(m, cells):
            raise UserError(f"{ef.where(given[0])}: {s.why.format(keys=', '.join(given))}")
    for i, rule in enumerate(capture_rules or ()):
        if not any(cell_matches(rule, c, m) for c in cells):
            raise UserError(f"{ef.where('capture_cells', i)}: matches no cell of the plan, so it captures nothing "
                            "(correct its names, or remove the rule)")


def _check_one(t: T.Transport, ef: ExperimentFile, cells: list[Cell], profs: dict[str, Any]) -> None:
    mine = [c for c in cells if c.transport == t.name]
    if mine:
        t.check(ef, mine, profs)


def check_machine(ef: ExperimentFile, profiles: list[Any]) -> None:
    """Refuse, before a run directory exists, what this machine cannot run and `run` would only
    find out when the link comes up: a congestion control the kernel lacks, an explicit netem
    backend on a kernel without sch_netem (probed when root; a non-root plan cannot build the
    probe's namespace, and the run checks again before its first cell)."""
    import os

    from pqshake.emulation import backend

    for prof in profiles:
        why = prof.machine_problem()
        if why:
            raise UserError(f"{ef.where('profiles')}: profile '{prof.name}': {why}")
    if ef.model.backend == "netem":  # a trace, delay series or episode has no netem form
        for prof in profiles:
            why = prof.netem_problem() if hasattr(prof, "netem_problem") else None
            if why:
                raise UserError(f"{ef.where('backend')}: netem: profile '{prof.name}': {why}")
    if ef.model.backend == "netem" and os.geteuid() == 0:
        ok, detail = backend.netem_available()
        if not ok:
            raise UserError(f"{ef.where('backend')}: netem: {backend.NO_NETEM} ({detail})")


def shuffle_cells(cells: list[Cell], seed: int) -> list[Cell]:
    """Shuffle profiles and, within each profile, the cells; a profile's cells stay together
    (one topology each). Same seed, same order."""
    rng = random.Random(seed)
    by_profile: dict[str, list[Cell]] = {}
    for c in cells:
        by_profile.setdefault(c.profile, []).append(c)
    names = list(by_profile)
    rng.shuffle(names)
    out: list[Cell] = []
    for n in names:
        block = list(by_profile[n])
        rng.shuffle(block)
        out.extend(block)
    return out


def fmt_seconds(s: float) -> str:
    s = int(round(s))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d{(s % 86400) // 3600:02d}h"
