"""Parse .pps text into the AST (:mod:`ppir.frontend.ast`), with diagnostics for syntax errors."""

from __future__ import annotations

import re
from functools import lru_cache

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedToken, VisitError
from lark.lexer import PatternStr

from ppir.diagnostics import EXIT_USAGE, Diagnostic, PpirError, error
from ppir.frontend import ast as A
from ppir.frontend.bindings import check_bindings
from ppir.frontend.limits import int_literal
from ppir.frontend.nesting import check_nesting, too_deep
from ppir.frontend.reserved import check_binder, check_function_name
from ppir.frontend.syntax_errors import GluedKeyword, KeywordBoundary, syntax_error
from ppir.ir import Action, Overlap, Reduce, Span


@lru_cache(maxsize=1)
def _parser() -> Lark:
    return Lark.open_from_package(
        "ppir.grammar",
        "pps.lark",
        ("",),
        parser="lalr",
        propagate_positions=True,
        maybe_placeholders=True,
        postlex=KeywordBoundary(),
    )


@lru_cache(maxsize=1)
def _keywords() -> dict[str, str]:
    """The grammar's keywords by terminal name (``FORWARD_ONLY`` -> ``forward_only``)."""
    return {
        t.name: t.pattern.value
        for t in _parser().terminals
        if isinstance(t.pattern, PatternStr) and t.pattern.value.isidentifier()
    }


def is_schedule_name(text: str) -> bool:
    """True when ``text`` can follow ``schedule`` in a .pps header (the grammar's
    ``SCHEDULE_NAME``: letters, digits, ``_`` and ``-``, not starting with ``-``)."""
    pattern = _parser().get_terminal("SCHEDULE_NAME").pattern.to_regexp()
    return re.fullmatch(pattern, text, re.ASCII) is not None


def to_schedule_name(text: str) -> str:
    """``text`` made a schedule name (:func:`is_schedule_name`): each character the grammar
    does not allow in a name becomes ``_``, and ``s_`` goes in front when the result still
    cannot start one (``my sched`` -> ``my_sched``, ``-x`` -> ``s_-x``)."""
    name = "".join(c if is_schedule_name("_" + c) else "_" for c in text)
    return name if is_schedule_name(name) else f"s_{name}"


def _literal_int(e: A.Expr | None) -> int | None:
    """The value of ``4`` or ``-4``; None for any other expression."""
    if isinstance(e, A.IntLit):
        return e.value
    if isinstance(e, A.UnaryOp) and e.op == "-" and isinstance(e.operand, A.IntLit):
        return -e.operand.value
    return None


class _ToAst(Transformer):
    """Builds AST nodes; ``path`` is attached to every span."""

    def __init__(self, path: str, text: str):
        super().__init__()
        self.path = path
        self.text = text

    # ---- spans
    def _span(self, meta) -> Span:
        return Span(self.path, meta.line, meta.column, meta.end_line, meta.end_column, self.text)

    def _tspan(self, tok: Token) -> Span:
        return Span(self.path, tok.line, tok.column, tok.end_line, tok.end_column, self.text)

    # ---- top level
    @v_args(meta=True)
    def start(self, meta, items):
        header = None
        rest = []
        for it in items:
            if isinstance(it, A.Header):
                if header is not None:
                    raise error(
                        "duplicate-header",
                        "a file holds one 'schedule' header",
                        it.span,
                        notes=[_note("first header is here", header.span)],
                    )
                header = it
            else:
                rest.append(it)
        return A.Module(self.path, header, tuple(rest), self.text)

    @v_args(meta=True)
    def header(self, meta, children):
        name, *params = children
        params = tuple(p for p in params if p is not None)
        seen: dict[str, A.Param] = {}
        for p in params:
            if p.name in seen:
                raise error(
                    "duplicate-parameter",
                    f"parameter '{p.name}' is declared twice",
                    p.span,
                    notes=[_note("first declared here", seen[p.name].span)],
                )
            seen[p.name] = p
        return A.Header(str(name), params, self._span(meta))

    @v_args(meta=True)
    def param(self, meta, children):
        name, default = children
        check_binder(str(name), self._tspan(name), "a parameter")
        value = _literal_int(default)
        if default is None or value is not None:
            return A.Param(str(name), value, self._span(meta))
        return A.Param(str(name), None, self._span(meta), default)

    def _int(self, tok: Token) -> int:
        return int_literal(str(tok), self._tspan(tok))

    def _digits_ok(self, tok: Token) -> None:
        """Action text holds integers too: each must be a valid literal."""
        for m in re.finditer(r"\d+", str(tok)):
            col = tok.column + m.start()
            span = Span(self.path, tok.line, col, tok.line, col + len(m.group()), self.text)
            int_literal(m.group(), span)

    @v_args(meta=True)
    def ranks_decl(self, meta, c):
        return A.Decl(self._span(meta), "ranks", c[0])

    @v_args(meta=True)
    def stages_decl(self, meta, c):
        return A.Decl(self._span(meta), "stages", c[0])

    @v_args(meta=True)
    def microbatches_decl(self, meta, c):
        return A.Decl(self._span(meta), "microbatches", c[0])

    @v_args(meta=True)
    def pipelines_decl(self, meta, c):
        return A.Decl(self._span(meta), "pipelines", c[0])

    @v_args(meta=True)
    def forward_only_decl(self, meta, c):
        return A.Decl(self._span(meta), "forward_only", True)

    @v_args(meta=True)
    def placement_decl(self, meta, c):
        return A.Decl(self._span(meta), "placement", c[0])

    def looped(self, _):
        return "looped"

    def vshape(self, _):
        return "vshape"

    def explicit(self, c):
        return tuple(x for x in c if x is not None)

    @v_args(meta=True)
    def require_stmt(self, meta, c):
        return A.Require(self._span(meta), c[0], str(c[1])[1:-1])

    @v_args(meta=True)
    def let_stmt(self, meta, c):
        check_binder(str(c[0]), self._tspan(c[0]), "a 'let' binding")
        return A.Let(self._span(meta), str(c[0]), c[1])

    @v_args(meta=True)
    def def_stmt(self, meta, c):
        name, *rest = c
        body = rest[-1]
        check_function_name(str(name), self._tspan(name))
        for p in rest[:-1]:
            if p is not None:
                check_binder(str(p), self._tspan(p), "a function parameter")
        params = tuple(str(p) for p in rest[:-1] if p is not None)
        if len(set(params)) != len(params):
            raise error(
                "duplicate-parameter",
                f"function '{name}' names a parameter twice",
                self._span(meta),
            )
        spans = tuple(self._tspan(p) for p in rest[:-1] if p is not None)
        return A.Def(self._span(meta), str(name), params, body, spans)

    @v_args(meta=True)
    def program_block(self, meta, c):
        check_binder(str(c[0]), self._tspan(c[0]), "the rank variable")
        return A.ProgramBlock(self._span(meta), str(c[0]), c[1], self._tspan(c[0]))

    def block(self, c):
        return tuple(c)

    @v_args(meta=True)
    def greedy_block(self, meta, c):
        check_binder(str(c[0]), self._tspan(c[0]), "the rank variable")
        return A.GreedyBlock(self._span(meta), str(c[0]), c[1], self._tspan(c[0]))

    def greedy_body(self, c):
        return tuple(c)

    @v_args(meta=True)
    def pattern_block(self, meta, c):
        check_binder(str(c[0]), self._tspan(c[0]), "the rank variable")
        return A.PatternBlock(self._span(meta), str(c[0]), c[1], self._tspan(c[0]))

    def pattern_body(self, c):
        return tuple(c)

    @v_args(meta=True)
    def p_slot(self, meta, c):
        kind, mb_var, chunk, at = c
        check_binder(str(mb_var), self._tspan(mb_var), "the microbatch variable")
        return A.PatternSlot(
            self._span(meta),
            str(kind),
            self._tspan(kind),
            str(mb_var),
            chunk,
            at,
            self._tspan(mb_var),
        )

    @v_args(meta=True)
    def g_memory(self, meta, c):
        return A.GreedyOpt(self._span(meta), "memory", c[0])

    @v_args(meta=True)
    def g_priority(self, meta, c):
        return A.GreedyOpt(self._span(meta), "priority", c[0])

    @v_args(meta=True)
    def g_split(self, meta, c):
        return A.GreedyOpt(self._span(meta), "split", c[0])

    @v_args(meta=True)
    def g_cost(self, meta, c):
        return A.GreedyOpt(self._span(meta), "cost", c[1], str(c[0]), self._tspan(c[0]))

    @v_args(meta=True)
    def for_stmt(self, meta, c):
        check_binder(str(c[0]), self._tspan(c[0]), "a loop variable")
        return A.For(self._span(meta), str(c[0]), c[1], c[2], c[3], self._tspan(c[0]))

    @v_args(meta=True)
    def if_stmt(self, meta, c):
        cond, then, orelse = c
        if orelse is None:
            orelse = ()
        elif isinstance(orelse, A.If):
            orelse = (orelse,)
        return A.If(self._span(meta), cond, then, orelse)

    @v_args(meta=True)
    def op_stmt(self, meta, c):
        name, *args = c
        return A.OpStmt(
            self._span(meta), str(name), self._tspan(name), tuple(a for a in args if a is not None)
        )

    @v_args(meta=True)
    def rank_line(self, meta, c):
        rank_tok, *items = c
        return A.RankLine(
            self._span(meta), self._int(rank_tok), self._tspan(rank_tok), tuple(items)
        )

    def lit_action(self, c):
        tok = c[0]
        self._digits_ok(tok)
        return Action.parse(str(tok), self._tspan(tok))

    def lit_overlap(self, c):
        tok = c[0]
        self._digits_ok(tok)
        try:
            return Overlap.parse(str(tok), self._tspan(tok))
        except ValueError as e:
            raise error("bad-overlap", str(e), self._tspan(tok)) from None

    def lit_reduce(self, c):
        tok = c[0]
        return Reduce.parse(str(tok), self._tspan(tok))

    @v_args(meta=True)
    def lit_post(self, meta, c):
        g = self._group(meta, c)
        return A.LiteralGroup(g.actions, g.span, "post")

    @v_args(meta=True)
    def lit_wait(self, meta, c):
        g = self._group(meta, c)
        return A.LiteralGroup(g.actions, g.span, "wait")

    @v_args(meta=True)
    def lit_group(self, meta, c):
        return self._group(meta, c)

    def _group(self, meta, c):
        span = self._span(meta)
        for t in c:
            self._digits_ok(t)
        acts = tuple(Action.parse(str(t), self._tspan(t)) for t in c)
        for a in acts:
            if not a.kind.is_comm:
                raise error(
                    "compute-in-group",
                    f"'{a}' is a compute action; groups '[...]' hold only SEND/RECV",
                    a.span,
                )
        if not acts:
            raise error("empty-group", "an empty group '[]' posts nothing", span)
        return A.LiteralGroup(acts, span)

    # ---- expressions
    @v_args(meta=True)
    def int_lit(self, meta, c):
        return A.IntLit(self._tspan(c[0]), self._int(c[0]))

    @v_args(meta=True)
    def name(self, meta, c):
        return A.Name(self._tspan(c[0]), str(c[0]))

    @v_args(meta=True)
    def call(self, meta, c):
        name, *args = c
        return A.Call(
            self._span(meta), str(name), self._tspan(name), tuple(a for a in args if a is not None)
        )

    def _bin(op):  # noqa: N805 - a helper that builds methods
        @v_args(meta=True)
        def f(self, meta, c):
            return A.BinOp(self._span(meta), op, c[0], c[-1])

        return f

    add = _bin("+")
    sub = _bin("-")
    mul = _bin("*")
    floordiv = _bin("//")
    mod = _bin("%")
    and_ = _bin("and")
    or_ = _bin("or")

    @v_args(meta=True)
    def cmp(self, meta, c):
        return A.BinOp(self._span(meta), str(c[1]), c[0], c[2])

    @v_args(meta=True)
    def neg(self, meta, c):
        return A.UnaryOp(self._span(meta), "-", c[0])

    @v_args(meta=True)
    def not_(self, meta, c):
        return A.UnaryOp(self._span(meta), "not", c[0])


def _note(msg, span):
    from ppir.diagnostics import Note

    return Note(msg, span)


def parse_text(text: str, path: str = "<string>") -> A.Module:
    """Parse .pps source text into a :class:`ppir.frontend.ast.Module`.

    Raises :class:`PpirError` (kind ``syntax-error`` or a more specific one) for bad input.
    (A file's byte-order mark is dropped where files are read,
    :func:`ppir.frontend.sources.read_text`.)
    """
    try:
        tree = _parser().parse(text)
    except (UnexpectedCharacters, UnexpectedEOF, UnexpectedToken, GluedKeyword) as e:
        raise syntax_error(e, text, path, _keywords()) from None
    check_nesting(tree, path, text)
    try:
        return check_bindings(_ToAst(path, text).transform(tree))
    except VisitError as e:  # errors raised in the transformer arrive wrapped
        if isinstance(e.orig_exc, PpirError):
            raise e.orig_exc from None
        if isinstance(e.orig_exc, ValueError):
            raise PpirError(Diagnostic("syntax-error", str(e.orig_exc)), EXIT_USAGE) from None
        if isinstance(e.orig_exc, RecursionError):
            raise too_deep(Span(path, 1, 1, 1, 2, text)) from None
        raise
    except RecursionError:  # lark's transformer recurses once per level of nesting
        raise too_deep(Span(path, 1, 1, 1, 2, text)) from None
