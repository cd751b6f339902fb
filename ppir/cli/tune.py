"""ppir tune: the pipeline and data-parallel sizes, schedule, v, micro-batch size and
recomputation that fit a GPU's memory and train fastest."""

from __future__ import annotations

import json
import sys
from dataclasses import replace

from ppir.analysis.measured_footprint import sizes_known
from ppir.analysis.models import RECOMPUTE_MODES
from ppir.analysis.tune import Builtin, Space, default_global_batch, search
from ppir.cli.argtypes import positive_int
from ppir.cli.common import add_defines, add_progress_model_argument, parse_defines
from ppir.cli.cost_options import (
    config_from_args,
    refuse_recompute_without_model,
)
from ppir.cli.deprecation import Renamed
from ppir.cli.output import add_quiet_argument, progress
from ppir.cli.tune_budget import DEFAULT_RESERVE, budget_note, read_budget
from ppir.cli.tune_command import (
    add_recorded_cost_arguments,
    compile_command,
    launch_command,
)
from ppir.cli.tune_lists import (
    comma_ints,
    comma_list,
    measured_batch,
    measured_recompute,
    measured_sizes,
)
from ppir.cli.tune_view import tune_json, tune_text
from ppir.diagnostics import EXIT_INVALID, EXIT_OK, did_you_mean, error
from ppir.schedules import builtin_names

NAME = "tune"
HELP = "search P x dp, schedule, v, micro-batch and recomputation under a GPU's memory"
DESCRIPTION = """With --model: for --world GPUs in tensor-parallel groups of --tp, try every
pipeline size P (P x dp x tp = world; --pp to restrict), every schedule (default: the built-
ins), v (chunks per rank, for schedules with a v parameter; V-shaped ones report v=2), micro-
batch size and recomputation; split layers unevenly (fewer on the first and last stages) where
they do not divide the stages, and also try the split that leaves the last stage fewer layers
for its output layer, sized by FLOPs, when its busiest rank has less work. Each choice is held to
the whole per-rank memory (parameters, gradients and optimizer state at that tp, dp and ZeRO
setting, activations, receive buffers) against --gpu-memory minus --reserve, timed first by its
dependency bound and then, best bound first, compiled exactly as 'ppir compile' compiles it; the
--top fastest compiled programs are ranked by step time (equal ones: less peak memory first,
then by name), the rest are listed as slower (compiled while their bound could still beat the
top, but slower, or tied with the N-th and ranked after it), pruned (their bound cannot beat the
top) or rejected with the reason: divisibility (batch, layers), constraint (the schedule's
require clauses; a program that does not expand or verify, with where its error points) or
memory (with its largest term).

Without --model: one pipeline size -P, and the unit is one sample: times in forwards of one
sample on a rank share (a micro-batch of b samples costs b x the unit costs) and the budget
(--memory-budget) in A, one sample's activations of a rank share (a micro-batch holds b A).
With a --config measured by 'ppir profile': seconds, the profiled microbatch is the
micro-batch (--global-batch still counts samples: M = G / (dp x the samples of a profiled
microbatch)); a --model beside it sizes memory only, and recomputation is not searched (the
times are the model's as profiled).

examples:
  ppir tune --world 64 --tp 8 --gpu-memory 80GiB --model llama3-70b,seq=4096
  ppir tune --world 32 --tp 4 --pp 4,8 --gpu-memory 80GiB --model llama3-8b,zero=1 \\
      --micro-batch 1,2 --recompute none,selective --format json
  ppir tune --world 64 --tp 8 --gpu-memory 80GiB --model llama3-70b,seq=4096 --zero auto
  ppir tune -P 4 --global-batch 32 --memory-budget 6A
"""


def add_arguments(p):
    p.add_argument("--world", type=positive_int, metavar="N", help="GPUs in all (with --model)")
    p.add_argument(
        "--tp",
        type=positive_int,
        metavar="N",
        help="tensor-parallel size in GPUs per group (default: the model's tp)",
    )
    p.add_argument(
        "-P",
        "--pp",
        "--ranks",
        dest="pp",
        action=Renamed,
        old="--ranks",
        metavar="P1,P2,...",
        help="pipeline sizes to try, in ranks per pipeline",
    )
    p.add_argument(
        "--global-batch",
        type=positive_int,
        default=0,
        metavar="G",
        help="global batch in sequences (samples) per step, which runs M = G / (dp x micro-batch) "
        "microbatches (default "
        "4 x world / tp; with a measured --config: 4 x P profiled microbatches, and G must be a "
        "multiple of the samples of one)",
    )
    p.add_argument(
        "--micro-batch",
        default=None,
        metavar="B1,B2,...",
        help="micro-batch sizes to try, in sequences per micro-batch (default 1,2 with "
        "--model, 1 without; with a measured --config: the profiled microbatch's)",
    )
    p.add_argument(
        "--v",
        metavar="V1,V2,...",
        help="stages (chunks) per rank to try (default 1,2,4 and, with --model, every v that "
        "splits a rank's layers evenly into v chunks)",
    )
    p.add_argument(
        "--schedules",
        metavar="S1,S2,...",
        help="schedules to try: built-in names or .pps files (default: built-ins)",
    )
    p.add_argument(
        "--recompute",
        dest="tune_recompute",
        metavar="R1,R2,...",
        help=f"recomputation to try among {','.join(RECOMPUTE_MODES)} (default: all with --model "
        "and no measured --config)",
    )
    p.add_argument(
        "--gpu-memory",
        metavar="SIZE",
        help="memory of one GPU in bytes with a unit, e.g. 80GiB (with --model; 80GB is "
        "decimal: 80 x 10^9 bytes = 74.51 GiB)",
    )
    p.add_argument(
        "--reserve",
        default=None,
        metavar="SIZE|PCT",
        help="kept free of the GPU memory for workspaces and fragmentation: a percentage of "
        "--gpu-memory or bytes with a unit, e.g. 8GiB (default "
        + DEFAULT_RESERVE.replace("%", "%%")  # argparse's help is %-formatted
        + ")",
    )
    p.add_argument(
        "--memory-budget",
        metavar="SIZE",
        help="the per-rank budget itself (instead of --gpu-memory): bytes with a unit, e.g. "
        "60GiB, or without --model in A (one sample's activations of a rank share; a "
        "micro-batch of b samples holds b A), e.g. 6A",
    )
    p.add_argument(
        "--even", action="store_true", help="only even layer splits (no uneven or balanced ones)"
    )
    add_defines(
        p,
        "fix a parameter of the schedules other than P, M and v (which tune searches), e.g. "
        "-D K=2 for a .pps that declares K; applied to each schedule that declares it "
        "(repeatable; to compare values, run tune once per value, or ppir sweep)",
    )
    p.add_argument(
        "--zero",
        choices=["auto"],
        help="auto: search ZeRO too: a choice with data-parallel replicas that does not fit "
        "at zero=0 is counted at zero=1 (optimizer state sharded over dp: Megatron's "
        "distributed optimizer, the same step time); ZeRO-2 is not searched (under pipelining "
        "it reduces gradients per microbatch). Default: every choice at the model's zero= "
        "(0 unless given)",
    )
    p.add_argument(
        "--top",
        type=positive_int,
        default=10,
        metavar="N",
        help="how many of the fastest programs to rank (default 10); the search compiles, best "
        "bound first, until no bound left beats the N-th, and lists the other compiled ones as "
        "slower (or tied with the N-th and ranked after it)",
    )
    p.add_argument(
        "--format",
        choices=["text", "json"],
        default="text",
        help="text (default): a ranked table; json: ppir.tune/2 with every candidate",
    )
    p.add_argument(
        "--all-rejected",
        action="store_true",
        help="list every rejected choice with its reason (default: per reason, the choices "
        "closest to the memory budget and each other reason once, with the schedules it rejected)",
    )
    add_progress_model_argument(
        p,
        "the verifier's progress model the candidates are compiled and timed under (fifo, "
        "the default, or relaxed)",
    )
    add_quiet_argument(p)
    add_recorded_cost_arguments(p)  # passed on to each row's command


def run(args) -> int:
    cfg = config_from_args(args)
    model = cfg.model
    # the default list is the built-ins themselves, whatever files the current directory holds
    names = (
        comma_list(args.schedules, "--schedules")
        if args.schedules is not None  # --schedules "" was every built-in, silently
        else [Builtin(n) for n in builtin_names()]
    )
    if not names:  # was searched as no schedule: 'no feasible choice' with no reason given
        raise error("bad-usage", f"--schedules {args.schedules!r}: expected schedule names")
    defines = _defines(args.defines, names)
    pps = tuple(comma_ints(args.pp, "--pp")) if args.pp else None
    if model is None:
        if not pps or len(pps) != 1:
            raise error(
                "bad-usage",
                "without --model give one pipeline size: -P N",
                hints=["with --model, --world and --tp search P and dp"],
            )
        for flag, value in (("--world", args.world), ("--tp", args.tp)):
            if value is not None:  # it was silently ignored
                why = f"no data or tensor parallelism to search (-P {pps[0]}: the whole job)"
                raise error("bad-usage", f"{flag} {value} needs --model: without it, {why}")
        world, tp = pps[0], 1
    else:
        searched = [("mbs", model.mbs, "--micro-batch"), ("dp", model.dp, "--world / (pp x tp)")]
        if cfg.stage_layers is not None:
            searched.append(("stage_layers", cfg.stage_layers, "--even to keep them even"))
        for key, value, where in searched:  # it was silently replaced by the search
            if value not in (1, None):
                raise error(
                    "bad-usage",
                    f"the model's {key}={value if key != 'stage_layers' else '[...]'}: tune "
                    f"searches {key} itself ({where}); drop {key}= from the model (--model, or "
                    "the [model] table of --config)",
                )
        if args.tp is not None and model.tp not in (1, args.tp):
            raise error("bad-usage", f"--tp {args.tp} and the model's tp={model.tp} disagree")
        tp = args.tp or model.tp
        if args.world is None and not pps:
            raise error("bad-usage", "give --world N (GPUs in all) or --pp P with --model")
        world = args.world if args.world is not None else max(pps) * tp
        Space(world=world, tp=tp, pps=pps).pipeline_sizes()  # sizes first, then the tp's heads
        cfg = replace(cfg, model=replace(model, tp=tp))
    measured = cfg.measured
    if measured is not None:
        flag = "--pp" if model is not None else "-P"
        pps = measured_sizes(measured, names, Space(world=world, tp=tp, pps=pps), flag)
    recomputes = (
        tuple(x.strip() for x in args.tune_recompute.split(","))
        if args.tune_recompute
        else (RECOMPUTE_MODES if model is not None and measured is None else (cfg.recompute,))
    )  # measured times are the profiled model's as it ran: recomputing would not change them
    for r in recomputes:
        if r not in RECOMPUTE_MODES:
            raise error(
                "bad-usage",
                f"--recompute {r}: expected {', '.join(RECOMPUTE_MODES)}",
                hints=did_you_mean(r, RECOMPUTE_MODES),
            )
    if measured is not None:  # was: a list ranked each alike in time, the least memory first
        measured_recompute(args.tune_recompute, recomputes, model is not None)
    if args.tune_recompute and model is None:  # every row said 'none', silently
        refuse_recompute_without_model(args.tune_recompute)
    if args.zero and model is None:
        raise error("bad-usage", "--zero auto needs --model: ZeRO shards a model's state")
    G = args.global_batch
    if measured is not None:  # its times are the profiled microbatch's, with a model too
        mbs, G = measured_batch(args, measured, world // tp)
    else:
        mbs = args.micro_batch or ("1,2" if model is not None else "1")
    space = Space(
        world=world,
        tp=tp,
        pps=pps if model is not None else None,
        global_batch=G,
        micro_batches=tuple(comma_ints(mbs, "--micro-batch")),
        vs=tuple(comma_ints(args.v, "--v")) if args.v is not None else None,
        recomputes=recomputes,
        uneven=not args.even,
        top=args.top,
        zero_auto=args.zero == "auto",
        defines=tuple(defines.items()),
    )
    if cfg.stage_weights is not None:  # one weight per stage: one stage count to search
        _one_stage_count(args, cfg, space, names)
    budget, gpu_memory = read_budget(args, sizes_known(cfg))
    if args.zero and budget is None:  # the least stage that fits: fits what?
        raise error(
            "bad-usage",
            "--zero auto takes the least ZeRO stage that fits the memory budget: give "
            "--gpu-memory (or --memory-budget)",
        )
    with progress(None, "tune", quiet=args.quiet, unit="programs") as bar:

        def step(done, total, status):
            if done == 0:  # searching: no total, most choices are pruned unseen (its ETA lied)
                searching = status == "searching"
                phase = "tune: searching" if searching else "tune: expanding"
                bar.restart(phase, None if searching else total)
            bar.update(1 if done else 0, status)

        cands = search(names, space, cfg, budget, args.progress_model, step)
    G = space.global_batch or default_global_batch(space)
    command = lambda c: compile_command(c, args, args.tune_cost_actions)  # noqa: E731
    if args.format == "json":
        doc = tune_json(cands, space, G, cfg, budget, gpu_memory, command)
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        flag = "--gpu-memory" if args.gpu_memory else "--memory-budget"  # the one given
        has_model, note = model is not None, budget_note(args)
        every = args.all_rejected
        launch = lambda c: launch_command(c, args, args.tune_cost_actions)  # noqa: E731
        text = tune_text(
            cands, space, G, cfg, budget, has_model, every, flag, note, command, launch
        )
        print(text, end="")
    return EXIT_OK if any(c.ok for c in cands) else EXIT_INVALID  # none fits: a script sees it


_SEARCHED = {
    "P": "the pipeline sizes (--pp; -P without --model)",
    "M": "the microbatches each choice's step runs (--global-batch / (dp x --micro-batch))",
    "v": "the stages per rank (--v)",
}


def _defines(defines: list[str], names: list) -> dict[str, int]:
    """The ``-D`` values, each a parameter some searched schedule declares other than the ones
    tune searches; a usage error naming the first that is not."""
    from ppir.frontend.loader import declared_params

    given = parse_defines(defines)
    if not given:
        return given
    declared = set().union(*(declared_params(n, builtin=isinstance(n, Builtin)) for n in names))
    for name, value in given.items():
        if name in _SEARCHED:
            raise error("bad-usage", f"-D {name}={value}: tune searches {_SEARCHED[name]}")
        if name not in declared:
            which = "the built-ins" if all(isinstance(n, Builtin) for n in names) else "--schedules"
            raise error(
                "unknown-parameter",
                f"-D {name}={value}: no schedule of {which} declares a parameter {name!r}",
                hints=did_you_mean(name, sorted(declared - set(_SEARCHED))),
            )
    return given


def _one_stage_count(args, cfg, space, names) -> None:
    """A usage error when the stage weights (one per stage) meet a search over several
    pipeline sizes, or over several v for a schedule that takes v."""
    from ppir.frontend.loader import declared_params

    sizes = sorted({pp for pp, _ in space.searched_sizes(cfg.model)})
    takes_v = any("v" in declared_params(n, builtin=isinstance(n, Builtin)) for n in names)
    several_v = takes_v and (space.vs is None or len(space.vs) > 1)
    if len(sizes) < 2 and not several_v:
        return
    what = f"pipeline sizes {', '.join(map(str, sizes))}" if len(sizes) > 1 else "several v"
    given = "--stage-weights" if args.cost_stage_weights else "the config's stage_weights"
    raise error(
        "bad-usage",
        f"{given} gives {len(cfg.stage_weights)} weights, one per stage, but tune would "
        f"search {what}: give one --pp and one --v (and --schedules with that many stages)",
    )
