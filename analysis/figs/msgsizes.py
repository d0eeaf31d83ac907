"""Figure msgsizes: bytes per handshake message per algorithm, measured on the wire by pqs-timer's
message callback (the attempt line's "msgs" member; testbed/README.md, "Message sizes from the
wire"): per algorithm a stacked bar of the client's messages and one of the server's flight,
with what the first round trip can carry marked: over TCP the initial congestion window
(IW x MSS), over QUIC RFC 9002's initial window (12000 bytes with 1200-byte datagrams) and the
server's 3x anti-amplification limit (three times the client's first-flight datagrams). One panel
per transport with message sizes. Drawn when the run's attempts carry them; older runs skip it."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from pqshake.rows import handshake_model as HM
from pqshake.rows import modes as M
from pqshake.rows import transports as T

from ..columns import MSG_COLUMNS
from .base import Ctx, FigOut, Kind, Skip

# (analysis column, legend label, colour): the client's messages, then the server's flight, each
# from the bottom of its bar up. Okabe-Ito colours; the client's bars are hatched.
CLIENT = (("msg_client_hello", "ClientHello", "#56B4E9"), ("msg_client_hello2", "ClientHello (after HRR)", "#0072B2"),
          ("msg_end_of_early_data", "EndOfEarlyData", "#999999"),
          ("msg_client_certificate", "Certificate (client)", "#CC79A7"),
          ("msg_client_certificate_verify", "CertificateVerify (client)", "#D55E00"),
          ("msg_client_finished", "Finished (client)", "#000000"))
SERVER = (("msg_hello_retry_request", "HelloRetryRequest", "#F0E442"), ("msg_server_hello", "ServerHello", "#E69F00"),
          ("msg_encrypted_extensions", "EncryptedExtensions", "#999999"),
          ("msg_certificate_request", "CertificateRequest", "#F0E442"), ("msg_certificate", "Certificate", "#009E73"),
          ("msg_certificate_verify", "CertificateVerify", "#D55E00"), ("msg_server_finished", "Finished", "#000000"))
QUIC_IW = 12000  # RFC 9002 7.2: min(10 x 1200, max(14720, 2 x 1200)) with 1200-byte datagrams
QUIC_AMP = 3     # RFC 9000 8.1: three times the bytes received before the address is validated
NEEDED = ("msg_client_hello", "msg_server_hello")


def _numeric(s: pd.DataFrame, cols) -> pd.DataFrame:
    return pd.DataFrame({c: pd.to_numeric(s[c], errors="coerce") if c in s else np.nan for c in cols}, index=s.index)


def _mode(s: pd.DataFrame) -> str:
    """full where the run has it (every message), else the first mode with sizes."""
    have = [m for m in M.NAMES if m in set(s["mode"].astype(str))]
    if not have:
        raise Skip("no successful attempt with message sizes")
    return M.FULL if M.FULL in have else have[0]


def _tcp_window(run, cells: pd.DataFrame) -> tuple[int, int, int]:
    """(IW segments, MSS, MTU) for the TCP line: the server's configured initial window (0 or
    absent: the kernel's 10) and the MSS of the cells' most common MTU (absent: 1500)."""
    iw = 10
    if "cfg_initcwnd_server" in cells:
        v = pd.to_numeric(cells["cfg_initcwnd_server"], errors="coerce").dropna()
        v = v[v > 0]
        if len(v):
            iw = int(v.mode().iloc[0])
    mtu = 1500
    prof = run.profiles
    if "mtu" in prof and "profile" in cells:
        m = prof.set_index("profile")["mtu"].reindex(cells["profile"].astype(str).unique()).dropna()
        if len(m):
            mtu = int(m.mode().iloc[0])
    return iw, HM.mss(mtu), mtu


def _panel(ax, med: pd.DataFrame, pairs, labels, tr, ctx: Ctx, cells: pd.DataFrame, notes: list[str]) -> None:
    row = T.find(tr)
    x = np.arange(len(pairs))
    w = 0.38
    top = 0.0
    server_tot = []
    for side, specs, dx, hatch in (("client", CLIENT, -w / 2 - 0.01, "///"), ("server", SERVER, w / 2 + 0.01, "")):
        bottom = np.zeros(len(pairs))
        for col, lab, colour in specs:
            ys = np.array([float(med.loc[p, col]) if p in med.index and med.loc[p, col] == med.loc[p, col] else 0.0
                           for p in pairs])
            if not ys.any():
                continue
            ax.bar(x + dx, ys, width=w, bottom=bottom, color=colour, hatch=hatch, edgecolor="black", linewidth=0.4,
                   label=lab)
            bottom += ys
        top = max(top, float(bottom.max()) if len(bottom) else 0.0)
        if side == "server":
            server_tot = bottom
    fs = max(5, plt.rcParams["font.size"] - 2.5)
    for i, v in enumerate(server_tot):
        if v > 0:
            ax.annotate(f"{v / 1000:.1f}k", (x[i] + w / 2 + 0.01, v), ha="center", va="bottom", fontsize=fs)
    lab = row.table_label if row is not None else tr
    quic = row is not None and not row.over_tcp
    udp = "flight_server_datagrams" in med and med["flight_server_datagrams"].notna().any()
    if quic:
        ax.axhline(QUIC_IW, color="#b2182b", linewidth=0.9, linestyle="--", label="QUIC initial window (12000 B)")
        amp = []
        for i, p in enumerate(pairs):
            d = float(med.loc[p, "flight_client1_datagram_bytes"]) if (
                p in med.index and "flight_client1_datagram_bytes" in med) else float("nan")
            if d != d:  # not measured: the ClientHello in 1200-byte Initial datagrams
                ch = float(med.loc[p, "msg_client_hello"]) if p in med.index else float("nan")
                d = 1200.0 * max(1, math.ceil(ch / 1150)) if ch == ch else float("nan")
            if d == d:
                amp.append(QUIC_AMP * d)
                ax.plot([x[i] + 0.01, x[i] + w + 0.01], [QUIC_AMP * d] * 2, color="#b2182b", linewidth=1.6,
                        linestyle=":", label="3x amplification limit (server flight, no Retry)")
        top = max(top, QUIC_IW, *amp) if amp else max(top, QUIC_IW)
        notes.append(f"{lab}: initial window 12000 B; 3x limit {', '.join(f'{a / 1000:.1f}k' for a in amp)}")
    elif not udp:
        iw, mss, mtu = _tcp_window(ctx.a.run, cells)
        line = iw * mss
        shown = line <= 3 * max(top, 1.0)  # a loopback MTU's window would flatten the bars
        if shown:
            ax.axhline(line, color="#b2182b", linewidth=0.9, linestyle="--",
                       label=f"TCP initial window ({iw} x MSS)")
            top = max(top, line)
        notes.append(f"{lab}: initial window {iw} x {mss} B = {line} B (MTU {mtu})"
                     + ("" if shown else ", above the plotted range"))
    else:
        notes.append(f"{lab}: the server's first flight in UDP datagrams (no window marked)")
    ax.set_ylim(0, top * 1.15 if top else 1)
    ax.set_xticks(x)
    ax.set_xticklabels(labels, fontsize=max(5, plt.rcParams["font.size"] - 2), rotation=20, ha="right")
    ax.set_ylabel("Bytes")
    ax.set_title(f"{lab}: client (hatched) and server flight", fontsize=plt.rcParams["font.size"])


def fig_msgsizes(ctx: Ctx) -> list[FigOut]:
    run = ctx.a.run
    s = run.samples
    if not all(c in s for c in NEEDED) or not _numeric(s, NEEDED).notna().all(axis=1).any():
        raise Skip("no message sizes in this run: its attempts predate pqs-timer's msgs member (re-run the cells)")
    s = s[s["ok"].astype(bool)]
    num = _numeric(s, list(MSG_COLUMNS.values()) + ["flight_client1_datagram_bytes", "flight_server_datagrams"])
    s = pd.concat([s[["group", "sig", "mode", "transport", "profile"]].astype(str), num], axis=1)
    s = s[s["msg_client_hello"].notna()]
    if ctx.profiles:
        s = s[s["profile"].isin(ctx.profiles)]
    if s.empty:
        raise Skip("no successful attempt with message sizes")
    mode = _mode(s)
    s = s[s["mode"] == mode]
    trs = [t for t in ctx.transports if t in set(s["transport"])] or sorted(set(s["transport"]))
    pairs = ctx.pal.order(zip(s["group"], s["sig"]))
    labels = [ctx.pal.label(g, sg) for g, sg in pairs]
    w, h = plt.rcParams["figure.figsize"]
    fig, axes = plt.subplots(len(trs), 1, figsize=(w, h * (0.5 + 0.5 * len(trs))), squeeze=False, sharex=True)
    notes: list[str] = []
    cells = run.cells[run.cells["mode"].astype(str) == mode] if "mode" in run.cells else run.cells
    for ax, tr in zip(axes[:, 0], trs):
        d = s[s["transport"] == tr]
        med = d.groupby(["group", "sig"], observed=True).median(numeric_only=True)
        tcells = cells[cells["transport"].astype(str) == tr] if "transport" in cells else cells
        _panel(ax, med, pairs, labels, tr, ctx, tcells, notes)
    handles, labs = [], []
    for ax in axes[:, 0]:
        for hd, lb in zip(*ax.get_legend_handles_labels()):
            if lb not in labs:
                handles.append(hd)
                labs.append(lb)
    fig.legend(handles, labs, loc="lower center", ncol=min(4, len(labs)), frameon=False, bbox_to_anchor=(0.5, 1.0),
               fontsize=max(5, plt.rcParams["font.size"] - 2))
    fig.tight_layout()
    n = len(s)
    from ..summary import MODE_LABELS

    cap = (f"Bytes of each TLS handshake message per algorithm, {MODE_LABELS.get(mode, mode)} handshakes, as the "
           f"client's message callback saw them (median over the successful attempts of every profile; each message "
           f"with its 4-byte header, without record, packet or datagram overhead). Left bar (hatched): the client's "
           f"messages; right bar: the server's flight, its total above it. Marked: what the first round trip can "
           f"carry ({'; '.join(notes)}); a server flight above its line needs more than one round trip "
           f"(docs/methodology.md, the handshake model). n = {n} attempts. {ctx.prov}")
    title = "Handshake message sizes per algorithm against the initial window"
    return [FigOut("msgsizes", fig, title, cap)]


ORDER = 9  # its place among the families (analysis/figs/__init__.py)
# The kinds of this family, in the order `--only` numbers them (figures.KINDS).
KINDS = {
    "msgsizes": Kind(fig_msgsizes, "bytes per handshake message per algorithm, stacked, with the initial windows marked. Skipped for runs whose attempts carry no message sizes"),
}
