"""ppir tune: search schedules x v x micro-batch size under a per-rank memory budget."""

from __future__ import annotations

import json
import sys

from ppir.analysis.tune import parse_budget, tune
from ppir.analysis.units import fmt_bytes, fmt_time
from ppir.cli.cost_options import add_cost_arguments, config_from_args
from ppir.diagnostics import error
from ppir.ir.graph import PROGRESS_MODELS
from ppir.schedules import builtin_names

NAME = "tune"
HELP = "search schedules x v x micro-batch size under a memory budget (cost model)"
DESCRIPTION = """Given P ranks and a global batch, try every schedule (default: the built-ins),
every v (chunks per rank, for schedules with a v parameter) and every micro-batch size; estimate
each with the cost model (the same options as 'ppir compile --backend cost') and print the
feasible choices ranked by step time, then every rejected choice with its reason: divisibility
(batch or layers), constraint (the schedule's require clauses, order cycles) or memory (the
peak over --memory-budget: with --model the whole per-rank memory, weights, gradients, optimizer
state, activations and receive buffers, in bytes; without, activations in A).

Without --model, times are in forwards of one rank share per sample and the budget is in A (one
microbatch's activations of a full rank share); with --model, seconds and bytes.

examples:
  ppir tune -P 4 --global-batch 32 --memory-budget 6A
  ppir tune -P 8 --global-batch 64 --micro-batch 1,2 --v 1,2,4 --model llama3-8b \\
      --hardware H100 --ranks-per-node 4 --memory-budget 60GiB
"""


def _ints(text: str, what: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise error("bad-usage", f"{what} {text}: expected comma-separated integers") from None
    if not out or any(x < 1 for x in out):
        raise error("bad-usage", f"{what} {text}: expected positive integers")
    return out


def add_arguments(p):
    p.add_argument("-P", "--ranks", type=int, required=True, help="pipeline ranks")
    p.add_argument(
        "--global-batch",
        type=int,
        required=True,
        metavar="G",
        help="samples per step (M = G / micro-batch size)",
    )
    p.add_argument(
        "--micro-batch",
        default="1",
        metavar="B1,B2,...",
        help="micro-batch sizes to try (default 1)",
    )
    p.add_argument(
        "--v", default="1,2,4", metavar="V1,V2,...", help="chunks per rank to try (default 1,2,4)"
    )
    p.add_argument(
        "--schedules",
        metavar="S1,S2,...",
        help="schedules to try: built-in names or .pps files (default: built-ins)",
    )
    p.add_argument(
        "--memory-budget",
        metavar="SIZE",
        help="per-rank activation budget, e.g. 40GiB (with --model) or 6A",
    )
    p.add_argument("--top", type=int, default=0, metavar="N", help="show only the N best")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument(
        "--progress",
        choices=PROGRESS_MODELS,
        default="fifo",
        help="progress model the candidates are compiled and timed under (default fifo)",
    )
    add_cost_arguments(p.add_argument_group("cost model"))


def run(args) -> int:
    cfg = config_from_args(args)
    names = (
        [n.strip() for n in args.schedules.split(",") if n.strip()]
        if args.schedules
        else builtin_names()
    )
    budget = parse_budget(args.memory_budget, cfg.model is not None)
    cands = tune(
        names,
        args.ranks,
        args.global_batch,
        _ints(args.micro_batch, "--micro-batch"),
        _ints(args.v, "--v"),
        cfg,
        budget,
        args.progress,
    )
    ok = [c for c in cands if c.ok]
    bad = [c for c in cands if not c.ok]
    if args.top:
        ok = ok[: args.top]
    unit = cfg.time_unit
    mem_unit = budget[1] if budget else ("bytes" if cfg.model is not None else "A")
    if args.format == "json":
        json.dump(
            {
                "format": "ppir.tune/1",
                "ranks": args.ranks,
                "global_batch": args.global_batch,
                "time_unit": unit,
                "memory_unit": mem_unit,
                "assumptions": cfg.describe(),
                "ranked": [_row(c) | {"rank": i + 1} for i, c in enumerate(ok)],
                "rejected": [_row(c) for c in bad],
            },
            sys.stdout,
            indent=2,
        )
        sys.stdout.write("\n")
        return 0
    print(f"P={args.ranks}, global batch {args.global_batch}; assuming {cfg.describe()}")
    if unit != "s":
        print("step time in forwards of one rank share per sample (unit costs x micro-batch)")
    rows = [
        ["#", "schedule", "v", "mbs", "M", "step time", "bubble/total", "bubble/ideal", "peak mem"]
    ]
    for i, c in enumerate(ok, 1):
        e = c.estimate
        peak = fmt_bytes(c.peak) if mem_unit == "bytes" else f"{c.peak:.4g} A"
        rows.append(
            [
                str(i),
                c.schedule,
                str(c.v),
                str(c.mbs),
                str(c.microbatches),
                fmt_time(c.step_time, unit),
                f"{e.bubble_fraction_of_total:.1%}",
                f"{e.bubble_fraction_of_ideal:.1%}",
                peak,
            ]
        )
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    for r in rows:
        print("  ".join(x.ljust(w) for x, w in zip(r, widths)).rstrip())
    if not ok:
        print("(no feasible choice)")
    if bad:
        print(f"\nrejected ({len(bad)}):")
        for c in bad:
            m = f" M={c.microbatches}" if c.microbatches else ""
            print(f"  {c.schedule} v={c.v} mbs={c.mbs}{m}: {c.why}: {c.reason}")
    return 0


def _row(c) -> dict:
    e = c.estimate
    return {
        "schedule": c.schedule,
        "v": c.v,
        "mbs": c.mbs,
        "microbatches": c.microbatches,
        "step_time": c.step_time,
        "peak": c.peak,
        "rejected": c.why or None,
        "reason": c.reason,
        "bubble_fraction_of_total": e.bubble_fraction_of_total if e else None,
        "bubble_fraction_of_ideal": e.bubble_fraction_of_ideal if e else None,
    }
