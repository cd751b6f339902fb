"""Time a schedule for viewing: the estimator's timeline plus the memory analysis.

:func:`time_schedule` is the one place the viz command asks the cost backend for numbers, so the
HTML page and the static charts always show the same step.
"""

from __future__ import annotations

from dataclasses import dataclass

from ppir.analysis.config import CostConfig
from ppir.analysis.estimate import Estimate, estimate
from ppir.analysis.memory import MemoryReport, analyze_memory
from ppir.ir import Schedule
from ppir.passes import LowerComms


@dataclass(frozen=True)
class Timed:
    """A lowered schedule, its estimate and its memory report (same ranks, same op order)."""

    schedule: Schedule
    estimate: Estimate
    memory: MemoryReport


def time_schedule(
    schedule: Schedule, config: CostConfig | None = None, progress: str = "fifo"
) -> Timed:
    """Lower ``schedule`` if it is compute-only (lockstep), estimate it under ``config`` and
    ``progress``, and analyse its activation memory with the config's model.  Raises the
    estimator's ppir errors (exit 1 for a deadlocking schedule, exit 2 for a bad config)."""
    cfg = config or CostConfig()
    lowered = schedule if schedule.is_lowered else LowerComms().apply(schedule)
    est = estimate(lowered, cfg, progress=progress, memory=False)
    mem = analyze_memory(lowered, cfg.model, recompute=cfg.recompute)
    return Timed(lowered, est, mem)
