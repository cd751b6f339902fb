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


def check_waits(s: Schedule) -> tuple[list[Diagnostic], list[dict[int, int]]]:
    """The diagnostics above, and per rank, for each deferred group (by item index) the item
    index of the wait that takes it, past the end when none does (never waited, or posted
    again before its wait): what the local-order check reads.  Which wait takes which group
    is :class:`~ppir.ir.deferred.OpenGroups`' rule, as in the graph."""
    out: list[Diagnostic] = []
    ready: list[dict[int, int]] = []
    for r, prog in enumerate(s.programs):
        waited: dict[int, int] = {}
        never = len(prog) + 1
        open_groups = OpenGroups()  # actions -> the deferred group not waited on yet
        for i, it in enumerate(prog):
            cls = it.__class__
            if cls is Group and it.deferred:
                earlier = open_groups.put(it.actions, i)
                if earlier is not None:  # posted again before its wait: each post waits once
                    out.append(_unwaited(prog[earlier], r, " before it is posted again"))
                    waited[earlier] = never
            elif cls is Wait:
                j = open_groups.take(it.actions)
                if j is not None:
                    waited[j] = i
                    continue
                out.append(
                    Diagnostic(
                        "bad-wait",
                        f"{it} on rank {r} waits for a group that is not posted "
                        "(with post[...]) earlier on this rank, or was already waited on",
                        it.span or (it.actions[0].span if it.actions else None),
                        hints=("a wait names exactly the actions of an earlier post[...]",),
                    )
                )
        for j in open_groups.values():
            out.append(_unwaited(prog[j], r, ""))
            waited[j] = never
        ready.append(waited)
    return out, ready


def _unwaited(g: Group, r: int, when: str) -> Diagnostic:
    span = g.span or (g.actions[0].span if g.actions else None)
    return Diagnostic(
        "unwaited-group",
        f"{g} on rank {r} is posted but never waited on{when}",
        span,
        hints=(f"add wait[{' '.join(str(a) for a in g.actions)}] after it",),
    )
