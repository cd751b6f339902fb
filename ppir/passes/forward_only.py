"""The ``forward-only`` pass: the evaluation program of a training schedule."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ppir.ir import Schedule, deps
from ppir.ir.shape import require_schedule


@dataclass(frozen=True)
class ForwardOnly:
    """Keep each rank's forwards in their training order and drop everything else: backwards
    (B, I, W; the forward half of an overlapped F&B step stays), communication and gradient
    reductions.  The output is a compute-only evaluation program
    (:attr:`ppir.ir.Schedule.forward_only`) for lower-comms to lower, what Megatron's
    ``forward_only=True`` and torch.distributed.pipelining's ``eval()`` run: the training
    order without its backward half.  It comes first in a pipeline; a lowered input is taken
    for its compute order.

    Its output verifies whenever the input does: its waits (program order between forwards,
    and each forward's wait for the previous stage's forward) are waits of the input already,
    so a cycle among them would be one of the input's."""

    name = "forward-only"
    first = True  # the pass driver puts it nowhere else

    def apply(self, schedule: Schedule) -> Schedule:
        require_schedule(schedule, "ForwardOnly.apply")
        progs = []
        for r in range(schedule.ranks):
            kept = (deps.forward_of(it) for it in schedule.compute_items(r))
            progs.append(tuple(a for a in kept if a is not None))
        return replace(schedule, programs=tuple(progs), forward_only=True)
