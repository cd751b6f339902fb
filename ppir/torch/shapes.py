"""Boundary metadata: what crosses each stage boundary (a value spec, :mod:`.values`), inferred
at start-up or read from the plan's ``meta`` field.

Boundary ``b`` is the input of stage ``b`` (boundary 0 is the microbatch input); an activation
and its gradient share the spec (the gradient holds the floating-point leaves).

:func:`infer_meta` walks the stages in order: the pipeline rank holding stage ``b-1`` runs it
once under ``no_grad`` on one microbatch (zeros of the inferred input; the real microbatch for
stage 0) and broadcasts the output's spec to the pipeline group as int64 tensors (a length,
then the UTF-8 bytes of its JSON text), so nothing needs numpy or pickling.  A plan whose
``meta`` is filled is used as given, and every tensor is checked against it.
"""

from __future__ import annotations

import json

import torch
import torch.distributed as dist

from ppir.ir import Action, OpKind, deps
from ppir.torch import values as V
from ppir.torch.errors import ShapeMismatch, comm_error
from ppir.torch.procgroup import wait_all


def made_by(b: int, stages: int) -> int | None:
    """The stage whose forward makes boundary ``b``'s value (on the rank the placement gives
    that stage), or None for boundary 0: the first stage reads the data (the activation
    entering stage ``b``, :func:`ppir.ir.deps.message_in`)."""
    msg = deps.message_in(Action(b, OpKind.F, 0), stages)
    return None if msg is None else msg.src


def meta_to_json(meta: dict) -> dict:
    return {"boundaries": {str(b): sp for b, sp in sorted(meta.items())}, "source": "runtime"}


def meta_from_json(obj) -> dict:
    """The metadata of a plan's ``meta`` field; ValueError naming the field when malformed."""
    if not isinstance(obj, dict) or not isinstance(obj.get("boundaries"), dict):
        raise ValueError("the plan's 'meta' must hold {'boundaries': {...}}")
    out = {}
    for b, sp in obj["boundaries"].items():
        if not str(b).isdigit():
            raise ValueError(f"meta.boundaries: {b!r} is not a boundary number")
        out[int(b)] = V.check_spec(sp, f"meta.boundaries[{b}]")
    return out


def zeros_like_spec(spec, device):
    return V.unflatten(
        spec, [torch.zeros(s, dtype=dt, device=device) for s, dt in V.leaf_specs(spec)]
    )


def trace_stage(module, x, stage: int, rank: int):
    """The spec of ``module``'s output for input ``x`` (one no-grad forward).  The forward
    leaves no trace: the module's buffers (BatchNorm's running statistics, say) and the random
    number generators (dropout) are put back as they were, so that training from here computes
    what it would have computed without this call."""
    with torch.no_grad(), torch.random.fork_rng(devices=_cuda_devices(module, x)), _kept(module):
        y = V.call_stage(
            module,
            x,
            lambda: (
                f"rank {rank}: stage {stage}'s forward (inferring its output's shapes), "
                + ("given {} by make_batch" if stage == 0 else "given {} from the previous stage")
            ),
        )
    try:
        return V.flatten(y, f"rank {rank}: the output of stage {stage}")[1]
    except TypeError as e:
        raise ShapeMismatch(str(e)) from None


class _kept:
    """Within the block, buffers may change or be replaced; on exit each is the tensor it was,
    holding the values it held."""

    def __init__(self, module):
        self.saved = [
            (m, k, b, b.detach().clone())
            for m in module.modules()
            for k, b in m._buffers.items()
            if b is not None
        ]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        with torch.no_grad():
            for m, k, b, values in self.saved:
                m._buffers[k] = b
                b.copy_(values)


def _cuda_devices(module, x) -> list:
    """The CUDA devices whose generators a forward of ``module`` on ``x`` may draw from."""
    leaves = [t for t in (*module.parameters(), *module.buffers()) if t.is_cuda]
    try:
        leaves += [t for t in V.flatten(x)[0] if t.is_cuda]
    except TypeError:
        pass
    return sorted({t.device.index for t in leaves if t.device.index is not None})


def broadcast_spec(spec, src: int, group, device, timeout_s=None, rank: int = 0):
    """``spec`` from global rank ``src`` to every rank of ``group`` (collective)."""
    try:
        if spec is not None:
            data = torch.tensor(list(json.dumps(spec).encode()), dtype=torch.int64)
            n = torch.tensor([data.numel()], dtype=torch.int64)
        else:
            n = torch.zeros(1, dtype=torch.int64)
        n = n.to(device)
        wait_all([dist.broadcast(n, src=src, group=group, async_op=True)], timeout_s)
        if spec is None:
            data = torch.empty(int(n.item()), dtype=torch.int64)
        data = data.to(device)
        wait_all([dist.broadcast(data, src=src, group=group, async_op=True)], timeout_s)
    except RuntimeError as e:
        # the sender hears from every other rank of the group; a receiver from the sender
        peers = (src,) if rank != src else _others(group, rank)
        raise comm_error(f"rank {rank}: exchanging boundary shapes", peers, e, timeout_s) from None
    return json.loads(bytes(data.cpu().tolist()).decode())


def _others(group, rank: int) -> tuple[int, ...]:
    """The global ranks of ``group`` (None: every rank) but ``rank``."""
    try:
        ranks = dist.get_process_group_ranks(group) if group is not None else None
    except (RuntimeError, ValueError):
        ranks = None
    if ranks is None:
        ranks = range(dist.get_world_size()) if dist.is_initialized() else ()
    return tuple(r for r in ranks if r != rank)


def infer_meta(
    plan: dict,
    pp_rank: int,
    modules: list,
    sample,
    device,
    *,
    group=None,
    peer=None,
    rank: int = 0,
    timeout_s=None,
) -> dict:
    """Metadata for every boundary, identical on every pipeline rank (collective over the
    pipeline group).  ``sample`` is microbatch 0 of the inputs on the rank holding stage 0."""
    peer = peer or (lambda r: r)
    here = plan["stages_of_rank"][pp_rank]
    meta: dict = {}
    spec0 = V.flatten(sample, "the microbatch input")[1] if 0 in here else None
    meta[0] = (
        spec0
        if plan["ranks"] == 1
        else broadcast_spec(spec0, peer(plan["placement"][0]), group, device, timeout_s, rank)
    )
    S = plan["stages"]
    for b in range(1, S):
        src = made_by(b, S)  # its input is boundary src: the data when made_by(src) is None
        owner = plan["placement"][src]
        spec = None
        if owner == pp_rank:
            x = sample if made_by(src, S) is None else zeros_like_spec(meta[src], device)
            spec = trace_stage(modules[here.index(src)], x, src, rank)
        if plan["ranks"] > 1:
            spec = broadcast_spec(spec, peer(owner), group, device, timeout_s, rank)
        meta[b] = spec
    return meta
