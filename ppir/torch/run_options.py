"""Every rank of ``ppir.run`` runs with the same options, before it builds anything.

The ranks compare the plan's digest (``PipelineRuntime``), but the plan does not hold the run
options: nodes started with another ``--steps`` trained together until the shorter run's end
and then failed after ``--timeout`` with "no answer from its peers (is it stuck?)"; another
``--module-opt`` (a width) ended in the user's model with a shape error.  Each rank gathers a
hash of each option that must agree (:data:`AGREED`; one small ``all_gather`` over the default
group) and raises :class:`~ppir.torch.errors.SetupError` naming the option and the ranks that
differ from rank 0.  Options that may differ per node (``--module``'s path, ``--device``,
``--timeout``, ``--dump-plan``) are not compared.
"""

from __future__ import annotations

import hashlib

AGREED = (
    ("steps", "--steps"),
    ("lr", "--lr"),
    ("dp", "--dp"),
    ("module_opt", "--module-opt"),
    ("verify_grads", "--verify-grads"),
    ("verify_steps", "--verify-steps"),
    ("tolerance", "--tolerance"),
    ("on_nonfinite", "--on-nonfinite"),
    ("tied", "--tied"),
)


def option_hashes(args) -> list[int]:
    """One non-negative 62-bit hash per option of :data:`AGREED`, in that order."""
    out = []
    for attr, _ in AGREED:
        text = repr(getattr(args, attr, None)).encode()
        out.append(int.from_bytes(hashlib.sha256(text).digest()[:8], "big") >> 2)
    return out


def differences(every: list[list[int]]) -> list[tuple[str, list[int]]]:
    """(flag, ranks whose value differs from rank 0's) for each option that differs, given
    every rank's :func:`option_hashes` in rank order."""
    out = []
    for i, (_, flag) in enumerate(AGREED):
        bad = [r for r, h in enumerate(every) if h[i] != every[0][i]]
        if bad:
            out.append((flag, bad))
    return out


def describe(rank: int, args, diffs: list[tuple[str, list[int]]]) -> str:
    flag, bad = diffs[0]
    attr = next(a for a, f in AGREED if f == flag)
    value = getattr(args, attr, None)
    mine = "not given" if value is None else repr(value)  # --dp, --lr: their defaults
    ranks = ", ".join(map(str, bad))
    more = f" (and {', '.join(f for f, _ in diffs[1:])})" if len(diffs) > 1 else ""
    return (
        f"rank {rank}: the ranks were started with different options: {flag} differs between "
        f"rank 0 and rank{'s' if len(bad) > 1 else ''} {ranks}{more} (rank {rank}'s: {mine}); "
        "start every node with the same arguments (only --node-rank differs)"
    )


def check_same_options(ctx, args) -> None:
    """Collective over the default group (module docstring)."""
    import torch
    import torch.distributed as dist

    from ppir.torch.errors import SetupError, comm_error

    mine = torch.tensor(option_hashes(args), dtype=torch.int64, device=ctx.device)
    every = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    try:
        dist.all_gather(every, mine)  # the process group's timeout bounds it
    except RuntimeError as e:
        raise comm_error(
            f"rank {ctx.rank}: comparing the run options across the ranks", (), e, ctx.timeout_s
        ) from None
    diffs = differences([t.cpu().tolist() for t in every])
    if diffs:
        raise SetupError(describe(ctx.rank, args, diffs))
