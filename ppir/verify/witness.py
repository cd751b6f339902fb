"""Readable witnesses for check 4: the wait-for cycle and the rank x step grid.

``deadlock``     a stuck rendezvous run (see :mod:`.deadlock`): the wait-for cycle rotated so the
                 lowest rank comes first; for each rank on it, the op it is blocked on, the peer it
                 waits for and the source line of the op; then the grid around the stuck point.
``order-cycle``  the compute graph (data dependencies + program order) has a cycle, so no
                 execution exists whatever the communication; the cycle (from
                 :func:`ppir.analysis.timeline.stuck_cycle`, rotated to its least node) with
                 the same kind of grid.
Grid cells carry one status mark: ``=`` done, ``>`` blocked (posted, waiting for a partner, or on
the cycle), blank: not reached.  ``step`` is the index of the item in the rank's program.
"""

from __future__ import annotations

from ppir.analysis.timeline import Timeline
from ppir.diagnostics import Diagnostic, Note, rank_list
from ppir.ir import Schedule, deps
from ppir.ir.graph import ProgramGraph
from ppir.verify.deadlock import Hop, blocked_steps, item_status

MAX_GRID_RANKS = 16
BEFORE, AFTER = 2, 4


def deadlock_diagnostic(
    tl: Timeline, hops: list[Hop], progress: str, relaxed_ok: bool | None
) -> Diagnostic:
    g = tl.graph
    s = g.schedule
    ranks = [h.rank for h in hops]
    if len(hops) == 2 and ranks[0] != ranks[1]:
        who = f"ranks {ranks[0]} and {ranks[1]} wait for each other"
    else:
        who = "ranks " + " -> ".join(str(r) for r in ranks + ranks[:1]) + " wait in a cycle"
    blocked = blocked_steps(tl)
    notes = []
    for h in hops:
        o, p = h.op, h.partner
        a, r, q = g.ops[o], g.op_rank[o], g.op_rank[p]
        verb = f"sends to rank {q}" if a.kind.is_send else f"receives from rank {q}"
        msg = (
            f"rank {r} is blocked at step {g.op_item[o]} on {a} ({verb}); its partner "
            f"{g.ops[p]} is step {g.op_item[p]} of rank {q}"
        )
        behind = [b for b in blocked.get(q, ()) if b < g.op_item[p]]
        msg += (
            f", behind step {behind[0]} where rank {q} is blocked" if behind else ", not posted yet"
        )
        notes.append(Note(msg, a.span))
    hints = []
    # Grouping a blocked send with the recv its peer waits behind is always data-safe (a recv
    # has no inputs); with a blocked recv it may not be, so no hint is given then.
    if len(hops) <= 4 and all(g.ops[h.op].kind.is_send for h in hops):
        pairs = []
        for i, h in enumerate(hops):
            waited = hops[i - 1].partner  # the op of this rank the previous hop waits for
            if g.op_rank[waited] == g.op_rank[h.op] and waited != h.op:
                pairs.append(
                    f"on rank {g.op_rank[h.op]} post {g.ops[h.op]} and {g.ops[waited]} in one group"
                )
        if pairs:
            hints.append(
                "; ".join(pairs) + " (Megatron's pairing, with the other exchanges between "
                "those ranks grouped too, as the mixed-batched lint asks), or reorder so that "
                "one side receives first"
            )
    if progress == "fifo" and relaxed_ok:
        hints.append(
            "it would complete under --progress-model relaxed (independent progress per "
            "peer), which NCCL and CUDA do not guarantee"
        )
    label = (
        "one FIFO of groups per rank"
        if progress == "fifo"
        else "relaxed: independent progress per peer"
    )
    first = g.ops[hops[0].op]
    return Diagnostic(
        "deadlock",
        f"deadlock: {who} (rendezvous sends, {label})",
        first.span,
        hints=tuple(hints),
        notes=tuple(notes),
        extra=_grid(s, item_status(tl), sorted(set(ranks))),
    )


GRID_HEAD = "around the stuck point (rank x step; '=' done, '>' blocked, blank not reached):"
CYCLE_HEAD = "around the cycle (rank x step; '>' on the cycle):"


def _grid(
    s: Schedule,
    status: list[list[str]],
    focus_ranks: list[int],
    head: str = GRID_HEAD,
    anchors: list[int] | None = None,
) -> str:
    """Rows of items around each rank's anchor (default: its first item that is not done).
    With ``anchors`` (a cycle's ops), a rank without one is named on a last line, not shown
    at an arbitrary place of its program."""
    ranks = list(range(s.ranks)) if s.ranks <= MAX_GRID_RANKS else focus_ranks
    off = [r for r in ranks if anchors and anchors[r] == len(s.programs[r])]
    rows = []
    for r in ranks:
        if r in off:
            continue
        prog = s.programs[r]
        f = (
            anchors[r]
            if anchors
            else next((i for i, c in enumerate(status[r]) if c != "="), len(prog))
        )
        lo, hi = max(0, f - BEFORE), min(len(prog), f + AFTER)
        cells = [status[r][i] + str(prog[i]) for i in range(lo, hi)]
        done = f == len(prog) and not anchors
        tail = "   (finished)" if done else ("  ..." if hi < len(prog) else "")
        rows.append((r, lo, cells, tail))
    width = max((len(c) for _, _, cells, _ in rows for c in cells), default=1)
    rw = len(str(s.ranks - 1))
    sw = max((len(str(lo)) for _, lo, _, _ in rows), default=1)
    out = [head]
    for r, lo, cells, tail in rows:
        body = "  ".join(c.ljust(width) for c in cells).rstrip()
        out.append(f"  rank {r:>{rw}} | step {lo:>{sw}} | {body}{tail}")
    if off:
        many = len(off) > 1
        names = ", ".join(map(str, off))
        out.append(
            f"  (rank{'s' * many} {names}: none of {'their' if many else 'its'} ops on the cycle)"
        )
    return "\n".join(out)


def _consumes(a, pa, s) -> bool:
    """Whether op ``a`` consumes the output of op ``pa`` (:func:`ppir.ir.deps.inputs`)."""
    return any(
        pa.stage == p.stage and pa.kind in p.kinds and pa.mb == p.mb
        for p in deps.inputs(a, s.stages, s.pipelines)
    )


def order_cycle_diagnostic(g: ProgramGraph, cycle: list[tuple]) -> Diagnostic:
    """``cycle`` lists the action keys of a compute-order cycle in dependency order (each
    waits on the previous); ``g`` is the graph of the program reported on."""
    s = g.schedule
    ops = [g.first[k] for k in cycle]
    notes = []
    for k, o in enumerate(ops):
        prev = ops[k - 1]
        a, pa = g.ops[o], g.ops[prev]
        r = g.op_rank[o]
        lo, hi = g.item_range(r, g.op_item[o])  # an overlapped step waits for both parts
        parts = [a] + [g.ops[b] for b in range(lo, hi) if g.ops[b] is not a]
        user = next((b for b in parts if _consumes(b, pa, s)), None)
        if user is a:
            why = f"needs the output of {pa} (rank {g.op_rank[prev]}, step {g.op_item[prev]})"
        elif user is not None:
            why = (
                f"runs in one overlapped step with {user}, which needs the output of {pa} "
                f"(rank {g.op_rank[prev]}, step {g.op_item[prev]})"
            )
        else:
            why = f"comes after {pa} in rank {r}'s program (step {g.op_item[prev]})"
        notes.append(Note(f"{a} (rank {r}, step {g.op_item[o]}) {why}", a.span))
    status = [[" "] * len(p) for p in s.programs]
    for o in ops:
        status[g.op_rank[o]][g.op_item[o]] = ">"
    anchors = [next((i for i, c in enumerate(row) if c == ">"), len(row)) for row in status]
    first = g.ops[ops[0]]
    ranks = sorted({g.op_rank[o] for o in ops})
    return Diagnostic(
        "order-cycle",
        f"compute order has a cycle: {len(ops)} ops on {rank_list(ranks)} wait on each other, "
        "so no execution exists",
        first.span,
        hints=("no placement of sends and recvs can fix this: reorder the compute ops",),
        notes=tuple(notes),
        extra=_grid(s, status, ranks, CYCLE_HEAD, anchors),
    )
