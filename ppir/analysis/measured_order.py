"""What an op costs by where its input was made: the ``F_near`` ... ``I_far`` lists of a
``[measured]`` table (no torch needed).

``ppir profile`` times each piece's F, B and I in two positions (:mod:`ppir.profile.orders`):
*near*, its input made on the same rank (by the piece before's F, or the piece after's B or I),
and *far*, its input received from another rank (or the data, or the loss: the first piece's F
and the last piece's B and I, whose near entries repeat their far ones).  A schedule's stage
costs the near time where the value it consumes is made on its own rank and the far time where
it crosses ranks (:func:`stage_rows`): interleaved 1F1B's stages all take far times, a V
placement's fold near ones.  On the accuracy bench an op took 0.63-1.23x its far time near,
mostly under 1 (docs/cost-model.md, "The order ops run in").
"""

from __future__ import annotations

from ppir.ir import Action, OpKind, deps

ORDER_KEYS = ("F_near", "F_far", "B_near", "B_far", "I_near", "I_far")
SHARE_KEYS = ("near_share", "far_share")
"""Optional (CPU, a thread per rank): per piece, the processor share of its ops in each
position, which :func:`processor_times` takes where ranks share processors."""
KINDS = {"F": OpKind.F, "B": OpKind.B, "I": OpKind.I}


def fit_order(order: tuple, k: int, stages: int) -> tuple:
    """``order`` (per measured piece) for ``stages`` stages of ``k`` consecutive pieces each:
    the pieces inside a stage run right after one another (near), so a stage's time in either
    position is the position's time of the piece its input enters (the first for F, the last
    for B and I) plus the near times of the others; stage 0's I is piece 0's alone (its input
    needs no gradient: the runtime's merged I computes nothing, as
    :meth:`~ppir.analysis.measured.MeasuredCosts.fit` has it).  The shares (``SHARE_KEYS``) are
    dropped: :func:`processor_times` applies them before a fit."""
    if not order or k == 1:
        return order
    t = dict(order)
    out = {}
    for kind, op in KINDS.items():
        near = t[f"{kind}_near"]
        first = deps.input_side(op) < 0  # its input enters the stage's first piece, else the last
        for where in ("near", "far"):
            xs = t[f"{kind}_{where}"]
            got = []
            for s in range(stages):
                part = range(s * k, s * k + k)
                edge = part[0] if first else part[-1]
                got.append(xs[edge] + sum(near[j] for j in part if j != edge))
            if kind == "I":
                got[0] = xs[0]
            out[f"{kind}_{where}"] = tuple(got)
    return tuple((key, out[key]) for key in ORDER_KEYS)


def processor_times(order: tuple, share: tuple) -> tuple:
    """``order``'s times as processor time, for ranks that share processors
    (:meth:`~ppir.analysis.measured.MeasuredCosts.op_times`): each times its position's share
    (``near_share``, ``far_share``), or its piece's ``share`` where the file has none; the
    orders ran their ranks unlike 1F1B (looped: more messages; shifted: one rank a piece
    short), so their ops waited for a processor for other parts of their time."""
    t = dict(order)
    out = []
    for k in ORDER_KEYS:
        if k in t:
            f = t.get(f"{k.split('_')[1]}_share") or share
            out.append((k, tuple(x * y for x, y in zip(t[k], f))))
    return tuple(out)


def stage_rows(order: tuple, at: list[int], schedule) -> list[dict]:
    """Per stage of ``schedule``, running model stages ``at`` (``order`` fitted to the model's
    stages): ``{OpKind: seconds}`` of its F, B and I, each the near time where the value it
    consumes is made on its own rank (the stage before, or after, on the same rank: a V fold,
    every stage of one rank) and the far time where it crosses ranks or comes from the data or
    the loss (:func:`ppir.ir.deps.message_in`, :func:`ppir.ir.deps.crosses_ranks`)."""
    t = dict(order)
    S, pipes, place = schedule.stages, schedule.pipelines, schedule.placement
    rows = []
    for s, j in enumerate(at):
        row = {}
        for kind, op in KINDS.items():
            msg = deps.message_in(Action(s, op, 0), S, pipes)
            where = "far" if msg is None or deps.crosses_ranks(place, msg) else "near"
            row[op] = t[f"{kind}_{where}"][j]
        rows.append(row)
    return rows
