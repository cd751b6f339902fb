"""Search schedules × v × micro-batch size under a per-rank memory budget (``ppir tune``).

Contract
--------
:func:`tune` returns one :class:`Candidate` per choice it considered, feasible ones ranked by
step time first, then the rejected ones, each with its reason:

* ``divisibility``: the global batch is not a multiple of the micro-batch size, or the model's
  layers do not split into P·v stages;
* ``constraint``: the schedule refused the parameters (a ``require`` failed, e.g. interleaved
  1F1B needs M % P == 0) or cannot run them (order cycle / deadlock);
* ``memory``: the worst rank's peak exceeds the budget.

Schedules without a ``v`` parameter are tried with v = 1 only.  With a model, the micro-batch
size is the model's ``mbs`` and times are seconds; without one, times are in forwards of one
rank share *per sample* (unit costs × micro-batch size, assuming compute linear in batch) so
that different micro-batch sizes compare.  With a model, memory is the whole per-rank footprint
in bytes (:mod:`ppir.analysis.footprint`: weights, gradients, optimizer state, activations and
receive buffers) and ``peak`` is bytes, unless the budget is given in A; without a model it is
peak activations in A (:mod:`ppir.analysis.memory`).  A budget in bytes needs a model.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ppir.analysis.config import CostConfig
from ppir.analysis.estimate import Estimate
from ppir.analysis.footprint import footprint
from ppir.diagnostics import PpirError, error
from ppir.frontend.loader import load_schedule, read_source
from ppir.frontend.parser import parse_text
from ppir.pipeline import compile


@dataclass(frozen=True)
class Candidate:
    schedule: str
    v: int
    mbs: int
    microbatches: int | None
    estimate: Estimate | None = None
    step_time: float | None = None
    peak: float | None = None  # worst rank: whole-memory bytes with a model, else A
    reason: str | None = None  # None: feasible
    why: str = ""  # divisibility, constraint or memory

    @property
    def ok(self) -> bool:
        return self.reason is None


def schedule_params(name: str) -> list[str]:
    """The parameter names a schedule (built-in name or .pps path) declares."""
    path, text = read_source(name)
    mod = parse_text(text, path)
    return [p.name for p in (mod.header.params if mod.header else ())]


def parse_budget(text: str | None, has_model: bool) -> tuple[float, str] | None:
    """``40GiB``, ``80GB``, ``512MiB`` (bytes, needs a model) or ``6A``: (value, "bytes"|"A")."""
    if text is None:
        return None
    t = text.strip()
    units = (
        ("GiB", 2**30),
        ("MiB", 2**20),
        ("TiB", 2**40),
        ("GB", 1e9),
        ("MB", 1e6),
        ("TB", 1e12),
        ("A", None),
    )
    for suffix, scale in units:
        if t.endswith(suffix):
            num = t[: -len(suffix)].strip()
            try:
                x = float(num)
            except ValueError:
                break
            if x <= 0:
                raise error("bad-usage", f"--memory-budget {text}: must be positive")
            if scale is None:
                return x, "A"
            if not has_model:
                raise error(
                    "bad-usage",
                    f"--memory-budget {text}: a budget in bytes needs --model (activation sizes)",
                    hints=["without a model give the budget in A, e.g. 6A"],
                )
            return x * scale, "bytes"
    raise error("bad-usage", f"--memory-budget {text}: expected e.g. 40GiB, 80GB or 6A")


def tune(
    schedules: list[str],
    ranks: int,
    global_batch: int,
    micro_batches: list[int],
    vs: list[int],
    config: CostConfig,
    budget: tuple[float, str] | None = None,
    progress: str = "fifo",
) -> list[Candidate]:
    """Estimate every feasible choice; see the module docstring for ranking and reasons."""
    if ranks < 1 or global_batch < 1:
        raise error("bad-usage", "--ranks and --global-batch must be positive")
    out: list[Candidate] = []
    for name in schedules:
        params = schedule_params(name)
        for mbs in micro_batches:
            for v in vs if "v" in params else [1]:
                out.append(
                    _one(name, params, ranks, global_batch, mbs, v, config, budget, progress)
                )
    ok = sorted((c for c in out if c.ok), key=lambda c: (c.step_time, c.schedule, c.v, c.mbs))
    return ok + [c for c in out if not c.ok]


def _one(name, params, P, G, mbs, v, cfg: CostConfig, budget, progress) -> Candidate:
    if mbs < 1 or G % mbs:
        return Candidate(
            name,
            v,
            mbs,
            None,
            reason=f"global batch {G} is not a multiple of micro-batch size {mbs}",
            why="divisibility",
        )
    M = G // mbs
    if cfg.model is not None and cfg.model.layers % (P * v):
        return Candidate(
            name,
            v,
            mbs,
            M,
            why="divisibility",
            reason=f"{cfg.model.layers} layers do not split into P*v = {P * v} stages",
        )
    values = {"P": P, "M": M, "v": v}
    try:
        s = load_schedule(name, {k: values[k] for k in params if k in values})
        c = cfg if cfg.model is None else replace(cfg, model=replace(cfg.model, mbs=mbs))
        compiled = compile(s, costs=c, progress=progress, verify="final")  # what compile runs
        if not compiled.ok:
            first = compiled.report.errors[0] if compiled.report else None
            why = first.message if first else "the program does not verify"
            return Candidate(name, v, mbs, M, reason=why, why="constraint")
        est = compiled.estimate
        in_bytes = c.model is not None and (budget is None or budget[1] == "bytes")
        fp = None
        if in_bytes:
            fp = footprint(
                compiled.program, c.model, recompute=cfg.recompute, memory=compiled.memory
            )
    except PpirError as e:
        return Candidate(name, v, mbs, M, reason=e.diagnostics[0].message, why="constraint")
    scale = 1 if cfg.time_unit == "s" else mbs  # seconds are already per step
    if fp is not None:  # whole memory in bytes: weights, gradients, optimizer, activations, buffers
        peaks = [float(r.total) for r in fp.per_rank]
        what = "peak memory"
    else:
        peaks = [r.peak_activations or 0.0 for r in est.per_rank]
        what = "peak activations"
    worst = max(range(len(peaks)), key=peaks.__getitem__) if peaks else 0
    peak = peaks[worst] if peaks else 0.0
    cand = Candidate(name, v, mbs, M, est, est.step_time * scale, peak)
    if budget is not None and peak > budget[0]:
        unit = "A" if budget[1] == "A" else "bytes"
        dom = f" (largest term: {fp.per_rank[worst].dominant})" if fp is not None else ""
        return replace(
            cand,
            why="memory",
            reason=f"{what} {_fmt(peak, unit)} on rank {worst}{dom} exceeds the budget "
            f"{_fmt(budget[0], unit)}",
        )
    return cand


def _fmt(x: float, unit: str) -> str:
    if unit == "A":
        return f"{x:.4g} A"
    return f"{x / 2**30:.4g} GiB"
