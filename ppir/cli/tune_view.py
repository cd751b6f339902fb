"""What ``ppir tune`` prints of a search (:func:`ppir.analysis.tune.search`): the ranked table
(the ``--top`` fastest) with the slower, pruned and rejected choices (text), or every candidate
as ``ppir.tune/2`` (JSON)."""

from __future__ import annotations

import itertools

from ppir.analysis.layout import format_stage_layers
from ppir.analysis.measured_footprint import sizes_known
from ppir.analysis.tune import TIE_ORDER, same_step_time
from ppir.analysis.units import fmt_memory, fmt_size, fmt_time, microbatch_json, unit_meaning
from ppir.cli.output import table
from ppir.cli.tune_command import command_line, launch_line
from ppir.plan.build import runtime_limit
from ppir.verify.words import ordinal

_CLOSEST = 5  # memory rejections shown without --all-rejected: the closest to the budget
_LISTED = ("pruned", "slower")  # not ranked, not rejected either


def _limit(c) -> str | None:
    """Why ``ppir launch`` cannot run the candidate's program (None: it can, or not known)."""
    return runtime_limit(c.program) if c.program is not None else None


def _row(c, rank=None, command=None, zero_auto=False) -> dict:
    e = c.estimate
    # the ZeRO stage its memory is counted at (None without a model); under --zero auto, a
    # choice with replicas pruned before its memory was checked may need 0 or 1: not known
    zero = None if zero_auto and c.dp > 1 and c.peak is None else c.zero
    rejected = c.why if c.why and c.why not in _LISTED else None  # pruned: not rejected
    out = {
        "pp": c.pp,
        "dp": c.dp,
        "schedule": c.schedule,
        "v": c.v,
        "mbs": c.mbs,
        **_microbatches(c),
        # the parameters the schedule was expanded with: 'ppir compile -D K=V' for each
        "params": dict(c.program.params) if c.program is not None else None,
        "recompute": c.recompute,
        "zero": zero,
        "stage_layers": list(c.stage_layers) if c.stage_layers else None,
        "step_time": c.step_time,
        "step_time_bound": c.bound,
        "peak_memory": c.footprint.worst.to_json()["total"] if c.footprint else c.peak,
        "largest": c.largest,
        "memory": c.footprint.worst.to_json() if c.footprint is not None else None,
        "bubble_fraction_of_total": e.bubble_fraction_of_total if e else None,
        "bubble_fraction_of_ideal": e.bubble_fraction_of_ideal if e else None,
        "rejected": rejected,
        "reason": c.reason,
        "launchable": _launchable(c, rejected, limit := _limit(c)),
        # why ppir launch's runtime cannot run the schedule's program (None: it can)
        "runtime_limit": limit,
        # the 'ppir compile' command line of the row's program (None: not expanded)
        "command": command(c) if command is not None else None,
    }
    return out if rank is None else {"rank": rank, **out}


def _launchable(c, rejected, limit) -> bool | None:
    """Whether ``ppir launch`` can run the choice as tune found it: False for a rejected one
    (it does not fit, verify or divide) and for a program the runtime cannot run (``limit``,
    :func:`_limit`); None for a pruned one, which was not compiled, so neither verified nor
    held to the budget with its receive buffers (its memory perhaps not checked at all); True
    for a compiled one that fits (ranked or slower)."""
    if rejected or limit is not None:
        return False
    return None if c.why == "pruned" else True


def _microbatches(c) -> dict:
    """A row's ``microbatches`` (per step) and ``microbatches_per_pipeline``, as the other JSON
    reports count them (:func:`microbatch_json`, of the program searched); a choice refused
    before its program was loaded has only the count its step was to run (None when the batch
    did not divide)."""
    if c.program is None:
        return {"microbatches": c.microbatches, "microbatches_per_pipeline": None}
    counts = microbatch_json(c.program.microbatches, c.program.pipelines)
    return {k: counts[k] for k in ("microbatches", "microbatches_per_pipeline")}


def tune_json(cands, space, G, cfg, budget, gpu_memory=None, command=None) -> dict:
    """The ``ppir.tune/2`` object of a search's candidates; ``gpu_memory``: --gpu-memory in
    bytes as read (None without it); ``command(c)``: candidate ``c``'s ``ppir compile`` command
    line, each entry's ``command`` (None without it)."""
    ok, auto = [c for c in cands if c.ok], space.zero_auto
    return {
        "format": "ppir.tune/2",
        "world": space.world,
        "tp": space.tp,
        "global_batch": G,
        "time_unit": cfg.time_unit,
        "memory_unit": "bytes" if sizes_known(cfg) else "A",
        "budget": budget[0] if budget else None,
        "gpu_memory": gpu_memory,
        "assumptions": cfg.describe(
            mbs=False, ranks={c.pp for c in cands}, dps={c.dp for c in cands}
        ),
        "ranked": [_row(c, i + 1, command, auto) for i, c in enumerate(ok)],
        "slower": [_row(c, None, command, auto) for c in cands if c.why == "slower"],
        "pruned": [_row(c, None, command, auto) for c in cands if c.why == "pruned"],
        "rejected": [
            _row(c, None, command, auto) for c in cands if not c.ok and c.why not in _LISTED
        ],
    }


def _m(c) -> str:
    """The M column: the microbatches per step (a built-in's M; global batch / (dp x mbs)),
    and for a schedule of several pipelines how they split, ``16 (2x8)``: bidirectional
    DualPipe runs M/2 each way (:func:`_m_notes` says so under the table)."""
    s = c.program
    if s is None or s.pipelines == 1:
        return str(c.microbatches)
    return f"{c.microbatches} ({s.pipelines}x{s.microbatches})"


def _m_notes(ok) -> list[str]:
    """The lines under the table on the M column: how a schedule of several pipelines splits
    its step's M microbatches (``16 (2x8)``), and which -D M= tune gave a schedule whose own M
    is not its step's count (one of two pipelines declaring ``microbatches M``: M=4 for 8)."""
    by: dict[str, list] = {}
    for c in ok:
        by.setdefault(c.schedule, []).append(c)
    lines = []
    for name, cs in sorted(by.items()):
        k = cs[0].program.pipelines
        own = sorted({(c.given_m, c.microbatches) for c in cs if c.given_m is not None})
        if all(m == step for m, step in own):
            if k > 1:  # was: DualPipe's M=16 beside compile's '8 microbatches', unexplained
                how = "ppir compile -D M=M" if own else "ppir compile"  # a fixed program: no M
                lines.append(
                    f"M (k x m): {name} runs its M microbatches in {k} pipelines of m each, as "
                    f"{how} reports them ('M microbatches (m per pipeline)')"
                )
        elif k > 1 and all(c.given_m == c.program.microbatches for c in cs):
            lines.append(
                f"M (k x m): {name} runs M microbatches in {k} pipelines of m each; its own M is "
                "one pipeline's: ppir compile -D M=m reports them ('M microbatches (m per "
                "pipeline)')"
            )
        else:
            gave = ", ".join(f"-D M={m} for {step}" for m, step in own)
            lines.append(f"M: {name}'s own M is not its step's microbatches; tune gave it {gave}")
    return lines


def _layers(c) -> str:
    """``even``, or the layout as ``--stage-layers`` reads it (``6x3,7x8,6``)."""
    return format_stage_layers(c.stage_layers) if c.stage_layers else "even"


def tune_text(
    cands,
    space,
    G,
    cfg,
    budget,
    has_model: bool,
    every: bool = False,
    flag="--memory-budget",
    note="",
    command=None,
    launch=None,
) -> str:
    """The ranked table, the pruned count and the rejections, as ``ppir tune`` prints them;
    ``flag``: the option that gave the budget (--gpu-memory or --memory-budget), which the
    hint names when nothing fits; ``note``: what the header adds to the budget (how a size in
    a decimal unit was read); ``command(c)``: candidate ``c``'s ``ppir compile`` command line,
    given for the first ranked row under the table (none without it); ``launch(c)``: its
    ``ppir launch`` command line, or None, given for the first ranked row that has one."""
    unit = cfg.time_unit
    in_bytes = sizes_known(cfg)
    lines = []
    where = f"world {space.world} (tp {space.tp})" if has_model else f"P={space.world}"
    bud = ", no memory budget" + (" (--gpu-memory SIZE holds each choice to one)" * in_bytes)
    if budget:
        shown = fmt_memory(budget[0]) if in_bytes else fmt_size(budget[0], "A")  # as the peaks
        bud = f", budget {shown}" + (f" per GPU{note}" if in_bytes else "")
    per = ""
    if cfg.measured is not None and not has_model:  # times and sizes are per profiled one
        b = cfg.measured.microbatch_size
        per = (
            f" samples (M = {G // b} profiled microbatches of {b})"
            if b
            else " profiled microbatches (the cost file does not say how many samples one holds)"
        )
    # with a model, tune searches the micro-batch size: each row gives its own (mbs)
    # --processors: per pp; ranks per node: per dp
    assumed = cfg.describe(mbs=False, ranks={c.pp for c in cands}, dps={c.dp for c in cands})
    fixed = "".join(f" -D {k}={v}" for k, v in space.defines)  # where a schedule declares it
    fixed = f", schedules at{fixed}" if fixed else ""
    lines.append(f"{where}, global batch {G}{per}{bud}{fixed}; assuming {assumed}")
    if unit != "s":
        lines.append(
            f"per sample: a micro-batch of mbs samples costs mbs x the op costs and holds mbs A, "
            f"A being one sample's activations of a rank share; time unit: "
            f"{unit_meaning(cfg.F)}, for one sample"
        )
    ok = [c for c in cands if c.ok]
    zero = space.zero_auto  # searched: each row's ZeRO stage
    head = ["#", "pp", "dp", "schedule", "v", "mbs", "M", "recompute"] + ["zero"] * zero
    head += ["layers", "step time", "bubble/total", "peak mem", "largest"]
    rows = [head]
    for i, c in enumerate(ok, 1):
        peak = fmt_memory(c.peak) if in_bytes else fmt_size(c.peak, "A")  # as compile's
        rows.append(
            [
                i,
                c.pp,
                c.dp,
                c.schedule + ("*" if _limit(c) else ""),
                c.v,
                c.mbs,
                _m(c),
                c.recompute,
                *([c.zero] if zero else []),
                _layers(c),
                fmt_time(c.step_time, unit),
                f"{c.estimate.bubble_fraction_of_total:.1%}",
                peak,
                c.largest or "-",
            ]
        )
    if ok:  # was: a header over no rows above '(no feasible choice)'
        lines.append(table(rows, align="><<<>>><" + ">" * zero + "<>>><"))
    limits = sorted({why for c in ok if (why := _limit(c))})
    lines += [f"* ppir launch cannot run it: {why}" for why in limits]
    lines += _m_notes(ok)
    if ok and command is not None:  # the best row as 'ppir compile' reports it
        lines.append(command_line(ok[0], command(ok[0]), in_bytes))
    runs = ((i, cmd) for i, c in enumerate(ok, 1) if launch and (cmd := launch(c)))
    lines += [launch_line(i, cmd, G) for i, cmd in itertools.islice(runs, 1)]  # the first
    if not ok:
        hint = _no_choice_hint(cands, has_model, flag, cfg.model, space)
        lines.append("(no feasible choice)" + hint)
    elif has_model and not zero:
        lines += _zero_note(cands, cfg.model)
    slower = [c for c in cands if c.why == "slower"]
    if slower:
        lines.append(_slower_line(slower, ok[-1], space.top, unit))
    pruned = [c for c in cands if c.why == "pruned"]
    if pruned:
        best = fmt_time(pruned[0].bound, unit)
        lines.append(
            f"\npruned ({len(pruned)}): lower bounds on their step time (from {best}) cannot "
            f"beat the {ordinal(space.top)} ranked; not compiled"
        )
    bad = [c for c in cands if not c.ok and c.why not in _LISTED]
    if bad:
        lines += _rejected_lines(bad, has_model, every, {c.schedule for c in cands})
    return "\n".join(lines) + "\n"


def _slower_line(slower: list, nth, top: int, unit: str) -> str:
    """The compiled candidates beyond ``--top`` in one line: the ones that tie with the
    ``top``-th ranked (``nth``) and rank after it, and the slower ones."""
    tied = [c for c in slower if same_step_time(c, nth)]
    more = f"; --top {top + len(slower)} ranks them"
    nth_ranked = f"the {ordinal(top)} ranked"
    if not tied:
        start = fmt_time(slower[0].step_time, unit)
        return (
            f"\nslower ({len(slower)}): compiled, from {start}, but slower than {nth_ranked}{more}"
        )
    rest = slower[len(tied) :]
    verb = "tie" if len(tied) > 1 else "ties"
    tie = f"{len(tied)} {verb} with {nth_ranked} at {fmt_time(nth.step_time, unit)} ({TIE_ORDER})"
    if rest:
        tie += f", {len(rest)} slower, from {fmt_time(rest[0].step_time, unit)}"
    return f"\nnot ranked ({len(slower)}): compiled, {tie}{more}"


def _zero_note(cands, model) -> list[str]:
    """A line when choices with data-parallel replicas were rejected for memory under a model
    without ZeRO (``zero=0``, tune's default, which it does not search): the distributed
    optimizer shards their optimizer state over the replicas and may let them fit."""
    if model is None or model.zero:
        return []
    n = _over_memory_with_replicas(cands)
    if not n:
        return []
    return [
        f"note: {n} {'choice' if n == 1 else 'choices'} with data-parallel replicas exceed the "
        "memory budget without ZeRO (tune keeps --model's zero=0); --zero auto counts them at "
        "zero=1 (the distributed optimizer), which shards optimizer state over the replicas and "
        "may let them fit"
    ]


def _over_memory_with_replicas(cands) -> int:
    """How many choices with data-parallel replicas exceed the memory budget: those ZeRO could
    shard (it shards over the replicas; with one it has nothing to shard)."""
    return sum(1 for c in cands if c.why == "memory" and c.dp > 1)


def _no_choice_hint(cands, has_model: bool, flag: str, model, space) -> str:
    """What to change when nothing was ranked, from the reasons of the rejections; ``flag``
    is the budget's option as given (--gpu-memory or --memory-budget).  With a model it
    suggests only what the search did not already try (``model``'s ZeRO stage, None without
    one; ``space``'s recomputation and micro-batch sizes)."""
    whys = {c.why for c in cands}
    larger = f"a larger {flag}"
    if "memory" in whys and has_model:
        tries = []
        zero = model.zero if model is not None else 0
        if space.zero_auto:  # the choices with replicas were counted at zero=1 at least
            zero = max(zero, 1)
        sharded = _over_memory_with_replicas(cands) > 0
        if sharded and zero == 0:
            tries.append("zero=1 in --model (the distributed optimizer)")
        elif sharded and zero == 1:
            # its memory only: under pipelining it reduces gradients per microbatch
            tries.append(
                "zero=2 in --model (gradients sharded too; memory only: its "
                "reductions per microbatch under pipelining are not timed)"
            )
        tries += ["more GPUs (--world)", larger]
        if 1 not in space.micro_batches:
            tries.append("--micro-batch 1")
        if "full" not in space.recomputes:
            tries.append("--recompute full")
        return (
            ": every choice that fits the other constraints exceeds the memory budget; try "
            f"{', '.join(tries[:-1])}{',' * (len(tries) > 2)} or {tries[-1]}"
        )
    if "memory" in whys:
        return f": every choice exceeds the memory budget; try {larger}"
    if whys <= {"divisibility", "constraint"}:
        files = [c.file for c in cands]
        named = ", ".join(sorted({f for f in files if f}))
        if named and all(files):  # mistakes in the files, whatever the sizes
            return (
                f": no choice compiles (the errors below point into {named}); fix them "
                "('ppir check FILE -D P=.. -D M=..' shows one with its source line)"
            )
        return (
            ": no schedule accepts these sizes (the reasons below); try other --global-batch, "
            "--micro-batch or --pp values" + (f", and fix the errors in {named}" if named else "")
        )
    return ""


def _choice(c, has_model: bool) -> str:
    m = f" M={c.microbatches}" if c.microbatches else ""
    what = f"pp={c.pp} dp={c.dp} " if has_model else ""
    rec = f" {c.recompute}" if has_model else ""
    layers = f" layers={format_stage_layers(c.stage_layers)}" if c.stage_layers else ""
    return f"{what}{c.schedule} v={c.v} mbs={c.mbs}{m}{rec}{layers}"


def _rejected_lines(bad: list, has_model: bool, every: bool, searched: set) -> list[str]:
    """Every rejected choice with its reason (``every``), else per kind of rejection: the
    choices that came closest to the memory budget, and each distinct reason once, with the
    schedules it rejected (``every schedule`` when it is all of ``searched``, more than one)
    and how many choices."""
    by_why: dict[str, list] = {}
    for c in bad:
        by_why.setdefault(c.why, []).append(c)
    counts = ", ".join(f"{len(cs)} {why}" for why, cs in by_why.items())
    lines = [f"\nrejected ({len(bad)}: {counts}):"]
    if every:
        lines += [f"  {_choice(c, has_model)}: {c.why}: {c.reason}" for c in bad]
        return lines
    folded = False  # some rejection is not on a line of its own
    for why, cs in by_why.items():
        if why == "memory":
            close = sorted(cs, key=lambda c: c.peak)[:_CLOSEST]
            lines.append(f"  memory ({len(cs)}), the {len(close)} closest to the budget:")
            lines += [f"    {_choice(c, has_model)}: {c.reason}" for c in close]
            folded |= len(close) < len(cs)
            continue
        reasons: dict[str, list] = {}  # a reason, the schedules it rejected (one per choice)
        for c in cs:
            reasons.setdefault(c.reason, []).append(c.schedule)
        lines.append(f"  {why} ({len(cs)}):")
        for reason, names in reasons.items():
            names_once = list(dict.fromkeys(names))
            every_one = len(searched) > 1 and set(names_once) == searched
            who = "every schedule" if every_one else ", ".join(names_once)
            n = len(names)
            lines.append(f"    {who}: {reason}" + (f" ({n} choices)" if n > 1 else ""))
        folded |= len(reasons) < len(cs)
    if folded:
        lines.append("  (--all-rejected lists every one; --format json has them all)")
    return lines
