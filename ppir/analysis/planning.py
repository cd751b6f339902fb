"""The cost model as a planner: the costs and the step-time function that passes planning
communication (``ppir.passes.overlap.overlap_best``) use, from one :class:`CostConfig`.

Planning and estimating share :func:`~.tables.build_tables` and :func:`~.simulate.simulate`, so
the lowering is chosen by the numbers ``ppir compile --backend cost`` then reports.  Two
approximations in the plan (not in the choice, which times each candidate with the estimator):
an overlapped F&B step is planned as its parts' sum (``costs.FB`` is ignored), and an op that
costs nothing is planned as taking a sliver of time.
"""

from __future__ import annotations

from collections.abc import Callable

from ppir.analysis.config import CostConfig
from ppir.analysis.order import PlanCosts
from ppir.analysis.simulate import simulate
from ppir.analysis.tables import build_tables
from ppir.ir import Schedule


def planner(
    schedule: Schedule, cfg: CostConfig, progress: str = "fifo"
) -> tuple[PlanCosts, Callable[[Schedule], float]]:
    """(op and transfer costs in the tables' ticks, a lowered schedule -> step time in ticks)."""
    tables = build_tables(schedule, cfg)
    op = [dict(row) for row in tables.op]
    link = [[t for t, _ in row] for row in tables.link]
    if any(d <= 0 for row in op for d in row.values()):
        # Planning needs positive durations: an op that costs nothing is planned as taking a
        # sliver of time (half a tick in exact mode, where everything else doubles).
        if tables.exact:
            op = [{k: 2 * d or 1 for k, d in row.items()} for row in op]
            link = [[2 * t for t in row] for row in link]
        else:
            tiny = min((d for row in op for d in row.values() if d > 0), default=1.0) * 1e-6
            op = [{k: d or tiny for k, d in row.items()} for row in op]
    costs = PlanCosts(tuple(op), tuple(tuple(row) for row in link))

    def step_time(lowered: Schedule) -> float:
        return max(simulate(lowered, tables, progress).finish, default=0)

    return costs, step_time
