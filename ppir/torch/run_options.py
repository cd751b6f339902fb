"""Every rank of ``ppir.run`` runs with the same options, before it builds anything.

The ranks compare the plan's digest (``PipelineRuntime``), but the plan does not hold the run
options: nodes started with another ``--steps`` trained together until the shorter run's end
and then failed after ``--timeout`` with "no answer from its peers (is it stuck?)"; another
``--module-opt`` (a width) ended in the user's model with a shape error.  Each rank gathers a
hash of each option that must agree (:data:`AGREED`, as :func:`agreed_values` resolves it; one
small ``all_gather`` over the default group); where one differs, the ranks gather the values
themselves and raise :class:`~ppir.torch.errors.SetupError` naming the option, rank 0's value
and a differing rank's.

Values are compared as they act, not as they were typed: ``--dp`` left out is the processes
over the plan's ranks, ``--lr`` left out is the default rate, ``--module-opt`` is a set of
``KEY=VALUE`` in any order, and ``--verify-steps`` and ``--tolerance`` count only with
``--verify-grads``.  Options that may differ per node (``--module``'s path, ``--device``,
``--timeout``, ``--dump-plan``) are not compared; a ``--module-opt`` must be the same on
every node (a per-node path belongs in the node's environment, which the module can read).
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


def agreed_values(args, dp: int) -> list[str]:
    """The text of each option of :data:`AGREED` as it acts (module docstring), in that
    order; ``dp``: the replicas this run resolved (``--dp`` or its default)."""
    from ppir.torch.model import DEFAULT_LR, parse_options

    verify = bool(getattr(args, "verify_grads", False))
    lr = getattr(args, "lr", None)
    value = {
        "lr": DEFAULT_LR if lr is None else lr,
        "dp": dp,
        "module_opt": " ".join(
            f"{k}={v}" for k, v in sorted(parse_options(getattr(args, "module_opt", None)).items())
        ),
        "verify_steps": getattr(args, "verify_steps", None) if verify else None,
        "tolerance": getattr(args, "tolerance", None) if verify else None,
    }
    return [repr(value[a] if a in value else getattr(args, a, None)) for a, _ in AGREED]


def option_hashes(values: list[str]) -> list[int]:
    """One non-negative 62-bit hash per value of :func:`agreed_values`."""
    return [int.from_bytes(hashlib.sha256(v.encode()).digest()[:8], "big") >> 2 for v in values]


def differences(every: list[list[int]]) -> list[tuple[str, list[int]]]:
    """(flag, ranks whose value differs from rank 0's) for each option that differs, given
    every rank's :func:`option_hashes` in rank order."""
    out = []
    for i, (_, flag) in enumerate(AGREED):
        bad = [r for r, h in enumerate(every) if h[i] != every[0][i]]
        if bad:
            out.append((flag, bad))
    return out


def describe(rank: int, diffs: list[tuple[str, list[int]]], values: list[list[str]]) -> str:
    """The one line every rank raises: the first option that differs, rank 0's value and the
    first differing rank's (``values``: every rank's :func:`agreed_values`)."""
    flag, bad = diffs[0]
    i = next(i for i, (_, f) in enumerate(AGREED) if f == flag)
    other = bad[0]
    ranks = ", ".join(map(str, bad))
    more = f" (and {', '.join(f for f, _ in diffs[1:])})" if len(diffs) > 1 else ""
    return (
        f"rank {rank}: the ranks were started with different options: {flag} differs between "
        f"rank 0 and rank{'s' if len(bad) > 1 else ''} {ranks}{more}: rank 0 has "
        f"{values[0][i]}, rank {other} {values[other][i]}; start every node with the same "
        "arguments (only --node-rank differs)"
    )


def check_same_options(ctx, args, dp: int) -> None:
    """Collective over the default group (module docstring)."""
    import torch
    import torch.distributed as dist

    from ppir.torch.errors import SetupError, comm_error

    values = agreed_values(args, dp)
    mine = torch.tensor(option_hashes(values), dtype=torch.int64, device=ctx.device)
    every = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    try:
        dist.all_gather(every, mine)  # the process group's timeout bounds it
        diffs = differences([t.cpu().tolist() for t in every])
        if not diffs:
            return
        texts: list = [None] * dist.get_world_size()
        dist.all_gather_object(texts, values)  # every rank saw the same differences
    except RuntimeError as e:
        raise comm_error(
            f"rank {ctx.rank}: comparing the run options across the ranks", (), e, ctx.timeout_s
        ) from None
    raise SetupError(describe(ctx.rank, diffs, texts))
