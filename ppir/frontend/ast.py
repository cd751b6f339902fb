"""The .pps abstract syntax tree.  Every node keeps the span of the text it came from."""

from __future__ import annotations

from dataclasses import dataclass, field

from ppir.ir import Action, Overlap, Span


# ------------------------------------------------------------------ expressions
@dataclass(frozen=True)
class Expr:
    span: Span


@dataclass(frozen=True)
class IntLit(Expr):
    value: int


@dataclass(frozen=True)
class Name(Expr):
    name: str


@dataclass(frozen=True)
class BinOp(Expr):
    op: str  # + - * // % == != < <= > >= and or
    left: Expr
    right: Expr


@dataclass(frozen=True)
class UnaryOp(Expr):
    op: str  # - not
    operand: Expr


@dataclass(frozen=True)
class Call(Expr):
    func: str
    func_span: Span
    args: tuple[Expr, ...]


# ------------------------------------------------------------------ statements
@dataclass(frozen=True)
class Stmt:
    span: Span


@dataclass(frozen=True)
class Let(Stmt):
    name: str
    value: Expr


@dataclass(frozen=True)
class Def(Stmt):
    name: str
    params: tuple[str, ...]
    body: Expr
    param_spans: tuple[Span, ...] = field(default=(), compare=False)  # each parameter's name


@dataclass(frozen=True)
class Require(Stmt):
    cond: Expr
    message: str


@dataclass(frozen=True)
class For(Stmt):
    var: str
    start: Expr
    stop: Expr
    body: tuple[Stmt, ...]
    var_span: Span | None = field(default=None, compare=False)  # the loop variable's name


@dataclass(frozen=True)
class If(Stmt):
    cond: Expr
    then: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...]


@dataclass(frozen=True)
class OpStmt(Stmt):
    """``F(mb)`` or ``F(mb, chunk)``: an op on the current rank's local chunk."""

    op: str
    name_span: Span
    args: tuple[Expr, ...]


# ------------------------------------------------------------------ top level
@dataclass(frozen=True)
class Param:
    """A header parameter.  ``default`` is its value when the default is an integer;
    ``default_expr`` holds a default written as an expression of the parameters before it
    (``N = P``), evaluated when the parameters are bound.  Neither: the user must give it."""

    name: str
    default: int | None
    span: Span
    default_expr: Expr | None = None

    @property
    def default_text(self) -> str | None:
        """The default as written (``4``, ``P``), for listings; None without one."""
        if self.default_expr is None:
            return None if self.default is None else str(self.default)
        return _source_text(self.default_expr.span)


def _source_text(span: Span) -> str:
    lines = (span.source or "").splitlines()
    if span.line != span.end_line or not 0 < span.line <= len(lines):
        return "..."
    return lines[span.line - 1][span.col - 1 : span.end_col - 1]


@dataclass(frozen=True)
class Header:
    name: str
    params: tuple[Param, ...]
    span: Span


@dataclass(frozen=True)
class Decl(Stmt):
    """``ranks e``, ``stages e``, ``microbatches e``, ``pipelines e``, ``forward_only`` or
    ``placement ...``.

    For placement, ``value`` is "looped", "vshape" or a tuple of expressions (stage -> rank);
    for forward_only, True.
    """

    what: str
    value: Expr | str | tuple[Expr, ...]


@dataclass(frozen=True)
class ProgramBlock(Stmt):
    rank_var: str
    body: tuple[Stmt, ...]
    rank_span: Span | None = field(default=None, compare=False)  # the rank variable's name


@dataclass(frozen=True)
class GreedyOpt(Stmt):
    """``memory e``, ``priority e``, ``split e`` or ``cost K = e`` inside a greedy program."""

    what: str
    value: Expr
    kind: str | None = None  # the op letter of a ``cost`` line
    kind_span: Span | None = None


@dataclass(frozen=True)
class GreedyBlock(Stmt):
    """``program r greedy { ... }``: each rank's order comes from list scheduling
    (:mod:`ppir.synth.greedy`); ``body`` holds lets, defs, requires and :class:`GreedyOpt`."""

    rank_var: str
    body: tuple[Stmt, ...]
    rank_span: Span | None = field(default=None, compare=False)  # the rank variable's name


@dataclass(frozen=True)
class PatternSlot(Stmt):
    """``F(m, c) at e`` in a pattern program: pass ``kind`` of local chunk ``chunk`` for every
    microbatch ``m`` (bound to ``mb_var`` while ``at`` is evaluated) goes to slot ``at``."""

    kind: str
    kind_span: Span
    mb_var: str
    chunk: Expr
    at: Expr
    mb_span: Span | None = field(default=None, compare=False)  # the microbatch variable's name


@dataclass(frozen=True)
class PatternBlock(Stmt):
    """``program r pattern { ... }``: each rank's order is built from a repeating building
    block (:mod:`ppir.synth.pattern`); ``body`` holds lets, defs, requires and slots."""

    rank_var: str
    body: tuple[Stmt, ...]
    rank_span: Span | None = field(default=None, compare=False)  # the rank variable's name


@dataclass(frozen=True)
class LiteralGroup:
    """``[a b]`` (post and wait), ``post[a b]`` (post only) or ``wait[a b]`` (wait for it)."""

    actions: tuple[Action, ...]
    span: Span
    form: str = "group"  # "group" | "post" | "wait"


@dataclass(frozen=True)
class RankLine(Stmt):
    rank: int
    rank_span: Span
    items: tuple[Action | Overlap | LiteralGroup, ...]


@dataclass(frozen=True)
class Module:
    """A parsed .pps file."""

    path: str
    header: Header | None
    items: tuple[Stmt, ...]  # declarations, requires, lets, defs, program blocks, rank lines
    source: str | None = field(default=None, compare=False, repr=False)  # the file's text


# ------------------------------------------------------------------ helpers
def names_in(e: Expr) -> set[str]:
    if isinstance(e, Name):
        return {e.name}
    if isinstance(e, BinOp):
        return names_in(e.left) | names_in(e.right)
    if isinstance(e, UnaryOp):
        return names_in(e.operand)
    if isinstance(e, Call):
        out: set[str] = set()
        for a in e.args:
            out |= names_in(a)
        return out
    return set()


def value_names(e: Expr) -> set[str]:
    """The names whose values explain ``e``'s value in a message (``P - 1 is 0 (with P =
    1)``): none for a literal or a bare name, whose value the message already quotes."""
    return set() if isinstance(e, (IntLit, Name)) else names_in(e)


def short_text(e: Expr, limit: int = 40) -> str:
    """An expression for messages: as written when it fits on one line of ``limit``
    characters (``P - 1``), else its name, ``f(...)`` or "the divisor"."""
    if isinstance(e, IntLit):
        return str(e.value)
    text = _source_text(e.span)
    if text != "..." and 0 < len(text) <= limit:
        return text
    if isinstance(e, Name):
        return e.name
    if isinstance(e, Call):
        return f"{e.func}(...)"
    return "the divisor"


#: Names that expansion binds in inner scopes without a statement: a greedy block's priority
#: sees these (:func:`ppir.synth.block.expand_greedy`).
PRIORITY_NAMES = ("mb", "chunk", "stage", "is_f", "is_b", "is_w", "mem", "time")


def inner_binders(module: Module) -> frozenset[str]:
    """Every name that some scope other than the top-level one may bind: lets, defs and their
    parameters, loop variables, rank and microbatch variables anywhere below the top level,
    the parameters of top-level defs, and the names a greedy priority sees.  A name outside
    this set that the top level has bound can only ever be looked up there, so the
    interpreter reads it once (a top-level binding is never rebound)."""
    out: set[str] = set(PRIORITY_NAMES)
    for item in module.items:
        if isinstance(item, Def):
            out.update(item.params)
        elif isinstance(item, (For, If)):
            out |= block_binders((item,))
        elif isinstance(item, (ProgramBlock, GreedyBlock, PatternBlock)):
            out.add(item.rank_var)
            out |= block_binders(item.body)
    return frozenset(out)


def block_binders(stmts) -> set[str]:
    """Every name ``stmts`` bind, their nested blocks included: lets, defs and their
    parameters, loop variables, pattern slots' microbatch variables (the one list of the
    statements that bind; :mod:`ppir.frontend.bindings` checks where each is visible)."""
    out: set[str] = set()
    for st in stmts:
        if isinstance(st, Let):
            out.add(st.name)
        elif isinstance(st, Def):
            out.add(st.name)
            out.update(st.params)
        elif isinstance(st, For):
            out.add(st.var)
            out |= block_binders(st.body)
        elif isinstance(st, If):
            out |= block_binders(st.then) | block_binders(st.orelse)
        elif isinstance(st, PatternSlot):
            out.add(st.mb_var)
    return out
