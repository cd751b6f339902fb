"""The whole compile path against torch.distributed.pipelining, side by side, in one process.

    python bench/bench_pipeline.py [--sizes 64,128,256,512] [--repeat 3] [--clock wall|cpu]
    python bench/bench_pipeline.py --tune [--tune-P 8] [--repeat 3] [--clock cpu]

For interleaved 1F1B at P=32, v=4 and each M, alternating ppir and torch ``--repeat`` times:

ppir   what ``ppir compile interleaved_1f1b -D P=32 -D M=.. -D v=4 --backend cost`` does:
       expand the .pps built-in, compile (verify the input, lower-comms, verify,
       overlap-comms, build the graph, time it, verify), then the estimate and the memory
       analysis the cost backend prints;
torch  ``ScheduleInterleaved1F1B(stages, M)`` (its order, validation and send/recv lowering),
       ``_simulate_comms_compute`` on the lowered order (its deadlock check) and
       ``add_schedule_op_spacing`` (its step simulation, stdout silenced).

It prints per-stage times (the min over repeats), microseconds per lowered op, the ratio
ppir/torch (min and median of the paired repeats), the log-log slope of ppir's time over M,
and peak memory (tracemalloc, a separate run) per lowered op including the graph.  ``--tune``
instead times ``ppir tune`` (its ``ppir.tune/2`` JSON) over every built-in, v in {1, 2, 4} and
two micro-batch sizes, and prints candidates (ranked, pruned and rejected) per second.  Run by
hand (never in timed tests); the machine is shared, so read the ratios (``--clock cpu``).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import logging
import math
import statistics
import time
import tracemalloc
from types import SimpleNamespace

P, V = 32, 4


def clock(kind: str):
    return time.process_time if kind == "cpu" else time.perf_counter


def ppir_run(M: int, now) -> dict:
    import ppir

    out = {}
    t0 = now()
    s = ppir.load("interleaved_1f1b", P=P, M=M, v=V)
    t1 = now()
    c = ppir.compile(s)
    t2 = now()
    e = c.estimate
    t3 = now()
    assert c.ok and e.step_time > 0
    out.update(expand=t1 - t0, compile=t2 - t1, estimate=t3 - t2, total=t3 - t0)
    out.update({f"  {k}": v for k, v in c.timings.items()})
    out["ops"] = c.program.num_ops
    return out


def torch_run(M: int, now) -> dict:
    from torch.distributed.pipelining._schedule_visualizer import add_schedule_op_spacing
    from torch.distributed.pipelining._utils import generate_stage_to_rank_mapping
    from torch.distributed.pipelining.schedules import (
        ScheduleInterleaved1F1B,
        _add_send_recv,
        _simulate_comms_compute,
    )

    stages = [
        SimpleNamespace(num_stages=P * V, group_size=P, group_rank=0, stage_index=i, submod=None)
        for i in range(V)
    ]
    t0 = now()
    sched = ScheduleInterleaved1F1B(stages, M)
    t1 = now()
    s2r = generate_stage_to_rank_mapping(P, P * V).__getitem__
    order = {r: [a for a in sched.pipeline_order[r] if a is not None] for r in range(P)}
    lowered = _add_send_recv({r: list(x) for r, x in order.items()}, s2r, P * V)  # not timed:
    t2 = now()  # the constructor did the same lowering already
    _simulate_comms_compute(lowered, s2r, P * V)
    t3 = now()
    with contextlib.redirect_stdout(io.StringIO()):
        add_schedule_op_spacing([list(x) for x in order.values()])
    t4 = now()
    return {
        "constructor": t1 - t0,
        "simulate": t3 - t2,
        "spacing": t4 - t3,
        "total": (t1 - t0) + (t4 - t2),
        "ops": sum(len(x) for x in lowered.values()),
    }


def peak_mib(fn) -> float:
    gc.collect()
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20


def pipeline_bench(args) -> None:
    logging.disable(logging.WARNING)
    import torch.distributed.pipelining  # noqa: F401 - imported before timing

    now = clock(args.clock)
    import ppir.stage_timing

    ppir.stage_timing.STAGE_CLOCK = now  # the per-stage split on the same clock
    sizes = [int(x) for x in args.sizes.split(",")]
    rows = []
    for M in sizes:
        pr, tr = [], []
        for _ in range(args.repeat):  # alternating, paired
            gc.collect()
            pr.append(ppir_run(M, now))
            gc.collect()
            tr.append(torch_run(M, now))
        ratios = [p["total"] / t["total"] for p, t in zip(pr, tr)]
        best = {k: min(r[k] for r in pr) for k in pr[0]}
        tbest = {k: min(r[k] for r in tr) for k in tr[0]}
        mem = peak_mib(lambda M=M: ppir_run(M, now)) if args.memory else float("nan")
        rows.append((M, best, tbest, min(ratios), statistics.median(ratios), mem))
        stages = "  ".join(
            f"{k.strip()} {v:.2f}" for k, v in best.items() if k not in ("ops", "total")
        )
        print(
            f"M={M}: ppir {best['total']:.2f} s ({stages}); torch {tbest['total']:.2f} s "
            f"(constructor {tbest['constructor']:.2f}, simulate {tbest['simulate']:.2f}, "
            f"spacing {tbest['spacing']:.2f})",
            flush=True,
        )
    print()
    print(f"interleaved_1f1b P={P} v={V}, {args.repeat} alternating repeats, {args.clock} clock")
    print(
        "| M | lowered ops | ppir (s) | us/op | torch (s) | ppir/torch min | median "
        "| ppir MiB | bytes/op |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for M, best, tbest, rmin, rmed, mem in rows:
        n = best["ops"]
        print(
            f"| {M} | {n} | {best['total']:.2f} | {1e6 * best['total'] / n:.1f} "
            f"| {tbest['total']:.2f} | {rmin:.2f} | {rmed:.2f} | {mem:.0f} "
            f"| {mem * 2**20 / n:.0f} |"
        )
    if len(rows) > 1:
        xs = [math.log(r[1]["ops"]) for r in rows]
        ys = [math.log(r[1]["total"]) for r in rows]
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        print(f"log-log slope of ppir's time over lowered ops: {slope:.2f}")


def tune_bench(args) -> None:
    """``ppir tune`` (JSON ``ppir.tune/2``) over every built-in: candidates are the ranked
    and slower (compiled), pruned (bounded, not compiled) and rejected ones together."""
    import json

    from ppir.cli.main import main

    argv = [
        "tune",
        "-P",
        str(args.tune_P),
        "--global-batch",
        str(8 * args.tune_P),
        "--micro-batch",
        "1,2",
        "--v",
        "1,2,4",
        "--format",
        "json",
        "--quiet",
    ]
    now = clock(args.clock)
    times, data, code = [], None, None
    for _ in range(args.repeat):
        gc.collect()
        buf = io.StringIO()
        t = now()
        with contextlib.redirect_stdout(buf):
            code = main(argv)
        times.append(now() - t)
        data = json.loads(buf.getvalue())
    assert data["format"] == "ppir.tune/2", data.get("format")
    ranked, pruned, rejected = (len(data[k]) for k in ("ranked", "pruned", "rejected"))
    ranked += len(data.get("slower", []))  # compiled too, beyond --top
    n = ranked + pruned + rejected
    best, med = min(times), statistics.median(times)
    print(
        f"ppir {' '.join(argv)}: exit {code}; {n} candidates ({ranked} ranked, {pruned} pruned, "
        f"{rejected} rejected) in {best:.2f} s min / {med:.2f} s median ({args.clock} clock, "
        f"{args.repeat} repeats): {n / best:.1f} candidates per second (median "
        f"{n / med:.1f})"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="64,128,256,512")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    ap.add_argument("--no-memory", dest="memory", action="store_false")
    ap.add_argument("--tune", action="store_true")
    ap.add_argument("--tune-P", type=int, default=8)
    args = ap.parse_args()
    tune_bench(args) if args.tune else pipeline_bench(args)


if __name__ == "__main__":
    main()
