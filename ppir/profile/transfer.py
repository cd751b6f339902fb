"""The isolated timing of each rank boundary's message (``ppir profile``, after the steps).

:func:`measure_transfer` is called on every rank of a :class:`~ppir.profile.worker.Runner`
(the default process group initialised); it also connects every pair before anything is timed.
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.distributed as dist

from ppir.torch import values as V
from ppir.torch.shapes import zeros_like_spec


def measure_transfer(run, reps: int) -> list[float]:
    """One-way time of each rank boundary's message (half a ping-pong of the real value, one
    op per tensor, posted as the runtime posts a group), boundaries in turn; every rank
    returns the same list."""
    out = []
    for b in range(1, run.world):
        t = None
        if run.rank in (b - 1, b):
            t = V.send_tensors(zeros_like_spec(run.meta[b], run.device), False)
        times = []
        for _ in range(reps + 1):
            dist.barrier()
            t0 = time.perf_counter()
            if run.rank == b - 1:
                _group(dist.isend, t, b)
                _group(dist.irecv, t, b)
            elif run.rank == b:
                _group(dist.irecv, t, b - 1)
                _group(dist.isend, t, b - 1)
            times.append((time.perf_counter() - t0) / 2)
        box = torch.tensor([statistics.median(times[1:]) if run.rank == b - 1 else 0.0])
        dist.all_reduce(box)
        out.append(float(box[0]))
    return out


def _group(fn, tensors: list, peer) -> None:
    for w in dist.batch_isend_irecv([dist.P2POp(fn, t, peer) for t in tensors]):
        w.wait()
