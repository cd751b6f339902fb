"""List scheduling: build every rank's compute order by simulating the pipeline.

The zero-bubble paper's heuristic family (Qi et al., ICLR'24, section 3) as one small engine.
Time advances from event to event (op finishes).  Whenever a rank is free it looks at its
*ready* ops and runs the one with the smallest priority key; when none is ready it waits.

Ready ops of rank r at time t (each stage s that r holds keeps per-stage counters, so every
stage runs its forwards and its backwards in microbatch order):

* ``F(s, m)`` for the next forward microbatch m of s, once ``F(s-1, m)`` has finished (s > 0),
  and only if one more chunk activation fits under the rank's memory cap while still leaving one
  free slot for each later local chunk (so that a microbatch in flight can always reach the
  rank's later stages: without this reserve a V placement fills its cap with chunk-0 forwards and
  deadlocks);
* the backward of the next backward microbatch m of s -- ``I`` with ``split`` else ``B`` --
  once ``F(s, m)`` and the backward of ``(s+1, m)`` have finished;
* with ``split``, ``W(s, m)`` for the oldest pending weight pass of each stage.

Memory is counted in chunk activations held per rank: F takes one; B, or W under ``split``,
gives it back (conservative, as the zero-bubble authors' scheduler counts it: an activation
lives until its weight gradient is done).  Ties on the priority key go to the smaller
microbatch, then the lower local chunk, then F < B/I < W.  Costs are positive integers per op
of one chunk.

Contract: the result holds every F and B (or I and W) of every stage and microbatch exactly
once, respects the data dependencies of :func:`ppir.ir.deps.inputs`, and never exceeds a cap
(in program order, which is how :mod:`ppir.analysis.memory` counts).  When no op can ever run (a
cap too small to let the first forward through) :class:`GreedyStuck` says which rank and why.
Complexity O(E · P · v) for E events.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

from ppir.analysis.config import default_op_costs
from ppir.diagnostics import count
from ppir.ir import Action, OpKind, deps

KIND_ORDER = {OpKind.F: 0, OpKind.B: 1, OpKind.I: 1, OpKind.W: 2}


@dataclass(frozen=True)
class Candidate:
    """A ready op as the priority rule sees it.  ``mem`` is the rank's memory before it runs."""

    rank: int
    kind: OpKind
    stage: int
    chunk: int
    mb: int
    mem: int
    time: int


Priority = Callable[[Candidate], int]


@dataclass(frozen=True)
class GreedySpec:
    """What to list-schedule.  ``caps[r]`` is rank r's cap in chunk activations (None: no cap)."""

    ranks: int
    microbatches: int
    placement: tuple[int, ...]
    caps: tuple[int | None, ...]
    split: bool = True
    costs: tuple[tuple[OpKind, int], ...] = field(default_factory=lambda: _default_costs())


def _default_costs() -> tuple[tuple[OpKind, int], ...]:
    """The cost model's default op costs (F=1, B=2, I=1, W=1), as integer ticks."""
    return tuple((OpKind(k), int(c)) for k, c in default_op_costs().items())


class GreedyStuck(Exception):
    """No rank can make progress: ``rank`` waits for memory that only it could free."""

    def __init__(self, rank: int, time: int, message: str):
        super().__init__(message)
        self.rank, self.time = rank, time


def default_priority(c: Candidate) -> int:
    """Zero-bubble order: backward (B/I) first, then forward, weight passes fill the gaps."""
    return 0 if c.kind is OpKind.B or c.kind is OpKind.I else (1 if c.kind is OpKind.F else 2)


def list_schedule(spec: GreedySpec, priority: Priority = default_priority) -> list[list[Action]]:
    """Each rank's compute actions in program order (see the module docstring)."""
    P, M, place = spec.ranks, spec.microbatches, spec.placement
    S = len(place)
    cost = dict(spec.costs)
    back = OpKind.I if spec.split else OpKind.B
    stages_of = [[s for s in range(S) if place[s] == r] for r in range(P)]
    chunk_of = {s: c for r in range(P) for c, s in enumerate(stages_of[r])}
    nf, nb, nw = [0] * S, [0] * S, [0] * S
    mem, free = [0] * P, [0] * P
    out: list[list[Action]] = [[] for _ in range(P)]
    per_stage = 3 if spec.split else 2
    left = per_stage * S * M
    times: list[int] = [0]
    t = 0
    never = 1 << 62

    done: dict[tuple, int] = {}  # (stage, kind, mb) -> finish time

    def inputs_done(s: int, kind: OpKind, m: int) -> bool:
        return all(
            any(done.get((p.stage, k, p.mb), never) <= t for k in p.kinds)
            for p in deps.inputs(Action(s, kind, m), S)
        )

    def ready(r: int) -> list[Candidate]:
        cands = []
        cap = spec.caps[r]
        held = len(stages_of[r])
        for s in stages_of[r]:
            m = nf[s]
            if (
                m < M
                and (cap is None or mem[r] + held - chunk_of[s] <= cap)
                and inputs_done(s, OpKind.F, m)
            ):
                cands.append(Candidate(r, OpKind.F, s, chunk_of[s], m, mem[r], t))
            m = nb[s]
            if m < nf[s] and inputs_done(s, back, m):
                cands.append(Candidate(r, back, s, chunk_of[s], m, mem[r], t))
            if spec.split and nw[s] < nb[s] and inputs_done(s, OpKind.W, nw[s]):
                cands.append(Candidate(r, OpKind.W, s, chunk_of[s], nw[s], mem[r], t))
        return cands

    while left:
        for r in range(P):
            if free[r] > t:
                continue
            cands = ready(r)
            if not cands:
                continue
            c = min(cands, key=lambda c: (priority(c), c.mb, c.chunk, KIND_ORDER[c.kind]))
            end = t + cost[c.kind]
            s, m = c.stage, c.mb
            done[(s, c.kind, m)] = end
            if c.kind is OpKind.F:
                nf[s] += 1
                mem[r] += 1
            elif c.kind is OpKind.W:
                nw[s] += 1
                mem[r] -= 1
            else:
                nb[s] += 1
                if not spec.split:
                    mem[r] -= 1
            out[r].append(Action(s, c.kind, m))
            free[r] = end
            heapq.heappush(times, end)
            left -= 1
        while times and times[0] <= t:
            heapq.heappop(times)
        if not times:
            if left:
                ranks = range(P)
                why = [
                    _stuck_message(r, t, mem[r], spec.caps[r], stages_of[r], nf, M) for r in ranks
                ]
                # the first rank whose cap its next forward cannot fit in, else the fullest
                r = next((r for r in ranks if why[r][1]), min(ranks, key=lambda r: (-mem[r], r)))
                raise GreedyStuck(r, t, why[r][0])
            break
        t = times[0]
    return out


def _stuck_message(
    r: int, t: int, held: int, cap, stages: list, nf: list, M: int
) -> tuple[str, bool]:
    """Why rank ``r`` cannot go on, and whether it is its cap: the forward of its first chunk
    with forwards left needs more slots than the cap (one for itself and one kept free for each
    later chunk of the rank)."""
    left = [c for c, s in enumerate(stages) if nf[s] < M]
    c = left[0] if left else 0
    if left and cap is not None and held + len(stages) - c > cap:
        return (
            f"rank {r} holds {count(held, 'chunk activation')} under its cap of {cap}; a "
            f"forward of its chunk {c} needs {held + len(stages) - c} (one for itself and one "
            f"kept free for each later chunk of the rank), and no op can free one (at time {t})"
        ), True
    return (
        f"rank {r} holds {count(held, 'chunk activation')} and no op can free one (at time {t})"
    ), False
