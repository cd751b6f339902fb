"""The isolated timing of each rank boundary's message (``ppir profile``, after the steps),
and the profile's barriers.

:func:`measure_transfer` is called on every rank of a :class:`~ppir.profile.worker.Runner`
(the default process group initialised); it also connects every pair before anything is timed.
A peer that does not answer within the run's timeout, or went away, is the runtime's
:class:`~ppir.torch.errors.CommError` (:func:`ppir.profile.errors.comm`).
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.distributed as dist

from ppir.profile.errors import comm, others
from ppir.torch import values as V
from ppir.torch.shapes import made_by, zeros_like_spec


def measure_transfer(run, reps: int) -> list[float]:
    """One-way time of each rank boundary's message (half a ping-pong of the real value, one
    op per tensor, posted as the runtime posts a group), boundaries in turn; every rank
    returns the same list."""
    out = []
    for b in range(1, run.world):  # 1F1B's runner: stage s on rank s
        src = made_by(b, run.schedule.stages)  # boundary b's message goes from rank src to b
        t = None
        if run.rank in (src, b):
            t = V.send_tensors(zeros_like_spec(run.meta[b], run.device), False)
        times = []
        where = f"rank {run.rank}: timing boundary {b}'s message"
        ends = {src: (b, dist.isend, dist.irecv), b: (src, dist.irecv, dist.isend)}
        pair = ends.get(run.rank)  # (the peer, then what this rank does first and second)
        for _ in range(reps + 1):
            barrier(run, where)
            t0 = time.perf_counter()
            if pair is not None:
                comm(where, pair[:1], _ping, t, *pair, timeout_s=run.timeout_s)
            times.append((time.perf_counter() - t0) / 2)
        box = torch.tensor([statistics.median(times[1:]) if run.rank == src else 0.0])
        comm(where, others(run.rank, run.world), dist.all_reduce, box, timeout_s=run.timeout_s)
        out.append(float(box[0]))
    return out


def _ping(tensors: list, peer: int, first, then) -> None:
    """A round trip with ``peer``: ``first`` (isend or irecv) of ``tensors``, then ``then``."""
    _group(first, tensors, peer)
    _group(then, tensors, peer)


def _group(fn, tensors: list, peer) -> None:
    for w in dist.batch_isend_irecv([dist.P2POp(fn, t, peer) for t in tensors]):
        w.wait()


def barrier(run, where: str) -> None:
    """``dist.barrier()``, a peer that does not reach it in time a CommError at ``where``."""
    comm(where, others(run.rank, run.world), dist.barrier, timeout_s=run.timeout_s)
