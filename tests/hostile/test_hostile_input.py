"""Hostile profile and experiment files (issue 20, "Hostile YAML and files").

Whatever a user feeds `pqshake plan`, `net show` or `net validate`, the answer is one line that
names the file, exit status 2, never a traceback, within bounded time and memory; and nothing of
a file that is not a profile or an experiment is echoed (`net show ../../etc/shadow`).

Most cases run in-process through pqshake.cli.main, as tests/analysis does: a child costs ~0.3 s
to start. The cases about time and memory run as real children under an address-space limit, so
a blow-up fails fast instead of taking the machine. OTHERS_CASES are defects fixed outside the
YAML loader (plan checks, resume, run options), kept here so the probe is complete.
"""

from __future__ import annotations

import contextlib
import copy
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from needs import need
from pqshake import yamlsrc
from pqshake.emulation.profiles import GEModel, Direction, Profile, TcpSettings
from pqshake.rows import axes as AX
from pqshake.errors import UserError
from pqshake.experiments.model import Experiment

REPO = Path(__file__).resolve().parents[2]
MARKER = "S3CR3T-M4RK3R-7f1c"  # in every secret file: must never reach the output

IN_PROCESS_S = 2.0  # one in-process case (a refusal takes ~10 ms; a good plan ~0.15 s)
SUBPROCESS_S = 5.0  # one CLI child with interpreter start (baseline ~0.3 s on 2 cores)
MAX_RSS_KB = 150_000  # a child's peak RSS (baseline ~50 MB; the 6-level alias bomb took 390 MB)
AS_LIMIT = 1 << 30  # a child's address space: a blow-up dies at 1 GiB, not at the host's RAM

PROFILE = {"name": "p", "uplink": {"delay": "10ms"}, "downlink": {"delay": "10ms"}}
RTT_PROFILE = {"name": "p", "rtt": "20ms"}  # for the top-level shorthands (rtt excludes a direction's delay)
EXPERIMENT = {"name": "c", "groups": ["x25519"], "sigs": ["ecdsa-p256"], "profiles": ["lan"], "samples": 5}
CMDS = {"plan": ["plan"], "validate": ["net", "validate"], "show": ["net", "show"]}


# ------------------------------------------------------------------------------ running --

@pytest.fixture
def pqs_in(capsys):
    """pqshake's main() in this process: (exit status, stdout + stderr, seconds)."""
    from pqshake import cli

    def call(*argv) -> tuple[int, str, float]:
        t0 = time.monotonic()
        rc = cli.main([str(a) for a in argv])
        wall = time.monotonic() - t0
        out = capsys.readouterr()
        return rc, out.out + out.err, wall

    return call


# Runs pqshake in a child of its own and reports that child's exit status and peak RSS. A child
# forked straight from pytest would report pytest's peak RSS instead: Linux keeps the high-water
# mark across exec. This launcher is small, so its fork starts low.
LAUNCHER = """
import os, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[2]),) * 2)
pid = os.fork()
if pid == 0:
    os.execv(sys.executable, [sys.executable, "-m", "pqshake.cli", *sys.argv[3:]])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(f"{os.waitstatus_to_exitcode(status)} {usage.ru_maxrss}")
"""


def run_child(*argv, timeout: float = 3 * SUBPROCESS_S) -> tuple[int, str, float, int]:
    """pqshake in a child under AS_LIMIT: (exit status, stdout + stderr, seconds, peak RSS kB)."""
    with tempfile.TemporaryDirectory() as d:
        result = Path(d) / "result"
        t0 = time.monotonic()
        p = subprocess.Popen([sys.executable, "-c", LAUNCHER, result, str(AS_LIMIT), *map(str, argv)], cwd=REPO,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True)
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:  # a hang fails the test instead of the run
            os.killpg(p.pid, 9)
            out, _ = p.communicate()
        wall = time.monotonic() - t0
        rc, rss_kb = map(int, result.read_text().split()) if result.exists() else (-9, 0)
        return rc, out.decode(errors="replace"), wall, rss_kb


def check_one_line(rc: int, text: str, names=(), needles=(), codes=(2,)) -> str:
    """The contract: exit status in codes, exactly one non-empty line, no traceback, naming one of
    `names` (the file) and containing every needle, and short enough to read."""
    lines = text.strip().splitlines()
    assert rc in codes and len(lines) == 1 and "Traceback" not in text, (rc, text[-3000:])
    line = lines[0]
    assert len(line) < 1000, line[:300]
    if names:
        assert any(str(n) in line for n in names), (names, line)
    for n in needles:
        assert n in line, (n, line)
    return line


def write(path: Path, content: str | bytes) -> Path:
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


def dump(doc) -> str:
    return yaml.safe_dump(doc, sort_keys=False)


def with_value(base: dict, path: tuple, value) -> dict:
    doc = copy.deepcopy(base)
    d = doc
    for k in path[:-1]:
        d = d.setdefault(k, {})
    d[path[-1]] = value
    return doc


# ---------------------------------------------------------------------------- full disk --
# For the full-disk cases of test_run_dir_files.py (load) and test_run_dir_links.py (figures).

@contextlib.contextmanager
def tmpfs(d: Path, size: str):
    """A tmpfs of `size` (mount's size=, e.g. "4m") mounted at d (made here), unmounted on leaving."""
    need(os.geteuid() == 0, "mounting a tmpfs needs root")
    d.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "pqs-test-full", str(d)],
                       capture_output=True, text=True)
    need(r.returncode == 0, f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield d
    finally:
        subprocess.run(["umount", str(d)], check=True)


def fill(fs: Path, room: int) -> None:
    """Fill fs, then free `room` bytes: enough for the first small files, not for the rest."""
    with open(fs / "filler", "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError:
            pass
        f.truncate(max(0, f.tell() - room))


# --------------------------------------------------------------- the good files stay good --

def test_the_bases_are_valid(pqs_in, tmp_path):
    """Every generated case below is a base plus one mistake: the bases themselves pass, so a
    refusal is the mistake's."""
    for i, doc in enumerate([PROFILE, with_value(PROFILE, ("uplink", "gemodel", "p"), "1%"), RTT_PROFILE]):
        rc, out, _ = pqs_in("net", "validate", write(tmp_path / f"p{i}.yaml", dump(doc)))
        assert rc == 0, out
    exp = write(tmp_path / "e.yaml", dump(EXPERIMENT))
    rc, out, _ = pqs_in("plan", exp)
    assert rc == 0, out
    # anchors and aliases used as intended still work
    exp2 = write(tmp_path / "e2.yaml", "name: c\ngroups: &g [x25519]\nsigs: [ecdsa-p256]\nprofiles: [lan]\n"
                                       "samples: 5\nexclude: [{group: *g, mode: tls12}]\n")
    rc, out, _ = pqs_in("plan", exp2)
    assert rc == 0, out
    rc, out, _ = pqs_in("net", "show", "lan")
    assert rc == 0, out


def test_limits_are_generous_for_every_shipped_file():
    """Each shipped profile/experiment (and the registry, the largest YAML of the repo) uses at
    most a tenth of every limit, and loads through the bounded loader."""
    files = [*(REPO / "emulation/profiles").glob("*.yaml"), *(REPO / "experiments").glob("*.yaml"),
             REPO / "pqshake/algorithms.yaml"]
    assert len(files) > 20
    for f in files:
        budget = yamlsrc.Budget()
        docs = yamlsrc.load_docs(f, budget=budget)
        assert docs
        assert f.stat().st_size * 10 < yamlsrc.MAX_BYTES, f
        assert (yamlsrc.MAX_NODES - budget.nodes) * 10 < yamlsrc.MAX_NODES, f
        depth = max(len(loc) for d in docs for loc in d.lines)
        assert depth * 10 < yamlsrc.MAX_DEPTH, f


@pytest.mark.parametrize("what", ["bytes", "nodes", "depth"])
def test_exactly_at_the_limit_loads_one_more_is_refused(tmp_path, what):
    """The limits are where the docs say, not somewhere below."""
    def text(n: int) -> str:
        if what == "bytes":  # a comment pads the file to n bytes
            head = "a: 1\n# "
            return head + "x" * (n - len(head) - 1) + "\n"
        if what == "nodes":  # a mapping, a key, a list and n - 3 items
            return "a: [" + ",".join("1" * (n - 3)) + "]\n"
        return "[" * n + "]" * n + "\n"  # n lists inside each other
    limit = {"bytes": yamlsrc.MAX_BYTES, "nodes": yamlsrc.MAX_NODES, "depth": yamlsrc.MAX_DEPTH}[what]
    ok = write(tmp_path / "ok.yaml", text(limit))
    assert yamlsrc.load_docs(ok)
    bad = write(tmp_path / "bad.yaml", text(limit + 1))
    with pytest.raises(UserError, match=str(limit)):
        yamlsrc.load_docs(bad)


# ---------------------------------------------------------- every field, wrongly typed --

def _paths(model, prefix=()) -> list[tuple]:
    return [prefix + (f.alias or name,) for name, f in model.model_fields.items()]


PROFILE_PATHS = [*_paths(Profile), *_paths(Direction, ("uplink",)), *_paths(TcpSettings, ("tcp",)),
                 *_paths(GEModel, ("uplink", "gemodel"))]
EXPERIMENT_PATHS = [*_paths(Experiment), ("include",)]
WRONG = {"list": [1, 2], "map": {"x": 1}}


@pytest.mark.parametrize("kind", sorted(WRONG))
@pytest.mark.parametrize("path", PROFILE_PATHS, ids=".".join)
def test_profile_field_of_the_wrong_type(pqs_in, tmp_path, path, kind):
    base = with_value(PROFILE, ("uplink", "gemodel", "p"), "1%") if "gemodel" in path else PROFILE
    f = write(tmp_path / "p.yaml", dump(with_value(base, path, WRONG[kind])))
    rc, out, wall = pqs_in("net", "validate", f)
    check_one_line(rc, out, [f], [path[0]])
    assert wall < IN_PROCESS_S


@pytest.mark.parametrize("kind", sorted(WRONG))
@pytest.mark.parametrize("path", EXPERIMENT_PATHS, ids=".".join)
def test_experiment_field_of_the_wrong_type(pqs_in, tmp_path, path, kind):
    # a setting that is a matrix axis takes a list (a sweep): there, a list of mappings is wrong
    wrong = [{"x": 1}, {"y": 2}] if kind == "list" and path[0] in AX.keys() else WRONG[kind]
    f = write(tmp_path / "e.yaml", dump(with_value(EXPERIMENT, path, wrong)))
    rc, out, wall = pqs_in("plan", f)
    check_one_line(rc, out, [f], [path[0]])
    assert wall < IN_PROCESS_S


# ------------------------------------------------- numbers, units, enums: wrong values --

NAN, INF = float("nan"), float("inf")
PROFILE_VALUES = [
    (("mtu",), -1, "mtu"), (("mtu",), 0, "mtu"), (("mtu",), 10**30, "mtu"), (("seed",), -1, "seed"),
    (("seed",), 2**64, "seed"), (("name",), "Bad Name", "name"), (("name",), "x" * 500, "name"),
    (("description",), "two\nlines", "one line"),
    (("uplink", "delay"), "-5ms", "negative"), (("uplink", "delay"), 20, "no unit"),
    (("uplink", "delay"), "20 min", "unknown time unit"), (("uplink", "delay"), "0.5ns", "finer"),
    (("uplink", "delay"), "1e999999999s", "more than a day"), (("uplink", "delay"), "1e-999999999s", "finer"),
    (("uplink", "delay"), NAN, "finite"), (("uplink", "delay"), INF, "finite"), (("uplink", "jitter"), -INF, "finite"),
    (("uplink", "rate"), "10Mbps", "ambiguous"), (("uplink", "rate"), "10 furlongs", "unknown rate unit"),
    (("uplink", "rate"), "-1Mbit", "negative"), (("uplink", "rate"), "1e30Gbit", "10Tbit"),
    (("uplink", "rate"), NAN, "finite"), (("uplink", "rate"), INF, "finite"),
    (("uplink", "loss"), "101%", "above 100%"), (("uplink", "loss"), "-1%", "negative"),
    (("uplink", "loss"), 0.5, "no unit"), (("uplink", "loss"), "5 percent", "not a percentage"),
    (("uplink", "loss"), NAN, "finite"), (("uplink", "duplicate"), INF, "finite"),
    (("uplink", "limit"), 0, "limit"), (("uplink", "limit"), 10**9, "limit"), (("uplink", "overhead"), -100, "overhead"),
    (("uplink", "reorder_gap"), 0, "reorder_gap"), (("uplink", "distribution"), "gaussian", "distribution"),
    (("tcp", "initcwnd"), 0, "initcwnd"), (("tcp", "initcwnd"), 5000, "initcwnd"),
    (("tcp", "initrwnd"), {"client": 0}, "initrwnd"), (("tcp", "rmem"), [3, 2, 1], "rmem"),
    (("tcp", "congestion_control"), "Bad CC!", "congestion_control"), (("rtt",), "41ns", "rtt"),
]


@pytest.mark.parametrize("path,value,needle", PROFILE_VALUES, ids=lambda v: str(v)[:24])
def test_profile_value_out_of_range(pqs_in, tmp_path, path, value, needle):
    doc = RTT_PROFILE if path[0] == "rtt" else PROFILE
    f = write(tmp_path / "p.yaml", dump(with_value(doc, path, value)))
    rc, out, wall = pqs_in("net", "validate", f)
    line = check_one_line(rc, out, [f], [needle])
    assert "nanms" not in line and "infms" not in line  # no fix that writes a unit after nan/inf
    assert wall < IN_PROCESS_S


EXPERIMENT_VALUES = [
    ({"samples": 0}, "samples"), ({"samples": -1}, "samples"), ({"samples": 10**12}, "samples"),
    ({"samples": "lots"}, "samples"), ({"warmup": -1}, "warmup"), ({"repetitions": 0}, "repetitions"),
    ({"concurrency": 0}, "concurrency"), ({"concurrency": 10**4}, "concurrency"),
    ({"response_bytes": -1}, "response_bytes"), ({"timeout": 0}, "timeout"), ({"timeout": "1e400s"}, "timeout"),
    ({"timeout": NAN}, "finite"), ({"chain_depth": 5}, "chain_depth"), ({"client_chain_depth": 0}, "client_chain_depth"),
    ({"rtt_probes": -1}, "rtt_probes"), ({"block": 0}, "block"), ({"seed": -1}, "seed"),
    ({"turbo_requests": 0}, "positive integer"), ({"turbo_requests": 2000}, "positive integer"),
    ({"turbo_requests": "many"}, "positive integer"), ({"turbo_requests": -3}, "positive integer"),
    ({"turbo_requests": True}, "positive integer"), ({"turbo_requests": 1.5}, "positive integer"),
    ({"turbo_fallback": "11s"}, "turbo_fallback"), ({"turbo_fallback": INF}, "finite"),
    ({"modes": ["fast"]}, "modes"), ({"transports": ["sctp"]}, "transports"), ({"order": "random"}, "order"),
    ({"engine": "ns3"}, "engine"), ({"quic_retry": "maybe"}, "quic_retry"),
    ({"early_response": "sometimes"}, "early_response"), ({"groups": ["mlkem768"]}, "groups"),
    ({"sigs": ["ecdsa-p265"]}, "sigs"), ({"profiles": ["no-such-profile"]}, "no-such-profile"),
    ({"profiles": ["../../../../etc/shadow"]}, "not a .yaml"), ({"groups": []}, "groups"),
    ({"groups": ["x25519", "x25519"]}, "twice"), ({"name": "bad name!"}, "name"),
    ({"samples": "auto", "adaptive": {"min": 100, "max": 10}}, "min"),
    ({"samples": "auto", "adaptive": {"ci": "0%"}}, "ci"), ({"exclude": [{}]}, "exclude"),
    ({"exclude": [{"mode": "fast"}]}, "exclude"), ({"cpu_placement": {"emulator": []}}, "cpu_placement"),
    ({"engine": "mininet", "topology": {"kind": "ring"}}, "topology"), ({"include": "nope.yaml"}, "no such file"),
    ({"profiles": [{"name": "x", "rtt": ".nan"}]}, "profiles"), ({"profiles": [{"name": "x", "rtt": 40}]}, "no unit"),
]


@pytest.mark.parametrize("change,needle", EXPERIMENT_VALUES, ids=lambda v: str(v)[:28])
def test_experiment_value_out_of_range(pqs_in, tmp_path, change, needle):
    f = write(tmp_path / "e.yaml", dump({**EXPERIMENT, **change}))
    rc, out, wall = pqs_in("plan", f)
    line = check_one_line(rc, out, [f], [needle])
    if "turbo_requests" in change:  # was pydantic's internals: one message per union branch
        assert "constrained-int" not in line and "literal[" not in line and "or auto" in line
    assert wall < IN_PROCESS_S


@pytest.mark.parametrize("key,meant,where", [("Samples", "samples", "experiment"), ("Loss", "loss", "profile"),
                                             ("Profile", "profiles", "experiment"), ("Uplink", "uplink", "profile"),
                                             ("Xyzzy", None, "profile")])
def test_an_unknown_key_is_named_whatever_its_case(pqs_in, tmp_path, key, meant, where):
    """A key in CamelCase (or one spelt like a model's class name) is the user's, not a union
    member pydantic adds to locations: the message names it at its line, with the field meant."""
    if where == "experiment":
        f = write(tmp_path / "e.yaml", dump({**EXPERIMENT, key: 3}))
        rc, out, _ = pqs_in("plan", f)
    else:
        f = write(tmp_path / "p.yaml", f"name: p\nrtt: 10ms\n{key}: 1%\n")
        rc, out, _ = pqs_in("net", "show", f)
    line = check_one_line(rc, out, [f], [f"{key}: unknown field"])
    n = len((tmp_path / f.name).read_text().splitlines())
    assert f"{f}:{n} {key}: unknown field" in line, line
    assert (f"(did you mean {meant}?)" in line) if meant else ("did you mean" not in line), line


# --------------------------------------------------------------- files that are no YAML --

def _deep_block(n: int) -> str:
    return "name: p\nx:\n" + "".join(" " * i + "k:\n" for i in range(1, n + 1))


RAW: dict[str, tuple[str | bytes, str | None]] = {
    "empty": (b"", None),
    "comments-only": (b"# nothing here\n", None),
    "blank-lines": (b"\n\n   \n", None),
    "doc-markers-only": (b"---\n...\n", None),
    "null-doc": (b"~\n", None),
    "top-list": (b"- name: p\n- rtt: 20ms\n", None),
    "top-string": (b"just some words\n", None),
    "top-int": (b"42\n", None),
    "top-quoted-multiline": (b'"a\\nb"\n', None),
    "binary": (bytes(range(256)) * 4, "UTF-8"),
    "latin1": ("name: caf\xe9\n".encode("latin-1"), "UTF-8"),
    "utf16": ("name: p\n".encode("utf-16"), "UTF-8"),
    "nul-byte": (b"name: p\x00\n", "#x0000"),
    "control-char": (b"name: p\x07\n", "#x0007"),
    "dup-top-key": (b"name: p\nname: q\n", "given twice"),
    "dup-nested-key": (b"name: p\nuplink: {delay: 1ms, delay: 2ms}\n", "given twice"),
    "tab-indent": (b"name: p\nuplink:\n\tdelay: 1ms\n", "tabs"),
    "bad-indent": (b"name: p\n  rtt: 20ms\n", "YAML syntax"),
    "unclosed-flow": (b"name: [p\n", "YAML syntax"),
    "unclosed-quote": (b'name: "p\n', "YAML syntax"),
    "undefined-alias": (b"name: *nope\n", "YAML syntax"),
    "duplicate-anchor": (b"name: &a p\ndescription: &a q\n", "YAML syntax"),
    "alias-as-key": (b"name: &k p\n*k : 1\n", None),
    "yaml-2": (b"%YAML 2.0\n---\nname: p\n", "YAML syntax"),
    "merge-key": (b"base: &b {rtt: 20ms}\nname: p\n<<: *b\n", "merge keys"),
    "unknown-tag": (b"name: !foo p\n", "tag"),
    "python-tag": (b"name: !!python/object/apply:os.system [echo hi]\n", "tag"),
    "bad-binary": (b"name: !!binary '%%%'\n", None),
    "set-tag": (b"name: !!set {a, b}\n", "tag"),
    "long-number": (b"name: p\nmtu: " + b"9" * 5000 + b"\n", "100 characters"),
    "sexagesimal": (b"name: p\nmtu: 1" + b":59" * 2000 + b"\n", "100 characters"),
    "key-not-plain": (b"[a, b]: 1\nname: p\n", "plain name"),
    "null-key": (b"~: 1\nname: p\n", "plain name"),
    "int-key": (b"1: 2\nname: p\n", None),
    "huge-key": ("k" * 5000 + ": 1\nname: p\n", None),
    "key-with-newline": (b'"a\\nb": 1\nname: p\n', None),
    "deep-flow": ("name: p\ndescription: " + "[" * 65 + "]" * 65 + "\n", "64 deep"),
    "deep-block": (_deep_block(70), "64 deep"),
    "recursive-list": (b"name: p\ndescription: &r [*r]\n", "never ends"),
    "recursive-map": (b"name: p\ndescription: &r {a: *r}\n", "never ends"),
    "text-bomb": ('name: p\nbasis: &s "' + "x" * 60_000 + '"\ndescription: [' + ", ".join(["*s"] * 30) + "]\n",
                  "characters of text"),
    "small-alias-bomb": ("name: p\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
                         + "".join(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n" for i in range(1, 5))
                         + "description: *a4\n", "50000 values"),
    "second-doc-bad": (b"name: p\nrtt: 20ms\n---\nname: q\nrtt: fast\n", None),
    "docs-same-name": (b"name: p\nrtt: 20ms\n---\nname: p\nrtt: 30ms\n", None),
    "only-unknown-keys": (b"colour: red\nsize: 3\n", "not a"),
}


@pytest.mark.parametrize("cmd", sorted(CMDS))
@pytest.mark.parametrize("case", sorted(RAW))
def test_malformed_file(pqs_in, tmp_path, case, cmd):
    content, needle = RAW[case]
    f = write(tmp_path / "f.yaml", content)
    rc, out, wall = pqs_in(*CMDS[cmd], f)
    check_one_line(rc, out, [f], [needle] if needle else [])
    assert wall < IN_PROCESS_S


def _special(tmp_path: Path, what: str) -> Path:
    if what == "missing":
        return tmp_path / "nope.yaml"
    if what == "directory":
        (tmp_path / "d.yaml").mkdir()
        return tmp_path / "d.yaml"
    if what == "dangling-link":
        (tmp_path / "l.yaml").symlink_to(tmp_path / "gone.yaml")
        return tmp_path / "l.yaml"
    if what == "link-loop":
        (tmp_path / "a.yaml").symlink_to(tmp_path / "b.yaml")
        (tmp_path / "b.yaml").symlink_to(tmp_path / "a.yaml")
        return tmp_path / "a.yaml"
    if what == "under-a-file":
        write(tmp_path / "file", "x")
        return tmp_path / "file" / "p.yaml"
    raise AssertionError(what)


# A dangling or looping link: `plan` names it as a link; the profile loader says what it found.
SPECIAL = {"missing": "no such file", "directory": "is a directory", "dangling-link": "no such file",
           "link-loop": None, "under-a-file": "no such file"}
PLAN_SPECIAL = {**SPECIAL, "dangling-link": "symbolic link to nothing", "link-loop": "symbolic link to nothing"}


@pytest.mark.parametrize("cmd", sorted(CMDS))
@pytest.mark.parametrize("what", sorted(SPECIAL))
def test_not_a_file(pqs_in, tmp_path, what, cmd):
    f = _special(tmp_path, what)
    rc, out, _ = pqs_in(*CMDS[cmd], f)
    want = (PLAN_SPECIAL if cmd == "plan" else SPECIAL)[what]
    check_one_line(rc, out, [f], [want] if want else [])


@pytest.mark.parametrize("cmd", ["plan", "validate"])
def test_a_device_is_refused_before_reading(pqs_in, cmd):
    rc, out, _ = pqs_in(*CMDS[cmd], "/dev/null")
    check_one_line(rc, out, ["/dev/null"], ["not a regular file"])


# ------------------------------------------------------------------------ includes --

def test_include_of_a_directory_says_so(pqs_in, tmp_path):
    (tmp_path / "defaults").mkdir()
    f = write(tmp_path / "e.yaml", dump({"include": "defaults", **EXPERIMENT}))
    rc, out, _ = pqs_in("plan", f)
    check_one_line(rc, out, [f], ["include", "is a directory", "name a .yaml file"])


@pytest.mark.parametrize("include,needle", [
    ("nope.yaml", "no such file"), ("e.yaml", "circular"), ("notes.txt", "not a .yaml"),
    ("a\0b.yaml", "no such file"), (["x.yaml", 3], "list of file names"), ({"a": 1}, "list of file names"),
])
def test_include_refusals(pqs_in, tmp_path, include, needle):
    write(tmp_path / "notes.txt", "samples: 5\n")
    f = write(tmp_path / "e.yaml", dump({"include": include, **EXPERIMENT}))
    rc, out, _ = pqs_in("plan", f)
    check_one_line(rc, out, [f], [needle])


def test_includes_that_multiply_are_bounded(pqs_in, tmp_path):
    """A file including the same small file 200 times (a diamond of includes grows like a
    bomb): the files read for one experiment are counted."""
    write(tmp_path / "d.yaml", "warmup: 1\n")
    f = write(tmp_path / "e.yaml", dump({"include": ["d.yaml"] * (yamlsrc.MAX_FILES + 1), **EXPERIMENT}))
    rc, out, wall = pqs_in("plan", f)
    check_one_line(rc, out, [tmp_path / "d.yaml"], [f"more than {yamlsrc.MAX_FILES} files"])
    assert wall < IN_PROCESS_S


# ---------------------------------------------------- names resolve to profiles only --

def test_a_bare_name_never_opens_a_file_of_the_working_directory(pqs_in, tmp_path, monkeypatch):
    write(tmp_path / "myprof", "name: myprof\nrtt: 20ms\n")
    monkeypatch.chdir(tmp_path)
    rc, out, _ = pqs_in("net", "show", "myprof")
    check_one_line(rc, out, ["myprof"], ["unknown profile"])


@pytest.mark.parametrize("ref,needle", [
    ("../../../../etc/shadow", "not a .yaml"), ("../../../../etc/passwd", "not a .yaml"), ("lan/", "not a .yaml"),
    ("./lan", "not a .yaml"), ("p.txt", "unknown profile"), ("..", "unknown profile"), ("lte-goood", "lte-good"),
])
def test_net_show_names(pqs_in, ref, needle):
    rc, out, _ = pqs_in("net", "show", ref)
    check_one_line(rc, out, [ref], [needle])


def test_hash_picks_a_profile_or_says_which_exist(pqs_in, tmp_path):
    f = write(tmp_path / "two.yaml", "name: a\nrtt: 10ms\n---\nname: b\nrtt: 20ms\n")
    rc, out, _ = pqs_in("net", "show", f"{f}#nope")
    check_one_line(rc, out, [f], ["no profile named 'nope'"])


# ------------------------------------------------- secrets: name and line, nothing else --

SECRETS = {
    "shadow": f"root:$6${MARKER}$x:19000:0:99999:7:::\nnobody:*:19000:0:99999:7:::\n",
    "key": f"{MARKER}: 1\nother: 2\n",
    "value": f"colour: {MARKER}\n",
    "list": f"- {MARKER}\n- two\n",
    "scalar": f"{MARKER}\n",
    "alias": f"colour: *{MARKER}\n",
    "tag": f"!{MARKER} x\n",
    "tab": f"{MARKER}:\n\t- x\n",
    "anchor-twice": f"a: &{MARKER} 1\nb: &{MARKER} 2\n",
    "key-twice": f"{MARKER}: 1\n{MARKER}: 2\n",
    "nested": f"colour:\n  {MARKER}: 1\n",
    "unclosed": f"[{MARKER}, \n",
}
ROUTES = ["show-link", "validate", "plan", "include", "profile-entry"]


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("secret", sorted(SECRETS))
def test_a_file_that_is_not_ours_is_never_echoed(pqs_in, tmp_path, secret, route):
    """Like /etc/shadow: read (it exists, it may even be readable), refused, and nothing of it
    beyond its name and a line number appears."""
    s = write(tmp_path / "shadow", SECRETS[secret])
    link = tmp_path / "innocent.yaml"
    link.symlink_to(s)
    if route == "show-link":
        argv = ["net", "show", link]
    elif route == "validate":
        argv = ["net", "validate", s]
    elif route == "plan":
        argv = ["plan", s]
    else:
        key = "include" if route == "include" else "profiles"
        argv = ["plan", write(tmp_path / "e.yaml", dump({**EXPERIMENT, key: [link.name]}))]
    rc, out, _ = pqs_in(*argv)
    check_one_line(rc, out, [s, link, tmp_path / "e.yaml"])
    assert MARKER not in out


def test_long_values_are_cut(pqs_in, tmp_path):
    """A profile that is ours may be echoed, but a value only up to a short bound."""
    f = write(tmp_path / "p.yaml", f"name: p\nrtt: 20ms\nmtu: '{'9' * 50}{MARKER}'\n")
    rc, out, _ = pqs_in("net", "validate", f)
    check_one_line(rc, out, [f], ["mtu"])
    assert MARKER not in out


# ---------------------------------------------- time and memory: real children, bounded --

def _bomb(levels: int, key: str, base: str) -> str:
    lines = ['a0: &a0 "lol"'] + [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, levels + 1)]
    return base + "".join(f"x_{line}\n" for line in lines) + f"{key}: *a{levels}\n"


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


BOUNDED = {
    # name: (argv after 'pqshake', given tmp_path), needle
    "alias-bomb-9-profile": (lambda t: ["net", "validate", write(t / "b.yaml", _bomb(9, "description", "name: p\n"))],
                             "50000 values"),
    "alias-bomb-9-experiment": (lambda t: ["plan", write(t / "b.yaml", _bomb(9, "description", dump(EXPERIMENT)))],
                                "50000 values"),
    "recursive-alias": (lambda t: ["net", "validate", write(t / "r.yaml", "name: p\ndescription: &r [*r]\n")],
                        "never ends"),
    "deep-nesting": (lambda t: ["net", "validate", write(t / "d.yaml", "name: p\ndescription: " + "[" * 100_000
                                                       + "]" * 100_000 + "\n")], "64 deep"),
    "24MB-list": (lambda t: ["plan", write(t / "l.yaml", "name: c\nsigs: [" + "1," * 12_000_000 + "1]\n")],
                  "1048576 bytes"),
    "dev-zero-plan": (lambda t: ["plan", "/dev/zero"], "not a regular file"),
    "dev-zero-validate": (lambda t: ["net", "validate", "/dev/zero"], "not a regular file"),
    "fifo-plan": (lambda t: ["plan", _fifo(t / "fifo.yaml")], "FIFO"),
    "fifo-show": (lambda t: ["net", "show", _fifo(t / "fifo.yaml")], "FIFO"),
    "sexagesimal-900kB": (lambda t: ["net", "validate", write(t / "s.yaml", "name: p\nmtu: 1" + ":59" * 300_000 + "\n")],
                          "100 characters"),
    "text-bomb-500MB": (lambda t: ["net", "validate", write(t / "t.yaml", 'name: p\nbasis: &s "' + "x" * 500_000 + '"\n'
                                                            "description: [" + ", ".join(["*s"] * 1000) + "]\n")],
                        "characters of text"),
}


@pytest.mark.parametrize("case", sorted(BOUNDED))
def test_bounded_time_and_memory(tmp_path, case):
    make, needle = BOUNDED[case]
    argv = make(tmp_path)
    rc, out, wall, rss_kb = run_child(*argv)
    check_one_line(rc, out, [argv[-1]], [needle])
    assert wall < SUBPROCESS_S, f"{case}: {wall:.1f} s"
    assert rss_kb < MAX_RSS_KB, f"{case}: peak RSS {rss_kb} kB"


# ------------------------------------- fixed elsewhere (plan, resume, run): checked together --

def _resume_bad_meta(t: Path) -> list:
    run = t / "results" / "c" / "20250101-000000-abcd"
    run.mkdir(parents=True)
    write(run / "meta.json", "{not json")
    return ["resume", run]


def _days_long(t: Path) -> Path:
    # Estimated at days: without --yes and without a terminal, `run` refuses before doing anything,
    # so even a missing --seed check cannot start a run here (the needle then fails the test).
    return write(t / "e.yaml", dump({**EXPERIMENT, "samples": 5_000_000, "profiles": ["rtt100"]}))


OTHERS_CASES = [
    pytest.param(lambda t: ["plan", write(t / "e.yaml", dump({**EXPERIMENT, "modes": ["resume_psk"],
                                                             "transports": ["turbotls"]}))],
                 "resume_psk", (2,), id="resume_psk-over-turbotls"),
    pytest.param(_resume_bad_meta, "meta.json", (1, 2), id="resume-meta-not-json"),
    pytest.param(lambda t: ["net", "validate", write(t / "p.yaml", "name: p\nrtt: 20ms\nrate: 0\n")], "rate", (2,),
                 id="profile-rate-0"),
    pytest.param(lambda t: ["run", _days_long(t), "--seed=-5", "--out", t / "results"], "seed", (2,), id="run-seed-negative"),
    pytest.param(lambda t: ["plan", write(t / "e.yaml", dump({**EXPERIMENT, "backend": "kernel"}))], "backend", (2,),
                 id="backend-kernel"),
    pytest.param(lambda t: ["net", "validate", write(t / "p.yaml", "name: p\nrtt: 20ms\ntcp: {congestion_control: turbo}\n")],
                 "congestion_control", (2,), id="tcp-congestion-turbo"),
    pytest.param(lambda t: ["plan", write(t / "e.yaml", dump({**EXPERIMENT, "tcp_fastopen": True, "transports": ["quic"]}))],
                 "tcp_fastopen", (2,), id="tcp_fastopen-without-tcp"),
]


@pytest.mark.parametrize("make,needle,codes", OTHERS_CASES)
def test_others(tmp_path, make, needle, codes):
    argv = make(tmp_path)
    rc, out, wall, _ = run_child(*argv, timeout=60)
    check_one_line(rc, out, (), [needle], codes=codes)
    assert wall < SUBPROCESS_S
