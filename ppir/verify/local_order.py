"""Check 2, local order: every op comes after what it consumes on its own rank.

Kinds
-----
``local-order``   a compute op before a producer that runs on the same rank (``1B0`` before
                  ``1F0``; ``W`` before its ``I``), or a SEND before the compute op whose output
                  it carries.
``missing-recv``  (lowered programs only) a compute op whose producer lives on another rank and
                  that is not preceded, on its own rank, by the completion of the RECV carrying
                  that input (its blocking group, or the wait of its deferred group).
Every data edge of the graph is checked once; a producer that is missing altogether is left to
``incomplete``.  Linear in the number of ops.
"""

from __future__ import annotations

from ppir.diagnostics import Diagnostic, Note
from ppir.ir import Group, Wait, deps, item_actions
from ppir.ir.graph import ProgramGraph


def check_local_order(g: ProgramGraph) -> list[Diagnostic]:
    s = g.schedule
    out: list[Diagnostic] = []
    lowered, S, place = g.lowered, s.stages, s.placement
    ops = g.ops
    for r in range(s.ranks):
        lo, hi = g.rank_start[r], g.rank_start[r + 1]
        local: dict[tuple, int] = {}  # first op of each key on this rank
        for o in range(lo, hi):
            local.setdefault(ops[o].key, o)
        ready = _recv_ready_items(s.programs[r]) if lowered else {}
        for o in range(lo, hi):
            a = ops[o]
            if not 0 <= a.stage < S:
                continue
            if a.kind.is_compute:
                for p in deps.inputs(a, S):
                    if place[p.stage] == r:
                        keys = [(p.stage, k, p.mb) for k in p.kinds]
                        found = [local[k] for k in keys if k in local]
                        if found and not any(x < o for x in found):
                            out.append(_local_order(g, o, min(found)))
                msg = deps.message_in(a, S)
                if lowered and msg is not None and deps.crosses_ranks(place, msg):
                    key = deps.recv_action(msg).key
                    if not ready.get(key, len(ops)) < g.op_item[o]:
                        out.append(_missing_recv(g, o, key, local.get(key)))
            elif a.kind.is_send:
                keys = deps.served_keys(a)
                found = [local[k] for k in keys if k in local]
                if found and not any(x < o for x in found):
                    out.append(_local_order(g, o, min(found)))
    return out


def _recv_ready_items(prog) -> dict[tuple, int]:
    """For each RECV of a rank: the index of the item after which its data is available (its
    blocking group, or the Wait of its deferred group; a deferred group never waited on gives
    a large index, so its consumers are reported as missing the recv)."""
    out: dict[tuple, int] = {}
    pending: dict[tuple, list[tuple]] = {}
    for i, it in enumerate(prog):
        if isinstance(it, Wait):
            for key in pending.pop(it.actions, ()):
                out.setdefault(key, i)
            continue
        keys = [a.key for a in item_actions(it) if a.kind.is_recv]
        if not keys:
            continue
        if isinstance(it, Group) and it.deferred:
            pending.setdefault(it.actions, []).extend(keys)
        else:
            for key in keys:
                out.setdefault(key, i)
    for keys in pending.values():
        for key in keys:
            out.setdefault(key, len(prog) + 1)
    return out


def _local_order(g: ProgramGraph, o: int, p: int) -> Diagnostic:
    a, pa, r = g.ops[o], g.ops[p], g.op_rank[o]
    if a.kind.is_send:
        msg = (
            f"{a} on rank {r} sends the output of {pa} before {pa} runs (step {g.op_item[p]} "
            f"of rank {r})"
        )
    else:
        msg = (
            f"{a} on rank {r} runs before its input {pa}, which comes later on the same rank "
            f"(step {g.op_item[p]})"
        )
    return Diagnostic(
        "local-order",
        msg,
        a.span,
        hints=(f"move {a} after {pa}",),
        notes=(Note(f"{pa} is here", pa.span),),
    )


def _missing_recv(g: ProgramGraph, o: int, key, later: int | None) -> Diagnostic:
    s = g.schedule
    a, r = g.ops[o], g.op_rank[o]
    msg_in = deps.message_in(a, s.stages)
    recv = deps.recv_action(msg_in)
    src_stage, what = msg_in.src, msg_in.what
    src = s.placement[src_stage]
    text = (
        f"{a} on rank {r} needs the {what} of microbatch {a.mb} from stage {src_stage} "
        f"(rank {src}), but no {recv} precedes it"
    )
    notes = ()
    if later is not None and later < o:  # posted before it, but its wait[...] comes after
        text = (
            f"{a} on rank {r} uses the {what} of microbatch {a.mb} from stage {src_stage} "
            f"(rank {src}) before the wait of the deferred group receiving it ({recv})"
        )
        notes = (
            Note(f"{recv} is posted at step {g.op_item[later]} of rank {r}", g.ops[later].span),
        )
        hints = (f"move the wait[...] of that group before {a}",)
    elif later is not None:
        notes = (
            Note(
                f"{recv} comes after it, at step {g.op_item[later]} of rank {r}", g.ops[later].span
            ),
        )
        hints = (f"post {recv} before {a}",)
    else:
        hints = (f"add {recv} before {a} (and the matching send on rank {src})",)
    return Diagnostic("missing-recv", text, a.span, hints=hints, notes=notes)
