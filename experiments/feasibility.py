"""Cells the model already knows cannot finish, refused at plan (issue 45).

Two kinds, both by lower bounds, so a refused cell would certainly have failed every attempt:

- a certificate chain over the receiving stack's limit on one handshake message: the client
  aborts the handshake on the server's Certificate (under mutual TLS the server on the
  client's), so every attempt fails, whatever the network;
- an attempt whose least time (the handshake model's bound, with no CPU, plus the response
  body at the link's rate) is over the experiment's `timeout`: every attempt times out.

The Certificate message's size is the model's (handshake_model.certificate_message_bytes):
sizes from the algorithm registry and the smallest encodings, so it is never above the real
message. A cell just under a limit by the model may still fail on the wire; its attempts all
fail and the run marks it failed (cell.close_cell), which is the case this refusal is the early
half of.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pqshake.errors import UserError
from pqshake.registry import load_registry

from pqshake.rows import axes as A
from pqshake.rows import bounds
from pqshake.rows import handshake_model as hm
from pqshake.rows import modes as M
from pqshake.rows import transports as T


@dataclass(frozen=True)
class MessageLimit:
    """The largest handshake message body a TLS stack accepts from its peer (the 4-byte
    handshake header apart), and what that limit is called in the stack."""

    body_bytes: int
    what: str


# Per TLS stack (its row's tls_stack; QUIC and TurboTLS cells run OpenSSL's TLS). Measured on
# loopback with pqs-timer and pqs-server, both programs of the same stack, padding the leaf one
# byte at a time (tests/testbed/test_msgsizes.py keeps it so): OpenSSL's client takes a
# Certificate body of 102,400 bytes and aborts on 102,401 (max_cert_list, the library's default
# of 100 KiB, which the programs keep), s2n-tls takes 65,536 and fails on 65,537. The model's body
# was 294 bytes under the wire's at depth 4 (SLH-DSA-128f), 109 at depth 1 (ML-DSA-65).
LIMITS: dict[str, MessageLimit] = {
    "openssl": MessageLimit(100 * 1024, "OpenSSL's certificate-list limit (max_cert_list, 100 KiB)"),
    "s2n": MessageLimit(64 * 1024, "s2n-tls's handshake-message limit (64 KiB)"),
}

HEADER = 4  # a handshake message's type and 24-bit length


def stack_of(transport: str) -> str:
    """The TLS stack a cell's programs run (OpenSSL unless its row names another)."""
    return getattr(T.get(transport), "tls_stack", None) or T.TLS_STACK_DEFAULT


def certificate_bodies(c: Any, m: Any, registry: Any, kw: dict[str, Any] | None = None) -> list[tuple[str, str, int]]:
    """(who sends it, the setting that sizes it, body bytes) of each Certificate message the
    cell's handshake carries: the server's, and the client's under mutual TLS. `kw`: the view's
    bound_kwargs when the caller has them."""
    mode = M.get(c.mode)
    if not mode.certificate:
        return []
    kw = A.bound_kwargs(m) if kw is None else kw
    pk, sl = hm.sig_sizes(c.sig, registry)
    depth = int(kw.get("chain_depth", 1))
    out = [("server", "sigs", hm.certificate_message_bytes(pk, sl, depth, hm.auth_extra_for(c.sig, kw, registry))
            - HEADER)]
    if getattr(m, "client_auth", None):
        cpk, csl = hm.sig_sizes(m.client_auth, registry)
        cd = int(m.client_chain_depth)
        named = {k: hm.sig_sizes(getattr(m, k), registry) if getattr(m, k) else None
                 for k in ("client_inter_sig", "client_root_sig")}
        extra = hm.auth_extra_bytes(cpk, csl, cd, inter=named["client_inter_sig"], root=named["client_root_sig"])
        out.append(("client", "client_auth", hm.certificate_message_bytes(cpk, csl, cd, extra) - HEADER))
    return out


def least_attempt_s(c: Any, m: Any, figures: dict[str, Any], registry: Any, kw: dict[str, Any] | None = None) -> float:
    """The least time an attempt of the cell takes, connect to last byte (what the timer's
    --timeout covers): the handshake bound with no CPU, to the first response byte when a body
    is asked for, then the body at the downlink's rate."""
    b = bounds.handshake_bound(bounds.BoundCell.on_profile(c, figures, registry=registry, cpu=hm.NO_CPU,
                                                           **(A.bound_kwargs(m) if kw is None else kw)))
    body = int(getattr(m, "response_bytes", 0) or 0)
    if body and b.ttfb and not T.get(c.transport).handshake_only:
        rate = figures["rate_bps_down"]
        return b.ttfb + (body * 8 / rate if rate else 0.0)
    return b.total


def _bytes(n: int) -> str:
    return f"{n:,} bytes"


def check_cells_can_finish(plan: Any) -> None:
    """Refuse the first cell (in the plan's order before shuffling) that cannot finish, naming
    the setting to change. Each kind of cell is judged once, through the plan's own memos (its
    view of the experiment and bound keywords per combination of settings, its figures per
    profile). The least attempt is worked out only for a cell whose planned attempt is longer
    than the timeout: the planned attempt is the same timeline with CPU, loss and the body's
    slow start added, never shorter (tests/hostile/test_cells_finish.py checks it on every
    shipped experiment), so a cell within it can finish."""
    ef = plan.experiment
    registry = load_registry()
    sized: dict[tuple, list[tuple[str, str, int]]] = {}  # the chains' sizes: per sig, mode and settings
    timeout_s = ef.model.timeout / 1e9
    for c in plan.kinds():
        m = plan._view(c)
        kw = plan._bound_kwargs(c, m)
        limit = LIMITS.get(stack_of(c.transport))
        chain = (c.sig, c.mode, c.settings)
        if limit and chain not in sized:
            try:
                sized[chain] = certificate_bodies(c, m, registry, kw)
            except ValueError:  # an algorithm the registry does not size: the run will tell
                sized[chain] = []
        bodies = sized[chain] if limit else []
        for who, key_, n in bodies:
            if n > limit.body_bytes:
                peer = "client" if who == "server" else "server"
                raise UserError(
                    f"{ef.where(key_)}: cell {c.cell_id}: the {who}'s Certificate message is at least {_bytes(n)} "
                    f"by the model, over {limit.what} = {_bytes(limit.body_bytes)}: the {peer} would abort every "
                    f"handshake; make the chain smaller (cert_pad_bytes, cert_scts, chain_depth, a smaller sig), "
                    f"or exclude the cell")
        try:
            if plan.attempt_estimate_s(c) <= timeout_s:
                continue
            f = plan._figures(c.profile)
            least = least_attempt_s(c, m, f, registry, kw)
        except ValueError:
            continue
        if least > timeout_s:
            body = int(getattr(m, "response_bytes", 0) or 0)
            what = f"the handshake and a {_bytes(body)} response" if body and f["rate_bps_down"] else "a handshake"
            raise UserError(
                f"{ef.where('timeout')}: cell {c.cell_id}: {what} takes at least {least * 1e3:,.1f} ms on profile "
                f"'{c.profile}' by the model, over timeout {timeout_s * 1e3:,.1f} ms: every attempt would time out; "
                f"raise timeout above {least * 1e3:,.0f} ms"
                + (", or lower response_bytes" if body else "") + ", or exclude the cell")
