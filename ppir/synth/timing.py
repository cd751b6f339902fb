"""Compute-graph timing of a schedule's items: the ASAP timeline with no communication at all.

:func:`item_asap` is :func:`ppir.analysis.order.asap_finish` one level up: one node per compute
*item* (an action or a whole :class:`~ppir.ir.Overlap` step), so an overlapped step can be given its
own cost.  It is the ideal a lowering can reach; the estimator's figure for the lowered program
is never below it, and the difference is waiting that the communication placement adds.
Linear in the number of actions.  Raises :class:`ppir.analysis.order.OrderCycle` on a cyclic order.
"""

from __future__ import annotations

from collections import deque
from fractions import Fraction

from ppir.analysis.order import ComputeIndex, OrderCycle
from ppir.ir import OpKind, Schedule, item_actions

Costs = dict[OpKind, Fraction]


def item_asap(
    s: Schedule, costs: Costs, fb_ratio: Fraction | None = None
) -> list[list[tuple[Fraction, Fraction]]]:
    """Per rank, (start, finish) of every compute item.  ``costs`` are per op of one chunk;
    an Overlap costs the sum of its parts times ``fb_ratio`` (default 1)."""
    idx = ComputeIndex.build(s)
    items = [s.compute_items(r) for r in range(s.ranks)]
    item_of: dict[tuple[int, int], tuple[int, int]] = {}
    for r, row in enumerate(items):
        k = 0
        for j, it in enumerate(row):
            for _ in item_actions(it):
                item_of[(r, k)] = (r, j)
                k += 1
    indeg: dict[tuple[int, int], int] = {}
    succs: dict[tuple[int, int], list[tuple[int, int]]] = {}
    dur: dict[tuple[int, int], Fraction] = {}
    for r, row in enumerate(items):
        k = 0
        for j, it in enumerate(row):
            acts = item_actions(it)
            preds = {(r, j - 1)} if j else set()
            for a in acts:
                preds.update(item_of[p] for p in idx.data_preds(a, s.stages))
                k += 1
            preds.discard((r, j))
            total = sum((Fraction(costs[a.kind]) for a in acts), Fraction(0))
            dur[(r, j)] = total * (fb_ratio if fb_ratio is not None and len(acts) > 1 else 1)
            indeg[(r, j)] = len(preds)
            for p in preds:
                succs.setdefault(p, []).append((r, j))
    start = {n: Fraction(0) for n in indeg}
    out = [[(Fraction(0), Fraction(0))] * len(row) for row in items]
    ready = deque(n for n, d in indeg.items() if d == 0)
    done = 0
    while ready:
        n = ready.popleft()
        done += 1
        end = start[n] + dur[n]
        out[n[0]][n[1]] = (start[n], end)
        for m in succs.get(n, ()):
            start[m] = max(start[m], end)
            indeg[m] -= 1
            if indeg[m] == 0:
                ready.append(m)
    if done != len(indeg):
        raise OrderCycle([n for n, d in indeg.items() if d > 0])
    return out


def idle_per_rank(timeline: list[list[tuple[Fraction, Fraction]]]) -> list[Fraction]:
    """Step-based bubble of each rank: the step's end minus the rank's busy time."""
    step = max((row[-1][1] for row in timeline if row), default=Fraction(0))
    return [step - sum((b - a for a, b in row), Fraction(0)) for row in timeline]
