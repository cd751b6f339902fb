"""The value specs at a profile's stage boundaries (:func:`propagate_shapes`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ppir.torch import values as V
from ppir.torch.shapes import broadcast_spec, made_by, trace_stage, zeros_like_spec

if TYPE_CHECKING:
    from ppir.profile.worker import Runner


def propagate_shapes(run: Runner, sample, device) -> None:
    """Each stage's input spec, stage by stage: the rank holding a stage traces its pieces (one
    no-grad forward, as the runtime infers boundary shapes: :mod:`ppir.torch.shapes`) from the
    spec of its input, records their output sizes and tells every rank (collective)."""
    place, S = run.schedule.placement, run.schedule.stages
    for b in range(1, S + 1):  # b: the stage after the one traced (S: none, no spec to tell)
        src = made_by(b, S)  # the stage traced; its input is the data, or boundary src
        mine = None
        if place[src] == run.rank:
            x = sample if made_by(src, S) is None else zeros_like_spec(run.meta[src], device)
            for j in run.of_stage[src]:
                mine = trace_stage(run.pieces[j], x, run.index[j], run.rank)
                run.samples[j].out_bytes = V.value_bytes(mine)
                x = zeros_like_spec(mine, device)
        if b < S:
            run.meta[b] = broadcast_spec(mine, place[src], None, device, run.timeout_s, run.rank)
