"""TLS over TCP (the programs' default transport) and its variants: tcp+tfo, TCP Fast Open on both
ends, the first flight in the SYN once an earlier connection fetched a cookie; tcp+s2n, the same
TLS over TCP on a second TLS stack, s2n-tls on AWS-LC (pqs-server / pqs-timer --tls-stack s2n;
experiment key tls_stacks), beside OpenSSL's; and a client of one stack against a server of the
other (tcp+openssl-vs-s2n, tcp+s2n-vs-openssl; experiment key server_stacks), which tells a gap
of the client's implementation from one of the server's. Their handshake model is the shared timeline of
pqshake/rows/handshake_model.py (lower_bound): the stack is an implementation, the protocol and
so the bound are TCP's."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from .. import handshake_model as hm
from .. import modes as M
from .base import Column, Transport, refuse_mode

NAME = "tcp"
TFO_NAME = "tcp+tfo"
S2N_NAME = "tcp+s2n"
# The TLS stacks (pqs-server / pqs-timer --tls-stack): OpenSSL, the programs' default, and s2n-tls
# on AWS-LC.
OPENSSL_STACK = "openssl"
S2N_STACK = "s2n"
# What the s2n stack runs (its security policies, the groups they put first, the certificate
# algorithms each takes, its modes) the programs say themselves: pqs-timer --describe
# (pqshake/programs.py). s2n-tls takes named security policies, not group lists, so a --groups
# value is a group some policy puts first (or, on the server's side only, has). The plan refuses
# the rest, one line per cell, before any network: no cell starts that the C side would refuse, or
# whose every handshake would fail (a chain its group's policy does not take).
_LOWER_BOUND_ARGS = frozenset(inspect.signature(hm.lower_bound).parameters) - {"transport"}  # set by the row
TFO_QUEUE = 64  # pqs-server --tcp-fastopen: the kernel's queue of pending Fast Open requests


class Tcp(Transport):
    name = NAME
    label = "TLS/TCP"
    short = "TCP"
    colour, linestyle, marker = "#0072B2", "-", "o"
    rank = 0
    bare_cell_id = True  # tcp cells keep the ids they had before transports existed
    timing_text = "Over TCP the time includes the TCP handshake"
    tfo = False
    program_transport = NAME  # tcp+tfo and tcp+s2n too: --transport tcp
    tls_stack = OPENSSL_STACK  # pqs-timer --tls-stack: the client's TLS implementation (tcp+tfo's too)
    server_stack = OPENSSL_STACK  # pqs-server --tls-stack: the server's (a cross-stack row's differs)
    tls_stack_text = "OpenSSL"  # the stack in legends and captions
    # The stacks each cell ran on (DONE, from cell_info), the client's and the server's: openssl /
    # s2n; null for the other transports' cells, for runs from before stacks (both) and from
    # before cross-stack cells (server_stack: the client's, tls_stack).
    cell_columns = (Column("tls_stack", "cfg_tls_stack", "text"), Column("server_stack", "cfg_server_stack", "text"))

    def bound(self, rtt_s: float, sizes: tuple[int, int, int, int], *, registry=None, client_auth: str | None = None,
              client_chain_depth: int = 1, request_bytes: int = 1, **kw: Any) -> hm.Bound:
        sc, ss, pk, sl = sizes
        kw = {k: v for k, v in kw.items() if k in _LOWER_BOUND_ARGS}  # other transports' settings go
        csig = hm.sig_sizes(client_auth, registry) if client_auth else None
        b = hm.lower_bound(rtt_s, share_c=sc, share_s=ss, sig_pk=pk, sig_len=sl, client_sig=csig,
                           client_chain_depth=client_chain_depth, request_bytes=request_bytes, tfo=self.tfo,
                           transport=NAME, **kw)  # tcp+tfo's bound too: TLS over TCP
        return b

    def check(self, ef: Any, cells: list[Any], profs: dict[str, Any]) -> None:
        """TLS over TCP runs every mode on any link."""

    def cell_info(self, exp: Any) -> dict[str, Any]:
        return {"tls_stack": self.tls_stack, "server_stack": self.server_stack}

    def synthetic_cell(self, spec: Any) -> dict[str, Any]:
        return {"tls_stack": self.tls_stack, "server_stack": self.server_stack}


class TcpFastOpen(Tcp):
    """Any mode gains (full, hrr and tls12 too: the cookie fetched by an earlier connection lets
    any first flight ride in the SYN), so none is refused."""

    name = TFO_NAME
    label = "TLS/TCP+TFO"
    short = ""  # tables and panels show tcp+tfo as it is written
    colour, linestyle, marker = "#009E73", "-.", "s"
    rank = 2
    bare_cell_id = False
    tfo = True
    timing_text = ""  # as TCP's, said once
    onertt_modes = (M.FULL, M.RESUME, M.RESUME_PSK, M.ZERO_RTT)

    def server_args(self, cell: Any, exp: Any, qlog: Path | None) -> list[str]:
        return ["--tcp-fastopen", str(TFO_QUEUE)]

    def timer_args(self, cell: Any, exp: Any, qlog: Path | None) -> list[str]:
        return ["--tcp-fastopen"]


def _exclude_rule(**rule: Any) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in rule.items()) + "}"


class TcpS2n(Tcp):
    """TLS over TCP on s2n-tls with AWS-LC as its libcrypto (--tls-stack s2n), beside OpenSSL: the
    same TCP, link, certificates (pqs-server writes them with OpenSSL either way) and JSON lines;
    only the TLS implementation differs, so the bound is TCP's and a gap between the stacks is
    the implementation's. It runs full and resume handshakes (mutual TLS too) with the groups and
    certificates of the security policies above, TLS 1.3 only, without certificate compression;
    the experiment key tls_stacks chooses it for each tcp cell."""

    name = S2N_NAME
    label = "TLS/TCP (s2n-tls)"
    short = "TCP/s2n"
    # Okabe-Ito sky blue beside TCP's blue; dash-dot-dot and a plus marker, which no other row
    # has, so it is told apart from every row without its colour.
    colour, linestyle, marker = "#56B4E9", (0, (5, 1.5, 1, 1.5, 1, 1.5)), "P"
    linestyle_text = "dash-dot-dotted"
    rank = 1
    # A stack saves no round trip: the one-round-trip figure (analysis/figs/onertt.py) leaves it
    # out; figure tls_stacks compares the stacks.
    onertt_modes = ()
    bare_cell_id = False  # its cells' ids end in __tcp+s2n
    timing_text = ""  # as TCP's, said once
    tls_stack = server_stack = S2N_STACK
    tls_stack_text = "s2n-tls on AWS-LC"
    implementation = S2N_STACK
    # Which ends run s2n-tls: both here, one in a cross-stack row (TcpCrossStacks below). The
    # checks of what s2n-tls's client offers, or its server does, apply to that end only.
    s2n_client = s2n_server = True
    drop_text = f"{S2N_STACK} from tls_stacks"  # how a file that chose the row drops its cells

    def server_args(self, cell: Any, exp: Any, qlog: Path | None) -> list[str]:
        return ["--tls-stack", self.server_stack]

    def timer_args(self, cell: Any, exp: Any, qlog: Path | None) -> list[str]:
        return ["--tls-stack", self.tls_stack]

    def plan_note(self, m: Any) -> str:
        return f" ({self.name}: {self.tls_stack_text}, TLS 1.3, {' and '.join(self.modes)} only)"

    def policies(self) -> dict[str, dict[str, Any]]:
        """The built s2n stack's security policies by group ({} when the programs are not built):
        policy, what, client (why its client cannot offer the group, None: it can), sigs (the
        certificate algorithms it takes: names, or a registry family as "rsa-*")."""
        im = self.program()
        return {p["group"]: p for p in im.data.get("policies", ())} if im is not None else {}

    @staticmethod
    def takes(policy: dict[str, Any], name: str, reg: Any) -> bool:
        """Whether this security policy takes certificates of this algorithm."""
        a = reg.get(name)
        return any(t == name or (t.endswith("-*") and a is not None and a.family == t[:-2]) for t in policy["sigs"])

    def sig_why(self, name: str, group: str, reg: Any) -> tuple[str, bool] | None:
        """Why the s2n stack cannot run certificates of this algorithm under this group's policy,
        and whether another group's policy takes them (None: it can). group: one of policies()."""
        pol = self.policies()
        if self.takes(pol[group], name, reg):
            return None
        others = [g for g, p in pol.items() if p["client"] is None and self.takes(p, name, reg)]
        if others:
            return (f"s2n-tls's policy for {group}, {pol[group]['policy']}, does not take {name}; {name} runs with "
                    f"{', '.join(others)}"), True
        every = dict.fromkeys(t for p in pol.values() for t in p["sigs"])
        return f"s2n-tls on AWS-LC takes {', '.join(every)}", False

    def check(self, ef: Any, cells: list[Any], profs: dict[str, Any]) -> None:
        """Before any network, each cell the s2n stack would refuse or fail: its mode, its group
        (one a security policy puts first), a signature algorithm of its chains (the leaf's, the
        intermediates', the root's, the client's under mutual TLS) the group's policy does not
        allow, certificate compression. One line each, naming the field and the exclude rule that
        drops the cell."""
        from pqshake.errors import UserError
        from pqshake.registry import load_registry

        reg = load_registry()
        im, pol = self.program(), self.policies()
        if im is None:  # not built: the plan says so (pqshake.programs.NOT_BUILT) and checks nothing here
            return
        # the file chose the stack with tls_stacks (server_stacks), or named this row in transports itself
        drop = self.drop_text if self.name not in ef.data.get("transports", ()) else f"{self.name} from transports"
        for c in cells:
            refuse_mode(self, ef, c, drop)
            if self.s2n_client and c.group in pol and pol[c.group]["client"] is not None:
                raise UserError(f"{ef.where('groups')}: group {c.group} cannot run over {self.name} "
                                f"(pqs-timer: {pol[c.group]['client']}); remove {c.group} from groups, or add the "
                                f"exclude rule {_exclude_rule(transport=self.name, group=c.group)}")
            if c.group not in pol:
                runs = [f"{g} (policy {p['policy']})" for g, p in pol.items() if p["client"] is None]
                raise UserError(f"{ef.where('groups')}: group {c.group} cannot run over {self.name} (s2n-tls takes named "
                                f"security policies, not group lists: it runs {', '.join(runs[:-1])} or {runs[-1]}); "
                                f"remove {c.group} from "
                                f"groups, or add the exclude rule {_exclude_rule(transport=self.name, group=c.group)}")
            view = ef.model.for_cell(c)
            # the leaf's algorithm, then the other chains' where they apply to the cell
            named = [("sigs", "sig", c.sig), *((key, key, name) for key, name in view.chain_sigs(c) if name is not None)]
            for field, key, name in named:
                refused = self.sig_why(str(name), c.group, reg)
                if refused is None:
                    continue
                why, elsewhere = refused
                value = name if key == "sig" else view.shown(key, name)
                # another group's policy takes it: the group is what the rule must name too
                rule = ({"group": c.group} if elsewhere else {}) | {key: value}
                under = f" with group {c.group}" if elsewhere else ""
                raise UserError(f"{ef.where(field)}: {name} cannot run over {self.name}{under} ({why}); "
                                f"choose another {'signature algorithm' if key == 'sig' else key}, or add the exclude "
                                f"rule {_exclude_rule(transport=self.name, **rule)}")
            if self.s2n_server and M.get(c.mode).resumable and view.client_auth is not None:
                # tls/s2n_server_new_session_ticket.c: no ticket under client authentication
                raise UserError(f"{ef.where('client_auth')}: mode {c.mode} with client_auth cannot run over {self.name} "
                                f"(s2n-tls's server issues no session ticket under client authentication); remove "
                                f"client_auth, or add the exclude rule {_exclude_rule(transport=self.name, mode=c.mode)}")
            comp_why = im.options.get("--cert-comp")
            if view.cert_compression != "off" and view.applies("cert_compression", c) and comp_why:
                raise UserError(f"{ef.where('cert_compression')}: {view.cert_compression}: the s2n stack does not "
                                f"compress certificates (pqs-timer: {comp_why}), so its cells would measure none; set "
                                f"cert_compression: off, or add the exclude rule "
                                f"{_exclude_rule(transport=self.name, cert_compression=view.cert_compression)}")


class TcpCrossStacks(TcpS2n):
    """A client of one TLS stack against a server of the other (experiment key server_stacks):
    pqs-timer --tls-stack client, pqs-server --tls-stack server. Whatever differs from both
    same-stack cells of the cell is then the client's or the server's implementation. s2n-tls's
    refusals hold for the end that runs it; a mode runs where both stacks run it. Its look is
    made of its two stacks' (the client's colour, the server's marker, a dotted line, hatched bars), so another
    stack brings its cross rows without hand-picked ones."""

    onertt_modes = ()
    bare_cell_id = False  # its cells' ids end in __tcp+<client>-vs-<server>
    linestyle, linestyle_text = (0, (1, 1.5)), "dotted"
    bar_hatch = "////"

    def __init__(self, client: Tcp, server: Tcp):
        self.client_row, self.server_row = client, server
        self.tls_stack, self.server_stack = client.tls_stack, server.tls_stack
        self.name = f"{NAME}+{client.tls_stack}-vs-{server.tls_stack}"
        self.tls_stack_text = f"{client.tls_stack_text} client, {server.tls_stack_text} server"
        self.label = f"TLS/TCP ({self.tls_stack_text})"
        self.short = f"TCP/{client.tls_stack}-vs-{server.tls_stack}"
        self.colour, self.marker = client.colour, server.marker
        self.rank = max(client.rank, server.rank)
        self.s2n_client, self.s2n_server = client.tls_stack == S2N_STACK, server.tls_stack == S2N_STACK
        # its s2n end's key: what the file drops the cell's refused end with
        self.drop_text = f"{S2N_STACK} from {'server_stacks' if self.s2n_server else 'tls_stacks'}"

    def why_refused(self, mode: str) -> str | None:
        return self.client_row.why_refused(mode) or self.server_row.why_refused(mode)

    def server_args(self, cell: Any, exp: Any, qlog: Path | None) -> list[str]:
        return self.server_row.server_args(cell, exp, qlog)

    def timer_args(self, cell: Any, exp: Any, qlog: Path | None) -> list[str]:
        return self.client_row.timer_args(cell, exp, qlog)

    def plan_note(self, m: Any) -> str:
        return f" ({self.name}: {self.tls_stack_text}, TLS 1.3, {' and '.join(self.modes)} only)"


TCP = Tcp()
TCP_TFO = TcpFastOpen()
TCP_S2N = TcpS2n()
# Every client stack against every other server stack, in the stacks' order.
TCP_CROSS = tuple(TcpCrossStacks(c, s) for c in (TCP, TCP_S2N) for s in (TCP, TCP_S2N) if c is not s)
