"""Top-level declarations: where stages live (``placement``), shared by ``program`` expansion
and literal ``rank N:`` files; the size caps it applies live in :mod:`ppir.frontend.limits`."""

from __future__ import annotations

from ppir.diagnostics import count, error
from ppir.frontend.interpreter import Interpreter
from ppir.frontend.limits import check_size, check_work
from ppir.frontend.scope import value_text
from ppir.ir import looped_placement, vshape_placement


def resolve_placement(ex: Interpreter, decls: dict, final: bool = False) -> None:
    """Compute the placement as soon as ranks (and stages/placement, or their defaults) are known.

    Defaults: stages = ranks, placement = looped.  Called after each declaration so that
    ``stage()``/``chunks()`` can be used by later top-level lets; ``final`` forces defaults.
    """
    if "ranks" not in decls:
        return
    ranks, rspan = decls["ranks"]
    at_least_one(ex, decls, "ranks")
    stages, sspan = decls.get("stages", (ranks, rspan))
    at_least_one(ex, decls, "stages")
    check_size("ranks", ranks, ex.max_steps, rspan)
    check_size("stages", stages, ex.max_steps, sspan)
    check_work(2 * ranks, count(ranks, "rank"), ex.max_ops, rspan)  # each holds a stage
    check_work(2 * stages, count(stages, "stage"), ex.max_ops, sspan)
    kind, pspan = decls.get("placement", ("looped", rspan))
    if isinstance(kind, tuple):
        if len(kind) != stages:
            raise error(
                "bad-placement",
                f"the placement gives a rank for {count(len(kind), 'stage')}, "
                f"but the schedule has {count(stages, 'stage')}",
                pspan,
                hints=["entry s is the rank that holds stage s"],
            )
        entries = ex.decl_exprs.get("placement") or ()  # each entry's expression, at it
        for s, r in enumerate(kind):
            if not 0 <= r < ranks:
                e = entries[s] if len(entries) == len(kind) else None
                raise error(
                    "bad-placement",
                    f"placement puts stage {s} on rank "
                    f"{r if e is None else value_text(e, r, ex.top)}, out of range 0..{ranks - 1}",
                    pspan if e is None else e.span,
                )
        placement = tuple(kind)
    else:
        if stages % ranks:
            if not final:  # a later 'placement' may fix it; 'final' reports it
                ex.placement, ex.stages_of = None, ()  # not the one of the stages before
                for memo in ex.memos:
                    memo.clear()
                return
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
    if placement != ex.placement:  # what stage(), chunks() and rank_of() return changes
        for memo in ex.memos:
            memo.clear()
    ex.placement = placement
    ex.stages_of = tuple(tuple(x) for x in held)


def at_least_one(ex: Interpreter, decls: dict, what: str) -> None:
    """A ``bad-declaration`` error at the declaration of ``what`` (``ranks``, ``stages``,
    ``microbatches``) when it declares fewer than 1, naming what the number came from:
    ``ranks must be at least 1, got P = 0`` (:func:`declared_value`)."""
    if what in decls and decls[what][0] < 1:
        value, span = decls[what]
        got = declared_value(ex, what, value)
        raise error("bad-declaration", f"{what} must be at least 1, got {got}", span)


def declared_value(ex: Interpreter | None, what: str, value: int) -> str:
    """The value declared for ``what``, for a message: with the expression it came from and
    the values it read (``P - 4 = 0 (with P = 4)``) when ``ex`` expanded its declaration
    (:func:`ppir.frontend.scope.value_text`), else the number alone."""
    e = ex.decl_exprs.get(what) if ex is not None else None
    return str(value) if e is None else value_text(e, value, ex.top)


def resolve_pipelines(decls: dict, stages: int, ex: Interpreter | None = None) -> int:
    """The ``pipelines`` declaration (default 1): it must divide the stages into chains of at
    least one stage (``ex``, the interpreter that expanded the declarations, names what the
    number came from: :func:`declared_value`)."""
    if "pipelines" not in decls:
        return 1
    n, span = decls["pipelines"]
    if n < 1 or stages % n:
        got = declared_value(ex, "pipelines", n)
        raise error(
            "bad-declaration",
            f"pipelines must be at least 1 and divide the stages ({stages}), got {got}",
            span,
            hints=["each pipeline is stages / pipelines consecutive stages"],
        )
    return n
