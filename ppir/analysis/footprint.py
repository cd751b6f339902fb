"""Whole per-rank GPU memory of a schedule for a model: weights, gradients, optimizer state,
in-flight activations and receive buffers.

Contract
--------
:func:`footprint` returns, per pipeline rank (one tensor-parallel rank of it), in bytes:

* ``params``: the parameters of every stage the rank holds (:meth:`ModelShape.layer_params`,
  split over ``tp`` where Megatron-LM splits them), at ``dtype``.  The first stage adds the word
  embedding; the last the final norm and the output layer, except that a ``tied`` output layer on
  the rank that already holds the embedding is the same tensor (P = 1, or a V placement where
  rank 0 holds the first and the last stage).  With ``tied`` and the two on different ranks the
  last stage keeps its own copy, as Megatron-LM does.
* ``grads``: one gradient accumulation buffer per parameter at ``grad_dtype``; divided by
  ``dp`` under ``zero=2``.
* ``optimizer``: an fp32 master copy when ``dtype`` is 16-bit, plus two fp32 moments (adam) or
  one momentum (sgd); divided by ``dp`` under ``zero`` >= 1 (Megatron's distributed optimizer).
  Megatron's defaults (bf16, fp32 gradients, Adam) are 2 + 4 + 12 = 18 bytes per parameter,
  6 + 12/dp with ``zero=1``.
* ``activations``: the peak over the rank's program of the activations in flight, each forward of
  stage ``s`` keeping that stage's bytes for one microbatch (its layers' activations, plus the
  token ids and embedding dropout mask on the first stage and the logits on the last), freed by
  the B; under a split backward the layers' by I and W in the proportions
  :mod:`ppir.analysis.memory` uses, the rest whole at W (the logits' gradient takes the logits'
  place from I to W, with the final norm's output gradient beside it).  The alloc/free rule is
  :func:`ppir.analysis.memory.analyze_memory`'s: this module weighs its per-op curves by stage.
* ``buffers``: the peak number of received-but-unconsumed messages (from the same analysis) times
  one message (:meth:`ModelShape.message_bytes`).
* ``total`` adds the five: an upper bound when the activation and buffer peaks fall at different
  times.  ``dominant`` names the largest term.

Stages hold ``copies * L / S`` layers unless ``stage_layers`` gives them (uneven splits such as
Megatron's ``--pipeline-model-parallel-layout``).  ``copies`` is how many copies of the model the
schedule's stages cover: its ``pipelines`` (:mod:`ppir.ir.deps`), 1 for every built-in but
bidirectional DualPipe, whose 2P stages are two copies of a P-stage model (one per direction, so
each rank holds two stages' parameters); :func:`schedule_copies` gives it.  With ``copies`` = c,
copy k spans stages k·S/c .. (k+1)·S/c - 1, each with its own embedding and head.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from ppir.analysis.layout import split_layers
from ppir.analysis.memory import MemoryReport, analyze_memory, split_fractions
from ppir.analysis.models import DTYPE_BYTES, ModelShape, check_recompute
from ppir.diagnostics import error
from ppir.ir import Action, Schedule, deps

TERMS = ("params", "grads", "optimizer", "activations", "buffers")


@dataclass(frozen=True)
class StageSizes:
    """One stage on one TP rank: ``params`` in elements, ``activation`` in bytes per microbatch,
    of which ``outside`` are not its layers' (the first stage's token ids and embedding mask,
    the last stage's logits)."""

    stage: int
    layers: int
    first: bool
    last: bool
    params: Fraction
    activation: Fraction
    outside: Fraction = Fraction(0)
    outside_for_w: Fraction = Fraction(0)
    """What a split I adds to ``outside`` until W: the final norm's output gradient, which its
    weight gradient needs (the logits' gradient takes the logits' place)."""


@dataclass(frozen=True)
class RankFootprint:
    """One rank's memory terms in bytes (see the module docstring)."""

    rank: int
    stages: tuple[int, ...]
    param_count: Fraction
    params: Fraction
    grads: Fraction
    optimizer: Fraction
    activations: Fraction
    buffers: Fraction
    peak_op: Action | None

    @property
    def total(self) -> Fraction:
        return self.params + self.grads + self.optimizer + self.activations + self.buffers

    @property
    def weights_and_optimizer(self) -> Fraction:
        """Megatron-LM's ``weight_and_optimizer_memory``: params, grads and optimizer state."""
        return self.params + self.grads + self.optimizer

    @property
    def dominant(self) -> str:
        """The largest of the five terms (the first on ties, in :data:`TERMS` order)."""
        return max(TERMS, key=lambda t: (getattr(self, t), -TERMS.index(t)))

    def to_json(self) -> dict:
        """``{params, grads, optimizer, activations, buffers, total}`` in whole bytes."""
        return {t: round(getattr(self, t)) for t in (*TERMS, "total")}


@dataclass(frozen=True)
class Footprint:
    """Result of :func:`footprint`."""

    schedule: str
    model: ModelShape
    recompute: str
    copies: int
    stage_sizes: tuple[StageSizes, ...]
    per_rank: tuple[RankFootprint, ...]
    memory: MemoryReport

    @property
    def worst(self) -> RankFootprint:
        """The rank with the largest total (lowest rank on ties)."""
        return max(self.per_rank, key=lambda r: (r.total, -r.rank))

    @property
    def bytes_per_param(self) -> Fraction:
        """Bytes of params + grads + optimizer state per parameter (18 for Megatron's default)."""
        return param_bytes(self.model)


def schedule_copies(schedule: Schedule) -> int:
    """How many copies of the model a schedule's stages cover: its pipelines, each a replica of
    the model (2 for bidirectional DualPipe, whatever the schedule is named)."""
    return schedule.pipelines


def param_bytes(m: ModelShape) -> Fraction:
    """Bytes per parameter on one rank: parameter, gradient and optimizer state, after ZeRO."""
    p, g, o = _per_param(m)
    return p + g + o


def _per_param(m: ModelShape) -> tuple[Fraction, Fraction, Fraction]:
    master = 4 if m.dtype_bytes < 4 else 0
    state = master + (8 if m.optimizer == "adam" else 4)
    grads = Fraction(DTYPE_BYTES[m.grad_dtype], m.dp if m.zero >= 2 else 1)
    return Fraction(m.dtype_bytes), grads, Fraction(state, m.dp if m.zero >= 1 else 1)


def stage_sizes(
    model: ModelShape,
    schedule: Schedule,
    recompute: str = "none",
    copies: int | None = None,
    stage_layers=None,
) -> tuple[StageSizes, ...]:
    """Parameters (elements, one TP rank) and activation bytes per microbatch of every stage
    (``copies``: of the model the stages cover; default the schedule's pipelines)."""
    copies = schedule_copies(schedule) if copies is None else copies
    S, span = schedule.stages, copy_span(schedule, copies)
    layers = split_layers(model.layers, schedule, stage_layers, span)
    t = model.tp
    sharded, replicated = model.layer_params()
    per_layer = model.activation_bytes_per_layer(recompute)
    out = []
    for s, n in enumerate(layers):
        first, last = deps.bounds(s, S, copies)[0] == s, deps.is_last(s, S, copies)
        params = n * (Fraction(sharded, t) + replicated)
        outside = for_w = Fraction(0)
        if first:
            params += Fraction(model.embedding_params(), t)
            outside += model.embedding_activation_bytes()
        if last:
            params += model.final_norm_params()
            outside += model.head_activation_bytes()
            for_w = model.message_bytes() if model.vocab else for_w  # s x b x h at dtype / t
        act = n * per_layer + outside
        out.append(StageSizes(s, n, first, last, params, act, outside, for_w))
    return tuple(out)


def copy_span(schedule: Schedule, copies: int) -> int:
    """Stages per copy of the model."""
    if copies < 1 or schedule.stages % copies:
        raise error(
            "bad-layers",
            f"{schedule.name} has {schedule.stages} stages, which do not split into {copies} "
            "copies of the model",
        )
    return deps.pipeline_length(schedule.stages, copies)


def output_params(model: ModelShape, schedule: Schedule, sizes, copies: int) -> list[Fraction]:
    """Per stage, the output layer's parameters it holds (elements, one TP rank): a last
    stage's, except a tied one on the rank that holds its copy's embedding (the same tensor,
    counted with the first stage); 0 for the other stages (``copies``: as :func:`stage_sizes`)."""
    place, head = schedule.placement, Fraction(model.embedding_params(), model.tp)
    out = [Fraction(0)] * len(sizes)
    for z in sizes:
        first = deps.bounds(z.stage, schedule.stages, copies)[0]  # its copy's first stage
        if z.last and not (model.tied and place[first] == place[z.stage]):
            out[z.stage] = head
    return out


def activation_peaks(
    schedule: Schedule, mem: MemoryReport, stage_bytes, outside=None, for_w=None
) -> list:
    """Per rank, (peak, op at the peak) of the activations in flight when one forward of stage
    ``s`` keeps ``stage_bytes[s]``: :func:`analyze_memory`'s per-op curve (chunk units, its
    alloc/free rule and I/W split) weighed by the stage of each op.  ``outside[s]``: bytes it
    keeps beside its layers, on the curve I does not free (``whole_curve``); ``for_w[s]``: what
    a split I adds to them until W, read from the two curves (they part at a split I and meet
    again at its W, by the I fraction).  Exact for rational sizes."""
    out = []
    fi = mem.i_fraction
    # (w - c) grows by fi (in the curves' units) at each split I and falls back at its W
    per_i = [x / fi for x in for_w] if for_w is not None and fi else None
    for r, rm in enumerate(mem.per_rank):
        level = peak = prev = prev_w = 0
        peak_op = None
        w_curve = rm.whole_curve or rm.curve
        split = per_i is not None and rm.whole_curve is not None
        for a, c_level, w_level in zip(schedule.compute_actions(r), rm.curve, w_curve):
            s = a.stage
            level += (c_level - prev) * stage_bytes[s]
            if outside is not None:
                level += (w_level - prev_w) * outside[s]
                if split and (d := (w_level - c_level) - (prev_w - prev)):
                    level += d * per_i[s]
            prev, prev_w = c_level, w_level
            if level > peak:
                peak, peak_op = level, a
        out.append((peak * rm.unit, peak_op))
    return out


def footprint(
    schedule: Schedule,
    model: ModelShape,
    *,
    recompute: str = "none",
    i_fraction: Fraction | None = None,
    copies: int | None = None,
    stage_layers=None,
    memory: MemoryReport | None = None,
) -> Footprint:
    """Per-rank memory of ``schedule`` (compute-only or lowered) for ``model``: see the module
    docstring.  ``memory`` reuses an :func:`analyze_memory` report of the same schedule (its
    curves in chunk units; a model-free report is enough).  Linear in the number of actions."""
    check_recompute(recompute)
    c = schedule_copies(schedule) if copies is None else copies
    sizes = stage_sizes(model, schedule, recompute, c, stage_layers)
    fi = Fraction(i_fraction) if i_fraction is not None else split_fractions(model, recompute)
    mem = memory or analyze_memory(schedule, None, recompute=recompute, i_fraction=fi)
    per_p, per_g, per_o = _per_param(model)
    msg = model.message_bytes()
    t = model.tp
    # integers: stage activation bytes times tp (every term divides by tp at most)
    act_t = [((z.activation - z.outside) * t).numerator for z in sizes]
    out_t = [(z.outside * t).numerator for z in sizes]
    w_t = [z.outside_for_w * t for z in sizes]
    assert all((z.activation * t).denominator == (z.outside * t).denominator == 1 for z in sizes)
    peaks = activation_peaks(schedule, mem, act_t, out_t, w_t)
    heads = output_params(model, schedule, sizes, c)  # per stage, once for every rank
    rows = []
    for r, rm in enumerate(mem.per_rank):
        count = sum(sizes[s].params + heads[s] for s in schedule.stages_of_rank[r])
        peak, peak_op = peaks[r]
        acts = peak / t
        rows.append(
            RankFootprint(
                r,
                schedule.stages_of_rank[r],
                count,
                count * per_p,
                count * per_g,
                count * per_o,
                acts,
                rm.peak_recv * msg,
                peak_op,
            )
        )
    return Footprint(schedule.name, model, recompute, c, sizes, tuple(rows), mem)
