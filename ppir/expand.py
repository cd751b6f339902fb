"""Expansion: bind parameters, evaluate a .pps module and produce per-rank programs.

``expand(module, {"P": 4, "M": 8})`` returns a compute-only (or, for literal files, possibly
already lowered) :class:`ppir.ir.Schedule`.  Every failure is a :class:`PpirError` whose
diagnostic points at the offending source span (or names the offending ``-D`` value).

Semantics of the language, in short (README "The .pps language" has the long form):
* integers only; ``//`` and ``%`` floor like Python; comparisons and ``and``/``or``/``not`` give
  0 or 1; ``for i in a .. b`` runs ``i = a, a+1, ..., b-1``;
* ``let`` binds once per scope (blocks open scopes); ``def f(x) = expr`` is a pure function that
  sees the names visible where it is defined;
* builtins: ``min``, ``max``, ``abs``, ``stage(r, c)`` (global stage of rank r's local chunk c),
  ``chunks(r)`` (how many stages rank r holds), ``rank_of(s)``;
* ``F(mb)``, ``F(mb, chunk)`` and likewise ``B``, ``I``, ``W`` emit an op for the current rank's
  local chunk (default 0); ``FB(mb_f, chunk_f, mb_b, chunk_b)`` emits one overlapped step (a
  forward and a full backward run as one item, :class:`ppir.ir.Overlap`);
* ``next`` as a microbatch means "the next one of this chunk": forwards and backwards (B or I)
  count per chunk; ``W(next)`` runs the oldest pending weight pass of the rank (any chunk) and
  ``pending_w()`` says how many are pending (every I adds one, every W removes its own);
* ``program r greedy { ... }`` builds each rank's order by list scheduling
  (:mod:`ppir.synth.block`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from . import ast as A
from .diagnostics import EXIT_USAGE, Note, PpirError, did_you_mean, error
from .ir import (
    Action,
    Group,
    OpKind,
    Overlap,
    Schedule,
    Span,
    Wait,
    looped_placement,
    vshape_placement,
)

DEFAULT_MAX_OPS = 5_000_000
DEFAULT_MAX_STEPS = 100_000_000
MAX_CALL_DEPTH = 200

_OPS = {"F": OpKind.F, "B": OpKind.B, "I": OpKind.I, "W": OpKind.W}
_BUILTINS = ("min", "max", "abs", "stage", "chunks", "rank_of", "pending_w")


class _Scope:
    __slots__ = ("vars", "parent")

    def __init__(self, parent: _Scope | None = None):
        self.vars: dict[str, object] = {}
        self.parent = parent

    def lookup(self, name: str):
        s = self
        while s is not None:
            v = s.vars.get(name, _MISSING)
            if v is not _MISSING:
                return v
            s = s.parent
        return _MISSING

    def visible_names(self) -> set[str]:
        out: set[str] = set()
        s = self
        while s is not None:
            out.update(s.vars)
            s = s.parent
        return out


_MISSING = object()


@dataclass
class _Func:
    name: str
    params: tuple[str, ...]
    body: Callable
    scope: _Scope
    span: Span


class _Expander:
    def __init__(self, module: A.Module, max_ops: int, max_steps: int):
        self.module = module
        self.max_ops = max_ops
        self.max_steps = max_steps
        self.ops = 0
        self.steps = 0
        self.depth = 0
        self.placement: tuple[int, ...] | None = None
        self.stages_of: tuple[tuple[int, ...], ...] = ()
        self.microbatches: int | None = None
        self.out: list[Action | Overlap] = []
        self.count: dict[tuple[int, bool], int] = {}  # (stage, is_forward) -> ops emitted
        self.wq: list[tuple[int, int]] = []  # pending weight passes (stage, mb), oldest first

    def reset_rank(self) -> None:
        """Start a rank's program: no ops, counters at zero, no pending weight passes."""
        self.out, self.count, self.wq = [], {}, []

    # ================================================================ expressions
    def compile(self, e: A.Expr) -> Callable[[_Scope], int]:
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

        def f(scope: _Scope):
            v = scope.lookup(name)
            if v is _MISSING or isinstance(v, _Func):
                if isinstance(v, _Func):
                    raise error("not-a-value", f"'{name}' is a function; call it as {name}(...)",
                                span)
                raise error("undefined-name", f"undefined name '{name}'", span,
                            hints=did_you_mean(name, scope.visible_names()))
            return v

        return f

    def _compile_binop(self, e: A.BinOp):
        lf, rf, op, span = self.compile(e.left), self.compile(e.right), e.op, e.span
        if op == "+":
            return lambda s: lf(s) + rf(s)
        if op == "-":
            return lambda s: lf(s) - rf(s)
        if op == "*":
            return lambda s: lf(s) * rf(s)
        if op in ("//", "%"):
            def div(s):
                a, b = lf(s), rf(s)
                if b == 0:
                    raise error("division-by-zero",
                                f"division by zero: {_text(e.right)} is 0 in '{op}'", span)
                return a // b if op == "//" else a % b
            return div
        if op == "and":
            return lambda s: int(bool(lf(s)) and bool(rf(s)))
        if op == "or":
            return lambda s: int(bool(lf(s)) or bool(rf(s)))
        cmp = {
            "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
            "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
        }[op]
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
                return lambda s: len(self.wq)

            def pending(s):
                st = self._chunk_stage(s.lookup("$rank"), args[0](s), span)
                return sum(1 for x in self.wq if x[0] == st)
            return pending

        def call(scope: _Scope):
            fn = scope.lookup(name)
            if not isinstance(fn, _Func):
                if fn is _MISSING:
                    cands = [k for k in scope.visible_names()] + list(_BUILTINS)
                    raise error("undefined-function", f"undefined function '{name}'",
                                e.func_span, hints=did_you_mean(name, cands))
                raise error("not-a-function", f"'{name}' is a value, not a function",
                            e.func_span)
            if len(fn.params) != n:
                raise error("bad-call",
                            f"'{name}' takes {len(fn.params)} argument(s), {n} given", span,
                            notes=[Note(f"'{name}' is defined here", fn.span)])
            inner = _Scope(fn.scope)
            for p, a in zip(fn.params, args):
                inner.vars[p] = a(scope)
            self.depth += 1
            if self.depth > MAX_CALL_DEPTH:
                self.depth = 0
                raise error("recursion-limit",
                            f"calls nest deeper than {MAX_CALL_DEPTH} (runaway recursion in "
                            f"'{name}'?)", span)
            try:
                return fn.body(inner)
            finally:
                self.depth -= 1

        return call

    @staticmethod
    def _arity(e: A.Call, n: int) -> None:
        if len(e.args) != n:
            raise error("bad-call", f"{e.func}() takes {n} argument(s), {len(e.args)} given",
                        e.span)

    def _need_placement(self, span: Span):
        if self.placement is None:
            raise error("placement-not-ready",
                        "stage(), chunks() and rank_of() need 'ranks', 'stages' and 'placement' "
                        "declared before they are used", span)

    def _rank_stages(self, r: int, span: Span) -> tuple[int, ...]:
        self._need_placement(span)
        if not 0 <= r < len(self.stages_of):
            raise error("rank-out-of-range",
                        f"rank {r} is out of range 0..{len(self.stages_of) - 1}", span)
        return self.stages_of[r]

    def _stage(self, r: int, c: int, span: Span) -> int:
        st = self._rank_stages(r, span)
        if not 0 <= c < len(st):
            raise error("chunk-out-of-range",
                        f"chunk {c} is out of range: rank {r} holds {len(st)} chunk(s) "
                        f"(0..{len(st) - 1})", span)
        return st[c]

    def _rank_of(self, s: int, span: Span) -> int:
        self._need_placement(span)
        if not 0 <= s < len(self.placement):
            raise error("stage-out-of-range",
                        f"stage {s} is out of range 0..{len(self.placement) - 1}", span)
        return self.placement[s]

    # ================================================================ statements
    def compile_block(self, stmts) -> Callable[[_Scope], None]:
        parts = [self.compile_stmt(s) for s in stmts]

        def run(scope: _Scope):
            for p in parts:
                p(scope)

        return run

    def compile_stmt(self, st: A.Stmt) -> Callable[[_Scope], None]:
        if isinstance(st, A.Let):
            val = self.compile(st.value)
            name, span = st.name, st.span

            def let(scope: _Scope):
                if name in scope.vars:
                    raise error("rebinding", f"'{name}' is already bound in this scope", span,
                                hints=["'let' binds a name once; use a new name"])
                scope.vars[name] = val(scope)

            return let
        if isinstance(st, A.Def):
            body = self.compile(st.body)

            def define(scope: _Scope):
                if st.name in scope.vars:
                    raise error("rebinding", f"'{st.name}' is already bound in this scope",
                                st.span)
                scope.vars[st.name] = _Func(st.name, st.params, body, scope, st.span)

            return define
        if isinstance(st, A.Require):
            return self._compile_require(st)
        if isinstance(st, A.For):
            return self._compile_for(st)
        if isinstance(st, A.If):
            cond = self.compile(st.cond)
            then, orelse = self.compile_block(st.then), self.compile_block(st.orelse)

            def if_(scope: _Scope):
                if cond(scope):
                    then(_Scope(scope))
                else:
                    orelse(_Scope(scope))

            return if_
        if isinstance(st, A.OpStmt):
            return self._compile_op(st)
        raise error("misplaced-statement",
                    f"'{type(st).__name__.lower()}' is not allowed inside a program block",
                    st.span)

    def _compile_require(self, st: A.Require):
        cond = self.compile(st.cond)
        names = sorted(_names_in(st.cond))

        def require(scope: _Scope):
            if not cond(scope):
                vals = []
                for n in names:
                    v = scope.lookup(n)
                    if v is not _MISSING and not isinstance(v, _Func):
                        vals.append(f"{n} = {v}")
                bound = f" (with {', '.join(vals)})" if vals else ""
                raise error("require-failed", f"requirement failed: {st.message}{bound}",
                            st.cond.span)

        return require

    def _compile_for(self, st: A.For):
        start, stop = self.compile(st.start), self.compile(st.stop)
        body = self.compile_block(st.body)
        var, span = st.var, st.span

        def for_(scope: _Scope):
            a, b = start(scope), stop(scope)
            n = max(0, b - a)
            self.steps += n
            if self.steps > self.max_steps:
                raise error("runaway-loop",
                            f"loops ran more than {self.max_steps:,} iterations in total "
                            f"(this loop alone: {n:,})", span,
                            hints=["check the loop bounds; the cap is --max-steps"])
            for i in range(a, b):
                inner = _Scope(scope)
                inner.vars[var] = i
                body(inner)

        return for_

    def _compile_op(self, st: A.OpStmt):
        if st.op == "FB":
            return self._compile_fb(st)
        kind = _OPS.get(st.op)
        if kind is None:
            raise error("unknown-op", f"unknown operation '{st.op}'", st.name_span,
                        hints=did_you_mean(st.op, list(_OPS) + ["FB"])
                        or ["ops are F, B, I and W"])
        if not 1 <= len(st.args) <= 2:
            raise error("bad-call", f"{st.op} takes (microbatch) or (microbatch, chunk), "
                        f"{len(st.args)} argument(s) given", st.span)
        mb_f = self._mb_arg(st.args[0])
        ch_f = self.compile(st.args[1]) if len(st.args) == 2 else (lambda s: 0)
        span = st.span
        any_chunk = kind is OpKind.W and mb_f is None and len(st.args) == 1

        def op(scope: _Scope):
            self._emit(self._action(kind, mb_f, None if any_chunk else ch_f, scope, span))

        return op

    def _compile_fb(self, st: A.OpStmt):
        if len(st.args) != 4:
            raise error("bad-call", f"FB takes (mb_f, chunk_f, mb_b, chunk_b), "
                        f"{len(st.args)} argument(s) given", st.span)
        mf, cf = self._mb_arg(st.args[0]), self.compile(st.args[1])
        mb, cb = self._mb_arg(st.args[2]), self.compile(st.args[3])
        span = st.span

        def op(scope: _Scope):
            f = self._action(OpKind.F, mf, cf, scope, span)
            b = self._action(OpKind.B, mb, cb, scope, span)
            try:
                self._emit(Overlap((f, b), span))
            except ValueError as e:
                raise error("bad-overlap", str(e), span) from None

        return op

    def _mb_arg(self, e: A.Expr):
        """None for the word ``next``, else the compiled microbatch expression."""
        return None if isinstance(e, A.Name) and e.name == "next" else self.compile(e)

    def _action(self, kind: OpKind, mb_f, ch_f, scope: _Scope, span: Span) -> Action:
        rank = scope.lookup("$rank")
        stages = self.stages_of[rank]
        stage = None if ch_f is None else self._chunk_stage(rank, ch_f(scope), span)
        if kind is OpKind.W and mb_f is None:
            q = [x for x in self.wq if stage is None or x[0] == stage]
            if not q:
                what = "" if stage is None else f" of chunk {stages.index(stage)}"
                raise error("no-pending-weight",
                            f"W(next) on rank {rank}: no weight pass{what} is pending (every I "
                            "adds one)", span, hints=["guard it with 'if pending_w() > 0 "
                                                      "{ ... }'"])
            return self._count(Action(q[0][0], kind, q[0][1], span))
        fwd = kind is OpKind.F
        mb = self.count.get((stage, fwd), 0) if mb_f is None else mb_f(scope)
        M = self.microbatches
        if not 0 <= mb < M:
            why = " (the next one after every microbatch ran)" if mb_f is None else ""
            raise error("microbatch-out-of-range",
                        f"microbatch {mb} is out of range 0..{M - 1} (microbatches = {M})"
                        f"{why}", span)
        return self._count(Action(stage, kind, mb, span))

    def _chunk_stage(self, rank: int, ch: int, span: Span) -> int:
        stages = self.stages_of[rank]
        if not 0 <= ch < len(stages):
            raise error("chunk-out-of-range",
                        f"chunk {ch} is out of range: rank {rank} holds {len(stages)} "
                        f"chunk(s) (0..{len(stages) - 1})", span)
        return stages[ch]

    def _count(self, a: Action) -> Action:
        """Advance the counters and the pending-weight queue for ``a``."""
        if a.kind is OpKind.W:
            if (a.stage, a.mb) in self.wq:
                self.wq.remove((a.stage, a.mb))
        else:
            key = (a.stage, a.kind is OpKind.F)
            self.count[key] = self.count.get(key, 0) + 1
            if a.kind is OpKind.I:
                self.wq.append((a.stage, a.mb))
        return a

    def _emit(self, item: Action | Overlap) -> None:
        self.ops += len(item.actions) if isinstance(item, Overlap) else 1
        if self.ops > self.max_ops:
            raise error("op-limit", f"expansion produced more than {self.max_ops:,} ops",
                        item.span, hints=["a runaway loop? the cap is --max-ops"])
        self.out.append(item)


def _names_in(e: A.Expr) -> set[str]:
    if isinstance(e, A.Name):
        return {e.name}
    if isinstance(e, A.BinOp):
        return _names_in(e.left) | _names_in(e.right)
    if isinstance(e, A.UnaryOp):
        return _names_in(e.operand)
    if isinstance(e, A.Call):
        out: set[str] = set()
        for a in e.args:
            out |= _names_in(a)
        return out
    return set()


def _text(e: A.Expr) -> str:
    """A short rendering of an expression for messages."""
    if isinstance(e, A.IntLit):
        return str(e.value)
    if isinstance(e, A.Name):
        return e.name
    if isinstance(e, A.Call):
        return f"{e.func}(...)"
    return "the divisor"


# ==================================================================== driver
def bind_params(module: A.Module, overrides: dict[str, int]) -> dict[str, int]:
    """Header defaults overridden by ``overrides``; errors for unknown and missing ones."""
    header = module.header
    declared = {p.name: p for p in header.params} if header else {}
    for name, value in overrides.items():
        if name not in declared:
            where = f"schedule '{header.name}'" if header else module.path
            params = ", ".join(declared) or "none"
            raise error("unknown-parameter",
                        f"unknown parameter '{name}' (-D {name}={value}) for {where}",
                        hints=did_you_mean(name, declared) + [f"its parameters: {params}"])
    values: dict[str, int] = {}
    for name, p in declared.items():
        if name in overrides:
            values[name] = overrides[name]
        elif p.default is None:
            raise error("missing-parameter",
                        f"parameter '{name}' has no default; give it with -D {name}=...", p.span)
        else:
            values[name] = p.default
    return values


def expand(module: A.Module, overrides: dict[str, int] | None = None, *,
           max_ops: int = DEFAULT_MAX_OPS, max_steps: int = DEFAULT_MAX_STEPS) -> Schedule:
    """Expand a parsed module for concrete parameter values into a :class:`Schedule`."""
    try:
        return _expand(module, overrides, max_ops, max_steps)
    except RecursionError:  # expressions compile and evaluate recursively
        raise error("too-deep", f"{module.path}: expressions nest too deeply to evaluate",
                    hints=["split the expression with 'let' or 'def'"]) from None


def _expand(module: A.Module, overrides: dict[str, int] | None, max_ops: int,
            max_steps: int) -> Schedule:
    params = bind_params(module, dict(overrides or {}))
    ex = _Expander(module, max_ops, max_steps)
    top = _Scope()
    top.vars.update(params)
    decls: dict[str, tuple[object, Span]] = {}
    programs: list[A.ProgramBlock] = []
    rank_lines: list[A.RankLine] = []

    for item in module.items:
        if isinstance(item, A.Decl):
            if item.what in decls:
                raise error("duplicate-declaration", f"'{item.what}' is declared twice",
                            item.span, notes=[Note("first declared here", decls[item.what][1])])
            if item.what == "placement":
                value = item.value
                if isinstance(value, tuple):
                    value = tuple(ex.compile(e)(top) for e in value)
            else:
                value = ex.compile(item.value)(top)
            decls[item.what] = (value, item.span)
            _maybe_fix_placement(ex, decls)
        elif isinstance(item, (A.ProgramBlock, A.GreedyBlock)):
            if programs:
                raise error("duplicate-program", "a file holds one 'program' block",
                            item.span, notes=[Note("first program block", programs[0].span)])
            programs.append(item)
        elif isinstance(item, A.RankLine):
            rank_lines.append(item)
        else:
            ex.compile_stmt(item)(top)

    name = module.header.name if module.header else _stem(module.path)
    param_tuple = tuple(params.items())
    if programs and rank_lines:
        raise error("mixed-forms",
                    "a file holds either a 'program' block or literal 'rank N:' lines, not both",
                    rank_lines[0].span, notes=[Note("program block", programs[0].span)])
    if rank_lines:
        return _literal_schedule(module, name, param_tuple, decls, rank_lines, max_steps)
    if not programs:
        raise error("no-program", "the file defines no program: add a 'program r { ... }' "
                    "block or literal 'rank N: ...' lines",
                    module.header.span if module.header else None)
    for what in ("ranks", "microbatches"):
        if what not in decls:
            raise error("missing-declaration", f"missing '{what}' declaration",
                        programs[0].span, hints=[f"add e.g. '{what} P'" if what == "ranks"
                                                 else "add e.g. 'microbatches M'"])
    _maybe_fix_placement(ex, decls, final=True)
    ranks = decls["ranks"][0]
    ex.microbatches = decls["microbatches"][0]
    if ex.microbatches < 1:
        raise error("bad-declaration",
                    f"microbatches must be at least 1, got {ex.microbatches}",
                    decls["microbatches"][1])

    block = programs[0]
    if isinstance(block, A.GreedyBlock):
        from .synth.block import expand_greedy
        out_programs = expand_greedy(ex, block, top, ranks)
    else:
        body = ex.compile_block(block.body)
        out_programs = []
        for r in range(ranks):
            scope = _Scope(top)
            scope.vars[block.rank_var] = r
            scope.vars["$rank"] = r
            ex.reset_rank()
            body(_Scope(scope))
            out_programs.append(tuple(ex.out))
    return Schedule(name, param_tuple, ranks, len(ex.placement), ex.microbatches,
                    ex.placement, tuple(out_programs), module.path)


def _stem(path: str) -> str:
    import os
    return os.path.splitext(os.path.basename(path))[0]


def _maybe_fix_placement(ex: _Expander, decls: dict, final: bool = False) -> None:
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
    _check_size("ranks", ranks, ex.max_steps, rspan)
    _check_size("stages", stages, ex.max_steps, sspan)
    kind, pspan = decls.get("placement", ("looped", rspan))
    if isinstance(kind, tuple):
        if len(kind) != stages:
            raise error("bad-placement",
                        f"the placement lists {len(kind)} rank(s) but there are {stages} stages",
                        pspan, hints=["entry s is the rank that holds stage s"])
        for s, r in enumerate(kind):
            if not 0 <= r < ranks:
                raise error("bad-placement",
                            f"placement puts stage {s} on rank {r}, out of range 0..{ranks - 1}",
                            pspan)
        placement = tuple(kind)
    else:
        if stages % ranks:
            if not final:
                return  # a later 'placement' may fix it; 'final' reports it
            raise error("bad-placement",
                        f"'{kind}' placement needs stages ({stages}) divisible by ranks "
                        f"({ranks})", decls.get("stages", decls["ranks"])[1])
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


def _check_size(what: str, n: int, cap: int, span: Span | None) -> None:
    """Ranks and stages are looped over while expanding: they count against --max-steps."""
    if n > cap:
        raise error("too-large", f"{what} = {n:,} exceeds the expansion cap of {cap:,}", span,
                    hints=["the cap is --max-steps"])


def _literal_schedule(module: A.Module, name: str, params, decls, rank_lines,
                      max_steps: int = DEFAULT_MAX_STEPS) -> Schedule:
    """Build a schedule from literal ``rank N: ...`` lines, inferring what is not declared."""
    seen: dict[int, A.RankLine] = {}
    for rl in rank_lines:
        if rl.rank in seen:
            raise error("duplicate-rank", f"rank {rl.rank} is listed twice", rl.rank_span,
                        notes=[Note("first listed here", seen[rl.rank].span)])
        seen[rl.rank] = rl
    ranks = decls["ranks"][0] if "ranks" in decls else max(seen) + 1
    for r, rl in seen.items():
        if not 0 <= r < ranks:
            raise error("rank-out-of-range", f"rank {r} is out of range 0..{ranks - 1}",
                        rl.rank_span)
    all_actions = [(r, a) for r, rl in seen.items() for it in rl.items
                   for a in _literal_actions(it)]
    max_stage = max((a.stage for _, a in all_actions), default=-1)
    stages = decls["stages"][0] if "stages" in decls else max_stage + 1
    for _, a in all_actions:
        if a.stage >= stages:
            raise error("stage-out-of-range",
                        f"action {a} names stage {a.stage}, out of range 0..{stages - 1}",
                        a.span)
    if "microbatches" in decls:
        mbs = decls["microbatches"][0]
    else:
        mbs = max((a.mb for _, a in all_actions), default=-1) + 1
    _check_size("ranks", ranks, max_steps, rank_lines[0].span)
    _check_size("stages", stages, max_steps, rank_lines[0].span)
    if "placement" in decls:
        ex = _Expander(module, 0, max_steps)
        d = dict(decls)
        d.setdefault("ranks", (ranks, rank_lines[0].span))
        d.setdefault("stages", (stages, rank_lines[0].span))
        _maybe_fix_placement(ex, d, final=True)
        placement = ex.placement
    else:
        placement = infer_placement(ranks, stages, all_actions)
    programs = []
    for r in range(ranks):
        rl = seen.get(r)
        items = []
        for it in rl.items if rl else ():
            if isinstance(it, A.LiteralGroup) and it.form == "wait":
                items.append(Wait(it.actions, it.span))
            elif isinstance(it, A.LiteralGroup):
                items.append(Group(it.actions, it.span, deferred=it.form == "post"))
            else:
                items.append(it)
        programs.append(tuple(items))
    return Schedule(name, params, ranks, stages, mbs, placement, tuple(programs), module.path)


def _literal_actions(it) -> tuple[Action, ...]:
    """The actions a literal item contributes (a wait contributes none of its own)."""
    if isinstance(it, A.LiteralGroup):
        return () if it.form == "wait" else it.actions
    return it.actions if isinstance(it, Overlap) else (it,)


def infer_placement(ranks: int, stages: int, actions) -> tuple[int, ...]:
    """Placement from which rank runs each stage's compute actions.

    ``actions`` is an iterable of (rank, Action).  Raises PpirError when a stage runs on two
    ranks or on none.
    """
    where: dict[int, tuple[int, Action]] = {}
    for r, a in actions:
        if not a.kind.is_compute:
            continue
        if a.stage in where and where[a.stage][0] != r:
            r0, a0 = where[a.stage]
            raise error("placement-conflict",
                        f"stage {a.stage} runs on rank {r0} and on rank {r}; a stage lives on "
                        f"one rank", a.span, notes=[Note(f"{a0} on rank {r0}", a0.span)])
        where.setdefault(a.stage, (r, a))
    missing = [s for s in range(stages) if s not in where]
    if missing:
        raise error("placement-unknown",
                    f"stage {missing[0]} runs on no rank, so its placement is unknown",
                    hints=["declare 'placement [...]' (or pass --placement)"],
                    exit_code=EXIT_USAGE)
    return tuple(where[s][0] for s in range(stages))


__all__ = ["expand", "bind_params", "infer_placement", "PpirError"]
