"""YAML files as user input: values plus the line each came from, and pydantic errors turned
into one line `file:line field: problem (fix)`.

Profiles and experiments both load through here so every message has the same shape.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from pqshake.errors import UserError

Loc = tuple[Any, ...]


@dataclass
class Doc:
    """One YAML document: its data and, for every path inside it, the 1-based line."""

    data: Any
    source: str
    lines: dict[Loc, int] = field(default_factory=dict)
    start_line: int = 1

    def line_of(self, loc: Loc) -> int:
        # The deepest located prefix: an error on a missing key points at its parent mapping.
        for n in range(len(loc), -1, -1):
            if loc[:n] in self.lines:
                return self.lines[loc[:n]]
        return self.start_line


# ------------------------------------------------------------------ limits --
# What one input may be: a profile file, or an experiment file together with the files it
# includes. Every shipped file is far below (the largest, emulation/profiles/paquin-grid.yaml, is
# 8.6 kB with 520 values nested 2 deep; pqshake/algorithms.yaml: 16 kB, 1771 values, 5 deep). The
# limits are checked before anything is built, so a hostile file (a "billion laughs" alias bomb,
# /dev/zero, a 24 MB list) is refused in well under a second and a few MB.
MAX_BYTES = 1 << 20  # file size; also the scalar text the values may add up to once aliases are expanded
MAX_NODES = 50_000  # values (mappings, lists, scalars), each alias counted as what it expands to
MAX_DEPTH = 64  # lists and mappings inside each other
MAX_FILES = 100  # files read for one input (an experiment and its includes, each time it is included)
MAX_NUMBER_CHARS = 100  # a number longer than this is a mistake (and int() of it is slow)
SHORT = 40  # longest input value echoed in a message


class Budget:
    """What one input may still use; an experiment's includes draw on the same budget."""

    def __init__(self) -> None:
        self.bytes = MAX_BYTES
        self.nodes = MAX_NODES
        self.text = MAX_BYTES
        self.files = MAX_FILES


def short(value: Any) -> str:
    """repr(value) cut to SHORT characters: messages echo what the user wrote, never pages of it
    (and repr keeps it on one line)."""
    r = repr(value)
    return r if len(r) <= SHORT else r[: SHORT - 3] + "..."


_FIX = "(split the file, or write fewer aliases)"


def _too_many(source: str, line: int) -> UserError:
    return UserError(f"{source}:{line} more than {MAX_NODES} values (aliases counted as what they expand to) - "
                     f"the limit of a profile or experiment file {_FIX}")


def _too_deep(source: str, line: int) -> UserError:
    return UserError(f"{source}:{line} lists and mappings nested more than {MAX_DEPTH} deep - the limit of a "
                     "profile or experiment file (flatten it)")


def _read(path: Path, source: str, budget: Budget) -> str:
    """The file's text, reading at most the byte budget + 1: a device (/dev/zero), FIFO or
    directory is refused before any read, and a huge file before it is parsed."""
    if budget.files <= 0:
        raise UserError(f"{source}: more than {MAX_FILES} files read for one profile or experiment file - the "
                        "limit (include fewer files)")
    budget.files -= 1
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused just below).
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError, ValueError):  # ValueError: a NUL in the name
        raise UserError(f"{source}: no such file (check the path)") from None
    except PermissionError:
        raise UserError(f"{source}: permission denied (make the file readable)") from None
    except OSError as e:
        raise UserError(f"{source}: cannot open: {e.strerror} (check the path)") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise UserError(f"{source}: is a directory (name a .yaml file)")
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket"
        raise UserError(f"{source}: not a regular file but {kind} (name a .yaml file)")
    with os.fdopen(fd, "rb") as f:
        try:
            data = f.read(budget.bytes + 1)
        except OSError as e:
            raise UserError(f"{source}: cannot read: {e.strerror}") from None
    if len(data) > budget.bytes:
        raise UserError(f"{source}: larger than {MAX_BYTES} bytes - the limit of a profile or experiment file "
                        "with its includes (split it into several files)")
    budget.bytes -= len(data)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise UserError(f"{source}:{line} not UTF-8 text (byte {e.start}; save the file as UTF-8)") from None


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, stopping at the node and depth limits while it composes: its
    composer recurses once per nesting level (`[[[[...` ends in RecursionError otherwise)."""

    def __init__(self, text: str, source: str, budget: Budget) -> None:
        super().__init__(text)
        self._source, self._budget, self._count, self._depth = source, budget, 0, 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        line = self.peek_event().start_mark.line + 1
        self._count += 1
        if self._count > self._budget.nodes:
            raise _too_many(self._source, line)
        if self._depth >= MAX_DEPTH:
            raise _too_deep(self._source, line)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for kv in node.value for n in kv]
    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


def _measure(node: yaml.Node, source: str, budget: Budget, memo: dict[int, tuple[int, int]],
             stack: list[yaml.Node]) -> tuple[int, int]:
    """(values, scalar characters) of node with its aliases expanded, from the composed graph
    (an alias is the anchored node itself): memoised per node, so a billion laughs costs as many
    steps as the file has nodes. A node met again inside itself is a recursive alias. The first
    (innermost) node over the budget is the line the message names."""
    if id(node) in memo:
        return memo[id(node)]
    if any(n is node for n in stack):
        raise UserError(f"{source}:{node.start_mark.line + 1} an alias inside the very list or mapping its anchor "
                        "marks: it never ends (remove the alias)")
    if len(stack) >= MAX_DEPTH:
        raise _too_deep(source, node.start_mark.line + 1)
    stack.append(node)
    nodes, text = 1, len(node.value) if isinstance(node, yaml.ScalarNode) else 0
    for child in _children(node):
        n, t = _measure(child, source, budget, memo, stack)
        nodes, text = nodes + n, text + t
    stack.pop()
    if nodes > budget.nodes:
        raise _too_many(source, node.start_mark.line + 1)
    if text > budget.text:
        raise UserError(f"{source}:{node.start_mark.line + 1} its aliases expand to more than {MAX_BYTES} characters "
                        f"of text - the limit of a profile or experiment file {_FIX}")
    memo[id(node)] = (nodes, text)
    return nodes, text


_NUMBER_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")
_PLAIN_TAGS = ("tag:yaml.org,2002:map", "tag:yaml.org,2002:seq")


class _Builder:
    """Plain data from a measured (acyclic, bounded) node graph, with the line of every path."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.constructor = yaml.constructor.SafeConstructor()
        self.scalars: dict[int, Any] = {}  # an aliased scalar is constructed once

    def build(self, node: yaml.Node, path: Loc, lines: dict[Loc, int]) -> Any:
        lines[path] = node.start_mark.line + 1
        if not isinstance(node, yaml.ScalarNode) and node.tag not in _PLAIN_TAGS:
            # !!set, !!omap, !!python/...: a list or mapping of ours carries no tag
            raise UserError(f"{self.source}:{node.start_mark.line + 1} {dotted(path)}: unsupported YAML tag "
                            "(remove the !tag)")
        if isinstance(node, yaml.MappingNode):
            out: dict[Any, Any] = {}
            for knode, vnode in node.value:
                where = f"{self.source}:{knode.start_mark.line + 1}"
                if knode.tag == "tag:yaml.org,2002:merge":
                    raise UserError(f"{where} {dotted(path + ('<<',))}: merge keys are not supported (write the keys "
                                    "out; experiments share settings with include:)")
                key = self.build(knode, path + ("<key>",), {})
                if not isinstance(key, (str, int, float, bool)) or key is None:
                    raise UserError(f"{where} a mapping key must be a plain name")
                if key in out:
                    raise UserError(f"{where} {dotted(path + (key,))}: given twice (keep one)")
                out[key] = self.build(vnode, path + (key,), lines)
                lines[path + (key,)] = knode.start_mark.line + 1
            return out
        if isinstance(node, yaml.SequenceNode):
            return [self.build(v, path + (i,), lines) for i, v in enumerate(node.value)]
        if id(node) not in self.scalars:
            self.scalars[id(node)] = self._scalar(node, path)
        return self.scalars[id(node)]

    def _scalar(self, node: yaml.Node, path: Loc) -> Any:
        where = f"{self.source}:{node.start_mark.line + 1} {dotted(path)}"
        if node.tag in _NUMBER_TAGS and len(node.value) > MAX_NUMBER_CHARS:
            raise UserError(f"{where}: a number of more than {MAX_NUMBER_CHARS} characters (shorten it)")
        try:
            # The safe constructor decides the type (ints, floats, bools, null, strings).
            return self.constructor.construct_object(node, deep=True)
        except yaml.constructor.ConstructorError as e:
            if (e.problem or "").startswith("could not determine a constructor"):
                raise UserError(f"{where}: unsupported YAML tag (remove the !tag)") from None
            raise UserError(f"{where}: {_redact(e.problem or 'unreadable value')} (fix the value)") from None
        except (ValueError, OverflowError):
            raise UserError(f"{where}: not a readable value (fix the value)") from None


def _redact(problem: str) -> str:
    """A PyYAML message on one line, without the text it quotes from the file (an alias or tag
    name of a file that is no YAML of ours may be anything); a quoted character and token names
    like '<scalar>' stay."""
    problem = " ".join(str(problem).split())
    return re.sub(r"'([^']*)'", lambda m: m[0] if len(m[1]) <= 2 or m[1].startswith("<") else "'...'", problem)


# The fix for PyYAML's syntax errors, by a word of the problem; else indentation or quoting.
_SYNTAX_FIX = {"\\t": "indent with spaces, not tabs", "undefined alias": "define &name before using *name",
               "duplicate anchor": "give each &anchor a name of its own",
               "incompatible YAML": "remove the %YAML line, or write %YAML 1.1"}


# Keys any YAML file may carry at its top (a docker-compose file, a CI workflow, a Kubernetes
# manifest): being fields of ours too, they are no sign that a file is ours.
_ANY_FILE_KEYS = frozenset({"name", "description"})
# Keys judged: a file of ours has fewer top-level keys than we have fields, so the first few
# hundred decide, and a file of 50,000 keys costs no 50,000 spelling comparisons.
_JUDGED_KEYS = 300
# Who reads a file of each kind, and one such file: the fix of "not a ... file".
_EXAMPLE = {"experiment": ("pqshake plan", "experiments/demo.yaml"),
            "profile": ("pqshake net show", "emulation/profiles/lan.yaml")}


def _not_ours(node: yaml.Node, fields: frozenset[str], kind: str, no_sign: frozenset[str]) -> str | None:
    """Why node is not a `kind` at all, or None when it may be one: a mapping none of whose
    top-level keys is a field of ours, keys in `no_sign` aside (a field mistyped, 'Samples' or
    'group', counts as ours). Then nothing of it may be echoed: not its keys, not its values
    (/etc/shadow reads as a mapping of its lines, a compose file carries passwords); the reason
    gives counts only."""
    if not isinstance(node, yaml.MappingNode) or not node.value:
        return None
    keys = [k.value if isinstance(k, yaml.ScalarNode) else None for k, _ in node.value[:_JUDGED_KEYS]]
    if any(k in fields and k not in no_sign for k in keys):
        return None
    # With name: the file passed as ours before this second look, and its keys were echoed: a
    # mistyped field there ('group') still makes it ours. Without, nothing is taken on a guess.
    allowed = sorted(fields) if no_sign else []
    others = [k for k in keys if k not in fields and not (isinstance(k, str) and _near(k, allowed))]
    if len(others) < len([k for k in keys if k not in fields]) or not others:
        return None  # a field mistyped, or only name: (an experiment missing its fields)
    n = len(node.value)
    a = "an" if kind[0] in "aeiou" else "a"
    besides = " other than name: or description:" if any(k in no_sign for k in keys) else ""
    keys_text = f"none of its {n} top-level keys is" if n > 1 else "its one top-level key is not"
    who, example = _EXAMPLE.get(kind, ("pqshake", "a file under experiments/ or emulation/profiles/"))
    return (f"not a pqshake {kind} file: {keys_text} {a} {kind} field{besides} (check the file name: {who} "
            f"takes {a} {kind} file such as {example})")


def load_docs(path: Path | str, text: str | None = None, *, fields: frozenset[str] | None = None,
              kind: str = "profile or experiment", budget: Budget | None = None) -> list[Doc]:
    """Every document of a YAML file (profiles may share a file, separated by ---), within the
    limits above (`budget`: shared by the files of one input). With `fields`, a document whose
    top level is a mapping without any of them is refused as not a `kind`."""
    p = Path(path)
    source = str(path)
    budget = budget or Budget()
    if text is None:
        text = _read(p, source, budget)
    elif len(text) > budget.bytes:
        raise UserError(f"{source}: larger than {MAX_BYTES} bytes - the limit of a profile or experiment file "
                        "(split it into several files)")
    try:
        nodes = list(yaml.compose_all(text, Loader=lambda t: _Loader(t, source, budget)))
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark else 1
        what = e.problem or e.context or "unreadable"
        if e.context and e.context.startswith("found "):  # "found duplicate anchor 'a'; first occurrence"
            what = e.context.split(";")[0]
        fix = next((f for word, f in _SYNTAX_FIX.items() if word in what), "fix the indentation or quoting")
        raise UserError(f"{source}:{line} YAML syntax: {_redact(what)} ({fix})") from None
    except yaml.reader.ReaderError as e:
        line = text[: e.position].count("\n") + 1
        raise UserError(f"{source}:{line} not a text file: character #x{e.character:04x} is not allowed in YAML "
                        "(remove it; save the file as UTF-8 text)") from None
    except yaml.YAMLError as e:
        raise UserError(f"{source}: YAML syntax: {_redact(str(e))} (fix the file)") from None
    except RecursionError:  # the limits above stop this first; kept so it can never be a traceback
        raise _too_deep(source, 1) from None
    docs = []
    for node in nodes:
        if node is None:
            continue
        line = node.start_mark.line + 1
        # Twice: before anything of it is built, a file none of whose keys is ours (name: counts,
        # so the limits and a profile's or experiment's own YAML mistakes come first), and once
        # built, one with nothing of ours but name: or description: (a compose file, a workflow).
        why = _not_ours(node, fields, kind, frozenset()) if fields is not None else None
        if why is not None:
            raise UserError(f"{source}:{line} {why}")
        n, t = _measure(node, source, budget, {}, [])
        budget.nodes -= n
        budget.text -= t
        lines: dict[Loc, int] = {}
        data = _Builder(source).build(node, (), lines)
        why = _not_ours(node, fields, kind, _ANY_FILE_KEYS) if fields is not None else None
        if why is not None:
            raise UserError(f"{source}:{line} {why}")
        docs.append(Doc(data=data, source=source, lines=lines, start_line=line))
    return docs


def _nested_model(ann: Any) -> type[BaseModel] | None:
    """The model inside Optional[...] / X | None / Annotated[...] / tagged unions, if any."""
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return ann
    for a in getattr(ann, "__args__", ()) or ():
        m = _nested_model(a)
        if m is not None:
            return m
    return getattr(ann, "__origin__", None) and _nested_model(ann.__origin__)


# A union's members appear in pydantic's locations by type: "literal['auto','off']", "str",
# "dict[str,any]", or a model's class name. A class name is skipped only when it is one of the
# models' names: a user's key ("Samples: 30", an unknown field) is CamelCase too and must stay.
_UNION_MEMBER = re.compile(r"^(literal\[.*|str|int|float|bool|none|dict\[.*|list\[.*|constrained-\w+)$")

# A scalar union member, as pydantic names it in locations, in the user's words ("constrained-int"
# is Annotated[int, Field(ge=...)]); a literal's own values are its words (the error's ctx).
_MEMBER_WORDS = {"int": "a whole number", "float": "a number", "str": "text", "bool": "true or false",
                 "none": "null"}


def _model_names() -> set[str]:
    """The class names of every pydantic model defined so far (ours among them)."""
    from pydantic import BaseModel

    out: set[str] = set()
    todo = [BaseModel]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub.__name__ not in out:
                out.add(sub.__name__)
                todo.append(sub)
    return out


def _skipped(part: Any, models: frozenset[str] | set[str] = frozenset()) -> bool:
    """Location parts pydantic adds that name no field: validator functions, union tags and
    members (a type, or a model's class name in `models`)."""
    return isinstance(part, str) and (part.startswith(("function-", "tag:")) or bool(_UNION_MEMBER.match(part))
                                      or part in models)


_SCALAR_ERRORS = ("literal_error", "string_type", "int_type", "int_parsing", "float_type", "float_parsing",
                  "bool_type", "bool_parsing", "enum", "none_required")


def union_misses_dropped(errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """pydantic errors (locations cleaned) without a union's scalar members complaining about a
    mapping or list the user clearly meant for the union's other member: `field: {a: 1}` whose
    mapping has a problem reports that problem, not "should be 'auto' or 'off'"."""
    def shadowed(e: dict[str, Any]) -> bool:
        loc = tuple(e.get("loc", ()))
        return (e.get("type") in _SCALAR_ERRORS and isinstance(e.get("input"), (dict, list))
                and any(o is not e and tuple(o.get("loc", ()))[:len(loc)] == loc and o.get("type") not in _SCALAR_ERRORS
                        for o in errors))
    return [e for e in errors if not shadowed(e)]


def clean_errors(e: ValidationError) -> list[dict[str, Any]]:
    """A ValidationError's errors as users should see them: locations without the parts that
    name no field, and without a union's members complaining about what the user meant for
    another member. Profiles and experiments both report through here."""
    models = _model_names()

    def loc(err: dict[str, Any]) -> tuple:
        parts = tuple(err.get("loc", ()))
        # An unknown field's last part is the user's key, whatever it looks like.
        keep = len(parts) - 1 if err.get("type") == "extra_forbidden" else -1
        return tuple(p for i, p in enumerate(parts) if i == keep or not _skipped(p, models))

    def member(err: dict[str, Any]) -> str | None:  # the union member failing, as pydantic names it
        parts = reversed(tuple(err.get("loc", ())))
        return next((p for p in parts if isinstance(p, str) and _UNION_MEMBER.match(p)), None)

    def tagged(err: dict[str, Any]) -> bool:  # a member of a discriminated union (Tag("tag:..."))
        return any(isinstance(p, str) and p.startswith("tag:") for p in err.get("loc", ()))

    kept = union_misses_dropped([{**err, "loc": loc(err), "member": member(err), "tagged": tagged(err)}
                                 for err in e.errors()])
    return _unions_merged(kept)


def _member_words(err: dict[str, Any]) -> str | None:
    """What a scalar union member accepts, in plain words; None for a list, mapping or model."""
    m = err.get("member") or ""
    if m.startswith("literal["):
        return str((err.get("ctx") or {}).get("expected") or "") or None
    return _MEMBER_WORDS.get(m.removeprefix("constrained-"))


def _unions_merged(errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A union of scalars (`parallel: N | auto`) fails once per member, each named by pydantic's
    type ('constrained-int', "literal['auto']"): one error instead, in plain words, saying what
    the value may be ("expected a whole number or 'auto'"), or, when it is of one member's type
    but out of its range, that member's complaint and the others ("..., or 'auto'")."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for err in errors:
        if err.get("member"):
            groups.setdefault(tuple(err["loc"]), []).append(err)
    out = []
    for err in errors:
        group = groups.get(tuple(err["loc"]), [])
        words = [_member_words(x) for x in group]
        if err not in group or len(group) < 2 or None in words:
            out.append(err)
            continue
        if err is not group[0]:
            continue  # said with the group's first
        ranged = [x for x in group if x.get("type") not in _SCALAR_ERRORS]
        if ranged:
            rest = [w for x, w in zip(group, words) if x is not ranged[0]]
            msg = f"{ranged[0].get('msg')}, or {' or '.join(rest)}"
        else:
            msg = f"expected {' or '.join(words)}"
        out.append({"type": "union_error", "loc": err["loc"], "input": err.get("input"), "msg": msg})
    return out


_ALLOWED = "; allowed: "


def one_line(rows: list[str]) -> str:
    """Rows `place field: problem` as one line. Rows of the same place and field (a union's
    members each failing) join into one: `field: problem; or problem`."""
    merged: dict[str, list[str]] = {}
    for r in rows:
        head, _, text = r.partition(": ")
        merged.setdefault(head, [])
        if text not in merged[head]:
            merged[head].append(text)
    out = [f"{h}: {'; or '.join(t)}" for h, t in merged.items()]
    # Several unknown fields of one mapping each list the allowed ones: say the list once.
    seen: set[str] = set()
    for i, r in enumerate(out):
        head, sep, allowed = r.partition(_ALLOWED)
        if sep and allowed in seen:
            out[i] = head
        seen.add(allowed)
    return out[0] if len(out) == 1 else out[0] + f"  (+{len(out) - 1} more: " + "; ".join(r.split(" ", 1)[1] for r in out[1:]) + ")"


def _field_names(model: type[BaseModel], loc: Loc) -> list[str] | None:
    """Allowed field names of the model reached by loc (for 'unknown field' errors)."""
    current: Any = model
    for part in loc:
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        f = current.model_fields.get(part) if isinstance(part, str) else None
        if f is None:
            continue
        current = _nested_model(f.annotation) or f.annotation
    if isinstance(current, type) and issubclass(current, BaseModel):
        return sorted(
            (f.alias or name) for name, f in current.model_fields.items() if not name.startswith("_")
        )
    return None


def _field_info(model: type[BaseModel], loc: Loc) -> Any:
    """The pydantic FieldInfo loc ends at, if loc names fields all the way."""
    current: Any = model
    info = None
    for part in loc:
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        info = current.model_fields.get(part) if isinstance(part, str) else None
        if info is None:
            return None
        current = _nested_model(info.annotation) or info.annotation
    return info


def _scalar_words(ann: Any) -> list[str] | None:
    """What a union of scalars accepts, in plain words ('a whole number', "'auto'"); None when
    a member is no scalar (a list, a mapping, a model)."""
    import types
    import typing

    origin = typing.get_origin(ann)
    if origin is typing.Annotated:
        return _scalar_words(typing.get_args(ann)[0])
    if origin in (typing.Union, types.UnionType):
        parts = [_scalar_words(a) for a in typing.get_args(ann)]
        return None if None in parts else [w for p in parts for w in p]
    if origin is typing.Literal:
        return [repr(v) for v in typing.get_args(ann)]
    words = _MEMBER_WORDS.get(getattr(ann, "__name__", "").lower())
    return [words] if words else None


def _near(key: Any, allowed: list[str]) -> str | None:
    """The allowed field a mistyped key most likely meant: the same name in other case, else a
    close spelling."""
    if not isinstance(key, str):
        return None
    same = [a for a in allowed if a.lower() == key.lower()]
    if same:
        return same[0]
    import difflib

    close = difflib.get_close_matches(key.lower(), allowed, n=1, cutoff=0.8)
    return close[0] if close else None


def describe(err: dict[str, Any], model: type[BaseModel]) -> str:
    """The message part of one pydantic error, with the fix."""
    loc = tuple(err.get("loc", ()))
    kind = err.get("type", "")
    if kind == "extra_forbidden":
        allowed = _field_names(model, loc[:-1])
        hint = f"{_ALLOWED}{', '.join(allowed)}" if allowed else ""
        near = _near(loc[-1] if loc else None, allowed or [])
        return f"unknown field{f' (did you mean {near}?)' if near else ''}{hint}"
    if kind == "missing":
        return "required field is missing (add it)"
    if kind in ("model_type", "dict_type", "model_attributes_type"):
        return "expected a mapping of fields (key: value)"
    msg = str(err.get("msg", "invalid"))
    inp = err.get("input")
    if kind == "literal_error" and err.get("tagged"):
        # A discriminated union reports only the member its discriminator chose ("samples: 'abc':
        # Input should be 'auto'"): say every member the field takes.
        info = _field_info(model, loc)
        words = _scalar_words(info.annotation) if info is not None else None
        if words and len(words) > 1:
            quoted = isinstance(inp, str) and re.fullmatch(r"\s*[-+]?[\d.]+\s*", inp)
            fix = " (write the number without quotes)" if quoted else ""
            return f"{short(inp)}: expected {' or '.join(words)}{fix}"
    if kind in _NUMBER_ERRORS and isinstance(inp, (bool, str)):
        # Strict types: true is no 1, and '4096' in quotes is text, not a number.
        fix = "true/false is not a number" if isinstance(inp, bool) else "write a plain number without quotes or unit"
        return f"{short(inp)}: {msg} ({fix}, e.g. {_NUMBER_ERRORS[kind]})"
    # pydantic prefixes messages of ValueErrors raised in validators; ours already carry the fix.
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            msg = msg[len(prefix):]
            # Validators quote the value with repr: a long one is cut (short()).
            return msg.replace(repr(inp), short(inp)) if isinstance(inp, str) else msg
    if inp is not None and not isinstance(inp, (dict, list)):
        return f"{short(inp)}: {msg}"
    return msg


# pydantic's error types of a number given as something else, with an example of a number.
_NUMBER_ERRORS = {"int_type": "3", "float_type": "0.5"}

_PLAIN_KEY = re.compile(r"[A-Za-z0-9_.+<>-]{1,%d}" % SHORT)


def dotted(loc: Loc) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            # A key that is no plain name (spaces, a newline, pages of text) is quoted and cut.
            text = str(part)
            out += ("." if out else "") + (text if _PLAIN_KEY.fullmatch(text) else short(part))
    return out or "(top level)"


def located(err: dict[str, Any], text: str) -> tuple[Loc, str]:
    """(location, message) of one cleaned error. Errors from model-level validators carry no
    location; our validators name the field by raising "field.name: message"."""
    loc = tuple(err.get("loc", ()))
    head = text.split(": ", 1)[0]
    if not loc and ": " in text and " " not in head and re.fullmatch(r"[A-Za-z0-9_.-]+", head):
        return tuple(int(p) if p.isdigit() else p for p in head.split(".")), text.split(": ", 1)[1]
    return loc, text


def validate(model: type[BaseModel], doc: Doc, loc_prefix: Loc = (), data: Any = None, **context: Any):
    """Validate doc.data (or data found at loc_prefix in doc) against model, or raise a
    UserError whose text is one line per problem (the first one first)."""
    payload = doc.data if data is None else data
    try:
        return model.model_validate(payload, context=context or None)
    except ValidationError as e:
        rows = []
        for err in clean_errors(e):
            # Errors from model-level validators carry no location; our validators may name a
            # field by raising "field.name: message".
            loc, text = located(err, describe(err, model))
            loc = loc_prefix + loc
            rows.append(f"{doc.source}:{doc.line_of(loc)} {dotted(loc)}: {' '.join(text.splitlines())}")
        raise UserError(one_line(rows)) from None
