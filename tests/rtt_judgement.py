"""How the tests judge a measured RTT on a busy or slow machine (one implementation for the
fidelity suite, the side-by-side runs and the Mininet chain)."""

from __future__ import annotations

import numpy as np


# The fast end of the probes is their 10th percentile, not the fastest one: inside user-mode Linux
# a few probes carry wild stamps (a fastest "RTT" of 17.6 ms, even -36 ms, for a 40 ms link whose
# median read 43 ms), and one such probe must not decide the judgement.
FAST_QUANTILE = 0.1


def fast_ns(r: dict) -> float:
    """The fast end of a measurement's probes: FAST_QUANTILE of samples_ns, else min_ns."""
    s = r.get("samples_ns")
    return float(np.quantile(np.array(s, dtype=float), FAST_QUANTILE)) if s else float(r["min_ns"])


def rtt_problems(r: dict, configured: float, tol: float | None = None) -> list[str]:
    """What is wrong with a jitter-free link's measured RTT (check.measure_rtt's result), judged
    so that a busy machine does not fail a correct emulator while a wrong delay fails (a 10 %
    error of a 20 ms RTT is 2 ms; the tolerance is max(2 %, 0.3 ms), pqshake net check's).

    On an honest clock a busy machine can only make probes late (an emulator holding a frame past
    its due time, a probe or reflector scheduled late, user-mode Linux's timers firing late),
    never early, while a wrong delay moves every probe. So where the fast end of the probes
    (fast_ns) is not faster than the link allows:
    - the median is judged from below (nothing of the machine's makes it early);
    - from above, the fast end is judged: the median's excess over it is the machine's
      scheduling noise (a jitter-free link adds no spread of its own; reported), the fast end
      must be within the tolerance. That fails a correct link only when 90 % of the probes were
      held up by more than the tolerance: if each escapes with probability 30 % or more, under
      3.9e-7 for 100 probes and 2.5e-12 for 200 (binomial).
    A fast end faster than the link allows means the stamps themselves scatter both ways: there
    the median is judged both ways, as before.
    `tol`: another tolerance (ns) where the caller's check has its own (a chain's sum).
    """
    tol = max(0.02 * configured, 0.3e6) if tol is None else tol
    p50, fast = r["p50_ns"], fast_ns(r)
    text = (f"p50 {p50 / 1e6:.3f} ms (fast end {fast / 1e6:.3f} ms, fastest {r['min_ns'] / 1e6:.3f} ms of "
            f"{r['received']}) vs {configured / 1e6} ms +- {tol / 1e6} ms")
    if fast < configured - tol:  # two-sided stamps
        return [] if abs(p50 - configured) <= tol else [text]
    return [] if p50 >= configured - tol and fast <= configured + tol else [text]
