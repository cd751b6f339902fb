"""The critical path as the estimator reports it: the compute ops along the longest path of
the timed graph (:meth:`~ppir.analysis.timeline.Timeline.critical_path`, which holds the comm
nodes too) and what links two of them through a third rank, which a reader would not expect.

``1f1b -D P=4 -D M=8`` with llama3-8b's costs: rank 1 posts its recv of F1 before its send
of F0's output, and its transfers complete in the order posted (fifo progress; a group of
them completes as a unit), so ``F0@s2@r2`` waits for ``F1@s0@r0``, through rank 1's
``1RECV_F1 1SEND_F0``.  Printed bare, ``F1@s0@r0 -> F0@s2@r2`` looked as if it skipped
stage 1; it prints ``F1@s0@r0 -> [via r1: 1RECV_F1 1SEND_F0] -> F0@s2@r2``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ppir.analysis.timeline import Timeline
from ppir.ir.graph import COMPUTE


@dataclass(frozen=True)
class PathLink:
    """Between critical-path ops ``before - 1`` and ``before``, the path runs through the
    communication ops ``ops`` (their text, in path order) of ``rank``, a rank neither of the
    two ops runs on."""

    before: int
    rank: int
    ops: tuple[str, ...]

    def label(self) -> str:
        """``[via r1: 1RECV_F1 1SEND_F0]``, as the text summary prints it."""
        return f"[via r{self.rank}: {' '.join(self.ops)}]"

    def to_json(self) -> dict:
        return {"before": self.before, "rank": self.rank, "ops": list(self.ops)}


LEGEND = (
    "[via rN: ...]: rank N's transfers on the path, in order (they complete in the order "
    "posted, a group as a unit)"
)


def path_ops(tl: Timeline, node_ops: Callable[[int], list]) -> tuple[tuple, tuple[PathLink, ...]]:
    """(the compute ops along ``tl``'s critical path, each compute node's from
    ``node_ops(v)``; a :class:`PathLink` per other rank whose comm ops lie between two of
    them), in path order."""
    g = tl.graph
    ops: list = []
    links: list[PathLink] = []
    between: list[int] = []  # the comm ops of the nodes since the last compute node
    for v in tl.critical_path():
        if g.kind[v] != COMPUTE:
            between += g.node_ops(v)  # a post's or done's unit, a message's send and recv
            continue
        if ops:
            ends, via = {ops[-1].rank, g.rank[v]}, {}
            for o in dict.fromkeys(between):
                if g.op_rank[o] not in ends:
                    via.setdefault(g.op_rank[o], []).append(str(g.ops[o]))
            links += [PathLink(len(ops), r, tuple(texts)) for r, texts in via.items()]
        between = []
        ops.extend(node_ops(v))
    return tuple(ops), tuple(links)
