"""Single-process reference: the whole model on one device, the whole mini-batch at once.

Used by ``--verify-grads`` and the equivalence tests.  The reference builds every stage with the
same ``build_stage`` calls, runs them in order on the full mini-batch, applies ``loss_fn`` once
and calls ``backward``; pipelined gradients must match it up to floating-point reordering.
"""

from __future__ import annotations

import torch
from ppir.backends.cuda.model import build_stages


def reference_grads(model, num_stages: int, step: int, device):
    """(loss tensor, per-stage list of {param name: grad}) for ``make_batch(step)``."""
    mods = build_stages(model, list(range(num_stages)), num_stages, device, rank=-1)
    x, target = (t.to(device) for t in model.make_batch(step))
    for m in mods:
        x = m(x)
    loss = model.loss_fn(x, target).reshape(())
    loss.backward()
    grads = [
        {
            n: (p.grad if p.grad is not None else torch.zeros_like(p))
            for n, p in m.named_parameters()
            if p.requires_grad
        }
        for m in mods
    ]
    return loss.detach(), grads


def max_grad_diff(modules: list, stages: list[int], ref_grads: list[dict]) -> tuple[float, str]:
    """Largest |pipelined grad - reference grad| over the given stage modules, and where."""
    worst, where = 0.0, ""
    for mod, s in zip(modules, stages):
        for name, p in mod.named_parameters():
            if not p.requires_grad:
                continue
            got = p.grad if p.grad is not None else torch.zeros_like(p)
            diff = (got.detach() - ref_grads[s][name].to(got.device)).abs().max().item()
            if diff > worst or not where:
                worst, where = max(worst, diff), f"stage {s} {name}"
    return worst, where
