"""Experiments: experiment files, plans, runs and their results.

    from pqshake.experiments import load
    df = load("results/demo/20251121T071200-ab12cd")      # every attempt, as a DataFrame
"""

from __future__ import annotations


def load(run_dir, table: str = "samples"):
    """A run's table as a pandas DataFrame ('samples', 'server' or 'cells')."""
    from .rundir import load as _load

    return _load(run_dir, table)


__all__ = ["load"]
