"""The networkx dependency graph of a schedule, derived from its per-rank programs.

Nodes are ``(rank, i)``: the i-th action of the rank's program with groups flattened.  Node
attributes: ``action`` (Action), ``rank``, ``group`` (index of the program item holding it).
Edges carry ``kind``:

* ``order`` — consecutive actions of one rank (program order);
* ``data``  — producer -> consumer between compute actions (F(s,m) -> F(s+1,m), F(s,m) -> B/I(s,m),
  B/I(s+1,m) -> B/I(s,m), I(s,m) -> W(s,m));
* ``comm``  — the k-th send on a (src, dst) channel -> the k-th recv on it (FIFO matching).
"""

from __future__ import annotations

from collections import defaultdict, deque

import networkx as nx

from ppir.analysis.order import ComputeIndex
from ppir.ir import Schedule, item_actions


def build_graph(s: Schedule) -> nx.DiGraph:
    g = nx.DiGraph(schedule=s.name, ranks=s.ranks, stages=s.stages)
    compute_loc: dict = {}
    sends: dict[tuple[int, int], deque] = defaultdict(deque)
    recvs: dict[tuple[int, int], list] = defaultdict(list)
    for r, prog in enumerate(s.programs):
        i = 0
        prev = None
        for gi, it in enumerate(prog):
            for a in item_actions(it):
                node = (r, i)
                g.add_node(node, action=a, rank=r, group=gi)
                if prev is not None:
                    g.add_edge(prev, node, kind="order")
                if a.kind.is_compute:
                    compute_loc.setdefault(a.key, node)
                elif a.kind.is_send:
                    sends[(r, s.peer(a))].append(node)
                else:
                    recvs[(s.peer(a), r)].append(node)
                prev = node
                i += 1
    index = ComputeIndex.build(s)
    for node, a in ((n, d["action"]) for n, d in g.nodes(data=True)):
        if a.kind.is_compute:
            for p in index.data_preds(a, s.stages):
                pa = index.actions[p[0]][p[1]]
                g.add_edge(compute_loc[pa.key], node, kind="data")
    for ch, rs in recvs.items():
        q = sends.get(ch, deque())
        for rn in rs:
            if not q:
                break
            g.add_edge(q.popleft(), rn, kind="comm")
    return g
