"""A profile held to its own run: the estimate, from the cost file the profile writes, of the
1F1B program it ran, against the wall time its timed steps with whole backwards took.

The two differ by what the estimator does not model on this machine (the operating system's
scheduling of more ranks than cores, the runtime's own Python between ops, other load), so the
line tells a user how far to trust the estimates of other schedules from the same file.  Where
the profile's ranks outnumbered the cores, the gap is taken as what that costs beyond the
timeline's fair sharing of them: :func:`oversubscribed` keeps in the file the factor
(``oversubscription``) on op and post times that closes it, and the estimator scales op and
post times by it wherever ranks outnumber processors
(:meth:`ppir.analysis.measured.MeasuredCosts.op_times`).
"""

from __future__ import annotations

from dataclasses import replace

from ppir.profile.samples import usable_cores


def held_to_run(mc) -> tuple[float, float] | None:
    """(measured, predicted) seconds of one step of the profile's 1F1B program: its median step
    with whole backwards (``step_time``, :func:`ppir.profile.summary.summarize`) and
    :func:`ppir.analysis.estimate.estimate` of that very program (as ``ppir launch`` runs it,
    :func:`ppir.profile.orders.program`) under the costs ``mc`` without their
    ``oversubscription``, as the written file says them; None without a ``step_time``."""
    if not dict(mc.info).get("step_time"):
        return None
    return dict(mc.info)["step_time"], predict(mc, 0.0)


def predict(mc, oversubscription: float) -> float:
    """Seconds of one step of the profile's 1F1B program estimated from the file the costs
    ``mc`` make with this ``oversubscription`` (0: none), read back as ``--config`` reads it."""
    from ppir.analysis.config import make_config
    from ppir.analysis.estimate import estimate
    from ppir.analysis.toml_file import parse_config_text
    from ppir.profile.orders import program

    info = dict(mc.info)
    text = replace(mc, oversubscription=oversubscription).to_toml()
    cfg = make_config(parse_config_text(text, "the profile's cost file"), "the profile")
    s, _ = program("1f1b", {"P": info["ranks"], "M": info["microbatches"]}, 0)
    return estimate(s, cfg, memory=False).step_time


TOLERANCE = 1e-6
"""How close (relative) the estimate with the fitted ``oversubscription`` comes to the step."""


def oversubscribed(mc):
    """The profile's costs ``mc`` with their ``oversubscription`` where its ranks outnumbered
    the processors: the factor on op and post times with which the estimate of the profiled
    1F1B program is its measured step (:func:`held_to_run`; messages keep their time), what
    the operating system's running of more ranks than cores cost beyond the timeline's fair
    sharing of them.  ``mc`` unchanged with a processor per rank, without a ``step_time``, or
    where the estimate without a factor is already the step or more (a factor under 1 would
    not be a cost).

    The estimate ``e(f)`` is a longest path whose op and post times scale with ``f``, so
    ``e(f) / f`` falls as ``f`` grows: from ``f = measured / e(1)``, each ``f * measured /
    e(f)`` rises towards the one ``f`` with ``e(f) = measured``, faster the smaller the
    messages' part of the step."""
    info = dict(mc.info)
    ranks, cores = info.get("ranks"), info.get("processors")
    if not (mc.processor_share and cores and ranks and ranks > cores):
        return mc
    held = held_to_run(mc)
    if not held or held[1] <= 0 or held[0] <= held[1]:
        return mc
    measured, e = held
    f = 1.0
    for _ in range(50):
        f *= measured / e
        e = predict(mc, f)
        if abs(e - measured) <= TOLERANCE * measured:
            break
    return replace(mc, oversubscription=f)


def check_line(measured: float, predicted: float, mc=None) -> str:
    """One line: the measured and the predicted step and how far apart they are; with ``mc``'s
    ``core_use`` (a CPU profile), how busy its ranks kept the cores they could use."""
    info = dict(mc.info) if mc is not None else {}
    use, cores = info.get("core_use"), info.get("processors")
    busy = ""
    if use is not None and cores:
        ranks = info.get("ranks") or cores
        n = usable_cores(cores, ranks, info.get("threads", 1))
        who = "its rank" if ranks == 1 else "its ranks"
        busy = f"; {who} kept {use:.0%} of {'the core' if n == 1 else f'{n} cores'} busy"
    over = ""
    source = "this file"
    if mc is not None and mc.oversubscription:
        source = "this file's costs without its oversubscription"
        over = (
            f"; the file takes the gap as what running {info.get('ranks')} ranks on {cores} "
            f"cores costs beyond fair sharing: it scales op and post times by "
            f"{mc.oversubscription:.3g} where ranks outnumber the cores, with which it "
            "predicts that program's step as measured"
        )
    return (
        f"check: its 1F1B steps with whole backwards took {measured * 1e3:.1f} ms (the median); "
        f"from {source} the estimator predicts {predicted * 1e3:.1f} ms for that program "
        f"({(predicted - measured) / measured:+.1%}){busy}{over}"
    )


SMALL_OP = 2e-3
"""Seconds: ops below this are near the runtime's fixed costs per op (the GPT example's tiny
defaults, ops of about 1 ms, missed their profile's own step by 18-34 %; the accuracy bench's
model, ops of 3-5 ms, by 7-14 %: docs/cost-model.md)."""
BIG_GAP = 0.2
"""The miss, as a share of the measured step, from which :func:`small_ops_note` speaks."""


def small_ops_note(measured: float, predicted: float, mc) -> str:
    """A note when the estimate misses the profile's own step by :data:`BIG_GAP` or more, no
    ``oversubscription`` takes the gap, and the median F and B of a piece is under
    :data:`SMALL_OP`: what makes the gap, and what to do; "" otherwise."""
    from ppir.analysis.units import fmt_time

    if mc.oversubscription or measured <= 0 or abs(predicted - measured) < BIG_GAP * measured:
        return ""
    ops = sorted((*mc.F, *mc.B))
    mid = ops[len(ops) // 2] if ops else SMALL_OP
    if mid >= SMALL_OP:
        return ""
    return (
        f"this model's ops take {fmt_time(mid, 's')} (the median F and B of a piece): "
        "at that size the runtime's fixed costs per op and the stalls of posting groups, which "
        "the estimator leaves out, make most of the gap, and the estimates of other schedules "
        "from this file inherit it; fewer, larger microbatches (--microbatches) give ops it "
        "models better (docs/cost-model.md)"
    )
