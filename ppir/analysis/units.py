"""Human-readable times and sizes shared by every command's output."""

from __future__ import annotations


def fmt_time(x: float, unit: str) -> str:
    """``12.5`` in units, or seconds scaled to s / ms / us."""
    if unit != "s":
        return f"{x:.6g}"
    for scale, suffix in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if abs(x) >= scale or scale == 1e-6:
            return f"{x / scale:.4g} {suffix}"
    return f"{x:g} s"  # pragma: no cover


def fmt_bytes(n: float) -> str:
    for scale, suffix in ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if n >= scale:
            return f"{n / scale:.3g} {suffix}"
    return f"{n:.0f} B"
