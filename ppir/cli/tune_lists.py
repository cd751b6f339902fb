"""ppir tune's reading of its comma-separated lists, and of the search space a cost file
measured by ``ppir profile`` allows (:func:`measured_sizes`, :func:`measured_batch`)."""

from __future__ import annotations

import math
import sys

from ppir.analysis.tune import Builtin, Space
from ppir.analysis.units import comma_entries
from ppir.diagnostics import PpirError, error
from ppir.frontend.limits import read_int
from ppir.schedules import builtin_names


def comma_list(text: str, what: str) -> list[str]:
    """The comma-separated entries of ``text`` (:func:`comma_entries`: a trailing comma
    allowed, one left empty between commas an error naming ``what``); none for a text of
    commas and blanks only, which the caller refuses in its own words."""
    if not text.replace(",", "").strip():
        return []
    return comma_entries(text, f"{what} {text}", "bad-usage")


def comma_ints(text: str, what: str) -> list[int]:
    try:  # read as -D's values are: int() alone takes '٤' for 4
        out = [read_int(x) for x in comma_list(text, what)]
    except ValueError as e:
        raise error(
            "bad-usage", f"{what} {text}: expected comma-separated integers", hints=[str(e)]
        ) from None
    if not out or any(x < 1 for x in out):
        raise error("bad-usage", f"{what} {text}: expected positive integers")
    return out


def measured_sizes(measured, names, space: Space, flag: str) -> tuple[int, ...] | None:
    """The pipeline sizes to search with a cost file measured on S stages, when only built-ins
    are searched: each runs a multiple of P stages on P ranks (DualPipe: two pipelines of P),
    so the file serves only the P that divide S (:meth:`MeasuredCosts.fit`'s rule and words).
    A size given (``flag`` -P or --pp) that it cannot time is a usage error; of the sizes
    --world allows, the search keeps those it can time and says once which it left out.  Every
    choice was rejected for it, one line per schedule and v, and with -P the exit status said
    the schedules were invalid (1) though the file was the mistake; a .pps file may place
    stages as it likes and is still tried at every size."""
    builtins = set(builtin_names())
    if not all(isinstance(n, Builtin) or n in builtins for n in names):
        return space.pps
    S = measured.stages
    sizes = space.pps or tuple(P for P, _ in space.pipeline_sizes())
    usable = tuple(P for P in sizes if _times(measured, P))
    why = f"the cost file was measured on {S} stages, and a schedule of {{P}} ranks runs a "
    why += "multiple of {P} stages"
    left = [P for P in sizes if P not in usable]
    if space.pps is None and left:  # --world: P = 1 is always usable
        print(
            f"ppir: note: --world {space.world}: {why.format(P='P')}: searching pipeline sizes "
            f"{', '.join(map(str, usable))} only, not {', '.join(map(str, left))} (profile again "
            f"with --stages {math.lcm(S, *left)} to time them all)",
            file=sys.stderr,
        )
    if space.pps is None or not left:
        return usable
    P, fits = left[0], ", ".join(str(d) for d in range(1, S + 1) if _times(measured, d))
    raise error(
        "bad-usage",
        f"{flag} {P}: {why.format(P=P)}: none can use it",
        hints=[f"pipeline sizes {fits} can; or profile again with --stages {math.lcm(S, P)}"],
    )


def _times(measured, P: int) -> bool:
    """Whether the cost file can time a schedule of P stages (:meth:`MeasuredCosts.fit`)."""
    try:
        measured.fit(P)
    except PpirError:
        return False
    return True


def measured_batch(args, measured, P: int) -> tuple[str, int]:
    """(micro-batch sizes, global batch) with measured costs and no model: the profiled
    microbatch is the only micro-batch (the times and sizes are its own) and --global-batch is
    in samples, a multiple of its size (default 4 x P microbatches).  A file that does not
    record the size (written before ``microbatch_size``) counts in profiled microbatches, and
    refuses --global-batch rather than read it in another unit."""
    b = measured.microbatch_size
    mbs = args.micro_batch or str(b or 1)
    if set(comma_ints(mbs, "--micro-batch")) != {b or 1}:
        of = f" of {b} samples" if b else ""
        raise error(
            "bad-usage",
            f"--micro-batch {mbs}: measured costs are per profiled microbatch{of}: profile again "
            "with the micro-batch size to try (make_batch / -M)",
        )
    G = args.global_batch
    if b is None and G:
        raise error(
            "bad-usage",
            f"--global-batch {G} counts samples (sequences) per step, but --config "
            f"{args.cost_config} does not say how many a profiled microbatch holds (written "
            "before 'ppir profile' recorded microbatch_size)",
            hints=[
                "profile again, or add microbatch_size = N (the samples of make_batch's batch / "
                "the profile's microbatches) to its [measured] table; without --global-batch, "
                "tune takes 4 x P profiled microbatches"
            ],
        )
    if b is not None and G and G % b:
        near = " or ".join(str(x) for x in (G // b * b, G // b * b + b) if x)
        raise error(
            "bad-usage",
            f"--global-batch {G}: not a whole number of profiled microbatches of {b} samples "
            f"(try {near})",
        )
    return mbs, (G or 4 * P * b) if b is not None else 0


def measured_recompute(value: str | None, recomputes: tuple, has_model: bool) -> None:
    """Refuse ``--recompute`` where measured costs cannot tell its values apart: the profile
    timed the model as it ran, its own recomputation (or none) included, so each value would
    get the same step time and the one that keeps fewer activations would rank first; without
    a model nothing sizes it at all.  One value with a model still sets the model's memory."""
    if value is None or (has_model and len(set(recomputes)) == 1):
        return
    why = (
        "every one would be timed alike and the one that keeps less memory ranked first"
        if has_model
        else "without --model nothing sizes it either"
    )
    raise error(
        "bad-usage",
        f"--recompute {value}: measured costs are the profiled model's as it ran (its own "
        f"recomputation, or none, included), so recomputation is not searched: {why}",
        hints=[
            "to compare, make the module recompute (an option of its configure()), profile "
            "it once per setting and tune each cost file"
            + (
                "; one --recompute value beside --model sizes that model's memory"
                if has_model
                else ""
            )
        ],
    )
