"""Shape/dtype metadata per stage boundary: inference at start-up and the plan's ``meta`` field.

Boundary ``b`` is the input of stage ``b`` (boundary 0 is the microbatch input).  Activations
and their gradients share one shape and dtype.

:func:`infer_meta` is a metadata exchange that walks the stages in order: the rank holding
stage ``b-1`` runs it once under ``no_grad`` on one microbatch (zeros of the inferred input
shape; the real microbatch for stage 0) and broadcasts the output's shape and dtype to every
rank.  (A meta-device trace would avoid that forward, but the first meta-tensor op loads
torch's meta registrations: ~2.5 s of start-up per rank on CPU, more than the probe costs.)  A
plan whose ``meta`` is already filled is used as given, and every tensor is checked against it.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from ppir.backends.cuda.executor import Meta


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def parse_dtype(name: str) -> torch.dtype:
    dt = getattr(torch, name, None)
    if not isinstance(dt, torch.dtype):
        raise ValueError(f"unknown dtype {name!r} in the plan's metadata")
    return dt


def meta_to_json(meta: Meta) -> dict:
    return {
        "boundaries": {
            str(b): {"shape": list(shape), "dtype": dtype_name(dt)}
            for b, (shape, dt) in sorted(meta.items())
        },
        "source": "runtime",
    }


def meta_from_json(obj: dict) -> Meta:
    return {
        int(b): (tuple(v["shape"]), parse_dtype(v["dtype"])) for b, v in obj["boundaries"].items()
    }


def trace_stage(module, x: torch.Tensor, stage: int, rank: int):
    """(shape, dtype) of ``module``'s output for input ``x`` (one no-grad forward)."""
    with torch.no_grad():
        y = module(x)
    if not isinstance(y, torch.Tensor):
        raise TypeError(
            f"rank {rank}: stage {stage} returned {type(y).__name__}; a stage must "
            "return one tensor"
        )
    return tuple(y.shape), y.dtype


def infer_meta(plan: dict, rank: int, modules: list, sample_input: torch.Tensor, device) -> Meta:
    """Metadata for every boundary, identical on every rank (collective: all ranks call it)."""
    stages_here = plan["stages_of_rank"][rank]
    meta: Meta = {0: (tuple(sample_input.shape), sample_input.dtype)}
    for b in range(1, plan["stages"]):
        owner = plan["placement"][b - 1]
        box: list = [None]
        if owner == rank:
            shape, dtype = meta[b - 1]
            x = sample_input if b == 1 else torch.zeros(shape, dtype=dtype, device=device)
            out = trace_stage(modules[stages_here.index(b - 1)], x, b - 1, rank)
            box = [(out[0], dtype_name(out[1]))]
        if plan["ranks"] > 1:
            dist.broadcast_object_list(box, src=owner)
        meta[b] = (tuple(box[0][0]), parse_dtype(box[0][1]))
    return meta
