"""What a ``ppir.run`` rank reports beside the steps: the loss averaged over data-parallel
replicas and the end-of-run summary.  Both are collectives; a peer that fails or stops
answering during one raises the runtime's :class:`~ppir.torch.errors.CommError` naming this
rank and what it was doing, as every other collective of the runtime does."""

from __future__ import annotations


def mean_over_replicas(loss, mesh, ctx, step: int):
    """``loss`` averaged over the data-parallel replicas of this pipeline stage (a copy; the
    runtime's own tensor is left as it is).  ``loss`` as it is with one replica or none."""
    if loss is None or mesh.dp_size <= 1:
        return loss
    import torch.distributed as dist

    from ppir.torch.errors import comm_error

    loss = loss.clone()
    try:
        dist.all_reduce(loss, group=mesh.dp_group)
    except RuntimeError as e:
        where = f"rank {ctx.rank}: averaging step {step}'s loss over the data-parallel replicas"
        raise comm_error(where, (), e, ctx.timeout_s) from None
    loss /= mesh.dp_size
    return loss


def largest_peak(mine: int, ctx, dp: int) -> tuple[int, int]:
    """The largest peak of chunk activations over every rank (a collective) and the pipeline
    rank that held it (the lowest on a tie; global rank = pipeline rank * dp + replica)."""
    import torch
    import torch.distributed as dist

    from ppir.torch.errors import comm_error

    device = ctx.device
    peaks = [torch.zeros(1, dtype=torch.int64, device=device) for _ in range(dist.get_world_size())]
    try:
        dist.all_gather(peaks, torch.tensor([mine], dtype=torch.int64, device=device))
    except RuntimeError as e:
        where = f"rank {ctx.rank}: gathering every rank's peak activations after the last step"
        raise comm_error(where, (), e, ctx.timeout_s) from None
    values = [int(t.item()) for t in peaks]
    top = max(values)
    return top, values.index(top) // dp


def in_a(chunks: int, plan: dict) -> str:
    """``chunks`` chunk activations in A (one microbatch's activations of a rank share), the
    unit ``ppir compile`` and ``ppir analyze`` print (the executor runs one pipeline)."""
    from ppir.analysis.memory import chunk_in_a

    a = chunks * chunk_in_a(plan["ranks"], plan["stages"])
    return str(a.numerator) if a.denominator == 1 else f"{float(a):g}"


def summary(times: list[float], peak: int, peak_rank: int, plan: dict) -> str:
    """The closing line of a run of more than one step: the mean step time after the first
    (which also warms up) and the largest peak of in-flight activations."""
    steady = times[1:]
    return (
        f"ppir.run: {len(times)} steps, mean step time {sum(steady) / len(steady) * 1e3:.1f}"
        f" ms (steps 1..{len(times) - 1}), peak in-flight activations "
        f"{in_a(peak, plan)} A on rank {peak_rank} ({peak} chunk activation"
        f"{'' if peak == 1 else 's'}), the most of any rank"
    )
