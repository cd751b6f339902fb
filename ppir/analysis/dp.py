"""The gradient reduction in the cost model: each ``REDUCE_GRAD`` (a ``reduce`` node of the
graph) lasts one ring all-reduce of its stage's gradients over the stage's members -- its
data-parallel replicas, times the copies the schedule holds of it (bidirectional DualPipe: 2,
:func:`reduce_members`) -- and the report says how much of it the pipeline's drain hides.

Ring all-reduce (Patarasuk & Yuan 2009; NCCL's ring): ``D`` replicas exchange ``2 (D - 1)``
chunks of ``n / D`` bytes each, one after the other, on the ring's links:

    T = 2 (D - 1) * (alpha + (n / D) / beta)

with ``alpha``/``beta`` the latency and bandwidth of the link class the data-parallel group
uses: the intra-node link when the ring of ``D`` replicas of a ``tp``-GPU rank fits in a node
(``tp x D <= gpus_per_node``: :mod:`ppir.analysis.nodes`) and a stage's copies sit on one
node, else the inter-node one (the ring's slowest hop; :func:`stage_links`).  ``n``, the
stage's gradient bytes, comes from the model shape: the stage's parameters on one
tensor-parallel rank (the memory footprint's count: layers, the embedding on the first stage,
the final norm and the output layer on the last, a tied output layer once on a rank that holds
both) at the gradient dtype (``grad_dtype``, fp32 by default); without a model it is 0 and the
reduction costs its latencies alone (unit mode).
Reductions of one rank share the ring: the timeline runs them one after another (a
``channel`` edge between consecutive reduce nodes of a rank).

A reduction is posted asynchronously after its stage's last backward and waited for at the end
of the step, so it overlaps the rest of the pipeline's work (the drain: the later backwards of
this rank and of the ranks before it).  :func:`dp_report`: per rank, the reduction time, the
part still running when the step would have ended without reductions (``exposed``: the step
grows by the largest one) and the rest (``hidden``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction

from ppir.analysis.config import CostConfig, Link
from ppir.analysis.costs import Costs
from ppir.analysis.nodes import dp_ring_within_node
from ppir.analysis.timeline import Timeline
from ppir.diagnostics import error
from ppir.ir import Schedule, deps
from ppir.ir.graph import REDUCE


def resolve_dp(cfg: CostConfig, dp: int | None, name: str = "dp=") -> tuple[CostConfig, int]:
    """One data-parallel size: ``dp`` (the replicas compile times the reductions for) and the
    model's ``dp`` (what ZeRO shards over, and what places the ranks on nodes) must agree;
    either gives both.  ``(cfg with the model at that size, the size)``; a ppir error naming
    ``name`` when both are given and differ."""
    model = cfg.model
    if model is None:
        return cfg, dp or 1
    if dp is None:
        return cfg, model.dp
    if model.dp not in (1, dp):
        raise error(
            "bad-usage",
            f"{name}{dp} and the model's dp={model.dp} disagree: both are the data-parallel "
            "size (replicas of the pipeline)",
            hints=[f"give one of them, e.g. {name}{dp} alone"],
        )
    return replace(cfg, model=replace(model, dp=dp)), dp


def reduction_bound(tl: Timeline) -> int | float:
    """A lower bound (ticks) on the step of every lowering, with its reductions, of the
    compute-only program whose complete run ``tl`` is: stage s's reduction waits for the ops
    whose gradients it reduces (:func:`ppir.ir.deps.reduce_inputs`), which end no earlier than
    in ``tl`` (a lowering only adds waits; max-plus is monotone, with a processor per rank),
    and the step ends after it.  0 without reductions, and on shared processors (not
    monotone)."""
    costs, g = tl.costs, tl.graph
    if costs is None or not any(costs.reduce) or costs.processors:
        return 0
    M, best = g.schedule.microbatches, 0
    for s, t in enumerate(costs.reduce):
        ready = 0
        for p in deps.reduce_inputs(s, M):  # the first of its kinds that the program runs
            o = next((o for k in p.kinds if (o := g.first.op(p.stage, k, p.mb)) is not None), None)
            if o is not None:
                ready = max(ready, tl.finish[g.op_node[o]])
        best = max(best, ready + t)
    return best


def ring_allreduce_time(replicas: int, nbytes: float, link: Link) -> Fraction | float:
    """``2 (D - 1) (alpha + n / (D beta))`` (0 for one replica)."""
    if replicas <= 1:
        return 0
    chunk = nbytes / replicas if nbytes else 0
    return 2 * (replicas - 1) * link.time(chunk)


def dp_link(cfg: CostConfig, replicas: int) -> Link:
    """The link class of a data-parallel ring (see the module docstring)."""
    return cfg.intra if dp_ring_within_node(cfg, replicas) else cfg.inter


def reduce_members(schedule: Schedule, dp: int) -> int:
    """The members of each stage's gradient all-reduce: the stage's copies in the schedule
    (its ``pipelines``: bidirectional DualPipe holds each stage twice, on ranks r and P-1-r,
    whose gradients are summed every step, as deepseek-ai/DualPipe's
    ``examples/example_dualpipe.py`` does) times the data-parallel replicas.  The program holds
    reductions (``REDUCE_GRAD``) when it is above 1."""
    return dp * schedule.pipelines


def holds_reductions(schedule: Schedule, dp: int) -> bool:
    """Whether ``schedule``'s program reduces gradients: more than one member per stage
    (:func:`reduce_members`), and a backward to reduce (an evaluation program has none)."""
    return reduce_members(schedule, dp) > 1 and not schedule.forward_only


def rank_links(schedule: Schedule, cfg: CostConfig, dp: int) -> list[str]:
    """Each rank's reduction link, ``"intra-node"`` or ``"inter-node"``: the slowest of its
    stages' (:func:`stage_links`)."""
    links = stage_links(schedule, cfg, dp)
    out = ["intra-node"] * schedule.ranks
    for s, r in enumerate(schedule.placement):
        if links[s] is not cfg.intra:
            out[r] = "inter-node"
    return out


def stage_links(schedule: Schedule, cfg: CostConfig, dp: int) -> list[Link]:
    """Each stage's reduction link: the data-parallel ring's (:func:`dp_link`), or the
    inter-node link when the stage's copies sit on pipeline ranks of different nodes
    (:func:`ppir.analysis.nodes.pipeline_ranks_per_node`)."""
    from ppir.analysis.nodes import pipeline_ranks_per_node
    from ppir.ir.deps import model_stage

    ring, per_node = dp_link(cfg, dp), pipeline_ranks_per_node(cfg)
    of = [model_stage(s, schedule.stages, schedule.pipelines) for s in range(schedule.stages)]
    nodes: dict[int, set[int]] = {}  # model stage -> the nodes its copies sit on
    for s, r in enumerate(schedule.placement):
        nodes.setdefault(of[s], set()).add(r // per_node)
    return [ring if len(nodes[of[s]]) == 1 else cfg.inter for s in range(schedule.stages)]


def stage_grad_bytes(schedule: Schedule, cfg: CostConfig) -> list[float]:
    """Each stage's gradient bytes on one tensor-parallel rank: its parameters, the memory
    footprint's count (:func:`ppir.analysis.footprint.stage_sizes`: layers, embedding on the
    first stage, final norm on the last; and the last stage's output layer,
    :func:`ppir.analysis.footprint.output_params`), at the model's gradient dtype; 0 without a
    model shape."""
    if cfg.model is None:
        return [0.0] * schedule.stages
    from ppir.analysis.footprint import output_params, schedule_copies, stage_sizes
    from ppir.analysis.models import DTYPE_BYTES

    per = DTYPE_BYTES[cfg.model.grad_dtype]
    sizes = stage_sizes(cfg.model, schedule, stage_layers=cfg.stage_layers)
    heads = output_params(cfg.model, schedule, sizes, schedule_copies(schedule))
    return [float((st.params + head) * per) for st, head in zip(sizes, heads)]


def with_dp(costs: Costs, schedule: Schedule, cfg: CostConfig, replicas: int) -> Costs:
    """``costs`` with each stage's reduction time for ``replicas`` data-parallel replicas
    (``Costs.reduce``, in ticks; exact costs are rescaled when needed to stay integers): a
    ring over :func:`reduce_members` on :func:`stage_links`."""
    n = reduce_members(schedule, replicas)
    links = stage_links(schedule, cfg, replicas)
    times = [
        ring_allreduce_time(n, b, link) for b, link in zip(stage_grad_bytes(schedule, cfg), links)
    ]
    if not costs.exact or not all(isinstance(t, (int, Fraction)) for t in times):
        conv = costs.converter()
        scale = conv(1) if costs.exact else 1.0
        return replace(costs, reduce=tuple(float(t) / scale for t in times))
    ticks = [Fraction(t) / costs.tick for t in times]
    k = 1
    for t in ticks:
        k = k * t.denominator // _gcd(k, t.denominator)
    if k > 1:
        costs = _rescale(costs, k)
    return replace(costs, reduce=tuple(int(t * k) for t in ticks))


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a


def _rescale(c: Costs, k: int) -> Costs:
    return replace(
        c,
        op=tuple({kind: d * k for kind, d in row.items()} for row in c.op),
        intra=c.intra * k,
        inter=c.inter * k,
        pairs=tuple((p, t * k) for p, t in c.pairs),
        tick=c.tick / k,
        post=c.post * k,
        late_w=tuple(t * k for t in c.late_w),
    )


@dataclass(frozen=True)
class DPReduce:
    """Per rank: ``total`` reduction time, ``exposed`` (after the step would have ended without
    reductions) and ``hidden`` (= total - exposed), in the run's time unit."""

    replicas: int
    links: tuple[str, ...]
    """Per rank: the link class its reductions use (:func:`rank_links`)."""
    total: tuple[float, ...]
    exposed: tuple[float, ...]
    copies: int = 1
    """The copies of each stage in the program (bidirectional DualPipe: 2), reduced with it."""

    @property
    def hidden(self) -> tuple[float, ...]:
        return tuple(t - e for t, e in zip(self.total, self.exposed))

    def to_json(self) -> dict:
        """The ``dp_reduce`` object of ``ppir.estimate/2``: per rank, in the run's time unit."""
        return {
            "replicas": self.replicas,
            "copies": self.copies,
            "links": list(self.links),
            "total": [float(t) for t in self.total],
            "exposed": [float(e) for e in self.exposed],
            "hidden": [float(h) for h in self.hidden],
        }

    def describe(self, fmt=str) -> str:
        """Two lines: the rank whose reduction is most exposed, and all ranks together."""
        r = max(range(len(self.total)), key=lambda i: (self.exposed[i], self.total[i]))
        tot, exp = self.total[r], self.exposed[r]
        share = f"{(tot - exp) / tot:.0%}" if tot else "-"
        all_t, all_e = sum(self.total), sum(self.exposed)
        ring = f"{self.replicas} replica{'s' if self.replicas != 1 else ''}"
        if self.copies > 1:
            ring = f"{self.copies * self.replicas}: {self.copies} copies of each stage x {ring}"
        head = "data-parallel reduce      " if self.copies == 1 else "gradient reduce           "
        return (
            f"{head} {fmt(tot)} per step on rank {r} (ring over "
            f"{ring}, {self.links[r]} link): the drain hides {fmt(tot - exp)} "
            f"({share}), {fmt(exp)} exposed\n"
            f"                           all ranks: {fmt(all_t - all_e)} of {fmt(all_t)} "
            "hidden"
        )


def dp_report(tl: Timeline, replicas: int, links, copies: int = 1) -> DPReduce:
    """How much of each rank's reductions its drain hides (see the module docstring)."""
    g = tl.graph
    conv = tl.costs.converter() if tl.costs is not None else float
    ranks = g.schedule.ranks
    end = 0  # when the step would end without the reductions
    red_end = [0] * ranks
    total = [0] * ranks
    for v in range(g.n):
        if g.kind[v] == REDUCE:
            r = g.rank[v]
            red_end[r] = max(red_end[r], tl.finish[v])
            total[r] += tl.duration[v]
        else:
            end = max(end, tl.finish[v])
    exposed = []
    for r in range(ranks):
        e = min(total[r], max(0, red_end[r] - end))
        if not isinstance(e, int) and abs(total[r] - e) <= 1e-9 * abs(total[r]):
            e = total[r]  # float round-off: wholly exposed
        exposed.append(e)
    return DPReduce(
        replicas,
        tuple(links),
        tuple(conv(t) for t in total),
        tuple(conv(e) for e in exposed),
        copies,
    )
