"""How often a loop is sure to run, known when it is entered: what lets the step and op caps
(``--max-steps``, ``--max-ops``) refuse a nest of loops before running it.

A loop is *repeated* by a loop around it (or by the program block, once per rank) when it runs
on every iteration of that loop -- a statement of its body, not under an ``if`` -- with bounds
that cannot change while that loop runs: they name nothing the loop binds (its variable, or a
``let``, ``def`` or loop variable anywhere in its body) and call only the builtins that read the
placement (fixed while programs expand) and pure top-level functions, not ``pending_w``.  Then
each iteration left of the loops around it, the current one included, runs it again with the
same trip count, so the product of those counts is a lower bound on how often it runs: a cap
checked against it never refuses a schedule that stays under the cap.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ppir.diagnostics import error
from ppir.frontend import ast as A
from ppir.frontend.scope import Function, pure_callee, values_text
from ppir.ir import Span


@dataclass(eq=False)
class Frame:
    """A loop (or the program block, ``var`` None) around the statements being compiled.
    ``binds``: the names it binds; ``levels``: how many frames around it repeat it;
    ``stop``: its stop value (the number of ranks for the program block), set on entry."""

    var: str | None
    binds: frozenset[str]
    levels: int = 0
    stop: list[int] = field(default_factory=lambda: [0])


def loop_frame(st: A.For, levels: int) -> Frame:
    return Frame(st.var, frozenset({st.var} | A.block_binders(st.body)), levels)


def program_frame(block: A.ProgramBlock) -> Frame:
    return Frame(None, frozenset({block.rank_var} | A.block_binders(block.body)))


def stable(e: A.Expr, binds: frozenset[str], pure) -> bool:
    """True when ``e`` names nothing in ``binds`` and calls only stable builtins or functions
    ``pure(name)`` says are pure top-level ones."""
    if isinstance(e, A.Name):
        return e.name not in binds
    if isinstance(e, A.BinOp):
        return stable(e.left, binds, pure) and stable(e.right, binds, pure)
    if isinstance(e, A.UnaryOp):
        return stable(e.operand, binds, pure)
    if isinstance(e, A.Call):
        if e.func in binds or not pure_callee(e.func, pure):
            return False
        return all(stable(a, binds, pure) for a in e.args)
    return True


def repeat_levels(st: A.For, frames: list[Frame | None], pure) -> int:
    """How many frames around ``st`` (``frames``, innermost last; None for an ``if``) repeat
    it: each must see ``st``'s bounds stable, and the loop just around ``st`` must itself be
    repeated by all but the first of them (so that each of their iterations runs it)."""
    n = 0
    for f in reversed(frames):
        if f is None or (n > 0 and frames[-1].levels < n):
            break
        if not (stable(st.start, f.binds, pure) and stable(st.stop, f.binds, pure)):
            break
        n += 1
    return n


def entries(frames: list[Frame], scope, rank: int | None) -> int:
    """How often, at least, a loop repeated by ``frames`` (innermost first) runs from now on:
    the product of the iterations left of each, the current one included.  ``scope`` is the
    one the loop is entered in, the current iteration's of ``frames[0]`` (whose parent is the
    one of the next frame, as a repeated loop is a statement of its body)."""
    mult = 1
    for f in frames:
        if f.var is None:  # the program block: once per rank left
            mult *= f.stop[0] - rank
        else:
            mult *= f.stop[0] - scope.vars[f.var]
            scope = scope.parent
    return mult


def check_nest(ex, span, n: int, per_trip: int, mult: int) -> None:
    """Refuse a loop of ``n`` iterations (``per_trip`` ops each) sure to run ``mult`` times
    when that is sure to exceed ``ex``'s step or op cap (its own first ``n`` steps already
    counted)."""
    again = f", each of the {mult:,} times it is sure to be entered" if mult > 1 else ""
    if ex.steps + n * (mult - 1) > ex.max_steps:
        raise error(
            "runaway-loop",
            f"loops would run more than {ex.max_steps:,} iterations in total: this loop runs "
            f"{n:,}{again}",
            span,
            hints=["check the loop bounds; the cap is --max-steps"],
        )
    if ex.ops + per_trip * n * mult > ex.max_ops:
        ops = "1 op" if per_trip == 1 else f"{per_trip} ops"
        raise error(
            "op-limit",
            f"expansion would produce more than {ex.max_ops:,} ops: this loop emits {ops} "
            f"on each of its {n:,} iterations{again}",
            span,
            hints=["a runaway loop? the cap is --max-ops"],
        )


def ops_per_trip(body) -> int:
    """Ops every trip of a loop with this body emits for sure: its op statements (FB: two)."""
    return sum(2 if st.op == "FB" else 1 for st in body if isinstance(st, A.OpStmt))


def op_letters(body) -> str:
    """The op letters (of F, B, I, W) the statements ``body`` can emit, nested blocks included."""
    found: set[str] = set()
    for st in body:
        if isinstance(st, A.OpStmt):
            found.update(st.op)  # FB: F and B
        elif isinstance(st, A.For):
            found.update(op_letters(st.body))
        elif isinstance(st, A.If):
            found.update(op_letters(st.then) + op_letters(st.orelse))
    return "".join(k for k in "FBIW" if k in found)


def empty_loop(st: A.For, emits: str, rank: int, scope, a: int, b: int) -> tuple:
    """A loop that would emit ``emits`` but runs zero times on ``rank`` (range ``a .. b``):
    ``(rank, emits, its range's span, why)``, for a note where one of those ops is missing
    (:attr:`ppir.ir.Schedule.empty_loops`).  An empty range is no error in itself: 1F1B's
    warm-up loop is empty on the last rank."""
    lo, hi = st.start.span, st.stop.span
    span = Span(lo.path, lo.line, lo.col, hi.end_line, hi.end_col, lo.source)
    what = " and ".join(emits) if len(emits) < 3 else ", ".join(emits[:-1]) + " and " + emits[-1]
    names = A.names_in(st.start) | A.names_in(st.stop)
    why = (
        f"this loop would emit {what} but its range is empty on rank {rank}: "
        f"{a} .. {b}{values_text(scope, names)}"
    )
    return (rank, emits, span, why)


def pure_top(top, inner: frozenset[str]):
    """``pure(name)``: True for a pure (memoized) function the top level binds for good."""

    def pure(name: str) -> bool:
        fn = top.vars.get(name) if top is not None else None
        return isinstance(fn, Function) and fn.memo is not None and name not in inner

    return pure
