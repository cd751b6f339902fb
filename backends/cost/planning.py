"""The cost model as a planner: the costs and the step-time function that passes planning
communication (``ppir.passes.overlap.overlap_best``) use, from one :class:`CostConfig`.

Planning and estimating share :func:`~.tables.build_tables` and :func:`~.simulate.simulate`, so
the lowering is chosen by exactly the numbers ``ppir compile --backend cost`` then reports.
"""

from __future__ import annotations

from collections.abc import Callable

from ppir.ir import Schedule
from ppir.order import PlanCosts

from .config import CostConfig
from .simulate import simulate
from .tables import build_tables


def planner(schedule: Schedule, cfg: CostConfig, progress: str = "fifo"
            ) -> tuple[PlanCosts, Callable[[Schedule], float]]:
    """(op and transfer costs in the tables' ticks, a lowered schedule -> step time in ticks)."""
    tables = build_tables(schedule, cfg)
    costs = PlanCosts(tables.op, tuple(tuple(t for t, _ in row) for row in tables.link))

    def step_time(lowered: Schedule) -> float:
        return max(simulate(lowered, tables, progress).finish, default=0)

    return costs, step_time
