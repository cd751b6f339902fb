"""Gradient clipping across a pipeline: the global L2 norm of the model's gradients, each
parameter counted once, and every rank scaled by the same factor.

Contract of :func:`clip_grad_norm_` (``PipelineRuntime.clip_grad_norm_``), called after
``step`` (gradients reduced over data-parallel replicas and summed over tied copies) and before
the optimizer:

* the norm is ``sqrt(sum of g**2)`` over every trainable parameter of the whole model: each
  rank adds its own parameters, a copy tied across ranks (embedding and head) only on the
  lowest rank holding it, copies on one rank once (``PipelineRuntime.parameters``); one
  all-reduce over the pipeline group sums the ranks (data-parallel replicas hold equal,
  already averaged gradients, so they compute the same norm);
* when the norm exceeds ``max_norm``, every gradient is multiplied by
  ``max_norm / (norm + 1e-6)``, as ``torch.nn.utils.clip_grad_norm_`` does on one process;
* it returns the norm before clipping, the same on every rank.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from ppir.torch.errors import comm_error
from ppir.torch.procgroup import wait_all


def clip_grad_norm_(rt, max_norm: float) -> float:
    """Clip ``rt``'s gradients to a global L2 norm of ``max_norm`` (see the module doc)."""
    if not max_norm > 0:
        raise ValueError(f"max_norm must be positive, got {max_norm!r}")
    params = rt.parameters()
    skip = set()
    for t in rt.reducer.tied:  # one copy counted, on the lowest holder only
        lowest = not t.others or min(t.others) > rt.rank
        skip.update(id(p) for p in (t.local[1:] if lowest else t.local))
    grads = [p.grad for p in params if p.grad is not None]
    counted = [p.grad for p in params if p.grad is not None and id(p) not in skip]
    total = torch.zeros((), dtype=torch.float64, device=rt.device)
    for g in counted:
        total += g.detach().double().pow(2).sum()
    if rt.distributed:
        try:
            work = dist.all_reduce(total, group=rt.pp_group, async_op=True)
            wait_all([work], rt.timeout_s)
        except RuntimeError as e:
            raise comm_error(f"rank {rt.rank}: clip_grad_norm_", (), e, rt.timeout_s) from None
    norm = float(total.sqrt())
    coef = max_norm / (norm + 1e-6)
    if coef < 1:
        for g in grads:
            g.detach().mul_(coef)
    return norm
