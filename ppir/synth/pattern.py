"""Schedules from a repeating building block (Qi et al., NeurIPS'24, "Pipeline Parallelism
with Controllable Memory", section 3: building block, repeating, squeezing, reordering).

Input: for every rank, the time slot of each forward ``F`` and backward-input ``I`` pass of
every microbatch (the building block laid out for microbatch 0 and repeated, one slot per pass
at unit cost).  Weight passes ``W`` are not placed: they fill free slots.  Then:

1. *fill*: walking a rank's slots in order, a free slot runs one pending weight pass (one whose
   ``I`` came earlier); those left over follow the rank's last pass;
2. *reorder the warm-up and the cool-down*: every pass of the whole pipeline, in slot order
   (ties: the lower rank), that lies before the stable phase or after it moves to the earliest
   free slot after its producers (and after the previous microbatch's same pass) at which the
   rank's peak memory stays within the pipeline's peak before reordering.  The stable phase
   runs from stage 0's first backward to the next forward of the last microbatch on a first
   chunk.  Weight passes take part as anonymous slots: the k-th follows the rank's k-th ``I``;
3. *squeeze*: every pass starts as early as the order and the producers allow (unit costs);
4. the weight passes are set aside and the cool-down is reordered again, memory counted as if
   each free slot ran a pending weight pass; refill, squeeze;
5. the final fill gives the weight passes their names: at a free slot the pending one of the
   rank's later chunk runs first, the oldest of a chunk first; the order is slot order.

Memory is counted in chunk activations: a forward takes one, its weight pass gives it back.
These steps and their tie-breaks follow the V-Half/V-Min authors' code (the sail-sg
zero-bubble-pipeline-parallelism repository), so that the orders are the authors' own; the
tests compare them with a port of that code.  Errors: :class:`PatternError`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ppir.ir import Action, OpKind, Schedule, deps

_KIND_ORDER = {OpKind.F: 0, OpKind.I: 1, OpKind.W: 2}


def _first(x):
    return x[0]


class PatternError(Exception):
    """The building block cannot be repeated: two passes share a slot, or a pass comes no
    later than one whose output it consumes.  ``rank`` and ``actions`` name the culprits."""

    def __init__(self, message: str, rank: int, actions: tuple[Action, ...]):
        super().__init__(message)
        self.rank, self.actions = rank, actions


@dataclass(frozen=True)
class PatternSpec:
    """``slots[r]`` maps every F and I action of rank r to its slot (non-negative)."""

    ranks: int
    microbatches: int
    placement: tuple[int, ...]
    slots: tuple[dict[Action, int], ...]


class _Pipeline:
    """The passes as integers: ``acts[i]`` is pass i (the spec's own F and I actions),
    ``slot[i]`` its slot; weight passes are the anonymous ``wslots``."""

    def __init__(self, spec: PatternSpec):
        self.P, self.M, self.S = spec.ranks, spec.microbatches, len(spec.placement)
        self.rank_of = spec.placement
        self.chunks = [[s for s in range(self.S) if spec.placement[s] == r] for r in range(self.P)]
        self.acts: list[Action] = []
        self.index: dict[Action, int] = {}
        self.slot: list[int] = []
        for table in spec.slots:
            for a, t in table.items():
                if a not in self.index:
                    self.index[a] = len(self.acts)
                    self.acts.append(a)
                    self.slot.append(t)
                else:
                    self.slot[self.index[a]] = t
        self.rank = [self.rank_of[a.stage] for a in self.acts]
        self.order = [_KIND_ORDER[a.kind] for a in self.acts]  # F 0, I 1
        self.on_rank: list[list[int]] = [[] for _ in range(self.P)]
        for i, r in enumerate(self.rank):
            self.on_rank[r].append(i)
        self._producers: list[list[int] | None] = [None] * len(self.acts)
        self.wslots: list[list[int]] = [[] for _ in range(self.P)]  # anonymous weight passes

    # ------------------------------------------------------------------ views
    def passes(self, r: int) -> list[tuple[int, int]]:
        """Rank r's (slot, pass) in slot order (a rank's slots are distinct)."""
        slot = self.slot
        return sorted([(slot[i], i) for i in self.on_rank[r]], key=_first)

    def producers(self, i: int) -> list[int]:
        """The passes pass i consumes (:func:`ppir.ir.deps.inputs`; backwards are I here)."""
        out = self._producers[i]
        if out is None:
            index = self.index
            out = self._producers[i] = [
                index[Action(p.stage, OpKind.I if OpKind.I in p.kinds else p.kinds[0], p.mb)]
                for p in deps.inputs(self.acts[i], self.S)
            ]
        return out

    def peak(self, r: int, with_w: bool) -> int:
        """Peak chunk activations of rank r; without weight passes, each free slot retires a
        pending one."""
        slot, order = self.slot, self.order
        events = [(slot[i], order[i]) for i in self.on_rank[r]]  # a slot's events: F, I, W
        if with_w:  # F takes a chunk activation, W gives it back
            events += [(t, 2) for t in self.wslots[r]]
            events.sort()
            held = best = 0
            for _, k in events:
                held += 1 - k
                if held > best:
                    best = held
            return best
        events.sort()
        held = best = pending = 0
        last = -1
        for t, k in events:
            retired = t - last - 1
            if retired > pending:
                retired = pending
            held -= retired
            pending -= retired
            if k == 0:
                held += 1
                if held > best:
                    best = held
            else:
                pending += 1
            last = t
        return best

    # ------------------------------------------------------------------ steps
    def fill(self) -> None:
        order = self.order
        for r in range(self.P):
            row = self.passes(r)
            busy = {t: i for t, i in row}
            pending, out = 0, []
            for t in range(row[-1][0] + 1):
                i = busy.get(t)
                if i is not None:
                    pending += order[i] == 1
                elif pending:
                    out.append(t)
                    pending -= 1
            out.extend(range(row[-1][0] + 1, row[-1][0] + 1 + pending))
            self.wslots[r] = out

    def reorder(self, with_w: bool, warmup: bool) -> None:
        """Items are ``(slot, rank, kind order, is_w, pass or weight index)``."""
        cap = max(self.peak(r, with_w) for r in range(self.P))
        rank, order, acts = self.rank, self.order, self.acts
        items = [(t, rank[i], order[i], False, i) for i, t in enumerate(self.slot)]
        if with_w:
            items += [
                (t, r, 2, True, k) for r in range(self.P) for k, t in enumerate(self.wslots[r])
            ]
        items.sort(key=lambda x: x[:3])
        occupied: list[set[int]] = [set() for _ in range(self.P)]
        phase = 0  # 0 warm-up, 1 stable, 2 cool-down
        first_backward = self.index.get(Action(0, OpKind.I, 0))
        for t0, r, _, is_w, item in items:
            if not is_w and item == first_backward and phase == 0:
                phase = 1
            move = phase == 2 or (phase == 0 and warmup)
            if phase == 1 and not is_w:
                a = acts[item]
                if a.kind is OpKind.F and a.mb == self.M - 1 and a.stage == self.chunks[r][0]:
                    phase = 2
            if move:
                lo = self._earliest(r, is_w, item)
                self._move(r, is_w, item, t0, lo, occupied[r], cap, with_w)
            occupied[r].add(self.wslots[r][item] if is_w else self.slot[item])

    def _earliest(self, r: int, is_w: bool, item: int) -> int:
        slot = self.slot
        if is_w:  # the k-th weight pass follows the k-th I and the (k-1)-th W
            i_slots = sorted(slot[i] for i in self.on_rank[r] if self.order[i] == 1)
            deps = [i_slots[item]] + ([self.wslots[r][item - 1]] if item else [])
        else:
            deps = [slot[p] for p in self.producers(item)]
            a = self.acts[item]
            if a.mb:
                deps.append(slot[self.index[Action(a.stage, a.kind, a.mb - 1)]])
        return max(deps, default=-1) + 1

    def _move(self, r, is_w, item, t0, lo, occupied, cap, with_w) -> None:
        where = self.wslots[r] if is_w else self.slot
        for t in range(lo, t0):
            if t not in occupied:
                where[item] = t
                if self.peak(r, with_w) <= cap:
                    return
        where[item] = t0

    def squeeze(self) -> None:
        """Every pass as early as its rank's order and its producers allow, at unit cost: the
        timeline of the rows' compute graph (:func:`ppir.analysis.timeline.run`).  The k-th
        weight pass of a rank, anonymous here, is timed as the W of the rank's k-th I, which
        it follows (fill and reorder keep it after): it consumes only that I, which the
        rank's order already puts before it."""
        from ppir.analysis.costs import Costs
        from ppir.analysis.timeline import run
        from ppir.ir.graph import build_graph

        rows, programs = [], []
        for r in range(self.P):
            row = self.passes(r) + [(t, -1) for t in self.wslots[r]]  # -1: a weight pass
            ids = [i for _, i in sorted(row, key=_first)]
            backwards = [self.acts[i] for i in ids if i >= 0 and self.order[i] == 1]
            prog, k = [], 0
            for i in ids:
                if i >= 0:
                    prog.append(self.acts[i])
                    continue
                a = backwards[k]
                k += 1
                prog.append(Action(a.stage, OpKind.W, a.mb))
            rows.append(ids)
            programs.append(tuple(prog))
        s = Schedule("pattern", (), self.P, self.S, self.M, tuple(self.rank_of), tuple(programs))
        unit = {OpKind.F: 1, OpKind.I: 1, OpKind.W: 1}
        g = build_graph(s)
        tl = run(g, Costs((unit,) * self.S))
        if not tl.complete:  # cannot happen for a validated block
            raise AssertionError("pattern order has a cycle")
        new_w: list[list[int]] = [[] for _ in range(self.P)]
        for r, (ids, nodes) in enumerate(zip(rows, g.rank_nodes)):
            for i, v in zip(ids, nodes):
                if i >= 0:
                    self.slot[i] = tl.start[v]
                else:
                    new_w[r].append(tl.start[v])
        self.wslots = new_w

    def name_weights(self) -> list[list[Action]]:
        return [self._named(r) for r in range(self.P)]

    def _named(self, r: int) -> list[Action]:
        row = self.passes(r)
        busy = {t: self.acts[i] for t, i in row}
        chunk = {s: c for c, s in enumerate(self.chunks[r])}
        pending: list[Action] = []
        order: list[Action] = []

        def take() -> Action:  # the later chunk's first, the oldest of a chunk first
            best = max(pending, key=lambda i: (chunk[i.stage], -i.mb))
            pending.remove(best)
            return Action(best.stage, OpKind.W, best.mb)

        for t in range(row[-1][0] + 1):
            a = busy.get(t)
            if a is not None:
                order.append(a)
                if a.kind is OpKind.I:
                    pending.append(a)
            elif pending:
                order.append(take())
        while pending:
            order.append(take())
        return order


def validate(spec: PatternSpec, pipe: _Pipeline | None = None) -> None:
    """Raise :class:`PatternError` for a collision or a pass placed before its producer
    (``pipe``: the spec's unchanged pipeline, when the caller made one)."""
    pipe = pipe or _Pipeline(spec)
    for r, table in enumerate(spec.slots):
        seen: dict[int, Action] = {}
        for a, t in sorted(table.items(), key=lambda x: x[1]):
            if t in seen:
                raise PatternError(f"{seen[t]} and {a} both take slot {t}", r, (seen[t], a))
            seen[t] = a
            for i in pipe.producers(pipe.index[a]):
                p, at = pipe.acts[i], pipe.slot[i]
                if at >= t:
                    raise PatternError(
                        f"{a} at slot {t} consumes {p}, which comes at slot {at}", r, (a, p)
                    )


def pattern_schedule(spec: PatternSpec) -> list[list[Action]]:
    """Each rank's compute order built from the building block (see the module docstring)."""
    pipe = _Pipeline(spec)
    validate(spec, pipe)
    pipe.fill()
    pipe.reorder(with_w=True, warmup=True)
    pipe.squeeze()
    pipe.wslots = [[] for _ in range(pipe.P)]
    pipe.reorder(with_w=False, warmup=False)
    pipe.fill()
    pipe.squeeze()
    return pipe.name_weights()
