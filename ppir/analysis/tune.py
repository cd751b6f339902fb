"""Search what users choose for a pipeline (``ppir tune``): pipeline and data-parallel sizes for a
world size, schedule, v, micro-batch size, recomputation and uneven first/last stages, under
the whole memory of a GPU, ranked by the step time of the programs ``ppir compile`` produces.

Contract
--------
:func:`search` returns one :class:`Candidate` per choice, in three groups:

1. the *ranked* ones: compiled (:func:`ppir.compile`, verified), fit, and sorted by their step
   time, equal ones by :data:`TIE_ORDER`: the ``top`` fastest (all of them when fewer fit);
   then the *slower* ones: compiled and fit too, while their bound could still beat the
   ``top``-th, but slower than it, or tied with it and after it in the ranked order
   (:data:`TIE_ORDER`; the reason says which) (``why == "slower"``, in ranked order);
2. the *pruned* ones, left uncompiled: a lower bound on their step time (:func:`program_bound`,
   or the dependency bound: the compute graph timed with the same costs, which no lowering
   beats; :mod:`ppir.pipeline`) is worse than the ``top``-th ranked step time, so they
   cannot enter the top (``why == "pruned"``, sorted by that bound; their memory is checked
   only when they got as far as the dependency bound);
3. the *rejected* ones, each with its reason: ``divisibility`` (the global batch does not split
   into dp x micro-batch x M, no M of the schedule's makes its step run M microbatches, or
   the layers do not split into the stages with uneven splits off),
   ``constraint`` (the schedule refuses the parameters, or its program does not verify) or
   ``memory`` (the worst rank's peak exceeds the budget; the reason names the largest term;
   found before compiling, the peak counts no receive buffers: a lower bound, "at least").

With a model, each choice has ``pp`` x ``dp`` x ``tp`` = ``world`` GPUs and micro-batch size
``mbs``; M = global batch / (dp x mbs), the microbatches each candidate's step runs (the
schedule is given the M that makes it so: :mod:`ppir.analysis.tune_load`). Memory is the whole
per-rank footprint in bytes (:mod:`ppir.analysis.footprint`) at that tp, dp, mbs and
recomputation, and the model's ZeRO stage (with ``zero_auto``, 1 where 0 does not fit the
budget: :func:`ppir.analysis.tune_fit.fit`); times are seconds and include each stage's
data-parallel gradient reduction (``compile(dp=...)``). Layers that do not split evenly are
split unevenly when ``uneven`` is on (:func:`uneven_layers`; a stage without a layer is
rejected); with ``uneven`` on and costs from the model (not measured ones, which time the
profiled stages whatever their layers), each choice is also tried with
:func:`rank_balanced_layers` (the output layer's work counted on the last stage, the stages of a
rank summed) when that split leaves the busiest rank less forward work, as a choice of its own
(``stage_layers``). A schedule's v is its stages / ranks (V-shaped: v = 2).
Without a model there is no data parallelism (world = P, dp = 1), recomputation is not
searched, and the unit is one *sample*: times are in forwards of one sample on a rank share (a
microbatch of ``mbs`` samples costs ``mbs`` x the unit costs) and memory is peak activations in
A of one sample's activations of a rank share (a microbatch holds ``mbs`` A; so is a budget),
so that choices of different micro-batch sizes compare.
"""

from __future__ import annotations

from dataclasses import replace

from ppir.analysis.bounds import ProgramSummary, program_bound
from ppir.analysis.config import CostConfig
from ppir.analysis.costs import costs_for
from ppir.analysis.dp import reduce_members, reduction_bound, with_dp
from ppir.analysis.estimate import from_timeline
from ppir.analysis.footprint import schedule_copies
from ppir.analysis.layout import faster_split, uneven_layers
from ppir.analysis.measured_footprint import sizes_known
from ppir.analysis.memory import analyze_memory, split_fractions
from ppir.analysis.timeline import dependency_bound, run
from ppir.analysis.tune_fit import fit
from ppir.analysis.tune_load import (
    Refused,
    declared_stages,
    layers_refusal,
    load_for_batch,
    over_budget,
    refuse,
)
from ppir.analysis.tune_space import Builtin, Candidate, Space, default_global_batch
from ppir.diagnostics import PpirError, error
from ppir.frontend.loader import declared_params
from ppir.ir import deps
from ppir.ir.graph import build_graph
from ppir.pipeline import compile
from ppir.verify.words import ordinal


def search(
    schedules: list[str | Builtin],
    space: Space,
    config: CostConfig,
    budget: tuple[float, str] | None = None,
    progress: str = "fifo",
    on_step=None,
) -> list[Candidate]:
    """Every choice of ``space`` for ``schedules``, ranked, pruned or rejected (see the module
    docstring).  ``on_step(done, total, status)`` reports progress in two passes, each
    starting at ``done == 0``: one step per schedule instance (schedule, P, dp, micro-batch
    size, v) while they are expanded, then one per candidate while they are searched.

    Best first (an A* over two bounds): every instance is expanded and each candidate bounded
    by its program (:func:`program_bound`, no graph); then the candidate with the least bound
    is taken: with a program bound, its memory is checked and its compute graph timed (the
    dependency bound, tighter), and it goes back; with a dependency bound, it is compiled.
    The search stops once ``top`` are ranked and no bound left beats the ``top``-th ranked step
    time: the rest are pruned, most of them without a graph."""
    model = config.model
    if budget is not None and budget[1] == "bytes" and not sizes_known(config):
        raise error("bad-usage", "a memory budget in bytes needs --model or measured sizes")
    if space.global_batch < 0:
        raise error("bad-usage", "--global-batch must be positive")
    G = space.global_batch or default_global_batch(space)
    sizes = space.searched_sizes(model)
    named = [(n, declared_params(n, builtin=isinstance(n, Builtin))) for n in schedules]
    jobs = [
        (name, params, P, dp, mbs, v)
        for name, params in named
        for P, dp in sizes
        for mbs in space.micro_batches
        for v in (space.vs_for(P, model and model.layers) if "v" in params else [None])
    ]
    jobs.sort(key=lambda j: (j[2] * G // max(1, j[3] * j[4]) * (j[5] or 1), j[0]))
    state = _State(space.top, budget, progress, on_step, space.zero_auto)
    out: list[Candidate] = []
    for i, job in enumerate(jobs):
        if on_step:
            on_step(i, len(jobs), f"expanding {job[0]} P={job[2]} mbs={job[4]}")
        out += _instance(*job, G, space, config, state)
    state.search(space.top)
    ranked = sorted(state.ranked, key=_rank_key)
    ranked, rest = ranked[: space.top], ranked[space.top :]
    slower = [_slower(c, space.top, ranked[-1]) for c in rest]
    failed = [c for c in state.done if not c.ok and c.why != "slower"]
    pruned = sorted((c for c in out if c.why == "pruned"), key=_bound_key)
    listed = ("pruned", "slower")
    rejected = [c for c in out if not c.ok and c.why not in listed and c not in failed]
    return ranked + slower + pruned + failed + rejected


TIE_ORDER = (
    "equal step times rank less peak memory first, then by schedule, pp, v, mbs, recompute, layers"
)


def _rank_key(c: Candidate):
    """The ranked order: step time; equal ones (:func:`same_step_time`; at P=1 every schedule is
    one stage) by :data:`TIE_ORDER`."""
    layers = c.stage_layers or ()
    return (_digits(c.step_time), c.peak or 0, c.schedule, c.pp, c.v, c.mbs, c.recompute, layers)


def _digits(t: float) -> float:
    """``t`` to the 9 significant digits that tell step times apart (equal ones tie)."""
    return float(f"{t:.9g}")


def same_step_time(a: Candidate, b: Candidate) -> bool:
    """Whether two compiled candidates tie: equal step times to 9 significant digits."""
    return _rank_key(a)[0] == _rank_key(b)[0]


def _bound_key(c: Candidate):
    return (c.bound, c.schedule, c.pp, c.v, c.mbs, c.recompute)


class _State:
    """The compiled candidates and the ones waiting, least bound first."""

    def __init__(self, top: int, budget, progress: str, on_step=None, zero_auto=False):
        self.top, self.budget, self.progress, self.on_step = top, budget, progress, on_step
        self.zero_auto = zero_auto
        self.waiting: list = []  # heap of (bound, n, candidate)
        self.done: list[Candidate] = []
        self.ranked: list[Candidate] = []
        self.n = 0
        # the compute graph and memory analyses of the last program bounded, which its other
        # candidates (one per recomputation) share: (program, graph, {i fraction: memory})
        self.last: tuple | None = None

    def cutoff(self) -> float:
        """The ``top``-th best compiled step time (inf while fewer are compiled)."""
        if len(self.ranked) < self.top:
            return float("inf")
        return sorted(c.step_time for c in self.ranked)[self.top - 1]

    def push(self, c: Candidate) -> None:
        import heapq

        self.n += 1
        heapq.heappush(self.waiting, (c.bound, self.n, c))

    def search(self, top: int) -> None:
        """Take the least bound while fewer than ``top`` are ranked or it is no worse than the
        cutoff (an equal bound may tie with it, and rank first by :data:`TIE_ORDER`): a
        program bound becomes a dependency bound (or a rejection), a dependency bound a
        compiled candidate; what is left is pruned."""
        import heapq

        total, finished = len(self.waiting), 0
        if self.on_step:
            self.on_step(0, total, "searching")
        while self.waiting and (
            len(self.ranked) < self.top or _digits(self.waiting[0][0]) <= _digits(self.cutoff())
        ):  # a bound equal to the cutoff may tie with it, and rank first by TIE_ORDER
            c = heapq.heappop(self.waiting)[2]
            if c.input_timeline is None:  # a program bound: bound it by its compute graph
                if self._dependency_bound(c):
                    self.push(c)
                    continue
            else:
                c = _compile(c, self.budget, self.progress, self.zero_auto)
                self.done.append(c)
                if c.ok:
                    self.ranked.append(c)
            finished += 1
            if self.on_step:
                what = "compiled" if c.step_time is not None else "rejected"
                ranked = f"{min(len(self.ranked), self.top)}/{self.top} ranked"
                self.on_step(finished, total, f"{ranked}; {what} {c.schedule} v={c.v} mbs={c.mbs}")
        for _, _, c in self.waiting:
            _prune(c, top)
        self.waiting, self.last = [], None
        if self.on_step:
            self.on_step(total, total, "done")

    def _dependency_bound(self, c: Candidate) -> bool:
        """Check ``c``'s memory and time its compute graph: True when it goes on with the
        dependency bound as its bound, False when it is rejected (memory, a cyclic order)."""
        m, r, s = c.config.model, c.recompute, c.program
        if self.last is None or self.last[0] is not s:
            self.last = (s, build_graph(s, self.progress), {})
        _, g, mems = self.last
        fi = split_fractions(m, r)
        if fi not in mems:
            mems[fi] = analyze_memory(g, None, recompute=r, i_fraction=fi)
        if not fit(c, s, mems[fi], self.budget, self.zero_auto):
            over_budget(c, self.budget, compiled=False)
            return False
        tl = run(g, c.costs)
        if not tl.complete:
            c.reason, c.why = "the compute order has a cycle (ppir check shows it)", "constraint"
            return False
        c.bound = c.costs.to_time(max(dependency_bound(tl), reduction_bound(tl))) * c.scale
        c.input_timeline = tl
        return True


def _slower(c: Candidate, top: int, nth: Candidate) -> Candidate:
    """A compiled candidate beyond the ``top``: slower than ``nth`` (the ``top``-th ranked), or
    tied with it and ranked after it by :data:`TIE_ORDER`."""
    if not same_step_time(c, nth):
        c.reason = f"compiled, but slower than the {ordinal(top)} ranked step time"
    elif (c.peak or 0) > (nth.peak or 0):
        c.reason = (
            f"compiled, ties with the {ordinal(top)} ranked step time but needs more memory "
            "(equal step times rank less peak memory first)"
        )
    else:
        c.reason = (
            f"compiled, ties with the {ordinal(top)} ranked step time and peak memory (ranked "
            "after it by schedule, pp, v, mbs, recompute, layers)"
        )
    c.why = "slower"
    return c


def _prune(c: Candidate, top: int) -> Candidate:
    c.reason = f"not compiled: its bound is worse than the {ordinal(top)} ranked step time"
    c.why = "pruned"
    c.input_timeline = None
    return c


def _instance(name, params, P, dp, mbs, v, G, space, cfg, state):
    """The candidates of one schedule instance, one per recomputation, each bounded by its
    program and waiting in ``state`` (or rejected, with the reason)."""
    model = cfg.model
    recomputes = space.recomputes if model is not None else (cfg.recompute,)
    base = dict(schedule=str(name), pp=P, dp=dp, v=v or 1, mbs=mbs, microbatches=None)

    def rejected(reason: str, why: str = "divisibility", file=None) -> list[Candidate]:
        return [
            Candidate(**base, recompute=r, reason=reason, why=why, file=file) for r in recomputes
        ]

    if G % (dp * mbs):
        return rejected(f"global batch {G} does not split into dp={dp} x micro-batch {mbs}")
    M = G // (dp * mbs)  # the microbatches its step runs (the schedule's M may differ)
    base["microbatches"] = M
    builtin = isinstance(name, Builtin)
    values = {**dict(space.defines), "P": P, "M": M, "v": v}  # each taken where declared
    if model is not None:  # before the expansion: seconds at P=64, for a choice refused
        span = declared_stages(name, params, values, builtin)
        if span is not None and (why := layers_refusal(model.layers, span, space.uneven)):
            return rejected(why)
    try:
        s, base["given_m"] = load_for_batch(name, params, values, builtin)
    except Refused as e:
        return rejected(e.reason, e.why, e.file)
    base["v"] = max(1, s.stages // s.ranks)
    if model is not None:
        span = deps.pipeline_length(s.stages, schedule_copies(s))
        if why := layers_refusal(model.layers, span, space.uneven):
            return rejected(why)
        # measured costs time the profiled stages whatever their layers: no split is faster
        balance = space.uneven and cfg.measured is None
        splits = _splits(model, s, balance, cfg.stage_weights)
    else:
        splits = [None]
    scale = 1 if cfg.time_unit == "s" else mbs
    out, summary = [], ProgramSummary(s)
    for layers, r in ((x, r) for x in splits for r in recomputes):
        c = Candidate(**base, recompute=r, stage_layers=layers)
        m = replace(model, tp=space.tp, dp=dp, mbs=mbs) if model is not None else None
        c.config = replace(cfg, model=m, recompute=r, stage_layers=layers)
        c.program = s
        out.append(c)
        try:
            c.costs = costs_for(s, c.config)
            if reduce_members(s, dp) > 1:  # its gradient reductions, as compile times them
                c.costs = with_dp(c.costs, s, c.config, dp)
        except PpirError as e:
            refuse(c, e.diagnostics[0])
            continue
        c.bound = c.costs.to_time(program_bound(s, c.costs, summary)) * scale
        c.scale = scale
        state.push(c)
    return out


def _splits(model, s, balance: bool, weights=None) -> list:
    """The layer splits of ``s`` to try (None: the even one): the even split, or
    :func:`uneven_layers` when the layers do not divide; with ``balance``, also
    :func:`faster_split`'s balanced one when it leaves the busiest rank less forward work (per
    rank, the head counted, times ``weights`` if one per stage; else costs_for rejects it)."""
    L, span = model.layers, deps.pipeline_length(s.stages, schedule_copies(s))
    first = uneven_layers(L, span) if L % span else None
    weights = weights if weights is not None and len(weights) == s.stages else None
    faster = faster_split(model, s, first, weights) if balance else None
    copies = s.stages // span
    return [first and first * copies] + ([faster[0] * copies] if faster else [])


def _compile(c: Candidate, budget, progress, zero_auto: bool = False) -> Candidate:
    """The program ``ppir compile`` produces for this choice, its step time and whole memory."""
    tl, c.input_timeline = c.input_timeline, None
    try:
        cfg = dict(costs=c.config, progress=progress, input_timeline=tl, dp=c.dp)
        comp = compile(c.program, verify="final", **cfg)
    except PpirError as e:
        return refuse(c, e.diagnostics[0])
    if not comp.ok:
        return refuse(c, comp.report.errors[0] if comp.report else None)
    fi = split_fractions(c.config.model, c.recompute)
    mem = analyze_memory(comp.graph, None, recompute=c.recompute, i_fraction=fi)
    c.estimate = from_timeline(comp.timeline, c.config, mem, comp.dependency_bound)
    c.step_time, c.program = comp.step_time * c.scale, comp.program
    if not fit(c, comp.program, mem, budget, zero_auto):
        return over_budget(c, budget)
    return c


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
    """One pipeline size, every candidate compiled: :func:`search` at world = ``ranks`` x tp,
    dp = 1, the config's recomputation, no pruning."""
    if ranks < 1 or global_batch < 1:
        raise error("bad-usage", "--ranks and --global-batch must be positive")
    tp = config.model.tp if config.model is not None else 1
    space = Space(
        world=ranks * tp,
        tp=tp,
        pps=(ranks,),
        global_batch=global_batch,
        micro_batches=tuple(micro_batches),
        vs=tuple(vs),
        recomputes=(config.recompute,),
        uneven=False,
        top=10**9,
    )
    return search(schedules, space, config, budget, progress)
