"""The estimator: :func:`from_timeline` turns the timeline of a program's graph into the
:class:`Estimate` every command reports; :func:`estimate` times a lowered program.

Definitions (all per step, in the config's time unit: ``"unit"`` or ``"s"``)
---------------------------------------------------------------------------
* ``step_time``: when the last node of the program's graph finishes (every rank starts at 0):
  the length of the graph's longest path under the costs (:mod:`ppir.analysis.timeline`).
* ``busy[r]``: the sum of rank r's compute durations; ``idle[r] = step_time - busy[r]`` is its
  *bubble* (the closed forms (P-1)(F+B) etc. are this number).
* ``exposed_comm[r]``: the part of ``idle[r]`` during which a message of rank r is on the wire
  or one of its data-parallel gradient reductions runs (the union of those intervals minus its
  compute intervals, :mod:`ppir.analysis.exposed`; under ``fifo`` progress a rank never
  computes while its own messages move, under ``relaxed`` it may).
  ``idle - exposed_comm`` (``waiting``) is time with neither compute nor own traffic.
* ``bubble_fraction_of_total = sum(idle) / (P · step_time)`` (1F1B: (P-1)/(M+P-1)) and
  ``bubble_fraction_of_ideal = sum(idle) / sum(busy)`` (Narayanan 2021; 1F1B: (P-1)/M).
* ``critical_path``: the longest path itself (its length is ``step_time``) and the compute ops
  on it; ``dependency_bound``: the longest path of the compute order alone, cross-rank data
  edges weighted with their message time -- a lower bound for every lowering of the order.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import reduce
from operator import add
from typing import NamedTuple

from ppir.analysis.config import CostConfig
from ppir.analysis.costs import costs_for
from ppir.analysis.critical_path import PathLink, path_ops
from ppir.analysis.exposed import exposed_spans, reduction_spans
from ppir.analysis.timeline import Timeline, check_complete, run
from ppir.analysis.units import json_bytes, microbatch_json
from ppir.diagnostics import EXIT_INVALID, PpirError
from ppir.ir import Action, Schedule, deps
from ppir.ir.graph import COMPUTE, ProgramGraph, build_graph
from ppir.verify import verify as _verify

FORMAT = "ppir.estimate/2"


def op_label(a: Action) -> str:
    """``F3@s5``: kind, microbatch, stage (comm actions keep their kind name)."""
    return f"{a.kind.value}{a.mb}@s{a.stage}"


class OpTiming(NamedTuple):
    rank: int
    action: Action
    start: float
    end: float


class ReduceTiming(NamedTuple):
    """A ``REDUCE_GRAD``: rank ``rank`` all-reduces stage ``stage``'s gradients over the
    data-parallel replicas (and the stage's other copies) from ``start`` to ``end``."""

    rank: int
    stage: int
    start: float
    end: float


class MessageTiming(NamedTuple):
    send: Action
    recv: Action
    src: int
    dst: int
    start: float
    end: float
    nbytes: float


@dataclass(frozen=True)
class RankEstimate:
    """One rank's figures.  ``peak_activations`` is in A (one microbatch's activations of a full
    rank share) and ``peak_bytes`` in bytes when a model is given (from
    :mod:`ppir.analysis.memory`)."""

    rank: int
    busy: float
    idle: float
    exposed_comm: float
    compute_ops: int
    messages_sent: int
    peak_activations: float | None = None
    peak_bytes: float | None = None

    @property
    def waiting(self) -> float:
        return self.idle - self.exposed_comm


@dataclass(frozen=True)
class Estimate:
    """Result of :func:`estimate`.  Times are floats in ``time_unit``; in unit mode they are the
    exact rationals rounded once (so ``== float(Fraction(...))`` comparisons hold).
    ``critical_path`` is the length of the longest path of the timed graph (= ``step_time``),
    ``critical_path_ops`` the compute ops on it, ``critical_path_links`` other ranks' groups it
    runs through; ``dependency_bound``, the compute order's longest path with transfer times
    on its cross-rank edges: no lowering of this order can be faster (None when not computed)."""

    schedule: str
    params: dict
    ranks: int
    stages: int
    microbatches: int  # one pipeline's (of ``pipelines``, each a replica of the model)
    pipelines: int
    time_unit: str
    config: CostConfig
    progress: str
    step_time: float
    per_rank: tuple[RankEstimate, ...]
    critical_path: float
    critical_path_ops: tuple[OpTiming, ...]
    dependency_bound: float | None
    message_count: int
    message_bytes: float
    ops: tuple[tuple[OpTiming, ...], ...] = field(repr=False)
    messages: tuple[MessageTiming, ...] = field(repr=False)
    critical_path_links: tuple[PathLink, ...] = field(default=(), repr=False)
    exposed: tuple[tuple[tuple[float, float], ...], ...] = field(default=(), repr=False)
    """Per rank, the intervals of its ``exposed_comm`` in time order (what the charts draw):
    :func:`ppir.analysis.exposed.exposed_spans`."""
    reductions: tuple[ReduceTiming, ...] = field(default=(), repr=False)
    """Every data-parallel gradient reduction (a ``REDUCE_GRAD``), a rank's in program order."""

    @property
    def bubble_fraction_of_total(self) -> float:
        total = self.ranks * self.step_time
        return sum(r.idle for r in self.per_rank) / total if total else 0.0

    @property
    def bubble_fraction_of_ideal(self) -> float:
        busy = sum(r.busy for r in self.per_rank)
        return sum(r.idle for r in self.per_rank) / busy if busy else 0.0

    @property
    def busiest(self) -> float:
        return max((r.busy for r in self.per_rank), default=0.0)

    def to_json(self, with_ops: bool = False) -> dict:
        """The versioned JSON object (``format: ppir.estimate/2``)."""
        out = {
            "format": FORMAT,
            "schedule": self.schedule,
            "params": dict(self.params),
            "ranks": self.ranks,
            "stages": self.stages,
            **microbatch_json(self.microbatches, self.pipelines),
            "time_unit": self.time_unit,
            "assumptions": self.config.describe(ranks=self.ranks),
            "progress": self.progress,
            "step_time": self.step_time,
            "busiest_rank_compute": self.busiest,
            "bubble_fraction_of_total": self.bubble_fraction_of_total,
            "bubble_fraction_of_ideal": self.bubble_fraction_of_ideal,
            "critical_path": {
                "length": self.critical_path,
                "ops": [f"{op_label(o.action)}@r{o.rank}" for o in self.critical_path_ops],
                "links": [link.to_json() for link in self.critical_path_links],
            },
            "dependency_bound": self.dependency_bound,
            "messages": {"count": self.message_count, "bytes": json_bytes(self.message_bytes)},
            "per_rank": [
                {
                    "rank": r.rank,
                    "busy": r.busy,
                    "idle": r.idle,
                    "exposed_comm": r.exposed_comm,
                    "waiting": r.waiting,
                    "compute_ops": r.compute_ops,
                    "messages_sent": r.messages_sent,
                    "peak_activations": r.peak_activations,
                    "peak_bytes": json_bytes(r.peak_bytes),
                }
                for r in self.per_rank
            ],
        }
        if with_ops:
            out["ops"] = [
                {"rank": o.rank, "op": op_label(o.action), "start": o.start, "end": o.end}
                for row in self.ops
                for o in row
            ]
        return out


def estimate(
    program: Schedule | ProgramGraph,
    config: CostConfig | None = None,
    *,
    progress: str = "fifo",
    memory: bool = True,
) -> Estimate:
    """Time one training step of ``program`` under ``config`` (default: :class:`CostConfig`
    ``()``, the textbook costs) and the verifier's ``progress`` model (``"fifo"``, the default,
    or ``"relaxed"``).  A program with communication is timed as written; a compute-only one is
    compiled first exactly as ``ppir compile`` does (:func:`ppir.compile`: lowered, overlapped,
    verified), so the numbers are those of the program that runs.

    Raises ppir errors: exit 2 for configs that do not fit the program (stage weights, layers),
    exit 1 when it does not verify or cannot run.  Linear in the number of ops.
    ``memory=False`` skips the memory analysis.
    """
    cfg = config or CostConfig()
    g = program if isinstance(program, ProgramGraph) else None
    schedule = g.schedule if g is not None else program
    if not schedule.is_lowered:
        from ppir.pipeline import compile

        c = compile(schedule, costs=cfg, progress=progress)
        c.check()
        est = c.estimate
        return est if memory else _without_memory(est)
    if g is None or g.progress != progress:
        g = build_graph(schedule, progress)
    costs = costs_for(schedule, cfg)
    tl = run(g, costs)
    if not tl.complete and (errors := _verify(g, progress, timeline=tl).errors):
        raise PpirError(errors, EXIT_INVALID)  # why: the cycle, as ppir check prints it
    return from_timeline(tl, cfg, memory_report(g, cfg) if memory else None)


def _without_memory(est: Estimate) -> Estimate:
    rows = tuple(replace(r, peak_activations=None, peak_bytes=None) for r in est.per_rank)
    return replace(est, per_rank=rows)


def memory_report(g: ProgramGraph, cfg: CostConfig):
    """The activation-memory analysis of ``g`` at the config's model and layout."""
    from ppir.analysis.memory import analyze_memory

    return analyze_memory(g, cfg.model, recompute=cfg.recompute, stage_layers=cfg.stage_layers)


def from_timeline(
    tl: Timeline, cfg: CostConfig, mem=None, dependency_bound: float | None = None
) -> Estimate:
    """The :class:`Estimate` of a complete timeline (``tl.costs`` made from ``cfg``); ``mem``
    (a :class:`~ppir.analysis.memory.MemoryReport`) fills the memory columns."""
    g, costs, s = tl.graph, tl.costs, tl.graph.schedule
    check_complete(tl)
    conv = costs.converter()
    ops, busy = _op_timings(tl, conv)
    msgs, spans = _messages(tl, conv)
    reductions = reduction_spans(tl)
    exposed = exposed_spans(tl, spans, reductions)
    step = tl.makespan
    sent = [0] * s.ranks
    for m in msgs:
        sent[m.src] += 1
    per_rank = []
    for r in range(s.ranks):
        peak = mem.per_rank[r] if mem is not None else None
        per_rank.append(
            RankEstimate(
                r,
                conv(busy[r]),
                conv(step - busy[r]),
                conv(sum(b - a for a, b in exposed[r])),  # ticks, converted once
                len(ops[r]),
                sent[r],
                float(peak.peak_activations) if peak is not None else None,
                float(peak.peak_bytes)
                if peak is not None and peak.peak_bytes is not None
                else None,
            )
        )
    cp_ops, cp_links = path_ops(tl, lambda v: _node_ops(tl, conv, v))
    return Estimate(
        s.name,
        s.param_dict,
        s.ranks,
        s.stages,
        s.microbatches,
        s.pipelines,
        cfg.time_unit,
        cfg,
        g.progress,
        conv(step),
        tuple(per_rank),
        conv(step),
        cp_ops,
        dependency_bound,
        len(msgs),
        sum(m.nbytes for m in msgs),
        tuple(tuple(row) for row in ops),
        tuple(msgs),
        cp_links,
        tuple(tuple((conv(a), conv(b)) for a, b in row) for row in exposed),
        tuple(ReduceTiming(r, st, conv(a), conv(b)) for r, st, a, b in reductions),
    )


def _op_timings(tl: Timeline, conv) -> tuple[list[list[OpTiming]], list]:
    """Per rank, each compute action's interval in program order (:func:`_node_ops`), and
    each rank's busy ticks."""
    g = tl.graph
    ops: list[list[OpTiming]] = [[] for _ in range(g.schedule.ranks)]
    busy = [0] * g.schedule.ranks
    kind, los, his, begin, finish, allops = g.kind, g.lo, g.hi, tl.start, tl.finish, g.ops
    for r, order in enumerate(g.rank_nodes):
        nodes = [v for v in order if kind[v] == COMPUTE]
        # in order, uncompensated (sum() compensates float sums from Python 3.12 on)
        busy[r] = reduce(add, [finish[v] - begin[v] for v in nodes], 0)
        if all(his[v] - los[v] == 1 for v in nodes):  # no overlapped step: one op per node
            ops[r] = [OpTiming(r, allops[los[v]], conv(begin[v]), conv(finish[v])) for v in nodes]
        else:
            ops[r] = [t for v in nodes for t in _node_ops(tl, conv, v)]
    return ops, busy


def _node_ops(tl: Timeline, conv, v: int) -> list[OpTiming]:
    """The intervals of compute node ``v``'s actions: its own, or for an overlapped step timed
    as one op, consecutive sub-intervals in proportion to the parts' own durations."""
    g, costs = tl.graph, tl.costs
    r, t, end, lo, hi = g.rank[v], tl.start[v], tl.finish[v], g.lo[v], g.hi[v]
    if hi - lo == 1:
        return [OpTiming(r, g.ops[lo], conv(t), conv(end))]
    op, exact = costs.op, costs.exact and not costs.processors  # shared runs are in floats
    durs = [op[a.stage][a.kind] for a in g.ops[lo:hi]]
    total, whole = end - t, sum(durs)
    out, start = [], t
    for k, a in enumerate(g.ops[lo:hi]):
        if k == hi - lo - 1:
            stop = end
        elif exact:
            stop = start + durs[k] * total // whole
        else:
            stop = start + durs[k] * total / whole
        out.append(OpTiming(r, a, conv(start), conv(stop)))
        start = stop
    return out


def _messages(tl: Timeline, conv) -> tuple[list[MessageTiming], list[tuple]]:
    """Every message's timing, and its (src rank, dst rank, start, end) in ticks: the message
    nodes of a lowered program, or, for a compute-only program (the latency model), every
    value crossing ranks, on the wire from its producer's end for its link's time."""
    g, costs = tl.graph, tl.costs
    nbytes = costs.nbytes
    if g.lowered:
        ops, rank, lo, hi, start, finish = g.ops, g.op_rank, g.lo, g.hi, tl.start, tl.finish
        spans = [(rank[lo[m]], rank[hi[m]], start[m], finish[m]) for m in g.messages]
        msgs = [
            MessageTiming(ops[lo[m]], ops[hi[m]], src, dst, conv(a), conv(b), nbytes)
            for m, (src, dst, a, b) in zip(g.messages, spans)
        ]
        return msgs, spans
    place, msgs, spans = g.schedule.placement, [], []
    for o, a in enumerate(g.ops):
        msg = deps.outgoing_message(place, a, g.schedule.pipelines) if a.kind.is_compute else None
        if msg is None:
            continue
        src, dst = g.op_rank[o], place[msg.dst]
        t = tl.finish[g.op_node[o]]
        spans.append((src, dst, t, t + costs.link(src, dst)))
        msgs.append(
            MessageTiming(
                deps.send_action(msg),
                deps.recv_action(msg),
                src,
                dst,
                *map(conv, spans[-1][2:]),
                nbytes,
            )
        )
    return msgs, spans
