"""Readable witnesses for check 4: the wait-for cycle and the rank x step grid.

``deadlock``     a stuck rendezvous run (see :mod:`.simulate`): the wait-for cycle rotated so the
                 lowest rank comes first; for each rank on it, the op it is blocked on, the peer it
                 waits for and the source line of the op; then the grid around the stuck point.
``order-cycle``  the compute graph (data dependencies + program order) has a cycle, so no
                 execution exists whatever the communication; the cycle (from
                 :class:`ppir.analysis.order.OrderCycle`, already canonical) with the same kind of
                 grid.
Grid cells carry one status mark: ``=`` done, ``>`` blocked (posted, waiting for a partner, or on
the cycle), blank: not reached.  ``step`` is the index of the item in the rank's program.
"""

from __future__ import annotations

from ppir.diagnostics import Diagnostic, Note
from ppir.ir import Schedule, producers
from ppir.verify.index import OpIndex
from ppir.verify.simulate import Hop, SimResult

MAX_GRID_RANKS = 16
BEFORE, AFTER = 2, 4


def deadlock_diagnostic(
    s: Schedule,
    idx: OpIndex,
    res: SimResult,
    hops: list[Hop],
    progress: str,
    relaxed_ok: bool | None,
) -> Diagnostic:
    u = res.units
    ranks = [u.rank[h.unit] for h in hops]
    if len(hops) == 2 and ranks[0] != ranks[1]:
        who = f"ranks {ranks[0]} and {ranks[1]} wait for each other"
    else:
        who = "ranks " + " -> ".join(str(r) for r in ranks + ranks[:1]) + " wait in a cycle"
    blocked = _blocked_steps(res)
    notes = []
    for h in hops:
        o, p = h.op, h.partner
        a, r, q = idx.actions[o], idx.rank[o], idx.rank[p]
        verb = f"sends to rank {q}" if a.kind.is_send else f"receives from rank {q}"
        msg = (
            f"rank {r} is blocked at step {idx.item[o]} on {a} ({verb}); its partner "
            f"{idx.actions[p]} is step {idx.item[p]} of rank {q}"
        )
        behind = [b for b in blocked.get(q, ()) if b < idx.item[p]]
        msg += (
            f", behind step {behind[0]} where rank {q} is blocked" if behind else ", not posted yet"
        )
        notes.append(Note(msg, a.span))
    hints = []
    # Grouping a blocked send with the recv its peer waits behind is always data-safe (a recv
    # has no inputs); with a blocked recv it may not be, so no hint is given then.
    if len(hops) <= 4 and all(idx.actions[h.op].kind.is_send for h in hops):
        pairs = []
        for i, h in enumerate(hops):
            waited = hops[i - 1].partner  # the op of this rank the previous hop waits for
            if idx.rank[waited] == idx.rank[h.op] and waited != h.op:
                pairs.append(
                    f"on rank {idx.rank[h.op]} post {idx.actions[h.op]} and "
                    f"{idx.actions[waited]} in one group"
                )
        if pairs:
            hints.append(
                "; ".join(pairs) + " (Megatron's pairing), or reorder so that one side "
                "receives first"
            )
    if progress == "fifo" and relaxed_ok:
        hints.append(
            "it would complete under --progress relaxed (independent progress per "
            "peer), which NCCL and CUDA do not guarantee"
        )
    label = (
        "one FIFO of groups per rank"
        if progress == "fifo"
        else "relaxed: independent progress per peer"
    )
    first = idx.actions[hops[0].op]
    return Diagnostic(
        "deadlock",
        f"deadlock: {who} (rendezvous sends, {label})",
        first.span,
        hints=tuple(hints),
        notes=tuple(notes),
        extra=_grid(s, _item_status(s, res), sorted(set(ranks))),
    )


def _blocked_steps(res: SimResult) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    u = res.units
    for x in range(len(u.rank)):
        if res.posted[x] and not res.done[x]:
            out.setdefault(u.rank[x], []).append(u.item[x])
    return out


def _item_status(s: Schedule, res: SimResult) -> list[list[str]]:
    """Per rank, per item: '=' done, '>' blocked, ' ' not reached."""
    st = [["="] * len(p) for p in s.programs]
    u = res.units
    for x in range(len(u.rank)):
        if not res.done[x]:
            r, i = u.rank[x], u.item[x]
            if res.posted[x]:
                st[r][i] = ">"
            elif st[r][i] == "=":
                st[r][i] = " "
    return st


GRID_HEAD = "around the stuck point (rank x step; '=' done, '>' blocked, blank not reached):"
CYCLE_HEAD = "around the cycle (rank x step; '>' on the cycle):"


def _grid(
    s: Schedule,
    status: list[list[str]],
    focus_ranks: list[int],
    head: str = GRID_HEAD,
    anchors: list[int] | None = None,
) -> str:
    """Rows of items around each rank's anchor (default: its first item that is not done)."""
    ranks = list(range(s.ranks)) if s.ranks <= MAX_GRID_RANKS else focus_ranks
    rows = []
    for r in ranks:
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
    return "\n".join(out)


def order_cycle_diagnostic(s: Schedule, idx: OpIndex, cycle: list[tuple[int, int]]) -> Diagnostic:
    """``cycle`` lists (rank, compute index) in dependency order: each waits on the previous."""
    compute_ops = [
        [o for o in idx.ops_of(r) if idx.actions[o].kind.is_compute] for r in range(s.ranks)
    ]
    ops = [compute_ops[r][i] for r, i in cycle]
    notes = []
    for k, o in enumerate(ops):
        prev = ops[k - 1]
        a, pa = idx.actions[o], idx.actions[prev]
        r = idx.rank[o]
        if pa.key in {p.key for p in producers(a, s.stages)} or (
            pa.stage == a.stage + 1 and pa.mb == a.mb and a.kind.is_backward
        ):
            why = f"needs the output of {pa} (rank {idx.rank[prev]}, step {idx.item[prev]})"
        else:
            why = f"comes after {pa} in rank {r}'s program (step {idx.item[prev]})"
        notes.append(Note(f"{a} (rank {r}, step {idx.item[o]}) {why}", a.span))
    status = [[" "] * len(p) for p in s.programs]
    for o in ops:
        status[idx.rank[o]][idx.item[o]] = ">"
    anchors = [next((i for i, c in enumerate(row) if c == ">"), len(row)) for row in status]
    first = idx.actions[ops[0]]
    ranks = sorted({idx.rank[o] for o in ops})
    return Diagnostic(
        "order-cycle",
        f"compute order has a cycle: {len(ops)} ops on rank(s) "
        f"{', '.join(map(str, ranks))} wait on each other, so no execution exists",
        first.span,
        hints=("no placement of sends and recvs can fix this: reorder the compute ops",),
        notes=tuple(notes),
        extra=_grid(s, status, ranks, CYCLE_HEAD, anchors),
    )
