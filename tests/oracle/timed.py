"""TEST ORACLE (ppir's former estimator engine, kept only to cross-check the graph timeline):
timed simulation of a lowered schedule under the semantics the verifier proves.

The schedule is cut into the former verifier's *units* (:func:`oracle.rendezvous.build_units`,
the other oracle, independent of the graph ppir now builds): a compute unit holds one compute
action, a comm unit holds communication ops that complete together, and each unit lists the units
that must complete before it is *posted*.  ``progress`` picks the verifier's model:

``fifo`` (default, what ``ppir check`` proves; what CUDA guarantees)
    one unit per program item: a rank posts a group where its program says so, after the
    previous group of the rank has completed (one FIFO of groups), and blocks there until it
    completes -- or, for a deferred group (``post[...]``), goes on and blocks at its ``wait``.
``relaxed`` (independent progress per peer)
    a compute unit waits for the previous compute op of its rank and for the RECVs carrying its
    inputs; a comm unit (one per item and peer) waits for the previous one to the same peer and
    for the compute ops its SENDs carry: recvs are posted early and waited on by their consumer.

Timing.  A unit is posted when its last dependency completes (time 0 for none).  A compute unit
completes after its duration.  Each comm op meets its FIFO partner (k-th send <-> k-th recv of
its channel); the pair's transfer starts once both are posted and the channel's previous transfer
is done, and lasts the link's ``latency + bytes / bandwidth``; send and recv complete together at
its end.  A comm unit completes when all its ops have (never before it is posted).

Post and completion are separate events; a deferred group's wait is a unit of zero duration
that depends on the group.  The run is a max-plus evaluation over a
work list: every unit and op is handled once, O(n).  No channel contention across links and no
bandwidth sharing are modelled.  A stuck run raises a ppir error (exit 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from oracle.index import OpIndex
from oracle.rendezvous import PROGRESS_MODELS, build_units
from ppir.diagnostics import EXIT_INVALID, error
from ppir.ir import Action, Schedule


class Tables:
    """The oracle's cost tables (its former format) from a :class:`ppir.analysis.costs.Costs`:
    ``op[stage][kind]``, a full ``link[src][dst] = (time, bytes)`` matrix."""

    def __init__(self, costs, ranks: int):
        self.op, self.exact, self._c = costs.op, costs.exact, costs
        self.link = [[(costs.link(a, b), costs.nbytes) for b in range(ranks)] for a in range(ranks)]

    def overlap_time(self, parts):
        return self._c.overlap_time(sum(parts))


class OpSpan(NamedTuple):
    """A compute action's interval on its rank (ticks)."""

    action: Action
    start: int | float
    end: int | float


class GroupSpan(NamedTuple):
    """A comm unit: the program item holding it, when it was posted and when it completed."""

    item: int
    post: int | float
    done: int | float


class Transfer(NamedTuple):
    """One message: the matched send and recv, its ranks, its interval on the link, its size."""

    send: Action
    recv: Action
    src: int
    dst: int
    start: int | float
    end: int | float
    nbytes: float


@dataclass
class Timeline:
    """What the simulation found, in ticks (see :class:`~.tables.CostTables`).  ``ops[r]`` is in
    rank r's program order; ``finish[r]`` is when rank r's last unit completes."""

    ops: list[list[OpSpan]]
    groups: list[list[GroupSpan]]
    transfers: list[Transfer]
    finish: list[int | float]
    progress: str


def _overlapped(row: list[OpSpan], parts: list[Action], t, tables):
    """Time an overlapped step (ppir.ir.Overlap) as one op starting at ``t``; its parts get
    consecutive sub-intervals in proportion to their own durations.  Returns its end."""
    durs = [tables.op[a.stage][a.kind] for a in parts]
    total, whole = tables.overlap_time(durs), sum(durs)
    start = t
    for k, a in enumerate(parts):
        end = (
            t + total
            if k == len(parts) - 1
            else start + (durs[k] * total // whole if tables.exact else durs[k] * total / whole)
        )
        row.append(OpSpan(a, start, end))
        start = end
    return t + total


def simulate(schedule: Schedule, tables, progress: str = "fifo") -> Timeline:
    """Time every unit of ``schedule`` (see the module docstring); ppir error when stuck."""
    if progress not in PROGRESS_MODELS:
        raise error(
            "bad-usage",
            f"unknown progress model '{progress}'",
            hints=[f"progress models: {', '.join(PROGRESS_MODELS)}"],
        )
    idx = OpIndex.build(schedule)
    u = build_units(idx, progress)
    n = len(u.rank)
    acts, partner, op_unit, item_ops = idx.actions, idx.partner, u.op_unit, idx.item_ops
    waiting = [len(d) for d in u.deps]
    succs: list[list[int]] = [[] for _ in range(n)]
    for x, ds in enumerate(u.deps):
        for d in ds:
            succs[d].append(x)
    remaining = [len(ops) for ops in u.ops]
    ready: list[int | float] = [0] * n  # post time once every dependency is done
    done_at: list[int | float] = [0] * n
    op_post: dict[int, int | float] = {}  # comm op -> post time, until matched
    link_free: dict[tuple[int, int], int | float] = {}
    op_time, link = tables.op, tables.link
    P = schedule.ranks
    ops: list[list[OpSpan]] = [[] for _ in range(P)]
    groups: list[list[GroupSpan]] = [[] for _ in range(P)]
    transfers: list[Transfer] = []
    finish: list[int | float] = [0] * P
    part_seen: dict[tuple[int, int], int] = {}  # relaxed: parts of an Overlap timed so far
    work = [x for x in range(n) if waiting[x] == 0]
    work.reverse()
    count = 0

    def complete(x: int, t) -> None:
        nonlocal count
        count += 1
        done_at[x] = t
        r = u.rank[x]
        if t > finish[r]:
            finish[r] = t
        if u.ops[x]:
            groups[r].append(GroupSpan(u.item[x], ready[x], t))
        for y in succs[x]:
            if t > ready[y]:
                ready[y] = t
            waiting[y] -= 1
            if waiting[y] == 0:
                work.append(y)

    while work:
        x = work.pop()
        t = ready[x]
        if not u.ops[x]:  # a compute unit (one action or overlapped step), or a wait
            lo, hi = item_ops[u.rank[x]][u.item[x]]
            if lo == hi:  # the wait of a deferred group: done once its dependencies are
                complete(x, t)
                continue
            a = acts[lo]
            if hi - lo == 1:
                end = t + op_time[a.stage][a.kind]
                ops[u.rank[x]].append(OpSpan(a, t, end))
            elif progress == "fifo":
                end = _overlapped(ops[u.rank[x]], acts[lo:hi], t, tables)
            else:  # relaxed: one unit per part, in order; each part scaled like the whole
                k = part_seen[(u.rank[x], u.item[x])] = (
                    part_seen.get((u.rank[x], u.item[x]), -1) + 1
                )
                a = acts[lo + k]
                end = t + tables.overlap_time([op_time[a.stage][a.kind]])
                ops[u.rank[x]].append(OpSpan(a, t, end))
            complete(x, end)
            continue
        done_at[x] = t
        for o in u.ops[x]:
            p = partner[o]
            if p < 0 or p not in op_post:
                op_post[o] = t
                continue
            tp = op_post.pop(p)
            a = acts[o]
            snd, rcv = (o, p) if a.kind.is_send else (p, o)
            src, dst = u.rank[op_unit[snd]], u.rank[op_unit[rcv]]
            cost, nbytes = link[src][dst]
            start = max(t, tp, link_free.get((src, dst), 0))
            end = start + cost
            link_free[(src, dst)] = end
            transfers.append(Transfer(acts[snd], acts[rcv], src, dst, start, end, nbytes))
            pu = op_unit[p]
            for y in (x, pu):
                remaining[y] -= 1
                if end > done_at[y]:
                    done_at[y] = end
            if pu != x and remaining[pu] == 0:
                complete(pu, done_at[pu])
        if remaining[x] == 0:
            complete(x, done_at[x])
    if count != n:
        stuck = sorted(
            {u.rank[x] for x in range(n) if remaining[x] and waiting[x] == 0 and x not in work}
        )
        raise error(
            "deadlock",
            f"{schedule.name} cannot finish under rendezvous semantics "
            f"({progress} progress): ranks {stuck[:8]} wait forever",
            hints=["run 'ppir check' on the schedule for the wait-for cycle"],
            exit_code=EXIT_INVALID,
        )
    return Timeline(ops, groups, transfers, finish, progress)
