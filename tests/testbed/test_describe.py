"""`pqs-timer --describe` and `pqs-server --describe` (testbed/core/describe.c): one JSON document
of what the programs run. Every refusal it states is the usage error the programs give (asked of
them, not of the document), every implementation a Python transport row names is in it, and the
plan refuses what the C refuses in the C's words (pqshake/programs.py reads the document; no
Python file keeps a copy of a stack's modes or policies)."""

from __future__ import annotations

import json
import subprocess

import pytest

from pqshake.errors import UserError
from pqshake.rows import modes as M
from pqshake.rows import transports as T
from pqshake.programs import describe, parse
from testbed_helpers import BUILD, run_timer


def _doc(prog: str) -> dict:
    r = subprocess.run([str(BUILD / "bin" / prog), "--describe"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert r.stdout.count("\n") == 1  # one document, one line
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def timer_doc() -> dict:
    return _doc("pqs-timer")


def _impl_args(t: dict, im: dict) -> list[str]:
    opt = t["implementation_option"]
    return ["--transport", t["name"], *([opt, im["name"]] if opt else [])]


def test_both_programs_describe_the_same_tables(timer_doc):
    server = _doc("pqs-server")
    assert server["program"] == "pqs-server" and timer_doc["program"] == "pqs-timer"
    strip = lambda d: {k: v for k, v in d.items() if k != "program"}  # noqa: E731
    assert strip(server) == strip(timer_doc)
    assert set(timer_doc["modes"]) == set(M.NAMES)  # the C's modes are the modes registry's
    names = {t["name"]: [im["name"] for im in t["implementations"]] for t in timer_doc["transports"]}
    assert names["tcp"] == ["openssl", "s2n"] and names["quic"] == ["openssl", "ngtcp2"] and names["turbotls"] == ["openssl"]
    for t in timer_doc["transports"]:
        for im in t["implementations"]:
            assert set(im["modes"]) == set(M.NAMES) and im["version"], im
            # an OpenSSL stack lists what --list-groups lists; s2n its security policies' groups
            assert im["groups"], im["name"]
    s2n = next(im for t in timer_doc["transports"] for im in t["implementations"] if im["name"] == "s2n")
    assert {p["group"] for p in s2n["policies"]} == set(s2n["groups"])
    assert all(p["sigs"] and p["policy"] for p in s2n["policies"])


def test_every_row_of_the_plan_is_an_implementation_the_programs_describe():
    d = describe()
    assert d is not None, "pqs-timer --describe gave no document"
    for t in T.REGISTRY:
        assert t.program() is not None, (t.name, t.program_transport or t.name, t.implementation)


def test_every_refusal_described_is_the_programs_usage_error(timer_doc):
    """Each mode the document refuses, pqs-timer refuses with those words (exit 2, one line); each
    mode it runs gets past the option checks (the attempt then fails to connect: port 9)."""
    checked = 0
    for t in timer_doc["transports"]:
        for im in t["implementations"]:
            for mode, why in im["modes"].items():
                r = run_timer(*_impl_args(t, im), "--connect", "127.0.0.1:9", "--no-verify", "--mode", mode,
                              "--samples", 1, "--warmup", 0, "--groups", "x25519", "--timeout", "1s")
                head = f"--mode {mode} --transport {t['name']}"
                if why is None:
                    assert head not in r.stderr, (t["name"], im["name"], mode, r.stderr)
                else:
                    assert r.returncode == 2 and f"{head}: {why}" in r.stderr, (t["name"], im["name"], mode, r.stderr)
                    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
                    checked += 1
            opt = im["options"]["--cert-comp"]
            if opt is not None:
                r = run_timer(*_impl_args(t, im), "--connect", "127.0.0.1:9", "--no-verify", "--cert-comp", "zlib",
                              "--groups", "x25519")
                assert r.returncode == 2 and opt in r.stderr, r.stderr
    assert checked >= 10  # s2n's six, QUIC's and TurboTLS's


def test_the_plan_refuses_what_the_c_refuses_in_its_words(tmp_path, timer_doc):
    """A combination only the C refuses (no Python file says so): the plan's message quotes the
    document's reason for it."""
    from pqshake.experiments.plan import build_plan

    s2n = next(im for t in timer_doc["transports"] if t["name"] == "tcp" for im in t["implementations"]
               if im["name"] == "s2n")
    for mode in ("hrr", "0rtt", "ech"):
        path = tmp_path / f"{mode}.yaml"
        path.write_text(f"name: t\ngroups: [x25519]\nsigs: [ecdsa-p256]\nprofiles: [lan]\nsamples: 3\n"
                         f"transports: [tcp]\ntls_stacks: [s2n]\nmodes: [{mode}]\n")
        with pytest.raises(UserError) as e:
            build_plan(path, seed=1)
        msg = str(e.value)
        assert f"mode {mode} cannot run over tcp+s2n (pqs-timer: {s2n['modes'][mode]})" in msg, msg
        assert "\n" not in msg


def test_a_document_that_is_not_one_is_refused():
    with pytest.raises(ValueError):
        parse('{"type": "attempt"}')
    d = parse(json.dumps({"type": "describe", "program": "x", "modes": ["full"], "transports": [
        {"name": "tcp", "implementation_option": None, "implementations": [
            {"name": "openssl", "version": "v", "tls13_only": False, "modes": {"full": None},
             "early_data": None, "tcp_fastopen": {"client": None, "server": None}, "options": {}, "groups": ["x"]}]}]}))
    assert d.get("tcp", "openssl").mode_why("full") is None and d.get("quic", "openssl") is None


def test_a_mode_is_refused_by_its_first_missing_trait(timer_doc):
    """Modes as plug-ins (testbed/modes/): a transport's table says which traits it carries
    ("traits": null where carried, else why not), and a mode's refusal is the reason of the first
    trait it needs that is missing. So each refused mode's reason is one of the table's trait
    reasons, a mode every table runs needs no trait, and early data's reason is the document's
    "early_data" member. One C file per mode: each file of testbed/modes/ but modes.c defines one
    table, and the document lists one mode per file."""
    from testbed_helpers import REPO

    files = sorted(p for p in (REPO / "testbed" / "modes").glob("*.c") if p.name != "modes.c")
    assert len(files) == len(timer_doc["modes"]) and all("const pqs_mode_ops pqs_mode_" in p.read_text() for p in files)
    for t in timer_doc["transports"]:
        for im in t["implementations"]:
            traits = im["traits"]
            assert im["early_data"] == traits["early_data"], (t["name"], im["name"])
            reasons = {why for why in traits.values() if why is not None}
            for mode, why in im["modes"].items():
                assert why is None or why in reasons, (t["name"], im["name"], mode, why)
    tcp = next(im for t in timer_doc["transports"] if t["name"] == "tcp" for im in t["implementations"]
               if im["name"] == "openssl")
    assert set(tcp["traits"].values()) == {None} and set(tcp["modes"].values()) == {None}  # OpenSSL/TCP runs all


def test_the_programs_name_no_mode(timer_doc):
    """timer.c and server.c hold no mode's code (issue 46, item 3): no string in their code is a
    mode's name or one of its options, and they call no mode's library (fs0rtt/, core/ech.c); the
    options come from the mode files' tables, which --help lists."""
    import re

    from testbed_helpers import REPO

    mode_options = set()
    for p in (REPO / "testbed" / "modes").glob("*.c"):
        mode_options |= set(re.findall(r'\{"([a-z][a-z0-9-]*)", (?:required|no)_argument', p.read_text()))
    assert {"hrr-decoy", "bfe-public", "bfe-key", "ech", "ech-config", "psk-ke"} <= mode_options
    for prog in ("timer.c", "server.c"):
        code = re.sub(r"/\*.*?\*/", "", (REPO / "testbed" / prog).read_text(), flags=re.S)
        strings = set(re.findall(r'"((?:\\.|[^"\\])*)"', code))
        named = {s for s in strings if s in timer_doc["modes"] or s in mode_options or s.lstrip("-") in mode_options}
        # "hrr": the attempt member saying a HelloRetryRequest came, in any mode (the server may
        # prefer another group), an observation of the handshake; "tls12": the ready member saying
        # whether the server accepts TLS 1.2 (--no-tls12), a version setting. Neither is the mode's.
        assert not named - {"hrr", "tls12"}, (prog, named)
        assert not re.search(r"\bpqs_(fs0rtt|ech)_\w+|\bPQS_MODE_\w+", code), prog
        helptext = subprocess.run([str(BUILD / "bin" / f"pqs-{prog[:-2]}"), "--help"], capture_output=True, text=True)
        assert any(f"--{o}" in helptext.stdout for o in mode_options), prog
