"""Lower bounds on a schedule's step time read off its programs, without building a graph.

:func:`program_bound` is what ``ppir tune`` compares with the best compiled step times before it
builds an instance's graph; it never exceeds the dependency bound (the compute graph timed with
the same costs, :mod:`ppir.pipeline`), which no lowering beats (tests/test_tune_search.py).
"""

from __future__ import annotations

from itertools import accumulate

from ppir.ir import OpKind
from ppir.ir.types import item_actions


def program_bound(s, costs) -> int | float:
    """A lower bound on the step time of any lowering of compute-only program ``s`` (ticks),
    read off its program without a graph: free messages, and either (a) a rank's work after the
    forwards that must precede its first op (those of every earlier stage), or (b) one stage's
    M forwards and M backwards (B, or I when the backward is split) between the forwards before
    it and the input-gradient chain after it.  Overlapped steps count as ``costs`` time them,
    and (b) is skipped when they run faster than their parts."""
    S = s.stages
    F = [costs.op[st][OpKind.F] for st in range(S)]
    fill = [0, *accumulate(F)]  # fill[st]: the forwards of every stage before st
    split = [False] * S
    best = 0
    for r in range(s.ranks):
        busy = 0
        for it in s.compute_items(r):
            parts = item_actions(it)
            d = sum(costs.op[a.stage][a.kind] for a in parts)
            busy += costs.overlap_time(d) if len(parts) > 1 else d
            for a in parts:
                if a.kind is OpKind.I:
                    split[a.stage] = True
        first = min(s.stages_of_rank[r], default=0)
        best = max(best, fill[first] + busy)
    if costs.overlap is not None and costs.overlap < 1:
        return best
    M = s.microbatches
    back = [costs.op[st][OpKind.I if split[st] else OpKind.B] for st in range(S)]
    drain = 0
    for st in range(S):
        best = max(best, fill[st] + M * (F[st] + back[st]) + drain)
        drain += back[st]
    return best
