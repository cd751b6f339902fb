"""overlap-comms: split each communication group's post from its wait so transfers overlap
compute, without ever introducing a deadlock.

Input: a lowered schedule whose groups are blocking (``[a b]``: posted and waited at one
point, as ``lower-comms`` emits them); a rank whose groups are all split already (the pass ran
before: ``-p lower-comms,overlap-comms,overlap-comms``) is kept as it is.  Output: the same
compute items in the same per-rank order and the same groups in the same per-rank posting
order, where each group is ``post[...]``-ed as early as allowed and ``wait[...]``-ed as late
as allowed:

* **post early** — a group moves up past compute items (and waits) as long as it stays after
  the previous group of its rank (posting order is the FIFO order of groups and the FIFO
  matching order per channel, so it never changes) and after the compute items whose outputs
  its SENDs carry.  ``hoist`` bounds how many compute items a post may move above (each one
  hoisted holds a receive buffer that much longer: the buffer budget).
* **wait late** — the wait goes right before the first compute item that consumes one of the
  group's RECVs; a group with no RECVs (sends only) is waited on right before the next wait of
  a group posted after it (which implies its completion, groups completing in posting order),
  or at the end of the program.

Why this is safe: under the verifier's ``fifo`` semantics every unit (compute item, group,
wait) waits only for units that it waited for, directly or transitively, before the pass
(a post waits for the previous program-blocking item before it and the previous group; a
compute item waits for the previous compute item or wait; a wait for its group and the
compute item or wait before it, which the input's blocking group, or the later group whose
completion the wait is placed before, already waited for).  Matching is
unchanged because posting order is.  The rendezvous system is monotone — removing waits can
only make every unit complete earlier — so a schedule that was deadlock-free stays
deadlock-free, and its estimated step time never grows.  The pass driver verifies its result,
as after every pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import itemgetter

from ppir.ir import Action, Group, Item, Overlap, Schedule, Wait, deps, item_actions
from ppir.ir.shape import require_schedule
from ppir.ir.types import COMPUTE_KINDS, SEND_KINDS


@dataclass(frozen=True)
class OverlapComms:
    """Post groups early and wait late (see the module docstring)."""

    hoist: int = 1
    name = "overlap-comms"

    def __post_init__(self) -> None:
        if isinstance(self.hoist, bool) or not isinstance(self.hoist, int):
            raise TypeError(f"hoist is a count of compute items, an int, got {self.hoist!r:.40}")
        if self.hoist < 0:
            raise ValueError(f"hoist is a count of compute items, at least 0, got {self.hoist}")

    def apply(self, schedule: Schedule) -> Schedule:
        require_schedule(schedule, "OverlapComms.apply")
        programs = tuple(tuple(_overlap_rank(prog, self.hoist)) for prog in schedule.programs)
        return schedule.replace_programs(programs)


def _overlap_rank(prog: tuple[Item, ...], hoist: int) -> list[Item]:
    compute: list[Item] = []
    where: dict[tuple, int] = {}  # compute action key -> index among the compute items
    setdefault = where.setdefault
    comm: list[tuple[int, Item]] = []  # (compute items before it, item)
    for it in prog:
        cls = it.__class__
        if cls is Action:
            if it.kind in COMPUTE_KINDS:
                setdefault((it.stage, it.kind, it.mb), len(compute))
                compute.append(it)
                continue
        elif cls is Overlap:
            i = len(compute)
            for a in it.actions:
                setdefault((a.stage, a.kind, a.mb), i)
            compute.append(it)
            continue
        elif cls is Wait or (cls is Group and it.deferred):
            if all(x.__class__ is not Group or x.deferred for x in prog):
                return list(prog)  # already split (overlap-comms ran before): nothing to move
            raise ValueError("overlap-comms expects blocking groups; this program is partly split")
        comm.append((len(compute), it))
    # Slot k means "before compute item k" (k == len(compute): at the end of the program).
    serves = deps.SERVES  # the compute kinds a SEND carries the output of / a RECV feeds
    posts: list[tuple[int, Group]] = []
    waits: list[tuple[int | None, Wait]] = []
    last_post = 0
    get = where.get
    for seen, it in comm:
        acts = item_actions(it)
        slot = seen - hoist if seen - hoist > last_post else last_post
        consumer = None
        for a in acts:
            st, m = a.stage, a.mb
            if a.kind in SEND_KINDS:
                for k in serves[a.kind]:
                    x = get((st, k, m))
                    if x is not None and x + 1 > slot:
                        slot = x + 1
            else:
                for k in serves[a.kind]:
                    x = get((st, k, m))
                    if x is not None and x >= seen and (consumer is None or x < consumer):
                        consumer = x
        slot = last_post = slot if slot < seen else seen
        group = Group(tuple(acts), getattr(it, "span", None), deferred=True)
        posts.append((slot, group))
        waits.append((consumer, Wait(group.actions, group.span)))
    # A group of sends only is waited on just before the next wait of a later group (groups
    # complete in posting order, so that wait already implies it: no new dependency), which
    # frees its send buffers early; at the end of the program when no later group is waited on.
    nxt = len(compute)
    for i in range(len(waits) - 1, -1, -1):
        slot, w = waits[i]
        if slot is None:
            waits[i] = (nxt, w)
        nxt = min(nxt, waits[i][0])
    # At each slot: posts (in posting order), then waits (stable: program order within a slot),
    # then the compute item.  A wait never precedes its own post: its slot is >= the post's.
    waits.sort(key=itemgetter(0))
    out: list[Item] = []
    add = out.append
    posts.append((-1, None))  # sentinels: no slot is -1
    waits.append((-1, None))
    pi = wi = 0
    for k, c in enumerate(compute):
        while posts[pi][0] == k:
            add(posts[pi][1])
            pi += 1
        while waits[wi][0] == k:
            add(waits[wi][1])
            wi += 1
        add(c)
    out.extend(p for _, p in posts[pi:-1])  # the slot at the end of the program
    out.extend(w for _, w in waits[wi:-1])
    return out
