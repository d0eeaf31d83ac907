"""The algorithm registry (pqshake/algorithms.yaml): names, families, levels, plot styles and
named sets. The runner expands `@set` names with it; the figures take colours from it."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from pqshake.errors import UserError

REGISTRY_FILE = Path(__file__).with_name("algorithms.yaml")


@dataclass(frozen=True)
class Algorithm:
    name: str
    role: str  # "group" or "sig"
    family: str
    level: int
    kind: str  # classical | pq | hybrid
    colour: str
    family_label: str
    linestyle: str
    marker: str
    provider: str = "openssl"
    share: tuple[int, int] | None = None  # key-share bytes (client, server), groups only
    pk: int | None = None  # public key bytes, sigs only
    sig: int | None = None  # signature bytes, sigs only
    sig_max: bool = False  # sig is an upper bound (DER ECDSA, Falcon: length varies per signature)
    tls1_2: bool = False  # TLS 1.2 has it (the tls12 mode runs only these; algorithms.yaml says why)


@dataclass(frozen=True)
class Registry:
    groups: dict[str, Algorithm]
    sigs: dict[str, Algorithm]

    def get(self, name: str) -> Algorithm | None:
        return self.groups.get(name) or self.sigs.get(name)

    def sets(self, role: str) -> dict[str, list[str]]:
        """Named sets, e.g. @mlkem, @hybrids, @classical, @pq, @level1, @all."""
        table = self.groups if role == "group" else self.sigs
        out: dict[str, list[str]] = {"all": list(table)}
        for a in table.values():
            out.setdefault(a.family, []).append(a.name)
            out.setdefault(f"level{a.level}", []).append(a.name)
            out.setdefault({"hybrid": "hybrids"}.get(a.kind, a.kind), []).append(a.name)
            if a.kind in ("pq", "hybrid"):
                out.setdefault("pqc", []).append(a.name)
            out.setdefault(f"provider-{a.provider}", []).append(a.name)
        return out

    def expand(self, role: str, names: list[str], where: str) -> list[str]:
        """Expand @sets and check names; `where` prefixes error messages (file:line field)."""
        table = self.groups if role == "group" else self.sigs
        sets = self.sets(role)
        out: list[str] = []
        for n in names:
            if n.startswith("@"):
                members = sets.get(n[1:])
                if members is None:
                    raise UserError(f"{where}: unknown set '{n}'; sets: {', '.join('@' + s for s in sorted(sets))}")
                out.extend(m for m in members if m not in out)
            elif n in table:
                if n not in out:
                    out.append(n)
            else:
                close = difflib.get_close_matches(n, list(table), n=3, cutoff=0.5)
                folded = [k for k in table if k.lower() == n.lower()]
                hint = f"did you mean {', '.join(folded or close)}?" if (folded or close) else f"known: {', '.join(table)}"
                raise UserError(f"{where}: unknown {'group' if role == 'group' else 'signature algorithm'} '{n}'; {hint}")
        return out


@lru_cache(maxsize=1)
def load_registry(path: Path = REGISTRY_FILE) -> Registry:
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    fam, levels, markers = raw["families"], raw["levels"], raw["markers"]

    def make(entry: dict, role: str) -> Algorithm:
        f = fam[entry["family"]]
        return Algorithm(
            name=entry["name"], role=role, family=entry["family"], level=int(entry["level"]),
            kind=entry["kind"], colour=f["colour"], family_label=f["label"],
            linestyle=levels[int(entry["level"])], marker=markers[entry["kind"]],
            provider=entry.get("provider", "openssl"),
            share=tuple(entry["share"]) if "share" in entry else None,
            pk=entry.get("pk"), sig=entry.get("sig"), sig_max=bool(entry.get("sig_max", False)),
            tls1_2=bool(entry.get("tls1_2", False)),
        )

    return Registry(
        groups={e["name"]: make(e, "group") for e in raw["groups"]},
        sigs={e["name"]: make(e, "sig") for e in raw["sigs"]},
    )
