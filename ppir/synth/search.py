"""Schedule synthesis: the fastest list schedule that fits a per-rank memory cap.

:func:`synthesize` builds candidates, keeps those whose peak activations fit the cap, times each
with the estimator on its lockstep-lowered program, and returns the fastest (ties: the smaller
peak, then the earlier candidate).  Candidates:

* list schedules (:mod:`.greedy`) with the backward split into I and W, on the contiguous
  placement and, when ``vshape`` is allowed and P > 1, on the V placement with 2 chunks per rank,
  under each priority rule of :data:`RULES`;
* the 1F1B order at equal memory: rank r warms up with min(P-r-1, cap-1, M) forwards, then one
  forward and one full backward in turn;
* the built-in zero-bubble orders of :data:`BUILTIN_ORDERS` at P and M, as their ``.pps`` files
  build them: ZB-H1 and ZB-H2 on the contiguous placement and, with ``vshape``, the V-shaped
  ZB-V, V-Half and V-Min and interleaved ZB at v = 2 and 4 (the v ``ppir tune`` tries), where
  their peak fits the cap; one over ``max_ops`` ops is noted and skipped.

Because that 1F1B order is always a candidate, the result is never slower in the estimator than
1F1B at the same cap.  Memory is counted as :mod:`.greedy` counts it (an activation lives until
its weight pass), in A (one microbatch's activations of a full rank share): a chunk of a
2-chunk rank is A/2, so a cap of c A is 2c chunk activations there.

``progress(done, total, label)``, when given, is called as each candidate is taken up (``done``
of ``total`` candidates judged so far, ``label`` the one being judged) and once at the end
(``done == total``, no label).

Contract: the returned schedule is compute-only, verified (after lowering) by
:func:`ppir.verify.verify`, and its peak under
``ppir.analysis.memory.analyze_memory(i_fraction=0)`` is at most the cap on every rank.  A cap
below 1 A is a ppir error (exit 2).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction

from ppir.analysis.config import default_op_costs
from ppir.analysis.memory import analyze_memory
from ppir.diagnostics import PpirError, error
from ppir.frontend.limits import DEFAULT_MAX_OPS
from ppir.frontend.loader import load_schedule
from ppir.ir import Action, OpKind, Schedule, looped_placement, vshape_placement
from ppir.synth.greedy import Candidate, GreedySpec, GreedyStuck, list_schedule

DEFAULT_COSTS = default_op_costs()


def _rule_zb(c: Candidate) -> int:
    """I, then F, then W (the zero-bubble paper's order)."""
    return 0 if c.kind is OpKind.I else (1 if c.kind is OpKind.F else 2)


def _rule_free_first(c: Candidate) -> int:
    """I, then W (free memory), then F: better under tight caps."""
    return 0 if c.kind is OpKind.I else (1 if c.kind is OpKind.W else 2)


def _rule_deep_first(c: Candidate) -> int:
    """Like the zero-bubble order, but later chunks first: opens the backward sooner on a V."""
    return 4 * _rule_zb(c) - c.chunk


RULES = {"zb": _rule_zb, "free-first": _rule_free_first, "deep-first": _rule_deep_first}
BUILTIN_ORDERS = (
    ("zb_h1", {}, False),
    ("zb_h2", {}, False),
    ("zbv", {}, True),
    ("v_half", {}, True),
    ("v_min", {}, True),
    ("interleaved_zb", {"v": 2}, True),
    ("interleaved_zb", {"v": 4}, True),
)
"""Built-in zero-bubble orders (Qi et al.) tried as they are: (name, parameters beside P and M,
whether it needs more than the contiguous placement, so ``vshape=False`` leaves it out)."""


@dataclass
class Trial:
    """One candidate: its label, its step time (None when it does not fit), its peak in A."""

    label: str
    step_time: float | None
    peak: Fraction | None
    note: str = ""


@dataclass
class SynthResult:
    schedule: Schedule
    label: str
    step_time: float
    bubble: float  # worst rank's idle time (step time minus its busy time)
    peak: Fraction
    trials: list[Trial] = field(default_factory=list)
    costs: dict[str, Fraction] = field(default_factory=dict)
    """The per-op costs the candidates were estimated at (the defaults, then the caller's)."""


def one_f_one_b_at_cap(P: int, M: int, cap: int) -> Schedule:
    """1F1B whose warm-up is capped so no rank holds more than ``cap`` activations."""
    progs = []
    for r in range(P):
        w = max(0, min(P - r - 1, cap - 1, M))
        ops = [Action(r, OpKind.F, m) for m in range(w)]
        for i in range(M - w):
            ops += [Action(r, OpKind.F, w + i), Action(r, OpKind.B, i)]
        ops += [Action(r, OpKind.B, m) for m in range(M - w, M)]
        progs.append(tuple(ops))
    return Schedule(
        "1f1b_at_cap",
        (("P", P), ("M", M), ("cap", cap)),
        P,
        P,
        M,
        looped_placement(P, P),
        tuple(progs),
    )


def int_costs(costs: dict[str, Fraction]) -> dict[OpKind, int]:
    """The costs scaled to the smallest positive integers with the same ratios."""
    den = math.lcm(*(Fraction(v).denominator for v in costs.values()))
    ints = {OpKind(k): int(Fraction(v) * den) for k, v in costs.items()}
    g = math.gcd(*ints.values())
    return {k: max(1, v // g) for k, v in ints.items()}


def synthesize(
    P: int,
    M: int,
    cap: int,
    costs: dict[str, Fraction] | None = None,
    *,
    vshape: bool = True,
    name: str = "zb_synth",
    progress: Callable[[int, int, str], None] | None = None,
    max_ops: int = DEFAULT_MAX_OPS,
) -> SynthResult:
    """The fastest verified candidate within ``cap`` A per rank (see the module docstring)."""
    from ppir.analysis.config import make_config
    from ppir.pipeline import compile

    if P < 1 or M < 1:
        raise error("bad-usage", f"need P >= 1 and M >= 1, got P={P}, M={M}")
    if not 1 <= cap <= 2**63 - 1:  # it goes into the written schedule, which must parse back
        raise error(
            "bad-usage",
            f"--mem-cap must be at least 1 (activations of one microbatch of a rank's share) "
            f"and at most 2**63 - 1 (the largest integer of a .pps file), got {cap}",
        )
    cost = {**DEFAULT_COSTS, **(costs or {})}
    ic = int_costs(cost)
    cfg = make_config({"costs": {k: v for k, v in cost.items()}})
    trials: list[Trial] = []
    best: tuple | None = None
    v = vshape and P > 1
    orders = [(n, extra) for n, extra, multi in BUILTIN_ORDERS if v or not multi]
    total = 1 + (2 if v else 1) * len(RULES) + len(orders)  # as _candidates
    report = progress or (lambda done, total, label: None)
    for label, sched in _candidates(P, M, cap, ic, v, orders, max_ops, trials):
        report(len(trials), total, label)
        peak = max(m.peak_activations for m in analyze_memory(sched, i_fraction=0).per_rank)
        if peak > cap:
            trials.append(Trial(label, None, peak, "over the cap"))
            continue
        c = compile(sched, costs=cfg)  # as 'ppir compile' would run it
        if not c.ok:
            trials.append(Trial(label, None, peak, "failed verification"))
            continue
        est = c.estimate
        trials.append(Trial(label, est.step_time, peak))
        if best is None or (est.step_time, peak) < (best[1].step_time, best[3]):
            best = (label, est, sched, peak)
    report(len(trials), total, "")
    label, est, sched, peak = best
    params = (("P", P), ("M", M), ("cap", cap))
    out = Schedule(name, params, sched.ranks, sched.stages, M, sched.placement, sched.programs)
    idle = max(r.idle for r in est.per_rank)
    return SynthResult(out, label, est.step_time, idle, peak, trials, cost)


def _candidates(P, M, cap, ic, vshape, orders, max_ops, trials):
    yield "1f1b at equal memory", one_f_one_b_at_cap(P, M, cap)
    costs = tuple(ic.items())
    placements = [("contiguous", looped_placement(P, P), cap)]
    if vshape:
        placements.append(("v-shape", vshape_placement(P, 2 * P), 2 * cap))
    for name, extra in orders:  # the published orders, where they fit the cap
        more = "".join(f", {k}={x}" for k, x in extra.items())
        label = f"{name} order (the built-in{more})"
        try:
            params = {"P": P, "M": M, **extra}
            yield label, load_schedule(name, params, max_ops=max_ops, builtin=True)
        except PpirError as e:
            trials.append(Trial(label, None, None, f"refused: {e.diagnostics[0].message}"))
    for pname, place, chunks in placements:
        spec = GreedySpec(P, M, place, (chunks,) * P, True, costs)
        for rname, rule in RULES.items():
            label = f"list schedule, {pname}, {rname}"
            try:
                progs = list_schedule(spec, rule)
            except GreedyStuck as e:
                trials.append(Trial(label, None, None, f"stuck: {e}"))
                continue
            yield label, Schedule("g", (), P, len(place), M, place, tuple(tuple(p) for p in progs))
