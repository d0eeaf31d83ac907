"""YAML files as user input: values plus the line each came from, and pydantic errors turned
into one line `file:line field: problem (fix)`.

Profiles and experiments both load through here so every message has the same shape.
"""

from __future__ import annotations

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


def _build(node: yaml.Node, path: Loc, lines: dict[Loc, int], source: str) -> Any:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for knode, vnode in node.value:
            key = _build(knode, path + ("<key>",), {}, source)
            if not isinstance(key, (str, int, float, bool)) or key is None:
                raise UserError(f"{source}:{knode.start_mark.line + 1} a mapping key must be a plain name")
            if key in out:
                raise UserError(
                    f"{source}:{knode.start_mark.line + 1} {'.'.join(map(str, path + (key,)))}: "
                    "given twice (keep one)"
                )
            out[key] = _build(vnode, path + (key,), lines, source)
            lines[path + (key,)] = knode.start_mark.line + 1
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_build(v, path + (i,), lines, source) for i, v in enumerate(node.value)]
    # Scalars: the safe constructor decides the type (ints, floats, bools, null, strings).
    return yaml.constructor.SafeConstructor().construct_object(node, deep=True)


def load_docs(path: Path | str, text: str | None = None) -> list[Doc]:
    """Every document of a YAML file (profiles may share a file, separated by ---)."""
    p = Path(path)
    source = str(path)
    if text is None:
        try:
            text = p.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise UserError(f"{source}: no such file (check the path)") from None
        except (OSError, UnicodeDecodeError) as e:
            raise UserError(f"{source}: cannot read: {e}") from None
    try:
        nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark else 1
        raise UserError(f"{source}:{line} YAML syntax: {e.problem or e.context} (fix the indentation or quoting)") from None
    except yaml.YAMLError as e:
        raise UserError(f"{source}: YAML syntax: {e}") from None
    docs = []
    for node in nodes:
        if node is None:
            continue
        lines: dict[Loc, int] = {}
        data = _build(node, (), lines, source)
        docs.append(Doc(data=data, source=source, lines=lines, start_line=node.start_mark.line + 1))
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


def _skipped(part: Any) -> bool:
    """Location parts pydantic adds that name no field: validator functions, union tags."""
    return isinstance(part, str) and part.startswith(("function-", "tag:"))


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


def describe(err: dict[str, Any], model: type[BaseModel]) -> str:
    """The message part of one pydantic error, with the fix."""
    loc = tuple(err.get("loc", ()))
    kind = err.get("type", "")
    if kind == "extra_forbidden":
        allowed = _field_names(model, loc[:-1])
        hint = f"; allowed: {', '.join(allowed)}" if allowed else ""
        return f"unknown field{hint}"
    if kind == "missing":
        return "required field is missing (add it)"
    msg = str(err.get("msg", "invalid"))
    # pydantic prefixes messages of ValueErrors raised in validators; ours already carry the fix.
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            return msg[len(prefix):]
    inp = err.get("input")
    if inp is not None and not isinstance(inp, (dict, list)):
        return f"{inp!r}: {msg}"
    return msg


def dotted(loc: Loc) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def validate(model: type[BaseModel], doc: Doc, loc_prefix: Loc = (), data: Any = None, **context: Any):
    """Validate doc.data (or data found at loc_prefix in doc) against model, or raise a
    UserError whose text is one line per problem (the first one first)."""
    payload = doc.data if data is None else data
    try:
        return model.model_validate(payload, context=context or None)
    except ValidationError as e:
        rows = []
        for err in e.errors():
            # Errors from model-level validators carry no location; our validators may name a
            # field by raising "field.name: message".
            err = {**err, "loc": tuple(p for p in err.get("loc", ()) if not _skipped(p))}
            loc = loc_prefix + err["loc"]
            text = describe(err, model)
            if not err.get("loc") and ": " in text and " " not in text.split(": ", 1)[0]:
                head, text = text.split(": ", 1)
                loc = loc_prefix + tuple(int(p) if p.isdigit() else p for p in head.split("."))
            rows.append(f"{doc.source}:{doc.line_of(loc)} {dotted(loc)}: {text}")
        raise UserError(rows[0] if len(rows) == 1 else rows[0] + f"  (+{len(rows) - 1} more: " + "; ".join(r.split(' ', 1)[1] for r in rows[1:]) + ")") from None
