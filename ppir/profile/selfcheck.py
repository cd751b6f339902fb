"""A profile held to its own run: the estimate, from the cost file the profile writes, of the
1F1B program it ran, against the wall time its timed steps with whole backwards took.

The two differ by what the estimator does not model on this machine (the operating system's
scheduling of more ranks than cores, the runtime's own Python between ops, other load), so the
line tells a user how far to trust the estimates of other schedules from the same file.  Where
the profile's ranks outnumbered the cores, the gap is taken as what that costs beyond the
timeline's fair sharing of them: :func:`oversubscribed` keeps it in the file
(``oversubscription``), and the estimator scales op and post times by it wherever ranks
outnumber processors (:meth:`ppir.analysis.measured.MeasuredCosts.op_times`).
"""

from __future__ import annotations

from dataclasses import replace


def held_to_run(mc) -> tuple[float, float] | None:
    """(measured, predicted) seconds of one step of the profile's 1F1B program: its median step
    with whole backwards (``step_time``, :func:`ppir.profile.summary.summarize`) and
    :func:`ppir.analysis.estimate.estimate` of that very program (as ``ppir launch`` runs it,
    :func:`ppir.profile.orders.program`) under the costs ``mc`` without their
    ``oversubscription``, as the written file says them; None without a ``step_time``."""
    from ppir.analysis.config import make_config
    from ppir.analysis.estimate import estimate
    from ppir.analysis.toml_file import parse_config_text
    from ppir.profile.orders import program

    info = dict(mc.info)
    if not info.get("step_time"):
        return None
    text = replace(mc, oversubscription=0.0).to_toml()
    cfg = make_config(parse_config_text(text, "the profile's cost file"), "the profile")
    s, _ = program("1f1b", {"P": info["ranks"], "M": info["microbatches"]}, 0)
    return info["step_time"], estimate(s, cfg, memory=False).step_time


def oversubscribed(mc):
    """The profile's costs ``mc`` with their ``oversubscription`` where its ranks outnumbered
    the processors: the measured step over the estimate without it (:func:`held_to_run`),
    what the operating system's running of more ranks than cores cost beyond the timeline's
    fair sharing of them.  With a processor per rank, or no ``step_time``, ``mc`` unchanged."""
    info = dict(mc.info)
    ranks, cores = info.get("ranks"), info.get("processors")
    if not (mc.processor_share and cores and ranks and ranks > cores):
        return mc
    held = held_to_run(mc)
    if not held or held[1] <= 0:
        return mc
    return replace(mc, oversubscription=held[0] / held[1])


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
    over = ""
    if mc is not None and mc.oversubscription:
        over = (
            f"; the file takes the gap as what running {info.get('ranks')} ranks on {cores} "
            f"cores costs beyond fair sharing, and scales op and post times by "
            f"{mc.oversubscription:.3g} where ranks outnumber the cores"
        )
    return (
        f"check: its 1F1B steps with whole backwards took {measured * 1e3:.1f} ms (the median); "
        f"from this file the estimator predicts {predicted * 1e3:.1f} ms for that program "
        f"({(predicted - measured) / measured:+.1%}){busy}{over}"
    )
