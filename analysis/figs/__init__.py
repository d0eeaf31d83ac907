"""The figure kinds by family (analysis/figures.py composes their KINDS into the registry and
draws them). The backend is set here, before any of them imports pyplot.

A family is a module here with ORDER, its place among the families, and KINDS, its kinds in
order (name -> base.Kind: what draws it and what it draws). figures.py finds them itself, so a
new family is one module: it takes the next ORDER, so the numbers `--only N` gives the others
stay what they were. The figure table of analysis/README.md is made of the kinds (python -m
pqshake.analysis.figures --write; tests/analysis/test_figure_list.py fails when it is stale)."""

import matplotlib

matplotlib.use("Agg")
