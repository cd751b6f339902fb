"""How ``ppir profile`` calls a piece and moves its values: as the runtime's executor does.

A boundary value is a tensor or a tuple, list or dict of them (:mod:`ppir.torch.values`); a
piece is called as ``m(x)``, ``m(*x)`` or ``m(**x)`` (:func:`ppir.torch.values.call_stage`).
Every leaf of its input is detached from the previous piece's graph and the floating-point ones
require grad, unless the input is the data; its outputs for backward are its floating-point
leaves, and the gradient crossing a boundary holds one tensor per floating-point leaf (zeros
where the piece's input got none).  A message's size is the sum of its leaves' bytes.
"""

from __future__ import annotations

import torch

from ppir.torch import values as V
from ppir.torch.model import optimizer_state_bytes


def piece_input(x, needs_grad: bool):
    """(the value a piece is called with, the leaves of it that require grad): ``x``'s leaves
    detached; with ``needs_grad`` (the input is not the data) the floating-point ones require
    grad."""
    leaves, spec = V.flatten(x)
    grad_in = []
    for k, t in enumerate(leaves):
        t = t.detach()
        if needs_grad and t.is_floating_point():
            t.requires_grad_(True)
            grad_in.append(t)
        leaves[k] = t
    return V.unflatten(spec, leaves), grad_in


def float_leaves(y) -> list:
    """The floating-point leaves of a piece's output: what its backward starts from."""
    return [t for t in V.flatten(y)[0] if t.is_floating_point()]


def detached(y):
    """``y`` with every leaf detached (the value handed to the next piece or sent)."""
    leaves, spec = V.flatten(y)
    return V.unflatten(spec, [t.detach() for t in leaves])


def backward_args(outs: list, grads: list | None) -> tuple[list, list]:
    """(outputs, their gradients) to backpropagate: for a loss (``grads`` None) the loss
    itself; else the outputs that require grad, each with its gradient."""
    if grads is None:
        return outs, [None]
    pairs = [(o, g) for o, g in zip(outs, grads) if o.requires_grad]
    return [o for o, _ in pairs], [g for _, g in pairs]


def input_grads(grad_in: list, dx: list) -> list:
    """The gradient a piece hands to its predecessor: one tensor per leaf that required grad,
    zeros where the backward gave none (the output does not depend on it)."""
    return [torch.zeros_like(x) if g is None else g for x, g in zip(grad_in, dx)]


def value_bytes(spec) -> int:
    """Bytes of a value of ``spec``: the sum over its tensor leaves."""
    total = 0
    for shape, dtype in V.leaf_specs(spec):
        n = 1
        for d in shape:
            n *= d
        total += n * dtype.itemsize
    return total


def send_tensors(value, grad: bool) -> list:
    """The tensors of one message: an activation's leaves, or a gradient's list."""
    tensors = value if grad else V.flatten(value)[0]
    return [t.contiguous() for t in tensors]


def recv_buffers(spec, grad: bool, device) -> list:
    """Empty tensors for a message of a boundary of ``spec``: every leaf of an activation, the
    floating-point leaves of a gradient."""
    specs = V.leaf_specs(spec)
    if grad:
        specs = [specs[i] for i in V.grad_leaves(spec)]
    return [torch.empty(shape, dtype=dt, device=device) for shape, dt in specs]


def received(spec, grad: bool, tensors: list):
    """The value a message's received ``tensors`` make (a gradient stays a list)."""
    return tensors if grad else V.unflatten(spec, tensors)


def shared_bytes(model, pieces: list, first: int) -> list[list[dict]]:
    """Per piece, the parameters it shares with other stages, as the stages declare them to
    the runtime (``stage.ppir_shared``, :func:`ppir.torch.split_layers`), each listed by its
    lowest holder only (pieces are stages ``first``, ``first + 1``, ...): ``{"stages": its
    holders, "param_bytes" (trainable) or "frozen_bytes", "optimizer_bytes"}`` (the model's
    optimizer state for it, -1 when the optimizer cannot be made: as
    :func:`~ppir.torch.model.optimizer_state_bytes`).  Run after the measurements (the
    optimizer steps)."""
    out: list[list[dict]] = [[] for _ in pieces]
    for j, mod in enumerate(pieces):
        for e in getattr(mod, "ppir_shared", ()) or ():
            try:
                holders = {int(s): str(n) for s, n in e["holders"]}
            except (KeyError, TypeError, ValueError):
                continue
            if len(holders) < 2 or min(holders) != first + j:
                continue  # recorded by its lowest holder, once
            try:
                p = mod.get_parameter(holders[first + j])
            except AttributeError:
                continue
            size = p.numel() * p.element_size()
            trains = p.requires_grad
            out[j].append(
                {
                    "stages": sorted(holders),
                    "param_bytes": size if trains else 0,
                    "frozen_bytes": 0 if trains else size,
                    "optimizer_bytes": optimizer_state_bytes(model, [p]) if trains else 0,
                }
            )
    return out
