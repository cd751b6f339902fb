"""Front-end benchmark: expansion + IR + lowering of interleaved_1f1b vs torch's constructor.

    python bench/bench_frontend.py [--sizes 32x64x4,32x128x4,32x256x4,32x512x4] [--repeat 3]

For each P x M x v, in one process and one run, side by side:
  ppir   parse + expand the .pps built-in, lower communication (lockstep), build the networkx
         dependency graph (the IR's graph view);
  torch  ScheduleInterleaved1F1B(stages, M) with stand-in stage objects: its constructor builds
         the order, validates it and inserts send/recv (torch.distributed.pipelining, CPU).
Times are the best of --repeat runs; memory is tracemalloc's peak during a separate run of each
phase (so allocation tracing does not inflate the times).  torch is imported before timing.
"""

from __future__ import annotations

import argparse
import gc
import logging
import time
import tracemalloc
from types import SimpleNamespace


def ppir_phases(P: int, M: int, v: int) -> dict[str, float]:
    from ppir.frontend.loader import load_schedule
    from ppir.ir.graph import build_graph
    from ppir.passes import LowerComms

    t0 = time.perf_counter()
    s = load_schedule("interleaved_1f1b", {"P": P, "M": M, "v": v})
    t1 = time.perf_counter()
    lowered = LowerComms().apply(s)
    t2 = time.perf_counter()
    g = build_graph(lowered)
    t3 = time.perf_counter()
    assert g.number_of_nodes() == lowered.num_ops
    return {
        "expand": t1 - t0,
        "lower": t2 - t1,
        "graph": t3 - t2,
        "ops": s.num_compute_ops,
        "lowered_ops": lowered.num_ops,
    }


def torch_constructor(P: int, M: int, v: int) -> float:
    from torch.distributed.pipelining.schedules import ScheduleInterleaved1F1B

    stages = [
        SimpleNamespace(num_stages=P * v, group_size=P, group_rank=0, stage_index=i, submod=None)
        for i in range(v)
    ]
    t0 = time.perf_counter()
    ScheduleInterleaved1F1B(stages, M)
    return time.perf_counter() - t0


def peak_mib(fn) -> float:
    gc.collect()
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="32x64x4,32x128x4,32x256x4,32x512x4")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    logging.disable(logging.WARNING)
    import torch.distributed.pipelining.schedules  # noqa: F401  (import cost excluded)

    print(
        f"{'P x M x v':>12} {'compute':>8} {'lowered':>8} | {'expand':>7} {'lower':>7} "
        f"{'graph':>7} {'ppir e+l':>8} {'torch':>7} {'ratio':>6} | {'ppir MiB':>8} "
        f"{'torch MiB':>9}"
    )
    for size in args.sizes.split(","):
        P, M, v = (int(x) for x in size.split("x"))
        best = None
        tt = float("inf")
        for _ in range(args.repeat):
            r = ppir_phases(P, M, v)
            if best is None or r["expand"] + r["lower"] < best["expand"] + best["lower"]:
                best = r
            tt = min(tt, torch_constructor(P, M, v))
        pm = peak_mib(lambda P=P, M=M, v=v: ppir_phases(P, M, v))
        tm = peak_mib(lambda P=P, M=M, v=v: torch_constructor(P, M, v))
        el = best["expand"] + best["lower"]
        print(
            f"{size:>12} {best['ops']:>8} {best['lowered_ops']:>8} | {best['expand']:7.2f} "
            f"{best['lower']:7.2f} {best['graph']:7.2f} {el:8.2f} {tt:7.2f} {el / tt:6.2f} | "
            f"{pm:8.0f} {tm:9.0f}"
        )
    print(
        f"times in seconds (best of {args.repeat}); ratio = ppir (expand + lower) / torch "
        "constructor; MiB = tracemalloc peak (ppir includes the graph)"
    )


if __name__ == "__main__":
    main()
