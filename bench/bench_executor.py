"""ppir's runtime vs torch.distributed.pipelining on the same model and schedule, side by side.

    python bench/bench_executor.py [--steps 20] [--ranks 4] [--microbatches 8]
                                   [--module examples/gpt_model.py] [--module-opt KEY=VALUE ...]

One launch of P CPU/gloo processes runs, for GPipe, 1F1B and interleaved 1F1B (v=2): both
runtimes built from the same ``build_stage`` factory, two warm-up steps each, then ``--steps``
timed rounds that alternate one ppir step and one torch step (so that background load on a
shared machine hits both alike).  A step is timed on rank 0 between two barriers, gradients are
zeroed before each step, and step 0's losses of both runtimes are compared.  Printed: median and
minimum step time of each runtime and the ratio ppir / torch of the medians (< 1: ppir faster).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import NoReturn

ROOT = Path(__file__).resolve().parent.parent
SCHEDULES = [
    ("gpipe", "ScheduleGPipe", 1),
    ("1f1b", "Schedule1F1B", 1),
    ("interleaved_1f1b", "ScheduleInterleaved1F1B", 2),
]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--microbatches", type=int, default=8)
    p.add_argument("--module", default=str(ROOT / "examples" / "gpt_model.py"))
    p.add_argument("--module-opt", action="append", default=[])
    p.add_argument("--worker", metavar="OUT", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def runtime_for(ctx, plan: dict, model):
    """ppir's runtime for this rank of ``plan`` on fresh stages of ``model``."""
    from ppir.torch import PipelineRuntime
    from ppir.torch.model import build_stages

    mods = build_stages(
        model, plan["stages_of_rank"][ctx.rank], plan["stages"], ctx.device, ctx.rank
    )
    return PipelineRuntime(plan, mods, model.loss_fn, timeout_s=300)


def run_step(rt, mb_in, mb_tgt):
    """One step of ``rt`` from zeroed gradients; the loss (on the last stage's rank)."""
    for m in rt.stages:
        m.zero_grad(set_to_none=True)
    return rt.step_microbatches(
        mb_in if rt.has_first_stage else None, mb_tgt if rt.has_last_stage else None
    )


def timed(fn) -> float:
    import torch.distributed as dist

    dist.barrier()
    t = time.perf_counter()
    fn()
    dist.barrier()
    return time.perf_counter() - t


def bench_schedule(ctx, model, name: str, torch_cls: str, v: int, args) -> dict:
    """Both runtimes on one schedule: warm-up, then alternating timed steps."""
    import torch
    import torch.distributed as dist
    from torch.distributed import pipelining

    import ppir
    from ppir.plan import build_plan
    from ppir.torch.model import split_batch

    P, M = ctx.world, args.microbatches
    params = {"P": P, "M": M} | ({"v": v} if v > 1 else {})
    program = ppir.compile(ppir.load_schedule(name, params)).program  # what launch runs
    ex = runtime_for(ctx, build_plan(program), model)
    mb_in, mb_tgt = split_batch(model, 0, M, ctx.device, ctx.rank)
    inputs, targets = model.make_batch(0)
    S = P * v
    ids = [ctx.rank + k * P for k in range(v)]
    stages = [pipelining.PipelineStage(model.build_stage(s, S), s, S, ctx.device) for s in ids]
    sched = getattr(pipelining, torch_cls)(
        stages[0] if v == 1 else stages, M, loss_fn=model.loss_fn
    )
    losses: dict[str, list] = {"ppir": [], "torch": []}

    def ppir_step():
        loss = run_step(ex, mb_in, mb_tgt)
        if loss is not None:
            losses["ppir"].append(loss.item())

    def torch_step():
        for st in stages:
            st.submod.zero_grad(set_to_none=True)
        kw = {"target": targets, "losses": []} if S - 1 in ids else {}
        sched.step(*((inputs,) if 0 in ids else ()), **kw)
        if kw:
            losses["torch"].append(sum(x.item() for x in kw["losses"]) / M)

    for _ in range(2):
        ppir_step()
        torch_step()
    t_ppir, t_torch = [], []
    for _ in range(args.steps):
        t_ppir.append(timed(ppir_step))
        t_torch.append(timed(torch_step))
    diff = torch.tensor([abs(losses["ppir"][0] - losses["torch"][0]) if losses["ppir"] else 0.0])
    dist.all_reduce(diff, op=dist.ReduceOp.MAX)
    return {"ppir": t_ppir, "torch": t_torch, "loss_diff": diff.item()}


def worker(args) -> None:
    import torch

    from ppir.torch import procgroup
    from ppir.torch.model import load_model, parse_options

    torch.set_num_threads(1)
    ctx = procgroup.init(device="cpu", timeout_s=120)
    model = load_model(args.module, parse_options(args.module_opt))
    results = {}
    for name, torch_cls, v in SCHEDULES:
        key = f"{name}(P={ctx.world}, M={args.microbatches}" + (f", v={v})" if v > 1 else ")")
        results[key] = bench_schedule(ctx, model, name, torch_cls, v, args)
    finish_worker(ctx.rank, args.worker, results)


def report(results: dict, args) -> None:
    print(
        f"model {Path(args.module).name} {' '.join(args.module_opt)}; CPU/gloo, {args.ranks} "
        f"ranks, {args.steps} timed steps each, alternating ppir/torch"
    )
    head = (
        f"{'schedule':34s} {'ppir median':>12s} {'torch median':>13s} {'ratio':>6s} "
        f"{'ppir min':>9s} {'torch min':>10s} {'|loss diff|':>11s}"
    )
    print(head)
    for name, r in results.items():
        mp, mt = statistics.median(r["ppir"]) * 1e3, statistics.median(r["torch"]) * 1e3
        print(
            f"{name:34s} {mp:9.1f} ms {mt:10.1f} ms {mp / mt:6.2f} {min(r['ppir']) * 1e3:6.1f} ms"
            f" {min(r['torch']) * 1e3:7.1f} ms {r['loss_diff']:11.2e}"
        )


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    results = run_launched(__file__, argv, args.ranks, deadline_s=1200)
    if results is None:
        return 1
    report(results, args)
    return 0


def finish_worker(rank: int, out: str, results) -> NoReturn:
    """A worker's end: rank 0 writes ``results`` (JSON) to ``out`` for :func:`run_launched`,
    then every rank leaves together, its process ending with status 0."""
    import torch.distributed as dist

    if rank == 0:
        Path(out).write_text(json.dumps(results))
    dist.barrier()
    from ppir.torch.leave import leave

    leave(0)  # not finalising: a gloo worker can abort it (ppir.torch.leave)


def run_launched(script: str, argv, ranks: int, deadline_s: float) -> dict | None:
    """Run ``script argv --worker OUT`` on ``ranks`` local processes; rank 0's JSON results, or
    None (after printing the first failure) when a rank failed."""
    from ppir.backends.cuda.launch import report, start

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bench.json"
        argv = list(argv if argv is not None else sys.argv[1:])
        res = start((script, *argv, "--worker", str(out)), ranks)
        if not res.ok:
            report(res)
            return None
        return json.loads(out.read_text())


if __name__ == "__main__":
    sys.exit(main())
