"""Expansion: bind parameters, evaluate a .pps module and produce per-rank programs.

``expand(module, {"P": 4, "M": 8})`` returns a compute-only (or, for literal files, possibly
already lowered) :class:`ppir.ir.Schedule`.  Every failure is a :class:`PpirError` whose
diagnostic points at the offending source span (or names the offending ``-D`` value).

Semantics of the language, in short (README "The .pps language" has the long form):
* integers only; ``//`` and ``%`` floor like Python; comparisons and ``and``/``or``/``not`` give
  0 or 1; ``for i in a .. b`` runs ``i = a, a+1, ..., b-1``;
* ``let`` binds a name once where it is visible (blocks open scopes; no binding in one may hide
  a name of a scope around it, :mod:`ppir.frontend.bindings`); ``def f(x) = expr`` is a pure
  function that sees the names visible where it is defined;
* builtins: ``min``, ``max``, ``abs``, ``stage(r, c)`` (global stage of rank r's local chunk c),
  ``chunks(r)`` (how many stages rank r holds), ``rank_of(s)``;
* ``F(mb)``, ``F(mb, chunk)`` and likewise ``B``, ``I``, ``W`` emit an op for the current rank's
  local chunk (default 0); ``FB(mb_f, chunk_f, mb_b, chunk_b)`` emits one overlapped step (a
  forward and a full backward run as one item, :class:`ppir.ir.Overlap`);
* ``next`` as a microbatch means "the next one of this chunk": forwards and backwards (B or I)
  count per chunk; ``W(next)`` runs the oldest pending weight pass of the rank (any chunk) and
  ``pending_w()`` says how many are pending (every I adds one, every W removes its own);
  ``next`` is reserved (never bound, no value elsewhere) and a ``def`` takes no op's name;
* ``program r greedy { ... }`` builds each rank's order by list scheduling, ``program r
  pattern { ... }`` from a repeating building block (:mod:`ppir.synth.block`).
"""

from __future__ import annotations

import operator
from itertools import islice

from ppir.diagnostics import EXIT_INVALID, Note, PpirError, count, error
from ppir.frontend import ast as A
from ppir.frontend.declarations import at_least_one, resolve_pipelines, resolve_placement
from ppir.frontend.interpreter import Interpreter, Scope
from ppir.frontend.keywords import check_known, given
from ppir.frontend.limits import (
    DEFAULT_MAX_OPS,
    DEFAULT_MAX_STEPS,
    MAX_INT,
    check_size,
    check_work,
    show_value,
)
from ppir.frontend.literal import infer_placement, literal_schedule
from ppir.frontend.trips import program_frame
from ppir.ir import Schedule, Span


def bind_params(
    module: A.Module, overrides: dict[str, int], flag: str = "-D", *, known_only: bool = False
) -> dict[str, int]:
    """Header defaults overridden by ``overrides``; errors for unknown and missing ones, naming
    ``flag``, the option that gives the values (``-D``, or ``-D2`` for a compared schedule).
    A default written as an expression (``N = P``) is evaluated with the parameters before it
    bound to their values; with ``known_only`` one that fails is left out instead (what is
    known of the values, for a report on values that do not expand)."""
    header = module.header
    declared = {p.name: p for p in header.params} if header else {}
    check_known(overrides, declared, schedule_where(module), flag)
    overrides = {name: integer_param(name, value) for name, value in overrides.items()}
    for name, value in overrides.items():
        check_param_range(name, value, flag)
    values: dict[str, int] = {}
    for name, p in declared.items():
        if name in overrides:
            values[name] = overrides[name]
        elif p.default_expr is not None:
            scope = Scope()
            scope.vars.update(values)  # a default sees the parameters before it
            evaluate = Interpreter(module, DEFAULT_MAX_OPS, DEFAULT_MAX_STEPS).compile
            try:
                values[name] = evaluate(p.default_expr)(scope)
            except PpirError as e:
                if known_only:
                    continue
                if e.kind == "undefined-name":
                    d = e.diagnostics[0]
                    hint = f"the default of '{name}' may use only the parameters before it"
                    raise error(d.kind, d.message, d.span, hints=(*d.hints, hint)) from None
                raise
        elif p.default is None:
            raise error(
                "missing-parameter",
                f"parameter '{name}' has no default; give it with {given(flag, name, '...')}",
                p.span,
            )
        else:
            values[name] = p.default
    return values


def check_param_range(name: str, value: int, flag: str = "-D", kind: str = "bad-define") -> None:
    """An error ``kind`` naming ``flag NAME=VALUE`` (``flag``: the option that gave it; empty
    for the Python API) for a parameter value past ppir's integers."""
    if not -MAX_INT <= value <= MAX_INT:
        raise error(
            kind,
            f"{given(flag, name, show_value(value))}: out of range "
            "(ppir integers are at most 2**63 - 1)",
        )


def check_given(module: A.Module, names, how) -> None:
    """The ``missing-parameter`` error, at its header entry, for the first parameter with no
    default that ``names`` leaves out, before any expansion; ``how(name)`` words where a
    command takes it (``ppir fuzz``: ``--over M=... or -D M=...``)."""
    for p in module.header.params if module.header else ():
        if p.default is None and p.default_expr is None and p.name not in names:
            raise error(
                "missing-parameter",
                f"parameter '{p.name}' has no default; give it with {how(p.name)}",
                p.span,
            )


def schedule_where(module: A.Module) -> str:
    """How parameter errors name a .pps schedule: ``schedule '1f1b'`` by its header, else its
    path."""
    return f"schedule '{module.header.name}'" if module.header else module.path


def integer_param(name: str, value) -> int:
    """``value`` as an int (the CLI parses ``-D`` values already; the Python API passes them as
    they come): any integer type (``operator.index``) but bool, else a ppir error."""
    try:
        if isinstance(value, bool):
            raise TypeError
        return operator.index(value)
    except TypeError:
        raise error(
            "bad-define",
            f"the value of '{name}' must be an integer, got {type(value).__name__} {value!r}",
        ) from None


def expand(
    module: A.Module,
    overrides: dict[str, int] | None = None,
    *,
    max_ops: int = DEFAULT_MAX_OPS,
    max_steps: int = DEFAULT_MAX_STEPS,
    define_flag: str = "-D",
) -> Schedule:
    """Expand a parsed module for concrete parameter values into a :class:`Schedule`;
    ``define_flag`` is the option parameter errors name."""
    for name, cap in (("max_ops", max_ops), ("max_steps", max_steps)):  # API callers' caps
        if isinstance(cap, bool) or not isinstance(cap, int):
            raise error("bad-usage", f"{name} takes an int, got {type(cap).__name__} {cap!r:.40}")
    ex = Interpreter(module, max_ops, max_steps)
    try:
        return _expand(module, overrides, ex, define_flag)
    except RecursionError:  # a last resort: the parser caps nesting, calls cap their depth
        raise error(
            "too-deep",
            "this nests too deeply to evaluate",
            ex.current,
            hints=["split the expression with 'let' or 'def'"],
        ) from None


def evaluate_top_level(
    module: A.Module, overrides: dict[str, int] | None = None, *, max_steps=DEFAULT_MAX_STEPS
) -> tuple[int, int, int] | None:
    """Bind the parameters and run the top-level items (declarations, lets, defs, requires)
    without expanding any program: a cheap test of whether parameters are supported (a failed
    ``require`` raises ``require-failed``).  Returns the declared (ranks, stages, pipelines),
    None when the file does not declare them (a literal program's come from its rank lines)."""
    ex = Interpreter(module, DEFAULT_MAX_OPS, max_steps)
    try:
        _, decls, _, lines = _top_level(module, bind_params(module, dict(overrides or {})), ex)
    except RecursionError:
        raise error("too-deep", "this nests too deeply to evaluate", ex.current) from None
    if "ranks" not in decls or (lines and "stages" not in decls):
        return None  # a literal program's stages come from its actions
    ranks = decls["ranks"][0]
    stages = decls.get("stages", (ranks,))[0]
    return ranks, stages, resolve_pipelines(decls, stages, ex)


def _top_level(module: A.Module, params: dict[str, int], ex: Interpreter):
    """Run the top-level items in order: (scope, declarations, program blocks, rank lines)."""
    top = ex.top = Scope()
    top.vars.update(params)
    decls: dict[str, tuple[object, Span]] = {}
    programs: list[A.ProgramBlock] = []
    rank_lines: list[A.RankLine] = []

    for item in module.items:
        ex.current = item.span
        if isinstance(item, A.Decl):
            if item.what in decls:
                raise error(
                    "duplicate-declaration",
                    f"'{item.what}' is declared twice",
                    item.span,
                    notes=[Note("first declared here", decls[item.what][1])],
                )
            if item.what == "forward_only":
                value = True
            elif item.what == "placement":
                value = item.value
                if isinstance(value, tuple):
                    ex.decl_exprs["placement"] = value  # an entry's error points at it
                    value = tuple(ex.compile(e)(top) for e in value)
            else:
                value = ex.compile(item.value)(top)
                ex.decl_exprs[item.what] = item.value
            decls[item.what] = (value, item.span)
            resolve_placement(ex, decls)
        elif isinstance(item, (A.ProgramBlock, A.GreedyBlock, A.PatternBlock)):
            if programs:
                raise error(
                    "duplicate-program",
                    "a file holds one 'program' block",
                    item.span,
                    notes=[Note("first program block", programs[0].span)],
                )
            programs.append(item)
        elif isinstance(item, A.RankLine):
            rank_lines.append(item)
        else:
            ex.compile_stmt(item)(top)
    return top, decls, programs, rank_lines


def _expand(
    module: A.Module, overrides: dict[str, int] | None, ex: Interpreter, flag: str = "-D"
) -> Schedule:
    params = bind_params(module, dict(overrides or {}), flag)
    max_steps = ex.max_steps
    top, decls, programs, rank_lines = _top_level(module, params, ex)

    name = module.header.name if module.header else _stem(module.path)
    param_tuple = tuple(params.items())
    if programs and rank_lines:
        raise error(
            "mixed-forms",
            "a file holds either a 'program' block or literal 'rank N:' lines, not both",
            rank_lines[0].span,
            notes=[Note("program block", programs[0].span)],
        )
    if rank_lines:
        return literal_schedule(module, name, param_tuple, decls, rank_lines, max_steps, ex.max_ops)
    if not programs:
        first = module.header or (module.items[0] if module.items else None)
        raise error(
            "no-program",
            "the file defines no program: add a 'program r { ... }' "
            "block or literal 'rank N: ...' lines",
            first.span if first else _file_start(module),
        )
    for what in ("ranks", "microbatches"):
        if what not in decls:
            raise error(
                "missing-declaration",
                f"missing '{what}' declaration",
                programs[0].span,
                hints=[f"add e.g. '{what} P'" if what == "ranks" else "add e.g. 'microbatches M'"],
            )
    resolve_placement(ex, decls, final=True)
    ranks = decls["ranks"][0]
    ex.microbatches = decls["microbatches"][0]
    mspan = decls["microbatches"][1]
    at_least_one(ex, decls, "microbatches")
    check_size("microbatches", ex.microbatches, max_steps, mspan)
    stages = len(ex.placement)
    check_work(
        2 * stages * ex.microbatches,
        f"{count(stages, 'stage')} x {count(ex.microbatches, 'microbatch')}",
        ex.max_ops,
        mspan,
    )

    block = programs[0]
    if not isinstance(block, A.ProgramBlock) and "pipelines" in decls and decls["pipelines"][0] > 1:
        raise error(
            "unsupported",
            "greedy and pattern programs build one pipeline; write this one as 'program r { ... }'",
            decls["pipelines"][1],
        )
    if isinstance(block, A.GreedyBlock):
        from ppir.synth.block import expand_greedy

        out_programs = expand_greedy(ex, block, top, ranks)
    elif isinstance(block, A.PatternBlock):
        from ppir.synth.block import expand_pattern

        out_programs = expand_pattern(ex, block, top, ranks)
    else:
        frame = program_frame(block)
        frame.stop[0] = ranks
        ex.frames.append(frame)
        try:
            body = ex.compile_block(block.body)
        finally:
            ex.frames.pop()
        out_programs = []
        ex.current = block.span
        for r in range(ranks):
            ex.rank = r
            scope = Scope(top)
            scope.vars[block.rank_var] = r
            scope.vars["$rank"] = r
            ex.reset_rank()
            body(Scope(scope))
            out_programs.append(tuple(ex.out))
        ex.rank = None
        if not any(out_programs):
            raise _no_ops(block, stages, ex.microbatches, ex.empty_loops.values())
    return Schedule(
        name,
        param_tuple,
        ranks,
        len(ex.placement),
        ex.microbatches,
        ex.placement,
        tuple(out_programs),
        module.path,
        resolve_pipelines(decls, len(ex.placement), ex),
        "forward_only" in decls,
        tuple(ex.empty_loops.values()),
        mspan,
    )


SHOWN_OPS = 10  # missing ops a program that emits none lists in its note


def _no_ops(block: A.ProgramBlock, stages: int, microbatches: int, empty_loops) -> PpirError:
    """The ``incomplete`` error, at the program block, for a program that emits no op on any
    rank: every forward and backward is missing (the verifier would locate each missing op at
    an op of the program, and there is none), one finding with a note listing the first ops,
    and one at each loop that would have emitted ops but ran zero times (on its first rank)."""
    first: dict = {}  # a loop's span -> why it ran zero times on the first rank it did
    for _, _, span, why in empty_loops:
        first.setdefault(span, why)
    pairs = ((st, m) for st in range(stages) for m in range(microbatches))
    ops = [f"{st}{k}{m}" for st, m in islice(pairs, SHOWN_OPS // 2) for k in "FB"]
    total = 2 * stages * microbatches
    more = f", ... ({total - len(ops)} more)" if total > len(ops) else ""
    return error(
        "incomplete",
        f"every forward and backward is missing: program {block.rank_var} emits no ops on any rank",
        block.span,
        hints=["emit ops with F(mb), B(mb) (or I(mb) then W(mb)), e.g. 'for m in 0 .. M { F(m) }'"],
        notes=[
            Note(
                f"{total} ops are missing, a forward and a backward of each (stage, microbatch): "
                + ", ".join(ops)
                + more
            ),
            *(Note(why, span) for span, why in first.items()),
        ],
        exit_code=EXIT_INVALID,  # understood but wrong, as the verifier's 'incomplete' exits
    )


def _file_start(module: A.Module) -> Span:
    """Line 1, column 1 of the module's file (for findings about the whole file)."""
    return Span(module.path, 1, 1, 1, 1, module.source)


def _stem(path: str) -> str:
    """The file's stem as a schedule name (one a .pps header can hold, so that the schedule
    can be written out: ``my sched.pps`` -> ``my_sched``)."""
    import os

    from ppir.frontend.parser import to_schedule_name

    return to_schedule_name(os.path.splitext(os.path.basename(path))[0])


__all__ = [
    "expand",
    "evaluate_top_level",
    "bind_params",
    "integer_param",
    "infer_placement",
    "PpirError",
    "DEFAULT_MAX_OPS",
    "DEFAULT_MAX_STEPS",
]
