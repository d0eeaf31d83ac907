"""The one place where the names of the run tables (written by the runner from the C tools'
JSON lines: testbed/timer.c, testbed/server.c, the transports' attempt_json, testbed/core/) meet the
names the statistics use. A rename in the C tools is a one-line fix here.

Left: the column in samples.parquet / server.parquet / cells.parquet. Right: the analysis name.
"""

from __future__ import annotations

from pqshake import results as _R
from pqshake.results import fields as _F
from pqshake.rows import modes as _M
from pqshake.rows import transports as _T
from pqshake.rows.axes import core as _core

# The cell key: one summary row per value of each matrix axis (pqshake/rows/axes/core.py: group,
# sig, profile, mode, transport); repetitions are pooled. Runs from before an axis existed have no
# column: their cells have its row's `before` (transport: tcp).
CELL_KEY = list(_core.KEYS)
AXIS_BEFORE = _core.BEFORE
TRANSPORT_ORDER = _T.ORDER  # the rows' rank (pqshake/rows/transports/)

# The timer's "msgs" member (pqshake/results MSGS_COLUMNS; testbed/README.md, "Message sizes from
# the wire"): msg_<message> bytes (the handshake message with its 4-byte header),
# flight_<flight>_<field> (client1, hrr, client1_retry, server, client2: handshake_bytes, records,
# record_bytes, segments, datagrams, datagram_bytes) and the in-callback TCP_INFO reads' time.
MSG_COLUMNS = {f"msgs_{m}": f"msg_{m}" for m in _R.MSGS_MESSAGES}
FLIGHT_COLUMNS = {f"msgs_flights_{f}_{k}": f"flight_{f}_{k}" for f in _R.MSGS_FLIGHTS for k in _R.MSGS_FLIGHT_FIELDS}
MSGS_OPTIONAL = {**MSG_COLUMNS, **FLIGHT_COLUMNS, "msgs_tcp_info_cb_ns": "msg_tcp_info_cb_ns"}

# The swept settings (pqshake/rows/axes/): every column named with pqshake.results.AXIS_PREFIX
# (axis_chain_depth, ...) in any of the three tables keeps its name; load.py fills those of the
# registry's rows a run lacks.

# --- samples.parquet (client side, one row per timer attempt) -------------------------------
# Columns without which no statistic can be computed.
SAMPLES_REQUIRED = {
    "cell_id": "cell_id",
    **{k: k for k in _core.REQUIRED},  # the matrix axes every run has
    **_F.columns("attempt", required=True),  # warmup, ok, handshake_ns (pqshake/results/fields.yaml)
}
# The matrix axes a run from before them lacks: filled with AXIS_BEFORE (every table).
OPTIONAL_KEY = {k: k for k in AXIS_BEFORE}
# Columns used when present (missing ones become empty and the figure/column that needs them
# says so).
SAMPLES_OPTIONAL = {
    "repetition": "repetition",
    "backend": "backend",
    # The attempt line's members the statistics read (pqshake/results/fields.yaml: their meaning,
    # and the analysis name where it differs, e.g. tcp_bytes_sent -> bytes_up: TCP_INFO at the end
    # of the attempt, client socket, up = client -> server).
    **_F.columns("attempt", required=False),
    # Each transport's own columns (its JSON member, e.g. the timer's quic object; null for the
    # other transports): the rows' sample_columns (pqshake/rows/transports/).
    **_T.columns("samples"),
    **_M.columns("samples"),  # each mode's own (its row's columns: fs0rtt's encapsulation)
    **MSGS_OPTIONAL,  # message sizes and flights (runs from before them: empty)
    **OPTIONAL_KEY,
}

# --- server.parquet (one row per server-side connection) ------------------------------------
SERVER_REQUIRED = {
    **{k: k for k in _core.REQUIRED},
    **_F.columns("conn", required=True),  # ok, handshake_ns -> server_handshake_ns (handshake done - accepted)
}
SERVER_OPTIONAL = {
    "cell_id": "cell_id",
    "repetition": "repetition",
    "warmup": "warmup",
    # The conn line's members the statistics read (pqshake/results/fields.yaml), e.g. cpu_ns ->
    # server_cpu_ns, the server's CPU for the connection.
    **_F.columns("conn", required=False),
    **_T.columns("server"),  # each transport's own (its rows' server_columns)
    **_M.columns("server"),  # each mode's own (fs0rtt's decapsulation and puncture)
    **OPTIONAL_KEY,
}

# --- cells.parquet (one row per cell) -------------------------------------------------------
CELLS_REQUIRED = {
    "cell_id": "cell_id",
    **{k: k for k in _core.REQUIRED},
}
CELLS_OPTIONAL = {
    "repetition": "repetition",
    "status": "status",
    "reason": "reason",
    "verdict": "verdict",  # validity: ok | suspect: <reasons> (experiments/validity.py); absent before it
    "reasons": "reasons",  # the verdict's reasons, a JSON list (format 2; load.py derives it for older runs)
    "n_attempts": "n_attempts",
    "n_ok": "n_ok",
    "n_warmup": "n_warmup",
    "rtt_p50_ns": "rtt_p50_ns",  # achieved RTT (probes), median
    "rtt_p99_ns": "rtt_p99_ns",
    "backend": "backend",
    # configured figures of the profile (experiments/plan.py profile_figures)
    "rtt_ns": "cfg_rtt_ns",
    "delay_ns_up": "cfg_delay_ns_up",
    "delay_ns_down": "cfg_delay_ns_down",
    "jitter_ns_up": "cfg_jitter_ns_up",
    "jitter_ns_down": "cfg_jitter_ns_down",
    "rate_bps_up": "cfg_rate_bps_up",  # 0 = unlimited
    "rate_bps_down": "cfg_rate_bps_down",
    "loss_up": "cfg_loss_up",
    "loss_down": "cfg_loss_down",
    "mtu": "cfg_mtu",
    "initcwnd_client": "cfg_initcwnd_client",  # segments; 0 = the kernel default (runs before these: absent)
    "initcwnd_server": "cfg_initcwnd_server",
    **_T.columns("cells"),  # each transport's settings its cells record (its rows' cell_columns)
    **_M.columns("cells"),  # each mode's (fs0rtt: its key and the server's key after the cell)
    **OPTIONAL_KEY,
}

# --- pqs-speed JSON lines (build/bin/pqs-speed, testbed/speed.c) ----------------------------
SPEED = {
    "type": "type",  # kex | sig | aead | header
    "stack": "stack",  # whose libcrypto (pqs-speed --stacks): absent = openssl, or aws-lc
    "name": "name",
    "op": "op",  # kex: keygen, encaps, decaps (KEMs) or derive (ECDH/FFDH); sig: keygen, sign, verify
    "ok": "ok",
    "median_ns": "median_ns",
    "min_ns": "min_ns",  # the fastest sample: the bound's CPU terms
}

# Profile figures derived from the configured columns (what the x-axes of figures 1-4 use).
#   rtt_ms   configured RTT (delay up + delay down)
#   loss     the larger of the two directions' expected loss fractions (as `pqshake plan` prints)
#   rate_bps the slower direction (0 = unlimited -> inf)
#   mtu      bytes
PROFILE_AXES = ("rtt_ms", "loss", "rate_bps", "mtu", "jitter_ms")


def required_for(table: str) -> dict[str, str]:
    return {"samples": SAMPLES_REQUIRED, "server": SERVER_REQUIRED, "cells": CELLS_REQUIRED}[table]


def optional_for(table: str) -> dict[str, str]:
    return {"samples": SAMPLES_OPTIONAL, "server": SERVER_OPTIONAL, "cells": CELLS_OPTIONAL}[table]
