"""TEST ORACLE (ppir's former check-4 engine, kept only to cross-check the graph IR): run the
rendezvous semantics once, in time linear in the number of ops.

Model
-----
A schedule is cut into *units*.  A unit holds zero or more communication ops that complete
together, and a list of units that must complete before it is *posted*.  Once posted, each of
its ops meets its FIFO partner (``OpIndex.partner``) as soon as the partner is posted too
(rendezvous: a send completes only together with its recv, no buffering).  A unit completes
when every op in it has met its partner; a unit without comm ops completes when posted.

``fifo`` progress (default, conservative; what CUDA guarantees)
    one unit per program item.  Compute items, blocking groups and waits follow the previous
    such item of the rank; every group also follows the previous group of the rank (one FIFO
    of groups); a wait follows the deferred group it names.  With blocking groups only, each
    item waits for the previous one: a rank is blocked at its first incomplete group.
``relaxed`` progress (independent progress per peer; *not* guaranteed by NCCL/CUDA)
    one unit per compute op, and one per (comm item, peer): the ops of a group split by peer.
    A compute op waits for the previous compute op of its rank and for the RECVs (on its rank)
    carrying its inputs; a comm unit waits for the previous comm unit to the same peer and for
    the compute ops whose outputs its SENDs carry.  Only waits on earlier items count (a later
    producer or recv is a ``local-order``/``missing-recv`` error), so every wait of the relaxed
    model is also a wait of the fifo model: relaxed accepts whatever fifo accepts.

Because matching is deterministic (FIFO, no wildcards), one run decides: either every unit
completes, or the run is stuck and :func:`find_cycle` extracts a wait-for cycle.
The engine uses a worklist and flat arrays; every unit is posted and completed at most once
and every op is matched at most once.
"""

from __future__ import annotations

from dataclasses import dataclass

from oracle.index import OpIndex
from ppir.ir import COMM_KINDS, Group, OpKind, Wait

PROGRESS_MODELS = ("fifo", "relaxed")


@dataclass
class Units:
    rank: list[int]  # by unit
    item: list[int]  # by unit: program item it belongs to
    ops: list[list[int]]  # by unit: comm op ids (posting order)
    deps: list[list[int]]  # by unit: units that must complete first
    op_unit: list[int]  # by op id: unit holding the op (-1 for compute ops)


def build_units(idx: OpIndex, progress: str = "fifo") -> Units:
    if progress == "fifo":
        return _fifo_units(idx)
    if progress == "relaxed":
        return _relaxed_units(idx)
    raise ValueError(f"unknown progress model {progress!r} (expected one of {PROGRESS_MODELS})")


def _fifo_units(idx: OpIndex) -> Units:
    """One unit per item.  A rank's *program* blocks at compute items, blocking groups and
    waits; its *FIFO of groups* orders every group it posts.  So a compute item or a wait waits
    for the previous program-blocking unit; a group waits for that and for the previous group
    of the rank; a wait also waits for the deferred group it names.  With no deferred groups
    this is a plain chain: each item waits for the previous one."""
    u = Units([], [], [], [], [-1] * idx.num_ops)
    acts = idx.actions
    for r, items in enumerate(idx.item_ops):
        prog = idx.schedule.programs[r]
        last_block = last_group = -1
        group_unit: dict[tuple, int] = {}
        for i, (start, end) in enumerate(items):
            n = len(u.rank)
            u.rank.append(r)
            u.item.append(i)
            it = prog[i]
            if end - start == 1:
                ops = [start] if acts[start].kind in COMM_KINDS else []
            else:
                ops = [o for o in range(start, end) if acts[o].kind in COMM_KINDS]
            deps = [last_block] if last_block >= 0 else []
            if isinstance(it, Wait):
                g = group_unit.get(it.actions)
                if g is not None:  # a wait for nothing posted is a 'bad-wait' error
                    deps.append(g)
                last_block = n
            elif ops:
                if last_group >= 0 and last_group != last_block:
                    deps.append(last_group)
                last_group = n
                if isinstance(it, Group) and it.deferred:
                    group_unit[it.actions] = n
                else:
                    last_block = n
            else:
                last_block = n
            u.deps.append(deps)
            for o in ops:
                u.op_unit[o] = n
            u.ops.append(ops)
    return u


def _relaxed_units(idx: OpIndex) -> Units:
    u = Units([], [], [], [], [-1] * idx.num_ops)
    acts = idx.actions
    for r, items in enumerate(idx.item_ops):
        unit_of_key: dict[tuple, int] = {}  # first unit on this rank holding an action key
        pending: list[tuple[int, int]] = []  # (unit, op) whose extra deps resolve below
        last_compute = -1
        last_to_peer: dict[int, int] = {}
        for i, (start, end) in enumerate(items):
            by_peer: dict[int, list[int]] = {}
            for o in range(start, end):
                a = acts[o]
                if a.kind.is_compute:
                    n = _new_unit(u, r, i, [] if last_compute < 0 else [last_compute])
                    last_compute = n
                    unit_of_key.setdefault(a.key, n)
                    pending.append((n, o))
                else:
                    by_peer.setdefault(idx.peer[o], []).append(o)
            for q, ops in by_peer.items():
                prev = last_to_peer.get(q)
                n = _new_unit(u, r, i, [] if prev is None else [prev])
                last_to_peer[q] = n
                u.ops[n] = ops
                for o in ops:
                    u.op_unit[o] = n
                    unit_of_key.setdefault(acts[o].key, n)
                    if acts[o].kind.is_send:
                        pending.append((n, o))
        for n, o in pending:
            for key in _inputs(acts[o]):
                d = unit_of_key.get(key)
                if d is not None and d < n:  # a later one is a local-order error
                    u.deps[n].append(d)
    return u


def comm_endpoints(action) -> tuple[tuple, ...]:
    """Keys of the compute actions at this end of a comm action (the oracle's own copy)."""
    s, m = action.stage, action.mb
    if action.kind in (OpKind.SEND_F, OpKind.RECV_F):
        return ((s, OpKind.F, m),)
    return ((s, OpKind.B, m), (s, OpKind.I, m))


def _inputs(a) -> list[tuple]:
    """Keys of the same-rank units a relaxed unit waits on (recvs for compute, producers for
    sends).  Same-rank compute producers are already ordered by the compute chain."""
    st, k, m = a.stage, a.kind, a.mb
    if k is OpKind.F:
        return [(st, OpKind.RECV_F, m)]
    if k is OpKind.B or k is OpKind.I:
        return [(st, OpKind.RECV_B, m)]
    if k.is_send:
        return list(comm_endpoints(a))
    return []


def _new_unit(u: Units, r: int, i: int, deps: list[int]) -> int:
    u.rank.append(r)
    u.item.append(i)
    u.ops.append([])
    u.deps.append(deps)
    return len(u.rank) - 1


@dataclass
class SimResult:
    units: Units
    posted: bytearray  # by unit
    done: bytearray  # by unit
    matched: bytearray  # by op id
    completed: bool  # every unit completed: no deadlock


def simulate(idx: OpIndex, progress: str = "fifo") -> SimResult:
    """Run the rendezvous semantics to completion or to the stuck state."""
    u = build_units(idx, progress)
    n = len(u.rank)
    pending = [len(d) for d in u.deps]
    succs: list[list[int]] = [[] for _ in range(n)]
    for x, ds in enumerate(u.deps):
        for d in ds:
            succs[d].append(x)
    remaining = [len(ops) for ops in u.ops]
    partner, op_unit = idx.partner, u.op_unit
    op_posted = bytearray(idx.num_ops)
    matched = bytearray(idx.num_ops)
    posted = bytearray(n)
    done = bytearray(n)
    work = [x for x in range(n) if pending[x] == 0]
    work.reverse()  # pop() then takes the lowest rank first (only matters for speed of reading)
    count = 0

    def complete(x: int) -> None:
        nonlocal count
        done[x] = 1
        count += 1
        for y in succs[x]:
            pending[y] -= 1
            if pending[y] == 0:
                work.append(y)

    while work:
        x = work.pop()
        posted[x] = 1
        for o in u.ops[x]:
            p = partner[o]
            if p >= 0 and op_posted[p] and not matched[p]:
                matched[o] = matched[p] = 1
                remaining[x] -= 1
                pu = op_unit[p]
                remaining[pu] -= 1
                if pu != x and remaining[pu] == 0:
                    complete(pu)
            op_posted[o] = 1
        if remaining[x] == 0:
            complete(x)
    return SimResult(u, posted, done, matched, count == n)


@dataclass
class Hop:
    """One step of a wait-for cycle: unit ``unit`` (posted) waits on op ``op`` whose partner
    ``partner`` sits in a unit that is not posted yet."""

    unit: int
    op: int
    partner: int


def _edge(res: SimResult, idx: OpIndex, x: int) -> tuple[int, int] | None:
    """(next unit, op) that unit ``x`` waits for in the stuck state; op is -1 for a dependency."""
    u = res.units
    if res.posted[x]:
        for o in u.ops[x]:
            if not res.matched[o] and idx.partner[o] >= 0:
                return u.op_unit[idx.partner[o]], o
        return None  # waits only on ops without a partner (reported by matching)
    for d in u.deps[x]:
        if not res.done[d]:
            return d, -1
    return None


def find_cycle(res: SimResult, idx: OpIndex) -> list[Hop] | None:
    """A wait-for cycle of the stuck state as hops between posted units, rotated so that the
    hop with the lowest (rank, step) comes first; None when nothing is stuck on a cycle."""
    u = res.units
    color = bytearray(len(u.rank))  # 0 new, 1 on the current path, 2 finished
    starts = [x for x in range(len(u.rank)) if res.posted[x] and not res.done[x]]
    for start in starts:
        path: list[tuple[int, int]] = []
        where: dict[int, int] = {}
        x: int | None = start
        while x is not None and color[x] == 0:
            color[x] = 1
            where[x] = len(path)
            e = _edge(res, idx, x)
            path.append((x, -1 if e is None else e[1]))
            x = None if e is None else e[0]
        if x is not None and color[x] == 1:
            cyc = path[where[x] :]
            hops = [Hop(y, o, idx.partner[o]) for y, o in cyc if o >= 0]
            if not hops:  # a cycle of dependencies alone (relaxed, after a local-order error)
                for y, _ in path:
                    color[y] = 2
                continue
            k = min(range(len(hops)), key=lambda i: (u.rank[hops[i].unit], u.item[hops[i].unit]))
            return hops[k:] + hops[:k]
        for y, _ in path:
            color[y] = 2
    return None
