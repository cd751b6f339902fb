"""Where the split backward of a transformer stage spends its time: the GPT example's stage 1
of 4 (two blocks), F, B, I and W timed apart, with what I's planning and each of W's engine
calls cost on the host.

    python bench/bench_split_host.py --device cuda            # d_model 256 and 1024 (a GPU)
    python bench/bench_split_host.py --sizes 64 --repeats 10  # a CPU dry run

W runs one ``torch.autograd.backward`` per frontier node (:mod:`ppir.torch.backward`), 12 for
two blocks; on a GPU each engine call hands the work to the device's thread and waits for it,
so at small sizes the split costs host time, not kernels.  Prints min and median per part, the
median host time of one of W's engine calls, that of an engine call doing one tiny add, and
torch.profiler's table of one W (``--no-profile`` leaves it out).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.autograd.graph import GradientEdge

from ppir.torch import backward as bw

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import gpt_model  # noqa: E402


def stage_of(d: int, device: str):
    gpt_model.configure(d_model=d, heads=8, layers=8, seq=128, batch=32, vocab=256)
    stage = gpt_model.build_stage(1, 4).to(device)
    return stage, list(stage.parameters()), torch.randn(4, 128, d, device=device)


def one_call_each(work) -> list[float]:
    """W's engine calls one by one, each timed on the host (synchronised)."""
    times = []
    for node, grads, ps, free in reversed(work.starts):
        edges = [GradientEdge(node, k) for k, g in enumerate(grads) if g is not None]
        gs = [g for g in grads if g is not None]
        t = time.perf_counter()
        torch.autograd.backward(edges, gs, retain_graph=not free, inputs=ps)
        sync()
        times.append(time.perf_counter() - t)
    return times


def sync() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def measure(d: int, device: str, repeats: int) -> dict:
    stage, params, x0 = stage_of(d, device)

    def forward():
        x = x0.clone().requires_grad_(True)
        y = stage(x)
        return x, y, torch.randn_like(y)

    out = {k: [] for k in ("F", "B", "I", "W", "I's plan", "one W call")}
    for _ in range(repeats):
        sync()
        t = time.perf_counter()
        x, y, gy = forward()
        sync()
        out["F"].append(time.perf_counter() - t)
        t = time.perf_counter()
        bw.backward_full([y], [gy], [x])
        sync()
        out["B"].append(time.perf_counter() - t)
        x, y, gy = forward()
        sync()
        t = time.perf_counter()
        _, work = bw.backward_input([y], [gy], [x], params)
        sync()
        t1 = time.perf_counter()
        bw.backward_weight(work)
        sync()
        out["I"].append(t1 - t)
        out["W"].append(time.perf_counter() - t1)
        x, y, gy = forward()
        t = time.perf_counter()
        bw._plan([y], [x], params)
        out["I's plan"].append(time.perf_counter() - t)
        _, work = bw.backward_input([y], [gy], [x], params)
        sync()
        out["one W call"].append(statistics.median(one_call_each(work)))
    out["W calls"] = len(work.starts)
    return out


def tiny_call(device: str, n: int = 300) -> float:
    a = torch.randn(4, 4, device=device, requires_grad=True)
    times = []
    for _ in range(n):
        y = (a * 2).sum()
        sync()
        t = time.perf_counter()
        torch.autograd.backward([y], inputs=[a])
        sync()
        times.append(time.perf_counter() - t)
    return statistics.median(times[n // 6 :])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--sizes", default=None, help="d_model values (default 256,1024)")
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--no-profile", action="store_true")
    args = p.parse_args(argv)
    sizes = [int(s) for s in (args.sizes or "256,1024").split(",")]
    for d in sizes:
        res = measure(d, args.device, args.repeats)
        print(f"d_model {d}, 2 blocks, 4 x 128 tokens, {args.device}; {res['W calls']} W calls")
        for k, v in res.items():
            if k != "W calls":
                v = v[len(v) // 6 :]  # the first repeats warm up
                lo, mid = min(v) * 1e3, statistics.median(v) * 1e3
                print(f"  {k:11s} min {lo:7.3f} ms  median {mid:7.3f} ms")
    for device in dict.fromkeys((args.device, "cpu")):
        print(f"an engine call doing one tiny add on {device}: {tiny_call(device) * 1e6:.0f} us")
    if not args.no_profile:
        from torch.profiler import ProfilerActivity, profile

        stage, params, x0 = stage_of(sizes[0], args.device)
        x = x0.clone().requires_grad_(True)
        y = stage(x)
        _, work = bw.backward_input([y], [torch.randn_like(y)], [x], params)
        sync()
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device != "cpu" else [])
        with profile(activities=acts) as prof:
            bw.backward_weight(work)
            sync()
        print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=12))
    return 0


if __name__ == "__main__":
    sys.exit(main())
