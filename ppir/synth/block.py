"""Expansion of ``program r greedy { ... }`` blocks: .pps options -> :mod:`.greedy` engine.

Inside the block, per rank ``r`` (names from ``let``/``def`` visible as usual):

``memory e``     cap on the chunk activations rank r holds (default: no cap);
``split e``      1 (default): backward as I then W; 0: one full B;
``cost K = e``   integer cost of one op of kind K in F, B, I, W (default 1, 2, 1, 1);
``priority e``   evaluated for every ready op, smallest first (default: B/I, then F, then W).
                 It sees ``mb``, ``chunk``, ``stage``, ``is_f``, ``is_b`` (B or I), ``is_w``,
                 ``mem`` (chunk activations held before the op) and ``time``.

``split`` and the costs must be the same on every rank.  Errors are ppir diagnostics at the
offending line: a duplicate option, a cost that is not positive, a cap below 1, a cap so small
that no rank can progress.
"""

from __future__ import annotations

from ppir.diagnostics import Note, error
from ppir.frontend import ast as A
from ppir.ir import Action, OpKind, Span
from ppir.synth.greedy import Candidate, GreedySpec, GreedyStuck, default_priority, list_schedule

_KINDS = {"F": OpKind.F, "B": OpKind.B, "I": OpKind.I, "W": OpKind.W}
_DEFAULT_COSTS = {OpKind.F: 1, OpKind.B: 2, OpKind.I: 1, OpKind.W: 1}


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
                split = int(bool(value(scope)))
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
                        f"cost {st.kind} must be a positive integer, got {costs[kind]}",
                        st.span,
                    )
        for name, val in (("split", split), ("costs", costs)):
            if name in global_opts and global_opts[name][0] != val:
                raise error(
                    "rank-dependent-option",
                    f"'{name}' must be the same on every rank (rank 0 and rank {r} differ)",
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
        tuple(global_opts["costs"][0].items()),
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
            is_b=int(c.kind in (OpKind.B, OpKind.I)),
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
