"""The estimator's library entry point: :func:`estimate` and the :class:`Estimate` it returns.

Definitions (all per step, in the config's time unit: ``"unit"`` or ``"s"``)
---------------------------------------------------------------------------
* ``step_time``: when the last rank finishes its program (every rank starts at 0).
* ``busy[r]``: the sum of rank r's compute durations; ``idle[r] = step_time - busy[r]`` is its
  *bubble* (the closed forms (P-1)(F+B) etc. are this number).
* ``exposed_comm[r]``: the part of ``idle[r]`` during which a message of rank r is on the wire
  (the union of its transfers' intervals minus its compute intervals; under ``fifo`` progress a
  rank never computes while its own messages move, under ``relaxed`` it may).
  ``idle - exposed_comm`` (``waiting``) is time with neither compute nor own traffic.
* ``bubble_fraction_of_total = sum(idle) / (P · step_time)`` (1F1B: (P-1)/(M+P-1)) and
  ``bubble_fraction_of_ideal = sum(idle) / sum(busy)`` (Narayanan 2021; 1F1B: (P-1)/M).
* ``critical_path``: the longest path through the compute actions along program order and data
  dependencies, cross-rank edges weighted with their message time.  A lower bound on
  ``step_time``; the two differ by the waiting that communication grouping adds.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field
from typing import NamedTuple

from ppir.analysis.config import CostConfig
from ppir.analysis.simulate import Timeline, simulate
from ppir.analysis.tables import CostTables, build_tables
from ppir.ir import Action, OpKind, Schedule
from ppir.passes import LowerComms

FORMAT = "ppir.estimate/1"


def op_label(a: Action) -> str:
    """``F3@s5``: kind, microbatch, stage (comm actions keep their kind name)."""
    return f"{a.kind.value}{a.mb}@s{a.stage}"


class OpTiming(NamedTuple):
    rank: int
    action: Action
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
    exact rationals rounded once (so ``== float(Fraction(...))`` comparisons hold)."""

    schedule: str
    params: dict
    ranks: int
    stages: int
    microbatches: int
    time_unit: str
    config: CostConfig
    progress: str
    step_time: float
    per_rank: tuple[RankEstimate, ...]
    critical_path: float
    critical_path_ops: tuple[OpTiming, ...]
    message_count: int
    message_bytes: float
    ops: tuple[tuple[OpTiming, ...], ...] = field(repr=False)
    messages: tuple[MessageTiming, ...] = field(repr=False)

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
        """The versioned JSON object (``format: ppir.estimate/1``)."""
        out = {
            "format": FORMAT,
            "schedule": self.schedule,
            "params": dict(self.params),
            "ranks": self.ranks,
            "stages": self.stages,
            "microbatches": self.microbatches,
            "time_unit": self.time_unit,
            "assumptions": self.config.describe(),
            "progress": self.progress,
            "step_time": self.step_time,
            "busiest_rank_compute": self.busiest,
            "bubble_fraction_of_total": self.bubble_fraction_of_total,
            "bubble_fraction_of_ideal": self.bubble_fraction_of_ideal,
            "critical_path": {
                "length": self.critical_path,
                "ops": [f"{op_label(o.action)}@r{o.rank}" for o in self.critical_path_ops],
            },
            "messages": {"count": self.message_count, "bytes": self.message_bytes},
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
                    "peak_bytes": r.peak_bytes,
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
    schedule: Schedule,
    config: CostConfig | None = None,
    *,
    progress: str = "fifo",
    memory: bool = True,
) -> Estimate:
    """Time one training step of ``schedule`` (lowered with lockstep lowering if it is
    compute-only) under ``config`` (default: :class:`CostConfig` ``()``, the textbook costs)
    and the verifier's ``progress`` model (``"fifo"``, the default, or ``"relaxed"``).

    Raises ppir errors: exit 2 for configs that do not fit the schedule (stage weights, layers),
    exit 1 when the schedule deadlocks or mismatches (unverified input).  O(n) in actions plus
    O(k log k) per rank for its k messages.  ``memory=False`` skips the memory analysis.
    """
    cfg = config or CostConfig()
    gc_was_on = gc.isenabled()
    gc.disable()  # hundreds of thousands of small tuples: generational GC would go superlinear
    try:
        return _estimate(schedule, cfg, progress, memory)
    finally:
        if gc_was_on:
            gc.enable()


def _estimate(schedule: Schedule, cfg: CostConfig, progress: str, memory: bool) -> Estimate:
    s = schedule if schedule.is_lowered else LowerComms().apply(schedule)
    tables = build_tables(s, cfg)
    tl = simulate(s, tables, progress)
    conv = tables.converter()
    step = max(tl.finish, default=0)
    ops = tuple(
        tuple(OpTiming(r, o.action, conv(o.start), conv(o.end)) for o in row)
        for r, row in enumerate(tl.ops)
    )
    msgs = tuple(
        MessageTiming(t.send, t.recv, t.src, t.dst, conv(t.start), conv(t.end), t.nbytes)
        for t in tl.transfers
    )
    exposed = _exposed_comm(s.ranks, tl)
    peaks = _memory_peaks(s, cfg) if memory else None
    sent = [0] * s.ranks
    for t in tl.transfers:
        sent[t.src] += 1
    per_rank = []
    for r in range(s.ranks):
        busy = sum(o.end - o.start for o in tl.ops[r])
        per_rank.append(
            RankEstimate(
                r,
                conv(busy),
                conv(step - busy),
                conv(exposed[r]),
                len(tl.ops[r]),
                sent[r],
                *(peaks[r] if peaks else (None, None)),
            )
        )
    cp_len, cp_path = critical_path(s, tables, tl)
    return Estimate(
        s.name,
        s.param_dict,
        s.ranks,
        s.stages,
        s.microbatches,
        cfg.time_unit,
        cfg,
        progress,
        conv(step),
        tuple(per_rank),
        conv(cp_len),
        tuple(ops[r][i] for r, i in cp_path),
        len(msgs),
        sum(m.nbytes for m in msgs),
        ops,
        msgs,
    )


def _exposed_comm(P: int, tl: Timeline) -> list:
    """Per rank, the time (ticks) during which one of its messages is on the wire while its
    compute stream is idle: the union of its transfers' intervals minus its compute intervals.
    Linear after sorting each rank's transfers."""
    spans: list[list] = [[] for _ in range(P)]
    for t in tl.transfers:
        if t.end > t.start:
            spans[t.src].append((t.start, t.end))
            spans[t.dst].append((t.start, t.end))
    out = []
    for r, row in enumerate(spans):
        row.sort()
        merged: list[list] = []
        for a, b in row:
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        ops, k, total = tl.ops[r], 0, 0
        for a, b in merged:
            total += b - a
            while k < len(ops) and ops[k].end <= a:
                k += 1
            j = k
            while j < len(ops) and ops[j].start < b:
                total -= min(b, ops[j].end) - max(a, ops[j].start)
                j += 1
        out.append(total)
    return out


def critical_path(s: Schedule, tables: CostTables, tl: Timeline):
    """(length in ticks, [(rank, index among its compute ops)]) of the longest path through the
    compute actions along program order and data dependencies (see the module docstring).

    Uses the simulated start times as a topological order (every predecessor finishes no later
    than its successor starts; ties broken by end time, then program position), so it is
    O(n log n) and needs no graph.  Data producers: F(s,m) <- F(s-1,m); B/I(s,m) <- F(s,m) and
    the B or I of (s+1,m); W(s,m) <- I(s,m) (:func:`ppir.ir.producers`).
    """
    F, B, I, W = OpKind.F, OpKind.B, OpKind.I, OpKind.W
    where: dict[tuple, tuple[int, int]] = {}
    for r, row in enumerate(tl.ops):
        for i, o in enumerate(row):
            a = o.action
            k = B if a.kind is I else a.kind  # the backward of (s, m), whichever kind runs it
            where.setdefault((a.stage, k, a.mb), (r, i))
    order = sorted(
        (o.start, o.end, r, i) for r, row in enumerate(tl.ops) for i, o in enumerate(row)
    )
    dist: dict[tuple[int, int], int | float] = {}
    back: dict[tuple[int, int], tuple[int, int] | None] = {}
    link = tables.link
    for start, end, r, i in order:
        a = tl.ops[r][i].action
        st, k, m = a.stage, a.kind, a.mb
        if k is F:
            preds = (where.get((st - 1, F, m)),)
        elif k is W:
            preds = (where.get((st, B, m)),)
        else:
            preds = (where.get((st, F, m)), where.get((st + 1, B, m)))
        best, arg = 0, None
        if i > 0:
            best, arg = dist[(r, i - 1)], (r, i - 1)
        for p in preds:
            if p is None or p == (r, i):
                continue
            d = dist.get(p)
            if d is None:  # only for zero-length ties: fall back to its end time
                d = tl.ops[p[0]][p[1]].end
            if p[0] != r:
                d += link[p[0]][r][0]
            if d > best:
                best, arg = d, p
        dist[(r, i)] = best + (end - start)
        back[(r, i)] = arg
    if not dist:
        return 0, []
    node = max(dist, key=lambda k: (dist[k], -k[0]))
    length, path = dist[node], []
    while node is not None:
        path.append(node)
        node = back[node]
    path.reverse()
    return length, path


def _memory_peaks(s: Schedule, cfg: CostConfig):
    """Per rank (peak activations in A, peak bytes or None), from :func:`ppir.analysis.memory.
    analyze_memory`; None when that module is unavailable."""
    try:
        from ppir.analysis.memory import analyze_memory
    except ImportError:  # the memory analysis ships separately; estimates work without it
        return None
    rep = analyze_memory(s, cfg.model, recompute=cfg.recompute)
    return [
        (float(m.peak_activations), float(m.peak_bytes) if m.peak_bytes is not None else None)
        for m in rep.per_rank
    ]
