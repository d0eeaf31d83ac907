"""What every figure kind shares: the context (summary, samples, palette), the figure record, Skip,
the configured-figure axes and the legend."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from .. import style as ST
from ..columns import TRANSPORT_ORDER
from ..report import Analysis, provenance_line
from ..summary import MODE_ORDER


class Skip(Exception):
    """The experiment has no data for this figure kind (str = the one-line reason)."""


@dataclass(frozen=True)
class Kind:
    """A figure kind of a family's KINDS: what draws it (draw(ctx) -> [FigOut], or Skip) and what it
    draws, in words (the figure table of analysis/README.md is made of these)."""

    draw: Callable[["Ctx"], list["FigOut"]]
    about: str


@dataclass
class FigOut:
    name: str
    fig: object
    title: str
    caption: str
    files: list[Path] = field(default_factory=list)


@dataclass
class Ctx:
    a: Analysis
    style: str
    pal: ST.Palette
    t: pd.DataFrame  # summary
    ok: pd.DataFrame  # successful client attempts: CELL_KEY + ms
    srv: pd.DataFrame | None  # successful server-side connections: CELL_KEY + ms
    profiles: list[str] | None  # --profile filter
    # The swept settings this context is restricted to (per_setting): column -> value as shown.
    settings: dict[str, str] = field(default_factory=dict)

    def per_setting(self) -> list["Ctx"]:
        """A run that sweeps settings (pqshake/rows/axes/) draws each figure once per combination
        of their values, so no line pools cells of different settings; otherwise [self]."""
        from dataclasses import replace

        from pqshake.rows.axes import NOT_APPLIED

        cols = [c for c in self.a.run.axes if c in self.t.columns]
        if not cols:
            return [self]
        rows = self.t[cols].astype(str).drop_duplicates()
        # each combination some cell has; a cell a setting does not change is in every figure of it
        full = rows[~(rows == NOT_APPLIED).any(axis=1)]
        out = []
        for combo in (full if len(full) else rows).to_dict("records"):
            def pick(df: pd.DataFrame) -> pd.DataFrame:
                m = np.ones(len(df), dtype=bool)
                for c, v in combo.items():
                    col = df[c].astype(str)
                    m &= ((col == v) | (col == NOT_APPLIED)).to_numpy()
                return df[m]

            out.append(replace(self, t=pick(self.t), ok=pick(self.ok), srv=None if self.srv is None else pick(self.srv),
                               settings=combo))
        return out

    def value(self, key: str):
        """A swept setting's value for this context's cells: the one it is restricted to, the
        one its cells share, else the run's (Run.setting)."""
        from pqshake.rows import axes as AX

        col = AX.column(key)
        v = self.settings.get(col)
        if v is None and col in self.t.columns and self.t[col].astype(str).nunique() == 1:
            v = str(self.t[col].iloc[0])
        return self.a.run.setting(key, v)

    def named(self, outs: list["FigOut"]) -> list["FigOut"]:
        """Figures of a per_setting context: the settings in the file name, title and caption."""
        if not self.settings:
            return outs
        from pqshake.rows import axes as AX

        rows = [AX.get(c.removeprefix("axis_")) for c in self.settings]
        part = "-".join(a.id_text(self.settings[a.column]) for a in rows)
        text = ", ".join(f"{a.label} {self.settings[a.column]}" for a in rows)
        for o in outs:
            o.name = f"{o.name}-{part}"
            o.title = f"{o.title} ({text})"
            o.caption = f"{o.caption} Cells with {text}."
        return outs

    @property
    def transports(self) -> list[str]:
        have = set(self.t["transport"])
        return [x for x in TRANSPORT_ORDER if x in have] + sorted(have - set(TRANSPORT_ORDER))

    def only_transport(self, tr: str) -> "Ctx":
        """The same context restricted to one transport's cells."""
        from dataclasses import replace

        return replace(self, t=self.t[self.t["transport"] == tr], ok=self.ok[self.ok["transport"] == tr],
                       srv=None if self.srv is None else self.srv[self.srv["transport"] == tr])

    @property
    def prov(self) -> str:
        return provenance_line(self.a.run, self.a.speed)

    def main_mode(self, t: pd.DataFrame | None = None) -> str:
        t = self.t if t is None else t
        modes = [m for m in MODE_ORDER if m in set(t.loc[t["n_ok"] > 0, "mode"])]
        if not modes:
            raise Skip("no successful handshakes in any mode")
        return modes[0]

    def over_attempts(self, ys: np.ndarray, g: str, sg: str, p: str, mode: str, transport: str | None = None) -> np.ndarray:
        """A cell's ECDF heights (ys, over its successful handshakes) over every attempt instead: a
        failure never finishes, so the curve stops at the share that did (1 - failure rate), as the
        censored table reads. The cell: its summary row (the first, without a transport)."""
        t = self.t
        m = (t["group"] == g) & (t["sig"] == sg) & (t["profile"] == p) & (t["mode"] == mode)
        if transport is not None:
            m &= t["transport"] == transport
        row = t[m]
        if len(row) and row["n_attempts"].iloc[0] > 0:
            return ys * row["n_ok"].iloc[0] / row["n_attempts"].iloc[0]
        return ys

    def profile_list(self, t: pd.DataFrame, filtered: bool = True) -> list[str]:
        """Profiles of t in run order; with filtered, only those of --profile."""
        order = list(dict.fromkeys(self.a.run.profiles["profile"]))
        have = [p for p in order if p in set(t["profile"])]
        if filtered and self.profiles:
            have = [p for p in have if p in self.profiles]
        return have



def _plain_log_axis(axis, set_scale) -> None:
    """Log scale with plain tick labels (0.1, 1, 10, 100 rather than 10^-1 ...): readers of a
    rate axis think in Mbit/s, not in powers of ten."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    set_scale("log")
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())

AXES = {  # axis -> (summary column, label, scale factor for display, log axis)
    "loss": ("loss", "Packet loss per direction (%)", 100.0, False),
    "rate": ("rate_bps", "Link rate (Mbit/s)", 1e-6, True),
    "mtu": ("mtu", "MTU (bytes)", 1.0, False),
    "rtt": ("rtt_cfg_ms", "Configured RTT (ms)", 1.0, False),
}
PROFILE_AXES = ["rtt_cfg_ms", "loss", "rate_bps", "mtu", "jitter_ms"]


def _hide_spare(axes, used: int) -> None:
    """A grid's places after its `used` panels hidden; with a shared x axis the panel above each
    now ends its column, so it shows the x tick labels."""
    nrow, ncol = axes.shape
    for k in range(used, nrow * ncol):
        axes[k // ncol, k % ncol].set_visible(False)
        axes[k // ncol - 1, k % ncol].xaxis.set_tick_params(labelbottom=True)


def _outer_labels(axes, xlabel: str, ylabel: str) -> None:
    """A grid's axis labels once each: x under the bottom row, y beside the first column."""
    for ax in axes[-1, :]:
        ax.set_xlabel(xlabel)
    for ax in axes[:, 0]:
        ax.set_ylabel(ylabel)


def _legend(fig, axes, ncol: int | None = None) -> None:
    handles, labels = [], []
    for ax in np.atleast_1d(axes).ravel():
        for h, l in zip(*ax.get_legend_handles_labels()):
            if l not in labels and not l.startswith("_"):
                handles.append(h)
                labels.append(l)
    if handles:
        # As many columns as fit in the figure's width (legend text ~0.55 em per character).
        longest = max(len(l) for l in labels)
        fs = float(plt.rcParams["legend.fontsize"]) if not isinstance(plt.rcParams["legend.fontsize"], str) else 8.0
        per_inch = 72.0 / (0.55 * fs)
        fit = max(1, int(fig.get_figwidth() * per_inch // (longest + 6)))
        n = min(ncol or 4, fit, len(handles))
        fig.legend(handles, labels, loc="lower center", ncol=n, bbox_to_anchor=(0.5, 1.0), borderaxespad=0.2,
                   handlelength=2.6)


def _fmt_axis_value(axis: str, v: float) -> str:
    col, label, f, _ = AXES[axis]
    unit = {"loss": " %", "rate": " Mbit/s", "mtu": " B", "rtt": " ms"}[axis]
    return f"{v * f:g}{unit}"


def _slug(s: str) -> str:
    """A name in a figure's file name, as cell ids write it (pqshake/rows/axes/core.py slug)."""
    from pqshake.rows.axes.core import slug

    return slug(str(s))
