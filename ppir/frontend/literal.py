"""Literal schedules: ``rank N: ...`` lines in torch's action text, with what is not declared
(ranks, stages, microbatches, placement) inferred from the actions."""

from __future__ import annotations

from ppir.diagnostics import EXIT_USAGE, Note, error
from ppir.frontend import ast as A
from ppir.frontend.declarations import resolve_pipelines, resolve_placement
from ppir.frontend.interpreter import Interpreter
from ppir.frontend.limits import check_size, check_work, count
from ppir.ir import Action, Group, Overlap, Reduce, Schedule, Span, Wait


def literal_schedule(
    module: A.Module, name: str, params, decls, rank_lines, max_steps: int, max_ops: int
) -> Schedule:
    """Build a schedule from literal ``rank N: ...`` lines, inferring what is not declared."""
    seen: dict[int, A.RankLine] = {}
    for rl in rank_lines:
        if rl.rank in seen:
            raise error(
                "duplicate-rank",
                f"rank {rl.rank} is listed twice",
                rl.rank_span,
                notes=[Note("first listed here", seen[rl.rank].span)],
            )
        seen[rl.rank] = rl
    ranks = decls["ranks"][0] if "ranks" in decls else max(seen) + 1
    rspan = decls["ranks"][1] if "ranks" in decls else seen[max(seen)].rank_span
    check_size("ranks", ranks, max_steps, rspan)
    check_size("ranks", ranks, max_ops, rspan, option="--max-ops (a program per rank)")
    for r, rl in seen.items():
        if not 0 <= r < ranks:
            raise error(
                "rank-out-of-range", f"rank {r} is out of range 0..{ranks - 1}", rl.rank_span
            )
    all_actions = [
        (r, a) for r, rl in seen.items() for it in rl.items for a in _literal_actions(it)
    ]
    top = max((a for _, a in all_actions), key=lambda a: a.stage, default=None)
    max_stage = top.stage if top else -1
    stages = decls["stages"][0] if "stages" in decls else max_stage + 1
    sspan = decls["stages"][1] if "stages" in decls else (top.span if top else rspan)
    check_size("stages", stages, max_steps, sspan)
    check_work(2 * stages, count(stages, "stage"), max_ops, sspan)
    for _, a in all_actions:
        if a.stage >= stages:
            raise error(
                "stage-out-of-range",
                f"action {a} names stage {a.stage}, out of range 0..{stages - 1}",
                a.span,
            )
    if "microbatches" in decls:
        mbs, mspan = decls["microbatches"]
    else:  # inferred from the actions: the largest microbatch named, plus one
        last = max((a for _, a in all_actions), key=lambda a: a.mb, default=None)
        mbs, mspan = (last.mb + 1, last.span) if last else (0, rspan)
    check_size("microbatches", mbs, max_steps, mspan)
    check_work(
        2 * stages * mbs, f"{count(stages, 'stage')} x {count(mbs, 'microbatch')}", max_ops, mspan
    )
    if "placement" in decls:
        ex = Interpreter(module, max_ops, max_steps)
        d = dict(decls)
        d.setdefault("ranks", (ranks, rank_lines[0].span))
        d.setdefault("stages", (stages, rank_lines[0].span))
        resolve_placement(ex, d, final=True)
        placement = ex.placement
    else:
        placement = infer_placement(ranks, stages, all_actions, sspan)
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
    pipelines = resolve_pipelines(decls, stages)
    return Schedule(
        name, params, ranks, stages, mbs, placement, tuple(programs), module.path, pipelines
    )


def _literal_actions(it) -> tuple[Action, ...]:
    """The actions a literal item contributes (a wait or a reduce contributes none)."""
    if isinstance(it, Reduce):
        return ()
    if isinstance(it, A.LiteralGroup):
        return () if it.form == "wait" else it.actions
    return it.actions if isinstance(it, Overlap) else (it,)


def infer_placement(ranks: int, stages: int, actions, span: Span | None = None):
    """Placement (a tuple of ranks) from which rank runs each stage's compute actions.

    ``actions`` is an iterable of (rank, Action).  Raises PpirError when a stage runs on two
    ranks or on none (located at ``span``, or at the action that names the highest stage).
    """
    actions = list(actions)
    where: dict[int, tuple[int, Action]] = {}
    for r, a in actions:
        if not a.kind.is_compute:
            continue
        if a.stage in where and where[a.stage][0] != r:
            r0, a0 = where[a.stage]
            raise error(
                "placement-conflict",
                f"stage {a.stage} runs on rank {r0} and on rank {r}; a stage lives on one rank",
                a.span,
                notes=[Note(f"{a0} on rank {r0}", a0.span)],
            )
        where.setdefault(a.stage, (r, a))
    missing = [s for s in range(stages) if s not in where]
    if missing:
        if span is None and actions:
            span = max((a for _, a in actions), key=lambda a: a.stage).span
        raise error(
            "placement-unknown",
            f"stage {missing[0]} runs on no rank, so its placement is unknown",
            span,
            hints=["declare 'placement [...]' (or pass --placement)"],
            exit_code=EXIT_USAGE,
        )
    return tuple(where[s][0] for s in range(stages))
