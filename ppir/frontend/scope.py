"""Name scopes and functions of the expansion interpreter (:mod:`ppir.frontend.interpreter`):
a :class:`Scope` binds each name once; a :class:`Function` is a ``def``, memoized when pure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ppir.frontend import ast as A
from ppir.ir import Span


class Scope:
    __slots__ = ("vars", "parent")

    def __init__(self, parent: Scope | None = None):
        self.vars: dict[str, object] = {}
        self.parent = parent

    def lookup(self, name: str):
        s = self
        while s is not None:
            v = s.vars.get(name, MISSING)
            if v is not MISSING:
                return v
            s = s.parent
        return MISSING

    def visible_names(self) -> set[str]:
        out: set[str] = set()
        s = self
        while s is not None:
            out.update(s.vars)
            s = s.parent
        return out

    def values_hint(self, limit: int = 10) -> list[str]:
        """A hint naming the values an expression can read here, innermost first (a loop's
        variable, then the rank's, then the parameters), for an undefined name that is close
        to none of them; [] when there are none."""
        names: list[str] = []
        s = self
        while s is not None:
            names += [k for k, v in s.vars.items() if v.__class__ is int and k.isidentifier()]
            s = s.parent
        names = list(dict.fromkeys(names))  # a name bound again further out: its inner one
        if not names:
            return []
        more = f", ... ({len(names) - limit} more)" if len(names) > limit else ""
        return [f"the values visible here: {', '.join(names[:limit])}{more}"]


MISSING = object()


def values_text(scope: Scope, names) -> str:
    """`` (with M = 4, r = 0)``: the values ``scope`` gives ``names`` (functions and unbound
    names left out), sorted by name, for a message about an expression; empty when none."""
    vals = []
    for n in sorted(names):
        v = scope.lookup(n)
        if v is not MISSING and not isinstance(v, Function):
            vals.append(f"{n} = {v}")
    return f" (with {', '.join(vals)})" if vals else ""


def value_text(e: A.Expr, value: int, scope: Scope) -> str:
    """``e``'s ``value`` for a message that quotes it: ``P - 4 = 0 (with P = 4)``, ``P = 0``
    (:func:`ppir.frontend.ast.value_names`); a literal's alone, ``0``."""
    if isinstance(e, A.IntLit):
        return str(value)
    return f"{A.short_text(e)} = {value}{values_text(scope, A.value_names(e))}"


@dataclass
class Function:
    """A ``def``.  ``memo`` (results by arguments) is a dict when the function is *pure*:
    defined at the top level, whose scope binds each name once and has no scope between it
    and the function's parameters, so every name in the body always means the same value;
    calling only ``min``, ``max``, ``abs``, the builtins that read the placement (``stage``,
    ``chunks``, ``rank_of``: every memo is cleared when a declaration changes the placement;
    :func:`ppir.frontend.declarations.resolve_placement`) and pure functions defined before
    it -- not ``pending_w``.  None otherwise: computed at each call."""

    name: str
    params: tuple[str, ...]
    body: Callable
    scope: Scope
    span: Span
    memo: dict | None = None


PURE_BUILTINS = frozenset(("min", "max", "abs", "stage", "chunks", "rank_of"))
IMPURE_BUILTINS = frozenset(("pending_w",))  # reads the rank's pending weight passes


def pure_callee(name: str, pure_def) -> bool:
    """Whether a call of ``name`` is pure: a pure builtin, or (``pure_def(name)``) a pure
    function; never ``pending_w`` (no ``def`` takes a builtin's name:
    :mod:`ppir.frontend.reserved`)."""
    return name in PURE_BUILTINS or pure_def(name)


def pure_calls(e: A.Expr, params: tuple[str, ...], scope: Scope) -> bool:
    """True when every call in ``e`` is to a pure builtin or to a pure function of ``scope``
    (see :class:`Function`)."""
    if isinstance(e, A.Call):
        if e.func in params:
            return False
        if not pure_callee(e.func, lambda n: _memoized(scope.vars.get(n))):
            return False
        return all(pure_calls(a, params, scope) for a in e.args)
    if isinstance(e, A.BinOp):
        return pure_calls(e.left, params, scope) and pure_calls(e.right, params, scope)
    if isinstance(e, A.UnaryOp):
        return pure_calls(e.operand, params, scope)
    return True


def _memoized(fn) -> bool:
    return isinstance(fn, Function) and fn.memo is not None
