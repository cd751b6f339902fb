"""Check 3, matching: per (src, dst) channel, the k-th send meets the k-th recv and they agree.

Kinds
-----
``unmatched-send``    a channel has more sends than recvs; the first send left over is reported.
``unmatched-recv``    a channel has more recvs than sends.
``payload-mismatch``  the k-th send and the k-th recv of a channel carry different payloads
                      (activation vs gradient, stage pair, microbatch).  NCCL would silently
                      deliver the wrong tensor (or hang on a size mismatch).  The first mismatch
                      of each channel is reported, naming both ops and both source lines; later
                      ones on the same channel are usually its consequence and are counted.
Shapes and dtypes are not in the IR; when they are, they join the payload.  Linear.
"""

from __future__ import annotations

from ppir.diagnostics import Diagnostic, Note, count
from ppir.ir import deps
from ppir.ir.graph import ProgramGraph
from ppir.verify.words import ordinal


def check_matching(g: ProgramGraph) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for ch in sorted(set(g.sends) | set(g.recvs)):
        src, dst = ch
        ss, rs = g.sends.get(ch, []), g.recvs.get(ch, [])
        n = min(len(ss), len(rs))
        sp = deps.payloads([g.ops[o] for o in ss[:n]])
        rp = deps.payloads([g.ops[p] for p in rs[:n]])
        bad = [] if sp == rp else [k for k, (x, y) in enumerate(zip(sp, rp)) if x != y]
        if bad:
            out.append(_mismatch(g, ch, bad[0], ss[bad[0]], rs[bad[0]], len(bad)))
        if len(ss) > len(rs):
            o = ss[len(rs)]
            a = g.ops[o]
            out.append(
                Diagnostic(
                    "unmatched-send",
                    f"{a} on rank {src} is the {ordinal(len(rs) + 1)} send to rank {dst}, but rank "
                    f"{dst} posts only {count(len(rs), 'recv')} from rank {src}",
                    a.span,
                    hints=(
                        f"{_left_over(len(ss) - len(rs), 'send', src, dst)} no recv; "
                        "the sender would hang",
                    ),
                    notes=_last_note(g, rs, f"rank {dst}'s last recv from rank {src}"),
                )
            )
        elif len(rs) > len(ss):
            o = rs[len(ss)]
            a = g.ops[o]
            out.append(
                Diagnostic(
                    "unmatched-recv",
                    f"{a} on rank {dst} is the {ordinal(len(ss) + 1)} recv from rank {src}, "
                    f"but rank {src} posts only {count(len(ss), 'send')} to rank {dst}",
                    a.span,
                    hints=(
                        f"{_left_over(len(rs) - len(ss), 'recv', src, dst)} no send; "
                        "the receiver would hang",
                    ),
                    notes=_last_note(g, ss, f"rank {src}'s last send to rank {dst}"),
                )
            )
    return out


def _left_over(n: int, what: str, src: int, dst: int) -> str:
    """``1 send on channel 0->1 has``, ``2 sends on channel 0->1 have``."""
    return f"{count(n, what)} on channel {src}->{dst} {'has' if n == 1 else 'have'}"


def _last_note(g: ProgramGraph, ops: list[int], what: str) -> tuple[Note, ...]:
    if not ops:
        return ()
    o = ops[-1]
    return (Note(f"{what}: {g.where(o)}", g.ops[o].span),)


def _mismatch(g: ProgramGraph, ch, k: int, o: int, p: int, count: int) -> Diagnostic:
    src, dst = ch
    sa, ra = g.ops[o], g.ops[p]
    msg = (
        f"the {ordinal(k + 1)} message from rank {src} to rank {dst} is sent as {sa} but "
        f"received as {ra}"
    )
    hints = [
        f"{sa} sends {deps.message_of(sa).describe()}; "
        f"{ra} expects {deps.message_of(ra).describe()}",
        "matching is FIFO per channel: post recvs in the order the peer sends",
    ]
    if count > 1:
        hints.append(f"{count} messages on channel {src}->{dst} disagree in all")
    return Diagnostic(
        "payload-mismatch",
        msg,
        ra.span,
        hints=tuple(hints),
        notes=(
            Note(f"the send: {g.where(o)}", sa.span),
            Note(f"the recv: {g.where(p)}", ra.span),
        ),
    )
