"""Emitting ops while a program block runs: ``F``/``B``/``I``/``W``/``FB`` statements become
actions of the rank being expanded, with ``next`` microbatches counted per chunk and the
pending weight passes (every I adds one, every W removes its own) kept in order.

:class:`OpEmitter` is a part of :class:`ppir.frontend.interpreter.Interpreter` (which holds
the state it uses: ``stages_of``, ``microbatches``, ``out``, ``count``, ``wq`` and the op cap).
"""

from __future__ import annotations

from ppir.diagnostics import EXIT_INVALID, EXIT_USAGE, count, did_you_mean, error, rank_list
from ppir.frontend import ast as A
from ppir.frontend.scope import values_text
from ppir.ir import Action, OpKind, Overlap, Span

_OPS = {"F": OpKind.F, "B": OpKind.B, "I": OpKind.I, "W": OpKind.W}


class OpEmitter:
    def _compile_op(self, st: A.OpStmt):
        if st.op == "FB":
            return self._compile_fb(st)
        kind = _OPS.get(st.op)
        if kind is None:
            raise error(
                "unknown-op",
                f"unknown operation '{st.op}'",
                st.name_span,
                hints=did_you_mean(st.op, list(_OPS) + ["FB"])
                or ["ops are F, B, I, W and FB (an overlapped forward and backward)"],
            )
        if not 1 <= len(st.args) <= 2:
            raise error(
                "bad-call",
                f"{st.op} takes (microbatch) or (microbatch, chunk), "
                f"{count(len(st.args), 'argument')} given",
                st.span,
            )
        mb_f = self._mb_arg(st.args[0])
        ch_f = self.compile(st.args[1]) if len(st.args) == 2 else (lambda s: 0)
        span = st.span
        any_chunk = kind is OpKind.W and mb_f is None and len(st.args) == 1
        names = (A.value_names(st.args[0]), A.value_names(st.args[-1]) if len(st.args) == 2 else ())

        def op(scope):
            self._emit(self._action(kind, mb_f, None if any_chunk else ch_f, scope, span, names))

        return op

    def _compile_fb(self, st: A.OpStmt):
        if len(st.args) != 4:
            raise error(
                "bad-call",
                f"FB takes (mb_f, chunk_f, mb_b, chunk_b), {count(len(st.args), 'argument')} given",
                st.span,
            )
        mf, cf = self._mb_arg(st.args[0]), self.compile(st.args[1])
        mb, cb = self._mb_arg(st.args[2]), self.compile(st.args[3])
        span = st.span
        f_names = (A.value_names(st.args[0]), A.value_names(st.args[1]))
        b_names = (A.value_names(st.args[2]), A.value_names(st.args[3]))

        def op(scope):
            f = self._action(OpKind.F, mf, cf, scope, span, f_names)
            b = self._action(OpKind.B, mb, cb, scope, span, b_names)
            try:
                self._emit(Overlap((f, b), span))
            except ValueError as e:
                raise error("bad-overlap", str(e), span) from None

        return op

    def _mb_arg(self, e: A.Expr):
        """None for the word ``next``, else the compiled microbatch expression."""
        return None if isinstance(e, A.Name) and e.name == "next" else self.compile(e)

    def _action(self, kind: OpKind, mb_f, ch_f, scope, span: Span, names=((), ())) -> Action:
        """``names``: the names whose values an out-of-range microbatch or chunk shows
        (:func:`ppir.frontend.ast.value_names` of the two arguments)."""
        rank = self.rank  # the rank a program block expands: its scope's $rank
        if rank is None:  # an op run elsewhere (a greedy block's body): the scope's
            rank = scope.lookup("$rank")
        stages = self.stages_of[rank]
        if ch_f is None:
            stage = None
        else:  # self._chunk_stage, with its check inlined: once per op
            ch = ch_f(scope)
            if 0 <= ch < len(stages):
                stage = stages[ch]
            else:
                stage = self._chunk_stage(rank, ch, span, values_text(scope, names[1]), op=True)
        if kind is OpKind.W and mb_f is None:
            q = [x for x in self.wq if stage is None or x[0] == stage]
            if not q:
                c = "" if stage is None else str(stages.index(stage))
                what = f" of chunk {c}" if c else ""
                raise error(
                    "no-pending-weight",
                    f"W(next{', ' + c if c else ''}) on rank {rank}: no weight pass{what} is "
                    "pending (every I adds one)",
                    span,
                    hints=[f"guard it with 'if pending_w({c}) > 0 {{ ... }}'"],
                    exit_code=EXIT_INVALID,  # as the verifier's W before its I
                )
            return self._count(Action(q[0][0], kind, q[0][1], span))
        fwd = kind is OpKind.F
        mb = self.count.get((stage, fwd), 0) if mb_f is None else mb_f(scope)
        M = self.microbatches
        if not 0 <= mb < M:
            why = (
                " (the next one after every microbatch ran)"
                if mb_f is None
                else values_text(scope, names[0])
            )
            raise error(
                "microbatch-out-of-range",
                f"microbatch {mb} is out of range 0..{M - 1} (microbatches = {M}) on rank "
                f"{rank}{why}",
                span,
                # understood but wrong, as the verifier's out-of-range for a literal program
                exit_code=EXIT_INVALID,
            )
        return self._count(Action(stage, kind, mb, span))

    def _need_placement(self, span: Span):
        if self.placement is None:
            raise error(
                "placement-not-ready",
                "stage(), chunks() and rank_of() need 'ranks', 'stages' and 'placement' "
                "declared before they are used",
                span,
            )

    def _rank_stages(self, r: int, span: Span) -> tuple[int, ...]:
        self._need_placement(span)
        if not 0 <= r < len(self.stages_of):
            raise error(
                "rank-out-of-range", f"rank {r} is out of range 0..{len(self.stages_of) - 1}", span
            )
        return self.stages_of[r]

    def _stage(self, r: int, c: int, span: Span) -> int:
        self._rank_stages(r, span)
        return self._chunk_stage(r, c, span)

    def _rank_of(self, s: int, span: Span) -> int:
        self._need_placement(span)
        if not 0 <= s < len(self.placement):
            raise error(
                "stage-out-of-range",
                f"stage {s} is out of range 0..{len(self.placement) - 1}",
                span,
            )
        return self.placement[s]

    def _chunk_stage(self, rank: int, ch: int, span: Span, values: str = "", op=False) -> int:
        """The stage of ``rank``'s chunk ``ch``; a ``chunk-out-of-range`` error ending with
        ``values`` (the values its expression read, ``" (with c = 2)"``) when it holds none:
        exit 1 for an ``op``'s chunk (understood but wrong, as a microbatch out of range), 2 for
        a builtin's argument (``stage(r, c)``, ``pending_w(c)``), as their rank or stage out of
        range is."""
        stages = self.stages_of[rank]
        if not 0 <= ch < len(stages):
            raise error(
                "chunk-out-of-range",
                f"chunk {ch} is out of range: rank {rank} holds "
                f"{count(len(stages), 'chunk')} (0..{len(stages) - 1}){values}",
                span,
                hints=self._chunk_hints(rank, ch),
                exit_code=EXIT_INVALID if op else EXIT_USAGE,
            )
        return stages[ch]

    def _chunk_hints(self, rank: int, ch: int) -> list[str]:
        """Where a rank's chunks come from (the stages the placement puts on it) and, for a
        chunk past what every rank holds, the stage count that gives every rank that many."""
        ranks, stages = len(self.stages_of), len(self.placement)
        held = rank_list(self.stages_of[rank], noun="stage")
        hints = [
            f"chunk c is the c-th smallest stage the rank holds: rank {rank} holds {held} "
            f"({count(stages, 'stage')} on {count(ranks, 'rank')})"
        ]
        mine = self.stages_of[rank]
        if ch in mine:  # a stage given where a chunk goes: F(m, stage(r, c))?
            hints.append(
                f"if {ch} is meant as a stage, it is rank {rank}'s chunk {mine.index(ch)}: an "
                "op's second argument is the rank's local chunk, not a stage (stage(r, c) turns "
                "a chunk into its stage, not back)"
            )
        k = ch + 1
        if k * ranks > stages:
            hints.append(
                f"declare stages as {k} x ranks (here {k * ranks:,}): a looped or vshape "
                f"placement then gives every rank {k} chunks"
            )
        return hints

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
            raise error(
                "op-limit",
                f"expansion produced more than {self.max_ops:,} ops",
                item.span,
                hints=["a runaway loop? the cap is --max-ops"],
            )
        self.out.append(item)
