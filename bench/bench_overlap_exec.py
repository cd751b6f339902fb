"""overlap-comms on the real runtime: ppir's executor with and without the pass, side by side.

    python bench/bench_overlap_exec.py [--steps 10] [--ranks 4] [--microbatches 8] [--width 1024]

One launch of P CPU/gloo processes.  Each stage is a width x width Linear + tanh on microbatches
of ``width`` rows, so every message carries width*width*4 bytes (4 MiB at the default 1024).  For
1F1B and interleaved 1F1B (v=2) the same lowered schedule runs with blocking groups
(--no-overlap) and after overlap-comms (deferred groups: post early, wait late); timed steps
alternate between the two so background load hits both alike.  Printed: median and minimum step
time and the ratio overlap / no-overlap of the medians (< 1: the pass helps), plus the largest
difference between the two runs' gradients (they must agree: same math, same order).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_executor import run_launched, timed  # noqa: E402  (same launcher and step timer)

SCHEDULES = [("1f1b", 1), ("interleaved_1f1b", 2)]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--microbatches", type=int, default=8)
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--worker", metavar="OUT", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def wide_model(width: int, M: int):
    import torch
    import torch.nn as nn

    def build_stage(stage, num_stages):
        torch.manual_seed(stage)
        return nn.Sequential(nn.Linear(width, width), nn.Tanh())

    def make_batch(step):
        g = torch.Generator().manual_seed(step)
        return torch.randn(M * width, width, generator=g), torch.randn(M * width, width,
                                                                         generator=g)

    def loss_fn(y, t):
        return ((y - t) ** 2).mean()

    return types.SimpleNamespace(build_stage=build_stage, make_batch=make_batch, loss_fn=loss_fn)


def bench_schedule(ctx, name: str, v: int, args) -> dict:
    import torch
    import torch.distributed as dist
    from ppir.backends.cuda import build_plan, runtime
    from ppir.backends.cuda.model import split_batch

    import ppir
    from ppir.passes import OverlapComms

    P, M = ctx.world, args.microbatches
    model = wide_model(args.width, M)
    lowered = ppir.lower(ppir.load_schedule(name, {"P": P, "M": M} | ({"v": v} if v > 1 else {})))
    runs = {"blocking": runtime.prepare(ctx, build_plan(lowered), model),
            "overlap": runtime.prepare(ctx, build_plan(OverlapComms().apply(lowered)), model)}
    mb_in, mb_tgt = split_batch(model, 0, M, ctx.device, ctx.rank)

    def step(ex):
        for m in ex.modules:
            m.zero_grad(set_to_none=True)
        ex.step(mb_in, mb_tgt)

    times: dict[str, list] = {k: [] for k in runs}
    for ex in runs.values():
        step(ex)
    grads = [[p.grad.clone() for m in ex.modules for p in m.parameters()] for ex in runs.values()]
    diff = max((a - b).abs().max().item() for a, b in zip(*grads))
    for _ in range(args.steps):
        for k, ex in runs.items():
            times[k].append(timed(lambda ex=ex: step(ex)))
    d = torch.tensor([diff])
    dist.all_reduce(d, op=dist.ReduceOp.MAX)
    return {**times, "grad_diff": d.item()}


def worker(args) -> None:
    import torch
    import torch.distributed as dist
    from ppir.backends.cuda import procgroup

    torch.set_num_threads(1)
    ctx = procgroup.init(device="cpu", timeout_s=300)
    results = {}
    for name, v in SCHEDULES:
        key = f"{name}(P={ctx.world}, M={args.microbatches}" + (f", v={v})" if v > 1 else ")")
        results[key] = bench_schedule(ctx, name, v, args)
    if ctx.rank == 0:
        Path(args.worker).write_text(json.dumps(results))
    dist.barrier()
    dist.destroy_process_group()


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    results = run_launched(__file__, argv, args.ranks, deadline_s=1800)
    if results is None:
        return 1
    mib = args.width * args.width * 4 / 2**20
    print(f"CPU/gloo, {args.ranks} ranks, {mib:.1f} MiB per message, {args.steps} timed steps "
          "each, alternating")
    print(f"{'schedule':32s} {'blocking':>10s} {'overlap':>10s} {'ratio':>6s} {'min blk':>9s} "
          f"{'min ovl':>9s} {'grad diff':>10s}")
    for name, r in results.items():
        b, o = statistics.median(r["blocking"]) * 1e3, statistics.median(r["overlap"]) * 1e3
        print(f"{name:32s} {b:7.0f} ms {o:7.0f} ms {o / b:6.2f} {min(r['blocking']) * 1e3:6.0f} ms"
              f" {min(r['overlap']) * 1e3:6.0f} ms {r['grad_diff']:10.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
