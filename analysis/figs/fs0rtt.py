"""Figure fs0rtt: forward-secure 0-RTT with Bloom Filter Encryption beside ticket 0-RTT and the full
handshake, as the three findings of Dallmeier et al. (CANS 2020) put it: (a) the server's CPU per
connection, (b) the server's secret-key memory against the connections a key serves, (c) the time
to the first response byte on every profile. The mode's own figure (pqshake/rows/modes/fs0rtt.py);
drawn when a run has fs0rtt cells."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from pqshake.rows import modes as M
from pqshake.rows.modes import fs0rtt as FS

from .. import style as ST
from ..report import _profile_text
from ..summary import MODE_LABELS
from .base import Ctx, FigOut, Kind, Skip

# The modes compared, in this order, and their look (grey scale plus hatching: print-safe).
COMPARED = (M.FULL, M.ZERO_RTT, M.FS0RTT)
LOOK = {M.FULL: ("#bdbdbd", ""), M.ZERO_RTT: ("#737373", "//"), M.FS0RTT: ("#252525", "..")}
# The paper's deployment figure: 50K connections per day under one key lifetime of a day.
PAPER_CONNS_PER_DAY = 50_000
PAPER_MEMORY_MB = 400
SLOT_BYTES = 193   # a serialized secret-key slot (testbed/fs0rtt/fs0rtt_key.h)
SLOT_RAM = 296     # bfe-bf's in-memory slot: one relic G2 point (pqs-server's secret_ram_bytes)


def _median_by(df: pd.DataFrame, col: str, keys: list[str]) -> pd.DataFrame:
    d = df[df[col].notna()]
    return d.groupby(keys, observed=True)[col].median().reset_index()


def _cpu_panel(ax, srv: pd.DataFrame, groups: list[str], labels: list[str]) -> str:
    med = _median_by(srv, "server_cpu_ns", ["group", "mode"])
    x = np.arange(len(groups))
    w = 0.8 / len(COMPARED)
    notes = []
    def at(g: str, m: str) -> float:
        v = med.loc[(med["group"] == g) & (med["mode"] == m), "server_cpu_ns"]
        return float(v.iloc[0]) if len(v) else np.nan

    for k, m in enumerate(COMPARED):
        ys = [at(g, m) / 1e6 for g in groups]
        col, hatch = LOOK[m]
        ax.bar(x + (k - 1) * w, ys, width=w, color=col, hatch=hatch, edgecolor="black", linewidth=0.5,
               label=MODE_LABELS.get(m, m))
    for i, g in enumerate(groups):
        fs, zr = at(g, M.FS0RTT), at(g, M.ZERO_RTT)
        if fs == fs and zr == zr and zr > 0:
            ax.annotate(f"{fs / zr:.1f}x", (x[i] + w, fs / 1e6), ha="center", va="bottom",
                        fontsize=max(5, plt.rcParams["font.size"] - 2))
            notes.append(f"{g}: {fs / zr:.1f}x")
    ax.set_xticks(x)
    ax.set_xticklabels(labels, fontsize=max(5, plt.rcParams["font.size"] - 2))
    ax.set_ylabel("Server CPU / conn. (ms)")
    ax.margins(y=0.15)
    ax.set_title("(a) Server CPU", fontsize=plt.rcParams["font.size"])
    ax.set_ylim(bottom=0)
    return "; ".join(notes)


def _memory_panel(ax, cells: pd.DataFrame) -> str:
    have = cells["bfe_key_n"].dropna() if "bfe_key_n" in cells else pd.Series(dtype=float)
    lo = min(10, math.floor(math.log2(float(have.min())))) if len(have) else 10
    ns = np.unique(np.logspace(lo, 20, 60, base=2).astype(int))
    run_p = float(cells["bfe_key_p"].dropna().iloc[0]) if "bfe_key_p" in cells and cells["bfe_key_p"].notna().any() \
        else FS.DEFAULT_P
    e = round(math.log2(run_p))
    if abs(2.0 ** e - run_p) <= 1e-5 * run_p:  # keys written with 6 digits of p (0.000976562)
        run_p = 2.0 ** e
    ps = sorted({2.0 ** -5, 2.0 ** -10, 2.0 ** -15, run_p}, reverse=True)
    for p in ps:
        mb = [FS.slots(int(n), p) * SLOT_BYTES / 1e6 for n in ns]
        lab = f"p = {FS.p_text(p)}"
        ax.plot(ns, mb, linewidth=1.6 if p == run_p else 0.9, color="black" if p == run_p else "#888888",
                linestyle="-" if p == run_p else "--", label=lab + (" (this run)" if p == run_p else ""))
    ram = [FS.slots(int(n), run_p) * SLOT_RAM / 1e6 for n in ns]
    ax.plot(ns, ram, linewidth=0.9, color="black", linestyle=":", label="in memory (this run's p)")
    ax.axhline(PAPER_MEMORY_MB, color="#b2182b", linewidth=0.8)
    ax.axvline(PAPER_CONNS_PER_DAY, color="#b2182b", linewidth=0.8, linestyle="-.")
    ax.text(2.0 ** lo * 1.1, PAPER_MEMORY_MB * 1.25, "CANS 2020: < 400 MB at 50K conn./day",
            color="#b2182b", fontsize=max(5, plt.rcParams["font.size"] - 2.5))
    text = ""
    if "bfe_key_secret_bytes" in cells and cells["bfe_key_secret_bytes"].notna().any():
        c = cells[cells["bfe_key_secret_bytes"].notna()].iloc[0]
        ax.plot([c["bfe_key_n"]], [c["bfe_key_secret_bytes"] / 1e6], marker="o", color="black", markersize=4,
                linestyle="none", label="this run's key (measured)")
        text = (f"this run's key: n = {int(c['bfe_key_n'])}, {int(c['bfe_key_slots'])} slots, "
                f"{c['bfe_key_secret_bytes'] / 1e6:.1f} MB serialized")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("Connections per key (n)")
    ax.set_ylabel("Secret key (MB)")
    ax.set_title("(b) Server key memory", fontsize=plt.rcParams["font.size"])
    ax.legend(fontsize=max(5, plt.rcParams["font.size"] - 3), frameon=False, loc="lower right")
    at = FS.slots(PAPER_CONNS_PER_DAY, run_p)
    return (f"{text}; at 50K connections and the run's p: {at * SLOT_BYTES / 1e6:.0f} MB serialized, "
            f"{at * SLOT_RAM / 1e6:.0f} MB in memory")


def _time_panel(ax, s: pd.DataFrame, profiles: list[str], group: str) -> tuple[str, str]:
    col = "ttfb_ns" if s["ttfb_ns"].notna().any() else "handshake_ns"
    d = s[s["group"] == group]
    med = _median_by(d, col, ["profile", "mode"])
    x = np.arange(len(profiles))
    w = 0.8 / len(COMPARED)
    for k, m in enumerate(COMPARED):
        ys = []
        for p in profiles:
            v = med.loc[(med["profile"] == p) & (med["mode"] == m), col]
            ys.append(float(v.iloc[0]) / 1e6 if len(v) else np.nan)
        c, hatch = LOOK[m]
        ax.bar(x + (k - 1) * w, ys, width=w, color=c, hatch=hatch, edgecolor="black", linewidth=0.5)
    ax.set_xticks(x)
    ax.set_xticklabels(profiles, fontsize=max(5, plt.rcParams["font.size"] - 2))
    what = "time to first response byte" if col == "ttfb_ns" else "handshake time"
    ax.set_ylabel(f"Median {'TTFB' if col == 'ttfb_ns' else 'handshake'} (ms)")
    ax.set_ylim(bottom=0)
    ax.set_title(f"(c) {what[0].upper() + what[1:]}, {group}", fontsize=plt.rcParams["font.size"])
    return col, what


def fig_fs0rtt(ctx: Ctx) -> list[FigOut]:
    run = ctx.a.run
    s = run.samples
    if M.FS0RTT not in set(s["mode"].astype(str)):
        raise Skip("the run has no fs0rtt cells (modes: [full, 0rtt, fs0rtt], experiments/fs0rtt.yaml)")
    s = s[s["ok"].astype(bool) & s["mode"].astype(str).isin(COMPARED)]
    srv = run.server
    if srv is None or not srv["server_cpu_ns"].notna().any():
        raise Skip("no server CPU per connection in this run (pqs-server from before cpu_ns)")
    srv = srv[srv["ok"].astype(bool) & srv["mode"].astype(str).isin(COMPARED)]
    pairs = list(dict.fromkeys(ctx.pal.order(zip(s["group"], s["sig"]))))
    groups = list(dict.fromkeys(g for g, _ in pairs))
    labels = [ctx.pal.label(g, sg) for g, sg in dict((g, sg) for g, sg in pairs).items()]
    # profiles by configured RTT, then loss (the run's order is random: interleaved)
    fig_of = run.profiles.set_index("profile") if "profile" in run.profiles else None
    profiles = ctx.profile_list(s)
    if fig_of is not None and {"rtt_ms", "loss"} <= set(fig_of.columns):
        profiles.sort(key=lambda p: (float(fig_of.loc[p, "rtt_ms"]), float(fig_of.loc[p, "loss"] or 0)))
    fig = plt.figure(figsize=ST.size(ctx.style, ST.TEXT_WIDTH, 0.72))
    grid = fig.add_gridspec(2, 2, width_ratios=[1.0, 1.0], height_ratios=[1.0, 1.0])
    axes = [fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1]), fig.add_subplot(grid[1, :])]
    cpu_note = _cpu_panel(axes[0], srv, groups, labels)
    mem_note = _memory_panel(axes[1], run.cells)
    main = groups[-1]  # the last in the palette's order: the post-quantum one where there is one
    col, what = _time_panel(axes[2], s, profiles, main)
    handles = [plt.Rectangle((0, 0), 1, 1, facecolor=LOOK[m][0], hatch=LOOK[m][1], edgecolor="black", linewidth=0.5)
               for m in COMPARED]
    fig.legend(handles, [MODE_LABELS.get(m, m) for m in COMPARED], loc="upper center", ncol=len(COMPARED),
               frameon=False, bbox_to_anchor=(0.5, 1.0))
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    n = len(s) + len(srv)
    cap = (f"Forward-secure 0-RTT with Bloom Filter Encryption (fs0rtt: a fresh BFE ciphertext per ClientHello, "
           f"decapsulated and punctured by the server) beside ticket 0-RTT and the full handshake, after Dallmeier "
           f"et al. (CANS 2020). (a) Median CPU of the server's worker thread per successful connection (accept to "
           f"close: TLS, key exchange, signing, and for fs0rtt the decapsulation); fs0rtt / 0-RTT ratio above the bars"
           f"{' (' + cpu_note + ')' if cpu_note else ''}; the paper reports about 8x. (b) The serialized secret key "
           f"(193 bytes per unpunctured slot, {-math.log(2.0 ** -10) / math.log(2) ** 2:.1f} slots per connection at "
           f"p = 2^-10) against "
           f"the connections one key serves, for several false-positive probabilities p, and in memory (bfe-bf keeps "
           f"a 296-byte point per slot); red: the paper's 50K connections per day under one key for a day and its "
           f"400 MB; {mem_note}. (c) Median {what} per profile with {main} (every successful attempt; fs0rtt's "
           f"includes the client's encapsulation and the server's decapsulation). Profiles: "
           f"{_profile_text(run, profiles)}. n = {n} (attempts and server connections). {ctx.prov}")
    title = "Forward-secure 0-RTT (BFE) vs 0-RTT: server CPU, key memory, time to first byte"
    return [FigOut(M.FS0RTT, fig, title, cap)]  # the mode's own figure, named after it


ORDER = 7  # its place among the families (analysis/figs/__init__.py)
# The kinds of this family, in the order `--only` numbers them (figures.KINDS).
KINDS = {
    M.FS0RTT: Kind(fig_fs0rtt, "forward-secure 0-RTT (Bloom Filter Encryption) beside 0-RTT and full handshakes: handshake time, server CPU, key memory and time to first byte. Skipped for runs without fs0rtt cells"),
}
