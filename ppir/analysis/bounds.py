"""Lower bounds on a schedule's step time read off its programs, without building a graph.

:func:`program_bound` is what ``ppir tune`` compares with the best compiled step times before it
builds an instance's graph; it never exceeds the dependency bound (the compute graph timed with
the same costs, :mod:`ppir.pipeline`), which no lowering beats (tests/test_tune_search.py).
"""

from __future__ import annotations

from collections import Counter

from ppir.ir import Action, OpKind, deps
from ppir.ir.types import item_actions


def program_bound(s, costs, summary: ProgramSummary | None = None) -> int | float:
    """A lower bound on the step time of any lowering of compute-only program ``s`` (ticks),
    read off its program without a graph: free messages, and either (a) a rank's work after the
    forwards that must precede its earliest op (those of the stages before its first stage in
    that stage's pipeline), or (b) one stage's forwards and backwards (B, or I when the
    backward is split) between the forwards before it and the input-gradient chain after it,
    both within its pipeline.  Overlapped steps count as ``costs`` time them, and (b) is
    skipped when they run faster than their parts.  ``summary``: ``ProgramSummary(s)``, which
    serves every ``costs`` (tune bounds one program under several)."""
    sm = summary or ProgramSummary(s)
    op = costs.op
    if costs.late_w:  # a W may cost its deferred time (the timeline's rule): take the cheaper
        op = [{**row, OpKind.W: min(row[OpKind.W], late)} for row, late in zip(op, costs.late_w)]
    F = [op[st][OpKind.F] for st in range(s.stages)]
    fill = [0] * s.stages  # fill[st]: the forwards of the stages before st in its pipeline
    for st, prev in enumerate(sm.feeds):  # a stage's feeder comes before it (deps' numbering)
        if prev is not None:
            fill[st] = fill[prev] + F[prev]
    best = 0
    for r in range(s.ranks):
        busy = sum(n * op[st][k] for (st, k), n in sm.singles[r].items())
        for parts, n in sm.overlaps[r].items():
            busy += n * costs.overlap_time(sum(op[st][k] for st, k in parts))
        start = min((fill[st] for st in s.stages_of_rank[r]), default=0)
        best = max(best, start + busy)
    if costs.overlap is not None and costs.overlap < 1:
        return best
    cheapest = [
        min((op[st][k] for k in ops if k in deps.BACKWARD), default=0)
        for st, ops in enumerate(sm.stage_ops)
    ]
    drain = [0] * s.stages  # drain[st]: the gradient chain after st's backward, in its pipeline
    for st, c in enumerate(sm.grad_to):  # a stage's gradient goes to an earlier stage
        if c is not None:
            drain[st] = drain[c] + cheapest[c]
        work = sum(n * op[st][k] for k, n in sm.stage_ops[st].items() if k is not OpKind.W)
        best = max(best, fill[st] + work + drain[st])
    return best


class ProgramSummary:
    """What :func:`program_bound` reads off a compute-only program, for any costs: per rank,
    how many times it runs each (stage, kind) alone and each overlapped step's parts; per
    stage, how many ops of each kind it runs, the stage whose forward feeds it and the stage
    its input gradient goes to (None at a pipeline's start; :func:`ppir.ir.deps.inputs`)."""

    def __init__(self, s):
        S, pl = s.stages, s.pipelines
        self.feeds: list = [None] * S
        self.grad_to: list = [None] * S
        for st in range(S):
            for p in deps.inputs(Action(st, OpKind.F, 0), S, pl):
                self.feeds[st] = p.stage
            for p in deps.inputs(Action(st, OpKind.B, 0), S, pl):
                if p.stage != st:  # B(st) consumes the backward of the stage after it
                    self.grad_to[p.stage] = st
        self.singles: list[Counter] = []
        self.overlaps: list[Counter] = []
        self.stage_ops = [Counter() for _ in range(s.stages)]
        for r in range(s.ranks):
            items = s.compute_items(r)
            singles = Counter([(a.stage, a.kind) for a in items if a.__class__ is Action])
            overlaps = Counter()
            if sum(singles.values()) == len(items):  # no overlapped step: keys in item order
                for (st, k), n in singles.items():
                    self.stage_ops[st][k] += n
            else:
                singles = Counter()
                for it in items:
                    keys = tuple((a.stage, a.kind) for a in item_actions(it))
                    if len(keys) > 1:
                        overlaps[keys] += 1
                    else:
                        singles[keys[0]] += 1
                    for st, k in keys:
                        self.stage_ops[st][k] += 1
            self.singles.append(singles)
            self.overlaps.append(overlaps)
