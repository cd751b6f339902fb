"""Check 2, local order: every op comes after what it consumes on its own rank.

Kinds
-----
``local-order``   a compute op before a producer that runs on the same rank (``1B0`` before
                  ``1F0``; ``W`` before its ``I``), or a SEND before the compute op whose output
                  it carries.
``missing-recv``  (lowered schedules only) a compute op whose producer lives on another rank and
                  that is not preceded, on its own rank, by the RECV carrying that input.
A producer that is missing altogether is left to ``incomplete``.  Linear in the number of ops.
"""

from __future__ import annotations

from ppir.diagnostics import Diagnostic, Note
from ppir.ir import Action, Group, OpKind, Schedule, Wait, comm_endpoints, item_actions
from ppir.verify.index import OpIndex


def check_local_order(s: Schedule, idx: OpIndex) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    lowered = s.is_lowered
    S, place, acts = s.stages, s.placement, idx.actions
    F, B, I, W = OpKind.F, OpKind.B, OpKind.I, OpKind.W
    SEND_F, SEND_B, RECV_F, RECV_B = OpKind.SEND_F, OpKind.SEND_B, OpKind.RECV_F, OpKind.RECV_B
    for r in range(s.ranks):
        ops = idx.ops_of(r)
        first: dict[tuple, int] = {}
        for o in ops:
            a = acts[o]
            first.setdefault((a.stage, a.kind, a.mb), o)
        ready = _recv_ready_items(s.programs[r])

        def need(o: int, keys: tuple, is_recv: bool, first=first, ready=ready) -> None:
            found = [first[k] for k in keys if k in first]
            if is_recv:  # a recv's data is there once its group completes (its wait)
                if any(ready.get(k, -1) < idx.item[o] and k in first for k in keys):
                    return
            elif any(p < o for p in found):
                return
            later = min(found) if found else None
            if is_recv:
                out.append(_missing_recv(s, idx, o, keys[0], later))
            elif later is not None:
                out.append(_local_order(idx, o, later))

        for o in ops:
            a = acts[o]
            st, k, m = a.stage, a.kind, a.mb
            if not 0 <= st < S:
                continue
            if k is F:
                if st > 0:
                    if place[st - 1] == r:
                        need(o, ((st - 1, F, m),), False)
                    elif lowered:
                        need(o, ((st, RECV_F, m),), True)
            elif k is B or k is I:
                need(o, ((st, F, m),), False)
                if st + 1 < S:
                    if place[st + 1] == r:
                        need(o, ((st + 1, B, m), (st + 1, I, m)), False)
                    elif lowered:
                        need(o, ((st, RECV_B, m),), True)
            elif k is W:
                need(o, ((st, I, m),), False)
            elif k is SEND_F or k is SEND_B:
                need(o, comm_endpoints(a), False)
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
        acts = item_actions(it)
        keys = [a.key for a in acts if a.kind.is_recv]
        if isinstance(it, Group) and it.deferred:
            pending.setdefault(it.actions, []).extend(keys)
        else:
            for key in keys:
                out.setdefault(key, i)
    for keys in pending.values():
        for key in keys:
            out.setdefault(key, len(prog) + 1)
    return out


def _local_order(idx: OpIndex, o: int, p: int) -> Diagnostic:
    a, pa, r = idx.actions[o], idx.actions[p], idx.rank[o]
    if a.kind.is_send:
        msg = (
            f"{a} on rank {r} sends the output of {pa} before {pa} runs (step {idx.item[p]} "
            f"of rank {r})"
        )
    else:
        msg = (
            f"{a} on rank {r} runs before its input {pa}, which comes later on the same rank "
            f"(step {idx.item[p]})"
        )
    return Diagnostic(
        "local-order",
        msg,
        a.span,
        hints=(f"move {a} after {pa}",),
        notes=(Note(f"{pa} is here", pa.span),),
    )


def _missing_recv(s: Schedule, idx: OpIndex, o: int, key, later: int | None) -> Diagnostic:
    a, r = idx.actions[o], idx.rank[o]
    recv = Action(*key)
    if recv.kind is OpKind.RECV_F:
        what, src_stage = "activation", a.stage - 1
    else:
        what, src_stage = "gradient", a.stage + 1
    src = s.placement[src_stage]
    msg = (
        f"{a} on rank {r} needs the {what} of microbatch {a.mb} from stage {src_stage} "
        f"(rank {src}), but no {recv} precedes it"
    )
    notes = ()
    if later is not None and later < o:  # posted before it, but its wait[...] comes after
        msg = (
            f"{a} on rank {r} uses the {what} of microbatch {a.mb} from stage {src_stage} "
            f"(rank {src}) before the wait of the deferred group receiving it ({recv})"
        )
        notes = (
            Note(
                f"{recv} is posted at step {idx.item[later]} of rank {r}", idx.actions[later].span
            ),
        )
        hints = (f"move the wait[...] of that group before {a}",)
    elif later is not None:
        notes = (
            Note(
                f"{recv} comes after it, at step {idx.item[later]} of rank {r}",
                idx.actions[later].span,
            ),
        )
        hints = (f"post {recv} before {a}",)
    else:
        hints = (f"add {recv} before {a} (and the matching send on rank {src})",)
    return Diagnostic("missing-recv", msg, a.span, hints=hints, notes=notes)
