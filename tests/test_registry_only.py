"""Issue 21: transport and mode names live in their registries (pqshake/rows/transports/,
pqshake/rows/modes/). Every other Python module reads the rows; a name written as a string
literal anywhere else fails here, unless the allow-list below says why it is not a transport or
mode (or why it is not ours to change yet).

The scan is precise: string constants of the syntax tree (comments, docstrings and longer text
that merely contains a name are not findings), exactly equal to a name."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("pqshake", "emulation", "experiments", "analysis", "bench")
REGISTRY_MODULES = ("pqshake/rows/modes/", "pqshake/rows/transports/")
NAMES = frozenset({"tcp", "tcp+tfo", "tcp+s2n", "tcp+openssl-vs-s2n", "tcp+s2n-vs-openssl", "quic", "quic+ngtcp2", "turbotls", "full", "resume", "resume_psk", "0rtt", "hrr", "tls12", "fs0rtt", "ech"})

# (file, name): why that literal there is not a transport or mode listed outside the registry.
ALLOWED = {
    ("experiments/cli.py", "resume"): "the `pqshake resume` command's name",
    ("emulation/rootless.py", "resume"): "the `pqshake resume` command's name",
    ("pqshake/rows/profile.py", "tcp"): "a profile's tcp: settings (getattr(profile, 'tcp'))",
    ("emulation/profiles.py", "tcp"): "a profile's tcp: settings key",
    ("analysis/synthetic.py", "hrr"): "the timer's JSON field hrr, written into synthetic samples",
    ("analysis/style.py", "full"): "the figure width 'full' (text width), style.TEXT_WIDTH",
    # The results format and its reader belong to another piece of work (issue 21 left them):
    ("pqshake/results/tables.py", "tcp"): "results format (not ours): runs from before transports are tcp",
    # A microbenchmark of the two C programs over TCP and QUIC: the names are its result keys.
    ("bench/quic_bench.py", "tcp"): "the benchmark's result keys and its TCP server",
    ("bench/quic_bench.py", "quic"): "the benchmark's result keys and its QUIC server",
    ("bench/run_all.py", "quic"): "the name of bench/quic_bench.py in the bench list",
}


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                out.add(id(first.value))
    return out


def literal_names(path: Path) -> list[tuple[int, str]]:
    """(line, name) of every string constant equal to a transport or mode name, docstrings aside."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    docs = _docstrings(tree)
    return sorted((n.lineno, n.value) for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in NAMES and id(n) not in docs)


def findings(root: Path, allowed: dict = ALLOWED) -> list[str]:
    out = []
    for top in SCANNED:
        for p in sorted((root / top).rglob("*.py")):
            rel = p.relative_to(root).as_posix()
            if rel.startswith(REGISTRY_MODULES) or "/.venv/" in f"/{rel}" or "/tests/" in f"/{rel}":
                continue
            for line, name in literal_names(p):
                if (rel, name) not in allowed:
                    out.append(f"{rel}:{line}: {name!r} (read it from pqshake/rows/transports/ or pqshake/rows/modes/)")
    return out


def test_no_module_outside_the_registries_spells_a_name():
    assert findings(ROOT) == []


def test_the_allow_list_has_no_stale_entries():
    # An entry whose file no longer has that literal goes (the list stays short and true).
    stale = [k for k in ALLOWED if not (ROOT / k[0]).is_file() or k[1] not in {n for _, n in literal_names(ROOT / k[0])}]
    assert stale == []


def test_a_planted_literal_fails(tmp_path):
    (tmp_path / "analysis").mkdir()
    (tmp_path / "analysis" / "ok.py").write_text(
        '"""Mentions quic in a docstring."""\n# and tcp in a comment\nX = "over quic and tcp"\n')
    assert findings(tmp_path) == []
    (tmp_path / "analysis" / "bad.py").write_text('def f(t):\n    return t == "turbotls"\n')
    (tmp_path / "pqshake" / "rows" / "transports").mkdir(parents=True)
    (tmp_path / "pqshake" / "rows" / "transports" / "mine.py").write_text('NAME = "turbotls"\n')  # a registry module
    assert findings(tmp_path) == ["analysis/bad.py:2: 'turbotls' (read it from pqshake/rows/transports/ or "
                                  "pqshake/rows/modes/)"]


@pytest.mark.parametrize("src", ['M = {"0rtt": 1}\n', 'x = f(mode="hrr")\n', 'y = ("full", "tls12")\n'])
def test_every_kind_of_literal_is_found(tmp_path, src):
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "b.py").write_text(src)
    assert len(findings(tmp_path)) >= 1


def test_registries_agree_with_the_names_scanned():
    from pqshake.rows import modes, transports

    assert set(modes.NAMES) | set(transports.NAMES) == NAMES
