"""Compute-order analysis shared by passes: dependencies, unit-time levels and order cycles.

The *compute graph* of a schedule has one node per compute action and two edge kinds: data
dependencies (see :func:`ppir.ir.producers`) and program order (consecutive compute actions of one
rank).  A schedule can only run if this graph is acyclic.  All functions here are linear in the
number of actions.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from ppir.ir import Action, OpKind, Overlap, Schedule, producers

Loc = tuple[int, int]  # (rank, index among that rank's compute actions)


@dataclass
class ComputeIndex:
    """Where every compute action sits, and which kind runs each (stage, mb) backward."""

    actions: list[list[Action]]  # per rank, compute actions in program order
    where: dict[tuple[int, OpKind, int], Loc]  # first occurrence of each action key
    backward_kind: dict[tuple[int, int], OpKind]
    joined: set[Loc]  # second parts of Overlap steps: they start when the first part ends

    @classmethod
    def build(cls, schedule: Schedule) -> ComputeIndex:
        acts = [schedule.compute_actions(r) for r in range(schedule.ranks)]
        joined: set[Loc] = set()
        for r in range(schedule.ranks):
            i = 0
            for it in schedule.compute_items(r):
                if isinstance(it, Overlap):
                    joined.add((r, i + 1))
                    i += 2
                else:
                    i += 1
        where: dict = {}
        bk: dict = {}
        for r, prog in enumerate(acts):
            for i, a in enumerate(prog):
                where.setdefault(a.key, (r, i))
                if a.kind is OpKind.I or (a.kind is OpKind.B and (a.stage, a.mb) not in bk):
                    bk[(a.stage, a.mb)] = a.kind
        return cls(acts, where, bk, joined)

    def data_preds(self, a: Action, num_stages: int) -> list[Loc]:
        """Locations of the producers of ``a`` that exist in the schedule."""
        out = []
        for p in producers(a, num_stages, self.backward_kind):
            loc = self.where.get(p.key)
            if loc is not None:
                out.append(loc)
        return out


class OrderCycle(Exception):
    """The compute graph has a cycle; ``cycle`` lists its locations in dependency order."""

    def __init__(self, cycle: list[Loc]):
        super().__init__(f"compute order has a cycle of {len(cycle)} ops")
        self.cycle = cycle


DEFAULT_DURATIONS = {OpKind.F: 1, OpKind.B: 2, OpKind.I: 1, OpKind.W: 1}
"""Relative op costs per chunk used when no cost model is given (REFERENCE.md defaults)."""


@dataclass(frozen=True)
class PlanCosts:
    """Costs a pass plans with: ``op[stage][kind]`` (positive op durations) and
    ``link[src][dst]`` (the time one message takes from rank src to rank dst, >= 0).

    Any consistent unit works (the cost backend's integer ticks keep planning exact).  Build one
    from relative per-kind costs with :meth:`uniform`."""

    op: tuple[dict[OpKind, int | float], ...]
    link: tuple[tuple[int | float, ...], ...]

    def __post_init__(self) -> None:
        for s, row in enumerate(self.op):
            for k, d in row.items():
                if not d > 0:
                    raise ValueError(
                        f"plan costs: {k.value} on stage {s} takes {d}; op "
                        "durations must be positive"
                    )
        n = len(self.link)
        for a, row in enumerate(self.link):
            if len(row) != n or row[a] != 0 or any(not t >= 0 for t in row):
                raise ValueError(
                    "plan costs: link must be a square matrix of transfer times "
                    ">= 0 with zeros on the diagonal"
                )

    @classmethod
    def uniform(
        cls,
        stages: int,
        ranks: int,
        durations: dict[OpKind, int] | None = None,
        transfer: int | float = 0,
    ) -> PlanCosts:
        """The same ``durations`` (default :data:`DEFAULT_DURATIONS`) on every stage and the
        same ``transfer`` time on every link."""
        d = dict(durations or DEFAULT_DURATIONS)
        return cls(
            tuple(dict(d) for _ in range(stages)),
            tuple(tuple(0 if a == b else transfer for b in range(ranks)) for a in range(ranks)),
        )

    def duration(self, a: Action) -> int | float:
        return self.op[a.stage][a.kind]


def unit_levels(schedule: Schedule, index: ComputeIndex | None = None) -> list[list[int]]:
    """ASAP start step of every compute action with unit durations (0-based), per rank.

    level(a) = 1 + max(level of its program-order predecessor and data producers).  Raises
    :class:`OrderCycle` when the compute graph is cyclic.
    """
    ones = dict.fromkeys(OpKind, 1)
    return [[t - 1 for t in row] for row in asap_finish(schedule, ones, index)]


def asap_finish(
    schedule: Schedule,
    durations: dict[OpKind, int] | None = None,
    index: ComputeIndex | None = None,
    costs: PlanCosts | None = None,
) -> list[list[int | float]]:
    """ASAP finish time of every compute action, per rank, with the given positive durations
    (per kind), or with ``costs`` (per stage and kind, plus a transfer time on every data
    dependency that crosses ranks; ``durations`` is then ignored).

    finish(a) = duration(a) + max(finish of its program-order predecessor, finish of each data
    producer plus the transfer time from its rank, or 0).  An :class:`~ppir.ir.Overlap` step
    is atomic: its first part also waits for the data producers of its second part, which
    follows it at once (so the step takes the sum of its parts), and its outputs leave when the
    whole step ends (a consumer of its first part waits for its second part).  Finish times strictly
    increase along each rank's program.  Raises :class:`OrderCycle` when the compute graph is
    cyclic.  Linear in the number of actions.
    """
    if costs is None:
        costs = PlanCosts.uniform(schedule.stages, schedule.ranks, durations)
    op, link = costs.op, costs.link
    idx = index or ComputeIndex.build(schedule)
    S = schedule.stages
    acts = idx.actions
    if len(op) < S or len(link) != schedule.ranks:
        raise ValueError(
            f"plan costs cover {len(op)} stages and {len(link)} ranks; the schedule "
            f"has {S} and {schedule.ranks}"
        )
    succs: dict[Loc, list[Loc]] = {}
    indeg: dict[Loc, int] = {}
    for r, prog in enumerate(acts):
        for i in range(len(prog)):
            preds = _preds(idx, S, r, i)
            indeg[(r, i)] = len(preds)
            for p in preds:
                succs.setdefault(p, []).append((r, i))
    start = [[0] * len(p) for p in acts]
    finish = [[0] * len(p) for p in acts]
    ready = deque(loc for loc, d in indeg.items() if d == 0)
    done = 0
    while ready:
        r, i = ready.popleft()
        done += 1
        a = acts[r][i]
        t = finish[r][i] = start[r][i] + op[a.stage][a.kind]
        row = link[r]
        for s in succs.get((r, i), ()):
            ts = t + row[s[0]]  # the diagonal is 0: no transfer within a rank
            if start[s[0]][s[1]] < ts:
                start[s[0]][s[1]] = ts
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
    if done != len(indeg):
        raise OrderCycle(_find_cycle(idx, S, {loc for loc, d in indeg.items() if d > 0}))
    return finish


def _preds(idx: ComputeIndex, S: int, r: int, i: int) -> list[Loc]:
    """What compute action (r, i) waits for: its program-order predecessor and its data
    producers; for the first part of an Overlap step also the producers of its second part, and
    a producer that is the first part of a step counts as the step's end (its second part)."""
    prog = idx.actions[r]
    data = idx.data_preds(prog[i], S)
    if (r, i + 1) in idx.joined:
        data += [p for p in idx.data_preds(prog[i + 1], S) if p != (r, i)]
    out = [(r, i - 1)] if i > 0 else []
    for p in data:
        end = (p[0], p[1] + 1)
        out.append(end if end in idx.joined and end != (r, i) else p)
    return out


def _find_cycle(idx: ComputeIndex, S: int, stuck: set[Loc]) -> list[Loc]:
    """A cycle among the stuck nodes (each has a stuck predecessor), rotated canonically."""

    def stuck_pred(loc: Loc) -> Loc:
        for p in _preds(idx, S, *loc):
            if p in stuck and p != loc:
                return p
        raise AssertionError("stuck node without stuck predecessor")

    loc = min(stuck)
    seen: dict[Loc, int] = {}
    path: list[Loc] = []
    while loc not in seen:
        seen[loc] = len(path)
        path.append(loc)
        loc = stuck_pred(loc)
    cycle = path[seen[loc] :]
    cycle.reverse()  # dependency order: each op waits on the previous one
    k = cycle.index(min(cycle))
    return cycle[k:] + cycle[:k]
