"""Where a stage's gradients are complete, so that they can be reduced across data-parallel
replicas: right after the stage's last backward (B or W) in its rank's program.

This is the one place that states the rule.  The torch CSV writer puts torch's ``sREDUCE_GRAD``
there and the execution plan its ``reduce`` instruction.
"""

from __future__ import annotations

from collections.abc import Sequence

from ppir.ir.types import Item, OpKind, item_actions

GRAD_KINDS = (OpKind.B, OpKind.W)
"""The backward kinds that write weight gradients (I computes only the input gradient)."""


def reduce_points(items: Sequence[Item]) -> dict[int, int]:
    """``{stage: i}``: the index of the last item of ``items`` (one rank's program, or its
    flattened actions) holding a B or W of that stage.  The stage's gradients are complete after
    item ``i``.  Stages without B or W on this rank are absent."""
    last: dict[int, int] = {}
    for i, it in enumerate(items):
        for a in item_actions(it):
            if a.kind in GRAD_KINDS:
                last[a.stage] = i
    return last


def reduce_order(items: Sequence[Item]) -> list[tuple[int, int]]:
    """``[(i, stage), ...]`` in program order: after item ``i`` the stage's gradients are
    complete (several stages may complete at the same item; they follow in stage order)."""
    return sorted((i, s) for s, i in reduce_points(items).items())
