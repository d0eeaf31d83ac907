"""A file named as a trace or a delay series that is not one (issue 29: `trace: /etc/shadow`
answered with 24 bytes of it, `trace: /proc/self/environ` with the environment) is refused with
its name, its line and what was expected, and nothing of its content: not a word, not a number.
Both readers of these files hold to it, pqshake's (emulation/traces.py, what `net validate` and
`plan` run) and pqs-linkemu's (emulation/linkemu/emu_input.c), and they say the same thing. A
number too long for Python's int() is one such line too, not Python's advice."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pqshake.emulation import traces
from pqshake.paths import binary
from hostile.test_hostile_input import pqs_in  # noqa: F401 (a fixture: pqshake main() in-process)

REPO = Path(__file__).resolve().parents[2]
MARKER = "S3CR3T-M4RK3R-7f1c"  # in every secret file: must never reach the output
NUMBER = "4071965238"  # a secret that is a number (a PIN, a key id): numbers are content too

# name: (the file's bytes, the line the message must name)
SECRETS = {
    "shadow": (f"root:$6${MARKER}$x:19000:0:99999:7:::\nnobody:*:19000:0:99999:7:::\n", 1),
    "environ": (f"PQS_X={MARKER}\0HOME=/root\0".encode(), 1),
    "second-line": (f"0 5\n{MARKER}\n", 2),
    "number-too-big": (f"{NUMBER}{NUMBER}\n", 1),
    "number-decreasing": (f"0 0\n{NUMBER} 1\n5 1\n", 3),
    "number-first": (f"{NUMBER} 5\n", 1),
    "number-delay": (f"0 {NUMBER}\n", 1),
    "number-trace-decreasing": (f"{NUMBER}\n5\n", 2),
    "number-as-delay": (f"0 1.{NUMBER}\n", 1),
}
# the trace's and the series' readers fail on different lines of some files (a series line has
# two numbers): the line each must name, where it differs from SECRETS'
TRACE_LINE = {"second-line": 1, "number-decreasing": 1, "number-first": 1, "number-delay": 1,
              "number-as-delay": 1}
SERIES_LINE = {"number-trace-decreasing": 1}
FIELDS = {"trace": TRACE_LINE, "delay_series": SERIES_LINE}


def write(path: Path, content: str | bytes) -> Path:
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


def profile(tmp_path: Path, field: str, target: str) -> Path:
    return write(tmp_path / "p.yaml", f"name: p\nuplink: {{{field}: '{target}'}}\ndownlink: {{}}\n")


def secret_gone(text: str) -> None:
    # a prefix: the old messages cut what they quoted at 24 characters
    assert MARKER[:6] not in text and NUMBER[:6] not in text, text[-2000:]


def one_line(rc: int, text: str, codes=(2,)) -> str:
    lines = text.strip().splitlines()
    assert rc in codes and len(lines) == 1 and "Traceback" not in text, (rc, text[-3000:])
    return lines[0]


def linkemu(field: str, path: Path) -> subprocess.CompletedProcess:
    """pqs-linkemu's own reader of the file: it checks its SPEC (and so reads the file) before
    anything else, and exits 2 with one line."""
    return subprocess.run([str(binary("pqs-linkemu")), "--a", "x", "--b", "y", "--up", f"{field}={path}",
                           "--down", ""], capture_output=True, text=True, errors="replace", timeout=30)


@pytest.mark.parametrize("field", sorted(FIELDS))
@pytest.mark.parametrize("secret", sorted(SECRETS))
@pytest.mark.parametrize("command", ["validate", "plan"])
def test_pqshake_names_file_and_line_and_quotes_nothing(pqs_in, tmp_path, secret, field, command):
    text, line = SECRETS[secret]
    line = FIELDS[field].get(secret, line)
    s = write(tmp_path / "shadow", text)
    p = profile(tmp_path, field, s.name)
    if command == "validate":
        rc, out, _ = pqs_in("net", "validate", p)
    else:  # an experiment naming the profile file
        e = write(tmp_path / "e.yaml", "name: c\ngroups: [x25519]\nsigs: [ecdsa-p256]\nprofiles: [p.yaml]\nsamples: 5\n")
        rc, out, _ = pqs_in("plan", e)
    got = one_line(rc, out)
    secret_gone(out)
    assert f"{p}:2 uplink.{field}: shadow:{line}: expected " in got, got


@pytest.mark.parametrize("field", sorted(FIELDS))
@pytest.mark.parametrize("secret", sorted(SECRETS))
def test_linkemu_names_file_and_line_and_quotes_nothing(tmp_path, secret, field):
    text, line = SECRETS[secret]
    line = FIELDS[field].get(secret, line)
    s = write(tmp_path / "shadow", text)
    cp = linkemu(field, s)
    got = one_line(cp.returncode, cp.stderr)
    secret_gone(cp.stdout + cp.stderr)
    assert f"--up: {field}: {s}:{line}: expected " in got, got


@pytest.mark.parametrize("field", sorted(FIELDS))
@pytest.mark.parametrize("secret", sorted(SECRETS))
def test_both_readers_say_the_same(tmp_path, secret, field):
    """After `FILE:LINE: `, pqshake's message and the emulator's are the same words."""
    s = write(tmp_path / "shadow", SECRETS[secret][0])
    parse = traces.parse_trace if field == "trace" else traces.parse_series
    with pytest.raises(traces.InputError) as ei:
        parse(s.read_bytes(), str(s))
    py = str(ei.value)
    cp = linkemu(field, s)
    c = one_line(cp.returncode, cp.stderr).split(f"--up: {field}: ", 1)[1].split(" (usage: ", 1)[0]
    assert c == py, (c, py)


def test_proc_self_environ_is_not_quoted(tmp_path):
    """`trace: /proc/self/environ`: the first bytes of the environment were the message."""
    p = profile(tmp_path, "trace", "/proc/self/environ")
    env = {"PQS_TEST_SECRET": MARKER, **os.environ}  # first: the bytes the old message quoted
    cp = subprocess.run([sys.executable, "-m", "pqshake.cli", "net", "validate", str(p)], cwd=REPO, env=env,
                        capture_output=True, text=True, errors="replace", timeout=120)
    got = one_line(cp.returncode, cp.stdout + cp.stderr)
    secret_gone(cp.stdout + cp.stderr)
    assert f"{p}:2 uplink.trace: /proc/self/environ" in got, got


HUGE = "9" * 5000  # beyond Python's int() limit for decimal strings (4300 digits)


@pytest.mark.parametrize("field,text,line", [
    ("trace", f"1\n{HUGE}\n", 2),
    ("trace", f"{HUGE}\n", 1),
    ("trace", f"1\n{'0' * 4990}7\n", 2),  # leading zeros: a small number, as the emulator reads it
    ("delay_series", f"0 1\n{HUGE} 1\n", 2),
    ("delay_series", f"0 {HUGE}\n", 1),
    ("delay_series", f"0 1.{HUGE}\n", 1),
])
def test_a_5000_digit_number_is_one_line_naming_file_and_line(pqs_in, tmp_path, field, text, line):
    write(tmp_path / "x.in", text)
    p = profile(tmp_path, field, "x.in")
    t0 = time.monotonic()
    rc, out, _ = pqs_in("net", "validate", p)
    if "0" * 4990 in text:  # a valid trace: 1, 7
        assert rc == 0, out
        return
    got = one_line(rc, out)
    assert time.monotonic() - t0 < 5
    assert f"{p}:2 uplink.{field}: x.in:{line}: " in got and "int_max_str_digits" not in got, got
    assert HUGE[:30] not in got


def test_messages_say_what_was_expected():
    """What the lines say instead of the content (the same words in emu_input.c)."""
    cases = [
        (traces.parse_trace, b"1\nabc\n", "f:2: expected a whole number of milliseconds (one whole number of "
                                          "milliseconds per line, as Mahimahi's traces)"),
        (traces.parse_trace, b"1\n5\n3\n", "f:3: expected a timestamp no earlier than the previous line's "
                                           "(timestamps must not decrease)"),
        (traces.parse_trace, b"99999999999\n", "f:1: expected a timestamp of at most 4294967295 ms (the largest)"),
        (traces.parse_series, b"0 10\n100 x\n", "f:2: expected 'TIME_MS DELAY_MS' (time a whole number of ms, "
                                                "delay ms >= 0 with at most 6 decimals)"),
        (traces.parse_series, b"5 10\n", "f:1: expected the first time to be 0 ms (a series starts at 0 ms)"),
        (traces.parse_series, b"0 1\n9 1\n3 1\n", "f:3: expected a time no earlier than the previous line's "
                                                  "(times must not decrease)"),
        (traces.parse_series, b"0 3600001\n", "f:1: expected a delay of at most an hour (3600000 ms)"),
        (traces.parse_series, b"4294967296 1\n", "f:1: expected a time of at most 4294967295 ms (the largest)"),
    ]
    for parse, data, want in cases:
        with pytest.raises(traces.InputError) as ei:
            parse(data, "f")
        assert str(ei.value) == want
