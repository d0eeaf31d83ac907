"""Figure auth_size: handshake time against the server's authentication bytes (its Certificate and
CertificateVerify messages as they crossed the wire: pqs-timer's msgs member), one panel per
profile and transport, with the handshake model's bound drawn as a function of those bytes: its
steps are where another round trip begins (the initial window, QUIC's amplification limit).
Points: each cell's median; a compressed chain (RFC 8879) hollow, suppressed intermediates as a
cross, at the bytes that crossed the wire. Drawn when the run's cells span auth bytes (several
signature algorithms, or a swept chain setting) and carry message sizes.

The model's curve is the bound of the run's smallest chain (its group, signature algorithm and
chain depth) with a synthetic leaf extension (cert_pad_bytes) of 0 to the largest measured
auth bytes: the bound depends on the bytes, not on what fills them, up to the CPU terms. Each
cell is also compared with the bound at its own settings plus what its implementation is measured
to add (the transport row's engine_extra_s): within half an RTT of it, or not."""

from __future__ import annotations

from types import SimpleNamespace

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from pqshake.rows import axes as AX
from pqshake.rows import handshake_model as HM
from pqshake.rows import transports as T

from .. import bound as B
from .. import style as ST
from ..report import n_text
from .base import Ctx, FigOut, Kind, Skip, _legend

# auth bytes: the server's Certificate (or CompressedCertificate) and CertificateVerify
CERT, COMP, CV = "msg_certificate", "msg_compressed_certificate", "msg_certificate_verify"
# the model's curve: this many points from 0 to the largest measured auth bytes
CURVE_POINTS = 160


def auth_bytes(samples: pd.DataFrame) -> pd.Series:
    """Per attempt: the server's authentication bytes on the wire (NaN without message sizes)."""
    cert = pd.to_numeric(samples[CERT], errors="coerce") if CERT in samples else pd.Series(np.nan, index=samples.index)
    comp = pd.to_numeric(samples[COMP], errors="coerce") if COMP in samples else pd.Series(np.nan, index=samples.index)
    cv = pd.to_numeric(samples[CV], errors="coerce") if CV in samples else pd.Series(np.nan, index=samples.index)
    return comp.fillna(cert) + cv


def _cells(ctx: Ctx) -> pd.DataFrame:
    """The summary's rows of the main mode with their median auth bytes."""
    run, t = ctx.a.run, ctx.t
    mode = ctx.main_mode()
    t = t[(t["mode"] == mode) & (t["n_ok"] > 0)].copy()
    s = run.samples
    s = s[s["ok"].to_numpy(dtype=bool) & (s["mode"].astype(str) == mode).to_numpy()]
    ab = auth_bytes(s)
    key = run.key
    med = pd.DataFrame({**{c: s[c].astype(str).to_numpy() for c in key}, "auth": ab.to_numpy()}).dropna()
    med = med.groupby(key, observed=True)["auth"].median().rename("auth_bytes").reset_index()
    t = t.merge(med, on=key, how="left")
    return t[t["auth_bytes"].notna()]


def _setting(ctx: Ctx, row: pd.Series, key: str):
    col = AX.column(key)
    return ctx.a.run.setting(key, row[col] if col in row.index else None)


def _curve(ctx: Ctx, d: pd.DataFrame, tr: str, top: float) -> tuple[np.ndarray, np.ndarray] | None:
    """(model auth bytes, bound ms) of the panel's smallest chain padded from 0 up to `top`."""
    run, reg = ctx.a.run, ctx.pal.reg
    r = d.sort_values("auth_bytes").iloc[0]
    kw = {a.key: _setting(ctx, r, a.key) for a in AX.REGISTRY}
    bkw = AX.bound_kwargs_of(kw)
    try:
        sc, ss, pk, sl = HM.sizes_for(r["group"], r["sig"], reg)
        base_extra = HM.auth_extra_for(r["sig"], {**bkw, "cert_pad_bytes": 0}, reg)
    except ValueError:
        return None
    depth = int(bkw.get("chain_depth", 1))
    base = HM.certificate_message_bytes(pk, sl, depth, base_extra) + 8 + sl
    # each direction's configured rate (the summary keeps the slower one only)
    prof = run.profiles.set_index("profile").loc[r["profile"]]
    up, down = (float(prof[f"cfg_rate_bps_{d}"]) or None for d in ("up", "down"))
    pads = np.linspace(0, max(0.0, top - base) + 500, CURVE_POINTS)
    xs, ys = [], []
    for pad in pads:
        try:
            b = B.bound(r["group"], r["sig"], r["mode"], rtt_s=float(r["rtt_cfg_ms"]) / 1e3,
                        rate_up=up, rate_down=down, mtu=int(r["mtu"]), cpu=None,
                        registry=reg, iw_c=_iw(r["initcwnd_client"]), iw_s=_iw(r["initcwnd_server"]), transport=tr,
                        **{**run.settings, **bkw, "cert_pad_bytes": int(pad)})
        except ValueError:
            return None
        if not b:
            return None
        xs.append(base + (pad + HM.PAD_EXT_OVERHEAD if pad else 0))
        ys.append(b["total"] * 1e3)
    return np.array(xs), np.array(ys)


def _engine_ms(ctx: Ctx, r: pd.Series, tr: str) -> float:
    """What the cell's implementation is measured to add to the bound (its transport row's
    engine_extra_s: OpenSSL's QUIC client and a ClientHello of two Initials after a Retry, one
    round trip; docs/methodology.md "What is an engine's")."""
    row = T.find(tr)
    if row is None:
        return 0.0
    try:
        sizes = HM.sizes_for(r["group"], r["sig"], ctx.pal.reg)
    except ValueError:
        return 0.0
    exp = SimpleNamespace(quic_retry=AX.get("quic_retry").show(_setting(ctx, r, "quic_retry")))
    return row.engine_extra_s(float(r["rtt_cfg_ms"]) / 1e3, sizes, exp, r["mode"]) * 1e3


def _iw(v) -> int | None:
    return int(v) if v == v and v else None


def fig_auth_size(ctx: Ctx) -> list[FigOut]:
    t = _cells(ctx)
    if t.empty:
        raise Skip("no successful attempt with message sizes (the run predates them, or --no-instrument)")
    if t["auth_bytes"].max() - t["auth_bytes"].min() < 1000:
        raise Skip("the cells' authentication bytes span less than 1 kB: sweep cert_pad_bytes, chain_depth or "
                   "the signature algorithm (experiments/auth-size.yaml)")
    profiles = list(dict.fromkeys(t["profile"]))
    trs = [x for x in ctx.transports if (t["transport"] == x).any()]
    fig, axes = plt.subplots(len(trs), len(profiles), figsize=ST.size(ctx.style, ST.TEXT_WIDTH, 0.3 * len(trs) + 0.08),
                             sharex=True, sharey="row", squeeze=False)
    comp_col, sup_col = AX.column("cert_compression"), AX.column("suppress_intermediates")
    within = total = 0
    for i, tr in enumerate(trs):
        for j, prof in enumerate(profiles):
            ax = axes[i, j]
            d = t[(t["transport"] == tr) & (t["profile"] == prof)]
            if d.empty:
                ax.set_axis_off()
                continue
            curve = _curve(ctx, d, tr, float(d["auth_bytes"].max()))
            if curve is not None:
                ax.step(curve[0] / 1e3, curve[1], where="post", color="black", linewidth=0.8, label="model bound")
            for g, sg in ctx.pal.order(zip(d["group"], d["sig"])):
                dd = d[(d["group"] == g) & (d["sig"] == sg)].sort_values("auth_bytes")
                kw = ctx.pal.line_kw(g, sg)
                for _, r in dd.iterrows():
                    comp = comp_col in r.index and str(r[comp_col]) not in ("off", AX.NOT_APPLIED)
                    sup = sup_col in r.index and str(r[sup_col]) == "on"
                    ax.plot(r["auth_bytes"] / 1e3, r["p50_ms"], linestyle="none", marker="x" if sup else kw["marker"],
                            color=kw["color"], markerfacecolor="none" if comp else kw["color"], markersize=3.5,
                            label="_")
                    rtt = float(r["rtt_cfg_ms"])
                    if r["bound_ms"] == r["bound_ms"]:
                        total += 1
                        within += abs(r["p50_ms"] - r["bound_ms"] - _engine_ms(ctx, r, tr)) <= rtt / 2
                ax.plot([], [], linestyle="none", marker=kw["marker"], color=kw["color"], label=ctx.pal.label(g, sg))
            if i == 0:
                ax.set_title(prof, fontsize="x-small")
            if i == len(trs) - 1:
                ax.set_xlabel("Auth bytes (kB)")
        label = T.find(tr).table_label if T.find(tr) is not None else tr
        axes[i, 0].set_ylabel(f"{label}: median (ms)")
    axes[0, 0].plot([], [], linestyle="none", marker="o", markerfacecolor="none", color="grey", label="compressed")
    axes[0, 0].plot([], [], linestyle="none", marker="x", color="grey", label="intermediates suppressed")
    _legend(fig, axes)
    fig.tight_layout()
    cap = (f"Median {ctx.main_mode()} handshake time against the server's authentication bytes on the wire "
           f"(Certificate or CompressedCertificate plus CertificateVerify, pqs-timer's message sizes), one panel per "
           f"profile and transport. Line: the handshake model's bound for the panel's smallest chain grown by a "
           f"synthetic leaf extension; each step is one more round trip (the initial window, QUIC's amplification "
           f"limit). Hollow: compressed chain (RFC 8879); cross: intermediates suppressed. {within} of {total} cells "
           f"within half an RTT of the bound at their own settings (plus what the cell's implementation is measured "
           f"to add: OpenSSL's QUIC client, a round trip for a ClientHello of two Initials). {n_text(t)}. {ctx.prov}")
    return [FigOut("auth_size", fig, "Handshake time against authentication bytes", cap)]


ORDER = 11  # its place among the families (analysis/figs/__init__.py)
KINDS = {
    "auth_size": Kind(fig_auth_size, "handshake time against the server's Certificate and CertificateVerify bytes, with the model's round-trip steps; drawn once for the whole run. Skipped for runs whose cells do not span authentication bytes"),
}
# It puts the swept chain settings on its x-axis: drawn once for the whole run, not per setting.
WHOLE_RUN = frozenset(KINDS)
