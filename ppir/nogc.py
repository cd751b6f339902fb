"""Pause Python's cyclic garbage collector around work that allocates millions of small,
long-lived objects (expanding, compiling and timing a large schedule).

Each generation-0 collection walks every young container, and full collections walk them all,
so building a graph of a million nodes with the collector on spends most of its time in it
(two thirds, measured on interleaved 1F1B at P=32, M=128).  ppir's IR holds no reference
cycles that need the collector: reference counting frees it.  Nested pauses are fine; the
collector resumes when the outermost one ends, if it was running before.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from functools import wraps

_depth = 0


@contextmanager
def paused_gc():
    global _depth
    was = gc.isenabled() if _depth == 0 else False
    _depth += 1
    gc.disable()
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0 and was:
            gc.enable()


def without_gc(fn):
    """Decorator: run ``fn`` with the collector paused."""

    @wraps(fn)
    def wrapper(*args, **kwargs):
        with paused_gc():
            return fn(*args, **kwargs)

    return wrapper
