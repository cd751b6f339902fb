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


def check_waits(s: Schedule) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for r, prog in enumerate(s.programs):
        open_groups: dict[tuple, Group] = {}
        for it in prog:
            if isinstance(it, Group) and it.deferred:
                earlier = open_groups.get(it.actions)
                if earlier is not None:  # posted again before its wait: each post waits once
                    out.append(_unwaited(earlier, r, " before it is posted again"))
                open_groups[it.actions] = it
            elif isinstance(it, Wait):
                if open_groups.pop(it.actions, None) is None:
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
