"""Which package imports which (docs/architecture.md "Which way the code goes"), enforced.

Every import of the Python packages is read from the syntax tree, those inside functions too, and
resolved to a module of the tree. Two rules:

- **Layers.** The ground floor (`pqshake/`: the rows, the results format, paths, errors) imports
  only itself; `emulation/` the ground floor; `experiments/` the ground floor and `emulation/`;
  `analysis/` the ground floor. The command line (`pqshake/cli.py`, `pqshake/doctor.py`) joins
  them and may import any; nothing imports it.
- **No circle.** No two modules import each other, directly or through others. Importing a
  submodule runs its package's `__init__` too; that implicit edge is not counted (every package
  whose `__init__` gathers its submodules would be a circle), the written ones are.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# folder -> its importable name (pyproject.toml [tool.setuptools.package-dir])
PACKAGES = {"pqshake": "pqshake", "emulation": "pqshake.emulation", "experiments": "pqshake.experiments",
            "analysis": "pqshake.analysis"}
COMMANDS = frozenset({"pqshake.cli", "pqshake.doctor"})
MAY_IMPORT = {
    "ground": {"ground"},
    "emulation": {"ground", "emulation"},
    "experiments": {"ground", "emulation", "experiments"},
    "analysis": {"ground", "analysis"},
    "commands": {"ground", "emulation", "experiments", "analysis", "commands"},
}


def modules(root: Path) -> dict[str, tuple[Path, bool]]:
    """Module name -> (file, is a package's __init__)."""
    out = {}
    for folder, pkg in PACKAGES.items():
        for p in sorted((root / folder).rglob("*.py")):
            parts = list(p.relative_to(root / folder).with_suffix("").parts)
            init = parts[-1] == "__init__"
            out[".".join([pkg, *(parts[:-1] if init else parts)])] = (p, init)
    return out


def graph(root: Path) -> dict[str, dict[str, int]]:
    """Module -> {module it imports: the first line that does}."""
    mods = modules(root)
    out: dict[str, dict[str, int]] = {}
    for name, (path, init) in mods.items():
        here = name if init else name.rpartition(".")[0]
        deps: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")
                    base = base[:len(base) - (node.level - 1)]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                # `from pkg import sub` imports the submodule; `from mod import name` the module
                targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in mods else mod for a in node.names]
            for t in targets:
                while t and t not in mods:  # `import pqshake.rows.axes.core as C`: the module itself
                    t = t.rpartition(".")[0]
                if t and t != name:
                    deps.setdefault(t, node.lineno)
        out[name] = deps
    return out


def layer(name: str) -> str:
    if name in COMMANDS:
        return "commands"
    part = name.split(".")[1] if "." in name else ""
    return part if part in ("emulation", "experiments", "analysis") else "ground"


def backward(g: dict[str, dict[str, int]], root: Path) -> list[str]:
    mods = modules(root)
    out = []
    for name, deps in g.items():
        for d, line in deps.items():
            if layer(d) not in MAY_IMPORT[layer(name)] or (d in COMMANDS and name not in COMMANDS):
                rel = mods[name][0].relative_to(root)
                out.append(f"{rel}:{line}: {name} ({layer(name)}) imports {d} ({layer(d)})")
    return sorted(out)


def circles(g: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    for start in g:
        if start in index:
            continue
        work = [(start, iter(g[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(g[w])))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
    return found


def test_no_backward_import():
    assert backward(graph(ROOT), ROOT) == []


def test_no_import_circle():
    assert circles(graph(ROOT)) == []


def test_the_walk_sees_imports_everywhere():
    """The tree's known edges are found, also an import inside a function."""
    g = graph(ROOT)
    assert "pqshake.rows.transports" in g["pqshake.analysis.columns"]
    assert "pqshake.rows.bounds" in g["pqshake.experiments.plan"]
    assert "pqshake.experiments.cli" in g["pqshake.cli"]  # inside register()
    assert len(g) > 80


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for folder in PACKAGES:
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / "__init__.py").write_text("")
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


def test_a_planted_circle_and_backward_import_fail(tmp_path):
    root = _tree(tmp_path, {
        "pqshake/rows/__init__.py": "",
        "pqshake/rows/a.py": "def f():\n    from . import b\n",  # inside a function
        "pqshake/rows/b.py": "from pqshake.rows.a import f\n",
        "analysis/load.py": "import pqshake.rows.a\n\ndef g():\n    from pqshake.experiments import plan\n",
        "experiments/plan.py": "from ..analysis import load\n",
        "emulation/link.py": "from pqshake import cli\n",
        "pqshake/cli.py": "from pqshake.experiments import plan\n",
    })
    g = graph(root)
    assert sorted(circles(g)) == [["pqshake.analysis.load", "pqshake.experiments.plan"],
                                  ["pqshake.rows.a", "pqshake.rows.b"]]
    assert backward(g, root) == [
        "analysis/load.py:4: pqshake.analysis.load (analysis) imports pqshake.experiments.plan (experiments)",
        "emulation/link.py:1: pqshake.emulation.link (emulation) imports pqshake.cli (commands)",
        "experiments/plan.py:1: pqshake.experiments.plan (experiments) imports pqshake.analysis.load (analysis)",
    ]
