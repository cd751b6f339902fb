"""Expansion of ``program r greedy { ... }`` blocks (.pps options -> the :mod:`.greedy`
engine) and of ``program r pattern { ... }`` blocks (slots -> the :mod:`.pattern` engine).

Greedy blocks
-------------

Inside the block, per rank ``r`` (names from ``let``/``def`` visible as usual):

``memory e``     cap on the chunk activations rank r holds (default: no cap);
``split e``      1 (default): backward as I then W; 0: one full B;
``cost K = e``   integer cost of one op of kind K in F, B, I, W (default 1, 2, 1, 1);
``priority e``   evaluated for every ready op, smallest first (default: B/I, then F, then W).
                 It sees ``mb``, ``chunk``, ``stage``, ``is_f``, ``is_b`` (B or I), ``is_w``,
                 ``mem`` (chunk activations held before the op) and ``time``.

``split`` and the costs must be the same on every rank.  Errors are ppir diagnostics at the
offending line: a duplicate option, a split other than 0 or 1, a cost that is not positive, a
cap below 1, a cap so small that no rank can progress.

Pattern blocks
--------------
``F(m, c) at e`` and ``I(m, c) at e`` give, for every microbatch ``m`` in ``0 .. microbatches``,
the slot of local chunk ``c``'s forward and backward-input pass on rank ``r`` (``e`` sees ``m``,
``r`` and the names in scope).  Every chunk of every rank needs both, once; weight passes are
placed by the engine.  Errors at the slot line: a pass other than F or I, a chunk out of range,
a slot given twice or negative, two passes in one slot, a pass no later than its producer.
"""

from __future__ import annotations

from dataclasses import replace

from ppir.analysis.config import default_op_costs
from ppir.diagnostics import Note, PpirError, error
from ppir.frontend import ast as A
from ppir.ir import Action, OpKind, Span
from ppir.synth.greedy import Candidate, GreedySpec, GreedyStuck, default_priority, list_schedule
from ppir.synth.pattern import PatternError, PatternSpec, pattern_schedule

_KINDS = {"F": OpKind.F, "B": OpKind.B, "I": OpKind.I, "W": OpKind.W}
_DEFAULT_COSTS = {OpKind(k): int(c) for k, c in default_op_costs().items()}  # whole numbers


def expand_greedy(ex, block: A.GreedyBlock, top, ranks: int) -> list[tuple[Action, ...]]:
    """Per-rank programs for ``block`` (``ex`` is the running expander, ``top`` its scope)."""
    from ppir.frontend.interpreter import Scope as _Scope

    scopes, caps, prio_fns = [], [], []
    global_opts: dict[str, tuple[object, Span]] = {}
    mem_span = block.span
    for r in range(ranks):
        scope = _Scope(_Scope(top))
        scope.vars[block.rank_var] = r
        scope.vars["$rank"] = r
        seen: dict[str, Span] = {}
        cap, prio = None, None
        costs = dict(_DEFAULT_COSTS)
        split = 1
        for st in block.body:
            if not isinstance(st, A.GreedyOpt):
                ex.compile_stmt(st)(scope)
                continue
            key = st.what if st.what != "cost" else f"cost {st.kind}"
            if key in seen:
                raise error(
                    "duplicate-option",
                    f"'{key}' is given twice in this greedy block",
                    st.span,
                    notes=[Note("first given here", seen[key])],
                )
            seen[key] = st.span
            value = ex.compile(st.value)
            if st.what == "priority":
                prio = value
            elif st.what == "memory":
                cap, mem_span = value(scope), st.span
                if cap < 1:
                    raise error(
                        "bad-memory",
                        f"the memory cap must be at least 1 chunk "
                        f"activation, got {cap} on rank {r}",
                        st.span,
                    )
            elif st.what == "split":
                split = value(scope)
                if split not in (0, 1):
                    raise error(
                        "bad-split",
                        f"split must be 1 (backward as I then W) or 0 (one full B), got {split}"
                        + (f" on rank {r}" if r else ""),
                        st.value.span,
                    )
            else:
                kind = _KINDS.get(st.kind)
                if kind is None:
                    raise error(
                        "unknown-op",
                        f"unknown op kind '{st.kind}' in a cost line",
                        st.kind_span,
                        hints=["costs are given for F, B, I and W"],
                    )
                costs[kind] = value(scope)
                if costs[kind] < 1:
                    raise error(
                        "bad-cost",
                        f"cost {st.kind} must be a positive integer, got {costs[kind]}"
                        + (f" on rank {r}" if r else ""),
                        st.span,
                    )
        opts = {"split": split, **{f"cost {k.value}": c for k, c in costs.items()}}
        for name, val in opts.items():
            if name in global_opts and global_opts[name][0] != val:
                raise error(
                    "rank-dependent-option",
                    f"'{name}' must be the same on every rank "
                    f"(rank 0: {global_opts[name][0]}, rank {r}: {val})",
                    seen.get(name, block.span),
                )
            global_opts.setdefault(name, (val, block.span))
        scopes.append(scope)
        caps.append(cap)
        prio_fns.append(prio)
    spec = GreedySpec(
        ranks,
        ex.microbatches,
        ex.placement,
        tuple(caps),
        bool(global_opts["split"][0]),
        tuple((k, global_opts[f"cost {k.value}"][0]) for k in _DEFAULT_COSTS),
    )

    def priority(c: Candidate) -> int:
        fn = prio_fns[c.rank]
        if fn is None:
            return default_priority(c)
        s = _Scope(scopes[c.rank])
        s.vars.update(
            mb=c.mb,
            chunk=c.chunk,
            stage=c.stage,
            is_f=int(c.kind is OpKind.F),
            is_b=int(c.kind.is_backward),
            is_w=int(c.kind is OpKind.W),
            mem=c.mem,
            time=c.time,
        )
        return fn(s)

    try:
        progs = list_schedule(spec, priority)
    except GreedyStuck as e:
        raise error(
            "memory-too-small",
            f"list scheduling is stuck: {e}",
            mem_span,
            hints=["raise the memory cap"],
        ) from None
    ex.ops += sum(len(p) for p in progs)
    if ex.ops > ex.max_ops:
        raise error("op-limit", f"expansion produced more than {ex.max_ops:,} ops", block.span)
    return [tuple(a.with_span(block.span) for a in p) for p in progs]


_PATTERN_KINDS = {"F": OpKind.F, "I": OpKind.I}


def expand_pattern(ex, block: A.PatternBlock, top, ranks: int) -> list[tuple[Action, ...]]:
    """Per-rank programs for a pattern ``block`` (arguments as for :func:`expand_greedy`)."""
    from ppir.frontend.interpreter import Scope as _Scope

    tables: list[dict[Action, int]] = []
    where: dict[tuple[int, int, OpKind], Span] = {}  # (rank, stage, kind) -> its slot line
    for r in range(ranks):
        scope = _Scope(_Scope(top))
        scope.vars[block.rank_var] = r
        scope.vars["$rank"] = r
        table: dict[Action, int] = {}
        for st in block.body:
            if not isinstance(st, A.PatternSlot):
                ex.compile_stmt(st)(scope)
                continue
            kind = _PATTERN_KINDS.get(st.kind)
            if kind is None:
                raise error(
                    "unknown-op",
                    f"a pattern places F and I passes, not '{st.kind}'",
                    st.kind_span,
                    hints=["weight passes (W) fill the free slots by themselves"],
                )
            stage = ex._chunk_stage(r, ex.compile(st.chunk)(scope), st.chunk.span)
            if (r, stage, kind) in where:
                raise error(
                    "duplicate-slot",
                    f"{st.kind} of chunk {ex.stages_of[r].index(stage)} is placed twice "
                    f"on rank {r}",
                    st.span,
                    notes=[Note("first placed here", where[(r, stage, kind)])],
                )
            where[(r, stage, kind)] = st.span
            at = ex.compile(st.at)
            for m in range(ex.microbatches):
                inner = _Scope(scope)
                inner.vars[st.mb_var] = m
                try:
                    t = at(inner)
                except PpirError as e:
                    raise _with_slot_variable(e, st) from None
                if t < 0:
                    raise error(
                        "bad-slot", f"slot {t} of {st.kind}({m}) on rank {r} is negative", st.span
                    )
                table[Action(stage, kind, m, st.span)] = t
        for stage in ex.stages_of[r]:
            for kind in (OpKind.F, OpKind.I):
                if (r, stage, kind) not in where:
                    raise error(
                        "incomplete-pattern",
                        f"rank {r} has no slot for {kind.value} of its chunk "
                        f"{ex.stages_of[r].index(stage)}",
                        block.span,
                        hints=["give every chunk an 'F(m, c) at ...' and an 'I(m, c) at ...'"],
                    )
        tables.append(table)
    spec = PatternSpec(ranks, ex.microbatches, ex.placement, tuple(tables))
    try:
        progs = pattern_schedule(spec)
    except PatternError as e:
        a = e.actions[0]
        raise error(
            "pattern-conflict",
            f"the slots of rank {e.rank} conflict: {e}",
            where[(e.rank, a.stage, a.kind)],
            notes=[
                Note(f"{b} is placed here", where[(ex.placement[b.stage], b.stage, b.kind)])
                for b in e.actions[1:]
            ],
        ) from None
    ex.ops += sum(len(p) for p in progs)
    if ex.ops > ex.max_ops:
        raise error("op-limit", f"expansion produced more than {ex.max_ops:,} ops", block.span)
    return [
        tuple(a if a.kind is not OpKind.W else a.with_span(block.span) for a in p) for p in progs
    ]


def _with_slot_variable(e: PpirError, st) -> PpirError:
    """An undefined name on a slot line: the hint names the line's own microbatch variable
    first (``F(k, 1) at ... + 6 * m`` reads ``m`` where the line calls it ``k``)."""
    d = e.diagnostics[0]
    if d.kind != "undefined-name":
        return e
    own = f"this line's microbatch variable is '{st.mb_var}' ({st.kind}({st.mb_var}, ...))"
    name = d.message.removeprefix("undefined name ").strip("'")
    # a guess that differs only in case ('m' -> 'M') points away from the line's variable
    rest = tuple(h for h in d.hints if h.lower() != f"did you mean '{name.lower()}'?")
    return PpirError([replace(d, hints=(own, *rest)), *e.diagnostics[1:]], e.exit_code)
