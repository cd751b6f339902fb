"""Check: gradient reductions across data-parallel replicas (``REDUCE_GRAD``, :class:`Reduce`).

A program need not place its reductions (the plan then puts them after each stage's last
backward, :mod:`ppir.ir.reduce`); one that places any must place them all, every stage
reduced exactly once per step on the rank that holds it, after every B or W of that stage on
its rank (:func:`ppir.ir.deps.reduce_inputs`).

Kinds
-----
``reduce-wrong-rank``  a stage's reduce on a rank that does not hold the stage (or no such stage);
``duplicate-reduce``   a stage reduced twice;
``missing-reduce``     a stage never reduced while others are (its replicas would drift apart);
``early-reduce``       a reduce before a B or W of its stage (those gradients would be left out).

Deadlock freedom needs nothing more: a reduce is posted asynchronously and waited for only at
the end of the step, so it adds no wait-for edge to the pipeline's program; and every replica
runs the same program, so the collectives of one data-parallel group are issued in one order
on all its members, on a communicator of their own.  Linear in the number of items.
"""

from __future__ import annotations

from ppir.diagnostics import Diagnostic, Note
from ppir.ir import Reduce, deps, item_actions
from ppir.ir.graph import REDUCE, ProgramGraph


def check_reduces(g: ProgramGraph) -> list[Diagnostic]:
    if REDUCE not in g.kind:  # every finding names a reduce, or needs one to exist
        return []
    s = g.schedule
    where: dict[int, tuple[int, int]] = {}  # stage -> (rank, item) of its first reduce
    out: list[Diagnostic] = []
    any_reduce = False
    last_of: dict[int, tuple[int, int, object]] = {}  # stage -> (rank, item, action) last B/W
    for r, prog in enumerate(s.programs):
        last: dict[int, tuple[int, object]] = {}  # stage -> last (item, action) writing grads
        for i, it in enumerate(prog):
            for a in item_actions(it):
                if a.kind in deps.WEIGHT_GRAD:
                    last[a.stage] = (i, a)
        for st, (i, a) in last.items():
            if 0 <= st < s.stages and s.placement[st] == r:
                last_of[st] = (r, i, a)
        for i, it in enumerate(prog):
            if not isinstance(it, Reduce):
                continue
            any_reduce = True
            st = it.stage
            if not 0 <= st < s.stages or s.placement[st] != r:
                holder = (
                    f"stage {st} runs on rank {s.placement[st]}"
                    if 0 <= st < s.stages
                    else f"there is no stage {st} (0..{s.stages - 1})"
                )
                out.append(
                    Diagnostic(
                        "reduce-wrong-rank", f"{it} on rank {r}, but {holder}", g.item_span(r, i)
                    )
                )
                continue
            if st in where:
                r0, i0 = where[st]
                out.append(
                    Diagnostic(
                        "duplicate-reduce",
                        f"stage {st} is reduced twice in one step (rank {r}, steps {i0} and {i})",
                        g.item_span(r, i),
                        notes=(Note("first reduced here", g.item_span(r0, i0)),),
                    )
                )
                continue
            where[st] = (r, i)
            if st in last and last[st][0] > i:
                k, a = last[st]
                out.append(
                    Diagnostic(
                        "early-reduce",
                        f"{it} comes before {a}, whose weight gradients it must reduce",
                        g.item_span(r, i),
                        notes=(Note(f"{a} is here", g.item_span(r, k)),),
                        hints=(f"move {it} after the last B or W of stage {st}",),
                    )
                )
    if any_reduce:
        for st in range(s.stages):
            if st not in where:
                r, i, a = last_of.get(st, (None, None, None))
                out.append(
                    Diagnostic(
                        "missing-reduce",
                        f"stage {st} (rank {s.placement[st]}) is never reduced, but other stages "
                        "are: its replicas would train apart",
                        g.item_span(r, i) if r is not None else None,
                        hints=(
                            f"add {Reduce(st)} after "
                            + (f"{a}, the stage's last B or W" if a else "the stage's last B or W"),
                        ),
                    )
                )
    return out
