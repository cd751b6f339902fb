"""``python -m ppir.run PLAN --model MODEL``: one rank of a pipelined training run.

Start it with torchrun (``torchrun --nproc-per-node P -m ppir.run plan.json --model m.py``) or
with ``ppir launch``.  Each rank loads the plan, checks it against the world size, builds its
stages, infers boundary metadata, warms up its peer pairs, then runs ``--steps`` steps: zero
grads, interpret the plan (:class:`.executor.Executor`), optimizer step.  The rank holding the
last stage prints ``step N  loss L  T ms``.  Any exception ends every rank non-zero within
bounded time with the failing rank's message (:mod:`.procgroup`).
"""

from __future__ import annotations

import argparse
import sys
import time

from ppir.backends.cuda.plan import PlanError, load_plan, save_plan

EXIT_FAIL, EXIT_USAGE = 1, 2


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    """Runtime options shared by ``ppir.run`` and ``ppir launch``."""
    p.add_argument(
        "--model",
        required=True,
        metavar="MODEL",
        help="model module: a .py path or a dotted name with build_stage, make_batch and loss_fn",
    )
    p.add_argument(
        "--model-opt",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="option passed to the model's configure(**options) (repeatable)",
    )
    p.add_argument("--steps", type=int, default=10, help="training steps (default 10)")
    p.add_argument(
        "--lr",
        type=float,
        default=0.01,
        help="SGD learning rate when the model has no make_optimizer (default 0.01)",
    )
    p.add_argument(
        "--device",
        default="auto",
        help="auto (cuda:LOCAL_RANK when GPUs are present, else cpu), cpu, cuda",
    )
    p.add_argument(
        "--dist-backend", choices=["nccl", "gloo"], help="default: nccl on cuda, gloo on cpu"
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="process-group timeout: a stuck peer fails after this (default 60)",
    )
    p.add_argument(
        "--verify-grads",
        action="store_true",
        help="compare step 0's loss and gradients with a single-process reference",
    )
    p.add_argument(
        "--tolerance",
        type=float,
        default=1e-5,
        help="largest allowed absolute difference for --verify-grads (default 1e-5)",
    )
    p.add_argument(
        "--dump-plan",
        metavar="PATH",
        help="rank 0 writes the plan with its inferred metadata to PATH",
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m ppir.run",
        description="Run one rank of a ppir execution plan (start with torchrun or 'ppir launch').",
    )
    p.add_argument(
        "plan", metavar="PLAN", help="a ppir.plan/1 file (ppir compile --backend cuda -o PLAN)"
    )
    add_run_arguments(p)
    return p


def prepare(ctx, plan: dict, model):
    """Check the world, build this rank's stages, fill metadata, warm up; -> Executor."""
    from ppir.backends.cuda.executor import Executor
    from ppir.backends.cuda.model import build_stages, split_batch
    from ppir.backends.cuda.procgroup import plan_pairs, warm_up
    from ppir.backends.cuda.shapes import infer_meta, meta_from_json

    if ctx.world != plan["ranks"]:
        raise PlanError(
            f"rank {ctx.rank}: the plan is for {plan['ranks']} ranks but the "
            f"process group has {ctx.world} (WORLD_SIZE): launch "
            f"--nproc-per-node {plan['ranks']}"
        )
    stages = plan["stages_of_rank"][ctx.rank]
    modules = build_stages(model, stages, plan["stages"], ctx.device, ctx.rank)
    if plan.get("meta"):
        meta = meta_from_json(plan["meta"])
    else:
        inputs, _ = split_batch(model, 0, plan["microbatches"], ctx.device, ctx.rank)
        meta = infer_meta(plan, ctx.rank, modules, inputs[0], ctx.device)
    warm_up(plan_pairs(plan), ctx.rank, ctx.device)
    return Executor(plan, ctx.rank, modules, model.loss_fn, meta, ctx.device)


def verify_step0(ctx, plan, model, ex, loss, tolerance: float) -> bool:
    """Compare this step's grads (and loss) with the reference; all ranks agree on the verdict."""
    import torch
    import torch.distributed as dist
    from ppir.backends.cuda.reference import max_grad_diff, reference_grads

    ref_loss, ref = reference_grads(model, plan["stages"], 0, ctx.device)
    gdiff, where = max_grad_diff(ex.modules, ex.stages, ref)
    ldiff = abs(loss.item() - ref_loss.item()) if loss is not None else 0.0
    worst = torch.tensor([gdiff, ldiff], dtype=torch.float64, device=ctx.device)
    dist.all_reduce(worst, op=dist.ReduceOp.MAX)
    gmax, lmax = worst.tolist()
    ok = gmax <= tolerance and lmax <= tolerance
    if ctx.rank == 0:
        print(
            f"verify-grads: largest |grad diff| {gmax:.3e}, |loss diff| {lmax:.3e} "
            f"(tolerance {tolerance:g}): {'OK' if ok else 'FAILED'}",
            flush=True,
        )
    if gdiff > tolerance:
        print(
            f"verify-grads: rank {ctx.rank}: largest difference at {where}: {gdiff:.3e}", flush=True
        )
    return ok


def train(ctx, plan: dict, model, args) -> int:
    import torch
    from ppir.backends.cuda.model import make_optimizer, split_batch

    ex = prepare(ctx, plan, model)
    if args.dump_plan and ctx.rank == 0:
        from ppir.backends.cuda.shapes import meta_to_json

        save_plan({**plan, "meta": meta_to_json(ex.meta)}, args.dump_plan)
    params = [p for m in ex.modules for p in m.parameters() if p.requires_grad]
    opt = make_optimizer(model, params, args.lr) if params else None
    holds_loss = plan["stages"] - 1 in ex.stages
    status, times = 0, []
    for step in range(args.steps):
        t0 = time.perf_counter()
        if opt is not None:
            opt.zero_grad(set_to_none=True)
        inputs, targets = split_batch(model, step, plan["microbatches"], ctx.device, ctx.rank)
        loss = ex.step(inputs, targets)
        if (
            step == 0
            and args.verify_grads
            and not verify_step0(ctx, plan, model, ex, loss, args.tolerance)
        ):
            status = EXIT_FAIL
        if opt is not None:
            opt.step()
        if ctx.device.type == "cuda":
            torch.cuda.synchronize(ctx.device)
        dt = time.perf_counter() - t0
        times.append(dt)
        if holds_loss:
            print(f"step {step:4d}  loss {loss.item():.4f}  {dt * 1e3:8.1f} ms", flush=True)
    if holds_loss and len(times) > 1:
        steady = times[1:]
        print(
            f"ppir.run: {len(times)} steps, mean step time {sum(steady) / len(steady) * 1e3:.1f}"
            f" ms (steps 1..{len(times) - 1}), peak in-flight activations on rank "
            f"{ctx.rank}: {ex.peak_saved}",
            flush=True,
        )
    return status


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        plan = load_plan(args.plan)
    except PlanError as e:
        print(f"ppir.run: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    from ppir.backends.cuda import procgroup

    ctx = None
    try:
        ctx = procgroup.init(args.device, args.dist_backend, args.timeout)
        if ctx.channel is not None:
            ctx.channel.start_watchdog()
        from ppir.backends.cuda.model import load_model, parse_options

        model = load_model(args.model, parse_options(args.model_opt))
        status = train(ctx, plan, model, args)
    except BaseException as e:  # noqa: BLE001 - every failure must end every rank
        rank = ctx.rank if ctx is not None else None
        procgroup.fail(ctx, rank, f"{type(e).__name__}: {e}")
    import torch.distributed as dist

    if ctx.channel is not None:
        ctx.channel.stop()
    dist.barrier()  # nobody leaves (rank 0 takes the store with it) while others still run
    dist.destroy_process_group()
    return status
