"""The figure kinds by family (analysis/figures.py composes their KINDS into the registry and
draws them). The backend is set here, before any of them imports pyplot."""

import matplotlib

matplotlib.use("Agg")
