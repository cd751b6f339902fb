"""Check 5, lints: patterns that the rendezvous model accepts but real NCCL setups trip over.

Warnings by default (``strict=True`` makes them errors).
``asymmetric-group``  a group whose ops with one peer pair (FIFO) with ops spread over several
                      items of that peer, or with part of a larger group there: the two ranks
                      group the exchange differently (NVIDIA/nccl#1279-style hangs).
``group-too-large``   more than 256 ops in one group (NCCL's limit on ops per group launch).
``mixed-batched``     between one pair of ranks, some ops are posted in groups
                      (``batch_isend_irecv``) and some alone (``isend``/``irecv``); torch and NCCL
                      have hung on that mix (pytorch#108378).
A group of one op written ``[x]`` counts as batched.  Linear in the number of ops.
"""

from __future__ import annotations

from ppir.diagnostics import Diagnostic, Note
from ppir.ir import Action, Group, Schedule
from ppir.ir.graph import ProgramGraph
from ppir.ir.types import COMM_KINDS

MAX_GROUP_OPS = 256


def check_lints(s: Schedule, g: ProgramGraph, severity: str = "warning") -> list[Diagnostic]:
    return _asymmetric(s, g, severity) + _too_large(s, g, severity) + _mixed(s, g, severity)


def _one_partner_each(g: ProgramGraph) -> bool:
    """True when every (rank, item, peer) pairs with one item of that peer, both ways: then no
    group is asymmetric (the usual case, found without building sets)."""
    partner: dict[tuple[int, int, int], int] = {}
    setdefault = partner.setdefault
    op_rank, op_item, lo, hi = g.op_rank, g.op_item, g.lo, g.hi
    for m in g.messages:
        o, p = lo[m], hi[m]
        ro, io, rp, ip = op_rank[o], op_item[o], op_rank[p], op_item[p]
        if setdefault((ro, io, rp), ip) != ip or setdefault((rp, ip, ro), io) != io:
            return False
    return True


def _asymmetric(s: Schedule, g: ProgramGraph, severity: str) -> list[Diagnostic]:
    if _one_partner_each(g):
        return []
    # (rank, item, peer) -> set of partner (peer, item): both directions
    pairs: dict[tuple[int, int, int], set[int]] = {}
    op_rank, op_item = g.op_rank, g.op_item
    for m in g.messages:  # each matched pair, seen from both ends
        o, p = g.lo[m], g.hi[m]
        ro, io, rp, ip = op_rank[o], op_item[o], op_rank[p], op_item[p]
        a = pairs.get((ro, io, rp))
        if a is None:
            pairs[(ro, io, rp)] = {ip}
        else:
            a.add(ip)
        b = pairs.get((rp, ip, ro))
        if b is None:
            pairs[(rp, ip, ro)] = {io}
        else:
            b.add(io)
    out = []
    reported: set[tuple[int, int, int]] = set()
    for (r, i, q), its in sorted(pairs.items()):
        back = {j for j in its for b in [pairs[(q, j, r)]] if len(b) > 1}
        if (r, i, q) in reported or (len(its) == 1 and not back):
            continue
        reported.add((r, i, q))
        reported.update((q, j, r) for j in its)
        span = g.item_span(r, i)
        item = s.programs[r][i]
        if len(its) > 1:
            msg = (
                f"{item} on rank {r} pairs with {len(its)} different items of rank {q}; "
                f"the two ranks group their exchange differently"
            )
        else:
            j = next(iter(its))
            msg = (
                f"{item} on rank {r} pairs with part of {s.programs[q][j]} on rank {q}, which "
                f"also pairs with other items of rank {r}"
            )
        notes = tuple(
            Note(f"rank {q}, step {j}: {s.programs[q][j]}", g.item_span(q, j))
            for j in sorted(its)[:4]
        )
        out.append(
            Diagnostic(
                "asymmetric-group",
                msg,
                span,
                severity=severity,
                hints=("post the ops of one exchange in one group on both ranks",),
                notes=notes,
            )
        )
    return out


def _too_large(s: Schedule, g: ProgramGraph, severity: str) -> list[Diagnostic]:
    out = []
    for r, prog in enumerate(s.programs):
        for i, it in enumerate(prog):
            if isinstance(it, Group) and len(it.actions) > MAX_GROUP_OPS:
                out.append(
                    Diagnostic(
                        "group-too-large",
                        f"group at step {i} of rank {r} holds {len(it.actions)} "
                        f"ops, more than NCCL's {MAX_GROUP_OPS} per group",
                        g.item_span(r, i),
                        severity=severity,
                        hints=(f"split it into groups of at most {MAX_GROUP_OPS} ops",),
                    )
                )
    return out


def _mixed(s: Schedule, g: ProgramGraph, severity: str) -> list[Diagnostic]:
    lone = (it.__class__ is Action and it.kind in COMM_KINDS for p in s.programs for it in p)
    if not any(lone):
        return []  # no lone op: nothing is mixed
    first: dict[tuple[int, int], list[int | None]] = {}  # pair -> [first batched, first lone]
    op_rank, op_item, programs = g.op_rank, g.op_item, s.programs
    for o, q in enumerate(g.op_peer):
        if q < 0:
            continue
        r = op_rank[o]
        key = (r, q) if r < q else (q, r)
        slot = first.get(key)
        if slot is None:
            slot = first[key] = [None, None]
        elif slot[0] is not None and slot[1] is not None:
            continue
        k = 0 if programs[r][op_item[o]].__class__ is Group else 1
        if slot[k] is None:
            slot[k] = o
    out = []
    for (r, q), (b, lone) in sorted(first.items()):
        if b is None or lone is None:
            continue
        la, ba = g.ops[lone], g.ops[b]
        out.append(
            Diagnostic(
                "mixed-batched",
                f"ranks {r} and {q} exchange both in groups and with lone ops: "
                f"{la} on rank {g.op_rank[lone]} is posted alone",
                la.span,
                severity=severity,
                hints=("use groups (or lone ops) for every exchange between one pair of ranks",),
                notes=(Note(f"{ba} is posted in a group ({g.where(b)})", ba.span),),
            )
        )
    return out
