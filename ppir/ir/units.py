"""How a program's items become the nodes and edges of its dependency graph (the construction
:func:`ppir.ir.graph.build_graph` runs on the op index :mod:`ppir.ir.op_index` made;
:mod:`ppir.ir.graph` states it).  Each function is one linear pass; dependency rules come from
:mod:`ppir.ir.deps`.  The loops append to the graph's lists directly: a method call per node
or edge would cost more than the work itself."""

from __future__ import annotations

from itertools import count, islice, repeat

from ppir.ir import deps
from ppir.ir.deferred import OpenGroups
from ppir.ir.graph import (
    CHANNEL,
    COMPUTE,
    DONE,
    FIFO,
    MESSAGE,
    ORDER,
    POST,
    REDUCE,
    RENDEZVOUS,
    WAIT,
    WAITS,
    ProgramGraph,
)
from ppir.ir.types import (
    COMPUTE_KINDS,
    Group,
    Overlap,
    Reduce,
    Schedule,
    Wait,
)

_S = 3  # predecessors are stored as node << _S | edge kind (ppir.ir.graph._SHIFT)


def _reduce(g: ProgramGraph, r: int, i: int, last: int, first: int) -> int:
    """A reduce node after ``last`` in program order (nothing waits for it), and after the
    rank's previous reduce on their shared ring (a channel edge); the rank's nodes are
    ``first`` onwards.  Returns the node."""
    v = g._add(REDUCE, r, i, -1, -1)
    if last >= 0:
        g._edge(last, v, ORDER)
    kind = g.kind
    prev = next((u for u in range(v - 1, first - 1, -1) if kind[u] == REDUCE), -1)
    if prev >= 0:
        g._edge(prev, v, CHANNEL)
    return v


def compute_only(g: ProgramGraph, s: Schedule) -> None:
    kind, rank, item, lo_, hi_, after, before = g.node_lists()
    op_node = g.op_node
    for r in range(s.ranks):
        order, first, last = [], len(kind), -1
        starts = g.item_starts[r]
        prog = s.programs[r]
        for i in range(len(starts) - 1):
            lo, hi = starts[i], starts[i + 1]
            if prog[i].__class__ is Reduce:
                order.append(_reduce(g, r, i, last, first))
                continue
            v = len(kind)
            kind.append(COMPUTE)
            rank.append(r)
            item.append(i)
            lo_.append(lo)
            hi_.append(hi)
            after.append([])
            for o in range(lo, hi):
                op_node[o] = v
            if last >= 0:
                after[last].append(v)
                before.append([last << _S | ORDER])
            else:
                before.append([])
            last = v
            order.append(v)
        g.rank_nodes.append(order)


def fifo_units(g: ProgramGraph, s: Schedule) -> None:
    kind, rank, item, lo_, hi_, after, before = g.node_lists()
    op_node, ops, fifo_prev = g.op_node, g.ops, g.fifo_prev
    compute_kinds = COMPUTE_KINDS
    for r, prog in enumerate(s.programs):
        order: list[int] = []  # the nodes' own ints (shared, not one more int per node)
        add = order.append
        first = v = len(kind)  # v: the next node; a rank's nodes are consecutive
        last_block = last_group = -1
        deferred = OpenGroups()  # a deferred group's actions -> its post node
        starts = g.item_starts[r]
        for i, it, lo, hi in zip(count(), prog, starts, islice(starts, 1, None)):
            cls = it.__class__
            if cls is Wait:
                p = deferred.take(it.actions, -1)
                kind.append(WAIT)
                item.append(i)
                lo_.append(p)
                hi_.append(-1)
                after.append([])
                pre = []
                if last_block >= 0:
                    after[last_block].append(v)
                    pre.append(last_block << _S | ORDER)
                if p >= 0:
                    after[p + 1].append(v)
                    pre.append((p + 1) << _S | WAITS)
                before.append(pre)
                last_block = v
                add(v)
                v += 1
            elif cls is Overlap or (hi > lo and ops[lo].kind in compute_kinds):
                kind.append(COMPUTE)
                item.append(i)
                lo_.append(lo)
                hi_.append(hi)
                after.append([])
                if hi - lo == 1:
                    op_node[lo] = v
                else:
                    op_node[lo:hi] = [v] * (hi - lo)
                if last_block >= 0:
                    after[last_block].append(v)
                    before.append([last_block << _S | ORDER])
                else:
                    before.append([])
                last_block = v
                add(v)
                v += 1
            elif cls is Reduce:
                rank.extend(repeat(r, v - len(rank)))  # _reduce appends its node's rank
                add(_reduce(g, r, i, last_block, first))
                v += 1
            else:  # a group (or a lone comm action): its post v and its done v + 1
                d = v + 1
                kind.extend((POST, DONE))
                item.extend((i, i))
                lo_.extend((lo, lo))
                hi_.extend((hi, hi))
                after.append([d])
                after.append([])
                op_node[lo:hi] = [v] * (hi - lo)
                if last_block >= 0:
                    after[last_block].append(v)
                    before.append([last_block << _S | ORDER])
                else:
                    before.append([])
                before.append([v << _S | ORDER])
                if hi > lo:  # an empty group is a no-op, not a group of the FIFO
                    if last_group >= 0:  # its messages follow the previous group's done (match)
                        fifo_prev[v] = last_group
                    last_group = d
                if cls is Group and it.deferred:  # the program goes on once it is posted
                    deferred.put(it.actions, v)
                    last_block = v
                else:
                    last_block = d
                order.extend((v, d))
                v += 2
        rank.extend(repeat(r, v - len(rank)))
        g.rank_nodes.append(order)


def relaxed_units(g: ProgramGraph, s: Schedule) -> None:
    ops, S = g.ops, s.stages
    for r in range(s.ranks):
        order: list[int] = []
        unit_of_key: dict[tuple, int] = {}  # first unit on this rank holding an action key
        pending: list[tuple[int, list[tuple]]] = []  # (node, keys it waits on)
        last_compute = -1
        last_to_peer: dict[int, int] = {}
        starts = g.item_starts[r]
        for i in range(len(starts) - 1):
            lo, hi = starts[i], starts[i + 1]
            if s.programs[r][i].__class__ is Reduce:
                order.append(_reduce(g, r, i, last_compute, order[0] if order else len(g.kind)))
                continue
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
                    msg = deps.message_in(a, S, s.pipelines) if 0 <= a.stage < S else None
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


def data_edges(g: ProgramGraph) -> tuple[list, list]:
    """Per node, (data producers, data consumers): a data edge from each compute node to each
    compute node consuming its output."""
    S, first, ops, op_node, kind = g.num_stages, g.first, g.ops, g.op_node, g.kind
    n = len(kind)
    data_in: list = [()] * n
    data_out: list = [()] * n
    get = first.getter()
    producers_of = deps.input_table(S, g.schedule.pipelines).get
    for o, a in enumerate(ops):
        producers = producers_of((a.kind, a.stage))  # None: not a compute op, or out of range
        if producers is None:
            continue
        v = op_node[o]
        m = a.mb
        for st, kinds in producers:
            for k in kinds:
                src = get(st, k, m)
                if src is not None:
                    u = op_node[src]
                    if u != v and kind[u] == COMPUTE:
                        if data_out[u]:
                            data_out[u].append(v)
                        else:
                            data_out[u] = [v]
                        if data_in[v]:
                            data_in[v].append(u)
                        else:
                            data_in[v] = [u]
                    break
    _reduce_edges(g, data_in, data_out)
    return data_in, data_out


def _reduce_edges(g: ProgramGraph, data_in: list, data_out: list) -> None:
    """A data edge into each reduce node from every op whose weight gradients it reduces."""
    S, M, first, op_node = g.num_stages, g.schedule.microbatches, g.first, g.op_node
    for v, k in enumerate(g.kind):
        if k != REDUCE:
            continue
        st = g.schedule.programs[g.rank[v]][g.item[v]].stage
        if not 0 <= st < S:
            continue
        for p in deps.reduce_inputs(st, M):
            for kind in p.kinds:
                src = first.op(p.stage, kind, p.mb)
                if src is not None:
                    u = op_node[src]
                    data_in[v] = [*data_in[v], u]
                    data_out[u] = [*data_out[u], v]
                    break


def match(g: ProgramGraph) -> None:
    """FIFO matching per channel; one message node per matched pair, with its rendezvous,
    channel and fifo edges (the done of the previous group of either rank, ``fifo_prev``);
    each unit's done node then waits for its messages in posting order."""
    kind, rank, item, lo_, hi_, after, before = g.node_lists()
    partner, op_msg, op_node = g.op_partner, g.op_msg, g.op_node
    fifo_prev = g.fifo_prev.get
    messages = g.messages
    for ch in sorted(g.sends.keys() | g.recvs.keys()):
        sends, recvs = g.sends.get(ch, ()), g.recvs.get(ch, ())
        n = min(len(sends), len(recvs))
        if not n:
            continue
        sends, recvs = sends[:n], recvs[:n]
        first = len(kind)  # the channel's messages are nodes first .. first + n - 1
        ids = range(first, first + n)
        kind.extend([MESSAGE] * n)
        rank.extend([ch[0]] * n)
        item.extend([-1] * n)
        lo_.extend(sends)
        hi_.extend(recvs)
        after.extend([[] for _ in ids])
        messages.extend(ids)
        for o, p, m in zip(sends, recvs, ids):
            partner[o] = p
            partner[p] = o
            op_msg[o] = op_msg[p] = m
            a, b = op_node[o], op_node[p]
            after[a].append(m)
            after[b].append(m)
            pre = [a << _S | RENDEZVOUS, b << _S | RENDEZVOUS]
            if m > first:  # after the previous message on its channel
                after[m - 1].append(m)
                pre.append((m - 1) << _S | CHANNEL)
            f = fifo_prev(a, -1)
            if f >= 0:
                after[f].append(m)
                pre.append(f << _S | FIFO)
            f = fifo_prev(b, -1)
            if f >= 0:
                after[f].append(m)
                pre.append(f << _S | FIFO)
            before.append(pre)
    unit_ops = g.unit_ops
    blocked = g.blocked
    for order in g.rank_nodes:
        for p in order:
            if kind[p] != POST:
                continue
            d = p + 1
            pre = before[d]
            missing = 0
            if unit_ops:
                its = unit_ops.get(p) or g.unit_op_ids(p)
            else:
                its = range(lo_[p], hi_[p])
            matched = False
            for o in its:
                m = op_msg[o]
                if m >= 0:
                    after[m].append(d)
                    pre.append(m << _S | RENDEZVOUS)
                    matched = True
                else:
                    missing += 1
            if missing:
                blocked[d] = missing
                f = fifo_prev(p, -1)
                if not matched and f >= 0:  # no message carries its fifo wait: the done does
                    after[f].append(d)
                    pre.append(f << _S | FIFO)
    g.fifo_prev.clear()  # read by the channel loop only: not held with the graph
