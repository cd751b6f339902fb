"""The timeline: when every node of a program's graph happens, under given costs.  The one
engine behind the estimator, the critical path, the verifier's deadlock check and the passes
that plan with times (lower-comms).

Semantics (max-plus over the wait-for graph, :mod:`ppir.ir.graph`)
    A node starts when every wait-for predecessor has finished (time 0 for none) and lasts its
    duration: a compute node its op's (an overlapped step as one op, or each part under
    ``relaxed`` progress, scaled like the whole; a W that does not come right after its own I
    in the rank's compute order lasts ``costs.late_w`` of its stage when measured), a message
    node the transfer time of its link (its channel edge makes it start after the previous
    transfer on the link ends), every other
    node zero (a ``reduce`` node lasts its stage's data-parallel reduction, ``costs.reduce``;
    nothing waits for it, so it lengthens the step only by what outlasts the rank's program;
    a ``post`` of a ``fifo`` graph lasts ``costs.post``, the time the rank takes to post a
    group, 0 unless measured).  A post is when a group is posted, a done when it completes, a
    message when the pair's transfer runs.  In a compute-only graph the data edges are the
    waits, and an edge between ranks adds the transfer time of the link.

    Nodes run in an order compatible with the edges (Kahn's algorithm over integer lists), so
    every node and edge is handled once: linear.  With all durations zero the same run is the
    untimed rendezvous semantics; nodes that never run are exactly those on or behind a cycle
    of the wait-for graph (a deadlock) or waiting on an op without a partner.

Shared processors (``costs.processors = C``)
    The ranks' work runs on ``C`` processors shared fairly (processor sharing, as an
    operating system shares ``C`` CPU cores among more busy processes; a waiting rank uses
    none): every node with a duration -- compute, and also a message's transfer and a
    reduction, which gloo performs on the same CPU cores (it copies each message through the
    loopback) -- is work, and while ``k`` of them run at once each progresses at rate
    ``min(1, C / k)``, so a node lasts its work stretched by its company.  The graph and its
    edges are the same (in a compute-only graph a transfer is the delay on a data edge, as
    above, and uses no processor).  The run is event-driven over the same integer lists (a heap of
    releases and a heap of *virtual* finish times: the nodes in progress all advance at the
    same rate, so the one with the least virtual finish ends first), ``O(n log n)``, in
    floats.  Without ``processors`` (the default) every rank has a processor of its own and
    messages move on links of their own: the plain run above.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, replace

from ppir.analysis.costs import Costs
from ppir.diagnostics import EXIT_INVALID, error, rank_list
from ppir.ir import OpKind, deps
from ppir.ir.graph import _SHIFT, COMPUTE, DATA, MESSAGE, POST, REDUCE, ProgramGraph


@dataclass
class Timeline:
    """Start and finish of every node (ticks of ``costs``); ``ran[v]`` is 1 for every node
    that happened.  ``complete`` when all did."""

    graph: ProgramGraph
    costs: Costs | None
    duration: list
    start: list
    finish: list
    ran: bytearray
    count: int

    @property
    def complete(self) -> bool:
        return self.count == self.graph.n

    @property
    def makespan(self):
        """When the last node finishes (0 for an empty program)."""
        return max(self.finish, default=0)

    def critical_path(self) -> list[int]:
        """The nodes of a longest path, first to last, ending at the node that finishes last:
        each node's predecessor is the first one (in construction order) whose finish (plus
        the transfer time in a compute-only graph) equals its start.  Its length is the
        makespan."""
        g, start, finish = self.graph, self.start, self.finish
        if not g.n or not self.complete:
            return []
        last = max(finish)
        ends = [x for x, f in enumerate(finish) if f == last]
        low = min(g.rank[x] for x in ends)
        v = max(x for x in ends if g.rank[x] == low)  # the lowest rank, its last node
        path = [v]
        data = not g.lowered
        while True:
            t, nxt = start[v], -1
            for e in g.before[v]:
                u = e >> _SHIFT
                if finish[u] == t:
                    nxt = u
                    break
            if nxt < 0 and data:
                for u in g.data_in[v]:
                    if finish[u] + self._delay(u, v) == t:
                        nxt = u
                        break
            if nxt < 0:
                break
            path.append(nxt)
            v = nxt
        path.reverse()
        return path

    def _delay(self, u: int, v: int):
        g = self.graph
        return self.costs.link(g.rank[u], g.rank[v]) if self.costs else 0


def durations(g: ProgramGraph, costs: Costs) -> list:
    """The duration of every node of ``g`` under ``costs`` (see the module docstring)."""
    dur = [0] * g.n
    op, ops, kind, lo, hi = costs.op, g.ops, g.kind, g.lo, g.hi
    overlap = costs.overlap
    relaxed_parts = g.progress == "relaxed" and g.lowered
    post = costs.post if g.progress == "fifo" else 0  # a relaxed unit is a part of a group
    for v in range(g.n):
        k = kind[v]
        if k == COMPUTE:
            a, b = lo[v], hi[v]
            if b - a == 1:
                x = ops[a]
                d = op[x.stage][x.kind]
                if overlap is not None and relaxed_parts and _in_overlap(g, v):
                    d = costs.overlap_time(d)
            else:
                d = sum(op[x.stage][x.kind] for x in ops[a:b])
                if overlap is not None:
                    d = costs.overlap_time(d)
            dur[v] = d
        elif k == MESSAGE:
            dur[v] = costs.link(g.op_rank[lo[v]], g.op_rank[hi[v]])
        elif k == REDUCE and costs.reduce:
            dur[v] = costs.reduce[g.schedule.programs[g.rank[v]][g.item[v]].stage]
        elif k == POST and post and hi[v] > lo[v]:
            dur[v] = post
    if costs.late_w:
        _late_weights(g, costs.late_w, dur)
    return dur


def _late_weights(g: ProgramGraph, late: tuple, dur: list) -> None:
    """A W that does not come right after its own I (what it consumes: :func:`deps.inputs`) in
    its rank's compute order lasts ``late[stage]`` (:attr:`Costs.late_w`); the others keep the
    W cost."""
    ops, kind, lo, hi = g.ops, g.kind, g.lo, g.hi
    S, pipelines = g.schedule.stages, g.schedule.pipelines
    for order in g.rank_nodes:
        prev = None
        for v in order:
            if kind[v] != COMPUTE:
                continue
            a = ops[lo[v]] if hi[v] - lo[v] == 1 else None
            if a is not None and a.kind is OpKind.W and not _made_by(prev, a, S, pipelines):
                dur[v] = late[a.stage]
            prev = ops[hi[v] - 1]


def _made_by(prev, a, num_stages: int, pipelines: int) -> bool:
    """``prev`` (an action or None) is an op whose output ``a`` consumes."""
    return prev is not None and any(
        prev.kind in p.kinds and prev.stage == p.stage and prev.mb == p.mb
        for p in deps.inputs(a, num_stages, pipelines)
    )


def _in_overlap(g: ProgramGraph, v: int) -> bool:
    a, b = g.item_range(g.rank[v], g.item[v])
    return b - a > 1


def run(g: ProgramGraph, costs: Costs | None = None) -> Timeline:
    """Time every node of ``g`` (all durations zero when ``costs`` is None: the untimed
    rendezvous run the verifier uses); on shared processors when ``costs.processors`` is set
    (see the module docstring)."""
    n = g.n
    dur = durations(g, costs) if costs is not None else [0] * n
    indeg = _in_degrees(g)
    if costs is not None and costs.processors:
        return _run_shared(g, costs, dur, indeg, costs.processors)
    start = [0] * n
    finish = [0] * n
    ran = bytearray(n)
    stack = [v for v in range(n - 1, -1, -1) if not indeg[v]]
    count = 0
    pop = stack.pop
    relax = _relaxer(g, costs, start, indeg, stack.append)
    while stack:
        v = pop()
        count += 1
        ran[v] = 1
        f = finish[v] = start[v] + dur[v]
        relax(v, f)
    return Timeline(g, costs, dur, start, finish, ran, count)


def _relaxer(g: ProgramGraph, costs: Costs | None, start: list, indeg: list, push):
    """The one rule of when a node may start: ``relax(v, t)`` says that node ``v`` finished at
    ``t``: every wait-for successor starts no earlier than ``t`` (a data successor of a
    compute-only graph no earlier than ``t`` plus its link's time), and each successor whose
    last predecessor this was is handed to ``push``."""
    succ = g.after

    def relax(v: int, t) -> None:
        for w in succ[v]:
            if start[w] < t:
                start[w] = t
            indeg[w] -= 1
            if not indeg[w]:
                push(w)

    if g.lowered:
        return relax
    dsucc, rank = g.data_out, g.rank
    link = costs.link if costs is not None and not costs.free_links else None

    def relax_data(v: int, t) -> None:
        relax(v, t)
        for w in dsucc[v]:
            s = t + link(rank[v], rank[w]) if link is not None else t
            if start[w] < s:
                start[w] = s
            indeg[w] -= 1
            if not indeg[w]:
                push(w)

    return relax_data


def _in_degrees(g: ProgramGraph) -> list[int]:
    """Per node, how many finishes it waits for: its wait-for predecessors, its ops without a
    partner (never), and in a compute-only graph its data predecessors."""
    indeg = g.before.counts()
    for v, c in g.blocked.items():
        indeg[v] += c
    if not g.lowered:
        for v, ps in enumerate(g.data_in):
            indeg[v] += len(ps)
    return indeg


def _run_shared(g: ProgramGraph, costs: Costs, dur: list, indeg: list, cores: int) -> Timeline:
    """:func:`run` with the ranks' work on ``cores`` shared processors (module docstring).

    ``released`` holds (start, node) of the nodes whose predecessors have all finished; a
    node with a duration joins ``running`` at its start with virtual finish ``V + work``,
    where the virtual clock ``V`` advances at ``min(1, cores / len(running))`` per unit of
    real time; a node without one finishes at its start."""
    n = g.n
    start = [0.0] * n
    finish = [0.0] * n
    ran = bytearray(n)
    released = [(0.0, v) for v in range(n) if not indeg[v]]
    heapq.heapify(released)
    running: list[tuple[float, int]] = []  # (virtual finish, node)
    now = virtual = 0.0
    count = 0
    inf = float("inf")

    relax = _relaxer(g, costs, start, indeg, lambda w: heapq.heappush(released, (start[w], w)))

    def done(v: int, t: float) -> None:
        nonlocal count
        count += 1
        ran[v] = 1
        finish[v] = t
        relax(v, t)

    while released or running:
        rate = min(1.0, cores / len(running)) if running else 1.0
        t_end = now + (running[0][0] - virtual) / rate if running else inf
        t_rel = released[0][0] if released else inf
        if t_end <= t_rel:  # the running node(s) with the least virtual finish end
            now, virtual = t_end, running[0][0]
            while running and running[0][0] <= virtual:
                done(heapq.heappop(running)[1], now)
            continue
        virtual += (t_rel - now) * rate
        now = t_rel
        _, v = heapq.heappop(released)
        if dur[v]:
            heapq.heappush(running, (virtual + dur[v], v))
        else:
            done(v, now)
    return Timeline(g, costs, dur, start, finish, ran, count)


def check_complete(tl: Timeline) -> None:
    """A ppir error (exit 1) naming the stuck ranks when the program of ``tl`` cannot run to
    its end: it has no step time."""
    if tl.complete:
        return
    g = tl.graph
    stuck = sorted({g.rank[v] for v in range(g.n) if not tl.ran[v]})
    raise error(
        "deadlock",
        f"{g.schedule.name} cannot finish under rendezvous semantics ({g.progress} progress): "
        f"{rank_list(stuck)} wait{'s' if len(stuck) == 1 else ''} forever",
        hints=["run 'ppir check' on the schedule (ppir.verify in Python) for the wait-for cycle"],
        exit_code=EXIT_INVALID,
    )


def dependency_bound(tl: Timeline) -> int | float:
    """A lower bound (ticks) on the step time of every lowering of the compute-only program
    whose complete run ``tl`` is: with a processor per rank, its makespan (a lowering only
    adds waits and transfers to the same graph, and max-plus is monotone).  On shared
    processors a run is not monotone -- a delay can let a critical node run with less company
    and end sooner -- so the bound is the larger of the run with a processor per rank and all
    compute work over the processors."""
    costs = tl.costs
    if costs is None or not costs.processors:
        return tl.makespan
    g = tl.graph
    plain = run(g, replace(costs, processors=None)).makespan
    work = sum(d for v, d in enumerate(tl.duration) if g.kind[v] == COMPUTE)
    return max(plain, work / costs.processors)


def stuck_cycles(tl: Timeline, starts):
    """Cycles among the nodes that never ran: a depth-first search from each of ``starts`` in
    turn through the predecessors that never ran (wait-for edges in construction order, then,
    in a compute-only graph, data edges), backing out of those that lead only to ops without a
    partner.  Each cycle comes as its nodes in walk order (each waits for the next one, the
    last for the first); the search goes on when the caller asks for the next.  A node is
    explored once over all starts: linear in the stuck nodes."""
    g, ran, before = tl.graph, tl.ran, tl.graph.before
    data_in = g.data_in if not g.lowered else None

    def stuck_preds(v: int):
        for e in before[v]:
            if not ran[e >> _SHIFT]:
                yield e >> _SHIFT
        if data_in is not None:
            for u in data_in[v]:
                if not ran[u]:
                    yield u

    color = bytearray(g.n)  # 0 new, 1 on the current path, 2 explored
    for start in starts:
        if color[start]:
            continue
        path, where, todo = [start], {start: 0}, [stuck_preds(start)]
        color[start] = 1
        while todo:
            u = next(todo[-1], -1)
            if u < 0:  # every stuck predecessor explored: back out
                todo.pop()
                color[path[-1]] = 2
                del where[path.pop()]
            elif color[u] == 1:
                yield path[where[u] :]
            elif color[u] == 0:
                color[u] = 1
                where[u] = len(path)
                path.append(u)
                todo.append(stuck_preds(u))


def stuck_cycle(tl: Timeline, first: int) -> list[int] | None:
    """The first cycle :func:`stuck_cycles` finds from ``first``, its nodes in wait-for order
    (each waits for the one before it), or None when none is behind ``first``."""
    cycle = next(stuck_cycles(tl, (first,)), None)
    return cycle[::-1] if cycle else None


__all__ = [
    "DATA",
    "Timeline",
    "check_complete",
    "dependency_bound",
    "durations",
    "run",
    "stuck_cycle",
    "stuck_cycles",
]
