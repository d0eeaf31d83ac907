"""A transport row's class (Transport), its columns and report sections, and the checks the row
modules share. The rows themselves are the package's (__init__.py REGISTRY); docs/adding-a-transport.md.

A row carries everything the rest of pqshake asks of a transport: its name and look, what its
model cannot price of a mode and why, the smallest MTU it runs on, the options it adds to the
programs' command lines, its handshake model, its plan checks, the settings the plan and the cell
record keep, and its summary columns."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from .. import modes as M


@dataclass(frozen=True)
class Column:
    """A column a transport's JSON member becomes: `raw` in samples / server / cells.parquet (the
    runner's flattened name), `name` in the analysis (analysis/columns.py adds it to its maps).
    kind: "count" (a number; null, or -1 in synthetic data, where it does not apply), "flag" (a
    boolean, null for the other transports' rows) or "text". synthetic: analysis/synthetic.py
    writes it (from the row's synthetic_samples / synthetic_server)."""

    raw: str
    name: str
    kind: str = "count"
    synthetic: bool = True


@dataclass(frozen=True)
class ReportSection:
    """The transport's own table in report.md (analysis/tables.py transport_markdown renders it
    after the cell, its median and its ratio to TLS/TCP). columns: (head, unit, format, summary
    columns) with format "share" (a fraction shown in %), "count" (no decimals), "mean" (2
    decimals), "ms" (1 decimal) or "pair" ("a/b", no decimals). text: the paragraph above the
    table, given the summary's params (the run's settings are there)."""

    title: str
    columns: tuple[tuple[str, str, str, tuple[str, ...]], ...]
    text: Callable[[dict], str]


@dataclass(frozen=True)
class Unpriced:
    """What a transport's handshake model cannot price, told by the mode row's properties
    (pqshake/rows/modes/ Mode), never by its name: `has` says whether a row has it, `why` the
    plan's reason for refusing such a mode, given the row and the registry's modes the model does
    price (priced())."""

    has: Callable[[M.Mode], Any]
    why: Callable[[M.Mode, tuple[str, ...]], str]


@lru_cache(maxsize=None)
def priced(unpriced: tuple[Unpriced, ...]) -> tuple[str, ...]:
    """The registry's modes a model prices, in its order: those with none of `unpriced`."""
    return tuple(m.name for m in M.REGISTRY if not any(u.has(m) for u in unpriced))


def unpriced_why(unpriced: tuple[Unpriced, ...], row: M.Mode) -> str | None:
    """The plan's reason for a mode row a model cannot price (the first of `unpriced` it has),
    None for one it prices."""
    for u in unpriced:
        if u.has(row):
            return u.why(row, priced(unpriced))
    return None


def and_list(names: tuple[str, ...]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return " and ".join(names) if len(names) < 3 else f"{', '.join(names[:-1])} and {names[-1]}"


class Transport:
    """A transport's row. Class attributes are the data; methods the behaviour, with the
    defaults of a TLS-over-TCP-like transport that needs nothing extra."""

    name: str = ""
    label: str = ""  # figure legends and captions ("TLS/TCP")
    short: str = ""  # table cells and per-transport panel titles ("TCP"); "" = the name
    colour: str = "#777777"
    linestyle: str | tuple = "-"  # a named matplotlib style, or a dash pattern (offset, (on, off, ...))
    # Its dash in words for captions where it is a pattern; "" for a named style (the caption names it).
    linestyle_text: str = ""
    marker: str = "o"
    bar_hatch: str = ""  # over its colour in bar charts ("": none; a cross-stack row's, pqshake/rows/transports/tcp.py)
    rank: int = 9  # place in tables and figures (not the registry order, which is the file's)
    min_mtu: int = 0  # the smallest link MTU it runs on (plan refusal, synthetic cells)
    # What the programs run it as: --transport NAME and the implementation (--tls-stack or
    # --quic-engine NAME). The modes the programs refuse, and why, are theirs: `pqs-timer
    # --describe` (pqshake/programs.py) says them for this pair; no row copies them.
    program_transport: str = ""  # "" = the row's name
    implementation: str = "openssl"
    # What its handshake model cannot price of a mode, by the mode row's properties (Unpriced, in
    # order: the first a row has gives the reason): the plan refuses those modes with its own
    # reason where the programs run them. A mode made of what it prices needs no edit here.
    unpriced: tuple[Unpriced, ...] = ()
    # The modes the one-round-trip figure compares for it (analysis/figs/onertt.py).
    onertt_modes: tuple[str, ...] = (M.FULL,)
    # Its cells' ids have no transport part (cells that predate transports keep their ids).
    bare_cell_id: bool = False
    # The plan runs its cells without a response and without early data (its model prices neither),
    # and gives pqs-server neither option.
    handshake_only: bool = False
    # Its attempts carry the client socket's TCP_INFO figures (the tcp_* columns); QUIC's do not.
    over_tcp: bool = True
    # Its own columns in samples / server / cells.parquet (JSON members), in the tables' order.
    sample_columns: tuple[Column, ...] = ()
    server_columns: tuple[Column, ...] = ()
    cell_columns: tuple[Column, ...] = ()
    # Its attempts' up / down byte counts where TCP_INFO has none (analysis names; the summary's
    # bytes_up / bytes_down and the bytes figure take them), and what they count, for captions.
    payload_bytes: tuple[str, str] | None = None
    payload_bytes_text: str = ""
    # A flag column: the attempt gave up its own path and carried on over TCP; the fallback
    # figure (analysis/figs/onertt.py) draws its share against loss. fallback_text says what
    # the fallback is, for the caption.
    fallback_column: str | None = None
    fallback_text: str = ""
    # What its handshake time covers, for captions that compare transports ("" says nothing).
    timing_text: str = ""
    # Its section in report.md (None: the summary table says all).
    report: ReportSection | None = None

    def program(self) -> Any:
        """What the built programs say of this row (pqshake.programs.Implementation); None when
        they are not built, or do not have it."""
        from pqshake.programs import describe

        d = describe()
        return d.get(self.program_transport or self.name, self.implementation) if d is not None else None

    def why_refused(self, mode: str) -> str | None:
        """Why it does not run mode (None: it does): the programs' words where they refuse it,
        else the plan's own reason (what its model cannot price of the mode's row)."""
        im = self.program()
        if im is not None and im.mode_why(mode):
            return f"pqs-timer: {im.mode_why(mode)}"
        return unpriced_why(self.unpriced, M.of(mode))

    @property
    def modes(self) -> tuple[str, ...]:
        """The modes it runs, in the modes registry's order."""
        return tuple(m for m in M.NAMES if self.why_refused(m) is None)

    @property
    def table_label(self) -> str:
        return self.short or self.name

    def line_kw(self) -> dict[str, str]:
        """Matplotlib keywords of its line in figures that compare transports."""
        return {"color": self.colour, "linestyle": self.linestyle, "marker": self.marker}

    def ecdf_kw(self) -> dict[str, str]:
        """Keywords of its curve in the per-transport ECDF figure (analysis/figs/transport.py): its
        colour and dash (no marker on a step curve)."""
        return {"linestyle": self.linestyle, "color": self.colour}

    # --- the C programs' command lines (experiments/programs.py adds these at the end) ---
    def server_args(self, cell: Any, exp: Any, qlog: Path | None) -> list[str]:
        return []

    def timer_args(self, cell: Any, exp: Any, qlog: Path | None) -> list[str]:
        return []

    # --- the plan ---
    def check(self, ef: Any, cells: list[Any], profs: dict[str, Any]) -> None:
        """Refuse, before any network, this transport's cells the programs or the link cannot run.
        `cells` are this transport's cells only."""
        refuse_modes(self, ef, cells)
        refuse_small_mtu(self, ef, cells, profs, what="")

    def plan_settings(self, m: Any, present: bool) -> dict[str, Any]:
        """Its experiment settings in the plan summary (None when it has no cell)."""
        return {}

    def plan_note(self, m: Any) -> str:
        """Its settings in `pqshake plan`'s transports line ("" for none)."""
        return ""

    def cell_info(self, exp: Any) -> dict[str, Any]:
        """What a cell of it records of the experiment (DONE, cells.parquet)."""
        return {}

    def keeps_qlog(self, exp: Any) -> bool:
        return False

    # --- the handshake model (pqshake/rows/bounds.py handshake_bound hands a BoundCell to it) ---
    def bound(self, rtt_s: float, sizes: tuple[int, int, int, int], **kw: Any):
        raise NotImplementedError

    def can_bound(self, mode: str, mtu: int) -> bool:
        """Whether its model has a bound for a cell of this mode on this MTU (analysis/bound.py
        leaves the others without one)."""
        return mode in self.modes

    def engine_extra_s(self, rtt_s: float, sizes: tuple[int, int, int, int], exp: Any, mode: str) -> float:
        """For planning only, never in the bound: the wait its implementation is measured to add
        to the bound's (round trips, timers; docs/methodology.md, "What is an engine's"). sizes:
        (share_c, share_s, sig_pk, sig_len) as for bound."""
        return 0.0

    # --- the summary (analysis/summary.py): its own columns, NaN for other transports ---
    def summary_attempts(self, ctx: Any) -> None:
        """Columns from the client's attempts, added to ctx.out."""

    def summary_server(self, ctx: Any) -> None:
        """Columns from the server's connections, added to ctx.out."""

    # --- a run's settings the analysis needs (analysis/load.py; the bound's keywords) ---
    def run_settings(self, exp: dict) -> dict[str, Any]:
        """Its settings from plan.json's experiment section (an older run without them: the
        defaults), as keywords of its bound()."""
        return {}

    def merge_settings(self, each: list[dict[str, Any]]) -> dict[str, Any]:
        """Its settings for runs analysed together, from each run's run_settings()."""
        return each[0] if each else {}

    # --- synthetic runs (analysis/synthetic.py): plausible values of its own columns ---
    def synthetic_penalty(self, rng: Any, b: Any, loss: float, rtt_s: float, n: int) -> tuple[Any, dict[str, Any]]:
        """Time its path adds to n attempts of a cell with bound b (seconds, or 0.0), and what
        synthetic_samples needs of it. Draws from rng only if it adds something."""
        return 0.0, {}

    def synthetic_samples(self, spec: Any, a: dict[str, Any]) -> dict[str, Any]:
        """Arrays of its sample_columns (raw names) for one cell's attempts (a: analysis/synthetic.py
        _cell_arrays, with the bound as a["b"]); a column left out is null."""
        return {}

    def synthetic_server(self, spec: Any, a: dict[str, Any], m: int) -> dict[str, Any]:
        """Arrays of its server_columns for one cell's m server connections."""
        return {}

    def synthetic_cell(self, spec: Any) -> dict[str, Any]:
        """Its cell_columns for one of its cells."""
        return {}

    def synthetic_plan(self, spec: Any, present: bool) -> dict[str, Any]:
        """Its settings in plan.json's experiment section (present: the run has its cells)."""
        return {}


def refuse_modes(t: Transport, ef: Any, cells: list[Any]) -> None:
    for c in cells:
        refuse_mode(t, ef, c)


def refuse_mode(t: Transport, ef: Any, c: Any, drop: str | None = None) -> None:
    """A cell whose mode the transport does not run: the reason, and the three ways out. drop: how
    the file drops the transport's cells where that is not "<name> from transports" (a row the
    file chose through another key, such as tls_stacks)."""
    from pqshake.errors import UserError

    if c.mode not in t.modes:
        why = t.why_refused(c.mode) or f"{t.name} runs {', '.join(t.modes)} only"
        raise UserError(f"{ef.where('transports')}: mode {c.mode} cannot run over {t.name} ({why}); remove "
                        f"{c.mode} from modes or {drop or f'{t.name} from transports'}, or add the exclude rule "
                        f"{{transport: {t.name}, mode: {c.mode}}}")


def refuse_small_mtu(t: Transport, ef: Any, cells: list[Any], profs: dict[str, Any], what: str) -> None:
    """A profile whose MTU is below t.min_mtu; `what` names the datagram in the message."""
    from pqshake.errors import UserError

    from ..profile import profile_figures

    if not t.min_mtu:
        return
    where = ef.where("transports")
    for name in dict.fromkeys(c.profile for c in cells):
        mtu = profile_figures(profs[name])["mtu"]
        if mtu < t.min_mtu:
            raise UserError(f"{where}: profile '{name}' has MTU {mtu}, below the {t.min_mtu} bytes a 1200-byte "
                            f"{what} needs (IPv4 20 + UDP 8); raise its mtu to >= {t.min_mtu}, or add "
                            f"the exclude rule {{transport: {t.name}, profile: {name}}}")


