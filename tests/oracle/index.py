"""TEST ORACLE (ppir's former op index, kept for tests/oracle only): the flat view of a
schedule: ops with ids, items, peers and FIFO partners.

Contract
--------
* Op ids are global and dense: rank 0's actions in program order (groups flattened), then rank
  1's, and so on.  ``item`` is the index of the program item (compute action, lone comm action
  or :class:`ppir.ir.Group`) holding the op; ``pos`` its position among the rank's actions.
* ``peer[o]`` is the rank a communication op talks to, or -1 for compute ops and for comm ops
  whose partner stage does not exist (those are reported as ``out-of-range``).
* Channels are directed ``(src, dst)`` rank pairs.  ``partner[o]`` pairs the k-th send on a
  channel (in the sender's program order) with the k-th recv on it (in the receiver's program
  order), whatever they carry; -1 when the other side has fewer ops.  This is NCCL's FIFO
  matching: no tags, no wildcards.
Building the index is linear in the number of ops.
"""

from __future__ import annotations

from dataclasses import dataclass

from ppir.ir import Action, Group, OpKind, Schedule, Span, item_actions


@dataclass
class OpIndex:
    schedule: Schedule
    actions: list[Action]  # by op id
    rank: list[int]  # by op id
    item: list[int]  # by op id: index of the program item on its rank
    pos: list[int]  # by op id: position among the rank's actions
    peer: list[int]  # by op id
    partner: list[int]  # by op id
    rank_start: list[int]  # first op id of each rank (len ranks + 1)
    item_ops: list[list[tuple[int, int]]]  # per rank, per item: [start, end) op ids
    sends: dict[tuple[int, int], list[int]]  # channel -> send op ids in order
    recvs: dict[tuple[int, int], list[int]]  # channel -> recv op ids in order

    @classmethod
    def build(cls, s: Schedule) -> OpIndex:
        actions: list[Action] = []
        rank: list[int] = []
        item: list[int] = []
        pos: list[int] = []
        peer: list[int] = []
        rank_start: list[int] = []
        item_ops: list[list[tuple[int, int]]] = []
        sends: dict[tuple[int, int], list[int]] = {}
        recvs: dict[tuple[int, int], list[int]] = {}
        S, place = s.stages, s.placement
        delta = _PARTNER_DELTA
        for r, prog in enumerate(s.programs):
            rank_start.append(len(actions))
            spans = []
            for i, it in enumerate(prog):
                start = len(actions)
                acts = item_actions(it)
                actions.extend(acts)
                n = len(acts)
                rank.extend([r] * n)
                item.extend([i] * n)
                for a in acts:
                    d = delta.get(a.kind)
                    if d is None:
                        peer.append(-1)
                        continue
                    ps = a.stage + d
                    if 0 <= a.stage < S and 0 <= ps < S:
                        q = place[ps]
                        if a.kind in _SENDS:
                            sends.setdefault((r, q), []).append(len(peer))
                        else:
                            recvs.setdefault((q, r), []).append(len(peer))
                        peer.append(q)
                    else:
                        peer.append(-1)
                spans.append((start, len(actions)))
            pos.extend(range(len(actions) - rank_start[-1]))
            item_ops.append(spans)
        rank_start.append(len(actions))
        partner = [-1] * len(actions)
        for ch, ss in sends.items():
            for o, p in zip(ss, recvs.get(ch, ())):
                partner[o] = p
                partner[p] = o
        return cls(s, actions, rank, item, pos, peer, partner, rank_start, item_ops, sends, recvs)

    @property
    def num_ops(self) -> int:
        return len(self.actions)

    def ops_of(self, r: int) -> range:
        return range(self.rank_start[r], self.rank_start[r + 1])

    def item_of(self, o: int):
        """The program item (Action or Group) holding op ``o``."""
        return self.schedule.programs[self.rank[o]][self.item[o]]

    def item_span(self, r: int, i: int) -> Span | None:
        it = self.schedule.programs[r][i]
        if isinstance(it, Group):
            return it.span or (it.actions[0].span if it.actions else None)
        return it.span

    def where(self, o: int) -> str:
        """``0SEND_F1 (rank 0, step 5)``: an op and where it sits (step = item index)."""
        return f"{self.actions[o]} (rank {self.rank[o]}, step {self.item[o]})"


_SENDS = frozenset({OpKind.SEND_F, OpKind.SEND_B})
_PARTNER_DELTA = {OpKind.SEND_F: 1, OpKind.RECV_B: 1, OpKind.RECV_F: -1, OpKind.SEND_B: -1}


def partner_stage(a: Action) -> int:
    """The stage at the other end of a communication action."""
    return a.stage + _PARTNER_DELTA[a.kind]


def comm_peer(s: Schedule, a: Action) -> int:
    """The peer rank of a comm action, or -1 when the partner stage is out of range."""
    ps = partner_stage(a)
    return s.placement[ps] if 0 <= ps < s.stages else -1


def payload(a: Action) -> tuple[str, int, int, int]:
    """What a comm action carries: (activation|gradient, from stage, to stage, microbatch)."""
    k, st, m = a.kind, a.stage, a.mb
    if k is OpKind.SEND_F:
        return ("activation", st, st + 1, m)
    if k is OpKind.RECV_F:
        return ("activation", st - 1, st, m)
    if k is OpKind.SEND_B:
        return ("gradient", st, st - 1, m)
    return ("gradient", st + 1, st, m)


def describe_payload(p: tuple[str, int, int, int]) -> str:
    what, src, dst, m = p
    return f"the {what} of microbatch {m} from stage {src} to stage {dst}"


def ordinal(n: int) -> str:
    """1 -> '1st', 2 -> '2nd', 11 -> '11th'."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
