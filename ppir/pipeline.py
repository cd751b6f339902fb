"""The one compile pipeline: every command, the Python API, the benches, tune, viz and
``ppir.testing`` compile through :func:`compile`, so each reports the numbers of the program
that ``ppir launch`` runs.

Stages, for a compute-only schedule (a literal program with communication is taken as
written and only verified and timed):

1. the input's graph is verified (completeness, local order, compute-order cycles) and timed
   under the costs with transfer times on its cross-rank data edges: the *dependency bound*,
   which no lowering of this compute order can beat;
2. the pass pipeline runs (``passes``, or the one ``lowering`` and ``overlap`` name:
   ``lower-comms{strategy=...}`` then ``overlap-comms``), the program verified after each pass
   (the pass driver, :mod:`ppir.passes.driver`); the first pass whose output fails verification
   stops the pipeline and its report is returned;
3. the final program's graph is timed (the estimator's timeline) and the verification of that
   graph reuses the run.

``lowering="auto"`` compiles with the lockstep lowering and, when that program is slower than
the dependency bound (so another lowering could win), also with the eager one planned with the
same costs; the faster under the estimator is kept (lockstep on a tie).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

from ppir.analysis.config import CostConfig
from ppir.analysis.costs import Costs, costs_for
from ppir.analysis.dp import holds_reductions, resolve_dp, with_dp
from ppir.analysis.timeline import Timeline, dependency_bound, run
from ppir.compile_options import check_options, default_passes, warn_ignored
from ppir.diagnostics import EXIT_INVALID, PpirError, Report
from ppir.ir import Schedule, is_compute_item
from ppir.ir.graph import ProgramGraph, build_graph
from ppir.ir.shape import check_schedule
from ppir.nogc import without_gc
from ppir.passes import PASSES, ForwardOnly, LowerComms, PlaceReduce
from ppir.passes.driver import parse_pipeline, pipeline_text
from ppir.passes.lower_comms import STRATEGIES
from ppir.stage_timing import on_stage, timed

__all__ = ["LOWERINGS", "Compiled", "compile", "on_stage"]

LOWERINGS = ("auto", *STRATEGIES)


@dataclass(eq=False)
class Compiled:
    """A compiled program: ``program`` is what runs (lowered, and overlapped unless asked
    otherwise), ``graph`` its dependency graph, ``report`` its verification (None when
    compiled with ``verify=False``), ``timeline`` its timed run under ``costs`` (made from
    ``config``).  ``pipeline`` names the passes that produced it; ``failed`` the pass whose
    output failed verification ("input" for the input itself), else None."""

    source: Schedule
    program: Schedule
    graph: ProgramGraph
    report: Report | None
    timeline: Timeline
    config: CostConfig
    costs: Costs
    pipeline: str = ""
    failed: str | None = None
    blocking: Schedule | None = None
    dependency_bound: float | None = None
    input_timeline: Timeline | None = None
    """The timed compute-only graph of the input (the dependency bound's run)."""
    progress: str = "fifo"
    candidates: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    """Seconds spent per stage ("input", each pass, "graph", "verify", "timeline"), summed
    over the candidates compiled; for benchmarks and ``--verbose`` output."""
    dp: int = 1
    """Data-parallel replicas the program was timed for: with ``dp > 1``, or a schedule that
    holds each stage more than once (bidirectional DualPipe), it holds a ``REDUCE_GRAD`` per
    stage (the ``place-reduce`` pass) and the timeline times them
    (:func:`ppir.analysis.dp.reduce_members`)."""

    def __repr__(self) -> str:
        """One line, not the dataclass' fields (the programs, graphs and timelines: 78 KB of
        text at interleaved 1F1B P=4 M=8, megabytes at a real size, in a REPL or a report)."""
        s = self.program
        params = ", ".join(f"{k}={v}" for k, v in s.params)
        state = "ok" if self.ok else f"failed at {self.failed}" if self.failed else "not ok"
        return (
            f"<Compiled {s.name}({params}): {state}, {s.ranks} ranks, pipeline "
            f"{self.pipeline!r}, {self.progress} progress>"
        )

    @cached_property
    def dp_reduce(self):
        """How long the gradient reductions take and how much the drain hides
        (:func:`ppir.analysis.dp.dp_report`); None when there are none."""
        from ppir.analysis.dp import dp_report, holds_reductions, rank_links

        if not holds_reductions(self.program, self.dp):
            return None
        links = rank_links(self.program, self.config, self.dp)
        return dp_report(self.timeline, self.dp, links, self.program.pipelines)

    @property
    def ok(self) -> bool:
        """True when the pipeline finished and the program verified; compiled with
        ``verify=False``, when its timed run reached the end (no deadlock, no op without a
        partner) and no message carries what its recv does not expect (:attr:`mismatched`)."""
        if self.failed is not None:
            return False
        if self.report is not None:
            return self.report.ok
        return self.timeline.complete and not self.mismatched

    @cached_property
    def mismatched(self) -> list:
        """Compiled with ``verify=False``: the matching check's payload errors (such a program,
        lowered from a cyclic compute order say, runs to its end on the wrong tensors); []
        when verified, where the report has them."""
        from ppir.verify.matching import check_matching

        if self.report is not None or not self.graph.lowered:
            return []
        return [d for d in check_matching(self.graph) if d.kind == "payload-mismatch"]

    def check(self) -> None:
        """A ppir error (exit 1) unless :attr:`ok`: the report's errors, or the ranks stuck,
        or (unverified) the messages that deliver what their receivers do not expect."""
        if self.ok:
            return
        if self.report is not None and self.report.errors:
            raise PpirError(self.report.errors, EXIT_INVALID)
        self._check_runs(self.timeline)

    @property
    def timed(self) -> Timeline:
        """The timeline the estimate reads: the program's own (rendezvous messages), or with
        ``comm.model = "latency"`` the compute order's, each message a delay on its data edge
        (the papers' model)."""
        if self.config.comm_model != "latency":
            return self.timeline
        if self.input_timeline is None:
            self.input_timeline = run(build_graph(self.program.compute_only()), self.costs)
        return self.input_timeline

    def _check_runs(self, tl: Timeline | None = None) -> Timeline:
        """``tl`` (default: the timeline the estimate reads), or a ppir error (exit 1) when the
        program cannot run to its end: the verification's own errors when it found them (the
        wait-for cycle with both ranks and the schedule's lines, as ``ppir check`` gives them),
        else the stuck ranks (compiled with ``verify=False``); unverified, also when its
        messages deliver what their receivers do not expect (:attr:`mismatched`)."""
        from ppir.analysis.timeline import check_complete

        tl = self.timed if tl is None else tl
        if not tl.complete and self.report is not None and self.report.errors:
            raise PpirError(self.report.errors, EXIT_INVALID)
        check_complete(tl)
        if self.mismatched:  # unverified: it runs, but on what its receivers did not expect
            raise PpirError(self.mismatched, EXIT_INVALID)
        return tl

    @property
    def step_time(self) -> float:
        """The estimated step time, in the config's time unit; a ppir error, as
        :attr:`estimate` gives, when the program cannot run to its end (a deadlock)."""
        return self.costs.to_time(self._check_runs().makespan)

    @cached_property
    def memory(self):
        """The activation-memory report of the program at the config's model
        (:func:`ppir.analysis.estimate.memory_report`)."""
        from ppir.analysis.estimate import memory_report

        return memory_report(self.graph, self.config)

    @cached_property
    @without_gc
    def estimate(self):
        """The :class:`~ppir.analysis.estimate.Estimate` of the program (a ppir error, exit 1,
        when it cannot run)."""
        from ppir.analysis.estimate import from_timeline

        tl = self._check_runs()
        return from_timeline(tl, self.config, self.memory, self.dependency_bound)


@without_gc
def compile(  # noqa: A001 - the library's verb
    schedule: Schedule,
    *,
    lowering: str = "auto",
    overlap: bool = True,
    costs: CostConfig | None = None,
    verify: bool | str = True,
    progress: str = "fifo",
    strict: bool = False,
    passes: str | None = None,
    dp: int | None = None,
    input_timeline: Timeline | None = None,
) -> Compiled:
    """Compile ``schedule`` (see the module docstring).  ``lowering`` is one of
    :data:`LOWERINGS`; ``overlap`` adds ``overlap-comms`` (not after ``naive``); ``passes`` is
    an explicit pipeline text (``"lower-comms{strategy=eager},overlap-comms"``) that replaces
    both (given with a ``lowering`` other than ``auto`` or ``overlap=False``, a ValueError; one
    that starts with ``forward-only`` compiles that pass's evaluation program as the input, a
    lowered ``schedule`` included); a lowered ``schedule`` otherwise runs as written (an
    :class:`~ppir.compile_options.IgnoredOptionWarning` for the options it ignores); ``costs``
    is the cost model that plans and times (default ``CostConfig()``: F=1, B=2, I=1, W=1 per
    rank share, free links); ``progress`` the verifier's model.
    ``verify``: True verifies the input and the output of every pass; ``"final"`` the input
    and the program that runs only (what a search over many candidates needs: the same
    program, the same verdict, without the report of each intermediate); False nothing.
    ``dp > 1`` (default: the model's ``dp``, which must agree) times the program for that many
    data-parallel replicas: ``place-reduce`` runs last (a ``REDUCE_GRAD`` after each stage's
    last backward, unless the program places its own) and each reduction costs a ring
    all-reduce (:mod:`ppir.analysis.dp`, ``Compiled.dp_reduce``).  ``input_timeline``: a run
    of ``schedule``'s compute graph (built under ``progress``) timed with these very costs,
    when the caller made one (``ppir tune``'s dependency bound): used instead of building and
    timing that graph again."""
    check_schedule(schedule)  # a hand-built one's shape: a ppir error naming the field
    if costs is not None and not isinstance(costs, CostConfig):
        raise TypeError(
            f"costs takes a CostConfig (ppir.make_config({{...}}) makes one from the TOML "
            f"file's sections), got {type(costs).__name__}"
        )
    if lowering not in LOWERINGS:
        raise ValueError(f"unknown lowering {lowering!r} (expected one of {LOWERINGS})")
    check_options(
        verify, 1 if dp is None else dp, overlap, strict, input_timeline, passes, lowering
    )
    cfg, dp = resolve_dp(costs or CostConfig(), dp)  # one size: this dp and the model's
    chosen = parse_pipeline(passes, PASSES) if passes is not None else None
    if chosen and isinstance(chosen[0], ForwardOnly):  # a new compute order, compiled as the
        schedule = chosen[0].apply(schedule)  # input (verified, its own dependency bound)
    c = costs_for(schedule, cfg)
    # the program holds gradient reductions (an evaluation program has no gradients)
    reduces = holds_reductions(schedule, dp)
    if reduces:
        c = with_dp(c, schedule, cfg, dp)
    timings: dict = {}
    base = dict(source=schedule, config=cfg, costs=c, progress=progress, timings=timings, dp=dp)
    if schedule.is_lowered:  # a literal program with communication runs as written
        warn_ignored(schedule, lowering, overlap, passes)
        if reduces:
            schedule = PlaceReduce().apply(schedule)
        with timed(timings, "graph"):
            g = build_graph(schedule, progress)
        out = _finish(schedule, g, verify, strict, **base)
        if out.report is not None and not out.report.ok:
            out.failed = "input"  # the program as written: the input itself failed
        return out
    with timed(timings, "input"):
        if _reusable(input_timeline, schedule, progress, c):
            cg, ctl = input_timeline.graph, input_timeline
        else:
            cg = build_graph(schedule, progress)
            ctl = run(cg, c)
    bound = c.to_time(dependency_bound(ctl)) if ctl.complete else None
    base["dependency_bound"] = bound
    if cfg.comm_model == "latency":  # the estimate reads the compute order's timeline
        base["input_timeline"] = ctl
    if verify:
        from ppir.verify import verify as check

        with timed(timings, "input"):
            report = check(cg, progress, strict, timeline=ctl)
        if not report.ok:
            return Compiled(
                program=schedule, graph=cg, report=report, timeline=ctl, failed="input", **base
            )
    # The first run takes the input graph (and its timed run, which lower-comms reuses when its
    # planning costs are these) over and drops them once lower-comms has read them, so that
    # they are not held while the program's graphs are built (an eager run builds its own).
    base["input_graph"], base["input_run"] = cg, ctl
    cg = ctl = None
    if chosen is not None:
        if reduces and not any(isinstance(p, PlaceReduce) for p in chosen):
            chosen.append(PlaceReduce())
        return _run(schedule, chosen, verify, strict, base)
    strategy = "lockstep" if lowering == "auto" else lowering
    best = _run(schedule, default_passes(strategy, overlap, reduces), verify, strict, base)
    if lowering != "auto" or not best.ok or bound is None or _time(best) <= bound:
        return best
    eager = _run(schedule, default_passes("eager", overlap, reduces), verify, strict, base)
    candidates = {"lockstep": _time(best), "eager": _time(eager)}
    if eager.ok and _time(eager) < _time(best):
        best = eager
    best.candidates = candidates
    return best


def _time(c: Compiled) -> float:
    """``c``'s step time; infinite when it cannot run to its end or (unverified) mismatches."""
    return c.step_time if c.timed.complete and not c.mismatched else float("inf")


def _run(schedule: Schedule, passes: list, verify: bool, strict: bool, base: dict) -> Compiled:
    """Apply ``passes`` in order, verifying after each; the final program timed."""
    cg = base.pop("input_graph", None)  # this run owns the input graph now (see compile)
    ctl = base.pop("input_run", None)  # and its timed run
    base = dict(base)
    program = schedule
    blocking = None
    c, progress, timings = base["costs"], base["progress"], base["timings"]
    g = None
    previous = None  # the last verified program and its report (see verify's ``previous``)
    for i, p in enumerate(passes):
        with timed(timings, p.name):
            if isinstance(p, LowerComms):
                if p.costs is None:
                    p = replace(p, costs=c)
                program = blocking = p.apply(program, graph=cg, timeline=ctl)
                cg = ctl = None
            elif not (i == 0 and isinstance(p, ForwardOnly)):  # compile applied it up front
                program = p.apply(program)
        if program is schedule:
            continue  # unchanged: the input, verified already
        last = i == len(passes) - 1
        if not last and verify is not True:
            continue  # the intermediate program is neither verified nor timed: no graph
        g = None  # the previous pass's graph goes before the next is built
        with timed(timings, "graph"):
            g = build_graph(program, progress)
        if not last:
            from ppir.verify import verify as check

            with timed(timings, "verify"):
                known = _same_compute(program, schedule)
                report = check(g, progress, strict, compute_known=known, previous=previous)
            previous = (program, report)
            if not report.ok:
                return Compiled(
                    program=program,
                    graph=g,
                    report=report,
                    timeline=run(g, c),
                    pipeline=pipeline_text(passes[: i + 1]),
                    failed=p.name,
                    blocking=blocking,
                    **base,
                )
    if g is None:
        with timed(timings, "graph"):
            g = build_graph(program, progress)
    out = _finish(
        program,
        g,
        verify,
        strict,
        previous=previous,
        pipeline=pipeline_text(passes),
        blocking=blocking,
        **base,
    )
    if out.report is not None and not out.report.ok and passes:
        out.failed = passes[-1].name  # its output failed verification
    return out


def _finish(
    program: Schedule, g: ProgramGraph, verify: bool, strict: bool, previous=None, **kw
) -> Compiled:
    timings = kw["timings"]
    with timed(timings, "timeline"):
        tl = run(g, kw["costs"])
    report = None
    if verify:
        from ppir.verify import verify as check

        with timed(timings, "verify"):
            known = program is not kw["source"] and _same_compute(program, kw["source"])
            report = check(
                g, kw["progress"], strict, timeline=tl, compute_known=known, previous=previous
            )
    return Compiled(program=program, graph=g, report=report, timeline=tl, **kw)


def _reusable(tl: Timeline | None, schedule: Schedule, progress: str, costs: Costs) -> bool:
    """True when ``tl`` is a complete-or-not run of ``schedule``'s own graph under ``progress``
    timed with ``costs`` (what compile would build and run itself)."""
    if tl is None:
        return False
    g = tl.graph
    return g.schedule is schedule and g.progress == progress and tl.costs == costs


def _same_compute(program: Schedule, source: Schedule) -> bool:
    """True when ``program`` runs the very compute items of ``source`` (which verified), in the
    same order on every rank: the passes keep them, so their checks need not run again."""
    if program.ranks != source.ranks or program.placement != source.placement:
        return False
    if (program.stages, program.microbatches) != (source.stages, source.microbatches):
        return False
    for mine, theirs in zip(program.programs, source.programs):
        compute = [it for it in mine if is_compute_item(it)]
        if len(compute) != len(theirs) or any(a is not b for a, b in zip(compute, theirs)):
            return False
    return True
