"""Gradient clipping across a pipeline: the global norm of the model's gradients (L2 by
default), each parameter counted once, and every rank scaled by the same factor.

Contract of :func:`clip_grad_norm_` (``PipelineRuntime.clip_grad_norm_``), called after
``step`` (gradients reduced over data-parallel replicas and summed over tied copies) and before
the optimizer:

* the norm is ``(sum of |g|**p) ** (1/p)`` for ``norm_type`` p (2 by default), or the
  largest ``|g|`` for ``inf``, over every trainable parameter of the whole model: each rank
  adds its own parameters, a copy tied across ranks (embedding and head) only on the lowest
  rank holding it, copies on one rank once (``PipelineRuntime.parameters``); one all-reduce
  over the pipeline group (a sum, or a max for ``inf``) combines the ranks (data-parallel
  replicas hold equal, already averaged gradients, so they compute the same norm);
* after a step inside ``no_sync()`` and before the synchronising step that ends the window it
  raises (the gradients are not yet reduced), before any message, on every rank; also with one
  replica and no tied copies, where the local gradients happen to be the model's, so that a
  loop that clips inside the window fails on the first run rather than once it scales out;
* when the norm exceeds ``max_norm``, every gradient is multiplied by
  ``max_norm / (norm + 1e-6)``, as ``torch.nn.utils.clip_grad_norm_`` does on one process;
  with ``error_if_nonfinite`` a norm that is nan or inf raises (as torch's), on every rank;
* it returns the norm before clipping, the same on every rank, as torch's does: a 0-dim
  tensor (the gradients' dtype, on the runtime's device; ``.item()`` or ``float()`` reads it).
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from ppir.torch.errors import CommError, comm_error
from ppir.torch.procgroup import wait_all

ORDER = (
    "every rank of the pipeline calls clip_grad_norm_() together, after the same steps: a peer "
    "still in step() never answers"
)


def clip_grad_norm_(
    rt, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False
) -> torch.Tensor:
    """Clip ``rt``'s gradients to a global ``norm_type`` norm of ``max_norm`` (see the module
    doc); the norm before clipping."""
    if not max_norm > 0:
        raise ValueError(f"max_norm must be positive, got {max_norm!r}")
    if rt.reducer.unsynced:  # every rank ran the same steps, so every rank refuses here
        raise RuntimeError(
            "clip_grad_norm_ after a step inside no_sync(): the gradients are each replica's "
            "local sums, not yet reduced over data-parallel replicas nor summed over tied "
            "copies, so their norm is not the model's; clip after the first step outside "
            "no_sync(), which reduces everything accumulated"
        )
    p = float(norm_type)
    if not p > 0:  # nan too
        raise ValueError(f"norm_type must be positive (or inf), got {norm_type!r}")
    params = rt.parameters()
    skip = {id(q) for t in rt.reducer.tied for q in t.redundant(rt.rank)}  # one copy counted
    grads = [q.grad for q in params if q.grad is not None]
    counted = [q.grad for q in params if q.grad is not None and id(q) not in skip]
    total = torch.zeros((), dtype=torch.float64, device=rt.device)
    for g in counted:
        a = g.detach().double().abs()
        total = torch.maximum(total, a.max()) if p == math.inf else total + a.pow(p).sum()
    if rt.distributed:
        op = dist.ReduceOp.MAX if p == math.inf else dist.ReduceOp.SUM
        try:
            work = dist.all_reduce(total, op=op, group=rt.pp_group, async_op=True)
            wait_all([work], rt.timeout_s)
        except RuntimeError as e:
            err = comm_error(f"rank {rt.rank}: clip_grad_norm_", (), e, rt.timeout_s)
            if err.timeout:  # the likeliest cause: a peer still in a step this rank did not run
                err = CommError(f"{err}; {ORDER}", err.peers, True)
            raise err from None
    norm = float(total) if p == math.inf else float(total) ** (1 / p)
    if error_if_nonfinite and not math.isfinite(norm):
        raise RuntimeError(
            f"the total norm of order {norm_type} of the gradients is {norm}, so they cannot be "
            "clipped (error_if_nonfinite=True, as torch.nn.utils.clip_grad_norm_ says)"
        )
    coef = max_norm / (norm + 1e-6)
    if coef < 1:
        for g in grads:
            g.detach().mul_(coef)
    dtype = grads[0].dtype if grads else torch.get_default_dtype()
    return torch.tensor(norm, dtype=dtype, device=rt.device)
