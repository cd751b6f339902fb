"""Zero-bubble schedules against 1F1B on ppir's executor, same model, side by side in one run.

    python bench/bench_zero_bubble_exec.py                  # 2 ranks, 8 x (Linear(512) + GELU)
    python bench/bench_zero_bubble_exec.py --ranks 2 --microbatches 4 --width 512 --batch 64

One launch of P CPU/gloo processes (one thread each).  The model is ``--layers`` x
(Linear(width) + GELU), built once from one seed and cut into P stages (1F1B, ZB-H1) or 2P
stages (ZB-V) with ``ppir.torch.split_layers``, so every schedule trains the same model on the
same data.  First, on rank 0's first stage, B, I and W are timed alone (I and W are
:mod:`ppir.torch.backward`'s, without recomputation), to report W / B.  Then each schedule runs
two warm-up steps and ``--steps`` timed rounds alternating the schedules; a step is timed on
rank 0 between barriers.  Each rank is pinned to its own core when there are enough.
Printed: W / B, min and median step per schedule, and each one's ratio to 1F1B (< 1: faster);
step-0 losses agree across schedules.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_executor import finish_worker, run_launched, run_step, runtime_for, timed  # noqa: E402

SCHEDULES = ["1f1b", "zb_h1", "zbv"]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--microbatches", type=int, default=4)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--batch", type=int, default=64, help="microbatch size")
    p.add_argument("--worker", metavar="OUT", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def make_model(args):
    import types

    import torch
    import torch.nn as nn

    from ppir.torch import split_layers

    cache: dict = {}

    def stages(n):
        if n not in cache:
            torch.manual_seed(0)
            layers = [
                nn.Sequential(nn.Linear(args.width, args.width), nn.GELU())
                for _ in range(args.layers)
            ]
            cache[n] = split_layers(layers, n)
        return cache[n]

    def make_batch(step):
        g = torch.Generator().manual_seed(step)
        n = args.batch * args.microbatches
        return torch.randn(n, args.width, generator=g), torch.randn(n, args.width, generator=g)

    return types.SimpleNamespace(
        build_stage=lambda s, n: stages(n)[s],
        make_batch=make_batch,
        loss_fn=lambda y, t: ((y - t) ** 2).mean(),
    )


def stage_parts(model, args, repeats: int = 10) -> dict:
    """min times of B, I and W alone on one stage (this process)."""
    import torch

    from ppir.torch.backward import backward_input, backward_weight

    stage = model.build_stage(0, args.ranks)
    params = [p for p in stage.parameters()]
    x0 = torch.randn(args.batch, args.width)
    out = {"B": [], "I": [], "W": []}
    for _ in range(repeats):
        for kind in ("B", "IW"):
            for p in params:
                p.grad = None
            x = x0.clone().requires_grad_(True)
            y = stage(x)
            g = torch.ones_like(y)
            t0 = time.perf_counter()
            if kind == "B":
                torch.autograd.backward([y], [g])
                out["B"].append(time.perf_counter() - t0)
                continue
            _, work = backward_input([y], [g], [x], params)
            t1 = time.perf_counter()
            backward_weight(work)
            out["I"].append(t1 - t0)
            out["W"].append(time.perf_counter() - t1)
    return {k: min(v) for k, v in out.items()}


def worker(args) -> None:
    import torch
    import torch.distributed as dist

    import ppir
    from ppir.plan import build_plan
    from ppir.torch import procgroup
    from ppir.torch.model import split_batch

    torch.set_num_threads(1)
    ctx = procgroup.init(device="cpu", timeout_s=300)
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) >= ctx.world:  # one core per rank: no migration between the two
        os.sched_setaffinity(0, {cores[ctx.rank]})
    model = make_model(args)
    parts = stage_parts(model, args)
    P, M = ctx.world, args.microbatches
    runs, losses = {}, {}
    for name in SCHEDULES:
        s = ppir.compile(ppir.load_schedule(name, {"P": P, "M": M})).program  # as launch
        runs[name] = runtime_for(ctx, build_plan(s), model)
    mb_in, mb_tgt = split_batch(model, 0, M, ctx.device, ctx.rank)
    for name, rt in runs.items():
        for _ in range(2):
            loss = run_step(rt, mb_in, mb_tgt)
        losses[name] = loss.item() if loss is not None else None
    times = {k: [] for k in runs}
    for _ in range(args.steps):
        for name, rt in runs.items():
            times[name].append(timed(lambda rt=rt: run_step(rt, mb_in, mb_tgt)))
    gathered = [None] * P
    dist.all_gather_object(gathered, losses)
    final = {k: next(g[k] for g in gathered if g[k] is not None) for k in runs}
    finish_worker(ctx.rank, args.worker, {"parts": parts, "times": times, "loss": final})


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    res = run_launched(__file__, argv, args.ranks, deadline_s=1800)
    if res is None:
        return 1
    parts, times = res["parts"], res["times"]
    print(
        f"{args.ranks} ranks, M={args.microbatches}, {args.layers} x (Linear({args.width}) + "
        f"GELU), microbatch {args.batch}, CPU/gloo 1 thread per rank, {args.steps} alternating "
        "timed rounds"
    )
    b, i, w = parts["B"], parts["I"], parts["W"]
    print(
        f"stage 0 alone: B {b * 1e3:.2f} ms, I {i * 1e3:.2f} ms, W {w * 1e3:.2f} ms: "
        f"W / B = {w / b:.2f}, (I + W) / B = {(i + w) / b:.2f}"
    )
    print(
        f"{'schedule':10s} {'min ms':>8s} {'median ms':>10s} {'min/1F1B':>9s} "
        f"{'median/1F1B':>12s} {'loss':>9s}"
    )
    base_min, base_med = min(times["1f1b"]), statistics.median(times["1f1b"])
    for name, ts in times.items():
        mn, md = min(ts), statistics.median(ts)
        print(
            f"{name:10s} {mn * 1e3:8.1f} {md * 1e3:10.1f} {mn / base_min:9.3f} "
            f"{md / base_med:12.3f} {res['loss'][name]:9.5f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
