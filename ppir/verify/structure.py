"""Check 1, completeness: every op in range, on the right rank, once; nothing missing.

Kinds
-----
``out-of-range``       a stage or microbatch outside the declared ranges, or a comm op whose
                       partner stage does not exist (``3SEND_F0`` when there are 4 stages) or
                       lies in another pipeline.
``wrong-rank``         an op on a rank that does not hold its stage.
``duplicate-op``       a compute op that appears twice (anywhere), or a stage/microbatch with two
                       backwards (B and I, B and W).
``duplicate-message``  a SEND or RECV that appears twice: each value crosses its boundary once
                       (the runtime's buffers are written once and read once).
``local-message``      a SEND or RECV between two stages of one rank: a local hand-off needs no
                       message (and gloo/NCCL cannot send a rank to itself).
``incomplete``         a (stage, microbatch) without its forward, without a backward, or with I
                       but no W (or W but no I).  An evaluation program
                       (:attr:`ppir.ir.Schedule.forward_only`) needs only the forwards.
``forward-only``       a backward (B, I or W) in an evaluation program.
Literal and CSV files can contain all of these; the expander rejects them only in program
blocks.  Linear in the number of ops: missing ops are found by scanning (stage, microbatch)
pairs in order past the complete ones, and only the first :data:`LISTED` are described (so
that the printed groups of repeats count them all unless more are missing); the rest are
counted.
"""

from __future__ import annotations

from ppir.diagnostics import Diagnostic, Note, count
from ppir.ir import Action, OpKind, deps
from ppir.ir.graph import ProgramGraph
from ppir.ir.types import COMPUTE_KINDS

LISTED = 90  # missing ops described one by one (the verifier shows 20 groups of repeats)
F, B, I, W = OpKind.F, OpKind.B, OpKind.I, OpKind.W  # noqa: E741


def check_structure(g: ProgramGraph, compute_known: bool = False) -> tuple[list[Diagnostic], int]:
    """(diagnostics, how many 'incomplete' findings exist beyond those listed).
    ``compute_known``: the compute items are those of a program already verified (a pass's
    output), so only communication ops are checked."""
    s = g.schedule
    out: list[Diagnostic] = []
    S, M = s.stages, s.microbatches
    first = g.first
    first_op = first.getter()
    flagged: set = set()
    place, rank, peer = s.placement, g.op_rank, g.op_peer
    refused = deps.TRAINING_ONLY if s.forward_only else ()
    for o, a in enumerate(g.ops):
        st, k, m = a.stage, a.kind, a.mb
        comm = k not in COMPUTE_KINDS
        if compute_known and not comm:
            continue
        if not (0 <= st < S and 0 <= m < M) or (comm and peer[o] < 0):
            if not comm or a.span is None or a.span not in flagged:
                out.append(_out_of_range(a, rank[o], S, M))
                flagged.add(a.span)  # a lowering gives its messages the producer's span
            continue
        if k in refused:
            out.append(_backward_in_evaluation(a))
            continue
        if place[st] != rank[o]:
            out.append(
                Diagnostic(
                    "wrong-rank",
                    f"{a} runs on rank {rank[o]}, but stage {st} lives on rank {place[st]}",
                    a.span,
                    hints=(f"move it to rank {place[st]}'s program",),
                )
            )
        p = first_op(st, k, m)
        if p == o:
            if comm and peer[o] == rank[o]:
                out.append(_local_message(g, o))
        else:
            out.append(_duplicate(g, o, p))
    if compute_known:
        return out, 0
    seen = {key: o for key, o in first.items() if 0 <= key[0] < S and 0 <= key[2] < M}
    out.extend(_backward_conflicts(g, seen))
    missing, extra = _missing(g, seen)
    return out + missing, extra


def _backward_in_evaluation(a: Action) -> Diagnostic:
    return Diagnostic(
        "forward-only",
        f"{a} is a backward, but the program is declared forward_only (an evaluation program "
        "runs forwards only)",
        a.span,
        hints=("drop the backward to evaluate, or the forward_only declaration to train",),
    )


def _out_of_range(a: Action, r: int, S: int, M: int) -> Diagnostic:
    if not 0 <= a.stage < S:
        return Diagnostic(
            "out-of-range",
            f"{a} on rank {r} names stage {a.stage}, out of range 0..{S - 1}",
            a.span,
        )
    if not 0 <= a.mb < M:
        return Diagnostic(
            "out-of-range",
            f"{a} on rank {r} names microbatch {a.mb}, out of range 0..{M - 1}",
            a.span,
            hints=(f"the schedule has {count(M, 'microbatch')}",),
        )
    verb = "sends to" if a.kind.is_send else "receives from"
    ps = deps.peer_stage(a)
    why = (
        f"which does not exist (stages 0..{S - 1})"
        if not 0 <= ps < S
        else "which is in another pipeline: no message crosses from one pipeline into the next"
    )
    return Diagnostic("out-of-range", f"{a} on rank {r} {verb} stage {ps}, {why}", a.span)


def _duplicate(g: ProgramGraph, o: int, p: int) -> Diagnostic:
    a = g.ops[o]
    note = (Note(f"first occurrence: {g.where(p)}", g.ops[p].span),)
    where = f"(rank {g.op_rank[o]}, step {g.op_item[o]})"
    if a.kind.is_compute:
        return Diagnostic("duplicate-op", f"{a} appears twice {where}", a.span, notes=note)
    msg = deps.message_of(a)
    return Diagnostic(
        "duplicate-message",
        f"{a} appears twice {where}: {msg.describe()} crosses its boundary once",
        a.span,
        hints=(
            "send and receive each value once; the runtime's buffers are written once and "
            "read once",
        ),
        notes=note,
    )


def _local_message(g: ProgramGraph, o: int) -> Diagnostic:
    a, r = g.ops[o], g.op_rank[o]
    return Diagnostic(
        "local-message",
        f"{a} on rank {r} talks to stage {deps.peer_stage(a)}, which is on rank {r} too: a "
        "hand-off between stages of one rank needs no message",
        a.span,
        hints=(f"remove {a} (and its partner); the value stays on rank {r}",),
    )


def _backward_conflicts(g: ProgramGraph, seen: dict) -> list[Diagnostic]:
    out = []
    for key, o in seen.items():
        stage, kind, m = key
        if kind is not B:
            continue
        for other in (I, W):
            p = seen.get((stage, other, m))
            if p is not None:
                a, b = (o, p) if o > p else (p, o)
                out.append(
                    Diagnostic(
                        "duplicate-op",
                        f"stage {stage} has two backwards for microbatch {m}: {g.ops[b]} and "
                        f"{g.ops[a]}",
                        g.ops[a].span,
                        hints=("run B (full backward) or I then W, not both",),
                        notes=(Note(f"{g.where(b)}", g.ops[b].span),),
                    )
                )
    return out


def _missing(g: ProgramGraph, seen: dict) -> tuple[list[Diagnostic], int]:
    """The first :data:`LISTED` missing compute ops in (stage, microbatch) order, each located
    at a related op when one exists, and how many more are missing."""
    s = g.schedule
    S, M = s.stages, s.microbatches
    # How many pairs lack each part, counted from what is present (no scan over S x M).
    have_f: set = set()
    have_b: set = set()  # a backward of some kind (B, I or W) is there
    have_i: set = set()
    have_w: set = set()
    have_full: set = set()
    for st, k, m in seen:
        if k is F:
            have_f.add((st, m))
        elif k is B:
            have_b.add((st, m))
            have_full.add((st, m))
        elif k is I:
            have_b.add((st, m))
            have_i.add((st, m))
        elif k is W:
            have_b.add((st, m))
            have_w.add((st, m))
    forward_only = s.forward_only  # an evaluation program: every forward, no backward
    total = S * M - len(have_f)
    if not forward_only:
        total += S * M - len(have_b)
        total += len(have_w - have_i - have_full) + len(have_i - have_w - have_full)
    if total == 0:
        return [], 0
    out: list[Diagnostic] = []
    if forward_only:
        complete = have_f
    else:
        complete = {p for p in have_f if p in have_full or (p in have_i and p in have_w)}
    run = {m for _, _, m in seen}  # the microbatches some op runs
    for st in range(S):
        if len(out) >= LISTED:
            break
        holder = s.placement[st]
        for m in range(M):
            if (st, m) in complete:
                continue
            unrun = _declared(s, m) if m not in run else ()
            out.extend(_missing_at(g, seen, st, m, holder, forward_only, unrun))
            if len(out) >= LISTED:
                break
    return out[:LISTED], total - len(out[:LISTED])


def _declared(s, m: int) -> tuple[Note, ...]:
    """A note at the ``microbatches`` declaration, for a microbatch ``m`` no op runs at all (the
    declared count may be what is wrong); none when the schedule has no source for it."""
    if s.microbatches_span is None:
        return ()
    n = count(s.microbatches, "microbatch")
    what = f"the schedule declares {n} here, and no op of any rank runs microbatch {m}"
    return (Note(what, s.microbatches_span),)


def _missing_at(
    g: ProgramGraph,
    seen: dict,
    st: int,
    m: int,
    holder: int,
    forward_only: bool,
    declared: tuple[Note, ...] = (),
) -> list[Diagnostic]:
    """The missing ops of stage ``st`` for microbatch ``m``; ``declared``: notes for a
    microbatch no op runs (:func:`_declared`)."""
    f, b = seen.get((st, F, m)), seen.get((st, B, m))
    i, w = seen.get((st, I, m)), seen.get((st, W, m))
    missing: list[tuple[Action, str, tuple, str]] = []
    if f is None:
        missing.append((Action(st, F, m), "the forward", (b, i, w), "F"))
    if b is None and i is None and w is None:
        if not forward_only:  # an evaluation program runs no backward
            missing.append((Action(st, B, m), "a backward (B, or I then W)", (f,), "BIW"))
    elif b is None and i is None:
        missing.append((Action(st, I, m), "the backward-input I before its W", (w, f), "I"))
    elif b is None and w is None:
        missing.append((Action(st, W, m), "the backward-weight W after its I", (i, f), "W"))
    out = []
    for a, what, near, letters in missing:
        related = next((x for x in near if x is not None), None)
        if related is not None:
            span = g.ops[related].span
            where = f" (it runs {g.where(related)})"
        else:
            span, where = _first_span(g, holder), ""
        others = _nearest_sibling(g, seen, a, letters, span)
        out.append(
            Diagnostic(
                "incomplete",
                f"{a} is missing: stage {st} (rank {holder}) never runs {what} of microbatch "
                f"{m}{where}",
                span,
                notes=others + _empty_loops(g, holder, letters) + declared,
            )
        )
    return out


_SIBLINGS = {"F": "forwards", "BIW": "backwards", "I": "backward-input passes (I)"}


def _nearest_sibling(g: ProgramGraph, seen: dict, a: Action, letters: str, span) -> tuple:
    """A note at the op of ``a``'s stage and kind (``letters``: a backward is B or I) whose
    microbatch is nearest ``a``'s, where one exists and is written on another line than
    ``span``: the statement that runs the others, which stops short of ``a`` (a loop's bound,
    as a rule), where the error itself points at the op ``a`` should have followed (a literal
    program's line, which shows the others already, gets none)."""
    kinds = deps.BACKWARD if letters == "BIW" else (OpKind(letters),)
    M = g.schedule.microbatches
    for d in range(1, M):
        for m in (a.mb - d, a.mb + d):
            for k in kinds:
                o = seen.get((a.stage, k, m)) if 0 <= m < M else None
                at = g.ops[o].span if o is not None else None
                if at is not None and (
                    span is None or (at.path, at.line) != (span.path, span.line)
                ):
                    noun = _SIBLINGS.get(letters, "backward-weight passes (W)")
                    return (Note(f"stage {a.stage}'s other {noun} run here ({g.ops[o]})", at),)
                if o is not None:
                    return ()
    return ()


def _empty_loops(g: ProgramGraph, rank: int, letters: str) -> tuple[Note, ...]:
    """A note at each loop of ``rank``'s program that would emit one of ``letters`` but ran
    zero times there: an empty range is legitimate, but may be why an op is missing."""
    return tuple(
        Note(why, span)
        for r, emits, span, why in g.schedule.empty_loops
        if r == rank and any(k in emits for k in letters)
    )


def _first_span(g: ProgramGraph, r: int):
    """The first located op of rank r, else of any rank (a rank may have no ops at all)."""
    for lo, hi in ((g.rank_start[r], g.rank_start[r + 1]), (0, g.num_ops)):
        for o in range(lo, hi):
            if g.ops[o].span is not None:
                return g.ops[o].span
    return None
