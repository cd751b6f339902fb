"""Human-readable summary of an :class:`~.estimate.Estimate` (the JSON form is ``to_json``)."""

from __future__ import annotations

from ppir.analysis.critical_path import LEGEND
from ppir.analysis.estimate import Estimate, op_label
from ppir.analysis.units import fmt_bytes, fmt_sig, fmt_time, unit_meaning
from ppir.cli.output import schedule_line, table


def _path(e: Estimate, max_path_ops: int) -> str:
    """``F0@s0@r0 -> F1@s0@r0 -> [via r1: 1RECV_F1 1SEND_F0] -> F0@s2@r2 -> ...``: the
    critical path's compute ops, with the other ranks' transfers it runs through between two of
    them (:mod:`ppir.analysis.critical_path`); the first and last ``max_path_ops // 2`` ops
    and ``... (N more)`` between them when it is longer (the links among those left out too)."""
    ops = e.critical_path_ops
    links: dict[int, list[str]] = {}
    for link in e.critical_path_links:
        links.setdefault(link.before, []).append(link.label())

    def run(lo: int, hi: int) -> str:  # ops lo..hi-1, and the links between two of them
        parts = []
        for i in range(lo, hi):
            parts += links.get(i, []) if i > lo else []
            parts.append(f"{op_label(ops[i].action)}@r{ops[i].rank}")
        return " -> ".join(parts)

    n = len(ops)
    if n <= max_path_ops:
        return run(0, n)
    head, tail = max_path_ops // 2, n + (-max_path_ops // 2)  # as ops[:k // 2], ops[-k // 2:]
    return f"{run(0, head)} -> ... ({tail - head} more) -> {run(tail, n)}"


def _share(x: float, whole) -> str:
    """A percentage, '-' where its whole is 0 (every op costs 0: 0 / 0, as the rank table's
    idle % prints it)."""
    return f"{x:.2%}" if whole else "-"


def format_summary(e: Estimate, max_path_ops: int = 8) -> str:
    """The summary block and per-rank table printed by ``ppir compile --backend cost``."""
    u = e.time_unit
    t = lambda x: fmt_time(x, u)  # noqa: E731
    unit_note = f" units ({unit_meaning(e.config.F, equals=True)})" if u != "s" else ""
    path = _path(e, max_path_ops)
    mean_idle = sum(r.idle for r in e.per_rank) / max(e.ranks, 1)
    summary = [
        ["step time", f"{t(e.step_time)}{unit_note}"],
        ["busiest rank compute", t(e.busiest)],
        ["bubble (mean idle / rank)", t(mean_idle)],
        [
            "bubble / total",
            f"{_share(e.bubble_fraction_of_total, e.step_time)}   (idle / step time)",
        ],
        [
            "bubble / ideal",
            f"{_share(e.bubble_fraction_of_ideal, e.busiest)}   (idle / busy, Narayanan 2021)",
        ],
        ["critical path", f"{t(e.critical_path)}   ({len(e.critical_path_ops)} ops)"],
        ["", path],
        *([["", LEGEND]] if "[via r" in path else []),
    ]
    if e.dependency_bound is not None:
        summary.append(
            [
                "dependency bound",
                f"{t(e.dependency_bound)}   (the compute order with transfer times alone: no "
                "lowering of it is faster)",
            ]
        )
    summary.append(["messages", f"{e.message_count} ({fmt_bytes(e.message_bytes)})"])
    lines = [
        schedule_line(e.schedule, e.params, e.ranks, e.stages, e.microbatches, e.pipelines),
        f"assuming {e.config.describe(ranks=e.ranks)}",
        "",
        table(summary),
        "",
    ]
    mem = any(r.peak_activations is not None for r in e.per_rank)
    membytes = any(r.peak_bytes is not None for r in e.per_rank)
    header = ["rank", "busy", "idle", "exposed comm", "waiting", "idle %", "ops", "sent"]
    if mem:
        header.append("peak act (A)")
    if membytes:
        header.append("layer act bytes")  # the layers alone: whole memory adds the rest
    rows = [header]
    for r in e.per_rank:
        row = [
            str(r.rank),
            t(r.busy),
            t(r.idle),
            t(r.exposed_comm),
            t(r.waiting),
            f"{r.idle / e.step_time:.1%}" if e.step_time else "-",
            str(r.compute_ops),
            str(r.messages_sent),
        ]
        if mem:
            row.append(fmt_sig(r.peak_activations, 4) if r.peak_activations is not None else "-")
        if membytes:
            row.append(fmt_bytes(r.peak_bytes) if r.peak_bytes is not None else "-")
        rows.append(row)
    lines.append(table(rows, align="<>"))
    return "\n".join(lines) + "\n"


def microbatch_note(compiled) -> str:
    """A ``note:`` line when measured costs time another batch than the profile's: they are
    the times of the profile's microbatch (``microbatch_size`` samples), so a step of M of them
    is M times that many samples, not the profile's batch split M ways (what ``ppir launch``
    runs with the same model module).  "" without measured costs, without the size (an older
    file) or when the step runs the profile's count."""
    from ppir.analysis.units import microbatch_json

    m = compiled.config.measured
    if m is None:
        return ""
    size, profiled = m.microbatch_size, dict(m.info).get("microbatches")
    s = compiled.program
    step = microbatch_json(s.microbatches, s.pipelines)["microbatches"]
    if not size or not profiled or step == profiled:
        return ""
    batch = size * profiled
    other = (
        f"; for {step} microbatches of that batch, profile again with --microbatches {step}"
        if batch % step == 0
        else ""
    )
    return (
        f"note: the measured costs time the profile's microbatch of {size} samples: a step of "
        f"{step} is {step * size} samples, where the profile's batch was {batch} in {profiled}"
        f"{other}\n"
    )


NOTE_CUT = 0.05
"""The least cut of the busiest rank's forward that makes :func:`split_note` look at a split."""

NOTE_OPS = 10_000
"""The most compute ops of a program that :func:`split_note` compiles a second time (about
0.2 ms each: two seconds more at most); a larger one's note says the forward work only."""


def peak_note(compiled, e: Estimate) -> str:
    """A ``note:`` line when a rank's peak is a fraction of chunk activations: with split
    backward I frees part of a chunk and W the rest (the memory model's split, which ``ppir
    analyze`` prints and ``--i-fraction`` sets); "" when every peak is whole."""
    from ppir.ir import OpKind

    peaks = [r.peak_activations for r in e.per_rank if r.peak_activations is not None]
    if all(float(p).is_integer() for p in peaks):  # a chunk of 1/v A is a fraction too:
        return ""
    if not any(a.kind is OpKind.I for a in compiled.graph.ops):  # the IR's op index
        return ""  # then the split is not what makes it one
    from ppir.cli.analyze import split_line

    what = split_line(compiled.memory.i_fraction)
    return f"note: peak act (A) holds parts of a chunk: {what} (ppir analyze --i-fraction)\n"


def split_note(compiled, compile_with) -> str:
    """A ``note:`` line for the layer split :func:`ppir.analysis.layout.faster_split` finds
    when it cuts the busiest rank's forward work (its stages' layers, the output layer on each
    last stage, times ``--stage-weights``) by at least :data:`NOTE_CUT` against the compiled
    split (the even one, or ``--stage-layers``): compiled with it (``compile_with(config)``:
    the same command with that ``--stage-layers``), the step time it gives and how much shorter
    that is, or nothing when it is not at least 0.1 % shorter (less forward work on the
    busiest rank can still be a slower step: DualPipe at P=4, M=8); a program of more than
    :data:`NOTE_OPS` compute ops is not compiled again and the note says the forward cut
    only.  "" also without a model, with measured costs, or with no such split."""
    from dataclasses import replace

    from ppir.analysis.layout import faster_split, format_stage_layers, head_layers
    from ppir.ir import deps

    schedule, cfg = compiled.program, compiled.config
    model = cfg.model
    if model is None or cfg.measured is not None:
        return ""
    S = schedule.stages
    span = deps.pipeline_length(S, schedule.pipelines)
    current = tuple(cfg.stage_layers[:span]) if cfg.stage_layers else None
    if current is None and model.layers % span:
        return ""
    found = faster_split(model, schedule, current, cfg.stage_weights)
    if found is None or found[1] < NOTE_CUT:
        return ""
    split = found[0] * (S // span)
    flag = f"note: --stage-layers {format_stage_layers(split)}"
    forward = (
        f"the busiest rank's forward work {float(found[1]):.0%} less, the output layer counted "
        f"as {float(head_layers(model)):.2g} layers on the last stage"
    )
    ops = sum(len(p) for p in compiled.source.programs)
    if ops > NOTE_OPS:
        return (
            f"{flag} leaves {forward}; not compiled with it ({ops} compute ops, over "
            f"{NOTE_OPS}), so its step time is not known: ppir tune compiles it\n"
        )
    other = compile_with(replace(cfg, stage_layers=split))
    was = compiled.step_time
    now = other.step_time if other.ok and other.timed.complete else was
    if now > was * (1 - 0.001):
        return ""
    u = compiled.estimate.time_unit
    return (
        f"{flag} cuts the step time by {1 - now / was:.1%} to {fmt_time(now, u)} (compiled with "
        f"it; {forward}); ppir tune tries it\n"
    )
