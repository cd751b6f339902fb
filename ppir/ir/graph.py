"""The dependency graph of a program: the IR that the verifier, the timeline, memory and the
passes read.  :func:`build_graph` is the one function that builds it.

Construction (``progress="fifo"``, the semantics ``ppir check`` proves; docs/verification.md
states it, and proves a lowered program deadlock-free exactly when this graph is acyclic)
--------------------------------------------------------------------------------------------
Node kinds (:data:`NODE_KINDS`), one or more per program item of a rank:

* ``compute``  a compute item (an action, or an overlapped F&B step as one node);
* ``post`` and ``done``  a communication group (``[a b]``, ``post[a b]`` or a lone SEND/RECV):
  when it is posted, and when all its ops have met their partners (the group completes as a unit);
* ``wait``  the ``wait[a b]`` of a deferred group;
* ``message``  one matched SEND/RECV pair: the k-th send and the k-th recv of a
  ``(src, dst)`` rank channel (FIFO matching, no tags);
* ``reduce``  a ``REDUCE_GRAD`` (:class:`ppir.ir.Reduce`): the asynchronous reduction of a
  stage's gradients across data-parallel replicas.  It follows the previous blocking item in
  program order, nothing waits for it (the step ends when it completes), and its data edges
  come from the B/W ops whose gradients it reduces (:func:`ppir.ir.deps.reduce_inputs`).

Wait-for edges (:data:`EDGE_KINDS`) say what must have happened before a node can happen:

* ``order``  program order: a compute item, a wait and every post follow the previous item that
  blocks the rank's program (a compute item, a blocking group's ``done``, a wait, a deferred group's
  ``post``: the program goes on once it is posted); a group's ``done`` follows its ``post``;
* ``fifo``  one FIFO of groups per rank: each message of a group also follows the ``done`` of
  the previous group of its rank (a group's transfers start once the groups posted before it
  have completed);
* ``wait``  a wait follows the ``done`` of the group it names;
* ``rendezvous``  a message happens once both of its groups are posted (a send completes only
  together with its recv: no buffering), and each group's ``done`` follows its messages;
* ``channel``  a message follows the previous message on its channel (the k-th transfer on a
  link starts after the (k-1)-th).

``data`` edges link each compute node to the compute nodes it consumes from
(:func:`ppir.ir.deps.inputs`).  In a lowered program they are not waits (the runtime waits
only through program order and rendezvous; the verifier checks that every data edge is
implied), so the *wait-for graph* is every edge but ``data``.  In a compute-only program data
edges are the waits (a message is assumed to arrive once its producer is done, plus its
transfer time), and the graph has only compute nodes.

``progress="relaxed"`` (independent progress per peer, *not* guaranteed by NCCL) builds the
verifier's relaxed units instead: one compute node per compute action (the parts of an
overlapped step in turn), one post/done pair per (comm item, peer); a compute op waits for the
previous compute op of its rank and for the recvs (earlier on its rank) carrying its inputs;
a comm unit waits for the previous unit to the same peer and for the compute ops (earlier)
whose outputs its sends carry.  Waits are not nodes.

The object
----------
:class:`ProgramGraph` is a read-only :class:`networkx.DiGraph` (nodes ``0..n-1`` with the
attributes ``kind``, ``rank``, ``item``, ``ops``, ``label``: a message's ``rank`` is its
sender's and its ``item`` -1, docs/verification.md has the table; edges with ``kinds``, every
kind linking the pair, and ``kind``, the first): every networkx algorithm runs on it.  Its
storage is flat per-node lists (``kind``, ``rank``, ``item``, ``after``, ``before`` ...) and
an op index (``ops``, ``op_rank``, ``op_item``, ``op_node``, ``op_peer``, ``op_partner``),
which the hot loops of the timeline and the checks use directly.  Building is linear in the
number of ops.
"""

from __future__ import annotations

import weakref
from array import array
from collections.abc import Iterator, Mapping
from itertools import accumulate, chain
from operator import sub
from types import MappingProxyType

import networkx as nx

from ppir.ir.firstops import FirstOps
from ppir.ir.types import Action, Group, Schedule

COMPUTE, POST, DONE, WAIT, MESSAGE, REDUCE = range(6)
NODE_KINDS = ("compute", "post", "done", "wait", "message", "reduce")
ORDER, FIFO, DATA, RENDEZVOUS, CHANNEL, WAITS = range(6)
EDGE_KINDS = ("order", "fifo", "data", "rendezvous", "channel", "wait")
PROGRESS_MODELS = ("fifo", "relaxed")
_SHIFT = 3  # a wait-for predecessor is stored as node << _SHIFT | edge kind


class ProgramGraph(nx.DiGraph):
    """The dependency graph of one program (see the module docstring).  Build it with
    :func:`build_graph`; ``ProgramGraph()`` alone is an ordinary empty DiGraph (networkx
    creates those for views and copies)."""

    def __init__(self, incoming_graph_data=None, **attr):
        super().__init__(incoming_graph_data, **attr)
        self.built = False

    # ------------------------------------------------------------------ storage
    def _init_storage(self, schedule: Schedule, progress: str) -> None:
        self.built = True
        self.schedule = schedule
        self.progress = progress
        self.lowered = schedule.is_lowered
        self.num_stages = schedule.stages
        # per node
        self.kind: list[int] = []
        self.rank: list[int] = []
        self.item: list[int] = []
        self.lo: list[int] = []  # compute: first op; post/done: first op of its item; wait:
        self.hi: list[int] = []  # its group's post (lo) or -1; message: send op (lo), recv (hi)
        self.after: list[list[int]] = []  # wait-for successors
        self.before: list[list[int]] = []  # wait-for predecessors, encoded node << 3 | kind
        self._data_edges: tuple[list, list] | None = None  # (data_in, data_out), on demand
        self.fifo_prev: dict[int, int] = {}  # during construction: fifo post -> the done of
        # its rank's previous group (whose messages wait for it; units.match)
        self.blocked: dict[int, int] = {}  # done node -> ops in it that have no partner
        self.unit_ops: dict[int, list[int]] = {}  # relaxed post -> its comm ops (a subset)
        self.rank_nodes: list[list[int]] = []  # per rank, its nodes in program order
        # per op
        self.ops: list[Action] = []
        self.op_rank: list[int] = []
        self.op_item: list[int] = []
        self.op_node: list[int] = []  # compute node, or the post node of the op's unit
        self.op_peer: list[int] = []  # comm: peer rank (-1: no such stage); compute: -1
        self.op_partner: list[int] = []  # the matched op, -1 when none
        self.op_msg: list[int] = []  # the message node of a matched comm op, else -1
        self.rank_start: list[int] = []
        self.item_starts: list[list[int]] = []  # per rank: first op of each item, then the end
        # (stage, kind, mb) -> the first op holding it (a Mapping; ppir.ir.firstops)
        self.first = FirstOps(
            self.ops, schedule.stages, schedule.microbatches, sum(map(len, schedule.programs))
        )
        self.sends: dict[tuple[int, int], list[int]] = {}  # channel -> send ops in order
        self.recvs: dict[tuple[int, int], list[int]] = {}
        self.messages: list[int] = []  # message nodes, in creation order
        self.graph.update(
            schedule=schedule.name, ranks=schedule.ranks, stages=schedule.stages, progress=progress
        )
        # The views hold a weak proxy: a graph must not be part of a reference cycle, since
        # ppir pauses the cyclic collector during compiles (ppir.nogc)
        me = weakref.proxy(self)
        self._node = _Nodes(me)
        self._adj = _Adjacency(me, successors=True)
        self._pred = _Adjacency(me, successors=False)
        nx.freeze(self)

    def node_lists(self) -> tuple[list, ...]:
        """The per-node lists the construction appends to, in one tuple."""
        return self.kind, self.rank, self.item, self.lo, self.hi, self.after, self.before

    def _add(self, kind: int, rank: int, item: int, lo: int, hi: int) -> int:
        n = len(self.kind)
        self.kind.append(kind)
        self.rank.append(rank)
        self.item.append(item)
        self.lo.append(lo)
        self.hi.append(hi)
        self.after.append([])
        self.before.append([])
        return n

    def _edge(self, u: int, v: int, kind: int) -> None:
        self.after[u].append(v)
        self.before[v].append(u << _SHIFT | kind)

    @property
    def data_in(self) -> list:
        """Per node, the compute nodes it consumes from (data edges); () when none.  Built on
        first use for a lowered program, whose timeline and checks do not read them."""
        return self._data()[0]

    @property
    def data_out(self) -> list:
        """Per node, the compute nodes consuming its output (data edges); () when none."""
        return self._data()[1]

    def _data(self) -> tuple[list, list]:
        if self._data_edges is None:
            from ppir.ir import units

            self._data_edges = units.data_edges(self)
        return self._data_edges

    # ------------------------------------------------------------------ queries
    @property
    def n(self) -> int:
        return len(self.kind)

    @property
    def num_ops(self) -> int:
        return len(self.ops)

    def preds(self, v: int) -> Iterator[tuple[int, int]]:
        """(node, edge kind) of every wait-for predecessor of ``v``, in construction order."""
        for e in self.before[v]:
            yield e >> _SHIFT, e & 7

    def item_range(self, r: int, i: int) -> tuple[int, int]:
        """The op ids [lo, hi) of item i of rank r."""
        starts = self.item_starts[r]
        return starts[i], starts[i + 1]

    def unit_op_ids(self, post: int) -> list[int]:
        """The comm ops of the unit whose post node is ``post``, in posting order."""
        if post in self.unit_ops:
            return self.unit_ops[post]
        lo, hi = self.item_range(self.rank[post], self.item[post])
        return [o for o in range(lo, hi) if self.ops[o].kind.is_comm]

    def node_ops(self, v: int) -> tuple[int, ...]:
        """The ops a node stands for: a compute node's actions, a unit's comm ops, a message's
        send and recv; () for a wait."""
        k = self.kind[v]
        if k == COMPUTE:
            return tuple(range(self.lo[v], self.hi[v]))
        if k == POST or k == DONE:
            return tuple(self.unit_op_ids(v if k == POST else v - 1))
        if k == MESSAGE:
            return (self.lo[v], self.hi[v])
        return ()

    def label(self, v: int) -> str:
        """A short readable name: ``r1:3F2``, ``r0:post[0SEND_F1]``, ``msg 0SEND_F1->1RECV_F1``."""
        k = self.kind[v]
        if k == MESSAGE:
            return f"msg {self.ops[self.lo[v]]}->{self.ops[self.hi[v]]}"
        prog = self.schedule.programs[self.rank[v]]
        it = prog[self.item[v]]
        if k == COMPUTE:
            text = " ".join(str(self.ops[o]) for o in self.node_ops(v))
            return f"r{self.rank[v]}:{text}"
        if k == WAIT or k == REDUCE:
            return f"r{self.rank[v]}:{it}"
        body = " ".join(str(self.ops[o]) for o in self.node_ops(v))
        return f"r{self.rank[v]}:{NODE_KINDS[k]}[{body}]"

    def where(self, o: int) -> str:
        """``0SEND_F1 (rank 0, step 5)``: an op and where it sits (step = item index)."""
        return f"{self.ops[o]} (rank {self.op_rank[o]}, step {self.op_item[o]})"

    def item_span(self, r: int, i: int):
        it = self.schedule.programs[r][i]
        if isinstance(it, Group):
            return it.span or (it.actions[0].span if it.actions else None)
        return it.span

    def node_attrs(self, v: int) -> dict:
        return {
            "kind": NODE_KINDS[self.kind[v]],
            "rank": self.rank[v],
            "item": self.item[v],
            "ops": tuple(str(self.ops[o]) for o in self.node_ops(v)),
            "label": self.label(v),
        }

    def wait_for(self) -> nx.DiGraph:
        """A read-only view of the wait-for graph: every edge but the data-only ones (of a
        compute-only program every edge: its data edges are its waits).  The program is
        deadlock-free exactly when this view is acyclic and every op has a partner."""
        if not self.lowered:  # was its order edges alone: a cyclic compute order looked acyclic
            return nx.subgraph_view(self)
        return nx.subgraph_view(
            self, filter_edge=lambda u, v: any(k != "data" for k in self[u][v]["kinds"])
        )

    def __reduce__(self):  # pickling rebuilds from the program
        return (build_graph, (self.schedule, self.progress))


# ------------------------------------------------------------------ networkx views
_EDGE_ATTRS: dict[tuple[int, ...], Mapping] = {}


def _edge_attrs(kinds: tuple[int, ...]) -> Mapping:
    a = _EDGE_ATTRS.get(kinds)
    if a is None:
        names = tuple(EDGE_KINDS[k] for k in kinds)
        a = _EDGE_ATTRS[kinds] = MappingProxyType({"kind": names[0], "kinds": names})
    return a


class _Nodes(Mapping):
    __slots__ = ("_g",)

    def __init__(self, g: ProgramGraph):
        self._g = g

    def _check(self, v) -> int:
        if type(v) is not int or not 0 <= v < self._g.n:
            raise KeyError(v)
        return v

    def __getitem__(self, v):
        return MappingProxyType(self._g.node_attrs(self._check(v)))

    def __contains__(self, v) -> bool:
        return type(v) is int and 0 <= v < self._g.n

    def __iter__(self):
        return iter(range(self._g.n))

    def __len__(self) -> int:
        return self._g.n


class _Adjacency(_Nodes):
    """node -> {neighbour: edge attributes}, over wait-for and data edges together."""

    __slots__ = ("_successors",)

    def __init__(self, g: ProgramGraph, successors: bool):
        super().__init__(g)
        self._successors = successors

    def __getitem__(self, v):
        g = self._g
        self._check(v)
        kinds: dict[int, list[int]] = {}
        if self._successors:
            for w in g.after[v]:
                for e in g.before[w]:
                    if e >> _SHIFT == v:
                        kinds.setdefault(w, []).append(e & 7)
            for w in g.data_out[v]:
                kinds.setdefault(w, []).append(DATA)
        else:
            for e in g.before[v]:
                kinds.setdefault(e >> _SHIFT, []).append(e & 7)
            for w in g.data_in[v]:
                kinds.setdefault(w, []).append(DATA)
        return MappingProxyType(
            {w: _edge_attrs(tuple(dict.fromkeys(ks))) for w, ks in kinds.items()}
        )


# ------------------------------------------------------------------ construction
def check_progress(progress) -> None:
    """A ValueError naming ``progress`` unless it is one of :data:`PROGRESS_MODELS`."""
    if progress not in PROGRESS_MODELS:
        raise ValueError(f"unknown progress model {progress!r} (expected one of {PROGRESS_MODELS})")


def build_graph(schedule: Schedule, progress: str = "fifo") -> ProgramGraph:
    """The dependency graph of ``schedule`` under ``progress`` (see the module docstring).
    A compute-only program gives compute nodes, order and data edges (``progress`` does not
    matter).  Linear in the number of ops."""
    check_progress(progress)
    from ppir.ir import op_index, units
    from ppir.nogc import paused_gc

    with paused_gc():
        return _build(schedule, progress, units, op_index)


def _build(schedule: Schedule, progress: str, units, op_index) -> ProgramGraph:
    g = ProgramGraph()
    g._init_storage(schedule, progress)
    op_index.index_ops(g, schedule)
    if not g.lowered:
        units.compute_only(g, schedule)
    elif progress == "fifo":
        units.fifo_units(g, schedule)
    else:
        units.relaxed_units(g, schedule)
    if g.lowered:
        units.match(g)
    else:  # data edges are a compute-only graph's waits; a lowered one builds them on demand
        g._data()
    g.before = Predecessors(g.before)
    return g


_NONES = [None] * 4096


class Predecessors:
    """The wait-for predecessors of every node, packed once construction is done: one flat
    integer array (node << 3 | edge kind, in construction order) and an offset per node, in
    place of a list object and an int object per entry.  ``preds[v]`` is node v's entries.
    Packing consumes ``lists`` (each entry is set to None once copied)."""

    __slots__ = ("ptr", "enc")

    def __init__(self, lists: list[list[int]]):
        ptr = array("l", [0])
        enc = array("q")
        step = 4096  # a slice at a time, in C; freed as packed: not all lists and the array
        for lo in range(0, len(lists), step):
            part = lists[lo : lo + step]
            ends = accumulate(map(len, part), initial=len(enc))
            next(ends)  # the slice starts where the previous one ended (ptr's last entry)
            ptr.extend(ends)
            enc.extend(array("q", list(chain.from_iterable(part))))
            lists[lo : lo + step] = _NONES[: len(part)]
            del part
        self.ptr, self.enc = ptr, enc

    def __getitem__(self, v: int):
        return self.enc[self.ptr[v] : self.ptr[v + 1]]

    def __len__(self) -> int:
        return len(self.ptr) - 1

    def counts(self) -> list[int]:
        """The number of predecessors of every node."""
        ptr = self.ptr
        return list(map(sub, ptr[1:], ptr[:-1]))
