"""Figure styles (thesis / paper / slides) and the per-algorithm look taken from the shared
registry (pqshake/algorithms.yaml): one colour per family (Okabe-Ito, colour-blind safe), one
line style per security level, one marker per kind. A Palette is built once per analysis, so a
given algorithm looks the same in every figure."""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")

STYLES = {
    # width: full text width, half: half of it (inches); A4 with ~2.5 cm margins -> 6.3 in.
    "thesis": {"width": 6.3, "half": 3.1, "font": "serif", "size": 9, "aspect": 0.62},
    "paper": {"width": 7.0, "half": 3.4, "font": "serif", "size": 8, "aspect": 0.62},
    "slides": {"width": 10.0, "half": 4.9, "font": "sans-serif", "size": 13, "aspect": 0.56},
}
UNKNOWN_COLOUR = "#777777"
HEATMAP_CMAP = "cividis"  # perceptually uniform and colour-blind safe


def rc(style: str) -> dict:
    st = STYLES[style]
    size = st["size"]
    serif = st["font"] == "serif"
    return {
        "font.family": st["font"],
        "font.serif": ["DejaVu Serif", "Times New Roman", "Times", "serif"],
        "font.sans-serif": ["DejaVu Sans", "Arial", "sans-serif"],
        "mathtext.fontset": "dejavuserif" if serif else "dejavusans",
        "font.size": size,
        "axes.titlesize": size,
        "axes.labelsize": size,
        "legend.fontsize": size - 1,
        "legend.title_fontsize": size - 1,
        "xtick.labelsize": size - 1,
        "ytick.labelsize": size - 1,
        "lines.linewidth": 1.2 if style != "slides" else 2.0,
        "lines.markersize": 4 if style != "slides" else 7,
        "axes.grid": True,
        "grid.linewidth": 0.4,
        "grid.alpha": 0.5,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "legend.frameon": False,
        "figure.dpi": 100,
        "savefig.dpi": 300 if style != "slides" else 200,
        "savefig.bbox": "tight",
        "savefig.pad_inches": 0.02,
        "pdf.fonttype": 42,  # TrueType: editable text in the PDF
        "ps.fonttype": 42,
        "svg.hashsalt": "pqshake",
        "axes.prop_cycle": matplotlib.cycler(color=["#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                                    "#E69F00", "#56B4E9", "#000000", "#999999"]),
    }


# The two figure widths size() knows: the text width, half of it.
TEXT_WIDTH = "full"
HALF_WIDTH = "half"


def size(style: str, width: str = TEXT_WIDTH, aspect: float | None = None) -> tuple[float, float]:
    """(width, height) in inches: width 'full' (text width) or 'half'; height = width x aspect."""
    st = STYLES[style]
    w = st["width"] if width == TEXT_WIDTH else st["half"]
    return (w, w * (aspect if aspect is not None else st["aspect"]))


@dataclass(frozen=True)
class Look:
    label: str
    colour: str
    linestyle: str
    marker: str
    fill: bool = True  # filled marker (hollow for a classical signature when both vary)


class Palette:
    """Looks of (group, sig) pairs. When only groups vary, the group decides everything; when
    only signatures vary, the signature does; when both vary, the group decides colour, line
    style and marker, and the signature the marker's fill (hollow for a classical signature)."""

    def __init__(self, pairs: list[tuple[str, str]]):
        from pqshake.registry import load_registry

        self.reg = load_registry()
        self.pairs = list(dict.fromkeys(pairs))
        gs = {g for g, _ in self.pairs}
        ss = {s for _, s in self.pairs}
        self.groups_vary = len(gs) > 1 or len(ss) <= 1
        self.sigs_vary = len(ss) > 1

    def _alg(self, role: str, name: str):
        return (self.reg.groups if role == "group" else self.reg.sigs).get(name)

    def label(self, g: str, s: str) -> str:
        if self.groups_vary and self.sigs_vary:
            return f"{g} / {s}"
        return g if self.groups_vary else s

    def look(self, g: str, s: str) -> Look:
        ga, sa = self._alg("group", g), self._alg("sig", s)
        if self.groups_vary:
            a = ga
            colour = a.colour if a else UNKNOWN_COLOUR
            ls = a.linestyle if a else "-."
            marker = a.marker if a else "x"
            fill = True
            if self.sigs_vary:  # the signature shows as the marker's fill: hollow = classical
                fill = not (sa is not None and sa.kind == "classical")
        else:
            a = sa
            colour = a.colour if a else UNKNOWN_COLOUR
            ls = a.linestyle if a else "-."
            marker = a.marker if a else "x"
            fill = True
        return Look(self.label(g, s), colour, ls, marker, fill)

    def line_kw(self, g: str, s: str) -> dict:
        lk = self.look(g, s)
        return {"color": lk.colour, "linestyle": lk.linestyle, "marker": lk.marker, "label": lk.label,
                "markerfacecolor": lk.colour if lk.fill else "white", "markeredgecolor": lk.colour}

    def family_label(self, g: str, s: str) -> str:
        a = self._alg("group", g) if self.groups_vary else self._alg("sig", s)
        return a.family_label if a else "unknown"

    def level(self, g: str, s: str) -> int | None:
        a = self._alg("group", g) if self.groups_vary else self._alg("sig", s)
        return a.level if a else None

    def order(self, pairs) -> list[tuple[str, str]]:
        from .summary import order_key

        return sorted(dict.fromkeys(pairs), key=lambda p: (order_key(self.reg, "group", p[0]),
                                                           order_key(self.reg, "sig", p[1])))


def save(fig, base, formats=("pdf", "png")) -> list:
    """Deterministic files: no dates or software versions in the metadata."""
    from pathlib import Path

    base = Path(base)
    out = []
    for fmt in formats:
        p = base.with_suffix(f".{fmt}")
        md = {"pdf": {"CreationDate": None, "ModDate": None, "Producer": None, "Creator": "pqshake"},
              "png": {"Software": None}, "svg": {"Date": None, "Creator": "pqshake"}}.get(fmt, {})
        fig.savefig(p, format=fmt, metadata=md)
        out.append(p)
    return out
