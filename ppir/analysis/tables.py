"""Op durations and message costs for one schedule under one :class:`CostConfig`.

Op durations (per stage ``s`` and kind ``k``)
    ``cost[k] × weight[s] × T_stage``, where ``cost`` are the config's F/B/I/W multiples of one
    forward and ``T_stage`` is the forward time of one stage:

    * no model: ``1 / v`` units with ``v = stages / ranks`` (a chunk is 1/v of a rank share);
    * with a model: ``(L / S) · flops_fwd_layer / tp / (peak × efficiency)`` seconds, where
      ``flops_fwd_layer = 2bs(4h² + 2h·ffn) + 4bs²h`` (= 24bsh² + 4bs²h for ffn = 4h; Narayanan
      et al. SC'21, :meth:`ppir.analysis.models.ModelShape.forward_flops_per_layer`).  Full
      recomputation adds one forward to B and I.

Messages
    One boundary activation (or its gradient), ``s·b·h·dtype_bytes / tp`` bytes, costs
    ``latency + bytes / bandwidth`` on the intra-node link when both ranks share a node
    (``rank // ranks_per_node``), else on the inter-node link.  No model: 0 bytes.

Overlapped steps (:class:`ppir.ir.Overlap`, DualPipe's F&B) are timed as ONE op: the sum of
their parts' durations (the DualPipe README's F&B is "the execution time of two mutually
overlapped forward and backward chunks"; with no communication to hide, that is F + B), or, when
``costs.FB`` is set, that sum times ``FB / (F + B)`` (e.g. ``FB = B`` for perfect overlap, the
max of the parts).  ``overlap`` holds that ratio (None: 1).

Exactness: when every duration and cost is rational (the unit-mode case) the tables are scaled to
integer *ticks* (``tick`` = 1 / lcm of the denominators), so the simulation adds integers and the
reported figures are exact; otherwise they are floats in seconds with ``tick = 1``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from ppir.analysis.config import CostConfig
from ppir.analysis.models import check_layers
from ppir.diagnostics import error
from ppir.ir import OpKind, Schedule

KINDS = (OpKind.F, OpKind.B, OpKind.I, OpKind.W)


@dataclass(frozen=True)
class CostTables:
    """Durations in ticks: ``op[stage][kind]`` and ``link[src][dst]`` (time, bytes)."""

    op: tuple[dict[OpKind, int | float], ...]
    link: tuple[tuple[tuple[int | float, float], ...], ...]
    tick: Fraction | float
    exact: bool
    overlap: Fraction | float | None = None

    def overlap_time(self, parts: list[int | float]) -> int | float:
        """Duration (ticks) of an overlapped step whose parts alone take ``parts``."""
        total = sum(parts)
        if self.overlap is None:
            return total
        scaled = total * self.overlap
        return int(scaled) if self.exact else float(scaled)

    def to_time(self, ticks: int | float) -> float:
        """Ticks as a float time (correctly rounded in exact mode)."""
        return self.converter()(ticks)

    def converter(self):
        """A fast ``ticks -> float`` function (int / int division rounds correctly)."""
        if not self.exact:
            return float
        num, den = self.tick.numerator, self.tick.denominator
        if num == 1:
            return lambda t: t / den
        return lambda t: t * num / den


def stage_forward_times(schedule: Schedule, cfg: CostConfig) -> list[Fraction | float]:
    """The forward time of each stage (before ``costs.F`` is applied)."""
    P, S = schedule.ranks, schedule.stages
    w = cfg.stage_weights
    if w is not None and len(w) != S:
        what = "missing" if len(w) < S else "extra"
        raise error(
            "bad-stage-weights",
            f"stage_weights has {len(w)} entries but {schedule.name} has {S} stages "
            f"({what} {abs(S - len(w))})",
            hints=[
                "give exactly one weight per stage, e.g. --stage-weights "
                + ",".join(["1"] * min(S, 16))
                + (",..." if S > 16 else "")
            ],
        )
    if cfg.model is None:
        base: Fraction | float = Fraction(P, S)
    else:
        m, hw = cfg.model, cfg.hardware
        lps = check_layers(m.layers, S, P)
        flops = lps * m.forward_flops_per_layer() / m.tp
        base = flops / (hw.peak_tflops * 1e12 * cfg.efficiency)
    return [base * (w[s] if w else 1) for s in range(S)]


def build_tables(schedule: Schedule, cfg: CostConfig) -> CostTables:
    """Durations of every (stage, kind) and the cost of a message on every (src, dst) link."""
    fwd = stage_forward_times(schedule, cfg)
    extra = 1 if cfg.model is not None and cfg.recompute == "full" else 0
    mult = {OpKind.F: cfg.F, OpKind.B: cfg.B + extra, OpKind.I: cfg.I + extra, OpKind.W: cfg.W}
    op = [{k: f * mult[k] for k in KINDS} for f in fwd]
    nbytes = float(cfg.model.message_bytes()) if cfg.model is not None else 0.0
    P, rpn = schedule.ranks, cfg.ranks_per_node
    link = [
        [
            (cfg.intra if a // rpn == b // rpn else cfg.inter).time(nbytes) if a != b else 0
            for b in range(P)
        ]
        for a in range(P)
    ]
    values = [d for row in op for d in row.values()] + [t for row in link for t in row]
    ratio = None if cfg.FB is None else cfg.FB / (cfg.F + cfg.B)
    if all(isinstance(x, (int, Fraction)) for x in values):
        den = 1
        for x in values + ([ratio] if ratio is not None else []):
            den = math.lcm(den, Fraction(x).denominator)
        op_t = tuple({k: int(d * den) for k, d in row.items()} for row in op)
        link_t = tuple(tuple((int(t * den), nbytes) for t in row) for row in link)
        return CostTables(op_t, link_t, Fraction(1, den), True, ratio)
    op_f = tuple({k: float(d) for k, d in row.items()} for row in op)
    link_f = tuple(tuple((float(t), nbytes) for t in row) for row in link)
    return CostTables(op_f, link_f, 1.0, False, None if ratio is None else float(ratio))
