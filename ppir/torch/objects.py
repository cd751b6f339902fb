"""Python objects between ranks without numpy.

``torch.distributed``'s ``all_gather_object`` and ``gather_object`` turn the received bytes
back into objects through ``Tensor.numpy()``, and torch does not require numpy: in an
environment with ``ppir[torch]`` alone they fail (``RuntimeError: Numpy is not available``).
:func:`all_gather_objects` sends pickles as byte tensors and reads them back with
``Tensor.tolist()``, which needs nothing beyond torch.
"""

from __future__ import annotations

import pickle

import torch
import torch.distributed as dist


def _device() -> torch.device:
    """Where the collective's tensors live: the current GPU under NCCL, else the CPU."""
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def all_gather_objects(obj) -> list:
    """Every rank's ``obj`` (picklable), in rank order, on every rank (a collective of the
    default process group)."""
    device = _device()
    data = pickle.dumps(obj)
    mine = torch.frombuffer(bytearray(data), dtype=torch.uint8).to(device)
    size = torch.tensor([mine.numel()], dtype=torch.int64, device=device)
    world = dist.get_world_size()
    sizes = [torch.zeros_like(size) for _ in range(world)]
    dist.all_gather(sizes, size)
    n = [int(s.item()) for s in sizes]
    padded = torch.zeros(max(n), dtype=torch.uint8, device=device)
    padded[: mine.numel()] = mine
    parts = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(parts, padded)
    return [pickle.loads(bytes(p[:k].tolist())) for p, k in zip(parts, n)]
