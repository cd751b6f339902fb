"""The per-GPU memory budget of ``ppir tune``: from --gpu-memory less --reserve, or
--memory-budget, and what the header says of how it was read."""

from __future__ import annotations

import math

from ppir.analysis.units import decimal_reading, is_number, parse_budget
from ppir.diagnostics import error


def read_budget(args, sized: bool) -> tuple[tuple[float, str] | None, int | None]:
    """(the budget, --gpu-memory): the budget (value, "bytes" | "A"; None: no budget) from
    --gpu-memory/--reserve or --memory-budget, and --gpu-memory in whole bytes as read (80GB:
    80000000000; for JSON), None without it.  ``sized``: memory sizes are known (a model or
    measured sizes), so the budget is in bytes."""
    if args.gpu_memory and args.memory_budget:
        raise error("bad-usage", "give --gpu-memory or --memory-budget, not both")
    if args.reserve is not None and not args.gpu_memory:  # it was silently ignored
        raise error(
            "bad-usage",
            f"--reserve {args.reserve} is kept free of --gpu-memory, which is not given"
            + (": --memory-budget is the budget itself" if args.memory_budget else ""),
            hints=["give --gpu-memory SIZE --reserve ..., or the budget alone: --memory-budget"],
        )
    if not args.gpu_memory:
        budget = parse_budget(args.memory_budget, sized, "--memory-budget")
        if budget is not None and sized and budget[1] == "A":  # bytes compared with A
            raise error(
                "bad-usage",
                f"--memory-budget {args.memory_budget}: with memory sizes (a model, or "
                "measured ones) the budget is in bytes, e.g. 60GiB (or --gpu-memory 80GiB)",
            )
        if budget is not None and budget[1] == "bytes":  # whole bytes, as JSON gives them
            budget = (math.floor(budget[0]), "bytes")
        return budget, None
    total, unit = parse_budget(args.gpu_memory, sized, "--gpu-memory")
    if unit != "bytes":
        raise error("bad-usage", f"--gpu-memory {args.gpu_memory}: give bytes, e.g. 80GiB")
    r = _reserve(args)
    if r.endswith("%"):
        try:
            frac = float(r[:-1]) / 100
        except ValueError:
            msg = f"--reserve {args.reserve}: expected e.g. 10% or 8GiB"
            raise error("bad-usage", msg) from None
        if not 0 <= frac < 1:
            raise error("bad-usage", f"--reserve {args.reserve}: must lie in [0%, 100%)")
        keep = total * frac
    else:
        bare = is_number(r)
        if bare:  # 0 keeps nothing free; any other bare number is a percentage without its %
            keep, unit = 0, "bytes" if float(r) == 0 else ""
        else:
            keep, unit = parse_budget(r, sized, "--reserve")
        if unit != "bytes":  # 10, or 6A (not bytes)
            raise error(
                "bad-usage",
                f"--reserve {args.reserve}: expected a percentage of --gpu-memory, e.g. 10%, or "
                "bytes with a unit, e.g. 8GiB",
                hints=[f"did you mean --reserve {r}%?"] if bare else [],
            )
    if keep >= total:
        raise error("bad-usage", f"--reserve {args.reserve} leaves nothing of {args.gpu_memory}")
    # 90% of 24GiB: 23192823398, not ....4
    return (math.floor(total - keep), "bytes"), math.floor(total)


DEFAULT_RESERVE = "10%"
"""What --reserve keeps free of --gpu-memory when it is not given."""


def _reserve(args) -> str:
    """--reserve as given (stripped), or :data:`DEFAULT_RESERVE`."""
    return (args.reserve or DEFAULT_RESERVE).strip()


def budget_note(args) -> str:
    """What the header adds to the budget when its size was given in a decimal unit, which
    GPU memory is not counted in (an "80 GB" card holds 80 GiB): `` (--gpu-memory 80GB: 80
    decimal gigabytes, 80 x 10^9 bytes = 74.51 GiB, less the 10% reserve; for 80 x 2^30 bytes
    write 80GiB)``; empty for a binary unit or A."""
    flag, text = (
        ("--gpu-memory", args.gpu_memory)
        if args.gpu_memory
        else ("--memory-budget", args.memory_budget)
    )
    reading = decimal_reading(text)
    if reading is None:
        return ""
    said, instead = reading
    r = _reserve(args)
    kept = args.gpu_memory and not (is_number(r) and float(r) == 0)
    less = f", less the {r} reserve" if kept else ""
    return f" ({flag} {text.strip()}: {said}{less}; {instead})"
