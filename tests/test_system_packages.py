"""Every external program the code and the tests run is installed by
scripts/install-system-packages.sh, built by the project, or part of every Debian system.

Why: `make test` on a new machine failed because `docker/podman-run.sh` runs `--runtime runc`
and no install step installed runc; the CI machines had it from an earlier hand install. So
the programs are not listed by hand here: they are found in the sources, statically -

- Python (ast): argv lists given to subprocess.run/Popen/call/check_call/check_output and
  os.exec*/spawn*, through the project's own wrappers (a function that hands its parameter to
  one of those, like netns.run or CellRunner._spawn) and argv builders (a function returning a
  list, like Topology.ns_argv, whose parameters may hold the wrapped command); `ip netns exec`,
  `mnexec -a`, `taskset -c`, `unshare`, `setpriv`, `sh -c SCRIPT` are looked through; and the
  names given to shutil.which() (also through a wrapper like slurm._tool, a loop over a literal
  tuple or a dict's keys);
- shell (.sh files, scripts with a shell shebang, Makefile recipes and $(shell ...), Dockerfile
  RUN lines): the first word of every simple command (assignments, keywords and builtins
  skipped, make variables with a literal value expanded), `command -v NAME`, the wrapped
  command of the same wrappers, and podman's `--runtime NAME`;

and each name must be (a) a command of the script's table (`install-system-packages.sh --test
--list`, the table the script itself checks for `make test`), (b) a program the Makefiles build
into build/bin, or (c) in ALWAYS below (Priority: required packages, which every Debian system
has; checked against dpkg where the program is present) or NOT_INSTALLED (each with the reason
it is not installed). The script has three tables (--runtime, the default for `make demo`, and
--test): what the project's own code runs is in the default one unless it serves a feature no
demo uses (TEST_LAB_FEATURES), and what only tests run is not (issue 29: the demo installed
the test lab).

The table itself is checked too: on this machine each package that is installed provides its
command (dpkg), and in CI (CI=true) every command and file of the table is present after
`make test`'s install step.
"""

from __future__ import annotations

import ast
import fnmatch
import functools
import glob
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from needs import in_ci, need

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "install-system-packages.sh"
FIX = "add '{name}:PACKAGE' to scripts/install-system-packages.sh (the Debian package that ships it)"

# (c) Programs of Debian's Priority: required packages: debootstrap --variant=minbase (the
# Debian base images, docker/podman-build.sh's base) installs them, apt cannot remove the
# Essential ones. test_always_list_is_priority_required checks each against dpkg.
ALWAYS = {
    # coreutils (Essential)
    **dict.fromkeys("basename cat chmod chown cp cut date dirname env head id install ln ls mkdir mkfifo "
                    "mktemp mv nproc rm sha256sum sleep sort sync tail tee touch tr true false uname wc "
                    "stat readlink realpath".split(), "coreutils"),
    "bash": "bash", "sh": "dash",  # Essential: the shells
    "grep": "grep", "sed": "sed", "tar": "tar", "gzip": "gzip",  # Essential
    "find": "findutils", "xargs": "findutils",  # Essential
    "awk": "mawk",  # Priority required (Debian's awk)
    "hostname": "hostname",  # Essential (bookworm)
    "mount": "mount", "umount": "mount",  # Priority required
    "setpriv": "util-linux", "taskset": "util-linux", "unshare": "util-linux",  # Essential
    "ldd": "libc-bin",  # Essential
    "dpkg": "dpkg", "dpkg-query": "dpkg",  # Essential: the package manager itself
    "apt-get": "apt",  # Priority required: what the install script installs with
    "useradd": "passwd", "userdel": "passwd",  # Priority required
}

# Run by the code but deliberately not installed, each with the reason.
NOT_INSTALLED = {
    # make docker-build / docker-run drive the user's own Docker engine when there is one; the
    # same image is built and tested with podman (installed), and no test runs docker.
    "docker": "the user's own Docker engine (make docker-*); tests use podman",
    # emulation/uml/init.sh ends the user-mode Linux kernel with `halt -f` (systemd-sysv or
    # sysvinit-core on the host, whose file system UML boots from). Without it init.sh exits,
    # the kernel stops with a panic after the command's exit status is written, and uml.py
    # reads that status: the run is not affected. An init system is not ours to install.
    "halt": "ends the UML kernel; without it the kernel stops anyway (emulation/uml/init.sh)",
}

# Shell words that are not programs: keywords and builtins (kill too, in bash and dash).
SHELL_BUILTINS = set("""
if then else elif fi for while until do done case esac in select function time ! { } [[ ]] [ test
echo printf read cd pwd pushd popd set unset shift exit return trap wait source . eval exec export
local declare readonly typeset let ulimit umask compgen complete type hash alias unalias true false
: break continue getopts mapfile readarray builtin command enable disown jobs fg bg suspend logout
kill
""".split())
WORD_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*$")
ASSIGN_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")


@dataclass(frozen=True)
class Use:
    program: str  # as run: a command name (the base name of an absolute path)
    where: str  # file:line
    how: str  # "argv" | "which" | "shell" | "built" (a build/bin program by name)


# ----------------------------------------------------------------------------------- wrappers --
# The commands that run another command: given the words after the program (None for a word
# not known statically), the index of the wrapped program in them, or None.

OPT_VALUE = {  # options that take the next word as their value
    "setpriv": {"--reuid", "--regid", "--ruid", "--rgid", "--euid", "--egid", "--groups", "--securebits",
                "--pdeathsig", "--inh-caps", "--ambient-caps", "--bounding-set", "--selinux-label",
                "--apparmor-profile"},
    "unshare": {"--propagation", "--setgroups", "--map-user", "--map-group", "--root", "--wd", "-S", "-G",
                "--setuid", "--setgid", "--map-users", "--map-groups"},
    "env": {"-u", "--unset", "-C", "--chdir", "-S"},
    "xargs": {"-n", "-I", "-d", "-P", "-L", "-s", "-E", "-a"},
    "nice": {"-n"}, "sudo": {"-u", "-g"}, "setsid": set(), "nohup": set(), "stdbuf": set(),
}


def wrapped_index(prog: str, rest: list[str | None]) -> int | None:
    if prog == "ip":
        return 3 if rest[:2] == ["netns", "exec"] and len(rest) > 3 else None
    if prog == "mnexec":
        i = 0
        while i < len(rest) and rest[i] is not None and rest[i].startswith("-"):
            i += 2 if rest[i] in ("-a", "-g") else 1
        return i if i < len(rest) else None
    if prog == "taskset":
        return (2 if rest[:1] == ["-c"] else 1) if len(rest) > 1 else None
    if prog == "timeout":
        i = 0
        while i < len(rest) and rest[i] is not None and rest[i].startswith("-"):
            i += 1
        return i + 1 if i + 1 < len(rest) else None  # after the duration
    if prog in OPT_VALUE:
        i = 0
        while i < len(rest) and rest[i] is not None and (rest[i].startswith("-") or (prog == "env" and "=" in rest[i])):
            i += 2 if rest[i] in OPT_VALUE[prog] else 1
        return i if i < len(rest) else None
    return None


def shell_script_index(prog: str, rest: list[str | None]) -> int | None:
    """`sh -c SCRIPT ...`: the index of SCRIPT."""
    if prog in ("sh", "bash", "dash") and rest[:1] == ["-c"] and len(rest) > 1:
        return 1
    return None


def runtime_option(prog: str, rest: list[str | None]) -> list[str]:
    """podman execs the OCI runtime named by --runtime (docker/podman-run.sh: runc)."""
    if prog != "podman":
        return []
    out = []
    for i, w in enumerate(rest):
        if w == "--runtime" and i + 1 < len(rest) and rest[i + 1]:
            out.append(rest[i + 1])
        elif w and w.startswith("--runtime="):
            out.append(w.split("=", 1)[1])
    return out


def program_name(word: str) -> str | None:
    """The command a word names, or None (a variable, a relative path: a file of the clone)."""
    if word.startswith("/") and "$" not in word:
        word = word.rsplit("/", 1)[1]
    return word if WORD_RE.match(word) else None


# -------------------------------------------------------------------------------------- shell --


def _match(s: str, i: int, open_: str, close: str) -> int:
    """Index of the `close` matching s[i] == open_ (quotes and nesting respected)."""
    depth, j = 0, i
    while j < len(s):
        c = s[j]
        if c == "\\":
            j += 2
            continue
        if c == "'" and open_ != "'":
            k = s.find("'", j + 1)
            j = len(s) if k < 0 else k + 1
            continue
        if c == '"' and open_ != '"':
            j = _dquote_end(s, j) + 1
            continue
        if c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return j
        j += 1
    return len(s) - 1


def _dquote_end(s: str, i: int) -> int:
    j = i + 1
    while j < len(s):
        if s[j] == "\\":
            j += 2
            continue
        if s.startswith("$(", j):
            j = _match(s, j + 1, "(", ")") + 1
            continue
        if s[j] == '"':
            return j
        j += 1
    return len(s)


@dataclass
class _Tok:
    text: str
    line: int
    sep: bool = False


def _tokens(s: str, line0: int, subs: list[tuple[str, int]]) -> list[_Tok]:
    """Words and separators of shell text; command substitutions go to `subs` (text, line)."""
    out: list[_Tok] = []
    cur: str | None = None
    cur_line = line0
    line = line0
    i, n = 0, len(s)

    def end() -> None:
        nonlocal cur
        if cur is not None:
            out.append(_Tok(cur, cur_line))
            cur = None

    def add(text: str) -> None:
        nonlocal cur, cur_line
        if cur is None:
            cur, cur_line = "", line
        cur += text

    while i < n:
        c = s[i]
        if c == "\n":
            end()
            out.append(_Tok("\n", line, True))
            line += 1
            i += 1
        elif c in " \t":
            end()
            i += 1
        elif c == "#" and cur is None:
            while i < n and s[i] != "\n":
                i += 1
        elif c == "\\":
            if s[i + 1:i + 2] == "\n":
                line += 1
            else:
                add(s[i + 1:i + 2])
            i += 2
        elif c == "'":
            j = s.find("'", i + 1)
            j = n if j < 0 else j
            add(s[i + 1:j])
            line += s.count("\n", i, j)
            i = j + 1
        elif c == '"':
            j = _dquote_end(s, i)
            inner = s[i + 1:j]
            k = 0
            while (m := inner.find("$(", k)) >= 0:  # substitutions inside double quotes
                e = _match(inner, m + 1, "(", ")")
                if not inner.startswith("$((", m):
                    subs.append((inner[m + 2:e], line + inner.count("\n", 0, m)))
                k = e + 1
            add(inner)
            line += s.count("\n", i, j)
            i = j + 1
        elif s.startswith("$((", i):
            j = _match(s, i + 1, "(", ")")
            add(s[i:j + 1])
            i = j + 1
        elif s.startswith("$(", i) or c == "`":
            j = _match(s, i + 1, "(", ")") if c == "$" else (s.find("`", i + 1) if s.find("`", i + 1) > 0 else n)
            subs.append((s[i + (2 if c == "$" else 1):j], line))
            add("$(...)")
            line += s.count("\n", i, j)
            i = j + 1
        elif s.startswith("${", i):
            j = _match(s, i + 1, "{", "}")
            if (m := s.find("$(", i + 2, j)) >= 0:  # ${JOBS:-$(nproc)}
                subs.append((s[m + 2:_match(s, m + 1, "(", ")")], line))
            add(s[i:j + 1])
            i = j + 1
        elif c in ";&|()":
            end()
            out.append(_Tok(c, line, True))
            i += 1
        elif c in "<>":
            if cur is not None and cur.isdigit():  # 2>, 9>: a file descriptor
                cur = None
            end()
            while i < n and s[i] in "<>&|-":
                i += 1
            while i < n and s[i] in " \t":
                i += 1
            # the redirection's target word is not a command
            m = re.match(r"""("[^"]*"|'[^']*'|[^\s;&|()<>])*""", s[i:])
            i += m.end() if m else 0
        else:
            add(c)
            i += 1
    end()
    return out


def _heredocs_out(text: str) -> str:
    """Here-documents' bodies blanked (kept as empty lines: the line numbers stay)."""
    lines = text.split("\n")
    out, end = [], None
    for ln in lines:
        if end is not None:
            out.append("")
            if ln.strip() == end:
                end = None
            continue
        m = re.search(r"<<-?\s*['\"]?([A-Za-z_]\w*)['\"]?", ln)
        if m and "<<<" not in ln:
            end = m.group(1)
            ln = ln[:m.start()] + ln[m.end():]
        out.append(ln)
    return "\n".join(out)


FUNC_RE = re.compile(r"^\s*(?:function\s+)?([A-Za-z_][\w-]*)\s*\(\)\s*", re.M)


def shell_uses(text: str, where: str, line0: int = 1, functions: set[str] | None = None,
               expand: dict[str, list[str]] | None = None) -> list[Use]:
    """The programs shell text runs. `functions`: names defined by the scripts (not programs);
    `expand`: a word at a command's head that stands for these programs (make variables)."""
    functions = set(functions or ()) | set(FUNC_RE.findall(text))
    text = FUNC_RE.sub(lambda m: " " * len(m.group(0).rstrip("\n")) + "\n" * m.group(0).count("\n"), text)
    text = _heredocs_out(text)
    subs: list[tuple[str, int]] = []
    toks = _tokens(text, line0, subs)
    uses: list[Use] = []
    case: list[str] = []  # per open `case`: "head" (up to `in`), "pattern" (up to `)`) or "body"
    cmd: list[_Tok] = []
    prev = ""
    arrays: dict[str, list[str]] = {}

    def flush() -> None:
        uses.extend(_command_uses(list(cmd), where, functions, {**arrays, **(expand or {})}))
        cmd.clear()

    i = 0
    while i < len(toks):
        t = toks[i]
        i += 1
        if case and case[-1] == "pattern":
            if not t.sep and t.text == "esac":
                case.pop()
            elif t.sep and t.text == ")":
                case[-1] = "body"
            continue
        if t.sep:
            flush()
            if t.text == ";" and prev == ";" and case and case[-1] == "body":  # ;; ends a case item
                case[-1] = "pattern"
            prev = t.text
            continue
        prev = ""
        if not t.sep and t.text.endswith("=") and ASSIGN_RE.match(t.text) and i < len(toks) and toks[i].text == "(":
            j = i + 1
            while j < len(toks) and toks[j].text != ")":  # an array's words: x=(a b c), not commands
                j += 1
            words = [x.text for x in toks[i + 1:j] if not x.sep]
            if words and not t.text.endswith("+=") and (p := program_name(words[0])):
                # a command line kept in an array, run as "${x[@]}" (docker/podman-build.sh)
                arrays["${" + t.text.rstrip("=") + "[@]}"] = [p]
            i = j + 1
            continue
        if not cmd and t.text == "case":
            case.append("head")
        if case and case[-1] == "head":
            if t.text == "in":
                case[-1] = "pattern"
                cmd.clear()
            continue
        if not cmd and t.text == "esac" and case:
            case.pop()
            continue
        cmd.append(t)
    flush()
    for sub, ln in subs:
        uses += shell_uses(sub, where, ln, functions, expand)
    return uses


def _command_uses(words: list[_Tok], where: str, functions: set[str], expand: dict[str, list[str]]) -> list[Use]:
    """The programs one simple command runs: its head, and what that head runs in turn."""
    i = 0
    while i < len(words) and (ASSIGN_RE.match(words[i].text) or words[i].text in
                              ("!", "{", "}", "then", "do", "else", "elif", "if", "while", "until", "time", "exec")):
        i += 1
    if i >= len(words):
        return []
    head = words[i].text
    if head == "command":
        rest = [w.text for w in words[i + 1:]]
        if rest[:1] in (["-v"], ["-V"]):  # command -v NAME: the script needs NAME
            return [Use(p, f"{where}:{words[i].line}", "which") for w in rest[1:] if (p := program_name(w))]
        i += 1
        if i >= len(words):
            return []
        head = words[i].text
    if head in SHELL_BUILTINS or head in functions or head in ("for", "case", "select", "esac", "fi", "done"):
        return []
    if head.startswith("__mk") and head not in expand:  # a make variable without a literal value
        return []
    line = f"{where}:{words[i].line}"
    if head in expand:
        progs = expand[head]
    else:
        p = program_name(head)
        progs = [p] if p else []
    out = [Use(p, line, "shell") for p in progs]
    rest: list[str | None] = [w.text for w in words[i + 1:]]
    for p in progs:
        out += [Use(r, line, "shell") for r in runtime_option(p, rest) if program_name(r)]
        k = shell_script_index(p, rest)
        if k is not None and rest[k]:
            out += shell_uses(rest[k], where, words[i].line, functions, expand)
        k = wrapped_index(p, rest)
        if k is not None:
            out += _command_uses(words[i + 1 + k:], where, functions, expand)
    return out


# ------------------------------------------------------------------------------------ make --


def make_assignments(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for m in re.finditer(r"^([A-Za-z_][A-Za-z0-9_]*)\s*(?:\?=|:=|::=|\+=|=)[ \t]*(.*)$", text, re.M):
        out.setdefault(m.group(1), []).append(m.group(2).strip())
    return out


def _paren(s: str, i: int, open_: str, close: str) -> int:
    depth = 0
    for j in range(i, len(s)):
        depth += (s[j] == open_) - (s[j] == close)
        if depth == 0:
            return j
    return len(s) - 1


def _make_to_shell(s: str, silent: set[str]) -> str:
    """Make's own references out of a recipe: a plain variable becomes the word __mk_NAME (a
    command head expands it), a silent one ($(Q)) nothing, anything else (functions, $(1), $@)
    a placeholder word; $$ is the shell's $."""
    s = s.replace("$$", "\0")
    out, i = [], 0
    while i < len(s):
        if s[i] == "$" and i + 1 < len(s):
            c = s[i + 1]
            if c in "({":
                j = _paren(s, i + 1, c, ")" if c == "(" else "}")
                inner = s[i + 2:j]
                out.append("" if inner in silent else f"__mk_{inner}" if re.fullmatch(r"[A-Za-z_]\w*", inner)
                           else "__mkexpr")
                i = j + 1
            else:
                out.append("__mkauto")
                i += 2
            continue
        out.append(s[i])
        i += 1
    return "".join(out).replace("\0", "$").lstrip("@+- \t")


def makefile_uses(text: str, where: str) -> list[Use]:
    """Recipe lines (of rules and define blocks) and every $(shell ...) of a Makefile. A make
    variable at a command's head stands for its literal values (CC ?= cc, DOCKER ?= docker);
    one whose value is not literal ($(VENV)/bin/python) is skipped."""
    assigns = make_assignments(text)
    silent = {k for k, vs in assigns.items() if all(v in ("", "@") for v in vs)}  # $(Q)
    expand: dict[str, list[str]] = {"__mk_CC": ["cc"], "__mk_MAKE": ["make"]}  # make's defaults
    for k, vs in assigns.items():
        words = [v.split()[0] for v in vs if v.split()]
        if words and all(program_name(w) for w in words):
            expand[f"__mk_{k}"] = sorted(set(words))
    uses: list[Use] = []
    lines = text.split("\n")
    in_recipe = in_define = False
    n = 0
    while n < len(lines):
        first = n + 1
        ln = lines[n]
        while ln.endswith("\\") and n + 1 < len(lines):  # continued lines: one logical line
            n += 1
            ln = ln[:-1] + " " + lines[n].lstrip("\t ")
        n += 1
        for m in re.finditer(r"\$\(shell\s", ln):
            end = _paren(ln, m.start() + 1, "(", ")")
            uses += shell_uses(_make_to_shell(ln[m.end():end], silent), where, first, expand=expand)
        if ln.startswith("define "):
            in_define = True
        elif ln.strip() == "endef":
            in_define = False
        elif ln.startswith("\t") and (in_recipe or in_define):
            uses += shell_uses(_make_to_shell(ln[1:], silent), where, first, expand=expand)
        elif ln.strip() and not ln.lstrip().startswith("#"):
            # a rule ("targets: prerequisites"), not an assignment: its recipe follows
            in_recipe = bool(re.match(r"^[^\t#=][^=]*?:(?![=:])", ln)) and \
                not re.match(r"^[A-Za-z_]\w*\s*(\?|:|::|\+)?=", ln)
    return uses


# ---------------------------------------------------------------------------------- python --


@dataclass
class _Mod:
    path: Path
    rel: str
    tree: ast.Module


@dataclass
class _Fn:
    node: ast.FunctionDef | ast.AsyncFunctionDef
    mod: _Mod
    params: list[str]  # positional and keyword, without self/cls
    vararg: str | None
    assigned: dict[str, list[ast.expr]]  # name -> values assigned in the body
    returns: list[ast.expr]


RUNNERS = {"run", "Popen", "call", "check_call", "check_output", "getoutput", "getstatusoutput",
           "create_subprocess_exec"}
EXECS = {"execv", "execve", "execvp", "execvpe", "spawnv", "spawnve", "spawnvp", "spawnvpe", "posix_spawn",
         "posix_spawnp"}


def _callee(node: ast.Call) -> tuple[str | None, str | None]:
    """(module-or-object name, function name) of a call."""
    f = node.func
    if isinstance(f, ast.Attribute):
        base = f.value
        return (base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else "?"), f.attr
    if isinstance(f, ast.Name):
        return None, f.id
    return None, None


def _str(e: ast.AST) -> str | None:
    return e.value if isinstance(e, ast.Constant) and isinstance(e.value, str) else None


def _own_nodes(fn_node: ast.AST):
    """The nodes of a function's body, not those of functions nested in it."""
    todo = list(ast.iter_child_nodes(fn_node))
    while todo:
        n = todo.pop()
        yield n
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(n))


def _assignments(nodes) -> dict[str, list[ast.expr]]:
    out: dict[str, list[ast.expr]] = {}
    for n in nodes:
        if isinstance(n, ast.Assign):
            for tg in n.targets:
                if isinstance(tg, ast.Name):
                    out.setdefault(tg.id, []).append(n.value)
        elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.value is not None:
            out.setdefault(n.target.id, []).append(n.value)
    return out


# A head of an argv: ("prog", name, node, mod) a program by name, ("built", name, node, mod) a
# build/bin program, ("shell", text, node, mod) a `sh -c` script, ("param", fn, name) the value
# of fn's parameter (fn runs what its callers pass).


class PyScan:
    def __init__(self, files: list[Path], root: Path):
        self.fns: dict[str, list[_Fn]] = {}
        self.calls: list[tuple[_Mod, _Fn | None, ast.Call]] = []
        self.globals: dict[int, dict[str, list[ast.expr]]] = {}
        for p in files:
            try:
                tree = ast.parse(p.read_text(), str(p))
            except (SyntaxError, UnicodeDecodeError, ValueError):
                continue
            m = _Mod(p, str(p.relative_to(root)), tree)
            self.globals[id(m)] = _assignments(tree.body)
            self._collect(m, tree, None)

    def _collect(self, m: _Mod, node: ast.AST, fn: _Fn | None) -> None:
        for ch in ast.iter_child_nodes(node):
            if isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = ch.args
                names = [x.arg for x in a.posonlyargs + a.args]
                if names[:1] in (["self"], ["cls"]):
                    names = names[1:]
                own = list(_own_nodes(ch))
                f = _Fn(ch, m, names + [x.arg for x in a.kwonlyargs], a.vararg.arg if a.vararg else None,
                        _assignments(own), [r.value for r in own if isinstance(r, ast.Return) and r.value is not None])
                self.fns.setdefault(ch.name, []).append(f)
                self._collect(m, ch, f)
            else:
                if isinstance(ch, ast.Call):
                    self.calls.append((m, fn, ch))
                self._collect(m, ch, fn)

    # -- where a name's value comes from --
    def _is_param(self, fn: _Fn | None, name: str) -> bool:
        return fn is not None and (name in fn.params or name == fn.vararg) and name not in fn.assigned

    def _assigned(self, m: _Mod, fn: _Fn | None, name: str) -> list[ast.expr]:
        if fn is not None and name in fn.assigned:
            return fn.assigned[name]
        return self.globals[id(m)].get(name, [])

    def _loop_values(self, m: _Mod, fn: _Fn | None, name: str) -> list[ast.expr]:
        """The elements a loop variable takes: `for t in ("a", "b")`, `for t, x in D.items()`."""
        out: list[ast.expr] = []
        for n in (_own_nodes(fn.node) if fn else ast.walk(m.tree)):
            gens = [(n.target, n.iter)] if isinstance(n, (ast.For, ast.AsyncFor)) else \
                [(g.target, g.iter) for g in n.generators] if isinstance(n, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)) else []
            for target, it in gens:
                first = target.elts[0] if isinstance(target, ast.Tuple) and target.elts else target
                if isinstance(first, ast.Name) and first.id == name:
                    out += self._sequence(m, fn, it, 0)
        return out

    def _sequence(self, m: _Mod, fn: _Fn | None, it: ast.expr, depth: int) -> list[ast.expr]:
        if depth > 4:
            return []
        if isinstance(it, (ast.Tuple, ast.List, ast.Set)):
            out = []
            for e in it.elts:
                out += self._sequence(m, fn, e.value, depth + 1) if isinstance(e, ast.Starred) else [e]
            return out
        if isinstance(it, ast.Dict):
            return [k for k in it.keys if k is not None]
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr in ("items", "keys"):
            return self._sequence(m, fn, it.func.value, depth + 1)
        if isinstance(it, ast.Name):
            return [e for v in self._assigned(m, fn, it.id) for e in self._sequence(m, fn, v, depth + 1)]
        return []

    # -- the commands an argv expression can start with --
    def heads(self, m: _Mod, fn: _Fn | None, e: ast.expr | None, depth: int = 0) -> list[tuple]:
        if depth > 10 or e is None:
            return []
        if isinstance(e, (ast.List, ast.Tuple)):
            return self._list_heads(m, fn, e.elts, depth)
        if isinstance(e, ast.Name):
            if self._is_param(fn, e.id):
                return [("param", fn, e.id)]
            return [h for v in self._assigned(m, fn, e.id) for h in self.heads(m, fn, v, depth + 1)]
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
            return self.heads(m, fn, e.left, depth + 1)
        if isinstance(e, ast.IfExp):
            return self.heads(m, fn, e.body, depth + 1) + self.heads(m, fn, e.orelse, depth + 1)
        if isinstance(e, ast.Call):
            _, name = _callee(e)
            if name in ("list", "tuple") and e.args:
                return self.heads(m, fn, e.args[0], depth + 1)
            out = []
            for f in self.fns.get(name or "", []):  # an argv builder: what it returns
                for r in f.returns:
                    for h in self.heads(f.mod, f, r, depth + 1):
                        out += self._substitute(m, fn, h, f, e, depth) if h[0] == "param" and h[1] is f else [h]
            return out
        return []

    def _may_be_empty(self, m: _Mod, fn: _Fn | None, e: ast.expr, depth: int = 0) -> bool:
        """Can a starred part of an argv be empty (so the next word may be the program)?"""
        if depth > 6:
            return True
        if isinstance(e, (ast.List, ast.Tuple)):
            return all(isinstance(x, ast.Starred) and self._may_be_empty(m, fn, x.value, depth + 1) for x in e.elts)
        if isinstance(e, ast.IfExp):
            return self._may_be_empty(m, fn, e.body, depth + 1) or self._may_be_empty(m, fn, e.orelse, depth + 1)
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
            return self._may_be_empty(m, fn, e.left, depth + 1) and self._may_be_empty(m, fn, e.right, depth + 1)
        if isinstance(e, ast.Name) and not self._is_param(fn, e.id):
            vals = self._assigned(m, fn, e.id)
            return not vals or any(self._may_be_empty(m, fn, v, depth + 1) for v in vals)
        if isinstance(e, ast.Call):
            fs = self.fns.get(_callee(e)[1] or "", [])
            return not fs or any(self._may_be_empty(f.mod, f, r, depth + 1) for f in fs for r in f.returns)
        return True

    def _arg_for(self, f: _Fn, call: ast.Call, pname: str) -> list[ast.expr]:
        """The call's expressions for f's parameter pname (a *vararg: its first one)."""
        for k in call.keywords:
            if k.arg == pname:
                return [k.value]
        if pname == f.vararg:
            n = len([p for p in f.params if p in (x.arg for x in f.node.args.posonlyargs + f.node.args.args)])
            return call.args[n:n + 1]
        if pname in f.params:
            i = f.params.index(pname)
            if i < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[:i + 1]):
                return [call.args[i]]
        return []

    def _substitute(self, m: _Mod, fn: _Fn | None, h: tuple, f: _Fn, call: ast.Call, depth: int) -> list[tuple]:
        out = []
        for a in self._arg_for(f, call, h[2]):
            if h[2] == f.vararg:  # *cmd: its first value is the program
                out += self._element_heads(m, fn, a)
            else:
                out += self.heads(m, fn, a, depth + 1)
        return out

    def _element_heads(self, m: _Mod, fn: _Fn | None, el: ast.expr) -> list[tuple]:
        """One element at a program's position of an argv."""
        if (s := _str(el)) is not None:
            return [("prog", s, el, m)]
        built = _built_name(el)
        return [("built", built, el, m)] if built else []

    def _splice(self, m: _Mod, fn: _Fn | None, elts: list[ast.expr], depth: int) -> list[ast.expr]:
        """*NAME of a list literal (one assignment) replaced by its elements: [*UNSHARE, "sh", ...]."""
        out: list[ast.expr] = []
        for e in elts:
            if isinstance(e, ast.Starred) and isinstance(e.value, ast.Name) and not self._is_param(fn, e.value.id) \
                    and depth < 4:
                vals = self._assigned(m, fn, e.value.id)
                if len(vals) == 1 and isinstance(vals[0], (ast.List, ast.Tuple)):
                    out += self._splice(m, fn, vals[0].elts, depth + 1)
                    continue
            out.append(e)
        return out

    def _list_heads(self, m: _Mod, fn: _Fn | None, elts: list[ast.expr], depth: int) -> list[tuple]:
        elts = self._splice(m, fn, elts, 0)
        out: list[tuple] = []
        i = 0
        while i < len(elts):
            el = elts[i]
            if isinstance(el, ast.Starred):
                v = el.value
                if isinstance(v, ast.Call) and _callee(v)[1] == "map" and len(v.args) == 2:
                    v = v.args[1]  # *map(str, cmd)
                if fn is not None and isinstance(v, ast.Name) and v.id == fn.vararg:
                    out.append(("param", fn, v.id))
                    break
                out += self.heads(m, fn, v, depth + 1)
                if self._may_be_empty(m, fn, v):  # [*pin, "ip", ...]: pin may be []
                    i += 1
                    continue
                break
            hs = self._element_heads(m, fn, el)
            out += hs
            if not hs or hs[0][0] != "prog":
                break
            prog = program_name(hs[0][1]) or ""
            rest = [_str(x) for x in elts[i + 1:]]
            out += [("prog", r, el, m) for r in runtime_option(prog, rest)]
            k = shell_script_index(prog, rest)
            if k is not None and (text := self._const_text(m, fn, elts[i + 1 + k], 0)):
                out.append(("shell", text, elts[i + 1 + k], m))
            k = wrapped_index(prog, rest)
            if k is None:
                break
            i += 1 + k
        return out

    def _const_text(self, m: _Mod, fn: _Fn | None, e: ast.expr, depth: int) -> str:
        if depth > 5:
            return ""
        if (s := _str(e)) is not None:
            return s
        if isinstance(e, ast.JoinedStr):
            # an interpolated value is not known statically: a shell variable stands for it (a
            # command head of `sh -c f"exec {prog} ..."` is then no program name, as `exec $P` is not)
            return "".join(_str(v) or "${X}" for v in e.values)
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
            return self._const_text(m, fn, e.left, depth + 1) + self._const_text(m, fn, e.right, depth + 1)
        if isinstance(e, ast.Name):
            return "".join(self._const_text(m, fn, v, depth + 1) for v in self._assigned(m, fn, e.id)[:1])
        return ""

    # -- the calls that run a command, or look one up --
    def _argv_of(self, call: ast.Call, wrappers: dict[str, set[str]]) -> list[ast.expr]:
        mod, name = _callee(call)
        if name in EXECS and mod == "os":
            return call.args[1:2]
        if name in RUNNERS and mod in ("subprocess", "asyncio", None):
            kw = [k.value for k in call.keywords if k.arg == "args"]
            return kw or call.args[:1]
        if name in wrappers:
            return [a for f in self.fns.get(name, []) for p in wrappers[name] for a in self._arg_for(f, call, p)]
        return []

    def _which_args(self, m: _Mod, fn: _Fn | None, call: ast.Call, wrappers: dict[str, set[str]]) -> list[tuple]:
        mod, name = _callee(call)
        if name == "which" and mod in ("shutil", None):
            args = call.args[:1]
        elif name in wrappers:
            args = [a for f in self.fns.get(name, []) for p in wrappers[name] for a in self._arg_for(f, call, p)]
        else:
            return []
        out: list[tuple] = []
        for a in args:
            if (s := _str(a)) is not None:
                out.append(("prog", s, a, m))
            elif isinstance(a, ast.Name):
                if self._is_param(fn, a.id):
                    out.append(("param", fn, a.id))
                out += [("prog", s, v, m) for v in self._loop_values(m, fn, a.id) if (s := _str(v)) is not None]
        return out

    def scan(self) -> list[Use]:
        # The wrappers first, to a fixed point (a wrapper of a wrapper is one too): functions
        # that run their parameter (netns.run, CellRunner._spawn, Mininet's exec) or look it up
        # (slurm._tool).
        run_w: dict[str, set[str]] = {}
        which_w: dict[str, set[str]] = {}
        found: list[tuple[tuple, str]] = []
        while True:
            before = (sum(map(len, run_w.values())), sum(map(len, which_w.values())))
            found = []
            for m, fn, call in self.calls:
                for a in self._argv_of(call, run_w):
                    found += [(h, "argv") for h in self.heads(m, fn, a)]
                found += [(h, "which") for h in self._which_args(m, fn, call, which_w)]
            for h, how in found:
                if h[0] == "param":
                    (run_w if how == "argv" else which_w).setdefault(h[1].node.name, set()).add(h[2])
            if (sum(map(len, run_w.values())), sum(map(len, which_w.values()))) == before:
                break
        uses, seen = [], set()
        for h, how in found:
            if h[0] == "param" or (h[0], h[1], id(h[2])) in seen:
                continue
            seen.add((h[0], h[1], id(h[2])))
            mod: _Mod = h[3]
            if h[0] == "shell":
                uses += shell_uses(h[1], mod.rel, h[2].lineno)
            elif h[0] == "built":
                uses.append(Use(h[1], f"{mod.rel}:{h[2].lineno}", "built"))
            elif (p := program_name(h[1])) and not h[1].startswith("-"):
                uses.append(Use(p, f"{mod.rel}:{h[2].lineno}", how))
        return uses


def _built_name(e: ast.expr) -> str | None:
    """binary("pqs-x"), str(...), BUILD / "bin" / "pqs-x", self.bins / "pqs-x": a build/bin program."""
    if isinstance(e, ast.Call):
        _, name = _callee(e)
        if name == "str" and e.args:
            return _built_name(e.args[0])
        if name == "binary" and e.args and isinstance(e.args[0], ast.Constant) and isinstance(e.args[0].value, str):
            return e.args[0].value
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Div) and isinstance(e.right, ast.Constant) \
            and isinstance(e.right.value, str) and e.right.value.startswith("pqs-"):
        return e.right.value
    return None


# ---------------------------------------------------------------------------------- the tree --

SKIP_DIRS = {"build", "results", "__pycache__", "node_modules", "fixtures"}


def source_files(root: Path) -> dict[str, list[Path]]:
    """The clone's sources by kind, without the venv, builds, results and dot-folders (.ci kept)."""
    out: dict[str, list[Path]] = {"py": [], "sh": [], "make": [], "docker": []}
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and (not x.startswith(".") or x == ".ci"))
        for f in sorted(files):
            p = Path(d) / f
            if f.endswith(".py"):
                out["py"].append(p)
            elif f == "Makefile" or f.endswith(".mk"):
                out["make"].append(p)
            elif f == "Dockerfile" or f.startswith("Dockerfile.") and not f.endswith("dockerignore"):
                out["docker"].append(p)
            elif f.endswith(".sh"):
                out["sh"].append(p)
            elif "." not in f:
                try:
                    first = p.read_bytes()[:64].split(b"\n", 1)[0]
                except OSError:
                    continue
                if first.startswith(b"#!") and re.search(rb"\b(ba|da)?sh\b", first):
                    out["sh"].append(p)
    return out


def dockerfile_runs(text: str) -> list[tuple[int, str]]:
    out, cur, start = [], None, 0
    for n, ln in enumerate(text.split("\n"), 1):
        if cur is None:
            m = re.match(r"\s*RUN\s+(.*)", ln)
            if not m:
                continue
            cur, start, ln = "", n, m.group(1)
        if ln.rstrip().endswith("\\"):
            cur += ln.rstrip()[:-1] + "\n"
        else:
            out.append((start, cur + ln))
            cur = None
    return out


def scan_tree(root: Path) -> list[Use]:
    files = source_files(root)
    functions: set[str] = set()
    for p in files["sh"]:  # functions of sourced helper files (common.sh's die, say, ...)
        functions |= set(FUNC_RE.findall(p.read_text(errors="replace")))
    uses = PyScan(files["py"], root).scan()
    for p in files["sh"]:
        uses += shell_uses(p.read_text(errors="replace"), str(p.relative_to(root)), functions=functions)
    for p in files["make"]:
        uses += makefile_uses(p.read_text(errors="replace"), str(p.relative_to(root)))
    for p in files["docker"]:
        for n, cmd in dockerfile_runs(p.read_text(errors="replace")):
            uses += shell_uses(cmd, str(p.relative_to(root)), n, functions=functions)
    return uses


def built_programs(root: Path) -> set[str]:
    """What the Makefiles build into build/bin: testbed's PROGS and every $(BIN)/pqs-x target."""
    out: set[str] = set()
    for p in source_files(root)["make"]:
        text = p.read_text(errors="replace")
        out |= set(re.findall(r"\$\((?:BIN|BINDIR)\)/(pqs-[a-z0-9-]+)\b(?!%)", text))
        for m in re.finditer(r"^PROGS\s*:?=\s*(.*)$", text, re.M):
            out |= set(m.group(1).split())
    return out


def table(script: Path = SCRIPT, runtime: bool = False, test: bool = False) -> list[tuple[str, str]]:
    """The script's own table of a mode: (command or file pattern, package). runtime: the image's
    runtime stage; neither: building and running (make demo); test: plus the test lab (make test)."""
    mode = ["--runtime"] if runtime else ["--test"] if test else []
    r = subprocess.run(["bash", str(script), "--list", *mode], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return [tuple(line.split(":", 1)) for line in r.stdout.split()]  # type: ignore[misc]


def uncovered(uses: list[Use], commands: set[str], built: set[str], root: Path) -> list[str]:
    """One line per program no install step provides: where it runs and how to fix it."""
    scripts = {p.name for p in source_files(root)["sh"] if p.name.endswith(".sh")}  # the clone's own
    bad: dict[str, list[Use]] = {}
    for u in uses:
        if u.how == "built" or u.program.startswith("pqs-"):
            if u.program not in built:
                bad.setdefault(u.program, []).append(u)
        elif u.program not in commands and u.program not in ALWAYS and u.program not in NOT_INSTALLED \
                and u.program not in built and u.program not in scripts:
            bad.setdefault(u.program, []).append(u)
    out = []
    for name, us in sorted(bad.items()):
        where = ", ".join(sorted({u.where for u in us})[:4]) + (" ..." if len({u.where for u in us}) > 4 else "")
        fix = ("build it into build/bin (a Makefile target) or fix the name" if name.startswith("pqs-")
               else FIX.format(name=name))
        out.append(f"{name}: run by {where}; {fix}")
    return out


# ------------------------------------------------------------------------------------ tests --


@pytest.fixture(scope="module")
def found() -> list[Use]:
    return scan_tree(REPO)


@pytest.fixture(scope="module")
def pairs() -> list[tuple[str, str]]:
    """Everything `make test` installs (the --test table)."""
    return table(test=True)


@pytest.fixture(scope="module")
def demo_pairs() -> list[tuple[str, str]]:
    """What `make demo` installs (the default table: build and run)."""
    return table()


def test_every_program_run_is_installed_or_built(found, pairs):
    commands = {w for w, _ in pairs if not w.startswith("/")}
    problems = uncovered(found, commands, built_programs(REPO), REPO)
    assert not problems, "programs the code runs that no install step provides:\n  " + "\n  ".join(problems)


# ---------------------------------------------------------------- what make demo installs --
# `make demo` installs the default table (build and run); `make test` adds the test lab (--test).
# A fresh machine's demo took 947 s, most of it installing the lab (podman, Slurm, user-mode
# Linux, tshark, clang: issue 29). So: what the project's own code runs (outside tests/ and .ci/)
# is in the default table, unless it serves a feature no demo uses (named here with the
# feature); what only tests run is in the test lab, not the default table (unless named in
# BY_HAND with the reason a user runs it).
TEST_ONLY = ("tests/", ".ci/")
TEST_LAB_FEATURES = {
    "clang": "make asan / make fuzz: the sanitizer and fuzz builds (make asan is part of make test)",
    "linux.uml": "pqshake uml run: the netem backend where the kernel lacks sch_netem (make test's netem lane)",
    "podman": "make podman-build / podman-run (docker/podman-*.sh)",
    "runc": "podman's runtime in docker/podman-run.sh",
    "debootstrap": "the base image of make podman-build",
    "sbatch": "pqshake run --slurm submits to a cluster: that cluster's Slurm",
    "scontrol": "pqshake run --slurm: that cluster's Slurm",
    "git": "the build and a run record the commit when there is one (a clone made by git has git)",
    "debconf-set-selections": "the install script answers tshark's question; tshark is the test lab's",
}
BY_HAND = {"ping": "net up prints a ping through the emulated link for the user to try (emulation/cli.py)"}
ISSUE_TEST_LAB = {"podman", "runc", "debootstrap", "slurmctld", "slurmd", "slurm-client", "munge",
                  "user-mode-linux", "tshark", "clang", "libclang-rt-14-dev"}


def _outside_tests(uses: list[Use]) -> list[Use]:
    return [u for u in uses if not u.where.startswith(TEST_ONLY)]


def test_demo_installs_no_test_lab(pairs, demo_pairs):
    """The packages the issue found the demo installing are in the --test table only."""
    demo = {pkg for _, pkg in demo_pairs}
    assert not ISSUE_TEST_LAB & demo, f"make demo installs the test lab: {sorted(ISSUE_TEST_LAB & demo)}"
    assert ISSUE_TEST_LAB <= {pkg for _, pkg in pairs}, "make test installs the test lab"


def test_every_program_the_code_runs_is_in_the_demo_table(found, demo_pairs, pairs):
    demo = {w for w, _ in demo_pairs if not w.startswith("/")}
    lab = {w for w, _ in pairs if not w.startswith("/")} - demo
    assert set(TEST_LAB_FEATURES) <= lab, f"not test-lab programs: {sorted(set(TEST_LAB_FEATURES) - lab)}"
    problems = uncovered(_outside_tests(found), demo | set(TEST_LAB_FEATURES), built_programs(REPO), REPO)
    assert not problems, ("programs the code runs that make demo does not install (add them to the default table, "
                          "or to TEST_LAB_FEATURES with the feature no demo uses):\n  " + "\n  ".join(problems))


def programs_only_tests_run(uses: list[Use], demo_commands: set[str]) -> list[str]:
    where: dict[str, list[str]] = {}
    for u in uses:
        where.setdefault(u.program, []).append(u.where)
    return [f"{prog}: run only by {', '.join(sorted(ws)[:3])}; move it to the test lab (--test) of "
            "scripts/install-system-packages.sh" for prog, ws in sorted(where.items())
            if prog in demo_commands and prog not in BY_HAND and all(w.startswith(TEST_ONLY) for w in ws)]


def test_programs_only_tests_run_are_not_in_the_demo_table(found, demo_pairs):
    demo = {w for w, _ in demo_pairs if not w.startswith("/")}
    problems = programs_only_tests_run(found, demo)
    assert not problems, "make demo installs what only tests run:\n  " + "\n  ".join(problems)


def test_only_tests_check_reports_a_test_program():
    uses = [Use("tshark", "tests/x.py:3", "argv"), Use("ip", "tests/x.py:4", "argv"), Use("ip", "emulation/a.py:9", "argv"),
            Use("ping", "tests/y.py:1", "argv")]
    problems = programs_only_tests_run(uses, {"tshark", "ip", "ping"})
    assert len(problems) == 1 and problems[0].startswith("tshark: run only by tests/x.py:3"), problems


def test_the_scan_finds_what_the_issue_named(found):
    """The programs of the issue, each where it is run: if the scanner lost one of these ways
    of running a program, the test above would pass for nothing. (A call moved to another
    file moves its line here too.)"""
    by = {}
    for u in found:
        by.setdefault(u.program, set()).add(u.where.split(":")[0])
    want = {
        "runc": "docker/podman-run.sh",  # podman run --runtime runc
        "podman": "docker/podman-build.sh",
        "debootstrap": "docker/podman-build.sh",
        "tc": "emulation/backend_netem.py",  # netns.run([...]): a wrapper
        "iperf3": "emulation/check.py",  # topo.ns_argv("client", argv): a builder
        "ethtool": "emulation/netns.py",  # ip netns exec NS ethtool
        "taskset": "emulation/placement.py",  # the placement prefix of ns_argv
        "slurmd": "tests/slurm/slurm_local.py",
        "munged": "tests/slurm/slurm_local.py",  # setpriv ... munged
        "sbatch": "experiments/slurm.py",  # _tool("sbatch"): a shutil.which wrapper
        "linux.uml": "emulation/uml.py",  # shutil.which
        "mnexec": "emulation/mininet_topo.py",
        "unshare": "emulation/rootless.py",  # [*UNSHARE, "sh", "-c", SETUP, ...]
        "mount": "emulation/rootless.py",  # inside SETUP
        "iptables": "tests/integration/test_turbotls_over_link.py",
        "ip": "emulation/linkemu/devnet.sh",
        "cmake": "testbed/deps/build-stack.sh",
        "git": "testbed/Makefile",  # $(shell git ...)
        "clang": "testbed/Makefile",  # SAN_CC ?= clang
        "pqs-timer": "tests/testbed/testbed_helpers.py",  # binary("pqs-timer")
        "pqs-linkemu": "tests/linkemu/conftest.py",  # self.bins / "pqs-linkemu"
    }
    missing = {p: f for p, f in want.items() if f not in by.get(p, set())}
    assert not missing, f"the scanner no longer finds: {missing}"


def test_runc_is_installed_with_podman(pairs, demo_pairs):
    """podman-run.sh runs `--runtime runc`: runc must come with podman, in the same table (the
    test lab: neither the demo nor the image's build runs a container)."""
    text = SCRIPT.read_text()
    line = next(ln for ln in text.splitlines() if '"podman:podman"' in ln)
    assert '"runc:runc"' in line, "runc belongs on podman's line (same table)"
    assert ("runc", "runc") in pairs and ("podman", "podman") in pairs
    assert not {"runc", "podman"} & {w for w, _ in demo_pairs}, "make demo (and the image's build) runs no containers"
    assert "runc" not in {w for w, _ in table(runtime=True)}, "the runtime image runs no containers"


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


def test_scanner_reports_an_uninstalled_program(tmp_path):
    """The check can fail: a synthetic clone running programs no table names, in every way the
    scanner knows; each is reported with its file:line and the fix."""
    root = _tree(tmp_path, {
        "pkg/a.py": "import subprocess, shutil\n"
                    "def run(argv):\n"
                    "    return subprocess.run(argv, capture_output=True)\n"
                    "def ns_argv(role, cmd):\n"
                    "    return ['ip', 'netns', 'exec', role, *cmd]\n"
                    "run(['frobnicate', '-x'])\n"
                    "subprocess.Popen(ns_argv('client', ['zorkd', '--serve']))\n"
                    "ok = shutil.which('quuxctl')\n"
                    "argv = ['spindle', '-v']\n"
                    "subprocess.check_output(argv)\n"
                    "subprocess.run(['sleep', '1'])\n",
        "scripts/x.sh": "#!/bin/bash\nset -e\ndie() { echo \"$*\" >&2; exit 1; }\n"
                        "case $1 in\n  a|b) frobctl --go ;;\n  *) die usage ;;\nesac\n"
                        "out=$(blargh -q | cut -d' ' -f1)\n"
                        "exec podman run --runtime crunchy img\n",
        "Makefile": "CC ?= fancycc\nall:\n\t@$(CC) -o x x.c\n\tmakefrob $@\n",
    })
    uses = scan_tree(root)
    problems = uncovered(uses, {"ip", "cut", "podman"}, set(), root)
    got = {p.split(":")[0]: p for p in problems}
    assert set(got) == {"frobnicate", "zorkd", "quuxctl", "spindle", "frobctl", "blargh", "crunchy", "fancycc",
                        "makefrob"}, problems
    assert "pkg/a.py:6" in got["frobnicate"] and "pkg/a.py:7" in got["zorkd"] and "pkg/a.py:8" in got["quuxctl"]
    assert "scripts/x.sh:5" in got["frobctl"] and "scripts/x.sh:8" in got["blargh"]
    assert "scripts/x.sh:9" in got["crunchy"] and "Makefile:3" in got["fancycc"] and "Makefile:4" in got["makefrob"]
    assert "add 'frobnicate:PACKAGE' to scripts/install-system-packages.sh" in got["frobnicate"]
    # builtins, functions, case patterns and sleep (coreutils) are not reported
    assert not {"die", "a", "b", "echo", "set", "sleep", "exit"} & set(got)


def test_scanner_takes_an_interpolated_command_for_unknown(tmp_path):
    root = _tree(tmp_path, {"t/c.py": "import subprocess\nprog = input()\n"
                                      "subprocess.Popen(['unshare', '-n', 'sh', '-c', f'ip link set lo up && exec {prog} --x'])\n"
                                      "subprocess.run(['sh', '-c', f'zorkctl {prog}'])\n"})
    problems = uncovered(scan_tree(root), {"ip", "unshare"}, set(), root)
    assert [p.split(":")[0] for p in problems] == ["zorkctl"], problems


def test_scanner_reports_an_unbuilt_pqs_program(tmp_path):
    root = _tree(tmp_path, {
        "t/b.py": "import subprocess\nfrom x import binary\nsubprocess.run([binary('pqs-nothere'), '--help'])\n"
                  "subprocess.run([binary('pqs-timer')])\n",
        "testbed/Makefile": "PROGS := pqs-timer\n$(BINDIR)/pqs-%: x\n",
    })
    built = built_programs(root)
    assert built == {"pqs-timer"}
    problems = uncovered(scan_tree(root), set(), built, root)
    assert len(problems) == 1 and problems[0].startswith("pqs-nothere: run by t/b.py:3"), problems


def test_table_parses_and_matches_the_script_text(pairs):
    """--list prints what the script checks; each pair is also written in the script (no pair
    made up by the listing, none lost to a condition)."""
    text = SCRIPT.read_text()
    assert len(pairs) >= 30
    for w, pkg in pairs:
        assert f'"{w}:{pkg}"' in text, (w, pkg)
    assert set(table(runtime=True)) < set(table()) < set(pairs), "each mode's table holds the one before"


# Libraries the C build links by name (-lNAME in a Makefile): the C library's and the compiler's
# come with gcc (libc6-dev, libgcc-12-dev: libgomp for -fopenmp); every other one needs an entry
# of the table for the file the linker looks for, lib/*/libNAME.so (or .a), which is the package
# of its development files (-lsodium: libsodium-dev, for bfe-bf; issue 22).
WITH_THE_COMPILER = {"c", "m", "dl", "pthread", "rt", "gomp"}
LINK_RE = re.compile(r"(?<![\w-])-l([A-Za-z0-9_+.-]+)")


def linked_libraries(root: Path) -> dict[str, list[str]]:
    """-lNAME of the Makefiles (comments aside): name -> where (file:line)."""
    out: dict[str, list[str]] = {}
    for p in source_files(root)["make"]:
        for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
            for m in LINK_RE.finditer(line.split("#", 1)[0]):
                out.setdefault(m.group(1), []).append(f"{p.relative_to(root)}:{n}")
    return out


def libraries_without_package(found: dict[str, list[str]], pairs: list[tuple[str, str]]) -> list[str]:
    files = {Path(w).name for w, _ in pairs if w.startswith("/")}
    return [f"-l{lib}: linked by {', '.join(where[:3])}; add '/usr/lib/*/lib{lib}.so:PACKAGE' (its -dev package) to "
            "scripts/install-system-packages.sh" for lib, where in sorted(found.items())
            if lib not in WITH_THE_COMPILER and not {f"lib{lib}.so", f"lib{lib}.a"} & files]


def test_every_linked_library_is_installed(demo_pairs):
    """make build (so make demo) links them: the default table, not only the test lab's."""
    found = linked_libraries(REPO)
    assert {"sodium", "gmp", "m"} <= set(found), f"the scan lost the -l flags of testbed/Makefile: {sorted(found)}"
    problems = libraries_without_package(found, demo_pairs)
    assert not problems, "libraries linked by name that no install step provides:\n  " + "\n  ".join(problems)


def test_linked_library_scan_reports_a_missing_package(tmp_path):
    root = _tree(tmp_path, {"Makefile": "# -lcomment is not a flag\nLIBS := -lfrob -lm -lsodium\n"})
    found = linked_libraries(root)
    assert set(found) == {"frob", "m", "sodium"} and found["frob"] == ["Makefile:2"]
    problems = libraries_without_package(found, [("/usr/lib/*/libsodium.so", "libsodium-dev")])
    assert len(problems) == 1 and problems[0].startswith("-lfrob: linked by Makefile:2"), problems


# Shared libraries the built programs load at run time. The container image's runtime stage
# installs only the --runtime list (docker/Dockerfile), so each library a program in build/bin
# needs (its ELF NEEDED entries: what ldd lists first-hand; the libraries' own dependencies come
# with their packages) must be a file of that list, or the C library's own (libc6, which every
# Debian system has: the Essential packages depend on it).
WITH_THE_C_LIBRARY = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "libresolv.so.2",
                      "libutil.so.1", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}
NEEDED_RE = re.compile(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]")


def needed_libraries(programs: list[Path]) -> dict[str, list[str]]:
    """soname -> the programs that need it (readelf -d: the NEEDED entries)."""
    out: dict[str, list[str]] = {}
    for p in programs:
        r = subprocess.run(["readelf", "-d", str(p)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, f"{p}: {r.stderr}"
        for so in NEEDED_RE.findall(r.stdout):
            out.setdefault(so, []).append(p.name)
    return out


def libraries_not_at_runtime(needed: dict[str, list[str]], runtime_pairs: list[tuple[str, str]]) -> list[str]:
    files = [Path(w).name for w, _ in runtime_pairs if w.startswith("/")]
    return [f"{so}: needed by {', '.join(progs[:3])}; add '/usr/lib/*/{so}:PACKAGE' (the package shipping it) to "
            "the runtime list of scripts/install-system-packages.sh" for so, progs in sorted(needed.items())
            if so not in WITH_THE_C_LIBRARY and not any(fnmatch.fnmatch(so, f) for f in files)]


def test_every_shared_library_of_a_built_program_is_a_runtime_package():
    """The image's programs start: every shared library build/bin's programs need is installed by
    `install-system-packages.sh --runtime` (the runtime stage of docker/Dockerfile)."""
    need(shutil.which("readelf") is not None, "readelf missing: apt-get install binutils")
    bindir = REPO / "build" / "bin"
    programs = sorted(p for p in bindir.glob("pqs-*") if p.is_file() and p.read_bytes()[:4] == b"\x7fELF")
    need(bool(programs), f"no programs in {bindir}: make build")
    needed = needed_libraries(programs)
    assert "libc.so.6" in needed, f"the scan found no NEEDED entries: {needed}"
    problems = libraries_not_at_runtime(needed, table(runtime=True))
    assert not problems, "shared libraries the programs load that the runtime image lacks:\n  " + "\n  ".join(problems)


def test_runtime_library_check_reports_a_missing_package():
    runtime = [("ip", "iproute2"), ("/usr/lib/*/libsodium.so.23", "libsodium23")]
    needed = {"libc.so.6": ["pqs-server"], "libm.so.6": ["pqs-server"], "libsodium.so.23": ["pqs-server"],
              "libgmp.so.10": ["pqs-server", "pqs-timer"]}
    problems = libraries_not_at_runtime(needed, runtime)
    assert len(problems) == 1 and problems[0].startswith("libgmp.so.10: needed by pqs-server, pqs-timer"), problems


def _installed(pkg: str) -> bool:
    r = subprocess.run(["dpkg-query", "-W", "-f", "${Status}", pkg], capture_output=True, text=True)
    return r.returncode == 0 and r.stdout.strip().endswith(" installed")


@functools.lru_cache(maxsize=None)
def _files(pkg: str) -> list[str]:
    """The files of pkg and of the packages it depends on directly (gcc ships gcc-12's cc,
    perl its perl-modules' FindBin.pm)."""
    deps = subprocess.run(["dpkg-query", "-W", "-f", "${Depends},${Pre-Depends}", pkg], capture_output=True,
                          text=True).stdout
    names = [pkg] + [d.split()[0].split(":")[0] for alt in deps.split(",") for d in alt.split("|") if d.strip()]
    out = []
    for n in dict.fromkeys(names):
        r = subprocess.run(["dpkg", "-L", n], capture_output=True, text=True)
        if r.returncode == 0:
            out += r.stdout.split("\n")
    return out


def _provides(pkg: str, what: str) -> bool:
    files = _files(pkg)
    if what.startswith("/"):  # a file pattern (merged /usr: dpkg may list /lib for /usr/lib)
        return any(fnmatch.fnmatch(f, what) or fnmatch.fnmatch("/usr" + f, what) for f in files)
    in_bin = {f for f in files if re.search(r"/s?bin/[^/]+$", f)}
    if any(f.rsplit("/", 1)[1] == what for f in in_bin):
        return True
    # an alternative (cc -> gcc): the alternatives' database names the package's program
    alt = Path("/var/lib/dpkg/alternatives") / what
    if alt.is_file():
        return bool(set(alt.read_text().split("\n")) & set(files))
    return False


def test_table_packages_provide_their_commands(pairs):
    """Where a package of the table is installed, it ships the command (or file) the script
    checks for: dpkg -L of the package (and its direct dependencies) has it."""
    need(shutil.which("dpkg") is not None, "dpkg missing: not a Debian system")
    wrong, checked = [], 0
    for what, pkg in pairs:
        if not _installed(pkg):
            continue
        checked += 1
        if not _provides(pkg, what):
            wrong.append(f"{what}:{pkg}")
    assert not wrong, f"these packages do not ship what the script checks for: {wrong}"
    assert checked, "no package of the table is installed here"


def _present(what: str) -> bool:
    if what.startswith("/"):
        return bool(glob.glob(what))
    cargo = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo")) / "bin" / what  # as the script looks
    return shutil.which(what) is not None or (what == "cargo" and os.access(cargo, os.X_OK))


def test_every_table_entry_present_after_install(pairs):
    """After `make test`'s install step everything of the table is here: in CI a missing one is
    a failure (the step did not install it), elsewhere a skip naming the fix."""
    missing = [f"{w} ({pkg})" for w, pkg in pairs if not _present(w)]
    need(not missing, f"missing: {', '.join(missing)}: bash scripts/install-system-packages.sh (as root)")
    if in_ci():
        assert not missing


def test_always_list_is_priority_required():
    """ALWAYS holds only programs of Priority: required packages (every Debian system has
    them); checked for each one present here, and in CI each must be present."""
    need(shutil.which("dpkg") is not None, "dpkg missing: not a Debian system")
    wrong, absent = [], []
    for prog, pkg in sorted(ALWAYS.items()):
        path = shutil.which(prog)
        if path is None:
            absent.append(prog)
            continue
        prio = subprocess.run(["dpkg-query", "-W", "-f", "${Essential} ${Priority}", pkg], capture_output=True,
                              text=True).stdout.split()
        if prio[-1:] != ["required"] or not _provides(pkg, prog):
            wrong.append(f"{prog} ({pkg}: {' '.join(prio) or 'not installed'})")
    assert not wrong, f"not a program of a Priority: required package as ALWAYS says: {wrong}"
    assert not absent, f"programs every Debian system has are missing here: {absent}"
