"""F&B: a forward and a backward run back to back as one timed step, per piece, on every rank
at once (no messages), for schedules that overlap them (:func:`measure_fb`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from ppir.profile.transfer import barrier
from ppir.torch import values as V
from ppir.torch.shapes import zeros_like_spec

if TYPE_CHECKING:
    from ppir.profile.worker import Runner


def measure_fb(run: Runner, inputs, targets, reps: int) -> None:
    """Per piece: a forward and a backward back to back as one timed step (F&B), all ranks at
    once (no messages: the gradient coming in is ones)."""
    xs = []
    assert run.of_stage == {run.rank: list(range(len(run.pieces)))}, "1F1B's runner only"
    # in 1F1B stage r is rank r's chain: the spec at stage boundary r is this rank's input
    x = inputs[0] if run.rank == 0 else zeros_like_spec(run.meta[run.rank], run.device)
    with torch.no_grad():
        for mod in run.pieces:
            xs.append(x)
            x = V.call_stage(mod, x)
    for j, mod in enumerate(run.pieces):

        def fwd(j=j):
            _, _, outs, is_loss = run.forward_piece(j, xs[j], targets[0], 0)
            return outs, is_loss

        def bwd(out):  # the gradient coming in is ones
            outs, is_loss = out
            ys = outs if is_loss else [y for y in outs if y.requires_grad]
            if ys:
                torch.autograd.backward(ys, None if is_loss else [torch.ones_like(y) for y in ys])

        for _ in range(reps):
            y0 = fwd()
            if run.world > 1:
                barrier(run, f"rank {run.rank}: timing F&B of stage {run.first + j}")
            (_, y1), dt = run._timed(lambda y0=y0: (bwd(y0), fwd()))
            bwd(y1)
            run.samples[j].FB.append(dt)
            mod.zero_grad(set_to_none=True)
