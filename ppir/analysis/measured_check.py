"""The values of a ``[measured]`` table, checked (:func:`ppir.analysis.measured.from_table`):
ppir errors (exit 2) naming the key, the file and the entry that is wrong."""

from __future__ import annotations

import math

from ppir.diagnostics import error

SECTION = "measured"


def numbers(v, key: str, where: str, n: int) -> tuple[float, ...]:
    """``v`` as a tuple of ``n`` non-negative floats; else a ppir error naming what is wrong:
    the count, or the first entry that is not a non-negative number (and its place)."""
    want = f"{where}: {key} must be a list of {n} non-negative finite numbers"
    if not isinstance(v, list):
        raise error("bad-config", f"{want}, got {type(v).__name__} {v!r:.40}")
    if len(v) != n:
        raise error("bad-config", f"{want}, got {len(v)}")
    for i, x in enumerate(v):
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not 0 <= x < math.inf:
            raise error("bad-config", f"{want}, got {x!r:.40} at index {i}")
    return tuple(float(x) for x in v)


def shares(xs: tuple[float, ...], typed, where: str, key="processor_share") -> tuple[float, ...]:
    """``key``, a processor share per stage (``typed``: as the file has it), each a fraction in
    (0, 1]; else a ppir error naming the entry as typed."""
    for i, x in enumerate(xs):
        if not 0 < x <= 1:
            raise error(
                "bad-config",
                f"{where}: {SECTION}.{key} must be fractions in (0, 1], got "
                f"{typed[i]!r} at index {i}",
            )
    return xs
