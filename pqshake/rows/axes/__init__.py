"""The settings a run can sweep: one row each (issue 32). A setting of the experiment file set to
one value sets it for every cell, as always; set to a list (`chain_depth: [1, 2, 3]`) it is a
matrix axis: each cell it changes runs once per value, and the value is part of the cell's id,
a column of every row of the run's tables, the programs' command lines and the cell's bound.

The plan, the programs, the estimate, the validity verdict and the analysis read this table; no
other module lists these settings. The matrix's own axes (profile, group, sig, mode, transport),
whose lists every cell takes a value of, are the rows of pqshake/rows/axes/core.py.
docs/adding-an-axis.md walks through adding a row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .. import modes as M
from .. import transports as T

_QUIC_ROWS = frozenset(t.name for t in T.QUIC_ENGINES.values())


def _always(exp: Any, cell: Any) -> bool:
    return True


def _no_args(value: Any, exp: Any, cell: Any) -> list[str]:
    return []


def _no_bound(value: Any) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class Axis:
    """A setting that can take one value per cell. `key` is its name in the experiment file (a
    field of experiments/model.py Experiment, whose validation each listed value goes through)
    and its column in the run's tables."""

    key: str
    label: str  # legends and table headers
    # Its part of a swept cell's id (letters, digits, '.', '-'): short and unambiguous.
    id_text: Callable[[Any], str]
    # A cell's value when the experiment file does not set it: the experiment model's default for
    # the key (experiments/model.py reads it here), and the value of a run from before the row.
    default: Any
    # Whether the value changes this cell (exp: the cell's view of the experiment with the rows
    # before this one applied; cell: the cell being expanded). A cell it does not change runs
    # once, with the first listed value, instead of once per value.
    applies: Callable[[Any, Any], bool] = _always
    # What the programs get for it beyond experiments/programs.py (which passes the settings it
    # has always passed): pqs-server's and pqs-timer's options for a value.
    server_args: Callable[[Any, Any, Any], list[str]] = _no_args
    timer_args: Callable[[Any, Any, Any], list[str]] = _no_args
    # The handshake model's keywords for a value (bounds.BoundCell.of,
    # analysis/bound.py): what the setting changes in the bound.
    bound: Callable[[Any], dict[str, Any]] = _no_bound
    # A value as tables and legends show it (None: str()).
    text: Callable[[Any], str] | None = None
    # Its values name signature algorithms (None: the default): the plan checks them against the
    # registry like the sigs, and against TLS 1.2 in the cells that speak it and it applies to.
    sig: bool = False
    # Given in the file while it applies to no cell, it would change nothing: the plan refuses it
    # with this (what it is for and the way out; {keys} names it). None: not checked.
    unused: str | None = None

    def show(self, value: Any) -> str:
        return self.text(value) if self.text is not None else str(value)

    @property
    def column(self) -> str:
        return column(self.key)



AS_LEAF = "as leaf"


def _sig_or_none(v: Any) -> str | None:
    # as a table shows it: "off" (or nothing) for no client certificate, AS_LEAF for a CA of the
    # leaf's algorithm
    return None if v is None or v != v or v in ("", "off", "None", AS_LEAF) else str(v)


def _flag(v: Any) -> bool:
    # a boolean setting as the file, the model or a table gives it
    return v in (True, "on", "True", "true", 1)


def _on_off(v: Any) -> str:
    return "on" if v in ("on", True) else "off"


# What the chain settings are for, when no cell uses them (Axis.unused).
_CHAIN = ("settings of the server's certificate chain, but no cell's handshake sends it (resumed and 0-RTT handshakes "
          "do not; add full to modes, or remove {keys})")
_INTER = "settings of the intermediates, but no cell sends a chain with one (set chain_depth: 2 or more, or remove {keys})"
_CLIENT = "the client chain's CAs under mutual TLS, but client_auth is not set (add client_auth, or remove {keys})"

REGISTRY: list[Axis] = [
    # The server's chain: leaf plus chain_depth - 1 certificates. A resumed or 0-RTT handshake
    # sends no chain: those cells run once.
    Axis("chain_depth", "chain depth", lambda v: f"chain{v}", default=1,
         applies=lambda exp, cell: M.get(cell.mode).certificate,
         bound=lambda v: {"chain_depth": int(v)}, unused=_CHAIN),
    # The chain's other levels and size (pqs-server --inter-sig, --root-sig, --cert-pad-bytes,
    # --cert-scts, --suppress-intermediates): only a handshake that sends the chain; the
    # intermediates' settings only where there are some.
    Axis("inter_sig", "intermediates", lambda v: f"inter-{_sig_or_none(v) or 'leaf'}", default=None,
         applies=lambda exp, cell: M.get(cell.mode).certificate and exp.chain_depth > 1,
         server_args=lambda v, exp, cell: ["--inter-sig", v] if _sig_or_none(v) else [],
         bound=lambda v: {"inter_sig": _sig_or_none(v)}, text=lambda v: _sig_or_none(v) or AS_LEAF, sig=True,
         unused=_INTER),
    Axis("root_sig", "root", lambda v: f"root-{_sig_or_none(v) or 'leaf'}", default=None,
         applies=lambda exp, cell: M.get(cell.mode).certificate,
         server_args=lambda v, exp, cell: ["--root-sig", v] if _sig_or_none(v) else [],
         bound=lambda v: {"root_sig": _sig_or_none(v)}, text=lambda v: _sig_or_none(v) or AS_LEAF, sig=True,
         unused=_CHAIN),
    Axis("cert_pad_bytes", "padding", lambda v: f"pad{v}", default=0, applies=lambda exp, cell: M.get(cell.mode).certificate,
         server_args=lambda v, exp, cell: ["--cert-pad-bytes", str(v)] if int(v) else [],
         bound=lambda v: {"cert_pad_bytes": int(v)}, unused=_CHAIN),
    Axis("cert_scts", "SCTs", lambda v: f"sct{v}", default=0, applies=lambda exp, cell: M.get(cell.mode).certificate,
         server_args=lambda v, exp, cell: ["--cert-scts", str(v)] if int(v) else [],
         bound=lambda v: {"cert_scts": int(v)}, unused=_CHAIN),
    Axis("suppress_intermediates", "suppressed intermediates", lambda v: f"suppress-{_on_off(_flag(v))}", default=False,
         applies=lambda exp, cell: M.get(cell.mode).certificate and exp.chain_depth > 1,
         server_args=lambda v, exp, cell: ["--suppress-intermediates"] if _flag(v) else [],
         bound=lambda v: {"suppress_intermediates": _flag(v)}, text=lambda v: _on_off(_flag(v)), unused=_INTER),
    # RFC 8879, offered and accepted by both programs (the server's chain compressed once); TLS 1.3
    # only: the plan refuses it in a tls12 cell (plan.check_cells_can_run) rather than label the
    # cell compressed.
    Axis("cert_compression", "certificate compression", lambda v: f"comp-{v}", default="off",
         applies=lambda exp, cell: M.get(cell.mode).certificate,
         server_args=lambda v, exp, cell: ["--cert-comp", v] if v != "off" else [],
         timer_args=lambda v, exp, cell: ["--cert-comp", v] if v != "off" else [], unused=_CHAIN),
    # Mutual TLS: the client chain's signature algorithm (none: off).
    Axis("client_auth", "client auth", lambda v: f"mtls-{v or 'off'}", default=None,
         bound=lambda v: {"client_auth": _sig_or_none(v)}, text=lambda v: _sig_or_none(v) or "off", sig=True),
    # The client chain's depth before its levels: whether it has intermediates is judged at the
    # cell's depth.
    Axis("client_chain_depth", "client chain depth", lambda v: f"cchain{v}", default=1,
         applies=lambda exp, cell: exp.client_auth is not None,
         bound=lambda v: {"client_chain_depth": int(v)},
         unused="the client chain's depth under mutual TLS, but client_auth is not set (add client_auth, or remove "
                "{keys})"),
    # The client chain's other levels under mutual TLS (pqs-server generates it): the root signs
    # the leaf at any depth, intermediates exist from client_chain_depth 2.
    Axis("client_inter_sig", "client intermediates", lambda v: f"cinter-{_sig_or_none(v) or 'leaf'}", default=None,
         applies=lambda exp, cell: exp.client_auth is not None and exp.client_chain_depth > 1,
         server_args=lambda v, exp, cell: ["--client-inter-sig", v] if _sig_or_none(v) else [],
         text=lambda v: _sig_or_none(v) or AS_LEAF, sig=True,
         unused="the client chain's intermediates under mutual TLS, but no cell's client chain has one (set "
                "client_auth and client_chain_depth: 2 or more, or remove {keys})"),
    Axis("client_root_sig", "client root", lambda v: f"croot-{_sig_or_none(v) or 'leaf'}", default=None,
         applies=lambda exp, cell: exp.client_auth is not None,
         server_args=lambda v, exp, cell: ["--client-root-sig", v] if _sig_or_none(v) else [],
         text=lambda v: _sig_or_none(v) or AS_LEAF, sig=True, unused=_CLIENT),
    # The response after the handshake; a handshake-only transport (QUIC) has none.
    Axis("response_bytes", "response bytes", lambda v: f"resp{v}", default=0,
         applies=lambda exp, cell: not T.get(cell.transport).handshake_only,
         unused="the response after the handshake, but no cell's transport carries one here (the QUIC cells are "
                "handshake only; add tcp to transports, or remove {keys})"),
    Axis("early_response", "early response", lambda v: f"early-{_on_off(v)}", default="on",
         applies=lambda exp, cell: M.get(cell.mode).early_data, text=_on_off,
         unused="how the server answers early data, but no cell sends any (add 0rtt or fs0rtt to modes, or remove "
                "{keys})"),
    Axis("quic_retry", "QUIC Retry", lambda v: f"retry-{_on_off(v)}", default="on",
         applies=lambda exp, cell: cell.transport in _QUIC_ROWS,
         bound=lambda v: {"quic_retry": _on_off(v) == "on"}, text=_on_off,
         unused="settings of the QUIC cells, but no cell runs over QUIC (add quic to transports, or remove {keys})"),
]


# A swept setting's value in the analysis for a cell it does not change (a QUIC setting of a TCP
# cell, the chain depth of a resumed handshake).
NOT_APPLIED = "-"


def column(key: str) -> str:
    """Its column in the run's tables (samples, server, cells) and in the analysis: the prefix
    keeps it apart from a transport's own column of the same name (quic_retry)."""
    from pqshake.results import AXIS_PREFIX

    return f"{AXIS_PREFIX}{key}"


def keys() -> tuple[str, ...]:
    return tuple(a.key for a in REGISTRY)


def get(key: str) -> Axis:
    for a in REGISTRY:
        if a.key == key:
            return a
    raise KeyError(key)


def find(key: str) -> Axis | None:
    return next((a for a in REGISTRY if a.key == key), None)


def bound_kwargs(exp: Any) -> dict[str, Any]:
    """The handshake model's keywords for a cell's view of the experiment (every axis's value,
    swept or not)."""
    return bound_kwargs_of({a.key: getattr(exp, a.key, a.default) for a in REGISTRY})


def bound_kwargs_of(values: dict[str, Any]) -> dict[str, Any]:
    """The same from each axis's value by key (the analysis: as its tables show them)."""
    out: dict[str, Any] = {}
    for a in REGISTRY:
        out.update(a.bound(values[a.key]))
    return out


def program_args(exp: Any, cell: Any, server: bool) -> list[str]:
    """What the axes add to pqs-server's (server) or pqs-timer's command line for a cell."""
    out: list[str] = []
    for a in REGISTRY:
        fn = a.server_args if server else a.timer_args
        out += fn(getattr(exp, a.key, a.default), exp, cell)  # an experiment without the setting: its default
    return out


def id_suffix(settings: tuple[tuple[str, Any], ...]) -> str:
    """A swept cell's id part: one `__<id_text>` per swept setting, in the rows' order."""
    return "".join(f"__{get(k).id_text(v)}" for k, v in settings)


def cell_id(values: dict[str, str], repetition: int, settings: tuple[tuple[str, Any], ...] = ()) -> str:
    """A cell's id, stable across runs and resumes: the matrix axes' parts (core.py id_parts:
    profile__group__sig__mode[__transport]), one part per swept setting that changes the cell
    (__chain2), then __r<repetition>."""
    from .core import id_parts

    return f"{id_parts(values)}{id_suffix(settings)}__r{repetition}"


def expand(exp: Any, cell: Any) -> list[tuple[tuple[str, Any], ...]]:
    """The settings a cell runs with, one tuple per variant: for each swept axis (a list in the
    file) that changes the cell, one variant per value. A swept axis that does not change the
    cell, or one not swept, adds nothing: the cell runs with the experiment's own field (the
    file's value, or the first listed) and its tables show NOT_APPLIED for a swept one."""
    variants: list[tuple[tuple[str, Any], ...]] = [()]
    for a in REGISTRY:
        values = exp.sweeps.get(a.key)
        if not values:
            continue
        out = []
        for v in variants:
            if a.applies(exp.with_settings(v), cell):
                out += [v + ((a.key, x),) for x in values]
            else:
                out.append(v)
        variants = out
    return variants
