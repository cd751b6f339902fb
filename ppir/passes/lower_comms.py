"""lower-comms: insert SEND/RECV actions where a data dependency crosses ranks.

Three strategies, each a pure function from a compute-only schedule to a lowered one:

``lockstep`` (default)
    Give every compute action its ASAP finish time t under relative op costs (the timeline of
    the compute graph, :func:`ppir.analysis.timeline.run`, with transfers free; default F=1,
    B=2, I=1, W=1 per rank share, or the costs the caller passes).  The message carrying the
    output of an action finishing at t is sent and received in a group posted at "time t" on
    both ranks: on each rank, the group of time t sits after every compute action that starts
    before t and before every action that starts at or after t.  A producer starts before its
    finish time and a consumer starts after it, so the send follows its producer and the recv
    precedes its consumer.  Every group of time t pairs only with groups of time t and, by
    induction over t, all groups complete: the result is deadlock-free under rendezvous
    semantics for *any* schedule whose compute graph is acyclic, and each group pairs
    symmetrically with one group per peer (Megatron's send-forward/recv-backward pairing falls
    out of this).  When real op costs are proportional to the costs used here and communication
    is free, every group completes the moment its producers finish, so the lowering adds no
    waiting of its own (the textbook bubbles hold). Every exchange is a Group, even of one op,
    so that a pair of ranks never mixes batched and unbatched P2P (the verifier's
    ``mixed-batched`` lint).

``eager``
    Plan the ASAP times with *transfers included* (``costs``: op durations per stage and a
    transfer time per link, :class:`ppir.analysis.costs.Costs`; by default the lockstep costs
    and free transfers), and exchange every message at the moment its producer finishes, t: on each
    rank the group of time t sits after every item that finishes by t and before every item that
    finishes after t.  A sender's producer finishes at t, so its send follows it; a receiver
    usually is in the middle of an op at t, and its group goes *before* that op, so that once
    ``overlap-comms`` splits post from wait the transfer runs while the op computes and is done
    when the consumer (planned at t + transfer or later) starts.  Deadlock-free for any
    :class:`~ppir.analysis.costs.Costs` (positive durations, :meth:`Costs.for_planning`) in exact
    arithmetic (the cost backend plans in integer ticks), for the same reason as lockstep: a
    consumer starts at t or later and, its duration being positive, finishes after t, so every recv
    precedes its consumer and every send follows its producer (an overlapped step's outputs
    leave when the step ends); groups of time t pair only with groups of time t; each rank's
    groups are in time order, one per time; and everything a rank does before its group of
    time t (items finishing by t, and their recvs, at earlier times) needs only groups of
    earlier times, so by induction over t every group completes.  Blocking (without
    overlap-comms) it makes receivers wait; it is meant to be followed by ``overlap-comms``,
    where with transfer times that match the real ones it reaches the comm-weighted critical
    path of the compute order in every case ``bench/bench_overlap.py`` measures.

``naive``
    Each RECV right before its consumer and each SEND right after its producer, all alone.  Under
    rendezvous semantics this deadlocks 1F1B; it exists so that the verifier can show why.

When the compute graph is cyclic, ``lockstep`` falls back to ``naive``: the verifier then reports
the cycle with a witness.

An :class:`~ppir.ir.Overlap` step is atomic in both strategies: every message it consumes is
received before the step, every message it produces is sent after it (times are the step's: the
ASAP start of its first part and the finish of its last).
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, replace
from operator import itemgetter

from ppir.analysis.costs import Costs, costs_for
from ppir.analysis.timeline import Timeline, run
from ppir.ir import Action, Group, Item, OpKind, Schedule, deps, item_actions
from ppir.ir.graph import ProgramGraph, build_graph
from ppir.ir.shape import require_schedule

STRATEGIES = ("lockstep", "eager", "naive")
_KIND_ORDER = {OpKind.SEND_F: 0, OpKind.SEND_B: 1, OpKind.RECV_F: 2, OpKind.RECV_B: 3}


_first4 = itemgetter(0, 1, 2, 3)
"""An entry's sort key, the order of comm actions inside one group: by peer rank, then SEND_F,
SEND_B, RECV_F, RECV_B, then stage and microbatch (both ends of a channel agree on it)."""


@dataclass(frozen=True)
class LowerComms:
    """Insert communication; leaves a valid lowered schedule (see module docstring).
    ``costs`` are the planning costs (default: the textbook costs of ``CostConfig()``)."""

    strategy: str = "lockstep"
    costs: Costs | None = None
    name = "lower-comms"

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(
                f"unknown lowering strategy {self.strategy!r} (strategies: {', '.join(STRATEGIES)})"
            )
        if self.costs is not None and not isinstance(self.costs, Costs):
            raise TypeError(
                "LowerComms' costs are a schedule's Costs (ppir.analysis.costs.costs_for("
                f"schedule, config) makes them), got {type(self.costs).__name__} {self.costs!r:.40}"
            )

    def apply(
        self,
        schedule: Schedule,
        graph: ProgramGraph | None = None,
        timeline: Timeline | None = None,
    ) -> Schedule:
        """``graph``: the compute-only graph of ``schedule``, when the caller has built it;
        ``timeline``: a run of that graph, used in place of the planning run when its costs
        equal the planning costs (:func:`ppir.analysis.timeline.run` is a function of the graph
        and the costs: the same run)."""
        require_schedule(schedule, "LowerComms.apply")
        base = schedule if not schedule.is_lowered else schedule.compute_only()
        if self.strategy == "naive":
            return _lower_naive(base)
        costs = (self.costs or costs_for(base)).for_planning()
        if self.strategy == "lockstep":
            costs = replace(costs, intra=0, inter=0, pairs=())
        usable = graph is not None and graph.schedule is schedule and not graph.lowered
        g = graph if usable else build_graph(base)
        same = timeline is not None and timeline.graph is g and timeline.costs == costs
        tl = timeline if same else run(g, costs)
        if not tl.complete:  # a cyclic compute order: the verifier shows the cycle
            return _lower_naive(base)
        starts = [[tl.start[v] for v in order] for order in g.rank_nodes]
        ends = [[tl.finish[v] for v in order] for order in g.rank_nodes]
        if self.strategy == "eager":
            comms = _exchanges(g, ends, lambda r, t, recv, dst: t)
            return _place_groups(base, comms, ends, before_start=False)

        first_op, serves, op_item, op_rank = g.first.getter(), deps.SERVES, g.op_item, g.op_rank

        def meeting(r: int, t, recv: Action, dst: int):
            c = None  # the consumer of what recv delivers (deps.served_keys(recv))
            for k in serves[recv.kind]:
                c = first_op(recv.stage, k, recv.mb)
                if c is not None:
                    break
            hi = starts[dst][op_item[c]] if c is not None and op_rank[c] == dst else None
            return _meeting_time(t, hi, (starts[r], ends[r]), (starts[dst], ends[dst]))

        return _place_groups(base, _exchanges(g, ends, meeting), starts, before_start=True)


def _exchanges(g: ProgramGraph, ends: list[list], when) -> list[dict]:
    """Per rank, {exchange time: [SEND/RECV actions]} for every cross-rank message; the time is
    ``when(src rank, producer item's finish, recv, dst rank)``, the same on both ranks."""
    s = g.schedule
    place = s.placement
    order = _KIND_ORDER
    comms: list[dict[int, list]] = [{} for _ in range(s.ranks)]
    op_rank, op_item = g.op_rank, g.op_item
    for o, msg in enumerate(deps.outgoing_messages(place, g.ops, s.pipelines)):
        if msg is None:
            continue
        a = g.ops[o]
        r, dst = op_rank[o], place[msg.dst]
        send, recv = deps.send_action(msg, a.span), deps.recv_action(msg, a.span)
        tau = when(r, ends[r][op_item[o]], recv, dst)
        # each entry carries its in-group sort key (peer, kind, stage, mb): see _sort_key
        mine, theirs = comms[r].get(tau), comms[dst].get(tau)
        if mine is None:
            mine = comms[r][tau] = []
        if theirs is None:
            theirs = comms[dst][tau] = []
        mine.append((dst, order[send.kind], send.stage, send.mb, send))
        theirs.append((r, order[recv.kind], recv.stage, recv.mb, recv))
    return comms


def _place_groups(
    s: Schedule, comms: list[dict], times_of_items: list[list], before_start: bool
) -> Schedule:
    """One group per (rank, time t), in time order, each before the first program item with
    start >= t (``before_start``) or with finish > t (otherwise)."""
    programs = []

    def group(entries: list) -> Group:
        if len(entries) > 1:
            entries.sort(key=_first4)
        return Group(tuple([e[4] for e in entries]))

    for r in range(s.ranks):
        times = sorted(comms[r])
        out: list[Item] = []
        ti = 0
        for a, when in zip(s.programs[r], times_of_items[r]):
            while ti < len(times) and (times[ti] <= when if before_start else times[ti] < when):
                out.append(group(comms[r][times[ti]]))
                ti += 1
            out.append(a)
        for t in times[ti:]:
            out.append(group(comms[r][t]))
        programs.append(tuple(out))
    return s.replace_programs(tuple(programs))


def _meeting_time(lo: int, hi: int | None, a: tuple[list, list], b: tuple[list, list]) -> int:
    """The earliest time in [lo, hi] at which neither rank is in the middle of a compute op.

    ``a`` and ``b`` are the (starts, finishes) of each rank's ops, both ascending.  Exchanging
    at such a time makes neither rank wait for the other.  When there is none, ``lo`` (the
    producer's finish) is used: still deadlock-free, with some waiting.
    """
    t = lo
    while hi is None or t <= hi:
        t2 = t  # t, or the finish of the op running at t on either rank (start < t < finish)
        for starts, finishes in (a, b):
            i = bisect_left(starts, t2) - 1
            if i >= 0 and finishes[i] > t2:
                t2 = finishes[i]
        if t2 == t:
            return t
        t = t2
    return lo


def _lower_naive(s: Schedule) -> Schedule:
    """Each RECV right before its consumer, each SEND right after its producer, all alone."""
    place = s.placement
    recv_before: dict[tuple, list[Action]] = {}
    for r in range(s.ranks):
        for a in s.compute_actions(r):
            msg = deps.outgoing_message(place, a, s.pipelines)
            if msg:
                recv_before.setdefault((place[msg.dst], msg.dst, msg.mb, msg.grad), []).append(
                    deps.recv_action(msg, a.span)
                )
    programs = []
    for r in range(s.ranks):
        out: list[Item] = []
        for it in s.programs[r]:
            acts = item_actions(it)
            for a in acts:
                msg = deps.message_in(a, s.stages, s.pipelines)
                if msg is not None:
                    out.extend(recv_before.pop((r, msg.dst, msg.mb, msg.grad), []))
            out.append(it)
            for a in acts:
                msg = deps.outgoing_message(place, a, s.pipelines)
                if msg:
                    out.append(deps.send_action(msg, a.span))
        programs.append(out)
    for (r, *_), recvs in recv_before.items():  # consumers that are missing: recv at the end
        programs[r].extend(recvs)
    return s.replace_programs(tuple(tuple(p) for p in programs))
