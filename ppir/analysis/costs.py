"""What each node of a program's graph costs: op durations per stage and kind, the time of one
message between two ranks, and how an overlapped F&B step is timed.  One structure serves the
estimator, the critical path and the passes that plan with costs (lower-comms).

Op durations (per stage ``s`` and kind ``k``)
    ``cost[k] × weight[s] × T_stage``, where ``cost`` are the config's F/B/I/W multiples of one
    forward (:class:`~ppir.analysis.config.CostConfig`, default F=1, B=2, I=1, W=1) and
    ``T_stage`` is the forward time of one stage:

    * no model: ``1 / v`` units with ``v = stages / ranks`` (a chunk is 1/v of a rank share);
    * with a model: ``((L / S) · flops_fwd_layer + head) / tp / (peak × efficiency)`` seconds,
      where ``flops_fwd_layer`` counts the real shape (SwiGLU, GQA, causal flash attention;
      :meth:`ppir.analysis.models.ModelShape.forward_flops_per_layer`, Megatron-LM's count) and
      ``head = 2bshV`` on the last stage only (``stage_layers`` replaces L / S per stage for
      uneven splits).  Recomputation adds to B and I the share of the forward it runs again:
      all of it under full recomputation, the attention core under selective;
    * with measured costs (``[measured]``, ``ppir profile``): the measured seconds of each stage
      and kind, summed over consecutive measured stages when the schedule has fewer stages; a
      message costs the measured transfer time, and posting a group the posts' measured wall
      time (``post_wall``; ``post``, their processor time, in a file without it:
      :meth:`~ppir.analysis.measured.MeasuredCosts.post_time`); where ranks share processors,
      op times are their processor time: :meth:`~ppir.analysis.measured.MeasuredCosts.op_times`.
      ``costs.*`` multiples do not apply.

Messages
    One boundary activation (or its gradient), ``s·b·h·dtype_bytes / tp`` bytes, costs
    ``latency + bytes / bandwidth`` on the intra-node link when both ranks share a node
    (``rank // ranks_per_node``), else on the inter-node link.  No model: 0 bytes.  Only the
    two link classes are stored, never a ranks × ranks matrix.

Overlapped steps (:class:`ppir.ir.Overlap`, DualPipe's F&B) take the sum of their parts'
durations (the DualPipe README's F&B is "the execution time of two mutually overlapped forward
and backward chunks"; with no communication to hide, that is F + B), or, when ``costs.FB`` is
set, that sum times ``FB / (F + B)`` (``FB = B`` for perfect overlap).

Processors: ``hardware.processors`` (or a CPU profile's ``processors``) makes the ranks' compute
and transfers share that many processors (:mod:`ppir.analysis.timeline`), as P gloo ranks share
a machine's CPU cores; unset (or 0), every rank has a processor and links of its own.

Exactness: when every duration and cost is rational (the unit-mode case) everything is scaled
to integer *ticks* (``tick`` = 1 / lcm of the denominators), so timelines add integers and the
reported figures are exact; otherwise they are floats in seconds with ``tick = 1``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction

from ppir.analysis.config import CostConfig
from ppir.analysis.layout import split_layers
from ppir.analysis.measured_order import stage_rows
from ppir.analysis.nodes import pipeline_ranks_per_node
from ppir.diagnostics import error
from ppir.ir import OpKind, Schedule, deps

KINDS = (OpKind.F, OpKind.B, OpKind.I, OpKind.W)


@dataclass(frozen=True)
class Costs:
    """Durations in ticks: ``op[stage][kind]``; ``intra``/``inter`` the time of one message
    within a node / between nodes (``ranks_per_node`` ranks per node); ``nbytes`` one message's
    size; ``overlap`` the F&B ratio (None: 1).  Stages of equal durations may share one
    ``op`` row: the rows are read-only."""

    op: tuple[dict[OpKind, int | float], ...]
    intra: int | float = 0
    inter: int | float = 0
    ranks_per_node: int = 8
    nbytes: float = 0.0
    tick: Fraction | float = Fraction(1)
    exact: bool = True
    overlap: Fraction | float | None = None
    pairs: tuple[tuple[tuple[int, int], int | float], ...] = ()
    """Per-link times that replace the link classes for those (src, dst) pairs (measured or
    planned links); only the pairs given are stored."""
    reduce: tuple[int | float, ...] = ()
    """Per stage, the time of its data-parallel gradient reduction (a ``REDUCE_GRAD`` node;
    :func:`ppir.analysis.dp.with_dp`); none given: free."""
    processors: int | None = None
    """How many processors the ranks' work shares (None: one per rank, links of their own);
    set, the graph is timed with processor sharing (:mod:`ppir.analysis.timeline`)."""
    post: int | float = 0
    """The time a rank takes to post one communication group (a ``post`` node of a ``fifo``
    graph): the rank's program goes on, and the group's transfers start, once it is done.
    Measured by ``ppir profile`` (``post`` in ``[measured]``); 0 otherwise."""
    late_w: tuple[int | float, ...] = ()
    """Per stage, the time of a W that does not run right after its own I on the rank (measured
    by ``ppir profile``, ``W_late``: its saved tensors have gone cold; ZB-H1's last stage runs
    its W so); none given: every W costs ``op[stage][W]``."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "_pairs", dict(self.pairs))

    def link(self, src: int, dst: int) -> int | float:
        """The time one message takes from rank ``src`` to rank ``dst`` (0 within a rank)."""
        if src == dst:
            return 0
        if self._pairs:
            t = self._pairs.get((src, dst))
            if t is not None:
                return t
        rpn = self.ranks_per_node
        return self.intra if src // rpn == dst // rpn else self.inter

    @property
    def free_links(self) -> bool:
        return not self.intra and not self.inter and not any(t for _, t in self.pairs)

    def overlap_time(self, total: int | float) -> int | float:
        """Duration of an overlapped step whose parts alone take ``total`` together."""
        if self.overlap is None:
            return total
        scaled = total * self.overlap
        return int(scaled) if self.exact else float(scaled)

    def converter(self):
        """A fast ``ticks -> float`` function (int / int division rounds correctly)."""
        if not self.exact:
            return float
        num, den = self.tick.numerator, self.tick.denominator
        if num == 1:
            return lambda t: t / den
        return lambda t: t * num / den

    def to_time(self, ticks: int | float) -> float:
        return self.converter()(ticks)

    def for_planning(self) -> Costs:
        """The same costs with every op positive, as the eager lowering's proof needs: an op
        that costs nothing is planned as a sliver (half a tick in exact mode, where everything
        else doubles); and one processor per rank, the timeline the proof reasons about."""
        if self.processors is not None:
            return replace(self, processors=None).for_planning()
        if all(d > 0 for row in self.op for d in row.values()):
            return self
        if self.exact:
            op = tuple({k: 2 * d or 1 for k, d in row.items()} for row in self.op)
            pairs = tuple((k, 2 * t) for k, t in self.pairs)
            return replace(
                self,
                op=op,
                intra=2 * self.intra,
                inter=2 * self.inter,
                tick=self.tick / 2,
                pairs=pairs,
                reduce=tuple(2 * t for t in self.reduce),
                post=2 * self.post,
                late_w=tuple(2 * t or 1 for t in self.late_w),
            )
        tiny = min((d for row in self.op for d in row.values() if d > 0), default=1.0) * 1e-6
        return replace(
            self,
            op=tuple({k: d or tiny for k, d in row.items()} for row in self.op),
            late_w=tuple(t or tiny for t in self.late_w),
        )


def _shown(weights, limit: int = 16) -> str:
    """``1,2,0.5``: weights as --stage-weights takes them, the first ``limit`` and a count."""
    text = [f"{float(x):g}" for x in weights[:limit]]
    more = len(weights) - limit
    return ",".join(text) + (f",... ({more} more)" if more > 0 else "")


def stage_forward_times(schedule: Schedule, cfg: CostConfig) -> list[Fraction | float]:
    """The forward time of each stage (before ``costs.F`` is applied)."""
    P, S = schedule.ranks, schedule.stages
    w = cfg.stage_weights
    if w is not None and len(w) != S:
        what = "missing" if len(w) < S else "extra"
        raise error(
            "bad-stage-weights",
            f"stage weights {_shown(w)}: {len(w)} entries but {schedule.name} has {S} stages "
            f"({what} {abs(S - len(w))})",
            hints=[
                "give exactly one weight per stage, e.g. --stage-weights "
                + ",".join(["1"] * min(S, 16))
                + (",..." if S > 16 else "")
            ],
        )
    if cfg.measured is not None:  # stage s runs model stage at[s]
        ms, at = cfg.measured.op_times(P, cfg.processors).for_schedule(S, schedule.pipelines)
        return [ms.F[j] for j in at]
    model_stages = deps.pipeline_length(S, schedule.pipelines)  # a stage is 1/model_stages
    if cfg.model is None:
        base: list[Fraction | float] = [Fraction(P, model_stages)] * S
    else:
        m, hw = cfg.model, cfg.hardware
        layers = split_layers(m.layers, schedule, cfg.stage_layers)
        rate = hw.peak_tflops * 1e12 * cfg.efficiency
        last = [deps.is_last(s, S, schedule.pipelines) for s in range(S)]
        base = [m.stage_forward_flops(n, last=last[s]) / m.tp / rate for s, n in enumerate(layers)]
    return [base[s] * (w[s] if w else 1) for s in range(S)]


def costs_for(schedule: Schedule, cfg: CostConfig | None = None) -> Costs:
    """The :class:`Costs` of ``schedule`` under ``cfg`` (default: ``CostConfig()``, the
    textbook costs F=1, B=2, I=1, W=1 per rank share with free links)."""
    cfg = cfg or CostConfig()
    ratio = None if cfg.FB is None else cfg.FB / (cfg.F + cfg.B)
    if cfg.measured is not None:  # measured seconds per stage and kind (ppir profile)
        times = cfg.measured.op_times(schedule.ranks, cfg.processors)  # shared processors
        ms, at = times.for_schedule(schedule.stages, schedule.pipelines)  # model stages
        rows = [{k: getattr(ms, k.value)[j] for k in KINDS} for j in range(ms.stages)]
        op = [rows[j] for j in at]
        if ms.order:  # F, B and I by where their input is made (on the rank or across)
            op = [{**row, **got} for row, got in zip(op, stage_rows(ms.order, at, schedule))]
        if ms.FB:
            ratio = sum(ms.FB) / sum(f + b for f, b in zip(ms.F, ms.B))
        nbytes = ms.message_size
        # free communication (comm.free) zeroes the posts with the transfer (measured.py)
        post = ms.post_time()
        late = tuple(ms.W_late[j] for j in at) if ms.W_late else ()
    else:
        fwd = stage_forward_times(schedule, cfg)
        extra = cfg.model.recompute_share(cfg.recompute) if cfg.model is not None else 0
        mult = {
            OpKind.F: cfg.F,
            OpKind.B: cfg.B + extra,
            OpKind.I: cfg.I + extra,
            OpKind.W: cfg.W,
        }
        rows: dict = {}  # stages of equal forward time share one row (65,536 stages, few values)
        op = [rows.get(f) or rows.setdefault(f, {k: f * mult[k] for k in KINDS}) for f in fwd]
        nbytes = float(cfg.model.message_bytes()) if cfg.model is not None else 0.0
        post, late = 0, ()
    intra, inter = cfg.intra.time(nbytes), cfg.inter.time(nbytes)
    distinct = list({id(row): row for row in op}.values())
    values = {d for row in distinct for d in row.values()} | {intra, inter, post, *late}
    rpn = pipeline_ranks_per_node(cfg)
    if all(isinstance(x, (int, Fraction)) for x in values):
        den = 1
        for x in values | ({ratio} if ratio is not None else set()):
            den = math.lcm(den, Fraction(x).denominator)
        ticks = {id(row): {k: int(d * den) for k, d in row.items()} for row in distinct}
        return Costs(
            tuple(ticks[id(row)] for row in op),
            int(intra * den),
            int(inter * den),
            rpn,
            nbytes,
            Fraction(1, den),
            True,
            ratio,
            processors=cfg.processors,
            post=int(post * den),
            late_w=tuple(int(x * den) for x in late),
        )
    floats = {id(row): {k: float(d) for k, d in row.items()} for row in distinct}
    return Costs(
        tuple(floats[id(row)] for row in op),
        float(intra),
        float(inter),
        rpn,
        nbytes,
        1.0,
        False,
        None if ratio is None else float(ratio),
        processors=cfg.processors,
        post=float(post),
        late_w=tuple(float(x) for x in late),
    )
