"""The verifier: prove a program deadlock-free under NCCL point-to-point semantics.

``verify(program, progress="fifo", strict=False) -> Report`` reads the program's dependency
graph (:func:`ppir.ir.graph.build_graph`; pass a built graph to reuse it) and runs, in order:

1. completeness (:mod:`.structure`): ``out-of-range``, ``wrong-rank``, ``duplicate-op``,
   ``duplicate-message``, ``local-message``, ``incomplete``, ``forward-only``;
2. local order (:mod:`.local_order`): ``local-order``, ``missing-recv`` (lowered only),
   ``missing-send`` (lowered only; looked for when another check of 2-4 found something, as a
   missing SEND always makes one: an unmatched recv, or a missing one);
   gradient reductions (:mod:`.reduce`): ``reduce-wrong-rank``, ``duplicate-reduce``,
   ``missing-reduce``, ``early-reduce``;
3. matching (:mod:`.matching`, lowered only): ``unmatched-send``, ``unmatched-recv``,
   ``payload-mismatch``; deferred groups (:mod:`.waits`): each ``post[...]`` waited exactly
   once, later: ``unwaited-group``, ``bad-wait``;
4. deadlock freedom (:mod:`.deadlock`, :mod:`.witness`): ``deadlock`` when the wait-for graph
   of a lowered program has a cycle; ``order-cycle`` when the compute graph itself is cyclic.
   For a lowered program the compute graph is examined only when checks 2-4 found something
   (an acyclic order is implied otherwise), and a cycle then replaces the matching and
   deadlock findings, which are its consequences; compute-only programs are always examined;
5. lints (:mod:`.lints`, lowered only): ``asymmetric-group``, ``group-too-large``,
   ``mixed-batched`` -- warnings, errors under ``strict``.

The semantics and the proof that check 4 decides deadlock freedom are in docs/verification.md;
the executor runs exactly those semantics.  The report lists diagnostics in check order, at
most :data:`MAX_PER_KIND` per kind as they print (the repeats of one source line count once
and are kept whole) plus one line counting the rest.  Everything is linear in
the number of ops.
"""

from __future__ import annotations

from ppir.analysis.timeline import Timeline, run, stuck_cycle
from ppir.diagnostics import Diagnostic, Report, count, repeat_key
from ppir.ir import Action, Group, Schedule
from ppir.ir.graph import COMPUTE, ProgramGraph, build_graph, check_progress
from ppir.ir.types import COMPUTE_KINDS
from ppir.verify.deadlock import find_cycle
from ppir.verify.lints import check_lints
from ppir.verify.local_order import check_local_order, check_missing_sends
from ppir.verify.matching import check_matching
from ppir.verify.reduce import check_reduces
from ppir.verify.structure import check_structure
from ppir.verify.waits import check_waits
from ppir.verify.witness import deadlock_diagnostic, order_cycle_diagnostic

MAX_PER_KIND = 20
MAX_REPEATS = 100  # findings kept of one group of repeats (one source line, one message shape)

KINDS = (
    "out-of-range",
    "wrong-rank",
    "duplicate-op",
    "duplicate-message",
    "local-message",
    "incomplete",
    "forward-only",
    "local-order",
    "missing-recv",
    "missing-send",
    "reduce-wrong-rank",
    "duplicate-reduce",
    "missing-reduce",
    "early-reduce",
    "unmatched-send",
    "unmatched-recv",
    "payload-mismatch",
    "deadlock",
    "order-cycle",
    "asymmetric-group",
    "group-too-large",
    "mixed-batched",
    "unwaited-group",
    "bad-wait",
)


def verify(
    program: Schedule | ProgramGraph,
    progress: str = "fifo",
    strict: bool = False,
    timeline: Timeline | None = None,
    compute_known: bool = False,
    previous: tuple[Schedule, Report] | None = None,
) -> Report:
    """Check ``program`` (a schedule, or its graph built under ``progress``); the report is
    ``ok`` when it has no error (warnings allowed).  ``timeline`` may be a run of that graph
    already made (timed or not): the deadlock check then reuses it.  ``compute_known``: the
    program's compute items are the very objects of a program that verified (the output of a
    pass that keeps them), so the checks of compute ops alone are skipped.  ``previous``: the
    pass's input and its report, under the same ``progress`` and ``strict``; when its
    communication is the same as this program's (:func:`same_comm`) and that report has none
    of :data:`COMM_KNOWN_KINDS`, those checks (completeness, matching, lints) would find the
    same nothing, and are skipped too (with ``compute_known`` only)."""
    check_progress(progress)
    g = _graph(program, progress)
    comm_known = (
        compute_known
        and previous is not None
        and g.lowered
        and not any(d.kind in COMM_KNOWN_KINDS for d in previous[1].diagnostics)
        and same_comm(g.schedule, previous[0])
    )
    diags, more_missing = ([], 0) if comm_known else check_structure(g, compute_known)
    waits, ready = check_waits(g.schedule) if g.lowered else ([], None)
    order = check_local_order(g, compute_known, ready)
    at = len(diags) + len(order)  # where a missing SEND, found below, is reported
    diags += order
    diags += check_reduces(g)
    local_ok = not any(d.kind == "local-order" for d in order)
    if g.lowered:
        comm = waits + ([] if comm_known else check_matching(g))
        comm += _deadlock(g, timeline if timeline is not None else run(g), progress)
        if comm or order:  # a SEND the program lacks: after local order, before what it causes
            diags[at:at] = check_missing_sends(g)
        if (comm or order) and local_ok:
            # A cyclic compute order is the root cause of whatever the lowering then got wrong.
            cyc = _order_cycle(g)
            if cyc:
                comm = [cyc]
        diags += comm
        if not comm_known:
            diags += check_lints(g.schedule, g, "error" if strict else "warning")
    elif local_ok:
        cyc = _order_cycle(g, timeline)
        if cyc:
            diags.append(cyc)
    return Report(_capped(diags, {"incomplete": more_missing}))


COMM_KNOWN_KINDS = frozenset(
    {
        "out-of-range",
        "wrong-rank",
        "duplicate-op",
        "duplicate-message",
        "local-message",
        "incomplete",
        "forward-only",
        "unmatched-send",
        "unmatched-recv",
        "payload-mismatch",
        "asymmetric-group",
        "group-too-large",
        "mixed-batched",
    }
)
"""The findings of the checks that read only a program's communication items (their ops, their
grouping and their order on each rank) once its compute items are known: completeness
(:mod:`.structure` with ``compute_known``), matching and the lints."""


def comm_signature(s: Schedule) -> tuple:
    """What the checks of :data:`COMM_KNOWN_KINDS` read of ``s`` beyond its compute items:
    per rank, the communication items in program order, each as (its actions, posted in a
    group?); deferral and the position among compute items are left out (the checks that
    read those always run)."""
    out = []
    for prog in s.programs:
        sig = []
        for it in prog:
            cls = it.__class__
            if cls is Group:
                sig.append((it.actions, True))
            elif cls is Action and it.kind not in COMPUTE_KINDS:
                sig.append(((it,), False))
        out.append(tuple(sig))
    return tuple(out)


def same_comm(a: Schedule, b: Schedule) -> bool:
    """True when ``a`` and ``b`` have the same shape (ranks, stages, microbatches, placement,
    pipelines) and equal :func:`comm_signature`: then completeness of their communication ops,
    FIFO matching per channel and the lints find the same things in both."""
    if (a.ranks, a.stages, a.microbatches, a.placement, a.pipelines) != (
        b.ranks,
        b.stages,
        b.microbatches,
        b.placement,
        b.pipelines,
    ):
        return False
    return comm_signature(a) == comm_signature(b)


def deadlock_free(program: Schedule | ProgramGraph, progress: str = "fifo") -> bool:
    """True when every rank runs to the end under the rendezvous semantics (check 4 alone)."""
    return run(_graph(program, progress)).complete


def _graph(program: Schedule | ProgramGraph, progress: str) -> ProgramGraph:
    if isinstance(program, ProgramGraph) and program.built:
        if program.progress == progress or not program.lowered:
            return program
        program = program.schedule
    return build_graph(program, progress)


def _order_cycle(g: ProgramGraph, timeline: Timeline | None = None) -> Diagnostic | None:
    """The compute-order cycle of ``g``'s program, reported on ``g`` (None when acyclic)."""
    cg = build_graph(g.schedule.compute_only()) if g.lowered else g
    tl = timeline if timeline is not None and not g.lowered else run(cg)
    if tl.complete:
        return None
    stuck = [v for v in range(cg.n) if not tl.ran[v] and cg.kind[v] == COMPUTE]
    cycle = stuck_cycle(tl, stuck[0])
    if not cycle:
        return None
    k = cycle.index(min(cycle))
    cycle = cycle[k:] + cycle[:k]
    return order_cycle_diagnostic(g, [cg.ops[cg.lo[v]].key for v in cycle])


def _deadlock(g: ProgramGraph, tl: Timeline, progress: str) -> list[Diagnostic]:
    if tl.complete:
        return []
    hops = find_cycle(tl)
    if hops is None:  # stuck only on ops that have no partner: reported by matching
        return []
    relaxed_ok = deadlock_free(g.schedule, "relaxed") if progress == "fifo" else None
    return [deadlock_diagnostic(tl, hops, progress, relaxed_ok)]


def _capped(diags: list[Diagnostic], more: dict[str, int]) -> list[Diagnostic]:
    """At most :data:`MAX_PER_KIND` findings of each kind as they print: repeats of one source
    line (:func:`ppir.diagnostics.group_repeats`) count once and are kept whole up to
    :data:`MAX_REPEATS`, so that their note counts them; one line more counts the findings left
    out."""
    out: list[Diagnostic] = []
    seen: dict[str, int] = {}  # per kind: findings left out
    kept: dict[str, dict] = {}  # per kind: the repeat keys shown, and how many of each
    for d in diags:
        key = repeat_key(d)
        shown = kept.setdefault(d.kind, {})
        if key is not None and key in shown and shown[key] < MAX_REPEATS:
            shown[key] += 1
            out.append(d)
        elif key not in shown and len(shown) < MAX_PER_KIND:
            shown[key if key is not None else id(d)] = 1
            out.append(d)
        else:
            seen[d.kind] = seen.get(d.kind, 0) + 1
    for kind, extra in more.items():
        if extra:
            seen[kind] = seen.get(kind, 0) + extra
    for kind, n in seen.items():
        if n > 0:
            first = next(d for d in diags if d.kind == kind)
            out.append(
                Diagnostic(
                    kind,
                    "... and " + count(n, f"more '{kind}' diagnostic"),
                    first.span,  # located where the first of them is
                    severity=first.severity,
                )
            )
    return out


__all__ = ["verify", "deadlock_free", "same_comm", "KINDS", "MAX_PER_KIND"]
