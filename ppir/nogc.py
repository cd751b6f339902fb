"""Pause Python's cyclic garbage collector around work that allocates millions of small,
long-lived objects (expanding, compiling and timing a large schedule).

Each generation-0 collection walks every young container, and full collections walk them all,
so building a graph of a million nodes with the collector on spends most of its time in it
(two thirds, measured on interleaved 1F1B at P=32, M=128).  ppir's IR holds no reference
cycles that need the collector: reference counting frees it.  Nested pauses are fine; the
collector resumes when the outermost one ends, if it was running before.

When it resumes after a pause that made many objects (100,000 containers or more), they are
moved to the oldest generation unscanned (``gc.freeze()`` then ``gc.unfreeze()``, a
constant-time move), since otherwise the first allocation after the pause starts a young
collection that walks every one of them: the whole graph a compile returns, still alive
(0.15-0.2 s of a 2.8 s compile of interleaved 1F1B at P=32, M=256).  They are scanned again
only by a full collection; a cycle among them is freed then.  A small pause leaves the
collector's generations as they are.  Where the process keeps frozen objects of its own
(``gc.get_freeze_count()``, as before a fork), nothing is moved, so that they stay frozen.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from functools import wraps

_depth = 0
_MANY = 100_000  # young objects made in a pause worth moving unscanned (a small one: left as is)


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
            if gc.get_count()[0] >= _MANY and gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def without_gc(fn):
    """Decorator: run ``fn`` with the collector paused."""

    @wraps(fn)
    def wrapper(*args, **kwargs):
        with paused_gc():
            return fn(*args, **kwargs)

    return wrapper
