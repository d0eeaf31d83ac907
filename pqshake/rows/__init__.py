"""The rows every layer reads (issue 46): the transports (transports/), the modes (modes/), the
matrix's axes and the swept settings (axes/), the handshake model and a cell's bound
(handshake_model.py, bounds.py), a profile's configured figures (profile.py). The algorithms are
the registry's (pqshake/algorithms.yaml, pqshake/registry.py).

They sit on the ground floor, below the runner (experiments/) and the analysis (analysis/), which
keep their own behaviour keyed by a row's name; tests/test_imports.py enforces that nothing here
imports either of them.
"""
