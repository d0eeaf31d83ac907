"""Link profiles: YAML in, validated pydantic models out, one line per mistake.

    name: lte-good
    description: LTE, good signal
    basis: 3GPP/Ookla medians ...
    uplink:   {delay: 20ms, jitter: 4ms, rate: 10Mbit, loss: 0.5%}
    downlink: {delay: 20ms, jitter: 4ms, rate: 40Mbit, loss: 0.2%}
    mtu: 1500

    downlink: {trace: traces/synthetic-onoff-12mbit.trace, delay: 20ms}    # a delivery trace
    uplink:   {delay: 20ms, episodes: [{drop: {packet: 2, payload: true}}]}

Shorthands: `rtt: 40ms` (20 ms each way), top-level `rate`, `loss`, `jitter`, `episodes` (both
directions).
Giving a quantity both at the top and in a direction is an error (no silent precedence), and a
profile that has one direction must have the other.

Internally every quantity is an exact integer or a fraction: delay/jitter in ns, rate in bit/s,
probabilities 0..1. `Profile.up` / `Profile.down` are the resolved per-direction `Link`s the
backends render (up = client -> server, down = server -> client).

Files a profile names (`trace`, `delay_series`; relative paths are relative to the profile's
file) are read and checked while the profile loads (emulation/traces.py), so a bad one is one
line `profile.yaml:LINE downlink.trace: FILE:LINE: problem` before any namespace exists. Traces,
delay series and episodes need the userspace emulator: under netem they are refused in one line
(`netem_problem`).
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from pqshake import yamlsrc
from pqshake.emulation import host, traces, units
from pqshake.errors import UserError

LIBRARY_DIR = Path(__file__).resolve().parent / "profiles"
SCHEMA_PATH = LIBRARY_DIR / "schema.json"

# ------------------------------------------------------------------ types --

def _unit_schema(unit: str, description: str, example: str, sign: str = "") -> dict:
    """JSON schema of a number with a unit, or a bare 0 (the one number the parsers take without
    one: units.py); sign: a pattern before the number."""
    return {
        "anyOf": [
            {"type": "string", "pattern": rf"^\s*{sign}([0-9]+(\.[0-9]*)?|\.[0-9]+)\s*{unit}\s*$"},
            {"const": 0},
        ],
        "description": description,
        "examples": [example],
    }


_DUR_SCHEMA = _unit_schema("(ns|us|ms|s)", "duration with a unit: 250us, 20ms, 1.5s", "20ms")
_RATE_SCHEMA = {
    "anyOf": [
        {"type": "string", "pattern": r"(?i)^\s*([0-9]+(\.[0-9]*)?|\.[0-9]+)\s*(bit|kbit|mbit|gbit|tbit)\s*$"},
        {"type": "string", "pattern": r"(?i)^\s*(unlimited|none)\s*$"},
    ],
    "description": "bits per second (SI, like tc): 100kbit, 10Mbit, 1Gbit; unlimited (or none) = no limit",
    "examples": ["10Mbit"],
}
_PCT_SCHEMA = _unit_schema("%", "percentage 0%..100%", "0.5%")


def _dur(v: Any) -> int:
    return units.parse_duration(v)


def _rate(v: Any) -> int:
    # "unlimited" is the one way to say no limit (0 inside). A rate of 0 is refused: it reads
    # like a link that carries nothing, and silently meant the opposite.
    if isinstance(v, str) and v.strip().lower() in ("unlimited", "none"):
        return 0
    bps = units.parse_rate(v)
    if bps == 0:
        raise ValueError(f"{v!r}: a rate of 0 would carry nothing; write unlimited for no limit, or a rate such as 10Mbit")
    return bps


def _pct(v: Any) -> float:
    return units.parse_percent(v)


def _signed_dur(v: Any) -> int:
    if isinstance(v, str) and v.strip().startswith("-"):
        return -units.parse_duration(v.strip()[1:])
    return units.parse_duration(v)


_SIGNED_DUR_SCHEMA = _unit_schema("(ns|us|ms|s)", "duration with a unit, may be negative: 30ms, -10ms", "30ms",
                                  sign=r"-?\s*")

Duration = Annotated[int, BeforeValidator(_dur), WithJsonSchema(_DUR_SCHEMA)]
SignedDuration = Annotated[int, BeforeValidator(_signed_dur), WithJsonSchema(_SIGNED_DUR_SCHEMA)]
Rate = Annotated[int, BeforeValidator(_rate), WithJsonSchema(_RATE_SCHEMA)]
Percent = Annotated[float, BeforeValidator(_pct), WithJsonSchema(_PCT_SCHEMA)]
Dist = Literal["uniform", "normal", "pareto", "paretonormal"]

# Largest excursion of jitter x the standardised variate (netem's tables clip at 32767/8192).
DIST_CLIP = {"uniform": 1.0, "normal": 32767 / 8192, "pareto": 32767 / 8192, "paretonormal": 32767 / 8192}

NOMINAL_UNLIMITED_BPS = 1_000_000_000  # used only to size queues of unlimited links
MIN_LIMIT = 100
MAX_LIMIT = 10_000_000


class _Strict(BaseModel):
    # strict: true is no 1 and '4096' in quotes no number; quantities with units ("20ms", "5%",
    # "10Mbit") are strings their own validators read.
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=False, strict=True)


class GEModel(_Strict):
    """Gilbert-Elliott loss, netem's `loss gemodel p r 1-h 1-k` (all percentages)."""

    p: Percent = Field(description="good -> bad transition probability")
    r: Percent | None = Field(None, description="bad -> good transition probability (default 100% - p)")
    one_minus_h: Percent = Field(1.0, alias="1-h", description="loss probability in the bad state (default 100%)")
    one_minus_k: Percent = Field(0.0, alias="1-k", description="loss probability in the good state (default 0%)")


Clock = Literal["attempt", "run"]
Protocol = Literal["any", "tcp", "udp"]


class Outage(_Strict):
    """The link carries nothing (a blackhole) for `duration`, from `at` after the clock's start;
    with `every`, again every period."""

    at: Duration = Field(description="when the outage starts, after the clock's start")
    duration: Duration = Field(description="how long nothing passes")
    every: Duration | None = Field(None, description="repeat with this period (longer than duration)")
    clock: Clock = Field(description="attempt: from each attempt's first packet (a client's new flow); run: from the link's start")
    protocol: Protocol = Field("any", description="attempt clock: whose new flows start an attempt")


class Handover(_Strict):
    """A handover: from `at` the delay steps by `delay_step` (held for `hold`, else until the
    clock restarts), and the first `loss_burst` frames from `at` on are lost."""

    at: Duration = Field(description="when the handover happens, after the clock's start")
    delay_step: SignedDuration = Field(0, description="added to the one-way delay (may be negative)")
    loss_burst: int = Field(0, ge=0, le=1_000_000, description="frames lost from `at` on")
    hold: Duration | None = Field(None, description="how long the step lasts (default: on)")
    every: Duration | None = Field(None, description="repeat with this period (longer than hold)")
    clock: Clock = Field(description="attempt: from each attempt's first packet (a client's new flow); run: from the link's start")
    protocol: Protocol = Field("any", description="attempt clock: whose new flows start an attempt")


class TargetedDrop(_Strict):
    """Drop the k-th packet of every flow (a 5-tuple) in this direction, counted from the flow's
    first packet in this direction (with payload: true, only packets carrying payload count, so
    SYNs and pure ACKs are skipped)."""

    packet: int = Field(ge=1, le=1_000_000_000, description="k: which packet of the flow (1 = the first)")
    payload: bool = Field(False, description="count only packets with payload (skip SYNs and pure ACKs)")
    protocol: Protocol = Field("any", description="which flows: tcp, udp or any")


class Episode(_Strict):
    """One episode: exactly one of outage, handover, drop."""

    outage: Outage | None = None
    handover: Handover | None = None
    drop: TargetedDrop | None = None

    @model_validator(mode="after")
    def _one(self) -> "Episode":
        given = [k for k in ("outage", "handover", "drop") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("an episode is one of outage, handover or drop (write one per list item)")
        return self


@dataclass(frozen=True)
class EpisodeSpec:
    """One resolved episode (what the emulator gets)."""

    kind: str  # outage | handover | drop
    clock: str  # attempt | run | flow (drop: counted per flow)
    protocol: str
    at_ns: int = 0
    duration_ns: int = 0  # outage: its length; handover: how long the step holds (0 = on)
    every_ns: int = 0
    step_ns: int = 0
    burst: int = 0
    packet: int = 0
    payload: bool = False

    def spec(self) -> str:
        """The emulator's form (emulation/linkemu/README.md, SPEC keys)."""
        p = f"/proto:{self.protocol}" if self.protocol != "any" else ""
        e = f"/every:{self.every_ns}" if self.every_ns else ""
        if self.kind == "drop":
            return f"drop=nth:{self.packet}" + ("/payload:1" if self.payload else "") + p
        if self.kind == "outage":
            return f"outage=clock:{self.clock}/at:{self.at_ns}/dur:{self.duration_ns}{e}{p}"
        h = f"/hold:{self.duration_ns}" if self.duration_ns else ""
        return f"handover=clock:{self.clock}/at:{self.at_ns}/step:{self.step_ns}/burst:{self.burst}{h}{e}{p}"

    def describe(self) -> str:
        d = units.fmt_duration
        if self.kind == "drop":
            flows = "flow" if self.protocol == "any" else f"{self.protocol} flow"
            return f"drop packet {self.packet}{' with payload' if self.payload else ''} of each {flows}"
        every = f" every {d(self.every_ns)}" if self.every_ns else ""
        if self.kind == "outage":
            return f"outage {d(self.duration_ns)} at {d(self.at_ns)}{every} ({self.clock} clock)"
        sign = "-" if self.step_ns < 0 else "+"
        return (f"handover at {d(self.at_ns)}{every}: delay {sign}{d(abs(self.step_ns))}"
                f"{f' for {d(self.duration_ns)}' if self.duration_ns else ''}, {self.burst} frames lost ({self.clock} clock)")


def _episode_specs(items: list[Episode], where: str) -> tuple[EpisodeSpec, ...]:
    out = []
    for i, ep in enumerate(items):
        if ep.drop is not None:
            out.append(EpisodeSpec("drop", "flow", ep.drop.protocol, packet=ep.drop.packet, payload=ep.drop.payload))
        elif ep.outage is not None:
            o = ep.outage
            _protocol_needs_attempt_clock(o, f"{where}.{i}.outage")
            if o.duration <= 0:
                raise ValueError(f"{where}.{i}.outage.duration: must be > 0 (an outage of no time does nothing)")
            if o.every is not None and o.every <= o.duration:
                raise ValueError(f"{where}.{i}.outage.every: {units.fmt_duration(o.every)} is not longer than the duration "
                                 f"{units.fmt_duration(o.duration)} (the link would never come back)")
            out.append(EpisodeSpec("outage", o.clock, o.protocol, at_ns=o.at, duration_ns=o.duration, every_ns=o.every or 0))
        else:
            h = ep.handover
            assert h is not None
            _protocol_needs_attempt_clock(h, f"{where}.{i}.handover")
            if h.hold == 0:
                raise ValueError(f"{where}.{i}.handover.hold: 0ms would hold the step for no time (give a duration > 0, "
                                 "or leave hold out for a step that lasts until the clock restarts)")
            if h.every is not None and h.every <= (h.hold or 0):
                raise ValueError(f"{where}.{i}.handover.every: {units.fmt_duration(h.every)} is not longer than hold "
                                 f"{units.fmt_duration(h.hold or 0)}")
            if h.every is not None and h.every <= 0:
                raise ValueError(f"{where}.{i}.handover.every: must be > 0 (or leave it out for one handover)")
            if h.delay_step == 0 and h.loss_burst == 0:
                raise ValueError(f"{where}.{i}.handover: neither delay_step nor loss_burst given (a handover that does nothing)")
            out.append(EpisodeSpec("handover", h.clock, h.protocol, at_ns=h.at, duration_ns=h.hold or 0,
                                   every_ns=h.every or 0, step_ns=h.delay_step, burst=h.loss_burst))
    if len(out) > MAX_EPISODES:
        raise ValueError(f"{where}: {len(out)} episodes, at most {MAX_EPISODES} per direction")
    return tuple(out)


MAX_EPISODES = 16  # per direction (the emulator's PQS_MAX_EPISODES)


def _protocol_needs_attempt_clock(ep: Any, where: str) -> None:
    """protocol picks whose new flows start an attempt: with clock: run nothing starts one, so
    it would change nothing (a setting that changes nothing is refused)."""
    if "protocol" in ep.model_fields_set and ep.clock == "run":
        raise ValueError(f"{where}.protocol: chooses whose new flows start an attempt, but clock: run counts from the "
                         "link's start (remove protocol, or use clock: attempt)")


# The least mean rate a trace may have: one 1500-byte delivery opportunity every ~190 ms. Below
# it a handshake's ten-odd packets wait seconds each and every attempt times out, while the plan
# (which counts the mean rate) promises seconds.
MIN_TRACE_BPS = 64_000


def _read_input(value: str, base: Any, where: str, loader: Any) -> Any:
    """A file a profile names (trace, delay series), relative to the profile file's folder (else
    the working directory), read and checked now: ValueError `where: FILE:LINE: problem`."""
    try:
        p = Path(value).expanduser()
    except RuntimeError:  # ~user of a user this machine does not have
        raise ValueError(f"{where}: {value!r}: no such user for '~' (write the path out)") from None
    if not p.is_absolute():
        p = Path(base or ".") / p
    p = Path(os.path.abspath(p))
    if "," in str(p):
        raise ValueError(f"{where}: {value!r}: the path has a comma, which the emulator's SPEC cannot carry (rename the file)")
    if len(str(p)) > traces.PATH_MAX:
        raise ValueError(f"{where}: the path is longer than {traces.PATH_MAX} characters (move the file)")
    try:
        return loader(p, shown=value)[1]
    except traces.InputError as e:
        raise ValueError(f"{where}: {e}") from None


class Direction(_Strict):
    """One direction of the link, applied on that direction's egress in the link namespace."""

    delay: Duration = Field(0, description="one-way propagation delay")
    jitter: Duration = Field(0, description="delay variation (scale of the distribution)")
    distribution: Dist = Field("uniform", description="jitter distribution (netem's tables)")
    loss: Percent = Field(0.0, description="independent (Bernoulli) loss")
    loss_correlation: Percent = Field(0.0, description="netem correlation of successive loss draws")
    gemodel: GEModel | None = Field(None, description="Gilbert-Elliott loss instead of `loss`")
    rate: Rate = Field(0, description="link rate; counts the Ethernet header + overhead, like netem")
    overhead: int = Field(0, ge=-14, le=10000, description="bytes added to each frame for the rate")
    limit: int | Literal["auto"] = Field("auto", description="frames held per direction (tail drop); auto = sized from rate x delay")
    duplicate: Percent = Field(0.0)
    corrupt: Percent = Field(0.0)
    reorder: Percent = Field(0.0, description="netem reorder: sent at once instead of delayed")
    reorder_gap: int | None = Field(None, ge=1, le=1_000_000)
    keep_order: bool = Field(True, description="jitter never reorders (frames wait for earlier ones)")
    loss_burst_max: int | None = Field(None, ge=1, le=1_000_000, description="with loss: never more than this many frames lost in a row")
    trace: str | None = Field(None, min_length=1, description="packet-delivery trace (Mahimahi's format) instead of rate; userspace backend only")
    trace_rule: Literal["packet", "bytes"] = Field(
        "packet", description="packet: one packet (<= 1500 B) per opportunity; bytes: 1504 B per opportunity shared by queued packets (Mahimahi's LinkQueue)")
    delay_series: str | None = Field(None, min_length=1, description="one-way delay series ('TIME_MS DELAY_MS' lines) instead of delay; userspace backend only")
    episodes: list[Episode] | None = Field(None, description="outages, handovers, targeted drops; userspace backend only")

    @field_validator("limit")
    @classmethod
    def _limit(cls, v: Any) -> Any:
        if isinstance(v, int) and not (1 <= v <= MAX_LIMIT):
            raise ValueError(f"{v} is outside 1..{MAX_LIMIT} frames (or write auto)")
        return v


Segments = Annotated[int, Field(ge=1, le=1000)]


class PerRole(_Strict):
    """A TCP window set per endpoint: `{client: 24}` leaves the server at the kernel default.
    Mutual TLS is the case for it: the client's second flight carries its certificate chain,
    and only the client's initial window decides whether it fits in one round trip."""

    client: Segments | None = Field(None, description="in the client's namespace")
    server: Segments | None = Field(None, description="in the server's namespace")


# One number, or a mapping per role; the discriminator keeps error messages to the form used.
Window = Annotated[
    Annotated[Segments, Tag("tag:n")] | Annotated[PerRole, Tag("tag:roles")],
    Discriminator(lambda v: "tag:roles" if isinstance(v, (dict, PerRole)) else "tag:n"),
]


class TcpSettings(_Strict):
    """Endpoint TCP settings, applied in both the client and the server namespace (the
    windows either as one number for both, or per role)."""

    initcwnd: Window | None = Field(
        None, description="initial congestion window (segments): N for both ends, or {client: N, server: M}")
    initrwnd: Window | None = Field(
        None, description="initial receive window (segments): N for both ends, or {client: N, server: M}")
    congestion_control: str | None = Field(None, pattern=r"^[a-z0-9_]+$", description="e.g. cubic, reno, bbr")
    rmem: list[int] | Literal["auto"] = Field("auto", description="tcp_rmem [min, default, max] bytes; auto = sized to the queue")
    wmem: list[int] | Literal["auto"] = Field("auto", description="tcp_wmem [min, default, max] bytes")

    def window(self, which: Literal["initcwnd", "initrwnd"], role: Literal["client", "server"]) -> int | None:
        """The configured window of one endpoint, None = the kernel's default (10 segments)."""
        v = getattr(self, which)
        return getattr(v, role) if isinstance(v, PerRole) else v

    @field_validator("rmem", "wmem")
    @classmethod
    def _triple(cls, v: Any) -> Any:
        if isinstance(v, list):
            if len(v) != 3 or not all(isinstance(x, int) and x > 0 for x in v) or not (v[0] <= v[1] <= v[2]):
                raise ValueError(f"{v!r} must be three byte counts [min, default, max] with min <= default <= max")
        return v


# What netem cannot do, by the setting that asks for it (Link.netem_lacks).
_NO_REPLAY = "netem cannot replay traces, delay series or episodes"
NETEM_LACKS = {
    "trace": _NO_REPLAY,
    "delay_series": _NO_REPLAY,
    "episodes": _NO_REPLAY,
    "loss_burst_max": "netem cannot cap a run of losses (its loss random would drop more in a row)",
}


@dataclass(frozen=True)
class Link:
    """One resolved direction: exact values the backends render."""

    delay_ns: int = 0
    jitter_ns: int = 0
    dist: str = "uniform"
    loss: float = 0.0
    loss_corr: float = 0.0
    ge: tuple[float, float, float, float] | None = None  # p, r, 1-h, 1-k
    rate_bps: int = 0
    overhead: int = 0
    limit: int = 1000
    limit_auto: bool = True
    dup: float = 0.0
    corrupt: float = 0.0
    reorder: float = 0.0
    gap: int = 0
    keep_order: bool = True
    loss_burst_max: int = 0  # 0 = no cap
    # A trace direction: rate_bps is the trace's mean rate (what analysis records); the emulator
    # replays the trace. A delay-series direction: delay_ns is the series' time-weighted mean.
    trace: traces.TraceInfo | None = None
    trace_rule: str = "packet"
    delay_series: traces.SeriesInfo | None = None
    episodes: tuple[EpisodeSpec, ...] = ()

    @property
    def time_varying(self) -> bool:
        """The delay or the delivery changes with time (trace, series, handover steps or outages):
        a short probe sample cannot be judged against one expected figure."""
        return (self.trace is not None or self.delay_series is not None
                or any(e.kind in ("outage", "handover") for e in self.episodes))

    def expected_loss(self) -> float:
        """Steady-state loss probability (Bernoulli, or the GE chain's stationary mix; with
        loss_burst_max N, Bernoulli runs cut at N: (S-1)/S, S = 1 + p + ... + p^N). Episodes'
        drops are counted apart and not part of it."""
        if self.ge is None:
            if self.loss_burst_max and self.loss > 0:
                s = sum(self.loss ** i for i in range(self.loss_burst_max + 1))
                return (s - 1) / s
            return self.loss
        p, r, one_h, one_k = self.ge
        if p + r == 0:
            return one_k
        pi_bad = p / (p + r)
        return pi_bad * one_h + (1 - pi_bad) * one_k

    def netem_lacks(self) -> str | None:
        """Its first setting netem has no form for (a key of NETEM_LACKS), or None."""
        return ("trace" if self.trace is not None else "delay_series" if self.delay_series is not None
                else "episodes" if self.episodes else "loss_burst_max" if self.loss_burst_max else None)

    def max_jitter_ns(self) -> float:
        return self.jitter_ns * DIST_CLIP[self.dist] if self.jitter_ns else 0.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ge"] = list(self.ge) if self.ge else None
        d["episodes"] = [dict(e) for e in d["episodes"]]
        return d


_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


# The least tcp_rmem / tcp_wmem figure pqshake writes (one page; Profile.tcp_buffers).
BUF_FLOOR = 4096

class Profile(_Strict):
    name: str = Field(description="lower-case name, used on the command line")
    description: str = Field("", description="one line (required in the shipped library)")
    basis: str | None = Field(None, description="one line: where the numbers come from")
    rtt: Duration | None = Field(None, description="shorthand: half of it as delay in each direction")
    rate: Rate | None = Field(None, description="both directions")
    loss: Percent | None = Field(None, description="both directions")
    jitter: Duration | None = Field(None, description="both directions")
    episodes: list[Episode] | None = Field(None, description="both directions: outages, handovers, targeted drops")
    uplink: Direction | None = Field(None, description="client -> server")
    downlink: Direction | None = Field(None, description="server -> client")
    mtu: int = Field(1500, ge=576, le=65535, description="MTU of every interface of the path")
    seed: int | None = Field(None, ge=0, le=2**63 - 1, description="random seed (recorded when chosen)")
    tcp: TcpSettings = Field(default_factory=TcpSettings)

    _up: Link = PrivateAttr()
    _down: Link = PrivateAttr()
    _source: str = PrivateAttr(default="<inline>")
    _line: int = PrivateAttr(default=1)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME_RE.match(v):
            raise ValueError(f"{v!r}: use lower-case letters, digits, '.', '_' or '-' (e.g. lte-good)")
        return v

    @field_validator("description", "basis")
    @classmethod
    def _one_line(cls, v: str | None) -> str | None:
        if v is not None and "\n" in v.strip():
            raise ValueError("must be one line (shorten it)")
        return v.strip() if v else v

    @model_validator(mode="after")
    def _resolve(self, info: ValidationInfo) -> "Profile":
        ctx = info.context if isinstance(info.context, dict) else {}
        base = ctx.get("base_dir")
        given_dirs = [d for d in ("uplink", "downlink") if getattr(self, d) is not None]
        if len(given_dirs) == 1:
            missing = "downlink" if given_dirs[0] == "uplink" else "uplink"
            raise ValueError(
                f"{missing}: missing while {given_dirs[0]} is given (every direction is explicit: "
                f"add {missing}, or use top-level rtt/rate/loss/jitter for both)"
            )
        dirs = {name: getattr(self, name) or Direction() for name in ("uplink", "downlink")}
        for name, d in dirs.items():
            set_ = d.model_fields_set
            if self.rtt is not None and "delay" in set_:
                raise ValueError(f"{name}.delay: also set by top-level rtt (keep one)")
            for top in ("rate", "loss", "jitter", "episodes"):
                if getattr(self, top) is not None and top in set_:
                    raise ValueError(f"{name}.{top}: also set at top level (keep one)")
        if self.rtt is not None and self.rtt % 2:
            raise ValueError(f"rtt: {self.rtt} ns is odd; give a value that halves to whole ns")
        resolved: dict[str, Link] = {}
        pre: dict[str, dict[str, Any]] = {}
        for name, d in dirs.items():
            delay = self.rtt // 2 if self.rtt is not None else d.delay
            jitter = self.jitter if self.jitter is not None else d.jitter
            rate = self.rate if self.rate is not None else d.rate
            loss = self.loss if self.loss is not None else d.loss
            if "distribution" in d.model_fields_set and jitter == 0:
                raise ValueError(f"{name}.distribution: set without jitter (add jitter or remove it)")
            if d.gemodel is not None and loss > 0:
                raise ValueError(f"{name}.gemodel: also loss {units.fmt_percent(loss)} given (choose one loss model)")
            if d.loss_correlation > 0 and loss == 0:
                raise ValueError(f"{name}.loss_correlation: set without loss (add loss or remove it)")
            if d.reorder > 0 and delay == 0:
                raise ValueError(f"{name}.reorder: needs a delay (reordered frames skip the delay; add delay)")
            if d.reorder_gap is not None and d.reorder == 0:
                raise ValueError(f"{name}.reorder_gap: set without reorder (add reorder or remove it)")
            if "overhead" in d.model_fields_set and rate == 0 and d.trace is None:
                raise ValueError(f"{name}.overhead: only counts with a rate (add rate or remove it)")
            ge = None
            if d.gemodel is not None:
                g = d.gemodel
                ge = (g.p, g.r if g.r is not None else 1.0 - g.p, g.one_minus_h, g.one_minus_k)
            if d.loss_burst_max is not None:
                if loss == 0:
                    raise ValueError(f"{name}.loss_burst_max: set without loss (add loss or remove it)")
                if d.loss_correlation > 0:
                    raise ValueError(f"{name}.loss_burst_max: caps Bernoulli loss, not with loss_correlation (keep one)")
            trace = series = None
            if d.trace is not None:
                if rate:
                    raise ValueError(f"{name}.trace: also a rate given (the trace is the rate; remove one)")
                if "overhead" in d.model_fields_set:
                    raise ValueError(f"{name}.overhead: only counts with a rate, not with a trace (remove it)")
                trace = _read_input(d.trace, base, f"{name}.trace", traces.load_trace)
                if trace.mean_bps < MIN_TRACE_BPS:
                    raise ValueError(f"{name}.trace: {d.trace}: a mean rate of {trace.mean_bps / 1000:.3g} kbit/s ({trace.lines} "
                                     f"delivery opportunities in {trace.period_ms} ms), below the {MIN_TRACE_BPS // 1000}kbit "
                                     "a handshake needs to finish in seconds (use a denser trace)")
                rate = int(round(trace.mean_bps))
            elif "trace_rule" in d.model_fields_set:
                raise ValueError(f"{name}.trace_rule: set without trace (add trace or remove it)")
            if d.delay_series is not None:
                if "delay" in d.model_fields_set or self.rtt is not None:
                    raise ValueError(f"{name}.delay_series: also a delay given (the series is the delay; remove one)")
                series = _read_input(d.delay_series, base, f"{name}.delay_series", traces.load_series)
                delay = series.mean_delay_ns
            eps = _episode_specs(self.episodes if self.episodes is not None else (d.episodes or []),
                                 "episodes" if self.episodes is not None else f"{name}.episodes")
            pre[name] = dict(
                delay_ns=delay, jitter_ns=jitter, dist=d.distribution, loss=loss,
                loss_corr=d.loss_correlation, ge=ge, rate_bps=rate, overhead=d.overhead,
                dup=d.duplicate, corrupt=d.corrupt, reorder=d.reorder,
                gap=(d.reorder_gap or 1) if d.reorder > 0 else 0, keep_order=d.keep_order,
                loss_burst_max=d.loss_burst_max or 0, trace=trace, trace_rule=d.trace_rule,
                delay_series=series, episodes=eps,
            )
        # Queue limit: frames in the delay line plus one bandwidth-delay product of buffer,
        # x2 margin, at least MIN_LIMIT (see README "queue limit"). A trace counts with its
        # busiest 100 ms, a delay series with its largest delay.
        def top_delay(p: dict[str, Any]) -> float:
            d = p["delay_series"].max_delay_ns if p["delay_series"] is not None else p["delay_ns"]
            return d + max((e.step_ns for e in p["episodes"] if e.kind == "handover"), default=0) \
                + p["jitter_ns"] * DIST_CLIP[p["dist"]]

        rtt_max = sum(top_delay(p) for p in pre.values())
        rmax = max(((p["trace"].peak_bps if p["trace"] is not None else p["rate_bps"]) or NOMINAL_UNLIMITED_BPS)
                   for p in pre.values())
        frame_bits = 8 * (self.mtu + 14)
        for name, d in dirs.items():
            p = pre[name]
            own = top_delay(p)
            auto = max(MIN_LIMIT, math.ceil(2 * rmax * (own + rtt_max) / 1e9 / frame_bits))
            auto = min(auto, MAX_LIMIT)
            limit_auto = d.limit == "auto"
            resolved[name] = Link(**p, limit=auto if limit_auto else int(d.limit), limit_auto=limit_auto)
        self._up = resolved["uplink"]
        self._down = resolved["downlink"]
        return self

    # ------------------------------------------------------------ access --
    @property
    def up(self) -> Link:
        return self._up

    @property
    def down(self) -> Link:
        return self._down

    @property
    def source(self) -> str:
        return self._source

    def configured_rtt_ns(self) -> int:
        return self.up.delay_ns + self.down.delay_ns

    def machine_problem(self) -> str | None:
        """What keeps this profile from running on this machine, as `field: problem (fix)`, or
        None. Not a validation error: a profile is valid anywhere (analysis reads it on machines
        that never run it); `plan`, `net validate` and the topology ask here."""
        cc = self.tcp.congestion_control
        why = host.congestion_control_problem(cc) if cc else None
        return f"tcp.congestion_control {why}; pick an available one or load its module (modprobe tcp_{cc})" if why else None

    def netem_problem(self) -> str | None:
        """Why the netem backend cannot run this profile (`field: problem (fix)`), or None: netem
        cannot replay a delivery trace or a delay series, nor act per flow or per attempt, nor
        cap a run of losses."""
        for name, l in (("uplink", self.up), ("downlink", self.down)):
            what = l.netem_lacks()
            if what:
                return (f"{name}.{what}: {NETEM_LACKS[what]}; use the userspace backend (--backend userspace, or "
                        "backend: userspace in the experiment)")
        return None

    def tcp_buffers(self) -> dict[str, dict[str, list[int]]]:
        """tcp_rmem / tcp_wmem per endpoint namespace.

        auto: the receive buffer max is limit x MSS of the direction that endpoint receives,
        so the advertised window can never exceed what the emulated queue holds (TCP sees no
        drops the profile did not ask for) while still being >= 2 BDP (no window cap on
        throughput); the send buffer max is twice that (at least the kernel's 4 MiB). No auto
        figure is below one page (BUF_FLOOR): Linux 6.18 refuses a tcp_rmem below it ("Invalid
        argument" for 4096 1460 1460, measured here), so a queue of one or two packets gets a
        window of a page, more than it holds."""
        mss = self.mtu - 40
        out: dict[str, dict[str, list[int]]] = {}
        for ns, recv in (("client", self.down), ("server", self.up)):
            rmax = max(BUF_FLOOR, recv.limit * mss)
            rmem = self.tcp.rmem if self.tcp.rmem != "auto" else [BUF_FLOOR, min(131072, rmax), rmax]
            wmem = self.tcp.wmem if self.tcp.wmem != "auto" else [4096, 16384, max(4 * 1024 * 1024, 2 * rmax)]
            out[ns] = {"tcp_rmem": list(rmem), "tcp_wmem": list(wmem)}
        return out

    def summary(self) -> str:
        def one(l: Link) -> str:
            if l.delay_series is not None:
                parts = [f"delay series {Path(l.delay_series.path).name} (mean {units.fmt_duration_human(l.delay_ns)})"]
            else:
                parts = [f"delay {units.fmt_duration(l.delay_ns)}"]
            if l.jitter_ns:
                parts.append(f"jitter {units.fmt_duration(l.jitter_ns)} {l.dist}")
            if l.trace is not None:
                parts.append(f"trace {Path(l.trace.path).name} (mean {l.trace.mean_bps / 1e6:.3f}Mbit)")
            else:
                parts.append(f"rate {units.fmt_rate(l.rate_bps) if l.rate_bps else 'unlimited'}")
            if l.ge:
                parts.append("loss GE(" + ",".join(units.fmt_percent(x) for x in l.ge) + ")")
            elif l.loss:
                parts.append(f"loss {units.fmt_percent(l.loss)}")
            parts.append(f"limit {l.limit}")
            parts += [e.describe() for e in l.episodes]
            return ", ".join(parts)

        return f"{self.name}: up [{one(self.up)}] down [{one(self.down)}] mtu {self.mtu}"

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "basis": self.basis,
            "source": self._source,
            "mtu": self.mtu,
            "seed": self.seed,
            "up": self.up.to_dict(),
            "down": self.down.to_dict(),
            "tcp": self.tcp.model_dump(),
            "input": self.model_dump(mode="json", by_alias=True, exclude_unset=True),
        }

    # ---------------------------------------------------------- loading --
    @classmethod
    def from_mapping(
        cls,
        data: Any,
        source: str = "<inline>",
        line: int = 1,
        lines: dict[tuple, int] | None = None,
        loc_prefix: tuple = (),
    ) -> "Profile":
        """An inline profile (e.g. inside an experiment file). `line` is where the mapping
        starts; `lines` (from yamlsrc.Doc.lines) gives per-key lines when the caller has them,
        with `loc_prefix` the mapping's location inside that document."""
        if not isinstance(data, dict):
            raise UserError(f"{source}:{line} {yamlsrc.dotted(loc_prefix)}: a profile must be a mapping (name: ..., rtt: ...)")
        doc = yamlsrc.Doc(data=data, source=source, lines=dict(lines or {}), start_line=line)
        # files the profile names are relative to the folder of the file it is written in
        src = Path(source)
        base = src.parent if src.suffix in (".yaml", ".yml") or src.is_file() else None
        prof = yamlsrc.validate(cls, doc, loc_prefix=loc_prefix, data=data, base_dir=base)
        prof._source = source
        prof._line = doc.line_of(loc_prefix)
        return prof


# The top-level keys of a profile: a file with none of them is not echoed (yamlsrc.load_docs).
_PROFILE_KEYS = frozenset(f.alias or n for n, f in Profile.model_fields.items())


def load_profiles_file(path: Path | str) -> list[Profile]:
    """Every profile in a YAML file (one document per profile, separated by ---)."""
    docs = yamlsrc.load_docs(path, fields=_PROFILE_KEYS, kind="profile")
    if not docs:
        raise UserError(f"{path}: no profile in the file (add name:, description:, ...)")
    out = []
    seen: dict[str, int] = {}
    for doc in docs:
        if not isinstance(doc.data, dict):
            raise UserError(f"{doc.source}:{doc.start_line} (top level): a profile must be a mapping (name: ..., rtt: ...)")
        prof = yamlsrc.validate(Profile, doc, base_dir=Path(path).parent)
        prof._source = str(path)
        prof._line = doc.start_line
        if prof.name in seen:
            raise UserError(f"{doc.source}:{doc.line_of(('name',))} name: {prof.name!r} already used at line {seen[prof.name]} (rename one)")
        seen[prof.name] = doc.line_of(("name",))
        out.append(prof)
    return out


_library_cache: dict[str, Profile] | None = None


def library(directory: Path | None = None) -> dict[str, Profile]:
    """Every shipped profile by name (all *.yaml files under emulation/profiles/)."""
    global _library_cache
    if directory is None and _library_cache is not None:
        return dict(_library_cache)
    d = directory or LIBRARY_DIR
    out: dict[str, Profile] = {}
    where: dict[str, str] = {}
    for f in sorted(d.glob("*.yaml")):
        for p in load_profiles_file(f):
            if p.name in out:
                raise UserError(f"{f}:{p._line} name: {p.name!r} also defined in {where[p.name]} (rename one)")
            out[p.name] = p
            where[p.name] = str(f)
    if directory is None:
        _library_cache = out
    return dict(out)


def load_profile(ref: str | Path) -> Profile:
    """A library name (`lte-good`), a YAML path, or `path.yaml#name` for one of several.

    Only a reference with a '/' or a .yaml/.yml ending is a path, and a path must name a .yaml or
    .yml file: a bare name never opens a file of the working directory, and `../../etc/shadow`
    is refused before it is read."""
    text = str(ref)
    name = None
    if "#" in text:
        text, name = text.rsplit("#", 1)
    p = Path(text)
    if p.suffix in (".yaml", ".yml") or "/" in text:
        if p.suffix not in (".yaml", ".yml"):
            raise UserError(f"{text}: not a .yaml or .yml file (give a profile file, or a library name such as "
                            "lte-good: 'pqshake net profiles' lists them)")
        profs = load_profiles_file(p)
        if name is None:
            if len(profs) > 1:
                raise UserError(
                    f"{text}: holds {len(profs)} profiles ({', '.join(x.name for x in profs[:6])}"
                    f"{', ...' if len(profs) > 6 else ''}); pick one with {text}#NAME"
                )
            return profs[0]
        for x in profs:
            if x.name == name:
                return x
        raise UserError(f"{text}: no profile named {name!r} (has: {', '.join(x.name for x in profs)})")
    lib = library()
    if text in lib:
        return lib[text]
    close = difflib.get_close_matches(text, lib.keys(), n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    raise UserError(f"unknown profile {text!r}: {hint}(list them with 'pqshake net profiles', or give a path to a .yaml file)")


def json_schema() -> dict[str, Any]:
    schema = Profile.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "pqshake link profile"
    schema["$comment"] = "Generated by `python -m pqshake.emulation.profiles --schema`; do not edit."
    return schema


def schema_text() -> str:
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":  # python -m pqshake.emulation.profiles --schema [--write]
    if "--write" in sys.argv:
        SCHEMA_PATH.write_text(schema_text())
        print(f"wrote {SCHEMA_PATH}")
    else:
        sys.stdout.write(schema_text())
