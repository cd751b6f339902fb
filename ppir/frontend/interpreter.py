"""The .pps interpreter: compiles a module's expressions and statements into closures and
runs them for one rank at a time, emitting that rank's compute ops.

:class:`Interpreter` holds what expansion has learnt so far (placement, microbatches, caps and
counters) and the ops of the rank being expanded; :class:`Scope` is a chain of variable
bindings.  The semantics are summarised in :mod:`ppir.frontend.expand`; every error is a ppir error
pointing at the source span.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import add, eq, ge, gt, le, lt, mul, ne, sub

from ppir.diagnostics import Note, PpirError, count, did_you_mean, error
from ppir.frontend import ast as A
from ppir.frontend.calls import MAX_CALL_DEPTH, add_call_note, recursion_limit
from ppir.frontend.emit import OpEmitter
from ppir.frontend.limits import MAX_INT, check_int
from ppir.frontend.reserved import op_call_hints, reserved_hints
from ppir.frontend.scope import (
    IMPURE_BUILTINS,
    MISSING,
    PURE_BUILTINS,
    Function,
    Scope,
    pure_calls,
    values_text,
)
from ppir.frontend.trips import (
    Frame,
    check_nest,
    empty_loop,
    entries,
    loop_frame,
    op_letters,
    ops_per_trip,
    pure_top,
    repeat_levels,
)
from ppir.ir import Action, Overlap, Span

_BUILTINS = sorted(PURE_BUILTINS | IMPURE_BUILTINS)


class Interpreter(OpEmitter):
    def __init__(self, module: A.Module, max_ops: int, max_steps: int):
        self.module = module
        self.max_ops = max_ops
        self.max_steps = max_steps
        self.ops = 0
        self.steps = 0
        self.depth = 0
        self.placement: tuple[int, ...] | None = None
        self.stages_of: tuple[tuple[int, ...], ...] = ()
        self.memos: list[dict] = []  # the memos of the pure functions (ppir.frontend.scope)
        self.microbatches: int | None = None
        self.decl_exprs: dict = {}  # 'ranks P', placement entries: what each came from
        self.rank: int | None = None  # the rank being expanded (None at top level)
        self.top: Scope | None = None  # the top-level scope, once expansion made it
        self.inner = A.inner_binders(module)  # names some other scope may bind
        self.current: Span | None = None  # the item being expanded, for last-resort errors
        self.out: list[Action | Overlap] = []
        self.count: dict[tuple[int, bool], int] = {}  # (stage, is_forward) -> ops emitted
        self.wq: list[tuple[int, int]] = []  # pending weight passes (stage, mb), oldest first
        self.frames: list[Frame | None] = []  # while compiling: the loops around (trips.py)
        self.empty_loops: dict[tuple, tuple] = {}  # (rank, span) -> trips.empty_loop's record

    def reset_rank(self) -> None:
        """Start a rank's program: no ops, counters at zero, no pending weight passes."""
        self.out, self.count, self.wq = [], {}, []

    # ================================================================ expressions
    def compile(self, e: A.Expr) -> Callable[[Scope], int]:
        if isinstance(e, A.IntLit):
            v = e.value
            return lambda scope: v
        if isinstance(e, A.Name):
            return self._compile_name(e)
        if isinstance(e, A.UnaryOp):
            f = self.compile(e.operand)
            if e.op == "-":
                return lambda scope: -f(scope)
            return lambda scope: int(not f(scope))
        if isinstance(e, A.BinOp):
            return self._compile_binop(e)
        if isinstance(e, A.Call):
            return self._compile_call(e)
        raise AssertionError(f"unknown expression {e!r}")

    def _compile_name(self, e: A.Name):
        name, span = e.name, e.span
        v = self.top.vars.get(name) if self.top is not None else None
        if v.__class__ is int and name not in self.inner:
            return lambda scope: v  # bound for good at the top, and never shadowed

        def f(scope: Scope):
            s = scope
            while s is not None:  # Scope.lookup, inlined: the hottest call of expansion
                v = s.vars.get(name, MISSING)
                if v is not MISSING:
                    if v.__class__ is int:
                        return v
                    break
                s = s.parent
            if v is MISSING or isinstance(v, Function):
                if isinstance(v, Function):
                    raise error(
                        "not-a-value", f"'{name}' is a function; call it as {name}(...)", span
                    )
                raise error(
                    "undefined-name",
                    f"undefined name '{name}'",
                    span,
                    hints=reserved_hints(name)
                    or did_you_mean(name, scope.visible_names())
                    or scope.values_hint(),
                )
            return v

        return f

    def _compile_binop(self, e: A.BinOp):
        lf, rf, op, span = self.compile(e.left), self.compile(e.right), e.op, e.span
        if op in ("+", "-", "*"):
            c = e.right.value if isinstance(e.right, A.IntLit) else None  # x + 1: read once
            arith = {"+": add, "-": sub, "*": mul}[op]

            def arithmetic(s):
                v = arith(lf(s), rf(s) if c is None else c)
                if -MAX_INT <= v <= MAX_INT:
                    return v
                return check_int(v, f"'{op}'", span)

            return arithmetic
        if op in ("//", "%"):
            what = (  # a literal 0 needs no saying that it is 0, nor a name its value
                f"division by zero in '{op} 0'"
                if isinstance(e.right, A.IntLit)
                else f"division by zero: {A.short_text(e.right)} is 0 in '{op}'"
            )
            names = A.value_names(e.right)

            def div(s):
                a, b = lf(s), rf(s)
                if b == 0:
                    raise error("division-by-zero", what + values_text(s, names), span)
                return a // b if op == "//" else a % b

            return div
        if op == "and":
            return lambda s: int(bool(lf(s)) and bool(rf(s)))
        if op == "or":
            return lambda s: int(bool(lf(s)) or bool(rf(s)))
        cmp = {"==": eq, "!=": ne, "<": lt, "<=": le, ">": gt, ">=": ge}[op]
        return lambda s: int(cmp(lf(s), rf(s)))

    def _compile_call(self, e: A.Call):
        args = [self.compile(a) for a in e.args]
        name, span, n = e.func, e.span, len(e.args)
        if name in ("min", "max"):
            if n < 1:
                raise error("bad-call", f"{name}() needs at least one argument", span)
            fn = min if name == "min" else max
            return lambda s: fn(a(s) for a in args)
        if name == "abs":
            self._arity(e, 1)
            return lambda s: abs(args[0](s))
        if name == "stage":
            self._arity(e, 2)
            return lambda s: self._stage(args[0](s), args[1](s), span)
        if name == "chunks":
            self._arity(e, 1)
            return lambda s: len(self._rank_stages(args[0](s), span))
        if name == "rank_of":
            self._arity(e, 1)
            return lambda s: self._rank_of(args[0](s), span)
        if name == "pending_w":
            if n > 1:
                raise error("bad-call", f"pending_w() takes () or (chunk), {n} given", span)
            if n == 0:

                def pending_all(s):
                    self._pending_rank(s, span)
                    return len(self.wq)

                return pending_all

            def pending(s):
                st = self._chunk_stage(self._pending_rank(s, span), args[0](s), span)
                return sum(1 for x in self.wq if x[0] == st)

            return pending

        top = self.top.vars.get(name) if self.top is not None else None
        fixed = (  # a function the top level binds for good (never shadowed), right arity
            top
            if top.__class__ is Function and name not in self.inner and len(top.params) == n
            else None
        )

        def call(scope: Scope):
            fn = fixed if fixed is not None else self._callee(e, scope)
            key = tuple([a(scope) for a in args])
            memo = fn.memo
            if memo is not None:
                v = memo.get(key, MISSING)
                if v is not MISSING:
                    return v
            inner = Scope(fn.scope)
            inner.vars.update(zip(fn.params, key))
            self.depth += 1
            if self.depth > MAX_CALL_DEPTH:
                self.depth = 0
                raise recursion_limit(name, span)
            try:
                v = fn.body(inner)
                if memo is not None:
                    memo[key] = v
                return v
            except RecursionError:  # deep bodies exhaust Python's stack before the cap
                raise recursion_limit(name, span) from None
            except PpirError as err:  # which call failed: a note at it, with its arguments
                add_call_note(err, name, key, span)
                raise
            finally:
                self.depth -= 1

        return call

    @staticmethod
    def _callee(e: A.Call, scope: Scope) -> Function:
        """The function ``e`` calls, looked up in ``scope`` (a ppir error when the name is not
        a function or takes another number of arguments)."""
        name, n = e.func, len(e.args)
        fn = scope.lookup(name)
        if not isinstance(fn, Function):
            if fn is MISSING:
                cands = [k for k in scope.visible_names()] + _BUILTINS
                raise error(
                    "undefined-function",
                    f"undefined function '{name}'",
                    e.func_span,
                    hints=op_call_hints(name, e.func_span) or did_you_mean(name, cands),
                )
            raise error("not-a-function", f"'{name}' is a value, not a function", e.func_span)
        if len(fn.params) != n:
            raise error(
                "bad-call",
                f"'{name}' takes {count(len(fn.params), 'argument')}, {n} given",
                e.span,
                notes=[Note(f"'{name}' is defined here", fn.span)],
            )
        return fn

    def _pending_rank(self, scope: Scope, span: Span) -> int:
        """The rank whose pending weight passes ``pending_w`` counts: the one a ``program r {
        ... }`` block is expanding.  Elsewhere, a greedy or pattern block included (it runs no
        op statements, so nothing is ever pending there), a ``pending-w-outside-program``."""
        if self.rank is None:
            in_block = scope.lookup("$rank") is not MISSING  # a greedy or pattern block's rank
            raise error(
                "pending-w-outside-program",
                "pending_w() counts the weight passes pending on the rank being expanded: "
                "use it inside a program block (or a function called there)",
                span,
                hints=[
                    "a greedy or pattern block runs no op statements: no weight pass is "
                    "pending there (a greedy priority sees is_w and mem)"
                ]
                if in_block
                else (),
            )
        return self.rank

    @staticmethod
    def _arity(e: A.Call, n: int) -> None:
        if len(e.args) != n:
            raise error(
                "bad-call", f"{e.func}() takes {count(n, 'argument')}, {len(e.args)} given", e.span
            )

    # ================================================================ statements
    def compile_block(self, stmts) -> Callable[[Scope], None]:
        parts = [self.compile_stmt(s) for s in stmts]

        def run(scope: Scope):
            for p in parts:
                p(scope)

        return run

    def compile_stmt(self, st: A.Stmt) -> Callable[[Scope], None]:
        if isinstance(st, A.Let):
            val = self.compile(st.value)
            name = st.name

            def let(scope: Scope):  # never a rebinding: the parser refuses those (bindings.py)
                scope.vars[name] = val(scope)

            return let
        if isinstance(st, A.Def):
            body = self.compile(st.body)

            def define(scope: Scope):
                memo = {} if scope is self.top and pure_calls(st.body, st.params, scope) else None
                if memo is not None:
                    self.memos.append(memo)  # cleared when the placement changes
                fn = Function(st.name, st.params, body, scope, st.span, memo)
                scope.vars[st.name] = fn

            return define
        if isinstance(st, A.Require):
            return self._compile_require(st)
        if isinstance(st, A.For):
            return self._compile_for(st)
        if isinstance(st, A.If):
            cond = self.compile(st.cond)
            self.frames.append(None)  # a loop under an 'if' is not sure to run
            try:
                then, orelse = self.compile_block(st.then), self.compile_block(st.orelse)
            finally:
                self.frames.pop()

            def if_(scope: Scope):
                if cond(scope):
                    then(Scope(scope))
                else:
                    orelse(Scope(scope))

            return if_
        if isinstance(st, A.OpStmt):
            return self._compile_op(st)
        raise error(
            "misplaced-statement",
            f"'{type(st).__name__.lower()}' is not allowed inside a program block",
            st.span,
        )

    def _compile_require(self, st: A.Require):
        cond = self.compile(st.cond)
        names = A.names_in(st.cond)

        def require(scope: Scope):
            if not cond(scope):
                bound = values_text(scope, names)
                raise error(
                    "require-failed", f"requirement failed: {st.message}{bound}", st.cond.span
                )

        return require

    def _compile_for(self, st: A.For):
        start, stop = self.compile(st.start), self.compile(st.stop)
        levels = repeat_levels(st, self.frames, pure_top(self.top, self.inner))
        outer = self.frames[::-1][:levels]  # the frames that repeat it, innermost first
        frame = loop_frame(st, levels)
        self.frames.append(frame)
        try:
            body = self.compile_block(st.body)
        finally:
            self.frames.pop()
        per_trip = ops_per_trip(st.body)
        check = bool(levels or per_trip)
        var, span, cell = st.var, st.span, frame.stop
        emits, empty = op_letters(st.body), self.empty_loops

        def for_(scope: Scope):
            a, b = start(scope), stop(scope)
            n = max(0, b - a)
            if not n and emits and self.rank is not None and (self.rank, span) not in empty:
                empty[self.rank, span] = empty_loop(st, emits, self.rank, scope, a, b)
            self.steps += n
            if self.steps > self.max_steps:
                raise error(
                    "runaway-loop",
                    f"loops ran more than {self.max_steps:,} iterations in total "
                    f"(this loop alone: {n:,})",
                    span,
                    hints=["check the loop bounds; the cap is --max-steps"],
                )
            cell[0] = b
            if check and n:  # a nest, or ops: refused now if sure to exceed a cap
                mult = entries(outer, scope, self.rank) if levels else 1
                check_nest(self, span, n, per_trip, mult)
            for i in range(a, b):
                inner = Scope(scope)
                inner.vars[var] = i
                body(inner)

        return for_
