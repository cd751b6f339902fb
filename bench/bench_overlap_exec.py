"""overlap-comms on the real runtime: ppir's executor with and without the pass, side by side.

    python bench/bench_overlap_exec.py [--steps 10] [--ranks 4] [--microbatches 8] [--width 1024]

One launch of P CPU/gloo processes.  Each stage is a width x width Linear + tanh on microbatches
of ``width`` rows, so every message carries width*width*4 bytes (4 MiB at the default 1024).  For
1F1B and interleaved 1F1B (v=2) the schedule runs three ways, timed steps alternating so that
background load hits all alike:

* ``blocking``  lockstep groups, posted and waited at one point ('ppir compile --no-overlap');
* ``overlap``   overlap-comms over the lockstep lowering ('--lowering lockstep');
* ``planned``   what 'ppir compile' runs by default with a cost model: the faster (in the
  estimator) of overlap-comms over the lockstep and over the eager lowering, planned with the
  forward, backward and transfer times measured here first (median of 5 each).

Printed: median and minimum step time, the ratios of the medians to ``blocking`` (< 1: faster),
the largest difference between the runs' gradients (they must agree: same math, same order),
and the ratios the cost estimator predicts for the three plans from the measured times.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_executor import finish_worker, run_launched, run_step, runtime_for, timed  # noqa: E402

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
        return torch.randn(M * width, width, generator=g), torch.randn(
            M * width, width, generator=g
        )

    def loss_fn(y, t):
        return ((y - t) ** 2).mean()

    return types.SimpleNamespace(build_stage=build_stage, make_batch=make_batch, loss_fn=loss_fn)


def bench_schedule(ctx, name: str, v: int, args) -> dict:
    import torch
    import torch.distributed as dist

    import ppir
    from ppir.analysis.config import make_config
    from ppir.analysis.estimate import estimate
    from ppir.passes import OverlapComms
    from ppir.pipeline import compile
    from ppir.plan import build_plan
    from ppir.torch.model import split_batch

    P, M = ctx.world, args.microbatches
    model = wide_model(args.width, M)
    s = ppir.load_schedule(name, {"P": P, "M": M} | ({"v": v} if v > 1 else {}))
    lowered = ppir.lower(s)
    fwd, bwd, xfer = args.measured
    # costs in forwards of a rank share (v chunks, each one Linear here)
    cfg = make_config({"costs": {"B": bwd / fwd}, "comm": {"latency": xfer / (v * fwd)}})
    planned = compile(s, costs=cfg).program  # what 'ppir launch' runs with these costs
    overlapped = OverlapComms().apply(lowered)
    predicted = [estimate(x, cfg, memory=False).step_time for x in (lowered, overlapped, planned)]
    runs = {
        "blocking": runtime_for(ctx, build_plan(lowered), model),
        "overlap": runtime_for(ctx, build_plan(overlapped), model),
        "planned": runtime_for(ctx, build_plan(planned), model),
    }
    mb_in, mb_tgt = split_batch(model, 0, M, ctx.device, ctx.rank)

    def step(ex):
        run_step(ex, mb_in, mb_tgt)

    times: dict[str, list] = {k: [] for k in runs}
    for ex in runs.values():
        step(ex)
    grads = [[p.grad.clone() for m in ex.stages for p in m.parameters()] for ex in runs.values()]
    diff = max((a - b).abs().max().item() for other in grads[1:] for a, b in zip(grads[0], other))
    for _ in range(args.steps):
        for k, ex in runs.items():
            times[k].append(timed(lambda ex=ex: step(ex)))
    d = torch.tensor([diff])
    dist.all_reduce(d, op=dist.ReduceOp.MAX)
    return {**times, "grad_diff": d.item(), "predicted": predicted}


def measure(ctx, width: int) -> tuple[float, float, float]:
    """Median seconds of one stage's forward and backward on a microbatch, and of one message
    from rank 0 to rank 1 (the largest over ranks)."""
    import torch
    import torch.distributed as dist
    import torch.nn as nn

    stage = nn.Sequential(nn.Linear(width, width), nn.Tanh())
    x = torch.randn(width, width, requires_grad=True)
    fwd, bwd, xfer = [], [], []
    buf = torch.randn(width, width)

    def message() -> None:
        if ctx.rank == 0:
            dist.send(buf, 1)
        elif ctx.rank == 1:
            dist.recv(buf, 0)

    for _ in range(5):
        t0 = time.perf_counter()
        y = stage(x)
        t1 = time.perf_counter()
        y.backward(torch.ones_like(y))
        fwd.append(t1 - t0)
        bwd.append(time.perf_counter() - t1)
        xfer.append(timed(message))  # all ranks: timed() brackets it with barriers
    vals = torch.tensor(
        [statistics.median(fwd), statistics.median(bwd), statistics.median(xfer)],
        dtype=torch.float64,
    )
    dist.all_reduce(vals, op=dist.ReduceOp.MAX)
    return tuple(vals.tolist())


def worker(args) -> None:
    import torch

    from ppir.torch import procgroup

    torch.set_num_threads(1)
    ctx = procgroup.init(device="cpu", timeout_s=300)
    args.measured = measure(ctx, args.width)
    results = {"measured": args.measured}
    for name, v in SCHEDULES:
        key = f"{name}(P={ctx.world}, M={args.microbatches}" + (f", v={v})" if v > 1 else ")")
        results[key] = bench_schedule(ctx, name, v, args)
    finish_worker(ctx.rank, args.worker, results)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    results = run_launched(__file__, argv, args.ranks, deadline_s=1800)
    if results is None:
        return 1
    mib = args.width * args.width * 4 / 2**20
    fwd, bwd, xfer = results.pop("measured")
    print(
        f"CPU/gloo, {args.ranks} ranks, {mib:.1f} MiB per message, {args.steps} timed steps "
        f"each, alternating; measured per chunk: forward {fwd * 1e3:.1f} ms, backward "
        f"{bwd * 1e3:.1f} ms, one message {xfer * 1e3:.1f} ms ({xfer / fwd:.0%} of a forward)"
    )
    kinds = ("blocking", "overlap", "planned")
    print(
        f"{'schedule':32s} "
        + " ".join(f"{k:>9s}" for k in kinds)
        + f" {'ovl/blk':>7s} {'pln/blk':>7s} "
        + " ".join(f"{'min ' + k[:3]:>8s}" for k in kinds)
        + f" {'grad diff':>9s} | estimated ovl/blk pln/blk"
    )
    for name, r in results.items():
        med = {k: statistics.median(r[k]) * 1e3 for k in kinds}
        est = r["predicted"]
        print(
            f"{name:32s} "
            + " ".join(f"{med[k]:6.0f} ms" for k in kinds)
            + f" {med['overlap'] / med['blocking']:7.2f} {med['planned'] / med['blocking']:7.2f} "
            + " ".join(f"{min(r[k]) * 1e3:5.0f} ms" for k in kinds)
            + f" {r['grad_diff']:9.1e}"
            + f" | {est[1] / est[0]:17.2f} {est[2] / est[0]:7.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
