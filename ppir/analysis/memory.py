"""Activation memory of a schedule, computed from its IR (point-to-point traffic is
:mod:`ppir.analysis.p2p`'s, whose names this module re-exports).

Units
-----
* A *chunk activation* is what one forward of one stage keeps for one microbatch until its
  backward: the activations of that stage's layers (layers are split evenly over the S stages).
* ``A`` (stage-activation unit) is one microbatch's activations of one full rank share, L/P layers.
  A chunk activation is therefore ``P/S`` A for every stage, whatever the placement (v = S/P chunks
  per rank on average; a rank holding more stages holds more chunks, not bigger ones).

Memory model (per rank, over its compute actions in program order)
-------------------------------------------------------------------
F allocates one chunk activation; B frees it (in an evaluation program, which runs no backward,
F keeps nothing).  With split backward, I frees ``i_fraction`` of it
and W the rest; a negative fraction means I keeps more than it frees (the gradients W needs).  A
first stage's I frees nothing: its input, the data, has no gradient, so ppir's runtime runs its
whole backward in W.  The default ``i_fraction`` is ppir's runtime split (F keeps 34h+5as per
token-layer at 16 bits; I keeps the norm and linear inputs and adds their output gradients, 40h:
see :func:`split_fractions`) at the model's shape, or at GPT-3 175B's shape when no model is
given (37/57 with no recomputation; the zero-bubble repo's Megatron split, which computes the
norms' weight gradients in I, is 41/57).  Received-but-not-yet-consumed buffers (a RECV
posted before the compute action that consumes it, in the lowered IR) are counted separately, in
messages (see :meth:`ppir.analysis.models.ModelShape.message_bytes` for their size).

Everything is read from the program's dependency graph (:mod:`ppir.ir.graph`) in one pass over
each rank's nodes in program order: linear in the number of ops.  A received buffer is held
from the post of the group holding its RECV to the compute op that consumes it.  Inputs are
assumed complete and valid (``ppir check``); an invalid program gives numbers, not errors.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from ppir.analysis.layout import check_layers, even_layers
from ppir.analysis.models import PRESETS, ModelShape, check_recompute
from ppir.analysis.p2p import P2PReport, RankP2P, analyze_p2p  # noqa: F401 (this module's API)
from ppir.ir import Action, OpKind, Schedule, deps
from ppir.ir.graph import COMPUTE, POST, ProgramGraph, build_graph

ANALYSIS_FORMAT = "ppir.analysis/2"


def split_fractions(model: ModelShape | None = None, recompute: str = "none") -> Fraction:
    """Fraction of a chunk activation that I frees (W frees ``1 -`` that), as ppir's runtime
    splits the backward (:mod:`ppir.torch.backward`); negative when I keeps more than it frees.

    I runs the input-gradient path and keeps, for W, what every weight node needs: the inputs of
    the norms and linear layers, which F already kept, and the gradients at their outputs, which
    it adds.  Everything else F kept (Q, K, V, the attention core, the activation function's
    input, dropout masks) goes at I.  Per token and layer, in elements at 16-bit Megatron sizes
    (MHA, GeLU): F keeps the 34h + 5as of Korthikanti et al.; W needs the norm inputs 2h and the
    linear inputs 7h (QKV, projection, fc1, fc2 = 4h) plus the output gradients of the two norms
    2h, QKV 3h, projection h, fc1 4h and fc2 h: 40h bytes at 16 bits, so I frees
    (5as - 6h) / (34h + 5as).  The zero-bubble repo's Megatron split computes the norms' weight
    gradients in B (I) instead, keeping only the linears' 32h: I frees (2h + 5as) / (34h + 5as).
    Measured on ppir's runtime (``bench/bench_estimator_accuracy.py``, GPT example with h = 128:
    F keeps 16h fp32 elements, I keeps 20h), this split predicts what it holds within 1 %.

    Under selective recomputation the 5as term is never kept.  Under full recomputation F keeps
    only each layer's input; I recomputes the forward, and what W needs (the same norm and
    linear inputs and output gradients) stays until W has run, so I keeps far more than F did
    (the fraction is about -20 at GPT-3 175B's shape).  A first stage's I frees nothing
    whatever the fraction (its input, the data, has no gradient: W runs its whole backward);
    :func:`analyze_memory` applies that.
    """
    check_recompute(recompute)
    m = model or PRESETS["gpt3-175b"]
    lin, attn = m.activation_terms(recompute)
    h, f, d = m.hidden, m.ffn_hidden, m.dtype_bytes
    inputs = 2 * h + 3 * h + f  # the two norms' inputs; QKV, projection, fc1 and fc2 inputs
    grads = 2 * h + (h + 2 * m.kv_dim) + h + (2 * f if m.swiglu else f) + h  # at their outputs
    kept = m.seq * m.mbs * (inputs + grads) * d
    return Fraction(lin + attn - kept, lin + attn)


@dataclass(frozen=True)
class RankMemory:
    """Activation memory of one rank.  ``curve[i]`` is the memory after the i-th compute action
    of the rank, in units of ``unit`` chunk activations (integers keep the pass exact and fast).
    ``param_shares``: the parameters the rank holds, in rank shares of the model (1/P of it):
    1 for every single-pipeline schedule, 2 for bidirectional DualPipe (two model stages)."""

    rank: int
    chunks: int
    peak_chunks: Fraction
    peak_activations: Fraction
    peak_op: Action | None
    peak_index: int
    curve: tuple[int, ...]
    unit: Fraction
    peak_recv_forward: int
    peak_recv_backward: int
    peak_recv: int
    peak_bytes: Fraction | None = None
    peak_recv_bytes: Fraction | None = None
    param_shares: Fraction = Fraction(1)
    whole_curve: tuple[int, ...] | None = None
    """The curve of what a forward keeps beside its layers, which I does not free (the
    logits' gradient stays until W); None where it is ``curve`` (no split backward)."""

    def curve_chunks(self) -> list[float]:
        """The memory curve in chunk activations (floats, for plotting and JSON)."""
        u = float(self.unit)
        return [c * u for c in self.curve]


@dataclass(frozen=True)
class MemoryReport:
    """Result of :func:`analyze_memory`.  ``chunk_size`` is one chunk activation in A (= P/S)."""

    schedule: str
    ranks: int
    stages: int
    microbatches: int
    chunk_size: Fraction
    i_fraction: Fraction
    per_rank: tuple[RankMemory, ...]
    model: ModelShape | None = None
    recompute: str = "none"
    layers: int | None = None
    layers_per_stage: int | None = None
    chunk_bytes: Fraction | None = None

    @property
    def worst(self) -> RankMemory:
        """The rank with the largest peak (lowest rank on ties)."""
        return max(self.per_rank, key=lambda m: (m.peak_chunks, -m.rank))

    def peak_activations(self) -> list[Fraction]:
        return [m.peak_activations for m in self.per_rank]

    def peak_bytes(self) -> list[Fraction | None]:
        return [m.peak_bytes for m in self.per_rank]


def chunk_in_a(ranks: int, stages: int, pipelines: int = 1) -> Fraction:
    """One chunk activation (a stage's, one microbatch) in A, a rank share's: P over the
    stages of one pipeline (replicated pipelines hold the same model)."""
    return Fraction(ranks, deps.pipeline_length(stages, pipelines))


def _fraction(value) -> Fraction:
    """``i_fraction`` as a Fraction of at most 1 (I frees at most the whole chunk; a negative
    one keeps that many chunks more, as under full recomputation): a TypeError for a value of
    another type (a bool, a list), a ValueError for NaN, an infinity, text that is no number
    or a value over 1, each naming ``i_fraction`` and the value."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Fraction, str)):
        raise TypeError(
            f"i_fraction takes a number of at most 1, got {type(value).__name__} {value!r:.40}"
        )
    try:
        fi = Fraction(value)
    except (ValueError, OverflowError):  # 'x', NaN, an infinity
        raise ValueError(f"i_fraction takes a number of at most 1, got {value!r:.40}") from None
    if not fi <= 1:
        raise ValueError(f"i_fraction must be at most 1, got {fi}")
    return fi


def analyze_memory(
    program: Schedule | ProgramGraph,
    model: ModelShape | None = None,
    *,
    recompute: str = "none",
    i_fraction: Fraction | float | None = None,
    layers: int | None = None,
    stage_layers=None,
) -> MemoryReport:
    """Peak in-flight activations per rank, the op where each peak occurs, the memory curves and
    the received-buffer peaks, along each rank's program in ``program``'s graph.

    ``layers`` (default ``model.layers``) must be divisible by the number of stages (ppir error,
    exit 2, listing the v that work).  Bytes are filled in when a model is given, unless
    ``stage_layers`` lays the layers out unevenly: then the report stays in chunks (the
    model's I/W split kept), which :func:`ppir.analysis.footprint.footprint` weighs per stage.
    A compute-only program holds no received buffers.
    """
    check_recompute(recompute)
    g = program if isinstance(program, ProgramGraph) else build_graph(program)
    schedule = g.schedule
    fi = _fraction(i_fraction) if i_fraction is not None else split_fractions(model, recompute)
    if stage_layers is not None and len(set(stage_layers)) > 1:  # uneven: chunks only
        model = layers = None
    P, S = schedule.ranks, schedule.stages
    model_stages = deps.pipeline_length(S, schedule.pipelines)  # S unless pipelines replicate
    chunk_size = chunk_in_a(P, S, schedule.pipelines)
    n_layers = layers if layers is not None else (model.layers if model else None)
    if n_layers is None:
        lps = None
    elif model is None:  # no model: no --stage-layers to suggest
        lps = check_layers(n_layers, model_stages, P)
    else:
        lps = even_layers(n_layers, schedule, model_stages)
    chunk_bytes = None
    if model is not None:
        chunk_bytes = (lps or 0) * model.activation_bytes_per_layer(recompute)
    msg_bytes = model.message_bytes() if model is not None else None
    # integer units: F allocates D, I frees fi*D, W frees (1-fi)*D
    D = fi.denominator
    free = {OpKind.B: D, OpKind.I: fi.numerator, OpKind.W: D - fi.numerator}
    # a first stage's I has no input gradient to compute: W frees the whole chunk
    first = {lo for lo, _ in deps.stage_bounds(S, schedule.pipelines)}
    free_first = free | {OpKind.I: 0, OpKind.W: D}
    unit = Fraction(1, D)
    keep = 0 if schedule.forward_only else D  # an evaluation forward keeps nothing
    # what a forward keeps beside its layers (token ids, logits) I does not free: the logits'
    # gradient, as big, stays until the output layer's W: the rule at fraction 0, which is
    # the first stage's (free_first) on every stage
    per_rank = []
    for r in range(P):
        level = peak = level_w = 0
        peak_i, peak_op = -1, None
        curve, curve_w = [], []
        for a in _compute_actions(g, r):
            if a.kind is OpKind.F:
                level += keep
                level_w += keep
            else:
                level -= (free_first if a.stage in first else free)[a.kind]
                level_w -= free_first[a.kind]
            curve.append(level)
            curve_w.append(level_w)
            if level > peak:
                peak, peak_i, peak_op = level, len(curve) - 1, a
        rf, rb, rt = _recv_peaks(g, r)
        pc = peak * unit
        per_rank.append(
            RankMemory(
                rank=r,
                chunks=len(schedule.stages_of_rank[r]),
                peak_chunks=pc,
                peak_activations=pc * chunk_size,
                peak_op=peak_op,
                peak_index=peak_i,
                curve=tuple(curve),
                whole_curve=None if curve_w == curve else tuple(curve_w),
                unit=unit,
                peak_recv_forward=rf,
                peak_recv_backward=rb,
                peak_recv=rt,
                peak_bytes=pc * chunk_bytes if chunk_bytes is not None else None,
                peak_recv_bytes=rt * msg_bytes if msg_bytes is not None else None,
                param_shares=len(schedule.stages_of_rank[r]) * chunk_size,
            )
        )
    return MemoryReport(
        schedule.name,
        P,
        S,
        schedule.microbatches,
        chunk_size,
        fi,
        tuple(per_rank),
        model,
        recompute,
        n_layers,
        lps,
        chunk_bytes,
    )


def released_by(a: Action, schedule: Schedule) -> tuple[deps.Producer | None, ...]:
    """For a forward ``a`` = F(s, m), the ops that free what it keeps, as this module's model
    says (the views that list what a rank holds read them): (the op after which all of it is
    freed, the op that frees part of it before: a split I, except on a pipeline's first
    stage); (None, None) when an evaluation forward keeps nothing."""
    if schedule.forward_only:
        return None, None
    whole = deps.Producer(a.stage, deps.WEIGHT_GRAD, a.mb)  # B, or W when split
    lo, _ = deps.bounds(a.stage, schedule.stages, schedule.pipelines)
    part = deps.Producer(a.stage, (OpKind.I,), a.mb) if a.stage != lo else None
    return whole, part


def _compute_actions(g: ProgramGraph, r: int):
    """Rank r's compute actions along its program (an overlapped step's parts in order)."""
    ops = g.ops
    for v in g.rank_nodes[r]:
        if g.kind[v] == COMPUTE:
            yield from ops[g.lo[v] : g.hi[v]]


def _recv_peaks(g: ProgramGraph, r: int) -> tuple[int, int, int]:
    """Peak (forward, backward, total) buffers rank r holds between the post of each RECV and
    the compute op that consumes it."""
    S = g.num_stages
    pending: set[tuple] = set()
    nf = nb = pf = pb = pt = 0
    ops, kind, lo, hi, unit_ops = g.ops, g.kind, g.lo, g.hi, g.unit_ops
    crossing = deps.crossing_table(S, g.schedule.pipelines).get  # inputs from the op's pipeline
    RECV_F, RECV_B = OpKind.RECV_F, OpKind.RECV_B
    add = pending.add
    for v in g.rank_nodes[r]:
        k = kind[v]
        if k == POST:
            for o in unit_ops[v] if unit_ops else range(lo[v], hi[v]):
                a = ops[o]
                ak = a.kind
                if ak is RECV_F or ak is RECV_B:
                    add((a.stage, ak, a.mb))
                    if ak is RECV_F:
                        nf += 1
                        if nf > pf:
                            pf = nf
                    else:
                        nb += 1
                        if nb > pb:
                            pb = nb
                    if nf + nb > pt:
                        pt = nf + nb
        elif k == COMPUTE and pending:
            for a in ops[lo[v] : hi[v]]:
                rule = crossing((a.kind, a.stage))
                if rule is None:
                    continue
                key = (a.stage, rule[2], a.mb)  # the RECV delivering its input (deps.recv_key)
                if key in pending:
                    pending.discard(key)
                    if rule[1]:
                        nb -= 1
                    else:
                        nf -= 1
    return pf, pb, pt
