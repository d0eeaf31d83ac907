"""A profile's configured figures as flat numbers, as every layer reads them: the transports' MTU
checks, the plan's prices, the cell record's `configured` member, the validity verdict. A profile
here is anything with emulation/profiles' Profile's attributes (mtu, up, down, tcp)."""

from __future__ import annotations

from typing import Any


def profile_figures(p: Any) -> dict[str, Any]:
    """Configured figures of a profile as flat numbers: rtt_ns, per direction (up = client ->
    server, down = server -> client) delay_ns, jitter_ns, rate_bps (0 = unlimited), loss
    (expected fraction), and mtu."""
    out: dict[str, Any] = {"mtu": int(getattr(p, "mtu", 1500) or 1500)}
    for key in ("up", "down"):
        link = getattr(p, key)
        out[f"delay_ns_{key}"] = int(link.delay_ns)
        out[f"jitter_ns_{key}"] = int(link.jitter_ns)
        out[f"rate_bps_{key}"] = int(link.rate_bps or 0)
        loss = link.expected_loss() if hasattr(link, "expected_loss") else link.loss
        out[f"loss_{key}"] = float(loss or 0.0)
    out["rtt_ns"] = out["delay_ns_up"] + out["delay_ns_down"]
    tcp = getattr(p, "tcp", None)
    for role in ("client", "server"):  # 0 = the kernel's default initial window
        out[f"initcwnd_{role}"] = int((tcp.window("initcwnd", role) if tcp is not None else None) or 0)
    return out


# The RTT probe's payload (emulation/check.py sends it; the analysis takes its serialization off
# the measured RTT).
RTT_PROBE_PAYLOAD = 64


def probe_serialization_ns(size: int, rate_bps: float, overhead: int = 0) -> float:
    """Time a UDP probe of `size` payload bytes takes at rate_bps (Ethernet+IP+UDP headers +
    overhead counted, like the emulator); 0 on an unlimited link."""
    return (size + 28 + 14 + overhead) * 8 / rate_bps * 1e9 if rate_bps else 0.0
