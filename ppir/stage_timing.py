"""The stages of :func:`ppir.compile` as they run: a progress hook (:func:`on_stage`) and the
seconds each takes (``Compiled.timings``, on :data:`STAGE_CLOCK`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_ON_STAGE: ContextVar[Callable[[str], None] | None] = ContextVar("ppir_on_stage", default=None)


@contextmanager
def on_stage(callback: Callable[[str], None]) -> Iterator[None]:
    """Within the block, every :func:`compile` calls ``callback(stage)`` as each of its stages
    starts (the keys of :attr:`Compiled.timings`: "input", a pass name, "graph", "verify",
    "timeline"; repeated per candidate): what a progress display shows.  Nothing else
    changes; outside the block compiles call nothing."""
    token = _ON_STAGE.set(callback)
    try:
        yield
    finally:
        _ON_STAGE.reset(token)


#: The clock of ``Compiled.timings`` (seconds); a benchmark may set ``time.process_time``.
STAGE_CLOCK = time.perf_counter


@contextmanager
def timed(timings: dict, stage: str):
    """Time the block as ``stage`` (added to ``timings[stage]``), after calling the hook."""
    hook = _ON_STAGE.get()
    if hook is not None:
        hook(stage)
    clock = STAGE_CLOCK
    t = clock()
    try:
        yield
    finally:
        timings[stage] = timings.get(stage, 0.0) + clock() - t
