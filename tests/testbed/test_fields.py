"""One definition per result field (issue 46, item 5): the attempt and conn lines' members are
the rows of pqshake/results/fields.yaml. The field reference of testbed/README.md is made of them,
the analysis reads its columns of them, and the programs write no member the table does not
define, nor does the table define one no program writes."""

from __future__ import annotations

import re

import pytest
from testbed_helpers import REPO, Server, run_timer, run_tool

from pqshake.results import fields as F

# What the programs write the lines with: every transport, stack, engine and mode's C file.
C_SOURCES = sorted(p for p in (REPO / "testbed").rglob("*.c") if "tests" not in p.parts and "fuzz" not in p.parts)


def test_the_readme_field_reference_is_not_stale():
    text = F.README.read_text()
    assert F.readme_with_tables(text) == text, ("testbed/README.md's field reference is stale: run "
                                                "`python -m pqshake.results.fields --write`")


def test_every_row_defines_members_a_program_writes():
    """A row for a member no C file names is a definition of nothing (a member removed or renamed
    in C and kept here)."""
    literals = set()
    for p in C_SOURCES:
        literals |= set(re.findall(r'"([a-z][a-z0-9_]*)"', p.read_text(errors="replace")))
    for line in F.LINES + tuple(F.objects()):
        for r in F.rows(line):
            for m in r.members:
                assert any(re.fullmatch(m.replace("*", ".*"), lit) for lit in literals), (
                    f"pqshake/results/fields.yaml {line}: {m} is written by no program under testbed/")


def test_the_analysis_columns_are_the_tables():
    from pqshake.analysis import columns as C

    for line, req, opt in (("attempt", C.SAMPLES_REQUIRED, C.SAMPLES_OPTIONAL),
                           ("conn", C.SERVER_REQUIRED, C.SERVER_OPTIONAL)):
        assert F.columns(line, required=True).items() <= req.items()
        assert F.columns(line, required=False).items() <= opt.items()
    assert C.SAMPLES_OPTIONAL["tcp_bytes_sent"] == "bytes_up" and C.SERVER_REQUIRED["handshake_ns"] == "server_handshake_ns"


@pytest.mark.parametrize("row, why", [
    ("  - members: [ok]\n    meaning: x\n    required: true\n", "required: true needs columns"),
    # an object's rows belong to one member (its transport's own), not to a group
    ("  - members: [quic, turbo]\n    meaning: x\n    object:\n      - members: [retry]\n        meaning: y\n",
     "must be one member"),
])
def test_a_broken_row_is_refused_with_its_place(tmp_path, monkeypatch, row, why):
    from pqshake.errors import UserError

    bad = tmp_path / "fields.yaml"
    bad.write_text(f"attempt:\n{row}conn: []\n")
    monkeypatch.setattr(F, "TABLE", bad)
    F.table.cache_clear()
    try:
        with pytest.raises(UserError, match=rf"fields.yaml: .*{why}"):
            F.table()
    finally:
        F.table.cache_clear()


# The programs' lines over loopback: every transport, both TLS stacks, both QUIC engines, the modes
# that change which members are written, and a failed attempt. (server options, timer options)
CASES = {
    "tcp": ((), ()),
    "tcp-resume": ((), ("--mode", "resume")),
    "tcp-0rtt": (("--max-early-data", "16384"), ("--mode", "0rtt", "--response-bytes", "100")),
    "tcp-hrr": ((), ("--mode", "hrr")),
    "tcp-tfo": (("--tcp-fastopen", "64"), ("--tcp-fastopen", "--wait-acked")),
    "tcp-s2n": (("--tls-stack", "s2n"), ("--tls-stack", "s2n", "--mode", "resume")),
    "quic": (("--transport", "quic"), ("--transport", "quic", "--response-bytes", "100")),
    "quic-ngtcp2": (("--transport", "quic", "--quic-engine", "ngtcp2"), ("--transport", "quic", "--quic-engine", "ngtcp2")),
    "turbotls": (("--transport", "turbotls"), ("--transport", "turbotls")),
    # its objects in both lines (@KEY: a BFE key made for the case)
    "tcp-fs0rtt": (("--bfe-key", "@KEY", "--max-early-data", "16384"), ("--mode", "fs0rtt", "--bfe-public", "@KEY/public.bin")),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_programs_write_only_defined_members(tmp_path, case):
    server_args, timer_args = CASES[case]
    if any("@KEY" in a for a in server_args):
        key = tmp_path / "bfe"
        assert run_tool("pqs-bfe-keygen", "--n", 16, "--p", "2^-15", "--out", key).returncode == 0
        server_args, timer_args = ([a.replace("@KEY", str(key)) for a in args] for args in (server_args, timer_args))
    with Server(tmp_path, "--groups", "x25519", *server_args) as srv:
        r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", "x25519", "--samples", 2, *timer_args)
    assert r.returncode == 0, r.stderr
    lines = r.of("attempt") + r.of("prime")
    assert lines and all(a["ok"] for a in lines), lines
    conns = srv.conns()
    assert conns
    for line, recs in (("attempt", lines), ("conn", conns)):
        assert not F.undefined_members(line, recs), (
            f"{case}: the {line} line has members pqshake/results/fields.yaml does not define: "
            f"{F.undefined_members(line, recs)} (add a row)")
    # Each line type has one writer (the attempt line: testbed/timer.c; every server's conn line:
    # testbed/core/connline.c), which writes the members in the table's order, whichever transport
    # ran: a line written by hand elsewhere, or a member added out of place, shows as a member
    # before one of an earlier row (the QUIC servers' hand-written conn lines before 46 did).
    for line, rec in [("attempt", a) for a in lines] + [("conn", c) for c in conns]:
        names = [k for k in rec if k != "type"]
        rows = F.order(line, names)
        assert rows == sorted(rows), (f"{case}: the {line} line's members are not in pqshake/results/fields.yaml's "
                                      f"order: {[n for n, r, p in zip(names[1:], rows[1:], rows) if r < p]} early")


def test_an_objects_member_no_row_defines_is_found():
    """The transports' objects are checked member by member: a member of `quic` the table lacks
    is named, as is one the line has outside any object."""
    quic = {m: None for r in F.rows("conn.quic") for m in r.members}
    recs = [{"type": "conn", "conn": 0, "quic": {**quic, "new_count": 1}, "turbo": None}, {"conn": 1, "new_member": 2}]
    assert F.undefined_members("conn", recs) == ["new_member", "quic.new_count"]
    assert F.objects() == ["attempt.fs0rtt", "attempt.quic", "attempt.turbo", "conn.fs0rtt", "conn.quic", "conn.turbo"]



def test_a_failed_attempt_writes_only_defined_members(tmp_path):
    from testbed_helpers import free_port

    r = run_timer("--connect", f"127.0.0.1:{free_port()}", "--no-verify", "--samples", 1)
    fails = [a for a in r.of("attempt") if not a["ok"]]
    assert fails and fails[0]["error"] == "connect_refused", r.records
    assert not F.undefined("attempt", list(fails[0])[1:])
