"""The summary as a LaTeX (booktabs) and a Markdown table: one row per cell, times in ms. A
quantile beyond the timeout (+inf in the summary: it falls into the failures) reads "> timeout",
never a number (docs/methodology.md, "Statistics")."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from pqshake.rows import transports as TR

from .summary import MODE_LABELS

TRANSPORT_LABELS = {t.name: t.table_label for t in TR.REGISTRY}
N_TEXT = 5  # leading text columns (left-aligned)

COLUMNS = [  # (header, unit, function of a row -> text)
    ("Group", "", lambda r: r.group),
    ("Signature", "", lambda r: r.sig),
    ("Profile", "", lambda r: r.profile),
    ("Mode", "", lambda r: MODE_LABELS.get(r.mode, r.mode)),
    ("Transport", "", lambda r: TRANSPORT_LABELS.get(r.transport, r.transport)),
    ("n", "", lambda r: f"{r.n_ok}/{r.n_attempts}"),
    ("Fail", "%", lambda r: _ci(100 * r.failure_rate, 100 * r.failure_ci_lo, 100 * r.failure_ci_hi, 1)),
    ("Median", "ms", lambda r: _ci(r.p50_ms, r.p50_ci_lo_ms, r.p50_ci_hi_ms)),
    ("p95", "ms", lambda r: _ci(r.p95_ms, r.p95_ci_lo_ms, r.p95_ci_hi_ms)),
    ("Median, ok only", "ms", lambda r: _num(r.ok_p50_ms)),
    ("Slowdown", "x", lambda r: _ci(r.slowdown, r.slowdown_ci_lo, r.slowdown_ci_hi, 2)),
    ("Bound", "ms", lambda r: _num(r.bound_ms)),
    ("Meas./bound", "", lambda r: _num(r.measured_over_bound, 2)),
    ("Valid", "", lambda r: _valid(r)),
]


def _valid(r) -> str:
    """The cell's validity verdict, short: the reasons are in the report (docs/methodology.md)."""
    v = str(getattr(r, "verdict", "not judged"))
    return "suspect" if v.startswith("suspect") else v


BEYOND = "> timeout"


def _ok(v) -> bool:
    return v is not None and isinstance(v, (int, float)) and math.isfinite(v)


def _beyond(v) -> bool:
    return isinstance(v, (int, float)) and math.isinf(v) and v > 0


def _sig_digits(v: float) -> int:
    a = abs(v)
    return 2 if a < 10 else 1 if a < 100 else 0


def _num(v, digits: int | None = None) -> str:
    if _beyond(v):
        return BEYOND
    if not _ok(v):
        return "--"
    d = _sig_digits(v) if digits is None else digits
    return f"{v:.{d}f}"


def _ci(v, lo, hi, digits: int | None = None) -> str:
    if _beyond(v):
        return BEYOND
    if not _ok(v):
        return "--"
    d = _sig_digits(v) if digits is None else digits
    if _ok(lo) and (_ok(hi) or _beyond(hi)):
        return f"{v:.{d}f} [{lo:.{d}f}, {_num(hi, d)}]"
    return f"{v:.{d}f}"


def _rows(df: pd.DataFrame) -> list[list[str]]:
    return [[str(f(r)) for _, _, f in COLUMNS] for r in df.itertuples(index=False)]


def _latex_escape(s: str) -> str:
    for a, b in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("$", r"\$"), ("#", r"\#"),
                 ("_", r"\_"), ("{", r"\{"), ("}", r"\}"), ("~", r"\textasciitilde{}"), ("^", r"\textasciicircum{}"),
                 (">", r"\textgreater{}"), ("<", r"\textless{}")):  # OT1 would print > as an inverted ?
        s = s.replace(a, b)
    return s


def latex(df: pd.DataFrame, caption: str, label: str = "tab:pqshake-summary") -> str:
    heads = [_latex_escape(h) + (f" ({_latex_escape(u)})" if u and u != "x" else (r" ($\times$)" if u == "x" else ""))
             for h, u, _ in COLUMNS]
    align = "l" * N_TEXT + "r" * (len(COLUMNS) - N_TEXT)
    out = [r"% pqshake summary table; needs \usepackage{booktabs} (and longtable for many rows)",
           r"\begin{table}[htbp]", r"\centering", r"\scriptsize", rf"\caption{{{_latex_escape(caption)}}}",
           rf"\label{{{label}}}", rf"\begin{{tabular}}{{{align}}}", r"\toprule", " & ".join(heads) + r" \\", r"\midrule"]
    prev = None
    for row in _rows(df):
        if prev is not None and row[0] != prev:
            out.append(r"\addlinespace")
        prev = row[0]
        out.append(" & ".join(_latex_escape(c) for c in row) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}", r"\end{table}", ""]
    return "\n".join(out)


def csv_frame(df: pd.DataFrame) -> pd.DataFrame:
    """The summary for CSV: a time beyond the timeout as the text "> timeout", not inf."""
    out = df.copy()
    for c in out.columns:
        if c.endswith("_ms") and pd.api.types.is_float_dtype(out[c]) and np.isposinf(out[c]).any():
            out[c] = out[c].astype(object).where(~np.isposinf(out[c].to_numpy(dtype=float)), BEYOND)
    return out


def markdown(df: pd.DataFrame) -> str:
    heads = [h + (f" ({u})" if u else "") for h, u, _ in COLUMNS]
    out = ["| " + " | ".join(heads) + " |",
           "|" + "|".join("---" if i < N_TEXT else "---:" for i in range(len(COLUMNS))) + "|"]
    for row in _rows(df):
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
    return "\n".join(out) + "\n"


def _share(v) -> str:
    return f"{100 * v:.0f}" if _ok(v) else "--"


# What every transport's own cell table (its row's report section) begins with: the cell and
# its median against TCP.
_TRANSPORT_CELL_COLUMNS = [
    ("Group", "", lambda r: r.group),
    ("Signature", "", lambda r: r.sig),
    ("Profile", "", lambda r: r.profile),
    ("Mode", "", lambda r: MODE_LABELS.get(r.mode, r.mode)),
    ("Median", "ms", lambda r: _ci(r.p50_ms, r.p50_ci_lo_ms, r.p50_ci_hi_ms)),
    ("vs TCP", "x", lambda r: _ci(r.vs_tcp, r.vs_tcp_ci_lo, r.vs_tcp_ci_hi, 2)),
]

# How a row's report columns are shown (pqshake/rows/transports/ ReportSection formats): each
# takes the summary row's values of the column's summary columns.
_FORMATS = {
    "share": lambda v: _share(v),
    "count": lambda v: _num(v, 0),
    "mean": lambda v: _num(v, 2),
    "ms": lambda v: _num(v),
    "pair": lambda a, b: f"{_num(a, 0)}/{_num(b, 0)}",
}


def report_columns(t: TR.Transport) -> list:
    """The columns of a transport's own table: the cell's, then its row's report columns."""
    def cell(fmt: str, cols: tuple[str, ...]):
        return lambda r: _FORMATS[fmt](*(getattr(r, c, np.nan) for c in cols))

    return _TRANSPORT_CELL_COLUMNS + [(h, u, cell(fmt, cols)) for h, u, fmt, cols in t.report.columns]


def _cells_markdown(df: pd.DataFrame, transport: str, columns: list) -> str:
    """One row per cell of one transport in those columns; empty string when the run has none."""
    q = df[df["transport"].astype(str) == transport]
    if q.empty:
        return ""
    heads = [h + (f" ({u})" if u else "") for h, u, _ in columns]
    out = ["| " + " | ".join(heads) + " |", "|" + "|".join("---" if i < 4 else "---:" for i in range(len(columns))) + "|"]
    for r in q.itertuples(index=False):
        out.append("| " + " | ".join(str(f(r)).replace("|", "\\|") for _, _, f in columns) + " |")
    return "\n".join(out) + "\n"


def transport_markdown(df: pd.DataFrame, t: TR.Transport) -> str:
    """A transport's own table (its row's report section); empty string when it has none or the
    run has no cell of it."""
    return _cells_markdown(df, t.name, report_columns(t)) if t.report else ""
