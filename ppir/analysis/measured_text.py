"""What the assumptions line says of a cost file's measured costs (:class:`MeasuredCosts`):
its informative fields, and how posts and op times are charged where ranks share processors."""

from __future__ import annotations

from ppir.analysis.measured import MeasuredCosts
from ppir.analysis.measured_order import SHARE_KEYS
from ppir.analysis.units import fmt_time


def info_text(m: MeasuredCosts) -> str:
    """The informative fields as the assumptions line says them: a float is seconds
    (``transfer_isolated``, ``step_time``) except ``core_use``, a share of the cores."""
    return ", ".join(
        f"{k} {v:.0%}"
        if k == "core_use"
        else f"{k} {fmt_time(v, 's')}"
        if isinstance(v, float)
        else f"{k} {v}"
        for k, v in m.info
    )


def sharing_note(m: MeasuredCosts, ranks=None, processors: int | None = None) -> str:
    """What the assumptions line says of near and far times (where measured), posts and op
    times on shared processors: ``; posting a group 0.5 ms (its wall time; 0.4 ms of
    processor time); ops and posts where ranks share processors: their processor time (ops
    42-51 % of their measured time) x 1.2, what ...`` ('' when none was measured); the last
    clause only where ``ranks`` (a count, the sizes of a search's candidates, or None:
    unknown) may be more than ``processors`` (:meth:`MeasuredCosts.op_times`)."""
    out = ""
    if m.order:
        out += "; F, B and I at their times with the input made on the rank or received"
    if m.post_time():
        out += f"; posting a group {m.post_time() * 1e3:.3g} ms"
        if m.post_wall and m.post:
            out += f" (its wall time; {m.post * 1e3:.3g} ms of processor time)"
    sizes = [ranks] if isinstance(ranks, int) else list(ranks or ())
    if m.processor_share and processors and (not sizes or max(sizes) > processors):
        out += (
            "; ops and posts where ranks share processors: their processor time (ops "
            f"{share_range(m)} % of their measured time)"
        )
        if m.oversubscription:
            out += (
                f" x {m.oversubscription:.3g}, what running more ranks than processors cost "
                "the profile beyond fair sharing (the factor that makes the estimate of its "
                "1F1B its step)"
            )
    return out


def share_range(m: MeasuredCosts) -> str:
    """The stages' ``processor_share`` (and the near and far ones, where measured) in whole
    per cent, least to most: ``42-51``, or ``97`` when they round alike ('' when not
    measured)."""
    if not m.processor_share:
        return ""
    every = [*m.processor_share, *(x for k, xs in m.order if k in SHARE_KEYS for x in xs)]
    lo, hi = (round(100 * f) for f in (min(every), max(every)))
    return f"{lo}" + (f"-{hi}" if hi != lo else "")
