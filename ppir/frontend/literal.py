"""Literal schedules: ``rank N: ...`` lines in torch's action text, with what is not declared
(ranks, stages, microbatches, placement) inferred from the actions."""

from __future__ import annotations

from typing import NoReturn

from ppir.diagnostics import EXIT_INVALID, EXIT_USAGE, Note, count, error, rank_list
from ppir.frontend import ast as A
from ppir.frontend.declarations import resolve_pipelines, resolve_placement
from ppir.frontend.interpreter import Interpreter
from ppir.frontend.limits import check_size, check_work
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
    all_actions = [
        (r, a) for r, rl in seen.items() for it in rl.items for a in _literal_actions(it)
    ]
    rank_spans = {r: rl.rank_span for r, rl in seen.items()}
    ranks, stages, mbs, placement, pipelines = literal_shape(
        module, decls, rank_spans, all_actions, max_steps, max_ops
    )
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
    return Schedule(
        name,
        params,
        ranks,
        stages,
        mbs,
        placement,
        tuple(programs),
        module.path,
        pipelines,
        "forward_only" in decls,
        microbatches_span=decls["microbatches"][1] if "microbatches" in decls else None,
    )


def literal_shape(
    module: A.Module,
    decls: dict,
    rank_spans: dict[int, Span | None],
    actions: list[tuple[int, Action]],
    max_steps: int,
    max_ops: int,
) -> tuple[int, int, int, tuple[int, ...], int]:
    """(ranks, stages, microbatches, placement, pipelines) of a written-out program, checked:
    the one check of the literal ``rank N:`` lines of a .pps file and of a ``ppir.program/1``
    JSON file (:func:`ppir.frontend.loader.read_json_program`).

    ``decls`` maps what is declared (``ranks``, ``stages``, ``microbatches``, ``placement``,
    ``pipelines``) to (value, span); what is not is inferred from ``actions``, the (rank,
    Action) pairs of the programs.  ``rank_spans`` maps each rank that has a program to where
    it is written.  Sizes must be within the caps, every rank in 0..ranks-1, every action's
    stage in 0..stages-1, the placement a valid one (declarations.resolve_placement) and the
    pipelines divide the stages; an error about an action points at its span.  PpirError
    otherwise."""
    rmax = max(rank_spans, default=0)
    ranks = decls["ranks"][0] if "ranks" in decls else rmax + 1
    rspan = decls["ranks"][1] if "ranks" in decls else rank_spans.get(rmax)
    check_size("ranks", ranks, max_steps, rspan)
    check_size("ranks", ranks, max_ops, rspan, option="--max-ops (a program per rank)")
    for r, span in rank_spans.items():
        if not 0 <= r < ranks:
            raise error("rank-out-of-range", f"rank {r} is out of range 0..{ranks - 1}", span)
    top = max(actions, key=lambda ra: ra[1].stage, default=None)
    max_stage = top[1].stage if top else -1
    stages = decls["stages"][0] if "stages" in decls else max_stage + 1
    sspan = decls["stages"][1] if "stages" in decls else (top[1].span if top else rspan)
    check_size("stages", stages, max_steps, sspan)
    check_work(2 * stages, count(stages, "stage"), max_ops, sspan)
    for _, a in actions:
        if not 0 <= a.stage < stages:
            raise error(
                "stage-out-of-range",
                f"action {a} names stage {a.stage}, out of range 0..{stages - 1}",
                a.span,
                exit_code=EXIT_INVALID,  # names an op it does not have, as out-of-range
            )
    if "microbatches" in decls:
        mbs, mspan = decls["microbatches"]
    else:  # inferred from the actions: the largest microbatch named, plus one
        last = max(actions, key=lambda ra: ra[1].mb, default=None)
        mbs, mspan = (last[1].mb + 1, last[1].span) if last else (0, rspan)
    if mbs < 0:
        raise error("bad-declaration", f"microbatches must be at least 0, got {mbs}", mspan)
    check_size("microbatches", mbs, max_steps, mspan)
    check_work(
        2 * stages * mbs, f"{count(stages, 'stage')} x {count(mbs, 'microbatch')}", max_ops, mspan
    )
    if "placement" in decls:
        ex = Interpreter(module, max_ops, max_steps)
        d = dict(decls)
        d.setdefault("ranks", (ranks, rspan))
        d.setdefault("stages", (stages, sspan))
        resolve_placement(ex, d, final=True)
        placement = ex.placement
    else:
        placement = infer_placement(ranks, stages, actions, sspan, rspan)
    return ranks, stages, mbs, placement, resolve_pipelines(decls, stages)


def _literal_actions(it) -> tuple[Action, ...]:
    """The actions a literal item contributes (a wait or a reduce contributes none)."""
    if isinstance(it, Reduce):
        return ()
    if isinstance(it, A.LiteralGroup):
        return () if it.form == "wait" else it.actions
    return it.actions if isinstance(it, Overlap) else (it,)


def infer_placement(
    ranks: int,
    stages: int,
    actions,
    span: Span | None = None,
    rank_span: Span | None = None,
    rows: list[Span] | None = None,
):
    """Placement (a tuple of ranks) from which rank runs each stage's compute actions.

    ``actions`` is an iterable of (rank, Action).  Raises PpirError when a stage runs on two
    ranks or on none (located at ``span``, or at the action that names the highest stage), or
    a rank of ``ranks`` runs no stage (at its first action, else at its row in ``rows``, one
    span per rank of a file with a row per rank (torch's CSV), else ``rank_span``: where the
    ranks are declared).
    """
    actions = list(actions)
    where: dict[int, tuple[int, Action]] = {}
    for r, a in actions:
        if not a.kind.is_compute:
            continue
        if a.stage in where and where[a.stage][0] != r:
            _placement_conflict(a.stage, actions)
        where.setdefault(a.stage, (r, a))
    missing = [s for s in range(stages) if s not in where]
    if missing:
        s = missing[0]
        if span is None and actions:
            span = max((a for _, a in actions), key=lambda a: a.stage).span
        raise error(
            "placement-unknown",
            f"stage {s} runs on no rank, so its placement is unknown",
            span,
            hints=[
                "declare 'placement [...]' (or pass --placement)"
                if rows is None  # a CSV declares nothing, and a placement leaves s uncomputed
                else f"no row computes stage {s} (no {s}F, {s}B, {s}I or {s}W): stages are "
                "numbered from 0 without gaps, so check the actions' stage indices"
            ],
            exit_code=EXIT_USAGE,
        )
    placement = tuple(where[s][0] for s in range(stages))
    idle = sorted(set(range(ranks)) - set(placement))
    if idle:  # as a program block's placement: every rank holds a stage
        own = next((a.span for r, a in actions if r == idle[0]), None)  # its first action
        if own is None:  # no action at all: a missing (or misnumbered) program line
            busy = {r for r, _ in actions}
            silent = [r for r in idle if r not in busy]
            what = f"rank {idle[0]} holds no stage: it has no actions" + (
                f" (nor {'do' if silent[2:] else 'does'} {rank_list(silent[1:])})"
                if silent[1:]
                else ""
            )
            hints = [
                f"the ranks are 0..{ranks - 1} ('ranks', or the highest rank written) and "
                "each needs a program that computes: number the programs from 0, or declare "
                "fewer ranks"
            ]
            if rows is not None:  # was: the first row, and the .pps words above
                own = rows[idle[0]]
                hints = [
                    "each row is one rank's program, rank 0's first: remove the empty row, "
                    "or give a placement (--placement) that leaves that rank idle"
                ]
        else:
            what = f"rank {idle[0]} holds no stage: none of its actions computes" + (
                f" (nor do those of {rank_list(idle[1:])})" if idle[1:] else ""
            )
            hints = ["give every rank a stage, or declare fewer ranks"]
        raise error(
            "bad-placement",
            what,
            own or rank_span or span or (actions[0][1].span if actions else None),
            hints=hints,
        )
    return placement


def _placement_conflict(stage: int, actions) -> NoReturn:
    """Raise ``placement-conflict`` for ``stage``, computed on two or more ranks.

    The stage's home is the rank that runs most of its compute actions; on a tie, the one that
    runs the fewest other stages (a rank whose only stage it is), then the first.  The error
    is located at the first of its actions on another rank, the stray one a hand edit or a
    mistyped stage index put there, with a note at the home's first; it names every rank that
    runs the stage.
    """
    on: dict[int, list[Action]] = {}
    other: dict[int, set[int]] = {}  # the other stages each rank computes
    for r, a in actions:
        if a.kind.is_compute:
            if a.stage == stage:
                on.setdefault(r, []).append(a)
            else:
                other.setdefault(r, set()).add(a.stage)
    # max keeps the first of equal keys, and dicts keep scan order
    home = max(on, key=lambda r: (len(on[r]), -len(other.get(r, ()))))
    r, a = next((r, a) for r, a in actions if r != home and a.kind.is_compute and a.stage == stage)
    total = sum(map(len, on.values()))
    also = rank_list(sorted(set(on) - {r}))
    raise error(
        "placement-conflict",
        f"stage {stage} runs on rank {r} and on {also}; a stage lives on one rank",
        a.span,
        hints=[f"move {a} to rank {home}, or correct its stage index"],
        notes=[
            Note(
                f"{on[home][0]} on rank {home}, which runs {len(on[home])} of stage {stage}'s "
                f"{total} compute actions",
                on[home][0].span,
            )
        ],
    )
