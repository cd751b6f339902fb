"""Deferred groups and their waits: every ``post[...]`` is waited on exactly once, later, by a
``wait[...]`` naming the same actions on the same rank.

Kinds
-----
``unwaited-group``  a deferred group with no wait after it, or posted again before its wait
                    (its buffers would never be known to be free, and a recv in it would never
                    be known to have arrived): every post is waited exactly once;
``bad-wait``        a wait that names no deferred group posted earlier on its rank, or one
                    already waited on.
Linear in the number of items.
"""

from __future__ import annotations

from ppir.diagnostics import Diagnostic
from ppir.ir import Group, Schedule, Wait
from ppir.ir.deferred import OpenGroups


def check_waits(s: Schedule) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for r, prog in enumerate(s.programs):
        open_groups = OpenGroups()  # actions -> the deferred group not waited on yet
        for it in prog:
            cls = it.__class__
            if cls is Group and it.deferred:
                earlier = open_groups.put(it.actions, it)
                if earlier is not None:  # posted again before its wait: each post waits once
                    out.append(_unwaited(earlier, r, " before it is posted again"))
            elif cls is Wait:
                if open_groups.take(it.actions) is None:
                    out.append(
                        Diagnostic(
                            "bad-wait",
                            f"{it} on rank {r} waits for a group that is not posted "
                            "(with post[...]) earlier on this rank, or was already waited on",
                            it.span or (it.actions[0].span if it.actions else None),
                            hints=("a wait names exactly the actions of an earlier post[...]",),
                        )
                    )
        for g in open_groups.values():
            out.append(_unwaited(g, r, ""))
    return out


def _unwaited(g: Group, r: int, when: str) -> Diagnostic:
    span = g.span or (g.actions[0].span if g.actions else None)
    return Diagnostic(
        "unwaited-group",
        f"{g} on rank {r} is posted but never waited on{when}",
        span,
        hints=(f"add wait[{' '.join(str(a) for a in g.actions)}] after it",),
    )
