"""Figures 8-11: what a handshake costs and how it compares: bytes on the wire, measured against the
bound, the modes compared, CPU cost from pqs-speed."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from pqshake.rows import modes as M
from pqshake.rows import transports as T

from .. import stats as S
from .. import style as ST
from ..columns import TRANSPORT_ORDER
from ..report import _profile_text, n_text
from ..summary import MODE_LABELS, MODE_ORDER
from .base import Ctx, FigOut, Kind, Skip, _legend, _slug


def fig_bytes(ctx: Ctx) -> list[FigOut]:
    from pqshake.rows import handshake_model as hm

    t = ctx.t[(ctx.t["n_ok"] > 0)]
    if t.empty:
        raise Skip("no successful handshakes")
    mode = M.FULL if (t["mode"] == M.FULL).any() else ctx.main_mode(t)
    t = t[t["mode"] == mode]
    measured = t["bytes_up"].notna().any() and t["bytes_down"].notna().any()
    # Bytes hardly depend on the link: the median over the loss-free profiles (or all).
    t0 = t[t["loss"].fillna(0) == 0] if (t["loss"].fillna(0) == 0).any() else t
    reg = ctx.pal.reg
    pairs = []
    for g, s in ctx.pal.order(zip(t0["group"], t0["sig"])):
        try:  # the split needs checked sizes: an algorithm the registry does not size is left out
            hm.sizes_for(g, s, reg)
            pairs.append((g, s))
        except ValueError:
            continue
    if not pairs:
        raise Skip("no algorithm of this run has sizes in the registry")
    comp = []
    for g, s in pairs:
        d = t0[(t0["group"] == g) & (t0["sig"] == s)]
        sc, ss, pk, sl = hm.sizes_for(g, s, reg)
        share = sc + ss
        chain = hm.cert_der_bytes(pk, sl) * int(ctx.value("chain_depth")) + sl
        if measured:
            total = float((d["bytes_up"] + d["bytes_down"]).median())
        else:
            total = float((d["model_client_bytes"] + d["model_server_bytes"]).median())
        comp.append((share, chain, max(0.0, total - share - chain), total))
    comp = np.array(comp) / 1000.0
    fig, ax = plt.subplots(figsize=ST.size(ctx.style, ST.TEXT_WIDTH, 0.16 + 0.05 * len(pairs)))
    y = np.arange(len(pairs))
    parts = [("Key shares", "#4d4d4d", ""), ("Certificate chain + CertificateVerify", "#9a9a9a", "//"),
             ("Rest (records, extensions, Finished, tickets)", "#dcdcdc", "..")]
    left = np.zeros(len(pairs))
    for k, (lab, col, hatch) in enumerate(parts):
        ax.barh(y, comp[:, k], left=left, color=col, hatch=hatch, edgecolor="black", linewidth=0.5, label=lab,
                height=0.7)
        left += comp[:, k]
    for i, (g, s) in enumerate(pairs):  # the algorithm's colour as a stripe left of its bar
        ax.plot([0, 0], [i - 0.35, i + 0.35], color=ctx.pal.look(g, s).colour, linewidth=4, solid_capstyle="butt",
                clip_on=False, label="_")
    ax.set_yticks(y)
    ax.set_yticklabels([ctx.pal.label(g, s) for g, s in pairs])
    ax.set_ylim(len(pairs) - 0.5, -0.5)
    ax.set_xlabel("Handshake bytes, both directions (kB)")
    ax.grid(axis="y", visible=False)
    _legend(fig, ax, ncol=3)
    fig.tight_layout()
    title = "Handshake bytes per algorithm"
    # A transport with byte counts of its own (QUIC's connection), not TCP_INFO's.
    trs = {T.find(x) for x in set(t0["transport"])}
    own = next(iter(trs)) if len(trs) == 1 and None not in trs and next(iter(trs)).payload_bytes else None
    src = ((own.payload_bytes_text if own else "TLS payload bytes measured with TCP_INFO")
           + " (median of the loss-free profiles)" if measured
           else "sizes from the handshake model (the run has no " + (own.label if own else "TCP_INFO") + " byte counts)")
    cap = (f"Bytes of a {MODE_LABELS.get(mode, mode)} handshake per algorithm, both directions: key shares and "
           f"certificate chain (chain depth {ctx.value('chain_depth')}, plus CertificateVerify) from the algorithm "
           f"registry, the rest is the difference to the total ({src}). The stripe left of each bar is the "
           f"algorithm's colour. {n_text(t0)}. {ctx.prov}")
    return [FigOut("bytes", fig, title, cap)]


# ---------------------------------------------------------------------------------------------
# 9 measured vs bound


def fig_bound(ctx: Ctx) -> list[FigOut]:
    t = ctx.t[(ctx.t["n_ok"] > 0) & ctx.t["bound_ms"].notna() & (ctx.t["bound_ms"] > 0)]
    if t.empty:
        raise Skip("no cell with both a median and a model bound")
    trs = [x for x in ctx.transports if (t["transport"] == x).any()]
    many = len(trs) > 1
    fig, axes = plt.subplots(1, len(trs), figsize=ST.size(ctx.style, ST.TEXT_WIDTH, 0.5 if not many else 0.45),
                             squeeze=False, sharey=True)
    lo = float(min(t["bound_ms"].min(), t["p50_ms"].min())) * 0.8
    hi = float(max(t["bound_ms"].max(), t["p50_ms"].max())) * 1.25
    xs = np.array([lo, hi])
    for j, tr in enumerate(trs):
        ax = axes[0, j]
        tt = t[t["transport"] == tr]
        for g, s in ctx.pal.order(zip(tt["group"], tt["sig"])):
            d = tt[(tt["group"] == g) & (tt["sig"] == s)]
            kw = ctx.pal.line_kw(g, s)
            kw["linestyle"] = "none"
            yerr = np.vstack([d["p50_ms"] - d["p50_ci_lo_ms"], d["p50_ci_hi_ms"] - d["p50_ms"]]).clip(min=0)
            ax.errorbar(d["bound_ms"], d["p50_ms"], yerr=yerr, elinewidth=0.6, capsize=0, **kw)
        ax.plot(xs, xs, color="black", linewidth=0.8, linestyle="-", label="measured = bound")
        ax.plot(xs, 2 * xs, color="#999999", linewidth=0.6, linestyle="--", label="2 x bound")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_xlabel("Model lower bound (ms)")
        ax.set_aspect("equal", adjustable="box")
        if many:
            ax.set_title(tr.upper())
    axes[0, 0].set_ylabel("Measured median (ms)")
    if many:
        _legend(fig, axes)
    else:
        axes[0, 0].legend(loc="center left", bbox_to_anchor=(1.04, 0.5), handlelength=2.2)
    fig.tight_layout()
    ratio = t["measured_over_bound"]
    title = "Measured median vs model lower bound"
    cap = (f"Median handshake time (client side, {int(S.CI_LEVEL * 100)} % CI as bars) against the handshake model's "
           f"lower bound (the handshake on a timeline: propagation RTTs, serialization and CPU where "
           f"they cannot overlap; docs/methodology.md) for every cell with data "
           f"(all profiles and modes" + ("; one panel per transport, the QUIC model for QUIC cells" if many else "")
           + f"); measured/bound from {ratio.min():.2f} to {ratio.max():.2f}, median "
           f"{ratio.median():.2f}. {ctx.a.summary.cpu_note}. {n_text(t)}. {ctx.prov}")
    return [FigOut("bound", fig, title, cap)]


# ---------------------------------------------------------------------------------------------
# 10 modes compared


def fig_modes(ctx: Ctx) -> list[FigOut]:
    t = ctx.t[ctx.t["n_ok"] > 0].copy()
    # One x position per mode and transport variant (tcp, tcp+tfo, quic): "0rtt / tcp+tfo".
    t["_mt"] = [m if tr == T.DEFAULT else f"{m} / {tr}" for m, tr in zip(t["mode"], t["transport"])]
    outs = []
    for p in ctx.profile_list(t):
        tp = t[t["profile"] == p]
        order = {(m, tr): (MODE_ORDER.index(m) if m in MODE_ORDER else 99,
                           TRANSPORT_ORDER.index(tr) if tr in TRANSPORT_ORDER else 9) for m, tr in zip(tp["mode"], tp["transport"])}
        modes = [m if tr == T.DEFAULT else f"{m} / {tr}" for (m, tr) in sorted(order, key=order.get)]
        if len(modes) < 2:
            continue
        pairs = ctx.pal.order(zip(tp["group"], tp["sig"]))
        # Each panel says what it measures: the handshake alone hides 0-RTT's gain, which shows
        # in the client's time to first byte and the server's time to the request.
        sides = [("Client: connect to handshake done", "p50_ms", ("p50_ci_lo_ms", "p50_ci_hi_ms"))]
        if "ttfb_p50_ms" in tp and tp["ttfb_p50_ms"].notna().any():
            sides.append(("Client: connect to first response byte (TTFB)", "ttfb_p50_ms", None))
        if "ttlb_p50_ms" in tp and tp["ttlb_p50_ms"].notna().any():
            sides.append(("Client: connect to last response byte (TTLB)", "ttlb_p50_ms", None))
        if tp["server_p50_ms"].notna().any():
            sides.append(("Server: accept to handshake done", "server_p50_ms", None))
        if "server_first_byte_p50_ms" in tp and tp["server_first_byte_p50_ms"].notna().any():
            sides.append(("Server: accept to first application byte", "server_first_byte_p50_ms", None))
        fig, axes = plt.subplots(1, len(sides), figsize=ST.size(ctx.style, ST.TEXT_WIDTH, 0.42), sharey=True, squeeze=False)
        w = 0.6 / max(1, len(pairs))
        for j, (side, col, ci) in enumerate(sides):
            ax = axes[0, j]
            for k, (g, s) in enumerate(pairs):
                d = tp[(tp["group"] == g) & (tp["sig"] == s)].set_index("_mt").reindex(modes)
                xs = np.arange(len(modes)) - 0.3 + w * (k + 0.5)
                yerr = None
                if ci is not None:
                    yerr = np.nan_to_num(np.vstack([d[col] - d[ci[0]], d[ci[1]] - d[col]]).clip(min=0))
                kw = ctx.pal.line_kw(g, s)
                kw["linewidth"] = 0.8
                ax.errorbar(xs, d[col].to_numpy(), yerr=yerr, elinewidth=0.6, capsize=0, **kw)
            ax.set_xticks(range(len(modes)))
            ax.set_xticklabels([MODE_LABELS.get(m, m) for m in modes], rotation=30 if len(modes) > 5 else 0, fontsize="small")
            ax.set_title(side, fontsize="small")
            ax.grid(axis="x", visible=False)
            ax.set_ylim(bottom=0)
        axes[0, 0].set_ylabel("Median time (ms)")
        _legend(fig, axes)
        fig.tight_layout()
        title = f"Handshake modes compared, profile {p}"
        cap = (f"Medians per mode and transport variant (full, resumption with psk_dhe_ke / psk_ke, 0-RTT, "
               f"HelloRetryRequest, TLS 1.2; tcp+tfo: TCP Fast Open; where run; the thin lines only join an "
               f"algorithm's points), profile {_profile_text(ctx.a.run, [p])}. Panels, each titled with what it "
               f"measures: client handshake ({int(S.CI_LEVEL * 100)} % bootstrap CI), client time to first and last "
               f"response byte, server accept to handshake done, server accept to the first application byte "
               f"(0-RTT: the request arrives with the ClientHello). {n_text(tp)}. {ctx.prov}")
        outs.append(FigOut(f"modes-{_slug(p)}", fig, title, cap))
    if not outs:
        raise Skip("no profile was run in more than one mode")
    return outs


# ---------------------------------------------------------------------------------------------
# 11 CPU cost from pqs-speed


def fig_cpu(ctx: Ctx) -> list[FigOut]:
    sp = ctx.a.speed
    if not sp:
        raise Skip("no pqs-speed output (build it with 'make build', or pass --speed FILE)")
    reg = ctx.pal.reg
    groups = [g for g in dict.fromkeys(ctx.t["group"]) if sp.get("kex", g, "keygen") is not None]
    sigs = [s for s in dict.fromkeys(ctx.t["sig"]) if sp.get("sig", s, "sign") is not None]
    groups.sort(key=lambda n: list(reg.groups).index(n) if n in reg.groups else 999)
    sigs.sort(key=lambda n: list(reg.sigs).index(n) if n in reg.sigs else 999)
    if not groups and not sigs:
        raise Skip(f"the pqs-speed output ({sp.source}) has none of the run's algorithms")
    panels = [(k, names) for k, names in (("kex", groups), ("sig", sigs)) if names]
    heights = [max(1, len(n)) for _, n in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=ST.size(ctx.style, ST.TEXT_WIDTH, 0.12 + 0.045 * sum(heights)),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    op_marker = {"keygen": "o", "encaps": "s", "decaps": "D", "derive": "X", "sign": "^", "verify": "v"}
    for (kind, names), ax in zip(panels, axes[:, 0]):
        ops = ["keygen", "encaps", "decaps", "derive"] if kind == "kex" else ["keygen", "sign", "verify"]
        table = reg.groups if kind == "kex" else reg.sigs
        y = np.arange(len(names))
        for i, n in enumerate(names):
            al = table.get(n)
            colour = al.colour if al else ST.UNKNOWN_COLOUR
            vals = [(op, sp.get(kind, n, op)) for op in ops]
            vals = [(op, v / 1e3) for op, v in vals if v is not None]
            if vals:
                xs = [v for _, v in vals]
                ax.plot([min(xs), max(xs)], [i, i], color=colour, linewidth=0.8,
                        linestyle=al.linestyle if al else "-", label="_")
            for op, v in vals:
                ax.plot([v], [i], linestyle="none", marker=op_marker[op], color=colour, markeredgecolor="black",
                        markeredgewidth=0.4, markersize=plt.rcParams["lines.markersize"] + 1, label="_")
        for op in ops:  # legend: the operation's marker in neutral grey
            ax.plot([], [], linestyle="none", marker=op_marker[op], color="#bbbbbb", markeredgecolor="black",
                    markeredgewidth=0.4, label=op)
        ax.set_yticks(y)
        ax.set_yticklabels(names)
        ax.set_ylim(len(names) - 0.5, -0.5)
        ax.set_xscale("log")
        ax.grid(axis="y", visible=False)
        ax.set_title("Key exchange" if kind == "kex" else "Signatures")
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), handletextpad=0.2)
    axes[-1, 0].set_xlabel(r"CPU time per operation, median ($\mu$s, log scale)")
    fig.tight_layout()
    title = "CPU cost per algorithm (pqs-speed)"
    hdr = sp.header
    where = f"OpenSSL {hdr.get('openssl_version')}, liboqs {hdr.get('liboqs_version')}" if hdr else "versions unknown"
    cap = (f"Median CPU time per operation measured by pqs-speed ({where}; source {sp.source}); key exchange: "
           f"keygen, encaps, decaps for KEMs, keygen and derive for ECDH; signatures: keygen, sign, verify (one "
           f"marker per operation, log axis). Colour: algorithm family; line style: security level.")
    return [FigOut("cpu", fig, title, cap)]


ORDER = 4  # its place among the families (analysis/figs/__init__.py)
# The kinds of this family, in the order `--only` numbers them (figures.KINDS).
KINDS = {
    "bytes": Kind(fig_bytes, "handshake bytes per algorithm: key shares, certificate chain + CertificateVerify, rest"),
    "bound": Kind(fig_bound, "measured median vs the model bound, y = x and y = 2x"),
    "modes": Kind(fig_modes, "full / resume / 0-RTT / HRR / TLS 1.2, client and server side, per profile"),
    "cpu": Kind(fig_cpu, "CPU time per operation from pqs-speed"),
}
