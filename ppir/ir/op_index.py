"""The op index of a program's dependency graph: op ids in program order, each op's rank, item
and peer, and each channel's sends and recvs in program order (the first step of
:func:`ppir.ir.graph.build_graph`; :mod:`ppir.ir.units` then makes the nodes and edges).  The
peer at the other end of a comm op comes from :mod:`ppir.ir.deps` (``peer_table``)."""

from __future__ import annotations

from itertools import accumulate, chain, repeat

from ppir.ir import deps
from ppir.ir.graph import ProgramGraph
from ppir.ir.types import COMPUTE_KINDS, SEND_KINDS, Action, Reduce, Schedule, Wait


def index_ops(g: ProgramGraph, s: Schedule) -> None:
    """Op ids, their items and peers, and each channel's sends and recvs in program order."""
    ops, op_rank, op_item, op_peer = g.ops, g.op_rank, g.op_item, g.op_peer
    first = g.first
    place, S = s.placement, s.stages
    peer_of = deps.peer_table(S, s.pipelines).get  # (kind, stage) -> peer stage in its pipeline
    compute = COMPUTE_KINDS
    for r, prog in enumerate(s.programs):  # per rank: comprehensions, then a loop over comm ops
        base = len(ops)
        g.rank_start.append(base)
        acts = [
            (it,)
            if (cls := it.__class__) is Action
            else (() if cls is Wait or cls is Reduce else it.actions)
            for it in prog
        ]
        flat = list(chain.from_iterable(acts))
        n = len(flat)
        ops.extend(flat)
        op_rank.extend(repeat(r, n))
        op_item.extend([i for i, x in enumerate(acts) for _ in x])
        g.item_starts.append(list(accumulate(map(len, acts), initial=base)))
        first.add(flat, base)  # first[key] = the first op holding key
        peers = [-1] * n
        table: dict = {}  # (kind, stage) -> (peer rank, its channel's op list or None)
        get = table.get
        for j in [j for j, a in enumerate(flat) if a.kind not in compute]:
            a = flat[j]
            hit = get((a.kind, a.stage))
            if hit is None:
                hit = table[(a.kind, a.stage)] = _peer_channel(a, r, place, peer_of, g)
            q, ch = hit
            peers[j] = q
            if ch is not None:
                ch.append(base + j)
        op_peer.extend(peers)
    g.rank_start.append(len(ops))
    n = len(ops)
    g.op_node = [-1] * n
    g.op_partner = [-1] * n
    g.op_msg = [-1] * n


def _peer_channel(a, r: int, place, peer_of, g: ProgramGraph) -> tuple:
    """The rank at the other end of comm action ``a`` on rank ``r`` (-1: no such stage) and
    the list of its channel's sends (or recvs) in program order, None without a peer."""
    k = a.kind
    ps = peer_of((k, a.stage))
    if ps is None:
        return -1, None
    q = place[ps]
    if k in SEND_KINDS:
        return q, g.sends.setdefault((r, q), [])
    return q, g.recvs.setdefault((q, r), [])
