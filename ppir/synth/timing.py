"""Compute-graph timing of a schedule's items: the timeline of its compute-only graph with no
communication at all (:mod:`ppir.analysis.timeline`), with per-kind costs given directly.

It is the ideal a lowering can reach; the estimator's figure for the lowered program is never
below it, and the difference is waiting that the communication placement adds.  Linear in the
number of actions.  Raises a ppir error (exit 1) on a cyclic order.
"""

from __future__ import annotations

from fractions import Fraction

from ppir.analysis.costs import Costs
from ppir.analysis.timeline import run
from ppir.diagnostics import EXIT_INVALID, error
from ppir.ir import OpKind, Schedule
from ppir.ir.graph import build_graph

KindCosts = dict[OpKind, Fraction]


def item_asap(
    s: Schedule, costs: KindCosts, fb_ratio: Fraction | None = None
) -> list[list[tuple[Fraction, Fraction]]]:
    """Per rank, (start, finish) of every compute item.  ``costs`` are per op of one chunk;
    an Overlap costs the sum of its parts times ``fb_ratio`` (default 1)."""
    per_stage = {k: Fraction(costs[k]) for k in costs}
    c = Costs(tuple(dict(per_stage) for _ in range(s.stages)), overlap=fb_ratio)
    g = build_graph(s.compute_only())
    tl = run(g, c)
    if not tl.complete:
        raise error(
            "order-cycle", f"{s.name}: the compute order has a cycle", exit_code=EXIT_INVALID
        )
    return [
        [(Fraction(tl.start[v]), Fraction(tl.finish[v])) for v in order] for order in g.rank_nodes
    ]


def idle_per_rank(timeline: list[list[tuple[Fraction, Fraction]]]) -> list[Fraction]:
    """Step-based bubble of each rank: the step's end minus the rank's busy time."""
    step = max((row[-1][1] for row in timeline if row), default=Fraction(0))
    return [step - sum((b - a for a, b in row), Fraction(0)) for row in timeline]
