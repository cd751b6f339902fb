"""The profile's two further orders: where an op's input is made changes what it costs.

The profile's 1F1B chains ``k`` consecutive pieces on each rank: the F of a piece inside a
rank's chain takes its input from the piece before on the same rank (and a B or I its gradient
from the piece after), while a rank's first piece receives its input from another rank.  On the
accuracy bench an op whose input was made on its rank took 0.63-1.23x, mostly under 1, the
time it took with its input from another rank (docs/cost-model.md, "The order ops run in").
So each piece's F, B and I are timed in both positions (:func:`ppir.profile.samples.position`;
``F_near``, ``F_far`` ... in the cost file), by two more orders over the same ranks, after
1F1B:

``looped``
    interleaved 1F1B with every piece a stage of its own, placed round-robin (v = k): every
    boundary crosses ranks, and every rank holds ``k`` pieces, as busy as in 1F1B; it gives the
    far times.
``shifted``
    1F1B with the rank cuts moved one piece earlier (rank 0 holds ``k - 1`` pieces, the last
    rank ``k + 1``): each boundary 1F1B sends across stays on a rank; it gives the near times
    of the pieces 1F1B times only far, and no far times (on a rank a piece short, ops ran
    long after idle waits: docs/cost-model.md).

Both need two ranks or more, two pieces per rank or more, and a microbatch count that
interleaved 1F1B takes (:func:`orders`); else the cost file has no near and far times.
"""

from __future__ import annotations

ORDERS = ("looped", "shifted")
GIVES = {"looped": "far", "shifted": "near"}
"""The position each order times (its samples in the other position are not kept)."""
ORDER_KINDS = (False, True)
"""An order's timed steps in turn: full backwards (F and B), then split ones (I then W)."""


def orders(world: int, pieces: int, M: int) -> tuple[str, ...]:
    """The orders to run for ``pieces`` pieces on ``world`` ranks with ``M`` microbatches: both,
    or none where :func:`why_none` says why (the shifted order alone gives near times without
    the far ones to set them against)."""
    return () if why_none(world, pieces, M) else ORDERS


def why_none(world: int, pieces: int, M: int) -> str:
    """Why the further orders cannot run ('' when they can): one rank, fewer than two pieces
    per rank, or an ``M`` interleaved 1F1B refuses (with ``world`` microbatches per group, M
    must be a multiple of ``world``: Megatron's rule)."""
    from ppir.diagnostics import PpirError
    from ppir.frontend.loader import load_schedule

    if world < 2:
        return "one rank receives nothing from another"
    if pieces // world < 2:
        return f"--stages {pieces} gives each of the {world} ranks one piece (try {2 * world})"
    try:
        load_schedule(*builtin("looped", world, pieces, M))
    except PpirError:
        return (
            f"the looped order (interleaved 1F1B) needs --microbatches a multiple of the "
            f"{world} ranks, not {M}"
        )
    return ""


def cuts(name: str, world: int, pieces: int) -> list[int]:
    """The first piece of each of the order's stages, then ``pieces``."""
    if name == "looped":
        return list(range(pieces + 1))
    k = pieces // world
    return [0, *(r * k - 1 for r in range(1, world)), pieces]


def order_steps(steps: int) -> int:
    """Timed steps per order for a profile of ``steps`` timed steps: one of each kind per six
    (at least one of each)."""
    return len(ORDER_KINDS) * max(1, steps // 6)


def builtin(name: str, world: int, pieces: int, M: int) -> tuple[str, dict]:
    """(the built-in schedule, its parameters) the order ``name`` runs."""
    if name == "looped":
        return "interleaved_1f1b", {"P": world, "M": M, "v": pieces // world}
    return "1f1b", {"P": world, "M": M}


def program(schedule: str, params: dict, rank: int):
    """(built-in ``schedule`` at ``params``, this rank's program), compiled as ``ppir launch``
    runs it: the 1F1B of the profile's main steps, and each order's."""
    from ppir.frontend.loader import load_schedule
    from ppir.pipeline import compile

    s = compile(load_schedule(schedule, params)).program
    return s, s.programs[rank]


def rank_pieces(placement, cuts: list[int], rank: int) -> dict[int, range]:
    """Per stage that ``rank`` holds (by ``placement``), in stage order, its pieces'
    ``build_stage`` indices (stage ``s`` chains pieces ``cuts[s]`` up to ``cuts[s + 1]``)."""
    spans = zip(cuts, cuts[1:])
    return {s: range(a, b) for s, (a, b) in enumerate(spans) if placement[s] == rank}


class Order:
    """One order of a profile's ranks: this rank's pieces (``build(j)``, the model's
    ``build_stage(j, pieces)``) run by a runner that times ops by position only."""

    def __init__(self, prof, build, name: str):
        from ppir.profile.boundaries import propagate_shapes
        from ppir.profile.worker import Runner

        main = prof.run
        n = main.world * len(main.pieces)
        self.name, c = name, cuts(name, main.world, n)
        schedule, prog = program(*builtin(name, main.world, n, main.M), main.rank)
        held = rank_pieces(schedule.placement, c, main.rank).values()
        pieces = [build(j) for js in held for j in js]
        self.run = Runner(
            main.rank, main.world, pieces, main.loss_fn, prog, schedule, main.M, main.device,
            cuts=c, main=False,
        )  # fmt: skip
        self.run.timeout_s = main.timeout_s
        propagate_shapes(self.run, prof.inputs[0], main.device)

    def step(self, prof, i: int, record: bool = True) -> None:
        """This order's ``i``-th step (of kind ``ORDER_KINDS[i % 2]``)."""
        kind = ORDER_KINDS[i % len(ORDER_KINDS)]
        self.run.step(prof.inputs, prof.targets, split=kind, record=record)

    def positions(self) -> list[tuple[int, dict]]:
        """(piece, its samples in the position this order gives, and their processor and wall
        seconds) for each of the rank's pieces."""
        where = GIVES[self.name]
        keys = [f"{k}_{where}" for k in "FBI"] + [f"{where}_cpu", f"{where}_wall"]
        return [
            (self.run.index[j], {k: getattr(s, k) for k in keys})
            for j, s in enumerate(self.run.samples)
        ]
