"""How a program's items become the nodes and edges of its dependency graph (the construction
:func:`ppir.ir.graph.build_graph` runs; :mod:`ppir.ir.graph` states it).  Each function is one
linear pass; dependency rules come from :mod:`ppir.ir.deps`."""

from __future__ import annotations

from ppir.ir import deps
from ppir.ir.graph import (
    CHANNEL,
    COMPUTE,
    DONE,
    FIFO,
    MESSAGE,
    ORDER,
    POST,
    RENDEZVOUS,
    WAIT,
    WAITS,
    ProgramGraph,
)
from ppir.ir.types import Group, Overlap, Schedule, Wait, item_actions


def index_ops(g: ProgramGraph, s: Schedule) -> None:
    """Op ids, their items and peers, and each channel's sends and recvs in program order."""
    ops, op_rank, op_item, op_peer = g.ops, g.op_rank, g.op_item, g.op_peer
    first, sends, recvs = g.first, g.sends, g.recvs
    place = s.placement
    for r, prog in enumerate(s.programs):
        g.rank_start.append(len(ops))
        spans = []
        for i, it in enumerate(prog):
            lo = len(ops)
            for a in item_actions(it):
                o = len(ops)
                ops.append(a)
                op_rank.append(r)
                op_item.append(i)
                first.setdefault((a.stage, a.kind, a.mb), o)
                if a.kind.is_compute:
                    op_peer.append(-1)
                    continue
                q = deps.peer_rank(place, a) if 0 <= a.stage < len(place) else -1
                op_peer.append(q)
                if q >= 0:
                    if a.kind.is_send:
                        sends.setdefault((r, q), []).append(o)
                    else:
                        recvs.setdefault((q, r), []).append(o)
            spans.append((lo, len(ops)))
        g.item_ops.append(spans)
    g.rank_start.append(len(ops))
    n = len(ops)
    g.op_node = [-1] * n
    g.op_partner = [-1] * n
    g.op_msg = [-1] * n


def compute_only(g: ProgramGraph, s: Schedule) -> None:
    for r in range(s.ranks):
        order, last = [], -1
        for i, (lo, hi) in enumerate(g.item_ops[r]):
            v = g._add(COMPUTE, r, i, lo, hi)
            for o in range(lo, hi):
                g.op_node[o] = v
            if last >= 0:
                g._edge(last, v, ORDER)
            last = v
            order.append(v)
        g.rank_nodes.append(order)


def fifo_units(g: ProgramGraph, s: Schedule) -> None:
    ops = g.ops
    for r, prog in enumerate(s.programs):
        order: list[int] = []
        last_block = last_group = -1
        deferred: dict[tuple, int] = {}  # a deferred group's actions -> its post node
        for i, (lo, hi) in enumerate(g.item_ops[r]):
            it = prog[i]
            if isinstance(it, Wait):
                v = g._add(WAIT, r, i, deferred.pop(it.actions, -1), -1)
                if last_block >= 0:
                    g._edge(last_block, v, ORDER)
                if g.lo[v] >= 0:
                    g._edge(g.lo[v] + 1, v, WAITS)
                last_block = v
                order.append(v)
                continue
            if isinstance(it, Overlap) or (hi > lo and ops[lo].kind.is_compute):
                v = g._add(COMPUTE, r, i, lo, hi)
                for o in range(lo, hi):
                    g.op_node[o] = v
                if last_block >= 0:
                    g._edge(last_block, v, ORDER)
                last_block = v
                order.append(v)
                continue
            p = g._add(POST, r, i, lo, hi)
            d = g._add(DONE, r, i, lo, hi)
            for o in range(lo, hi):
                g.op_node[o] = p
            if last_block >= 0:
                g._edge(last_block, p, ORDER)
            if hi > lo:  # an empty group is a no-op, not a group of the FIFO
                if last_group >= 0 and last_group != last_block:
                    g._edge(last_group, p, FIFO)
                last_group = d
            g._edge(p, d, ORDER)
            if isinstance(it, Group) and it.deferred:
                deferred[it.actions] = p
            else:
                last_block = d
            order.extend((p, d))
        g.rank_nodes.append(order)


def relaxed_units(g: ProgramGraph, s: Schedule) -> None:
    ops, S = g.ops, s.stages
    for r in range(s.ranks):
        order: list[int] = []
        unit_of_key: dict[tuple, int] = {}  # first unit on this rank holding an action key
        pending: list[tuple[int, list[tuple]]] = []  # (node, keys it waits on)
        last_compute = -1
        last_to_peer: dict[int, int] = {}
        for i, (lo, hi) in enumerate(g.item_ops[r]):
            by_peer: dict[int, list[int]] = {}
            for o in range(lo, hi):
                a = ops[o]
                if a.kind.is_compute:
                    v = g._add(COMPUTE, r, i, o, o + 1)
                    g.op_node[o] = v
                    if last_compute >= 0:
                        g._edge(last_compute, v, ORDER)
                    last_compute = v
                    unit_of_key.setdefault(a.key, v)
                    msg = deps.message_in(a, S) if 0 <= a.stage < S else None
                    if msg is not None:
                        pending.append((v, [deps.recv_action(msg).key]))
                    order.append(v)
                else:
                    by_peer.setdefault(g.op_peer[o], []).append(o)
            for q, unit in by_peer.items():
                p = g._add(POST, r, i, lo, hi)
                d = g._add(DONE, r, i, lo, hi)
                g.unit_ops[p] = unit
                prev = last_to_peer.get(q)
                if prev is not None:
                    g._edge(prev, p, FIFO)
                g._edge(p, d, ORDER)
                last_to_peer[q] = d
                for o in unit:
                    g.op_node[o] = p
                    a = ops[o]
                    unit_of_key.setdefault(a.key, p)
                    if a.kind.is_send and 0 <= a.stage < S:
                        pending.append((p, list(deps.served_keys(a))))
                order.extend((p, d))
        for v, keys in pending:
            for key in keys:
                u = unit_of_key.get(key)
                if u is not None and u < v:  # a later one is a local-order error
                    g._edge(u + 1 if g.kind[u] == POST else u, v, ORDER)
        g.rank_nodes.append(order)


def data_edges(g: ProgramGraph) -> None:
    """A data edge from each compute node to each compute node consuming its output."""
    S, first, ops, op_node = g.num_stages, g.first, g.ops, g.op_node
    for o, a in enumerate(ops):
        if not a.kind.is_compute or not 0 <= a.stage < S:
            continue
        v = op_node[o]
        for p in deps.inputs(a, S):
            for k in p.kinds:
                src = first.get((p.stage, k, p.mb))
                if src is not None:
                    u = op_node[src]
                    if u != v and g.kind[u] == COMPUTE:
                        g._data(u, v)
                    break


def match(g: ProgramGraph) -> None:
    """FIFO matching per channel; one message node per matched pair, with its rendezvous and
    channel edges; each unit's done node then waits for its messages in posting order."""
    partner, op_msg, op_node = g.op_partner, g.op_msg, g.op_node
    for ch in sorted(g.sends.keys() | g.recvs.keys()):
        prev = -1
        for o, p in zip(g.sends.get(ch, ()), g.recvs.get(ch, ())):
            partner[o], partner[p] = p, o
            m = g._add(MESSAGE, ch[0], -1, o, p)
            g.messages.append(m)
            op_msg[o] = op_msg[p] = m
            g._edge(op_node[o], m, RENDEZVOUS)
            g._edge(op_node[p], m, RENDEZVOUS)
            if prev >= 0:
                g._edge(prev, m, CHANNEL)
            prev = m
    for order in g.rank_nodes:
        for p in order:
            if g.kind[p] != POST:
                continue
            missing = 0
            for o in g.unit_op_ids(p):
                m = op_msg[o]
                if m >= 0:
                    g._edge(m, p + 1, RENDEZVOUS)
                else:
                    missing += 1
            if missing:
                g.blocked[p + 1] = missing
