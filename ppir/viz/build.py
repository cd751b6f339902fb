"""Time a schedule for viewing: the compiled program's estimate plus its memory analysis.

:func:`time_schedule` compiles through the one pipeline (:func:`ppir.compile`), so the HTML page
and the static charts show the program and the step that ``ppir compile`` reports and
``ppir launch`` runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from ppir.analysis.config import CostConfig
from ppir.analysis.estimate import Estimate
from ppir.analysis.memory import MemoryReport
from ppir.ir import Schedule
from ppir.pipeline import Compiled, compile


@dataclass(frozen=True)
class Timed:
    """A lowered schedule, its estimate and its memory report (same ranks, same op order)."""

    schedule: Schedule
    estimate: Estimate
    memory: MemoryReport


def time_schedule(
    schedule: Schedule | Compiled, config: CostConfig | None = None, progress: str = "fifo"
) -> Timed:
    """Compile ``schedule`` (unless it is compiled already) under ``config`` and ``progress``
    and time it.  Raises ppir errors (exit 1 for a program that does not verify, exit 2 for a
    bad config)."""

    c = (
        schedule
        if isinstance(schedule, Compiled)
        else compile(schedule, costs=config, progress=progress)
    )
    c.check()  # the verification's errors, or the ranks an unverified program leaves stuck
    return Timed(c.program, c.estimate, c.memory)
