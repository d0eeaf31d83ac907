"""The experiment file: schema (pydantic, unknown keys refused), `include:` of shared defaults,
and one-line `file:line field: message` errors (the line of the file the value came from)."""

from __future__ import annotations

import hashlib
import inspect
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (BaseModel, ConfigDict, Discriminator, Field, PrivateAttr, Tag, ValidationError, ValidationInfo,
                      create_model, field_validator, model_validator)

from pqshake.errors import UserError
from pqshake.yamlsrc import Budget, Doc, clean_errors, describe, dotted, load_docs, located, short
from pqshake.yamlsrc import one_line as yamlsrc_one_line

from pqshake.rows import modes as M
from pqshake.rows.modes import fs0rtt as FS
from pqshake.rows import axes as A
from pqshake.rows import transports as T
from pqshake.rows.axes import core as C

# The allowed values come from the registries (pqshake/rows/modes/, pqshake/rows/transports/),
# in their order, so pydantic's message lists them as before: "Input should be 'tcp', ...".
Mode = Literal[M.NAMES]  # type: ignore[valid-type]
MODES: tuple[str, ...] = M.NAMES
Transport = Literal[T.NAMES]  # type: ignore[valid-type]
QuicEngine = Literal[tuple(T.QUIC_ENGINES)]  # type: ignore[valid-type]
TlsStack = Literal[tuple(T.TLS_STACKS)]  # type: ignore[valid-type]
TRANSPORTS: tuple[str, ...] = T.NAMES
SEED_MAX = 2**63 - 1  # the order seed, in the file or as --seed
# What a bare `on` (YAML 1.1: true) means where a field has a word for it (Experiment._on_off).
_ON_WORDS = {"cpu_placement": "auto", "quic_retry": "on", "early_response": "on"}
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
# capture_max_bytes: the pcapng cap (pqs-capture --max-bytes); the least holds the file's
# headers and a few frames
CAPTURE_MAX_BYTES_DEFAULT = 4 << 20
CAPTURE_MAX_BYTES_RANGE = (4096, 1 << 40)


def _parse_duration_ns(value: Any) -> int:
    from pqshake.emulation.units import parse_duration

    return parse_duration(value, what="a duration")


def _as_list(v: Any) -> Any:
    return [v] if isinstance(v, (str, int)) and not isinstance(v, bool) else v


class ExcludeRule(BaseModel):
    """A cell is excluded when it matches every key given (each key: one name, a list, or an
    @set; or a swept setting's key with one value or a list: pqshake/rows/axes/)."""

    model_config = ConfigDict(extra="allow", strict=True)
    group: list[str] | None = None
    sig: list[str] | None = None
    profile: list[str] | None = None
    mode: list[Mode] | None = None
    transport: list[Transport] | None = None

    @field_validator("group", "sig", "profile", "mode", "transport", mode="before")
    @classmethod
    def _listify(cls, v: Any) -> Any:
        return _as_list(v)

    @model_validator(mode="after")
    def _not_empty(self) -> "ExcludeRule":

        extra = dict(self.model_extra or {})
        for k in extra:
            if k not in A.keys():
                raise ValueError(f"unknown key {k!r}: a rule takes {', '.join(C.KEYS)} and the swept "
                                 f"settings ({', '.join(A.keys())})")
        for k, v in extra.items():
            setattr(self, k, v if isinstance(v, list) else [v])
        if not any((self.group, self.sig, self.profile, self.mode, self.transport, *extra)):
            raise ValueError("an exclude rule needs at least one of group, sig, profile, mode, transport")
        return self

    def settings(self) -> dict[str, list[Any]]:
        """The swept settings it names, each with its values."""
        return {k: getattr(self, k) for k in (self.model_extra or {})}


class Competing(BaseModel):
    """Bulk TCP flows (iperf3) sharing the dumbbell's bottleneck for the whole run."""

    model_config = ConfigDict(extra="forbid", strict=True)
    flows: int = Field(default=1, ge=0, le=8, description="iperf3 flows, client i -> server i")
    direction: Literal["up", "down"] = Field(default="up", description="up = client -> server (down: -R)")


class MininetTopologySpec(BaseModel):
    """`engine: mininet`: which topology the cells run on (emulation/mininet_topo.py)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    kind: Literal["dumbbell", "star", "chain"]
    clients: int = Field(default=1, ge=1, le=8, description="dumbbell: client/server pairs; star: clients")
    hops: list[str | dict[str, Any]] | None = Field(default=None, description="chain: one profile per hop, client side first")
    competing: Competing | None = Field(default=None, description="dumbbell: bulk flows through the bottleneck")
    name: str | None = Field(default=None, description="chain: the name its cells carry as profile (default chain-<hops>)")

    @model_validator(mode="after")
    def _consistent(self) -> "MininetTopologySpec":
        if self.kind == "chain":
            if not self.hops:
                raise ValueError("a chain needs hops: [profile, ...] (one per hop)")
            if len(self.hops) > 8:
                raise ValueError(f"a chain has at most 8 hops, not {len(self.hops)}")
            if self.clients != 1:
                raise ValueError("a chain has one client and one server (clients: 1)")
        elif self.hops is not None:
            raise ValueError(f"hops is for kind: chain; a {self.kind} shapes each link with the cell's profile")
        if self.competing is not None and self.kind != "dumbbell":
            raise ValueError("competing flows need kind: dumbbell (they share its bottleneck)")
        if self.name is not None and not re.match(r"^[a-z0-9][a-z0-9._-]{0,63}$", self.name):
            raise ValueError(f"name {self.name!r}: lower-case letters, digits, '.', '_' or '-'")
        return self


CHAIN_PROFILES_PLACEHOLDER = "<chain hops>"


class Adaptive(BaseModel):
    """samples: auto: stop a cell once the 95 % CI of its median is within +-ci (experiments/sampling.py)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    min: int = Field(default=50, ge=10, le=10_000_000, description="attempts before the target is judged")
    max: int = Field(default=2000, ge=10, le=10_000_000, description="attempts at most")
    ci: float = Field(default=0.01, gt=0, lt=1, description="target half-width of the median's 95 % CI, relative ('1%')")

    @field_validator("ci", mode="before")
    @classmethod
    def _pct(cls, v: Any) -> Any:
        if isinstance(v, str) and v.strip().endswith("%"):
            try:
                return float(v.strip()[:-1]) / 100
            except ValueError:
                raise ValueError(f"{v!r}: write a percentage such as 1%") from None
        return v

    @model_validator(mode="after")
    def _order(self) -> "Adaptive":
        if self.min > self.max:
            raise ValueError(f"min {self.min} > max {self.max} (make min <= max)")
        return self


class CpuPlacement(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    emulator: list[int] = Field(min_length=1, description="CPUs of the link emulator")
    endpoints: list[int] = Field(min_length=1, description="CPUs of client, server and probes")


def _duration_within(v: Any, least_ns: int, allowed: str, most_ns: int = 10_000_000_000) -> int:
    """A duration setting in ns, refused outside [least_ns, most_ns] with what is allowed."""
    ns = _parse_duration_ns(v)
    if ns < least_ns or ns > most_ns:
        raise ValueError(f"{v!r}: {allowed}")
    return ns


# The swept settings' defaults are their rows' (pqshake/rows/axes/), which the analysis reads for a
# run that does not set them.
_D = {a.key: a.default for a in A.REGISTRY}


class Experiment(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: str
    description: str | None = None
    groups: list[str] = Field(min_length=1)
    sigs: list[str] = Field(default_factory=lambda: ["ecdsa-p256"], min_length=1)
    profiles: list[str | dict[str, Any]] = Field(min_length=1)
    modes: list[Mode] = Field(default_factory=lambda: [M.FULL], min_length=1)
    transports: list[Transport] = Field(default_factory=lambda: [T.DEFAULT], min_length=1,
                                        description="tcp (TLS over TCP), quic (QUIC over UDP), turbotls (TurboTLS: "
                                        "first flights over UDP, the rest over TCP)")
    tcp_fastopen: bool = Field(default=False, description="also run every tcp cell as tcp+tfo (TCP Fast Open: "
                               "the first flight in the SYN once the first connection fetched a cookie)")
    early_response: Literal["on", "off"] = Field(
        default=_D["early_response"], description="0rtt cells: the server answers an "
        "accepted early request at once (0.5-RTT data)")
    quic_retry: Literal["on", "off"] = Field(
        default=_D["quic_retry"], description="quic cells: the server validates "
        "the client's address with a Retry round trip (on) or not (off)")
    qlog: bool = Field(default=False, description="quic cells: keep qlog traces under raw/<cell>/qlog/")
    quic_engines: list[QuicEngine] = Field(default_factory=lambda: [T.QUIC_ENGINE_DEFAULT], min_length=1,
                                           description="quic cells: the QUIC implementations to run each on "
                                           "(openssl: OpenSSL's own; ngtcp2: ngtcp2 over the same OpenSSL)")
    tls_stacks: list[TlsStack] = Field(default_factory=lambda: [T.TLS_STACK_DEFAULT], min_length=1,
                                       description="tcp cells: the TLS stacks to run each on (openssl: OpenSSL, the "
                                       "programs' default; s2n: s2n-tls on AWS-LC)")
    server_stacks: list[TlsStack] | None = Field(
        default=None, min_length=1, description="tcp cells: the servers' TLS stacks; each tcp cell of each stack in "
        "tls_stacks runs against a server of each of these (an s2n client against an OpenSSL server is its own "
        "cell, tcp+s2n-vs-openssl). Default: each client's own stack")
    quic_cc: Literal["reno", "cubic", "bbr"] | None = Field(default=None, description="ngtcp2 quic cells: "
                                                            "congestion control (default cubic)")
    quic_initial_rtt: int | None = Field(default=None, description="ngtcp2 quic cells: the RTT assumed before "
                                         "the first sample, ns ('100ms' in YAML; default 333ms)")
    quic_max_udp_payload: Annotated[int, Field(ge=1200, le=65527)] | None = Field(
        default=None, description="ngtcp2 quic cells: the largest UDP payload sent (default 1200)")
    turbo_requests: Annotated[int, Field(ge=1, le=1024)] | Literal["auto"] = Field(
        default="auto", description="turbotls cells: request datagrams per handshake (the most reply datagrams "
                                    "the server may send); auto = the model's server flight + 25 %")
    turbo_fallback: int = Field(default=10_000_000, description="turbotls cells: the client's wait after the "
                                "SYN-ACK before it carries on over TCP, ns ('10ms' in YAML)")
    samples: Annotated[
        Annotated[Annotated[int, Field(ge=1, le=10_000_000)], Tag("tag:n")] | Annotated[Literal["auto"], Tag("tag:auto")],
        Discriminator(lambda v: "tag:auto" if isinstance(v, str) else "tag:n"),
    ] = Field(
        description="measured attempts per cell, or auto (adaptive: until the median's CI is narrow enough)")
    adaptive: Adaptive | None = Field(default=None, description="samples: auto: min, max and the CI target")
    block: int = Field(default=20, ge=1, le=1_000_000, description="attempts per block (interleaved order, samples: auto)")
    warmup: int = Field(default=5, ge=0, le=100_000)
    bfe_n: int = Field(default=FS.DEFAULT_N, ge=FS.N_MIN, le=FS.N_MAX, description="fs0rtt cells: connections "
                       "one Bloom Filter Encryption key serves (each cell's server starts from a fresh key)")
    bfe_p: float = Field(default=FS.DEFAULT_P, description="fs0rtt cells: the key's false-positive probability "
                         "after bfe_n connections (0.001, or '2^-10')")
    repetitions: int = Field(default=1, ge=1, le=1000)
    concurrency: int = Field(default=1, ge=1, le=256)
    # auto: bench/slots_bench.py shows the same numbers both ways (docs/methodology.md "Slots")
    parallel: Annotated[int, Field(ge=1, le=32)] | Literal["auto"] = Field(
        default="auto", description="links side by side, each with its own namespaces, emulator, server and timer "
                               "(experiments/slots.py): auto packs them by CPU share under a budget; N at most N; "
                               "1 one cell at a time")
    cpu_wakeup: Literal["held", "os"] = Field(
        default="held", description="held: idle CPUs poll instead of halting while the run measures (a 0 us PM QoS "
                                    "request, pqshake/cpuwake.py); os: the machine's own idle states")
    response_bytes: int = Field(default=_D["response_bytes"], ge=0, le=1 << 34)
    wait_acked: bool = Field(default=False, description="after each handshake the timer waits until the server "
                             "acknowledged every byte the client sent (acked_ns; TCP transports), before the request")
    timeout: int = Field(default=10_000_000_000, description="per attempt, ns ('10s' in YAML)")
    failures_expected: bool = Field(default=False, description="failure is the measurement (a loss-to-death "
                                    "sweep): a cell none of whose measured attempts succeeded stays complete "
                                    "instead of failing")
    chain_depth: int = Field(
        default=_D["chain_depth"], ge=1, le=4, description="certificates sent: leaf + N-1 intermediates")
    inter_sig: str | None = Field(
        default=_D["inter_sig"], description="the intermediates' key algorithm (default: the sig's)")
    root_sig: str | None = Field(default=_D["root_sig"], description="the root's key algorithm, which signs the top "
                                 "certificate sent (default: the sig's)")
    cert_pad_bytes: int = Field(
        default=_D["cert_pad_bytes"], ge=0, le=60000, description="the leaf carries a non-critical extension "
        "of this many random bytes")
    cert_scts: int = Field(
        default=_D["cert_scts"], ge=0, le=16, description="the leaf carries an SCT list of this many SCTs "
        "(118 bytes each, an ECDSA log's)")
    suppress_intermediates: bool = Field(
        default=_D["suppress_intermediates"], description="the server sends the leaf alone; the client "
        "holds the intermediates")
    cert_compression: Literal["off", "zlib", "brotli", "zstd"] = Field(
        default=_D["cert_compression"], description="RFC 8879 certificate compression, both programs")
    client_auth: str | None = Field(
        default=_D["client_auth"], description="mutual TLS: the client chain's signature algorithm")
    client_inter_sig: str | None = Field(
        default=_D["client_inter_sig"], description="mutual TLS: the client chain's intermediates' "
        "key algorithm (default: client_auth)")
    client_root_sig: str | None = Field(
        default=_D["client_root_sig"], description="mutual TLS: the client chain's root's key "
        "algorithm (default: client_auth)")
    client_chain_depth: int = Field(default=_D["client_chain_depth"], ge=1, le=4)
    backend: Literal["auto", "netem", "userspace"] = Field(
        default="auto", description="auto: netem where the kernel has it, else the userspace emulator")
    order: Literal["interleaved", "shuffled", "sequential"] = Field(
        default="interleaved", description="interleaved: a profile's cells take turns in blocks; shuffled / "
                                           "sequential: each cell's attempts back to back")
    seed: int | None = Field(default=None, ge=0, le=SEED_MAX)
    exclude: list[ExcludeRule] = Field(default_factory=list)
    rtt_probes: int = Field(default=50, ge=0, le=10_000, description="achieved-RTT probes per cell")
    cpu_placement: Literal["auto", "off"] | CpuPlacement = Field(
        default="auto", description="the link emulator on CPUs of its own, client and server on the others "
                                    "(auto: the highest CPU for the emulator when there are >= 2)")
    engine: Literal["single-link", "mininet"] = Field(default="single-link", description="single-link (3 namespaces) or mininet")
    topology: MininetTopologySpec | None = Field(default=None, description="engine: mininet only")
    # Captures per cell (issue 24), declared after engine, which their validators read.
    capture: bool = Field(default=False, description="each cell's flows on the link as raw/<cell>/<cell>.pcapng "
                          "(pqs-capture) and the client's TLS secrets as raw/<cell>/<cell>.keys (NSS key log)")
    capture_cells: list[ExcludeRule] | None = Field(
        default=None, description="capture: true: only the cells matching one of these rules record (keys as in "
                                  "exclude: group, sig, profile, mode, transport); every cell when absent")
    capture_max_bytes: int = Field(default=CAPTURE_MAX_BYTES_DEFAULT, description="capture: true: each pcapng's cap "
                                   "in bytes; recording stops there (DONE capture.capped)")

    # The settings swept as matrix axes (pqshake/rows/axes/): key -> the values, each validated as
    # the field is; the field itself holds the first (validate_experiment fills both).
    _sweeps: dict[str, list[Any]] = PrivateAttr(default_factory=dict)
    _views: dict[tuple, "Experiment"] = PrivateAttr(default_factory=dict)

    @property
    def sweeps(self) -> dict[str, list[Any]]:
        return self._sweeps

    def with_settings(self, settings: tuple[tuple[str, Any], ...]) -> "Experiment":
        """The experiment as one cell sees it: each swept setting at the cell's value (a copy,
        made once per combination)."""
        if not settings:
            return self
        view = self._views.get(settings)
        if view is None:
            view = self._views[settings] = self.model_copy(update=dict(settings))
            view._views = {}
        return view

    def for_cell(self, cell: Any) -> "Experiment":
        return self.with_settings(getattr(cell, "settings", ()))

    # What the rows (pqshake/rows/transports/) ask of a cell's view of the experiment: the swept
    # settings' rows sit above the transports' (a setting applies or not by its cell's transport),
    # so a transport's plan check reads them through the view instead of importing them.
    def applies(self, key: str, cell: Any) -> bool:
        """Whether the swept setting `key` changes the cell (its row's applies)."""
        return A.get(key).applies(self, cell)

    def chain_sigs(self, cell: Any) -> list[tuple[str, Any]]:
        """The settings naming a signature algorithm (inter_sig, root_sig, client_auth, ...) that
        apply to the cell, as (key, value), in the rows' order."""
        return [(a.key, getattr(self, a.key)) for a in A.REGISTRY if a.sig and a.applies(self, cell)]

    def shown(self, key: str, value: Any) -> str:
        """A swept setting's value as tables, legends and exclude rules show it."""
        return A.get(key).show(value)

    def bound_kwargs(self) -> dict[str, Any]:
        """The handshake model's keywords for this view (every swept setting's value)."""
        return A.bound_kwargs(self)

    def dump(self) -> dict[str, Any]:
        """As plan.json records it: every field, a swept one as its list of values."""
        out = self.model_dump(mode="json")
        for k, values in self._sweeps.items():
            out[k] = [self.model_copy(update={k: v}).model_dump(mode="json", include={k})[k] for v in values]
        return out

    @model_validator(mode="after")
    def _tcp_fastopen(self) -> "Experiment":
        """tcp_fastopen: true runs each tcp cell a second time as transport tcp+tfo. It helps any
        mode (full, hrr and tls12 too: the cookie fetched by an earlier connection lets any first
        flight ride in the SYN), so it is not refused for any; quic cells are not affected."""
        tcp, tfo = T.TCP.name, T.TCP_TFO.name
        if self.tcp_fastopen and tcp not in self.transports:
            raise ValueError(f"tcp_fastopen: true adds a {tfo} variant of each {tcp} cell, but transports has no {tcp} "
                             f"(add {tcp} to transports, or remove tcp_fastopen)")
        if self.tcp_fastopen and tfo not in self.transports:
            i = self.transports.index(tcp)
            self.transports = self.transports[:i + 1] + [tfo] + self.transports[i + 1:]
        return self

    @model_validator(mode="after")
    def _quic_engines(self) -> "Experiment":
        """quic_engines: each quic cell runs once per engine, as that engine's row (quic for
        OpenSSL's, the default: its cells keep their ids; quic+ngtcp2 for ngtcp2)."""
        self._variant_rows("quic_engines", T.QUIC.name, [T.QUIC_ENGINES[e].name for e in self.quic_engines], "engine")
        knobs = [k for k in T.ENGINE_KNOBS if getattr(self, k) is not None]
        if knobs and not any(T.takes_engine_knobs(t) for t in self.transports):
            raise ValueError(f"{', '.join(knobs)}: settings of the ngtcp2 QUIC engine, but no cell runs it "
                             f"(add quic_engines: [{T.QUIC_ENGINE_DEFAULT}, ngtcp2], or remove them)")
        return self

    @model_validator(mode="after")
    def _tls_stacks(self) -> "Experiment":
        """tls_stacks: each tcp cell runs once per TLS stack, as that stack's row (tcp for OpenSSL,
        the default: its cells keep their ids and argv; tcp+s2n for s2n-tls on AWS-LC). With
        server_stacks, once per client stack and server stack: a pair of different stacks is a
        cross-stack row (tcp+s2n-vs-openssl: an s2n client, an OpenSSL server). After
        _tcp_fastopen: tcp+tfo is TCP Fast Open on OpenSSL, whichever stacks the tcp cells run."""
        tcp = T.TCP.name
        if self.tcp_fastopen and T.TLS_STACK_DEFAULT not in self.tls_stacks:
            # TCP Fast Open is OpenSSL's alone: without OpenSSL's tcp cells it would have no cell
            # of its own stack to be compared with, and the s2n cells would not use it.
            raise ValueError(f"tls_stacks: tcp_fastopen: true runs {T.TCP_TFO.name} on {T.TCP.tls_stack_text} beside "
                             f"its {tcp} cells, but tls_stacks has no {T.TLS_STACK_DEFAULT} (add "
                             f"{T.TLS_STACK_DEFAULT} to tls_stacks, or remove tcp_fastopen)")
        if self.server_stacks is not None and tcp not in self.transports:
            raise ValueError(f"server_stacks: {', '.join(self.server_stacks)} chooses the servers' TLS stacks of the "
                             f"{tcp} cells, but transports has no {tcp} (add {tcp} to transports, or remove server_stacks)")
        pairs = [(c, s) for c in self.tls_stacks for s in (self.server_stacks or [c])]
        self._variant_rows("tls_stacks", tcp, [T.TLS_STACK_PAIRS[p].name for p in pairs], "stack", "TLS stacks")
        return self

    def _variant_rows(self, key: str, base: str, rows: list[str], noun: str, nouns: str = "") -> None:
        """A key that runs each cell of transport base once per variant (quic_engines, tls_stacks):
        base's place in transports taken by the chosen variants' rows. Given without base, it is
        refused: a variant row written as a transport names its variant already, so the key would
        change nothing (a setting that changes nothing is refused)."""
        if key in self.model_fields_set and base not in self.transports:
            named = [t for t in self.transports if t in rows and t != base]
            raise ValueError(f"{key}: {', '.join(getattr(self, key))} chooses the {nouns or noun + 's'} of the {base} "
                             f"cells, but transports has no {base}"
                             + (f" ({', '.join(named)} names its {noun} itself)" if named else "")
                             + f" (add {base} to transports, or remove {key})")
        if base in self.transports:
            i = self.transports.index(base)
            rest = [t for t in self.transports if t not in rows and t != base]
            self.transports = rest[:i] + rows + rest[i:]

    @model_validator(mode="before")
    @classmethod
    def _chain_has_no_profiles(cls, data: Any) -> Any:
        # A chain's links are its hops: `profiles` is then not given (one cell profile, the chain).
        if isinstance(data, dict) and isinstance(data.get("topology"), dict) and data["topology"].get("kind") == "chain":
            if "profiles" in data:
                raise ValueError("profiles: a chain takes its profiles from topology.hops (remove profiles)")
            data = {**data, "profiles": [CHAIN_PROFILES_PLACEHOLDER]}
        return data

    @field_validator("bfe_p", mode="before")
    @classmethod
    def _bfe_p(cls, v: Any) -> float:
        return FS.parse_p(v)

    @model_validator(mode="after")
    def _adaptive(self) -> "Experiment":
        if self.samples == "auto" and self.adaptive is None:
            self.adaptive = Adaptive()
        if self.samples != "auto" and self.adaptive is not None:
            raise ValueError("adaptive: only with samples: auto (or remove adaptive)")
        return self

    @model_validator(mode="after")
    def _bfe_key_lasts_a_cell(self) -> "Experiment":
        """A cell's server starts from the unpunctured key and refuses connections past bfe_n
        (a deployment rotates its key then): every connection of a cell must fit, with bfe_n as
        the cell gets it (given or the default) and the attempts it may make (samples or
        adaptive.max, the warm-up, a priming handshake). After _adaptive, which fills in
        adaptive's defaults."""
        from .sampling import Target

        modes = [m for m in self.modes if M.get(m).bfe_key]
        if not modes:
            return self
        most = max(Target.of(self).max + self.warmup + (1 if M.resumable(m) else 0) for m in modes)
        if most > self.bfe_n:
            top = "adaptive.max" if self.samples == "auto" else "samples"
            given = "" if "bfe_n" in self.model_fields_set else " (the default)"
            raise ValueError(f"bfe_n: {self.bfe_n} connections per key{given}, but a cell makes up to {most} "
                             f"({top} + warmup): raise bfe_n to at least {most}, or lower {top}")
        return self

    @model_validator(mode="after")
    def _engine(self) -> "Experiment":
        if self.engine == "mininet" and self.topology is None:
            raise ValueError("engine: mininet needs topology: {kind: dumbbell | star | chain, ...}")
        if self.engine != "mininet" and self.topology is not None:
            raise ValueError("topology is for engine: mininet (add engine: mininet, or remove topology)")
        return self

    @field_validator("capture", mode="before")
    @classmethod
    def _capture(cls, v: Any, info: ValidationInfo) -> Any:
        if not isinstance(v, bool):
            raise ValueError(f"{short(v)}: true or false (true writes a pcapng and a TLS key log per cell)")
        if v and info.data.get("engine") == "mininet":
            raise ValueError("true with engine: mininet: pqs-capture records the single link's namespace "
                             "(remove capture, or use engine: single-link)")
        return v

    @field_validator("capture_cells", mode="before")
    @classmethod
    def _capture_cells(cls, v: Any, info: ValidationInfo) -> Any:
        if v is not None and info.data.get("capture") is False:
            raise ValueError("chooses the cells that capture, but capture is off (add capture: true, or remove "
                             "capture_cells)")
        if v is not None and (not isinstance(v, list) or not v):
            raise ValueError(f"{short(v)}: a list of rules such as [{{group: frodo640aes, profile: rtt200}}] "
                             "(every cell captures when capture_cells is left out)")
        return v

    @field_validator("capture_max_bytes", mode="before")
    @classmethod
    def _capture_max_bytes(cls, v: Any, info: ValidationInfo) -> Any:
        lo, hi = CAPTURE_MAX_BYTES_RANGE
        if type(v) is not int or not lo <= v <= hi:
            raise ValueError(f"{short(v)}: give the cap as a whole number of bytes from {lo} to {hi} "
                             f"(e.g. {CAPTURE_MAX_BYTES_DEFAULT} for 4 MiB)")
        if info.data.get("capture") is False:
            raise ValueError("a pcapng cap, but capture is off (add capture: true, or remove capture_max_bytes)")
        return v

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME_RE.match(v):
            raise ValueError(f"{v!r}: use letters, digits, '.', '_' or '-' (it names the results folder)")
        return v

    @field_validator("groups", "sigs", "modes", "profiles", "transports", mode="before")
    @classmethod
    def _listify(cls, v: Any) -> Any:
        return _as_list(v) if not isinstance(v, dict) else [v]

    @field_validator("cpu_placement", "cert_compression", "quic_retry", "early_response", mode="before")
    @classmethod
    def _on_off(cls, v: Any, info: ValidationInfo) -> Any:
        # YAML 1.1 reads a bare on/off (and true/false, yes/no) as a boolean: the field's words for
        # them; a true without one (cert_compression) is left for the field's own refusal
        if v is False:
            return "off"
        if v is True:
            return _ON_WORDS.get(info.field_name, v)
        return v

    @field_validator("turbo_requests", mode="before")
    @classmethod
    def _turbo_requests(cls, v: Any) -> Any:
        # One message naming what is allowed, instead of one per branch of the int | "auto" union.
        if v == "auto" or (type(v) is int and 1 <= v <= 1024):
            return v
        raise ValueError(f"{short(v)}: allowed values are a positive integer (1 to 1024) or auto")

    @field_validator("quic_initial_rtt", mode="before")
    @classmethod
    def _quic_initial_rtt(cls, v: Any) -> int | None:
        if v is None:
            return None
        return _duration_within(v, 1_000_000, "1ms to 10s (e.g. 100ms)")

    @field_validator("turbo_fallback", mode="before")
    @classmethod
    def _turbo_fallback(cls, v: Any) -> int:
        return _duration_within(v, 0, "0 to 10s (e.g. 10ms)")

    @field_validator("timeout", mode="before")
    @classmethod
    def _timeout(cls, v: Any) -> int:
        ns = _parse_duration_ns(v)
        if ns < 1_000_000:
            raise ValueError(f"{v!r} is too short (at least 1ms; e.g. 10s)")
        return ns


    @field_validator("groups", "sigs", "modes", "transports", "quic_engines", "tls_stacks", "server_stacks")
    @classmethod
    def _unique(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return v
        seen = [x for i, x in enumerate(v) if x in v[:i]]
        if seen:
            raise ValueError(f"{seen[0]!r} is listed twice (keep one)")
        return v


@dataclass
class ExperimentFile:
    """A loaded experiment: the validated model plus where every value came from."""

    path: Path
    model: Experiment
    data: dict[str, Any]
    key_doc: dict[str, Doc]  # top-level key -> the document (file) that supplied it
    files: list[Path] = field(default_factory=list)  # the experiment file, then its includes

    def where(self, *loc: Any) -> str:
        """'file:line field' for a location (for messages raised after validation)."""
        doc = self.key_doc.get(loc[0]) if loc else None
        if doc is None:
            return f"{self.path}:1 {dotted(loc)}"
        return f"{doc.source}:{doc.line_of(tuple(loc))} {dotted(loc)}"

    def sha256(self) -> str:
        h = hashlib.sha256()
        for f in self.files:
            h.update(f.read_bytes())
        return h.hexdigest()


# Top-level keys of an experiment file (or of a file it includes): a file with none of them is
# not echoed in messages (yamlsrc.load_docs).
_EXPERIMENT_KEYS = frozenset(Experiment.model_fields) | {"include"}


def _load_one(path: Path, stack: tuple[Path, ...],
              budget: Budget | None = None) -> tuple[dict[str, Any], dict[str, Doc], list[Path]]:
    # One budget (yamlsrc limits) for the file and everything it includes, however often.
    budget = budget or Budget()
    docs = load_docs(path, fields=_EXPERIMENT_KEYS, kind="experiment", budget=budget)
    if len(docs) != 1 or not isinstance(docs[0].data, dict):
        line = docs[1].start_line if len(docs) > 1 else 1
        raise UserError(f"{path}:{line} an experiment file holds one mapping (name:, groups:, ...), not "
                        f"{'several documents' if len(docs) > 1 else 'this'}")
    doc = docs[0]
    data: dict[str, Any] = {}
    key_doc: dict[str, Doc] = {}
    files = [path]
    inc = doc.data.get("include")
    if inc is not None:
        items = [inc] if isinstance(inc, str) else inc
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise UserError(f"{path}:{doc.line_of(('include',))} include: a file name or a list of file names")
        for i, name in enumerate(items):
            where = f"{path}:{doc.line_of(('include', i))} include[{i}]: {short(name)}"
            if "\0" in name:
                raise UserError(f"{where}: no such file (a file name has no NUL character)")
            p = Path(name)
            if not p.is_absolute():
                p = path.parent / p
            p = p.resolve()
            if p in stack:
                raise UserError(f"{where}: includes itself (circular include)")
            if p.is_dir():
                raise UserError(f"{where}: is a directory (name a .yaml file)")
            if not p.exists():
                raise UserError(f"{where}: no such file (path is relative to {path.parent})")
            if Path(name).suffix not in (".yaml", ".yml"):
                raise UserError(f"{where}: not a .yaml or .yml file (include experiment files only)")
            sub, sub_docs, sub_files = _load_one(p, stack + (p,), budget)
            data.update(sub)
            key_doc.update(sub_docs)
            files += [f for f in sub_files if f not in files]
    for k, v in doc.data.items():
        if k == "include":
            continue
        data[k] = v
        key_doc[k] = doc
    return data, key_doc, files


def load_experiment(path: Path | str) -> ExperimentFile:
    """Read, merge includes (the file's own keys win; later includes beat earlier ones) and
    validate. UserError with `file:line field: message` on any problem."""
    p = Path(path)
    if p.is_dir():
        raise UserError(f"{p}: is a directory; give an experiment file such as experiments/demo.yaml")
    if p.is_symlink() and not p.exists():
        raise UserError(f"{p}: a symbolic link to nothing (or to itself); point it at an experiment file")
    if not p.exists():
        alt = Path(__file__).parent / (p.name if p.suffix else p.name + ".yaml")
        if alt.is_file() and not p.parent.name:
            p = alt
        else:
            raise UserError(f"{p}: no such file (experiment files live in experiments/, e.g. experiments/demo.yaml)")
    p = p.resolve()
    data, key_doc, files = _load_one(p, (p,))
    try:
        model = validate_experiment(data)
    except Invalid as e:
        rows = []
        for loc, text in e.errors:
            doc = key_doc.get(loc[0]) if loc else None
            if doc is None:
                doc = next(iter(key_doc.values()), None)
            src = doc.source if doc else str(p)
            line = doc.line_of(loc) if doc else 1
            if loc and loc[0] not in key_doc:
                # a missing required key: point at the experiment file itself
                src, line = str(p), 1
            rows.append(f"{src}:{line} {dotted(loc)}: {text}")
        raise UserError(yamlsrc_one_line(rows)) from None
    return ExperimentFile(path=p, model=model, data=data, key_doc=key_doc, files=files)


class Invalid(Exception):
    """Validation errors as (location, message) pairs, located in the file's terms (a swept
    setting's value at (key, index))."""

    def __init__(self, errors: list[tuple[tuple, str]]):
        super().__init__(errors)
        self.errors = errors


def _errors(e: ValidationError, key: str | None = None, index: int = 0) -> list[tuple[tuple, str]]:
    out = []
    for err in clean_errors(e):
        loc, text = located(err, describe(err, Experiment))
        if key is not None and loc[:1] == (key,):
            loc = (key, index, *loc[1:])
        out.append((loc, text))
    return out


def _expand_sig_sets(data: dict[str, Any], index: dict[str, list[int]]) -> dict[str, Any]:
    """A setting that names one signature algorithm (inter_sig, root_sig, client_auth, ...) given
    an @set, alone or in its list: the set's members, a sweep of them, as `sigs: ['@pq']` expands
    (a member a set shares with another entry is taken once). The algorithms' code would
    otherwise meet '@pq' as a name (a traceback in the handshake model). index: for each list
    expanded, the file's index of each value (errors point at the entry the value came from)."""
    from pqshake.registry import load_registry

    out = dict(data)
    for a in A.REGISTRY:
        v = data.get(a.key)
        given = v if isinstance(v, list) else [v]
        if not a.sig or not any(isinstance(x, str) and x.startswith("@") for x in given):
            continue
        reg, names, at, from_sets = load_registry(), [], [], set()
        for i, x in enumerate(given):
            if isinstance(x, str) and x.startswith("@"):
                sets = reg.sets("sig")
                if x[1:] not in sets:
                    loc = (a.key, i) if isinstance(v, list) else (a.key,)
                    raise Invalid([(loc, f"unknown set {x!r}; sets: {', '.join('@' + s for s in sorted(sets))}")])
                new = [m for m in sets[x[1:]] if m not in names]
                from_sets.update(new)
            else:  # a name twice stays refused ("listed twice"); one a set brought already is not
                new = [] if x in from_sets else [x]
            names += new
            at += [i] * len(new)
        out[a.key] = names if len(names) > 1 else names[0]
        index[a.key] = at if isinstance(v, list) else []
    return out


def validate_experiment(data: dict[str, Any]) -> Experiment:
    """The model of an experiment's merged keys. A setting that is a matrix axis
    (pqshake/rows/axes/) may be a list: each value is validated as the setting's one value would
    be (the other settings as given, swept ones at their first value), its errors located at
    (key, index); the model holds the first value and, for a list of two or more, the sweep."""
    index: dict[str, list[int]] = {}
    try:
        return _validate(_expand_sig_sets(data, index))
    except Invalid as e:  # an expanded list's value: located at the entry that named it
        raise Invalid([(_file_loc(loc, index), text) for loc, text in e.errors]) from None


def _file_loc(loc: tuple, index: dict[str, list[int]]) -> tuple:
    if len(loc) < 2 or loc[0] not in index or not isinstance(loc[1], int):
        return loc
    at = index[loc[0]]
    if not at:  # one @set given as the setting's value
        return (loc[0], *loc[2:])
    return (loc[0], at[loc[1]], *loc[2:]) if loc[1] < len(at) else loc


@lru_cache(maxsize=None)
def _field_model(key: str) -> type[BaseModel]:
    """A model of one swept setting: its field (type, bounds, strictness) and its own field
    validators, which is all that judges one of its values. The whole experiment took ~1.4 ms
    per value (a 40,000-value list: a minute); this takes microseconds. Only while no other
    validator reads the setting: one that did would have to see each value in the whole, so the
    whole model is then validated for each (_WHOLE)."""
    if key in _WHOLE:
        return Experiment
    fi = Experiment.model_fields[key]
    validators = {}
    for name, dec in Experiment.__pydantic_decorators__.field_validators.items():
        if key in dec.info.fields:
            fn = dec.func.__func__
            # (cls, value, info) reading info.data reads other fields; one that reads only
            # info.field_name (_on_off) judges the value alone, as in this model
            if len(inspect.signature(fn).parameters) > 2 and "info.data" in inspect.getsource(fn):
                return Experiment
            validators[name] = field_validator(key, mode=dec.info.mode)(fn)
    return create_model(f"Experiment_{key}", __config__=Experiment.model_config, __validators__=validators,
                        **{key: (fi.annotation, fi)})


# Swept settings another validator of Experiment reads (a model validator's self.<key>): none yet;
# tests/hostile/test_plan_inputs.py checks this list against the validators' source.
_WHOLE: frozenset[str] = frozenset()


class _Seen:
    """The values of a list so far, by equality as `in` judges it (1 == 1.0 == True), in a set
    where they hash and in a list where they do not (a mapping value)."""

    def __init__(self, first: list[Any]) -> None:
        self._hashed: set[Any] = set()
        self._other: list[Any] = []
        for v in first:
            self.add(v)

    def has(self, v: Any) -> bool:
        try:
            return v in self._hashed
        except TypeError:
            return v in self._other

    def add(self, v: Any) -> None:
        try:
            self._hashed.add(v)
        except TypeError:
            self._other.append(v)


def _validate(data: dict[str, Any]) -> Experiment:

    lists = {k: v for k, v in data.items() if k in A.keys() and isinstance(v, list)}
    for k, v in lists.items():
        if not v:
            raise Invalid([((k,), "an empty list: give one value, or a list of the values to sweep")])
    first = {**data, **{k: v[0] for k, v in lists.items()}}
    try:
        model = Experiment.model_validate(first)
    except ValidationError as e:
        raise Invalid([(loc if loc[:1] not in [(k,) for k in lists] else (loc[0], 0, *loc[1:]), text)
                       for loc, text in _errors(e)]) from None
    sweeps: dict[str, list[Any]] = {}
    for k, given in lists.items():
        values = [getattr(model, k)]
        seen = _Seen(values)  # a 40,000-value list: a set, not `value in values` per value
        for i, x in enumerate(given[1:], 1):
            try:
                one = _field_model(k)
                value = getattr(one.model_validate({**first, k: x} if one is Experiment else {k: x}), k)
            except ValidationError as e:
                raise Invalid(_errors(e, k, i)) from None
            if seen.has(value):
                raise Invalid([((k, i), f"{short(x)} is listed twice (keep one)")])
            seen.add(value)
            values.append(value)
        if len(values) > 1:
            sweeps[k] = values
    model._sweeps = sweeps
    return model
