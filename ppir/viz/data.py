"""The compact, JSON-ready description of one timed schedule that the viz page draws.

Contract
--------
:func:`run_data` turns a lowered schedule plus its :class:`~ppir.analysis.estimate.Estimate` into a
plain dict of numbers and short strings (``FORMAT``).  Everything large is a flat array, never a
list of objects, so a P=32, M=128, v=2 schedule embeds in about a megabyte:

* ``ops[r]``: rank r's compute ops in program order, 5 numbers each:
  ``start, end, kind, mb, stage`` (``kind`` indexes ``KINDS`` = "FBIW").
* ``deps[r]``: 2 numbers per op, the *global* ids of its data producers (``-1`` for none); the
  global id of op i of rank r is ``base[r] + i``.
* ``frees[r]``: 2 numbers per op, for a forward the global ids of the op after which all it
  keeps is freed and of the op that frees part of it before (a split I), ``-1`` for none or
  for another op (:func:`ppir.analysis.memory.released_by`: an evaluation forward keeps
  nothing, so its first id is ``-2``).
* ``mem[r]``: 1 number per op, the rank's activation memory in A (one microbatch's activations
  of a full rank share) once that op has finished (:func:`ppir.analysis.memory.analyze_memory`'s
  curve).
* ``msgs``: 8 numbers per message: ``src, dst, start, end, grad, mb, src_op, dst_op``
  (``grad`` 1 for a backward gradient, 0 for a forward activation; ``src_op`` / ``dst_op`` are
  the producing and consuming op indices on their ranks, ``-1`` when not found).
* ``exposed[r]``: rank r's exposed communication, 2 numbers per interval (``start, end``):
  its messages on the wire or its gradient reductions running while it does not compute
  (``Estimate.exposed``, what ``exposed_comm`` sums and the static charts draw).
* ``critical``: the global ids of the compute ops on the critical path, in path order
  (``Estimate.critical_path_ops``: what ``ppir compile --backend cost`` lists), which the page
  outlines.
* ``figures``: the header's key numbers, already formatted where units matter.
* ``microbatches``: the step's, every pipeline's together, with ``microbatches_per_pipeline``
  and, for a schedule of several pipelines, ``pipelines``: the counts of ``ppir.estimate/2`` and
  ``ppir.analysis/2`` (:func:`ppir.analysis.units.microbatch_json`; ``ppir.viz/1`` gave one
  pipeline's count as ``microbatches``).

Times are rounded to 7 significant digits and memory to 4, never into their integer digits
(:func:`ppir.analysis.units.round_sig`).  Pure function of its inputs; never raises on a
valid (verified) schedule.
"""

from __future__ import annotations

from ppir.analysis.estimate import Estimate
from ppir.analysis.memory import MemoryReport, released_by
from ppir.analysis.units import fmt_bytes, fmt_time, microbatch_json, round_sig, unit_meaning
from ppir.ir import OpKind, Schedule, deps
from ppir.viz.layout import KIND_COLORS

FORMAT = "ppir.viz/2"
KINDS = "FBIW"


def _t(x: float) -> float:
    """A time rounded to 7 significant digits (shortest JSON that still reads exactly), every
    integer digit kept."""
    v = round_sig(x, 7)
    return int(v) if v == int(v) else v


def _a(x) -> float:
    """An amount of memory in A rounded to 4 significant digits, every integer digit kept
    (12345.6 is 12346, not 12350)."""
    return round_sig(x, 4)


def _label(schedule: str, params: dict) -> str:
    inner = ", ".join(f"{k}={v}" for k, v in params.items())
    return f"{schedule}({inner})" if inner else schedule


def run_data(lowered: Schedule, est: Estimate, mem: MemoryReport) -> dict:
    """The ``ppir.viz/2`` run object for ``lowered`` timed by ``est`` with memory ``mem``.

    ``est`` must come from :func:`ppir.analysis.estimate` on ``lowered`` and ``mem`` from
    :func:`ppir.analysis.memory.analyze_memory` on it (same ranks, same compute order).
    """
    P = est.ranks
    where: dict[tuple[int, OpKind, int], tuple[int, int]] = {}
    base, n = [], 0
    for r in range(P):
        base.append(n)
        for i, o in enumerate(est.ops[r]):
            where[o.action.key] = (r, i)
        n += len(est.ops[r])

    def gid(p: deps.Producer | None) -> int:  # the global id of the op p names, else -1
        hit = _find(where, p) if p is not None else None
        return -1 if hit is None else base[hit[0]] + hit[1]

    ops, deps_, frees, memc = [], [], [], []
    for r in range(P):
        row_ops: list = []
        row_deps: list = []
        row_frees: list = []
        for o in est.ops[r]:
            a = o.action
            row_ops += [_t(o.start), _t(o.end), KINDS.index(a.kind.value), a.mb, a.stage]
            ids = [gid(p) for p in deps.inputs(a, lowered.stages, lowered.pipelines)]
            row_deps += ([i for i in ids if i >= 0] + [-1, -1])[:2]
            if a.kind is OpKind.F:
                whole, part = released_by(a, lowered)
                row_frees += [-2 if whole is None else gid(whole), gid(part)]
            else:
                row_frees += [-1, -1]
        ops.append(row_ops)
        deps_.append(row_deps)
        frees.append(row_frees)
        scale = float(mem.chunk_size)
        curve = mem.per_rank[r].curve_chunks() if r < len(mem.per_rank) else []
        memc.append([_a(c * scale) for c in curve])
    msgs: list = []
    for m in est.messages:
        grad = deps.message_of(m.send).grad
        src_op = _find(where, deps.served(m.send))
        dst_op = _find(where, deps.served(m.recv))
        msgs += [
            m.src,
            m.dst,
            _t(m.start),
            _t(m.end),
            int(grad),
            m.send.mb,
            -1 if src_op is None else src_op[1],
            -1 if dst_op is None else dst_op[1],
        ]
    return {
        "format": FORMAT,
        "schedule": est.schedule,
        "label": _label(est.schedule, est.params),
        "params": dict(est.params),
        "ranks": P,
        "stages": est.stages,
        **microbatch_json(est.microbatches, est.pipelines),
        "unit": est.time_unit,
        "unit_note": "times in seconds"
        if est.time_unit == "s"
        else unit_meaning(est.config.F, equals=True),
        "step": _t(est.step_time),
        "base": base,
        "ops": ops,
        "deps": deps_,
        "frees": frees,
        "mem": memc,
        "msgs": msgs,
        "exposed": [[_t(t) for span in row for t in span] for row in est.exposed],
        "critical": [
            base[where[o.action.key][0]] + where[o.action.key][1]
            for o in est.critical_path_ops
            if o.action.key in where
        ],
        "busy": [_t(x.busy) for x in est.per_rank],
        "idle": [_t(x.idle) for x in est.per_rank],
        "peak": [_a(x.peak_activations) for x in mem.per_rank],
        "figures": figures(est, mem),
    }


def _find(where: dict, p: deps.Producer) -> tuple[int, int] | None:
    """(rank, index on it) of the compute op ``p`` names, whichever of its kinds exists."""
    for k in p.kinds:
        hit = where.get((p.stage, k, p.mb))
        if hit is not None:
            return hit
    return None


def figures(est: Estimate, mem: MemoryReport) -> dict:
    """Header numbers: step time, both bubble fractions, peak memory (worst rank)."""
    worst = mem.worst if mem.per_rank else None
    unit = "" if est.time_unit == "s" else " units"
    out = {
        "step": fmt_time(est.step_time, est.time_unit) + unit,
        "bubble_total": round(est.bubble_fraction_of_total, 6),
        "bubble_ideal": round(est.bubble_fraction_of_ideal, 6),
        "critical_path": fmt_time(est.critical_path, est.time_unit) + unit,
        "messages": est.message_count,
        "peak_act": _a(worst.peak_activations) if worst else 0,
        "peak_rank": worst.rank if worst else 0,
        "peak_bytes": fmt_bytes(float(worst.peak_bytes))
        if worst is not None and worst.peak_bytes is not None
        else None,
        "assumptions": est.config.describe(ranks=est.ranks),
    }
    return out


def page_data(runs: list[dict]) -> dict:
    """The object embedded in the page: the runs (one, or two for a comparison) and the palette
    shared with the cost backend's Gantt chart."""
    return {"format": FORMAT, "kinds": KINDS, "colors": dict(KIND_COLORS), "runs": runs}
