"""Where a stage's gradients are reduced across data-parallel replicas (``REDUCE_GRAD``,
:class:`ppir.ir.Reduce`): by default right after the stage's last backward (B, or W when the
backward is split) in its rank's program.

This is the one place that states the default.  :func:`place_reduces` puts the IR's
:class:`~ppir.ir.Reduce` items there (the ``place-reduce`` pass), the execution plan turns them
into ``reduce`` instructions, and the torch CSV writer writes torch's ``sREDUCE_GRAD`` at the
same points.
"""

from __future__ import annotations

from collections.abc import Sequence

from ppir.ir.deps import WEIGHT_GRAD
from ppir.ir.types import Item, Reduce, Schedule, item_actions


def reduce_points(items: Sequence[Item]) -> dict[int, int]:
    """``{stage: i}``: the index of the last item of ``items`` (one rank's program, or its
    flattened actions) holding a B or W of that stage.  Stages without B or W are absent."""
    last: dict[int, int] = {}
    for i, it in enumerate(items):
        for a in item_actions(it):
            if a.kind in WEIGHT_GRAD:
                last[a.stage] = i
    return last


def reduce_order(items: Sequence[Item]) -> list[tuple[int, int]]:
    """``[(i, stage), ...]`` in program order: after item ``i`` the stage's gradients are
    complete (several stages may complete at the same item; they follow in stage order)."""
    return sorted((i, s) for s, i in reduce_points(items).items())


def has_reduces(schedule: Schedule) -> bool:
    return any(isinstance(it, Reduce) for prog in schedule.programs for it in prog)


def place_reduces(schedule: Schedule) -> Schedule:
    """``schedule`` with a :class:`Reduce` after each stage's last backward on every rank; a
    schedule that already holds Reduce items is returned as it is (its placement is the
    author's, and the verifier checks it)."""
    if has_reduces(schedule):
        return schedule
    programs = []
    for prog in schedule.programs:
        after: dict[int, list[int]] = {}
        for i, s in reduce_order(prog):
            after.setdefault(i, []).append(s)
        out: list[Item] = []
        for i, it in enumerate(prog):
            out.append(it)
            out.extend(Reduce(s) for s in after.get(i, ()))
        programs.append(tuple(out))
    return schedule.replace_programs(tuple(programs))
