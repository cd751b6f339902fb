"""Single-process reference: the whole model on one device, the whole global batch at once.

Used by ``--verify-grads`` and the equivalence tests.  The reference is a deep copy of every
stage built by the model's ``build_stage`` (one copy of the list, so parameters tied between
stages stay one tensor), run in order on the full global batch; ``loss_fn`` once, then
``backward``.  Pipelined (and data-parallel) gradients must match it up to floating-point
reordering, and after N optimizer steps so must the parameters.
"""

from __future__ import annotations

import copy
from typing import NamedTuple

import torch

from ppir.torch import values as V
from ppir.torch.model import build_stages, global_batch
from ppir.torch.values import call_loss, call_stage


def reference_modules(model, num_stages: int, device) -> list:
    """A private copy of all stages (tied parameters stay tied inside the copy)."""
    return copy.deepcopy(build_stages(model, list(range(num_stages)), num_stages, device, rank=-1))


def reference_step(mods: list, model, step: int, device, keep: dict | None = None):
    """Forward and backward of ``make_batch(step)`` through ``mods``; the loss.  An exception
    of the model's code propagates with its traceback and a note saying that it came from this
    reference, on the whole global batch (a model that holds a microbatch's size fails only
    here, after the pipelined step ran).  ``keep`` (a dict) receives the last stage's output
    and the targets, for :func:`loss_split`."""
    x, target = global_batch(model, step, device, -1)
    here = f"--verify-grads' single-process reference, on the whole batch of make_batch({step})"
    for s, m in enumerate(mods):
        x = call_stage(m, x, lambda s=s: f"{here}: stage {s}'s forward, given {{}}")
    loss = call_loss(model.loss_fn, x, target, lambda: f"{here}: loss_fn(output, target)")
    loss = loss.reshape(())
    loss.backward()
    if keep is not None:
        keep["output"], keep["target"] = x, target
    return loss.detach()


class LossSplit(NamedTuple):
    """:func:`loss_split`'s answer: the whole batch's loss, the mean of its slices' losses, and
    the machine epsilon of the loss's dtype (0.0 for one that is no float)."""

    whole: float
    mean: float
    eps: float

    def differs(self, tol: float) -> bool:
        """Whether the two differ by more than ``tol`` and more than the round-off of the loss's
        dtype: a mean summed in two orders differs by a few ulps of its size (1e-2 on a float32
        MSE of 1e6, above a tolerance of 1e-5), which says nothing of how the loss weighs the
        samples."""
        noise = 64 * self.eps * max(abs(self.whole), abs(self.mean))
        return abs(self.whole - self.mean) > max(tol, noise)


def loss_split(loss_fn, output, target, parts: int) -> LossSplit | None:
    """(``loss_fn`` of the whole batch, the mean of ``loss_fn`` over its ``parts`` equal slices
    along dim 0, both from the same ``output``, and the loss dtype's epsilon): equal up to
    round-off when the loss is a mean over equally weighted samples, as pipelining needs (the
    runtime averages the microbatches' losses); not for a mean over a count that varies per
    slice (cross-entropy over labels with an ``ignore_index``, padding).  None where the output
    or targets do not split so."""
    try:
        with torch.no_grad():
            outs = V.split_batch(output, parts, "the output")
            targets = V.split_batch(target, parts, "the targets")
            loss = loss_fn(output, target).reshape(())
            whole = float(loss)
            mean = sum(float(loss_fn(o, t).reshape(())) for o, t in zip(outs, targets)) / parts
    except Exception:  # noqa: BLE001 - only a hint for a failure already found
        return None
    eps = torch.finfo(loss.dtype).eps if loss.is_floating_point() else 0.0
    return LossSplit(whole, mean, eps)


def stage_grads(mods: list) -> list[dict]:
    return [
        {
            n: (p.grad if p.grad is not None else torch.zeros_like(p))
            for n, p in m.named_parameters()
            if p.requires_grad
        }
        for m in mods
    ]


def reference_grads(model, num_stages: int, step: int, device):
    """(loss tensor, per-stage list of {param name: grad}) for ``make_batch(step)``."""
    mods = reference_modules(model, num_stages, device)
    loss = reference_step(mods, model, step, device)
    return loss, stage_grads(mods)


def unique_parameters(mods: list) -> list:
    seen, out = set(), []
    for m in mods:
        for p in m.parameters():
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                out.append(p)
    return out


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


def max_param_diff(modules: list, stages: list[int], ref_mods: list) -> tuple[float, str]:
    """Largest |pipelined parameter - reference parameter| over the given stages, and where."""
    worst, where = 0.0, ""
    for mod, s in zip(modules, stages):
        ref = dict(ref_mods[s].named_parameters())
        for name, p in mod.named_parameters():
            diff = (p.detach() - ref[name].detach().to(p.device)).abs().max().item()
            if diff > worst or not where:
                worst, where = max(worst, diff), f"stage {s} {name}"
    return worst, where
