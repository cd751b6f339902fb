"""Check 2, local order: every op comes after what it consumes on its own rank.

Kinds
-----
``local-order``   a compute op before a producer that runs on the same rank (``1B0`` before
                  ``1F0``; ``W`` before its ``I``), or a SEND before the compute op whose output
                  it carries.
``missing-recv``  (lowered programs only) a compute op whose producer lives on another rank and
                  that is not preceded, on its own rank, by the completion of the RECV carrying
                  that input (its blocking group, or the wait of its deferred group).
``missing-send``  (lowered programs only; :func:`check_missing_sends`) a compute op whose output
                  a stage on another rank consumes, and no SEND of that output anywhere in the
                  program (a SEND on the wrong rank is ``wrong-rank``'s; one before its producer
                  ``local-order``'s; a backward in an evaluation program ``forward-only``'s).
Every data edge of the graph is checked once; a producer that is missing altogether is left to
``incomplete``.  Linear in the number of ops.
"""

from __future__ import annotations

from ppir.diagnostics import Diagnostic, Note
from ppir.ir import deps
from ppir.ir.graph import ProgramGraph
from ppir.ir.types import COMPUTE_KINDS, SEND_KINDS


def check_local_order(
    g: ProgramGraph, compute_known: bool = False, ready: list[dict[int, int]] | None = None
) -> list[Diagnostic]:
    """``compute_known``: the compute items are those of a program already verified, so only
    what communication adds is checked (each recv before its consumer, each send after its
    producer).  ``ready`` (a lowered program's): per rank, the item index of the wait that
    takes each deferred group (:func:`ppir.verify.waits.check_waits`); a recv in one is
    ready there, any other at its own item."""
    s = g.schedule
    out: list[Diagnostic] = []
    lowered, S, place = g.lowered, s.stages, s.placement
    ops, op_rank, op_item, first_op = g.ops, g.op_rank, g.op_item, g.first.getter()
    if lowered and ready is None:
        from ppir.verify.waits import check_waits

        ready = check_waits(s)[1]
    local: dict[int, dict] = {}  # per rank: first op of each key there, built when needed

    def on_rank(key, r: int) -> int | None:
        """The first op holding ``key`` on rank r (usually the schedule's first one)."""
        x = first_op(*key)
        if x is None or op_rank[x] == r:
            return x
        if r not in local:
            d: dict = {}
            for y in range(g.rank_start[r], g.rank_start[r + 1]):
                d.setdefault(ops[y].key, y)
            local[r] = d
        return local[r].get(key)

    serves = deps.SERVES
    producers_of = deps.input_table(S, s.pipelines).get  # producers lie in the op's pipeline
    crossing = deps.crossing_table(S, s.pipelines).get
    compute_kinds = COMPUTE_KINDS
    for o, a in enumerate(ops):
        k = a.kind
        if k in compute_kinds:
            if compute_known and not lowered:
                continue
            st = a.stage
            producers = producers_of((k, st))
            if producers is None:  # out of range
                continue
            r, m = op_rank[o], a.mb
            if not compute_known:
                for ps, kinds in producers:
                    if place[ps] == r:
                        found = [
                            x for x in (on_rank((ps, kk, m), r) for kk in kinds) if x is not None
                        ]
                        if found and min(found) > o:
                            out.append(_local_order(g, o, min(found)))
            rule = crossing((k, st)) if lowered else None
            if rule is not None:
                if place[rule[0]] != r:
                    x = first_op(st, rule[2], m)  # the RECV delivering it (deps.crossing_table)
                    if x is not None and op_rank[x] != r:
                        x = on_rank((st, rule[2], m), r)
                    i = op_item[x] if x is not None else None
                    if x is None or ready[r].get(i, i) >= op_item[o]:
                        out.append(_missing_recv(g, o, (st, rule[2], m), x))
        elif k in SEND_KINDS:
            st = a.stage
            if not 0 <= st < S:
                continue
            r, m = op_rank[o], a.mb
            best = None  # the first producer of what it sends, on its rank
            for kk in serves[k]:
                x = first_op(st, kk, m)
                if x is not None and op_rank[x] != r:
                    x = on_rank((st, kk, m), r)
                if x is not None and (best is None or x < best):
                    best = x
            if best is not None and best > o:
                out.append(_local_order(g, o, best))
    return out


def check_missing_sends(g: ProgramGraph) -> list[Diagnostic]:
    """``missing-send`` of a lowered program: each compute op whose output crosses to another
    rank (:func:`ppir.ir.deps.outgoing_message`) while the program holds no SEND of it.  A
    missing SEND always leaves its channel unmatched (or a later message mismatched), or its
    RECV missing too, so the verifier calls this only when local order, matching or the
    deadlock check found something: it names the cause, ahead of those consequences, without
    a pass over every op of a sound program."""
    s = g.schedule
    if not g.lowered:
        return []
    refused = deps.TRAINING_ONLY if s.forward_only else ()  # structure's forward-only reports
    place, S, first_op = s.placement, s.stages, g.first.getter()
    out: list[Diagnostic] = []
    for o, a in enumerate(g.ops):
        k = a.kind
        if k not in COMPUTE_KINDS or k in refused or not 0 <= a.stage < S:
            continue
        msg = deps.outgoing_message(place, a, s.pipelines)
        if msg is not None and first_op(*deps.send_action(msg).key) is None:
            out.append(_missing_send(g, o, msg))
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
    msg_in = deps.message_in(a, s.stages, s.pipelines)
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


def _missing_send(g: ProgramGraph, o: int, msg) -> Diagnostic:
    s = g.schedule
    a, r = g.ops[o], g.op_rank[o]
    send, dst = deps.send_action(msg), s.placement[msg.dst]
    return Diagnostic(
        "missing-send",
        f"{a} on rank {r} produces the {msg.what} of microbatch {msg.mb} for stage {msg.dst} "
        f"(rank {dst}), but no {send} sends it",
        a.span,
        hints=(f"add {send} after {a} (rank {dst} receives it with {deps.recv_action(msg)})",),
    )
