"""Writes the synthetic traces of this folder (pqshake makes them itself; none is recorded).

    python3 emulation/profiles/traces/make_traces.py [OUT_DIR]     (default: this folder)

Deterministic (numpy's PCG64 with the seeds below): the same command writes the same bytes.
Every file is in Mahimahi's trace format: one whole number of milliseconds per line, each line
one opportunity to deliver one MTU-sized (1500-byte) packet, the schedule repeating with period =
the last timestamp. Mean rate = lines x 1500 B x 8 / period.

synthetic-constant-12mbit.trace
    One opportunity every millisecond (lines 1..1000, period 1 s): 12 Mbit/s, no bursts.

synthetic-onoff-12mbit-down.trace, synthetic-onoff-12mbit-up.trace (seeds 24001, 24002)
    A Markov-modulated (on/off) Poisson schedule, a crude stand-in for a cellular link whose
    scheduler grants capacity in bursts: "on" periods last an exponential time of mean 150 ms,
    "off" periods (no opportunity at all) an exponential time of mean 50 ms; during "on", the
    opportunities of each millisecond are Poisson with mean 4/3, so the long-run mean is
    0.75 x 4/3 = 1 opportunity per ms. The draw is then corrected to exactly 20 000 opportunities
    in the 20 s period (the missing or extra ones added or removed at random "on" milliseconds),
    so the mean is exactly 12 Mbit/s, the same as the constant trace. Two seeds: the directions
    burst independently.

synthetic-delay-wander.series
    A one-way delay series (lines "TIME_MS DELAY_MS", linearly interpolated, period 10 s): 20 ms,
    rising to 45 ms over 2 s, a 3 s plateau, back to 20 ms over 1 s, and a step to 30 ms for the
    last 2 s. For profiles that need a delay that moves (bufferbloat, a path change).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

PERIOD_MS = 20_000
TARGET = 20_000  # opportunities per period: 1 per ms on average = 12 Mbit/s
ON_MEAN_MS, OFF_MEAN_MS = 150.0, 50.0
ON_RATE = TARGET / PERIOD_MS / (ON_MEAN_MS / (ON_MEAN_MS + OFF_MEAN_MS))  # 4/3 per ms


def constant() -> list[int]:
    return list(range(1, 1001))


def onoff(seed: int) -> list[int]:
    rng = np.random.default_rng(seed)
    on = np.zeros(PERIOD_MS, dtype=bool)
    t, state = 0.0, bool(rng.random() < 0.75)
    while t < PERIOD_MS:
        d = rng.exponential(ON_MEAN_MS if state else OFF_MEAN_MS)
        on[int(t):int(min(PERIOD_MS, t + d))] = state
        t += d
        state = not state
    counts = np.where(on, rng.poisson(ON_RATE, PERIOD_MS), 0)
    on_ms = np.flatnonzero(on)
    diff = TARGET - int(counts.sum())
    while diff > 0:  # too few: add at random "on" milliseconds
        counts[rng.choice(on_ms)] += 1
        diff -= 1
    while diff < 0:  # too many: remove from random milliseconds that have one
        i = rng.choice(np.flatnonzero(counts))
        counts[i] -= 1
        diff += 1
    # the period is the last line: make sure the last millisecond holds an opportunity
    if counts[-1] == 0:
        i = rng.choice(np.flatnonzero(counts[:-1]))
        counts[i] -= 1
        counts[-1] += 1
    ms = np.repeat(np.arange(1, PERIOD_MS + 1), counts)
    return ms.tolist()


def delay_series() -> list[str]:
    return ["0 20", "1000 20", "3000 45", "6000 45", "7000 20", "8000 20", "8000 30", "10000 30"]


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "synthetic-constant-12mbit.trace": constant(),
        "synthetic-onoff-12mbit-down.trace": onoff(24001),
        "synthetic-onoff-12mbit-up.trace": onoff(24002),
    }
    for name, ms in files.items():
        assert len(ms) * 1500 * 8 * 1000 // ms[-1] == 12_000_000, name
        (out / name).write_text("".join(f"{m}\n" for m in ms))
    (out / "synthetic-delay-wander.series").write_text("".join(f"{x}\n" for x in delay_series()))
    for name in [*files, "synthetic-delay-wander.series"]:
        print(out / name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
