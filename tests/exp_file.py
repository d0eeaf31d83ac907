"""The text of a small experiment file, for the tests that run one for real (netns, Slurm, the
container, rootless): each names its own cells; the layout is written once, here."""

from __future__ import annotations


def _flow(m: dict) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in m.items()) + "}"


def experiment_yaml(name: str, *, groups: list[str], sigs: list[str], profiles: list[dict], samples: int | str,
                    warmup: int, seed: int, backend: str = "userspace", **more) -> str:
    """YAML of an experiment: `profiles` one mapping each (written as a flow mapping), `more` further
    top-level keys (e.g. order="sequential"), written before the seed."""
    lines = [f"name: {name}", f"groups: [{', '.join(groups)}]", f"sigs: [{', '.join(sigs)}]", "profiles:",
             *(f"  - {_flow(p)}" for p in profiles),
             f"samples: {samples}", f"warmup: {warmup}", f"backend: {backend}",
             *(f"{k}: {v}" for k, v in more.items()), f"seed: {seed}"]
    return "\n".join(lines) + "\n"
