"""Gantt layout of an :class:`~.estimate.Estimate`, independent of any drawing library.

:func:`gantt_layout` turns the timed ops into rows (one per rank, rank 0 on top), bars (compute
ops, coloured by kind), comm bars (exposed communication: a rank's messages on the wire or its
gradient reductions running while it does not compute, the estimator's ``exposed_comm``) and
idle gaps, plus a title with the key figures.  The matplotlib renderer (:mod:`.plot`) and an
HTML view can both draw from it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ppir.analysis.estimate import Estimate
from ppir.analysis.units import fmt_time, seconds_scale, unit_meaning

# Colour-blind-friendly (Okabe-Ito): forward blue, backward orange/vermillion, weight green.
KIND_COLORS = {
    "F": "#0072B2",
    "B": "#E69F00",
    "I": "#D55E00",
    "W": "#009E73",
    "comm": "#CC79A7",
    "idle": "#EEEEEE",
}


@dataclass(frozen=True)
class Bar:
    row: int
    start: float
    end: float
    kind: str  # F, B, I, W, comm or idle
    label: str  # microbatch number for compute bars, "" otherwise
    color: str


@dataclass(frozen=True)
class GanttLayout:
    rows: tuple[str, ...]
    bars: tuple[Bar, ...]
    step_time: float
    title: str
    time_unit: str
    legend: tuple[tuple[str, str], ...]
    time_label: str  # the time axis's: its unit of seconds, or what one unit is (unit_meaning)
    time_scale: float = 1.0  # seconds per tick unit (time_unit "s"): the step's, as its title


def gantt_layout(e: Estimate) -> GanttLayout:
    """Rows, bars (compute, comm, idle gaps) and title for ``e``."""
    bars: list[Bar] = []
    for r in range(e.ranks):
        t = 0.0
        for o in e.ops[r]:
            if o.start > t:
                bars.append(Bar(r, t, o.start, "idle", "", KIND_COLORS["idle"]))
            k = o.action.kind.value
            bars.append(Bar(r, o.start, o.end, k, str(o.action.mb), KIND_COLORS[k]))
            t = max(t, o.end)
        if e.step_time > t:
            bars.append(Bar(r, t, e.step_time, "idle", "", KIND_COLORS["idle"]))
    for r, spans in enumerate(e.exposed):  # the estimator's exposed_comm, interval by interval
        bars += [Bar(r, a, b, "comm", "", KIND_COLORS["comm"]) for a, b in spans]
    params = ", ".join(f"{k}={v}" for k, v in e.params.items())
    title = (
        f"{e.schedule}({params})   step {fmt_time(e.step_time, e.time_unit)}"
        f"{'' if e.time_unit == 's' else ' units'}   bubble {e.bubble_fraction_of_total:.1%}"
        f" of total, {e.bubble_fraction_of_ideal:.1%} of ideal"
    )
    seconds = e.time_unit == "s"
    scale = seconds_scale(e.step_time)  # the axis in the title's unit (ms, us)
    kinds = {b.kind for b in bars}
    legend = tuple((k, c) for k, c in KIND_COLORS.items() if k in kinds)
    return GanttLayout(
        tuple(f"rank {r}" for r in range(e.ranks)),
        tuple(bars),
        e.step_time,
        title,
        e.time_unit,
        legend,
        f"time ({scale[1]})" if seconds else f"time (units: {unit_meaning(e.config.F)})",
        scale[0] if seconds else 1.0,
    )
