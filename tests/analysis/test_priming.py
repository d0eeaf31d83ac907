"""The priming connection (the handshake that fetches the session ticket before a resumable
cell's attempts) is no measured server connection, whichever resumable mode the cell runs."""

from __future__ import annotations

import pandas as pd
import pytest

from pqshake.analysis.load import _drop_server_warmups
from pqshake.rows import modes as M


@pytest.mark.parametrize("mode", ["full", "resume", "resume_psk", "0rtt"])
def test_server_drops_warmups_and_the_priming_connection(mode):
    warm, samples = 2, 6
    rows = samples + warm + int(M.resumable(mode))  # as the runner's server logs it
    server = pd.DataFrame({"cell_id": [f"c-{mode}"] * rows, "mode": [mode] * rows, "warmup": [None] * rows,
                           "accepted_mono_ns": list(range(rows))})
    cells = pd.DataFrame({"cell_id": [f"c-{mode}"], "n_warmup": [warm]})
    kept = _drop_server_warmups(server, cells, warmup_default=0)
    assert len(kept) == samples
    assert kept["accepted_mono_ns"].tolist() == list(range(rows - samples, rows))
