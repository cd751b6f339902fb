"""Top-level declarations: where stages live (``placement``) and the size caps on ranks and
stages, shared by ``program`` expansion and literal ``rank N:`` files."""

from __future__ import annotations

from ppir.diagnostics import error
from ppir.frontend.interpreter import Interpreter
from ppir.ir import Span, looped_placement, vshape_placement


def resolve_placement(ex: Interpreter, decls: dict, final: bool = False) -> None:
    """Compute the placement as soon as ranks (and stages/placement, or their defaults) are known.

    Defaults: stages = ranks, placement = looped.  Called after each declaration so that
    ``stage()``/``chunks()`` can be used by later top-level lets; ``final`` forces defaults.
    """
    if "ranks" not in decls:
        return
    ranks, rspan = decls["ranks"]
    if ranks < 1:
        raise error("bad-declaration", f"ranks must be at least 1, got {ranks}", rspan)
    stages, sspan = decls.get("stages", (ranks, rspan))
    if stages < 1:
        raise error("bad-declaration", f"stages must be at least 1, got {stages}", sspan)
    check_size("ranks", ranks, ex.max_steps, rspan)
    check_size("stages", stages, ex.max_steps, sspan)
    kind, pspan = decls.get("placement", ("looped", rspan))
    if isinstance(kind, tuple):
        if len(kind) != stages:
            raise error(
                "bad-placement",
                f"the placement lists {len(kind)} rank(s) but there are {stages} stages",
                pspan,
                hints=["entry s is the rank that holds stage s"],
            )
        for s, r in enumerate(kind):
            if not 0 <= r < ranks:
                raise error(
                    "bad-placement",
                    f"placement puts stage {s} on rank {r}, out of range 0..{ranks - 1}",
                    pspan,
                )
        placement = tuple(kind)
    else:
        if stages % ranks:
            if not final:
                return  # a later 'placement' may fix it; 'final' reports it
            raise error(
                "bad-placement",
                f"'{kind}' placement needs stages ({stages}) divisible by ranks ({ranks})",
                decls.get("stages", decls["ranks"])[1],
            )
        placement = (looped_placement if kind == "looped" else vshape_placement)(ranks, stages)
    held = [[] for _ in range(ranks)]
    for s, r in enumerate(placement):
        held[r].append(s)
    if final:
        for r, st in enumerate(held):
            if not st:
                raise error("bad-placement", f"rank {r} holds no stage", pspan)
    ex.placement = placement
    ex.stages_of = tuple(tuple(x) for x in held)


def check_size(what: str, n: int, cap: int, span: Span | None) -> None:
    """Ranks and stages are looped over while expanding: they count against --max-steps."""
    if n > cap:
        raise error(
            "too-large",
            f"{what} = {n:,} exceeds the expansion cap of {cap:,}",
            span,
            hints=["the cap is --max-steps"],
        )
