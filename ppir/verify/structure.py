"""Check 1, completeness: every op in range, on the right rank, once; nothing missing.

Kinds
-----
``out-of-range``  a stage or microbatch outside the declared ranges, or a comm op whose partner
                  stage does not exist (``3SEND_F0`` when there are 4 stages).
``wrong-rank``    an op on a rank that does not hold its stage.
``duplicate-op``  a compute op that appears twice (anywhere), or a stage/microbatch with two
                  backwards (B and I, B and W).  Repeated messages surface as matching errors.
``incomplete``    a (stage, microbatch) without its forward, without a backward, or with I but
                  no W (or W but no I).
Literal and CSV files can contain all of these; the expander rejects them only in program blocks.
"""

from __future__ import annotations

from ppir.diagnostics import Diagnostic, Note
from ppir.ir import COMM_KINDS, Action, OpKind, Schedule
from ppir.verify.index import OpIndex, partner_stage


def check_structure(s: Schedule, idx: OpIndex) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    S, M = s.stages, s.microbatches
    first: dict[tuple, int] = {}
    flagged: set = set()
    place, rank, peer = s.placement, idx.rank, idx.peer
    for o, a in enumerate(idx.actions):
        st, k, m = a.stage, a.kind, a.mb
        if not (0 <= st < S and 0 <= m < M) or (peer[o] < 0 and k in COMM_KINDS):
            if k not in COMM_KINDS or a.span is None or a.span not in flagged:
                out.append(_out_of_range(a, rank[o], S, M))
                flagged.add(a.span)  # a lowering gives its messages the producer's span
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
        key = (st, k, m)
        p = first.get(key)
        if p is None:
            first[key] = o
        elif k not in COMM_KINDS:  # repeated messages show up as matching errors
            out.append(
                Diagnostic(
                    "duplicate-op",
                    f"{a} appears twice (rank {rank[o]}, step {idx.item[o]})",
                    a.span,
                    notes=(Note(f"first occurrence: {idx.where(p)}", idx.actions[p].span),),
                )
            )
    out.extend(_backward_conflicts(idx, first))
    out.extend(_missing(s, idx, first))
    return out


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
            hints=(f"the schedule has {M} microbatches",),
        )
    verb = "sends to" if a.kind.is_send else "receives from"
    return Diagnostic(
        "out-of-range",
        f"{a} on rank {r} {verb} stage {partner_stage(a)}, which "
        f"does not exist (stages 0..{S - 1})",
        a.span,
    )


def _backward_conflicts(idx: OpIndex, first: dict) -> list[Diagnostic]:
    out = []
    for key, o in first.items():
        stage, kind, m = key
        if kind is OpKind.B:
            for other in (OpKind.I, OpKind.W):
                p = first.get((stage, other, m))
                if p is not None:
                    a, b = (o, p) if o > p else (p, o)
                    out.append(
                        Diagnostic(
                            "duplicate-op",
                            f"stage {stage} has two backwards for microbatch {m}: "
                            f"{idx.actions[b]} and {idx.actions[a]}",
                            idx.actions[a].span,
                            hints=("run B (full backward) or I then W, not both",),
                            notes=(Note(f"{idx.where(b)}", idx.actions[b].span),),
                        )
                    )
    return out


def _missing(s: Schedule, idx: OpIndex, first: dict) -> list[Diagnostic]:
    """One diagnostic per missing compute op, located at a related op when one exists."""
    out = []
    for st in range(s.stages):
        holder = s.placement[st]
        for m in range(s.microbatches):
            f = first.get((st, OpKind.F, m))
            b = first.get((st, OpKind.B, m))
            i = first.get((st, OpKind.I, m))
            w = first.get((st, OpKind.W, m))
            missing: list[tuple[Action, str, tuple]] = []
            if f is None:
                missing.append((Action(st, OpKind.F, m), "the forward", (b, i, w)))
            if b is None and i is None and w is None:
                missing.append((Action(st, OpKind.B, m), "a backward (B, or I then W)", (f,)))
            elif b is None and i is None:
                missing.append(
                    (Action(st, OpKind.I, m), "the backward-input I before its W", (w, f))
                )
            elif b is None and w is None:
                missing.append(
                    (Action(st, OpKind.W, m), "the backward-weight W after its I", (i, f))
                )
            for a, what, near in missing:
                related = next((x for x in near if x is not None), None)
                if related is not None:
                    span = idx.actions[related].span
                    seen = f" (it runs {idx.where(related)})"
                else:
                    span, seen = _first_span(idx, holder), ""
                out.append(
                    Diagnostic(
                        "incomplete",
                        f"{a} is missing: stage {st} (rank {holder}) never runs {what} "
                        f"of microbatch {m}{seen}",
                        span,
                    )
                )
    return out


def _first_span(idx: OpIndex, r: int):
    for o in idx.ops_of(r):
        if idx.actions[o].span is not None:
            return idx.actions[o].span
    return None
