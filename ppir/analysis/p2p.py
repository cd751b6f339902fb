"""Point-to-point traffic of a schedule, computed from its IR: the messages of one step per
rank and direction, and the same-rank stage hand-offs that are not messages (a V placement's
fold).  Read from the program's graph and :mod:`ppir.ir.deps`."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from ppir.analysis.models import ModelShape
from ppir.ir import OpKind, Schedule, deps
from ppir.ir.graph import ProgramGraph, build_graph


@dataclass(frozen=True)
class RankP2P:
    rank: int
    sends_forward: int
    sends_backward: int
    recvs_forward: int
    recvs_backward: int
    bytes_sent: Fraction | None = None


@dataclass(frozen=True)
class P2PReport:
    """Messages of one step (all microbatches).  Same-rank stage hand-offs are ``local_*``, not
    messages.  ``*_per_microbatch`` divide the step totals by the step's microbatches, every
    pipeline's together (16 for ``dualpipe -D M=16``, whose two pipelines run 8 each)."""

    microbatches: int
    forward_messages: int
    backward_messages: int
    local_forward: int
    local_backward: int
    per_rank: tuple[RankP2P, ...]
    message_bytes: Fraction | None = None

    @property
    def forward_per_microbatch(self) -> Fraction:
        return Fraction(self.forward_messages, self.microbatches)

    @property
    def backward_per_microbatch(self) -> Fraction:
        return Fraction(self.backward_messages, self.microbatches)

    @property
    def bytes_per_step(self) -> Fraction | None:
        if self.message_bytes is None:
            return None
        return (self.forward_messages + self.backward_messages) * self.message_bytes


def analyze_p2p(program: Schedule | ProgramGraph, model: ModelShape | None = None) -> P2PReport:
    """Count the SEND/RECV ops of the program's graph (for a compute-only program: the messages
    its cross-rank data edges need, one SEND and one RECV each, which is what every lowering
    inserts) and the same-rank hand-offs (an output that stays on its rank: a V-placement fold).
    Linear in the number of ops."""
    g = program if isinstance(program, ProgramGraph) else build_graph(program)
    pl = g.schedule.placement
    mb = model.message_bytes() if model is not None else None
    rows = []
    lf = lb = 0
    for r in range(g.schedule.ranks):
        c = dict.fromkeys(OpKind, 0)
        for a in g.ops[g.rank_start[r] : g.rank_start[r + 1]]:
            c[a.kind] += 1
            if not a.kind.is_compute:
                continue
            msg = deps.message_out(a, len(pl), g.schedule.pipelines)
            if msg is not None and not deps.crosses_ranks(pl, msg):
                lf, lb = lf + (not msg.grad), lb + msg.grad
            if not g.lowered:  # the messages a lowering would insert for this op
                if msg is not None and deps.crosses_ranks(pl, msg):
                    c[deps.send_action(msg).kind] += 1
                back = deps.message_in(a, len(pl), g.schedule.pipelines)
                if back is not None and deps.crosses_ranks(pl, back):
                    c[deps.recv_action(back).kind] += 1
        sent = c[OpKind.SEND_F] + c[OpKind.SEND_B]
        rows.append(
            RankP2P(
                r,
                c[OpKind.SEND_F],
                c[OpKind.SEND_B],
                c[OpKind.RECV_F],
                c[OpKind.RECV_B],
                sent * mb if mb is not None else None,
            )
        )
    return P2PReport(
        g.schedule.microbatches * g.schedule.pipelines,  # the step's, every pipeline's
        sum(x.sends_forward for x in rows),
        sum(x.sends_backward for x in rows),
        lf,
        lb,
        tuple(rows),
        mb,
    )
