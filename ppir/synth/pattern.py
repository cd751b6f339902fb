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

from ppir.ir import Action, OpKind, deps

_KIND_ORDER = {OpKind.F: 0, OpKind.I: 1, OpKind.W: 2}


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
    def __init__(self, spec: PatternSpec):
        self.P, self.M, self.S = spec.ranks, spec.microbatches, len(spec.placement)
        self.rank_of = spec.placement
        self.chunks = [[s for s in range(self.S) if spec.placement[s] == r] for r in range(self.P)]
        self.slot: dict[Action, int] = {}
        for table in spec.slots:
            self.slot.update(table)
        self.wslots: list[list[int]] = [[] for _ in range(self.P)]  # anonymous weight passes

    # ------------------------------------------------------------------ views
    def passes(self, r: int) -> list[tuple[int, Action]]:
        return sorted((t, a) for a, t in self.slot.items() if self.rank_of[a.stage] == r)

    def producers(self, a: Action) -> list[Action]:
        """The passes ``a`` consumes (:func:`ppir.ir.deps.inputs`; backwards are I here)."""
        return [
            Action(p.stage, OpKind.I if OpKind.I in p.kinds else p.kinds[0], p.mb)
            for p in deps.inputs(a, self.S)
        ]

    def peak(self, r: int, with_w: bool) -> int:
        """Peak chunk activations of rank r; without weight passes, each free slot retires a
        pending one."""
        events = [(t, a.kind) for t, a in self.passes(r)]
        if with_w:
            events += [(t, OpKind.W) for t in self.wslots[r]]
        events.sort()
        held = best = pending = 0
        last = -1
        for t, kind in events:
            if not with_w:
                retired = min(t - last - 1, pending)
                held, pending = held - retired, pending - retired
            if kind is OpKind.F:
                held += 1
            elif kind is OpKind.I:
                pending += 1
            else:
                held -= 1
            best, last = max(best, held), t
        return best

    # ------------------------------------------------------------------ steps
    def fill(self) -> None:
        for r in range(self.P):
            row = self.passes(r)
            busy = {t: a for t, a in row}
            pending, out = 0, []
            for t in range(row[-1][0] + 1):
                a = busy.get(t)
                if a is not None:
                    pending += a.kind is OpKind.I
                elif pending:
                    out.append(t)
                    pending -= 1
            out.extend(range(row[-1][0] + 1, row[-1][0] + 1 + pending))
            self.wslots[r] = out

    def reorder(self, with_w: bool, warmup: bool) -> None:
        cap = max(self.peak(r, with_w) for r in range(self.P))
        items = [(t, self.rank_of[a.stage], _KIND_ORDER[a.kind], a) for a, t in self.slot.items()]
        if with_w:
            items += [(t, r, 2, k) for r in range(self.P) for k, t in enumerate(self.wslots[r])]
        items.sort(key=lambda x: x[:3])
        occupied: list[set[int]] = [set() for _ in range(self.P)]
        phase = 0  # 0 warm-up, 1 stable, 2 cool-down
        first_backward = Action(0, OpKind.I, 0)
        for t0, r, _, item in items:
            is_w = isinstance(item, int)
            if item == first_backward and phase == 0:
                phase = 1
            move = phase == 2 or (phase == 0 and warmup)
            if (
                phase == 1
                and not is_w
                and item.kind is OpKind.F
                and item.mb == self.M - 1
                and item.stage == self.chunks[r][0]
            ):
                phase = 2
            if move:
                self._move(r, item, t0, self._earliest(r, item), occupied[r], cap, with_w)
            occupied[r].add(self.wslots[r][item] if is_w else self.slot[item])

    def _earliest(self, r: int, item: Action | int) -> int:
        if isinstance(item, int):  # the k-th weight pass follows the k-th I and the (k-1)-th W
            i_slots = sorted(t for t, a in self.passes(r) if a.kind is OpKind.I)
            deps = [i_slots[item]] + ([self.wslots[r][item - 1]] if item else [])
        else:
            deps = [self.slot[p] for p in self.producers(item)]
            if item.mb:
                deps.append(self.slot[Action(item.stage, item.kind, item.mb - 1)])
        return max(deps, default=-1) + 1

    def _move(self, r, item, t0, lo, occupied, cap, with_w) -> None:
        def put(t):
            if isinstance(item, int):
                self.wslots[r][item] = t
            else:
                self.slot[item] = t

        for t in range(lo, t0):
            if t not in occupied:
                put(t)
                if self.peak(r, with_w) <= cap:
                    return
        put(t0)

    def squeeze(self) -> None:
        """Every pass as early as its rank's order and its producers allow, at unit cost."""
        rows = []
        for r in range(self.P):
            row = [(t, a) for t, a in self.passes(r)] + [(t, None) for t in self.wslots[r]]
            rows.append([a for _, a in sorted(row, key=lambda x: x[0])])
        end: dict[Action, int] = {}
        pos, free = [0] * self.P, [0] * self.P
        new_w: list[list[int]] = [[] for _ in range(self.P)]
        left = sum(len(row) for row in rows)
        while left:
            progressed = False
            for r, row in enumerate(rows):
                while pos[r] < len(row):
                    a = row[pos[r]]
                    preds = [] if a is None else self.producers(a)
                    if any(p not in end for p in preds):
                        break
                    start = max([free[r]] + [end[p] for p in preds])
                    if a is None:
                        new_w[r].append(start)
                    else:
                        self.slot[a], end[a] = start, start + 1
                    free[r], pos[r], left = start + 1, pos[r] + 1, left - 1
                    progressed = True
            if not progressed:  # cannot happen for a validated block
                raise AssertionError("pattern order has a cycle")
        self.wslots = new_w

    def name_weights(self) -> list[list[Action]]:
        return [self._named(r) for r in range(self.P)]

    def _named(self, r: int) -> list[Action]:
        row = self.passes(r)
        busy = {t: a for t, a in row}
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


def validate(spec: PatternSpec) -> None:
    """Raise :class:`PatternError` for a collision or a pass placed before its producer."""
    pipe = _Pipeline(spec)
    for r, table in enumerate(spec.slots):
        seen: dict[int, Action] = {}
        for a, t in sorted(table.items(), key=lambda x: x[1]):
            if t in seen:
                raise PatternError(f"{seen[t]} and {a} both take slot {t}", r, (seen[t], a))
            seen[t] = a
            for p in pipe.producers(a):
                if pipe.slot[p] >= t:
                    raise PatternError(
                        f"{a} at slot {t} consumes {p}, which comes at slot {pipe.slot[p]}",
                        r,
                        (a, p),
                    )


def pattern_schedule(spec: PatternSpec) -> list[list[Action]]:
    """Each rank's compute order built from the building block (see the module docstring)."""
    validate(spec)
    pipe = _Pipeline(spec)
    pipe.fill()
    pipe.reorder(with_w=True, warmup=True)
    pipe.squeeze()
    pipe.wslots = [[] for _ in range(pipe.P)]
    pipe.reorder(with_w=False, warmup=False)
    pipe.fill()
    pipe.squeeze()
    return pipe.name_weights()
