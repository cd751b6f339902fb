"""A profile held to its own run: the estimate, from the cost file the profile writes, of the
1F1B program it ran, against the wall time its timed steps with whole backwards took.

The two differ by what the estimator does not model on this machine (the operating system's
scheduling of more ranks than cores, the runtime's own Python between ops, other load), so the
line tells a user how far to trust the estimates of other schedules from the same file.
"""

from __future__ import annotations


def held_to_run(mc, text: str) -> tuple[float, float] | None:
    """(measured, predicted) seconds of one step of the profile's 1F1B program: its median step
    with whole backwards (``step_time``, :func:`ppir.profile.summary.summarize`) and
    :func:`ppir.analysis.estimate.estimate` of that very program (as ``ppir launch`` runs it,
    :func:`ppir.profile.orders.program`) under the cost file ``text``; None without a
    ``step_time``."""
    from ppir.analysis.config import make_config
    from ppir.analysis.estimate import estimate
    from ppir.analysis.toml_file import parse_config_text
    from ppir.profile.orders import program

    info = dict(mc.info)
    if not info.get("step_time"):
        return None
    cfg = make_config(parse_config_text(text, "the profile's cost file"), "the profile")
    s, _ = program("1f1b", {"P": info["ranks"], "M": info["microbatches"]}, 0)
    return info["step_time"], estimate(s, cfg, memory=False).step_time


def check_line(measured: float, predicted: float, mc=None) -> str:
    """One line: the measured and the predicted step and how far apart they are; with ``mc``'s
    ``core_use`` (a CPU profile), how busy its ranks kept the cores they could use."""
    info = dict(mc.info) if mc is not None else {}
    use, cores = info.get("core_use"), info.get("processors")
    busy = ""
    if use is not None and cores:
        ranks = info.get("ranks") or cores
        n = min(cores, ranks * info.get("threads", 1))
        who = "its rank" if ranks == 1 else "its ranks"
        busy = f"; {who} kept {use:.0%} of {'the core' if n == 1 else f'{n} cores'} busy"
    return (
        f"check: its 1F1B steps with whole backwards took {measured * 1e3:.1f} ms (the median); "
        f"from this file the estimator predicts {predicted * 1e3:.1f} ms for that program "
        f"({(predicted - measured) / measured:+.1%}){busy}"
    )
