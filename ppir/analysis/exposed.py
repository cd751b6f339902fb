"""Exposed communication: the part of a rank's idle time that its own traffic explains.

A rank's traffic is each message it sends or receives while on the wire and each of its
gradient reductions (a ``REDUCE_GRAD`` node: the data-parallel all-reduce of a stage's
gradients, which runs beside the rank's compute).  Its *exposed* communication is the union of
those intervals minus its compute intervals: :func:`exposed_spans` gives it interval by interval
(what the charts draw as comm bars) and ``Estimate.per_rank[r].exposed_comm`` is their sum.
"""

from __future__ import annotations

from ppir.analysis.timeline import Timeline
from ppir.ir.graph import COMPUTE, REDUCE


def reduction_spans(tl: Timeline) -> list[tuple]:
    """Every gradient reduction of ``tl``'s program as (rank, stage, start, end) in ticks, in
    node order (a rank's in program order)."""
    g = tl.graph
    kind = g.kind
    if REDUCE not in kind:
        return []
    progs = g.schedule.programs
    return [
        (g.rank[v], progs[g.rank[v]][g.item[v]].stage, tl.start[v], tl.finish[v])
        for v, k in enumerate(kind)
        if k == REDUCE
    ]


def exposed_spans(tl: Timeline, transfers: list[tuple], reductions: list[tuple]) -> list[list]:
    """Per rank, in ticks, the intervals during which one of its messages (``transfers``:
    (src, dst, start, end) in ticks) is on the wire or one of its gradient ``reductions``
    (:func:`reduction_spans`) runs, while its compute stream is idle (:func:`uncovered` by
    its compute intervals)."""
    g = tl.graph
    P = g.schedule.ranks
    spans: list[list] = [[] for _ in range(P)]
    for src, dst, a, b in transfers:
        if b > a:
            spans[src].append((a, b))
            spans[dst].append((a, b))
    for r, _, a, b in reductions:
        if b > a:
            spans[r].append((a, b))
    kind = g.kind
    compute = [  # (none is read when no transfer takes time: free links)
        [(tl.start[v], tl.finish[v]) for v in order if kind[v] == COMPUTE]
        for order in (g.rank_nodes if any(spans) else [[]] * P)
    ]
    return [uncovered(row, compute[r]) for r, row in enumerate(spans)]


def uncovered(spans: list[tuple], cover: list[tuple]) -> list[tuple]:
    """The parts of the union of ``spans`` ((start, end) pairs, any order) that no interval of
    ``cover`` ((start, end) pairs sorted by start, overlapping or not) covers, in time order:
    a rank's traffic while it does not compute, its exposed communication.  Linear after
    sorting ``spans``."""
    merged: list[list] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    out: list[tuple] = []
    k = 0
    for a, b in merged:
        while k < len(cover) and cover[k][1] <= a:
            k += 1
        t, j = a, k
        while j < len(cover) and cover[j][0] < b:
            if cover[j][0] > t:
                out.append((t, cover[j][0]))
            t = max(t, cover[j][1])
            j += 1
        if t < b:
            out.append((t, b))
    return out
