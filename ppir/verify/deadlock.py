"""Check 4, deadlock freedom: the wait-for graph of the program is acyclic.

A lowered program is deadlock-free under the rendezvous semantics exactly when every node of
its wait-for graph (:mod:`ppir.ir.graph`) can happen, i.e. when the graph has no cycle and
every op has a partner (docs/verification.md has the construction and the proof).  The check
runs the untimed timeline (:func:`ppir.analysis.timeline.run` with no costs: Kahn's algorithm)
once; nodes that never ran lie on or behind a cycle, or wait for an op without a partner
(reported by matching).  A cycle is then extracted as the witness:

* a depth-first search starts at the first group (rank-major, program order) that was
  posted and never completed and follows the predecessors that never ran, in construction
  order (program order, then the group's messages in posting order; from a message, both
  posts, the previous message on its channel, then the FIFO of groups), backing out of those
  that lead only to ops without a partner, until it closes a cycle;
* the cycle's *hops* are the steps from a posted group through one of its messages to the
  partner's side (its group not posted yet, or posted behind an earlier group of its rank that
  is blocked): "rank r is blocked at step i on op a; its partner b is step j of rank q"; a
  message waiting for an earlier group of its own rank (fifo) is not a hop;
* the hops are rotated so that the lowest (rank, step) comes first.
"""

from __future__ import annotations

from typing import NamedTuple

from ppir.analysis.timeline import Timeline, stuck_cycles
from ppir.ir.graph import DONE, MESSAGE, ProgramGraph


class Hop(NamedTuple):
    """One step of a wait-for cycle: the group at ``(rank, item)`` was posted and waits on its
    op ``op``, whose partner ``partner`` sits in a group that is not posted yet, or is posted
    behind an earlier group of its rank that is blocked."""

    rank: int
    item: int
    op: int
    partner: int


def blocked_units(tl: Timeline) -> list[int]:
    """Done nodes of groups that were posted but never completed, in node order."""
    g, ran = tl.graph, tl.ran
    return [v for v in range(g.n) if g.kind[v] == DONE and not ran[v] and ran[v - 1]]


def find_cycle(tl: Timeline) -> list[Hop] | None:
    """The wait-for cycle of a stuck run as hops (see the module docstring), or None when no
    posted group is stuck on a cycle (only on ops without a partner): the first cycle
    :func:`ppir.analysis.timeline.stuck_cycles` finds from the stuck groups that has a hop."""
    for cycle in stuck_cycles(tl, blocked_units(tl)):
        hops = _hops(tl.graph, cycle)
        if hops:
            k = min(range(len(hops)), key=lambda i: (hops[i].rank, hops[i].item))
            return hops[k:] + hops[:k]
    return None


def _hops(g: ProgramGraph, cycle: list[int]) -> list[Hop]:
    """The done -> message -> partner steps of a cycle given in walk order (each node waits
    for the next one, the last for the first); a message waiting for the previous group of
    its own rank (fifo) is that group's wait, not a partner's."""
    out = []
    n = len(cycle)
    for i, v in enumerate(cycle):
        m = cycle[(i + 1) % n]
        if g.kind[v] != DONE or g.kind[m] != MESSAGE:
            continue
        nxt = cycle[(i + 2) % n]
        if g.kind[nxt] == DONE and g.rank[nxt] == g.rank[v]:
            continue
        send, recv = g.lo[m], g.hi[m]
        op, partner = (send, recv) if g.op_node[send] == v - 1 else (recv, send)
        out.append(Hop(g.rank[v], g.item[v], op, partner))
    return out


def item_status(tl: Timeline) -> list[list[str]]:
    """Per rank, per program item: '=' done, '>' blocked (a group posted and waiting for a
    partner), ' ' not reached."""
    g, ran = tl.graph, tl.ran
    s = g.schedule
    st = [["="] * len(p) for p in s.programs]
    for v in range(g.n):
        if ran[v] or g.kind[v] == MESSAGE:
            continue
        r, i = g.rank[v], g.item[v]
        if g.kind[v] == DONE and ran[v - 1]:
            st[r][i] = ">"
        elif st[r][i] == "=":
            st[r][i] = " "
    return st


def blocked_steps(tl: Timeline) -> dict[int, list[int]]:
    """Per rank, the program items of its groups that were posted and never completed."""
    g = tl.graph
    out: dict[int, list[int]] = {}
    for v in blocked_units(tl):
        out.setdefault(g.rank[v], []).append(g.item[v])
    return out
