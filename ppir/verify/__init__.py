"""The verifier: prove a schedule deadlock-free under NCCL point-to-point semantics.

``verify(schedule, progress="fifo", strict=False) -> Report`` runs, in order:

1. completeness (:mod:`.structure`): ``out-of-range``, ``wrong-rank``, ``duplicate-op``,
   ``incomplete``;
2. local order (:mod:`.local_order`): ``local-order``, ``missing-recv`` (lowered only);
3. matching (:mod:`.matching`, lowered only): ``unmatched-send``, ``unmatched-recv``,
   ``payload-mismatch``;
4. deadlock freedom (:mod:`.simulate`, :mod:`.witness`): ``deadlock`` for a stuck rendezvous run
   of a lowered schedule; ``order-cycle`` when the compute graph itself is cyclic.  For a lowered
   schedule the compute graph is examined only when checks 2-4 found something (an acyclic order
   is implied otherwise), and a cycle then replaces the matching and deadlock findings, which
   are its consequences; compute-only schedules are always examined;
   Deferred groups (``post[...]``) must each be waited on once, later (:mod:`.waits`):
   ``unwaited-group``, ``bad-wait``;
5. lints (:mod:`.lints`, lowered only): ``asymmetric-group``, ``group-too-large``,
   ``mixed-batched`` -- warnings, errors under ``strict``.

The semantics are written down in docs/verification.md; the executor runs exactly those.  The
report lists diagnostics in check order, at most :data:`MAX_PER_KIND` per kind plus one line
counting the rest.  Everything is linear in the number of ops.
"""

from __future__ import annotations

from ppir.analysis.order import OrderCycle, unit_levels
from ppir.diagnostics import Diagnostic, Report
from ppir.ir import Schedule
from ppir.verify.index import OpIndex
from ppir.verify.lints import check_lints
from ppir.verify.local_order import check_local_order
from ppir.verify.matching import check_matching
from ppir.verify.simulate import PROGRESS_MODELS, SimResult, find_cycle, simulate
from ppir.verify.structure import check_structure
from ppir.verify.waits import check_waits
from ppir.verify.witness import deadlock_diagnostic, order_cycle_diagnostic

MAX_PER_KIND = 20

KINDS = (
    "out-of-range",
    "wrong-rank",
    "duplicate-op",
    "incomplete",
    "local-order",
    "missing-recv",
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


def verify(schedule: Schedule, progress: str = "fifo", strict: bool = False) -> Report:
    """Check ``schedule``; the report is ``ok`` when it has no error (warnings allowed)."""
    if progress not in PROGRESS_MODELS:
        raise ValueError(f"unknown progress model {progress!r} (expected one of {PROGRESS_MODELS})")
    idx = OpIndex.build(schedule)
    diags = check_structure(schedule, idx)
    order = check_local_order(schedule, idx)
    diags += order
    local_ok = not any(d.kind == "local-order" for d in order)
    if schedule.is_lowered:
        comm = check_waits(schedule) + check_matching(schedule, idx)
        comm += _deadlock(schedule, idx, progress)
        if (comm or order) and local_ok:
            # A cyclic compute order is the root cause of whatever the lowering then got wrong.
            cyc = _order_cycle(schedule, idx)
            if cyc:
                comm = [cyc]
        diags += comm
        diags += check_lints(schedule, idx, "error" if strict else "warning")
    elif local_ok:
        cyc = _order_cycle(schedule, idx)
        if cyc:
            diags.append(cyc)
    return Report(_capped(diags))


def deadlock_free(schedule: Schedule, progress: str = "fifo") -> bool:
    """True when every rank runs to the end under the rendezvous semantics (check 4 alone)."""
    return simulate(OpIndex.build(schedule), progress).completed


def _order_cycle(s: Schedule, idx: OpIndex) -> Diagnostic | None:
    try:
        unit_levels(s.compute_only())
    except OrderCycle as e:
        return order_cycle_diagnostic(s, idx, e.cycle)
    return None


def _deadlock(s: Schedule, idx: OpIndex, progress: str) -> list[Diagnostic]:
    res: SimResult = simulate(idx, progress)
    if res.completed:
        return []
    hops = find_cycle(res, idx)
    if hops is None:  # stuck only on ops that have no partner: reported by matching
        return []
    relaxed_ok = simulate(idx, "relaxed").completed if progress == "fifo" else None
    return [deadlock_diagnostic(s, idx, res, hops, progress, relaxed_ok)]


def _capped(diags: list[Diagnostic]) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    seen: dict[str, int] = {}
    for d in diags:
        n = seen.get(d.kind, 0)
        seen[d.kind] = n + 1
        if n < MAX_PER_KIND:
            out.append(d)
    for kind, n in seen.items():
        if n > MAX_PER_KIND:
            sev = next(d.severity for d in diags if d.kind == kind)
            out.append(
                Diagnostic(
                    kind, f"... and {n - MAX_PER_KIND} more '{kind}' diagnostic(s)", severity=sev
                )
            )
    return out


__all__ = ["verify", "deadlock_free", "KINDS", "MAX_PER_KIND"]
