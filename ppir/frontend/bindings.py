"""Where a .pps file binds its names, checked once after parsing, before anything runs.

A name is bound once wherever it is visible: a ``let``, a ``def`` and its parameters, a loop
variable, the rank variable, a pattern slot's microbatch variable and the names a greedy
``priority`` sees (:data:`ppir.frontend.ast.PRIORITY_NAMES`) cannot take a name already bound
in their own scope or visible there from an enclosing one.  Scopes side by side may reuse a
name: two loops one after the other may both count with ``m``.  Every breach is the one
``rebinding`` error, located at the new binding, with a note at the binding it would hide.

What a scope sees of the one around it is what that one has bound when it runs: a loop or an
``if`` block sees the bindings before it; a function, called at any time after its ``def``,
sees its whole defining scope; a program (and a greedy priority) runs after everything around
it, so it sees every top-level name (the schedule parameters first) wherever it is written.
"""

from __future__ import annotations

from dataclasses import dataclass

from ppir.diagnostics import Note, PpirError, error
from ppir.frontend import ast as A
from ppir.ir import Span

_RENAME = "a name is bound once where it is visible (blocks side by side may reuse one)"
_HINTS = {
    "let": "'let' binds a name once; use a new name",
    "def": "'def' binds a name once; use a new name",
    "loop": f"rename this loop's variable: {_RENAME}",
    "param": f"rename the parameter: {_RENAME}",
    "rank": f"rename the rank variable: {_RENAME}",
    "slot": f"rename the microbatch variable: {_RENAME}",
    "priority": (
        f"the priority sees {', '.join(A.PRIORITY_NAMES[:-1])} and {A.PRIORITY_NAMES[-1]} "
        "as the ready op's: rename '{name}' where the note points"
    ),
}
_ALL = float("inf")  # the cutoff of a scope that sees all of the one around it


@dataclass(frozen=True)
class _Binding:
    name: str
    span: Span
    what: str  # a key of _HINTS
    how: str  # completes "'x' is bound here, ...": "by 'let'", "as the rank variable"
    seq: int  # the order of binding, in the order of the text


class _Scope:
    __slots__ = ("parent", "cutoff", "names")

    def __init__(self, parent: _Scope | None, cutoff: float):
        self.parent = parent
        self.cutoff = cutoff  # the bindings of parent it sees: those with a smaller seq
        self.names: dict[str, _Binding] = {}  # the first binding of each name


class _Walk:
    def __init__(self) -> None:
        self.found: list[tuple[_Scope, _Binding]] = []

    def bind(self, scope: _Scope, name: str, span: Span, what: str, how: str) -> None:
        b = _Binding(name, span, what, how, len(self.found))
        self.found.append((scope, b))
        scope.names.setdefault(name, b)

    def open(self, parent: _Scope, late: bool = False) -> _Scope:
        return _Scope(parent, _ALL if late else len(self.found))

    def block(self, stmts, scope: _Scope) -> None:
        for st in stmts:
            self.stmt(st, scope)

    def stmt(self, st, scope: _Scope) -> None:
        if isinstance(st, A.Let):
            self.bind(scope, st.name, st.span, "let", "by 'let'")
        elif isinstance(st, A.Def):
            self.bind(scope, st.name, st.span, "def", "by 'def'")
            inner = self.open(scope, late=True)
            spans = st.param_spans or (st.span,) * len(st.params)
            for p, span in zip(st.params, spans):
                self.bind(inner, p, span, "param", f"as a parameter of '{st.name}'")
        elif isinstance(st, A.For):
            inner = self.open(scope)  # the loop variable shares its scope with the body
            self.bind(inner, st.var, st.var_span or st.span, "loop", "as a loop variable")
            self.block(st.body, inner)
        elif isinstance(st, A.If):
            self.block(st.then, self.open(scope))
            self.block(st.orelse, self.open(scope))
        elif isinstance(st, (A.ProgramBlock, A.GreedyBlock, A.PatternBlock)):
            inner = self.open(scope, late=True)
            span = st.rank_span or st.span
            self.bind(inner, st.rank_var, span, "rank", "as the rank variable")
            self.block(st.body, inner)
            prio = [o for o in st.body if isinstance(o, A.GreedyOpt) and o.what == "priority"]
            for o in prio[:1]:  # a second priority is a duplicate-option error
                each = self.open(inner, late=True)
                for name in A.PRIORITY_NAMES:
                    self.bind(each, name, o.span, "priority", "by the priority")
        elif isinstance(st, A.PatternSlot):
            inner = self.open(scope)
            span = st.mb_span or st.span
            self.bind(inner, st.mb_var, span, "slot", "as the microbatch variable")


def check_bindings(module: A.Module) -> A.Module:
    """``module`` when it binds no name twice where both are visible (see the module's
    docstring); else the ``rebinding`` error of the first such binding in the text."""
    walk = _Walk()
    top = _Scope(None, 0)
    for p in module.header.params if module.header else ():
        walk.bind(top, p.name, p.span, "param", "as a schedule parameter")
    walk.block(module.items, top)
    for scope, b in sorted(walk.found, key=lambda f: (f[1].span.line, f[1].span.col, f[1].seq)):
        first = scope.names[b.name]
        if first is not b:
            raise _rebinding(b, first, "in this scope")
        s, cutoff = scope.parent, scope.cutoff
        while s is not None:
            hidden = s.names.get(b.name)
            if hidden is not None and hidden.seq < cutoff:
                raise _rebinding(b, hidden, "in an enclosing scope")
            s, cutoff = s.parent, s.cutoff
    return module


def _rebinding(b: _Binding, hidden: _Binding, where: str) -> PpirError:
    message = f"'{b.name}' is already bound {where}"
    if b.what == "priority":
        message = f"the priority binds '{b.name}' for each ready op, but {message}"
    first = "first bound" if hidden.seq < b.seq else "bound"
    return error(
        "rebinding",
        message,
        b.span,
        hints=[_HINTS[b.what].replace("{name}", b.name)],
        notes=[Note(f"'{b.name}' is {first} here, {hidden.how}", hidden.span)],
    )
