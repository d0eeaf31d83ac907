"""The docs document every option each program's --help prints (the brief: 'Document every
option in --help and the README': the README's reference part moved to docs/usage.md, "The
programs"), every make target the README and docs/usage.md name exists, the README stays a
five-minute read that points into docs/, and every link of the README and docs/ resolves."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pqshake.paths import build_dir

REPO = Path(__file__).resolve().parent.parent
PROGRAMS = ["pqs-server", "pqs-timer", "pqs-speed", "pqs-bfe-keygen", "pqs-linkemu", "pqs-probe", "pqs-capture"]
USAGE = REPO / "docs" / "usage.md"  # the reference the README points to: the programs, the make targets


@pytest.mark.parametrize("program", PROGRAMS)
def test_every_help_option_is_in_the_usage_page(program):
    exe = build_dir() / "bin" / program
    r = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, f"{program} --help exited {r.returncode}: {r.stderr.strip()}"
    options = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]+", r.stdout)) - {"--help"}
    assert options, f"{program} --help lists no options"
    usage = USAGE.read_text()
    block = usage[usage.index("## The programs"):]
    line = next((l for l in block.splitlines() if l.startswith(program)), "")
    # The program's synopsis may continue on the indented lines below its first one.
    lines = block.splitlines()
    i = lines.index(line) if line else -1
    more = []
    for l in lines[i + 1:] if line else []:
        if not l.startswith("     "):
            break
        more.append(l)
    synopsis = " ".join([line] + more) if line else ""
    missing = sorted(o for o in options if o not in synopsis)
    assert not missing, f"docs/usage.md 'The programs' lacks {program} options: {', '.join(missing)}"


def test_readme_make_targets_exist():
    make = (REPO / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][a-z0-9-]*):", make, re.M))
    for doc in (REPO / "README.md", USAGE, REPO / "docs" / "architecture.md"):
        named = set(re.findall(r"`make ([a-z][a-z0-9-]*)", doc.read_text()))
        assert named <= targets, f"{doc.relative_to(REPO)} names make targets the Makefile lacks: {sorted(named - targets)}"
    assert {"demo", "test"} <= set(re.findall(r"`make ([a-z][a-z0-9-]*)", (REPO / "README.md").read_text()))
    # the reference table of the other targets
    assert {"deps", "build", "test-netem", "bench", "clean", "docker-build"} <= set(
        re.findall(r"`make ([a-z][a-z0-9-]*)", USAGE.read_text()[USAGE.read_text().index("## Other make targets"):]))


# --- the README is a five-minute read; the rest is in docs/ --------------------------------------
# A newcomer found a 30 KB README whose tour was a wall of text (issue 29). About 900 words is
# five minutes at a reading pace; the reference moved to docs/usage.md, the folders and the flow to
# docs/architecture.md.
README_MAX_WORDS = 900
LINK_RE = re.compile(r"\]\(([^)\s]+)\)")


def anchors(md: str) -> set[str]:
    """GitHub's anchors of a Markdown file's headings: lower case, punctuation but - and _ dropped,
    spaces to -."""
    out = set()
    for h in re.findall(r"^#+ (.*)$", md, re.M):
        out.add(re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-"))
    return out


def broken_links(doc: Path) -> list[str]:
    bad = []
    for target in LINK_RE.findall(doc.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        p = (doc.parent / path).resolve() if path else doc
        if not p.exists():
            bad.append(f"{doc.relative_to(REPO)}: {target}: no such file")
        elif anchor and p.suffix == ".md" and anchor not in anchors(p.read_text()):
            bad.append(f"{doc.relative_to(REPO)}: {target}: no heading with that anchor")
    return bad


def test_readme_is_a_five_minute_read_pointing_into_docs():
    readme = (REPO / "README.md").read_text()
    words = len(readme.split())
    assert words <= README_MAX_WORDS, f"README.md has {words} words (five minutes: {README_MAX_WORDS}); move reference to docs/"
    for heading in ("## Two commands", "## What a run produces", "## Where to go next"):
        assert heading in readme, f"README.md lacks '{heading}'"
    for page in ("docs/usage.md", "docs/architecture.md", "docs/methodology.md"):
        assert f"]({page}" in readme, f"README.md does not link {page}"


def test_architecture_page_draws_the_flow_and_names_the_registries():
    arch = (REPO / "docs" / "architecture.md").read_text()
    drawing = re.search(r"```\n(.*?)```", arch, re.S).group(1)
    for box in ("experiments/", "emulation/", "testbed/", "results/", "analysis/"):
        assert box in drawing, f"the drawing lacks {box}"
    assert drawing.index("experiments/") < drawing.index("emulation/") < drawing.index("results/") < drawing.index("analysis/")
    # the registries it describes are the files that hold them
    for path, text in (("pqshake/rows/transports/__init__.py", "REGISTRY"), ("pqshake/rows/modes/__init__.py", "REGISTRY"),
                       ("testbed/transports.c", "pqs_transports[]"), ("testbed/modes/modes.c", "pqs_modes[]")):
        assert f"`{path}`" in arch and text in (REPO / path).read_text(), (path, text)
    assert "plug-ins too" in arch and "[adding-a-mode.md](adding-a-mode.md)" in arch


@pytest.mark.parametrize("doc", ["README.md", "docs/usage.md", "docs/architecture.md", "docs/adding-a-transport.md",
                                 "docs/adding-a-stack.md", "docs/adding-an-axis.md", "docs/adding-a-mode.md",
                                 "docs/reproductions.md"])
def test_every_link_resolves(doc):
    bad = broken_links(REPO / doc)
    assert not bad, "\n".join(bad)


def test_link_check_reports_a_missing_file_and_anchor(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    (tmp_path / "a.md").write_text("# Top\n## Two words\n[x](b.md) [y](a.md#two-words) [z](a.md#nope) [w](https://x.org/y)\n")
    assert broken_links(tmp_path / "a.md") == ["a.md: b.md: no such file", "a.md: a.md#nope: no heading with that anchor"]


# --- no path of a particular machine in the tree -------------------------------------------
# An absolute path into a scratch, user or work folder (tmp, root, home, work at the top of
# the file system) names one machine's layout: in a doc, a comment or a recorded run it is wrong everywhere
# else. The notes folder outside the repository is such a place whichever way it is written.
MACHINE_PATH = re.compile(r"(?<![\w.~:/>-])/(?:tmp|work|root|home|Users|var/tmp)/|/run/pqshake[/]work/")
NOTES = re.compile(r"shared[/]notes|\.\.[/]shared(?![/]sources)")
# The shared "sources" folder next to the clone: the documented offline location of the pinned
# archives (testbed/deps), allowed there, in the tests of that build (tests/deps) and in docs only.
SOURCES = re.compile(r"\.\.[/]shared[/]sources")
# Paths inside the container image are the same on every machine.
IMAGE_FILES = {"docker/Dockerfile"}


def tracked_text_files():
    r = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    for rel in r.stdout.decode().split("\0"):
        p = REPO / rel
        if not rel or not p.is_file():
            continue
        data = p.read_bytes()
        if b"\0" in data[:8192]:
            continue  # binary (parquet, images): no text to read
        yield rel, data.decode("utf-8", errors="replace")


def machine_paths(rel: str, text: str) -> list[str]:
    hits = []
    for n, line in enumerate(text.splitlines(), 1):
        if rel not in IMAGE_FILES and MACHINE_PATH.search(line):
            hits.append(f"{rel}:{n}: {line.strip()[:120]}")
        if NOTES.search(line):
            hits.append(f"{rel}:{n}: {line.strip()[:120]}")
        if SOURCES.search(line) and not (rel.startswith(("testbed/", "tests/deps/")) or rel.endswith(".md")):
            hits.append(f"{rel}:{n}: {line.strip()[:120]}")
    return hits


def test_no_tracked_file_names_a_machine_path():
    hits = [h for rel, text in tracked_text_files() for h in machine_paths(rel, text)]
    assert not hits, "machine-local paths (make them relative, or point at docs/):\n" + "\n".join(hits[:30])


# Examples with "|" for "/", so this file does not contain what it looks for.
@pytest.mark.parametrize("line,flagged", [
    ("see |work|shared|notes|handshake-model.md", True),
    ("(..|shared|notes|x.md)", True),
    ('"file": "|root|.cache|pqshake|openssl"', True),
    ("--out |tmp|fx", True),
    ("|home|someone|pqshake|results", True),
    ("put the archives in ..|shared|sources (offline)", False),
    ("ip netns exec pqs-1-link |run|pqshake|work|a1|stats.json", True),
    ("ip netns exec pqs-1-link <state>|work|a1|stats.json", False),
    ("10.0.0.1|24 via results|demo|x", False),
    ("~|.cache|pqshake|openssl-3.6.3", False),
    ("https:||example.org|tmp|x", False),
])
def test_machine_path_scanner(line, flagged):
    line = line.replace("|", "/")
    assert bool(machine_paths("testbed/README.md", line)) == flagged
    assert bool(machine_paths("analysis/x.py", "x = '..|shared|sources'".replace("|", "/")))  # testbed/, docs only


def test_run_files_record_no_machine_path(tmp_path, monkeypatch):
    """What the runner writes into a run directory: paths relative to the run, the checkout,
    pqshake's state folder or the home folder; other scratch paths by name only."""
    import json

    monkeypatch.setenv("PQS_STATE_DIR", "/run/pqshake")
    from pqshake.experiments import rundir as rd
    from pqshake.paths import REPO as CHECKOUT

    run = tmp_path / "results" / "demo" / "20260101T000000-abc123"
    run.mkdir(parents=True)
    data = {"argv": [str(CHECKOUT / ".venv/bin/pqshake"), "run", "--out", "/" + "tmp/elsewhere/fx"],
            "ca": str(run / "raw/c1/certs/ca.pem"),
            "cmd": f"ip netns exec pqs-x-link {CHECKOUT}/build/bin/pqs-linkemu --stats " + os.path.join("/run", "pqshake", "scratch", "x", "s.json"),
            "prefix": str(Path.home() / ".cache/pqshake/openssl-3.6.3-1"), "n": 3, "addr": "10.1.2.2:4433"}
    rd.write_json(run / "meta.json", data, root=run)
    text = (run / "meta.json").read_text()
    assert not machine_paths("results/meta.json", text), text
    got = json.loads(text)
    assert got["argv"] == [".venv/bin/pqshake", "run", "--out", "<outside>/fx"]
    assert got["ca"] == "raw/c1/certs/ca.pem"
    assert got["cmd"] == "ip netns exec pqs-x-link build/bin/pqs-linkemu --stats <state>/scratch/x/s.json"
    assert got["prefix"] == "~/.cache/pqshake/openssl-3.6.3-1" and got["n"] == 3 and got["addr"] == "10.1.2.2:4433"
    # A state file outside any run keeps its absolute path (pqshake clean reads it).
    rd.write_json(tmp_path / "state.json", {"run_dir": str(run)})
    assert json.loads((tmp_path / "state.json").read_text())["run_dir"] == str(run)
