"""Layer layouts: how many transformer layers each pipeline stage holds.

* :func:`check_layers` is the even split's count per stage (a ppir error naming the v for
  which the layers do divide, :func:`valid_chunk_counts`); :func:`check_layer_count` refuses a
  layer count that is no positive integer.
* :func:`split_layers` is the one rule the cost model and the memory footprint read: a given
  layout (``--stage-layers``, ``[model] stage_layers``, or the one ``ppir tune`` chose) checked
  against the schedule, else the even split (a ppir error listing the v that work).
* :func:`uneven_layers` is the split ``ppir tune`` proposes when the layers do not divide: the
  first and last stages (embedding, head) take the smaller counts, as Megatron-LM's
  ``--decoder-first-pipeline-num-layers`` / ``--decoder-last-pipeline-num-layers`` let users do.
* :func:`balanced_layers` is the split ``ppir tune`` also tries, whether or not the layers
  divide: the one whose slowest stage is fastest when the last stage also runs the output
  layer (worth ``head`` layers of forward work), which an even split leaves the slowest;
  :func:`rank_balanced_layers` moves layers from it where a rank holding several stages (V
  placements, DualPipe) is left busier than it need be.
* The text form, ``6,7x10,6`` (a count, or ``count x repeats``), is what ``tune`` prints in its
  ``layers`` column and what ``--stage-layers`` reads: :func:`format_stage_layers`,
  :func:`parse_stage_layers`.
"""

from __future__ import annotations

import re
from dataclasses import replace
from fractions import Fraction

from ppir.diagnostics import PpirError, error
from ppir.ir import Schedule, deps

_ENTRY = re.compile(r"(\d+)(?:x(\d+))?")


def valid_chunk_counts(layers: int, ranks: int, limit: int | None = None) -> list[int]:
    """The v for which ``layers`` splits evenly into ranks*v chunks."""
    if layers % ranks:
        return []
    return [v for v in divisors(layers // ranks) if limit is None or v <= limit]


def divisors(n: int) -> list[int]:
    """The positive divisors of ``n``, ascending."""
    return [d for d in range(1, n + 1) if n % d == 0]


def check_layer_count(layers, option: str = "--layers") -> None:
    """A ``bad-model`` error naming ``option`` unless ``layers`` is a positive int."""
    if isinstance(layers, bool) or not isinstance(layers, int) or layers <= 0:
        raise error("bad-model", f"{option} must be a positive integer, got {layers!r:.40}")


def check_layers(layers: int, stages: int, ranks: int) -> int:
    """Layers per stage; a ppir error (exit 2) when ``stages`` does not divide ``layers``."""
    check_layer_count(layers)
    if layers % stages == 0:
        return layers // stages
    ok = valid_chunk_counts(layers, ranks)
    hint = (
        f"for P={ranks}, v in {{{', '.join(map(str, ok))}}} divides {layers} layers"
        if ok
        else f"{layers} layers are not divisible by P={ranks} for any v"
    )
    v = Fraction(stages, ranks)
    raise error(
        "bad-layers",
        f"{layers} layers do not split evenly into {stages} stages "
        f"(P={ranks}, v={v}): {layers} % {stages} = {layers % stages}",
        hints=[hint],
    )


def split_layers(
    layers: int, schedule: Schedule, stage_layers=None, span: int | None = None
) -> tuple[int, ...]:
    """Layers of each stage of ``schedule`` for a model of ``layers`` layers: ``stage_layers``
    checked (one count per stage summing to ``layers``; a schedule of several pipelines, each a
    replica of the model, repeats one pipeline's counts), or the even split
    (:func:`check_layers`).  ``span``: stages per copy of the model (default: the schedule's
    pipeline length)."""
    S = schedule.stages
    span = span or deps.pipeline_length(S, schedule.pipelines)
    if stage_layers is None:
        return (even_layers(layers, schedule, span),) * S
    out = tuple(stage_layers)
    one = out[:span]
    if any(not isinstance(x, int) or isinstance(x, bool) for x in out):
        raise error("bad-layers", f"stage layers {out!r:.60}: each must be a whole number")
    if len(out) != S or any(x < 0 for x in out) or sum(one) != layers or out != one * (S // span):
        if span < S:  # several pipelines: each one's counts make the model
            want = (
                f"one per stage: {schedule.pipelines} pipelines of {span} stages, each "
                f"pipeline's {span} counts summing to the model's {layers} layers and the same "
                "in every pipeline"
            )
            example = uneven_layers(layers, span) * (S // span) if span <= layers else None
        else:
            want = f"one per stage, summing to the model's {layers} layers"
            example = uneven_layers(layers, S) if S <= layers else None
        raise error(
            "bad-layers",
            f"stage layers {format_stage_layers(out)}: {schedule.name} needs {S} non-negative "
            f"counts, {want}; got {len(out)} summing to {sum(out)}",
            hints=[f"e.g. --stage-layers {format_stage_layers(example)}"] if example else [],
        )
    return out


def even_layers(layers: int, schedule: Schedule, span: int | None = None) -> int:
    """Layers per stage of the even split (:func:`check_layers`, ``span`` as for
    :func:`split_layers`); when they do not divide and every stage can hold one, its error
    adds the uneven layout ``--stage-layers`` (a config's ``[model] stage_layers``) takes."""
    S = schedule.stages
    span = span or deps.pipeline_length(S, schedule.pipelines)
    try:
        return check_layers(layers, span, schedule.ranks)
    except PpirError as e:
        d = e.diagnostics[0]
        if d.kind == "bad-layers" and isinstance(layers, int) and 0 < span <= layers:
            counts = format_stage_layers(uneven_layers(layers, span) * (S // span))
            hint = f"or lay them out unevenly: --stage-layers {counts}"
            e.diagnostics[0] = replace(d, hints=(*d.hints, hint))
        raise


def uneven_layers(layers: int, stages: int) -> tuple[int, ...]:
    """``layers`` over ``stages`` as evenly as possible, the first and last stages taking the
    smaller counts (they also hold the embedding and the head); the extra layers go to the
    later middle stages first, which hold fewer microbatches in flight."""
    q, r = divmod(layers, stages)
    out = [q] * stages
    order = list(range(stages - 2, 0, -1)) + [0, stages - 1][: min(2, stages)]
    for s in order[:r]:
        out[s] += 1
    return tuple(out)


def balanced_layers(layers: int, stages: int, head) -> tuple[int, ...]:
    """``layers`` over ``stages`` (each at least one) so that the largest stage forward,
    ``count`` layers or ``count + head`` on the last stage, is as small as it can be; among
    equal ones, the most layers on the last stage.  The others split the rest as
    :func:`uneven_layers` does: extras to the later middle stages first, the first stage last
    (it holds the most microbatches in flight).  ``head``: the output layer's forward work in
    layers (a non-negative number, e.g. a Fraction); with ``head`` 0 and ``layers`` a
    multiple of ``stages``, the even split."""
    if stages == 1:
        return (layers,)
    rest = stages - 1

    def slowest(n: int):  # n layers on the last stage
        return max(-(-(layers - n) // rest), n + head)

    n = min(range(layers - rest, 0, -1), key=slowest)  # ties: the first, most layers
    q, r = divmod(layers - n, rest)
    out = [q] * rest
    for s in [*range(rest - 1, 0, -1), 0][:r]:
        out[s] += 1
    return (*out, n)


def head_layers(model):
    """The output layer's forward FLOPs in layers (a Fraction; both grow with b alike, so it
    holds for every micro-batch size; a layer's attention grows with s squared, the head's
    with s, so it is the model's own seq's)."""
    return Fraction(model.head_forward_flops(), model.forward_flops_per_layer())


def rank_loads(schedule: Schedule, counts, head, weights=None) -> list:
    """The forward work of each rank of ``schedule``, in layers: the layers of each of its
    stages (one pipeline's ``counts``, by model stage), ``head`` more on each last stage, each
    stage's times its weight (``weights``: one per stage, default 1).  Per rank, not per
    stage: a rank of a V placement or of bidirectional DualPipe runs two stages."""
    S, pipelines = schedule.stages, schedule.pipelines
    load = [0] * schedule.ranks
    for s, r in enumerate(schedule.placement):
        n = counts[deps.model_stage(s, S, pipelines)]
        work = n + head if deps.is_last(s, S, pipelines) else n
        load[r] += work * weights[s] if weights else work
    return load


def busiest_rank(schedule: Schedule, counts, head, weights=None):
    """The largest forward work of a rank of ``schedule`` (:func:`rank_loads`)."""
    return max(rank_loads(schedule, counts, head, weights))


def rank_balanced_layers(layers: int, schedule: Schedule, head, weights=None) -> tuple[int, ...]:
    """One pipeline's counts of ``layers`` for ``schedule`` (each at least one) whose busiest
    rank (:func:`busiest_rank`: each stage's work times its weight in ``weights``, one per
    stage as ``--stage-weights`` gives them, default 1) has the least forward work.
    :func:`balanced_layers` balances stages; a rank holding several stages (a V placement's
    first and last, DualPipe's stage r of one pipeline and P-1-r of the other) sums them, so
    that split is kept when no rank has less to do under another (one stage per rank, and many
    others), else layers move one at a time from a stage of a busiest rank to another stage,
    each move lowering the busiest rank's work or the number of ranks that carry it: from the
    stage with the most layers (the earlier on ties) to the one with the fewest (the later on
    ties).  Exact when ranks that share a model stage hold the same ones (looped, V and
    DualPipe placements) and the stages weigh alike, and with ``weights`` where a rank holds
    one stage; where it holds stages of unequal weights the moves stop where no one layer
    moved helps, which is not always the least."""
    S, pipelines = schedule.stages, schedule.pipelines
    span = deps.pipeline_length(S, pipelines)
    start = balanced_layers(layers, span, head)
    holders: list[list] = [[] for _ in range(span)]  # each model stage's ranks and weights
    for s, r in enumerate(schedule.placement):
        holders[deps.model_stage(s, S, pipelines)].append((r, weights[s] if weights else 1))
    counts, loads = list(start), rank_loads(schedule, start, head, weights)

    def worst() -> tuple:
        top = max(loads)
        return top, loads.count(top)

    def move(a: int, b: int, n: int = 1) -> None:  # n layers from model stage a to b
        counts[a], counts[b] = counts[a] - n, counts[b] + n
        for r, w in holders[a]:
            loads[r] -= n * w
        for r, w in holders[b]:
            loads[r] += n * w

    first = now = worst()
    moved = True
    while moved:
        moved = False
        busy = {i for i in range(span) if any(loads[r] == now[0] for r, _ in holders[i])}
        givers = sorted((a for a in busy if counts[a] > 1), key=lambda a: (-counts[a], a))
        takers = sorted(range(span), key=lambda b: (counts[b], -b))
        for a, b in ((a, b) for a in givers for b in takers if a != b):
            move(a, b)
            if worst() < now:
                now, moved = worst(), True
                break
            move(a, b, -1)
    return tuple(counts) if now[0] < first[0] else start


def faster_split(model, schedule: Schedule, current=None, weights=None):
    """One pipeline's :func:`rank_balanced_layers` counts for ``model`` on ``schedule`` when
    they leave its busiest rank (:func:`busiest_rank`) less forward work than ``current`` does
    (one pipeline's counts; None: the even split, or :func:`uneven_layers` when the layers do
    not divide), with the cut of that work as a fraction: ``(counts, cut)``; else None.
    ``weights`` (``--stage-weights``, one per stage) weigh the work both to balance and to
    compare."""
    span = deps.pipeline_length(schedule.stages, schedule.pipelines)
    L, head = model.layers, head_layers(model)
    if L < span:
        return None
    if current is None:
        current = uneven_layers(L, span) if L % span else (L // span,) * span
    balanced = rank_balanced_layers(L, schedule, head, weights)
    was = busiest_rank(schedule, current, head, weights)
    now = busiest_rank(schedule, balanced, head, weights)
    return (balanced, 1 - now / was) if now < was else None


def format_stage_layers(layers) -> str:
    """``(6, 7, 7, 7, 6)`` -> ``6,7x3,6``: runs of equal counts as ``count x repeats``."""
    parts: list[str] = []
    i, xs = 0, list(layers)
    while i < len(xs):
        j = i
        while j < len(xs) and xs[j] == xs[i]:
            j += 1
        parts.append(str(xs[i]) if j - i == 1 else f"{xs[i]}x{j - i}")
        i = j
    return ",".join(parts)


def parse_stage_layers(text: str, where: str = "--stage-layers") -> tuple[int, ...]:
    """``6,7x3,6`` -> ``(6, 7, 7, 7, 6)``; a ppir error naming the entry otherwise."""
    out: list[int] = []
    for k, part in enumerate(text.split(",")):
        m = _ENTRY.fullmatch(part.strip())
        if m is None or (m.group(2) is not None and int(m.group(2)) < 1):
            raise error(
                "bad-usage",
                f"{where}: entry {k + 1} {part.strip()!r} is not a layer count: give counts or "
                "'count x repeats', e.g. 6,7x10,6",
            )
        out += [int(m.group(1))] * int(m.group(2) or 1)
    return tuple(out)


def stage_layers_setting(section: dict, where: str) -> tuple[int, ...] | None:
    """``[model] stage_layers`` of a cost config: a list of counts (TOML) or the text form
    (``--stage-layers``); None when absent."""
    value = section.get("stage_layers")
    if value is None:
        return None
    if isinstance(value, str):  # --stage-layers puts its text here
        return parse_stage_layers(value, "--stage-layers" if where == "cost config" else where)
    if (
        not isinstance(value, list)
        or not value
        or any(not isinstance(x, int) or isinstance(x, bool) or x < 0 for x in value)
    ):
        raise error(
            "bad-config",
            f"{where}: model.stage_layers must be a list of layer counts, one per stage, "
            f"got {value!r:.60}",
        )
    return tuple(value)
