"""``python -m ppir.run PLAN --module MODULE``: one rank of a pipelined training run.

Start it with ``ppir launch`` or torchrun (``torchrun --nproc-per-node N -m ppir.run plan.json
--module m.py``).  Each rank loads and validates the plan, joins the process group, lays the
world out as ``pp x dp`` (the plan's ranks times ``--dp`` replicas, default WORLD_SIZE / ranks),
builds its stages from the model module (:mod:`.model`), and runs ``--steps`` steps through
:class:`ppir.torch.PipelineRuntime`: zero grads, the plan's program, optimizer step (the first
steps also check that every rank got the same batch from ``make_batch``).  The rank
holding the last stage of replica 0 prints ``step N  loss L  T ms`` (the loss averaged over
replicas).  Any failure ends every rank non-zero within bounded time with the failing rank's
message (:mod:`.failures`); a rank that finished ends through :func:`ppir.torch.leave.leave`.

This module imports torch only inside functions: ``ppir launch`` reads its options without it.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

from ppir.cli.argtypes import (
    learning_rate,
    nonempty_path,
    number,
    positive_int,
    positive_seconds,
)
from ppir.cli.deprecation import Renamed

EXIT_FAIL, EXIT_USAGE = 1, 2


def add_module_arguments(p: argparse.ArgumentParser) -> None:
    """``--module`` and ``--module-opt`` (old ``--model``, ``--model-opt``): the model module of
    ``ppir.run``, ``ppir launch`` and ``ppir profile``."""
    p.add_argument(
        "--module",
        "--model",
        dest="module",
        action=Renamed,
        old="--model",
        required=True,
        metavar="MODULE",
        help="model module: a .py path or a dotted name with build_stage, make_batch and loss_fn",
    )
    p.add_argument(
        "--module-opt",
        "--model-opt",
        dest="module_opt",
        action=Renamed,
        old="--model-opt",
        append=True,
        default=[],
        metavar="KEY=VALUE",
        help="option passed to the module's configure(**options) (repeatable)",
    )


def run_args_problem(args) -> str | None:
    """What is wrong with the runtime options together (None: nothing), for ``ppir launch`` to
    refuse before any process starts and each rank of ``ppir.run`` alike."""
    import math

    from ppir.cli.argtypes import key_values

    try:
        key_values(args.module_opt, "--module-opt")
    except ValueError as e:
        return str(e)
    if args.verify_steps and not args.verify_grads:
        return "--verify-steps needs --verify-grads"
    if args.verify_steps and args.verify_steps > args.steps:
        return (
            f"--verify-steps {args.verify_steps} compares the parameters after that many steps, "
            f"but the run trains {args.steps} (--steps)"
        )
    if not (0 <= args.tolerance < math.inf):
        return f"--tolerance {args.tolerance:g}: must be a difference of 0 or more"
    return None


def check_module(spec: str) -> None:
    """A ppir error (exit 2) naming ``spec`` when no model module can be found there: a ``.py``
    path that is not a file, or a dotted name whose top-level package cannot be found.  The
    launchers call it before they start any process (nothing is imported here)."""
    import importlib.machinery
    import importlib.util
    from pathlib import Path

    from ppir.cli.argtypes import module_folder_note, module_names_a_file
    from ppir.diagnostics import error

    if folder := module_folder_note(spec):  # what load_model would say on every rank
        raise error("bad-usage", f"--module {folder}")
    if module_names_a_file(spec):
        if Path(spec).is_file():
            from ppir.torch.module_names import check_model_file

            check_model_file(spec)
            return
        raise error(
            "bad-usage",
            f"--module {spec}: no such file",
            hints=["--module takes a .py path or a dotted module name"],
        )
    top = spec.split(".")[0]
    # the ranks run as ``python -m ...``, which puts the working directory first on their
    # path; the ``ppir`` script's own path has its bin directory there instead
    if not top.isidentifier() or (
        importlib.util.find_spec(top) is None
        and importlib.machinery.PathFinder.find_spec(top, [os.getcwd()]) is None
    ):
        raise error(
            "bad-usage",
            f"--module {spec}: no such file or importable module",
            hints=["--module takes a .py path or a dotted module name"],
        )


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    """Runtime options shared by ``ppir.run`` and ``ppir launch``."""
    add_module_arguments(p)
    p.add_argument("--steps", type=positive_int, default=10, help="training steps (default 10)")
    p.add_argument(
        "--lr",
        type=learning_rate,
        default=None,
        help="SGD learning rate when the model has no make_optimizer (default 0.01); a model "
        "with make_optimizer sets its own (--lr is then refused)",
    )
    p.add_argument(
        "--dp",
        type=positive_int,
        metavar="D",
        help="data-parallel replicas of the pipeline (default: processes / the plan's ranks)",
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
        type=positive_seconds,
        default=60.0,
        metavar="SECONDS",
        help="process-group timeout: a stuck peer fails after this (default 60)",
    )
    p.add_argument(
        "--verify-grads",
        action="store_true",
        help="compare step 0's loss and gradients with single-process training on the global "
        "batch; a difference above --tolerance stops the run there (exit 1)",
    )
    p.add_argument(
        "--verify-steps",
        type=positive_int,
        metavar="N",
        help="with --verify-grads: also train the reference N steps and compare every "
        "parameter after N optimizer steps (catches copies that drift apart)",
    )
    p.add_argument(
        "--tolerance",
        type=number,
        default=1e-5,
        help="largest allowed absolute difference for --verify-grads and --verify-steps "
        "(default 1e-5)",
    )
    p.add_argument(
        "--on-nonfinite",
        choices=["raise", "warn"],
        default="raise",
        help="a NaN/inf loss stops training (raise, default) or prints a warning (warn)",
    )
    p.add_argument(
        "--tied",
        choices=["sum", "refuse"],
        default="sum",
        help="parameters shared between stages: sum their gradients across the ranks "
        "holding them (default) or refuse to run",
    )
    p.add_argument(
        "--dump-plan",
        type=nonempty_path,  # parsed on every rank; rank 0's node alone may have the folder
        metavar="PATH",
        help="rank 0 writes the plan with its inferred metadata to PATH",
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m ppir.run",
        description="Run one rank of a ppir execution plan (start with 'ppir launch' or torchrun).",
    )
    p.add_argument(
        "plan", metavar="PLAN", help="a ppir.plan/2 file (ppir compile --backend cuda -o PLAN)"
    )
    p.add_argument(
        "--no-verify",
        action="store_true",
        help="do not verify the plan's program again (its schema and digest are still checked)",
    )
    add_run_arguments(p)
    return p


def prepare(ctx, plan: dict, model, args):
    """Mesh, this rank's stages, the runtime; -> (runtime, mesh)."""
    from ppir.torch.model import build_stages
    from ppir.torch.procgroup import make_mesh
    from ppir.torch.runtime import PipelineRuntime

    mesh = make_mesh(plan["ranks"], args.dp, ctx.device.type)
    stages = plan["stages_of_rank"][mesh.pp_rank]
    modules = build_stages(model, stages, plan["stages"], ctx.device, ctx.rank)
    rt = PipelineRuntime(
        plan,
        modules,
        model.loss_fn,
        mesh=mesh,
        device=ctx.device,
        shared="refuse" if args.tied == "refuse" else None,
        nonfinite=args.on_nonfinite,
        verify=False,  # load_plan verified it
        timeout_s=ctx.timeout_s,
    )
    return rt, mesh


def train(ctx, plan: dict, model, args) -> tuple[int, str]:
    import torch

    from ppir.torch.model import CHECKED_STEPS, check_same_batch, make_optimizer, split_batch
    from ppir.torch.run_report import largest_peak, mean_over_replicas, summary
    from ppir.torch.verify import Verifier

    if args.lr is not None and callable(getattr(model, "make_optimizer", None)):
        from ppir.torch.errors import ModelError  # the user's mistake: launch exits 2

        raise ModelError(
            f"--lr {args.lr:g}: the model module defines make_optimizer, which sets its own "
            "learning rate; drop --lr, or set the rate in make_optimizer"
        )
    rt, mesh = prepare(ctx, plan, model, args)
    check = Verifier(ctx, plan, model, rt, mesh, args) if args.verify_grads else None
    params = rt.parameters()
    opt = make_optimizer(model, params, args.lr) if params else None
    prints = rt.has_last_stage and mesh.dp_rank == 0
    status, times = 0, []
    checking = (lambda: check.seconds) if check is not None else (lambda: 0.0)
    for step in range(args.steps):
        t0 = time.perf_counter() - checking()  # a step's time leaves --verify-grads' work out
        if opt is not None:
            opt.zero_grad(set_to_none=True)
        inputs, targets = split_batch(
            model,
            step,
            plan["microbatches"],
            ctx.device,
            ctx.rank,
            replicas=mesh.dp_size,
            replica=mesh.dp_rank,
        )
        if step < CHECKED_STEPS:  # an unseeded make_batch would train on mismatched pairs
            check_same_batch(inputs, targets, step, ctx, mesh.dp_size)
        loss = rt.step_microbatches(
            inputs if rt.has_first_stage else None, targets if rt.has_last_stage else None
        )
        if step == 0 and args.dump_plan and ctx.rank == 0:
            from ppir.plan import save_plan
            from ppir.torch.shapes import meta_to_json

            save_plan({**plan, "meta": meta_to_json(rt.meta)}, args.dump_plan)
        loss = mean_over_replicas(loss, mesh, ctx, step)
        # a failed check is the same verdict on every rank (all-reduced): all stop together
        if check is not None and not check.after_backward(step, loss):
            status = EXIT_FAIL
            break
        if opt is not None:
            opt.step()
        if check is not None and not check.after_step(step):
            status = EXIT_FAIL
            break
        if ctx.device.type == "cuda":
            torch.cuda.synchronize(ctx.device)
        dt = time.perf_counter() - checking() - t0
        times.append(dt)
        if prints:
            print(f"step {step:4d}  loss {loss.item():.4f}  {dt * 1e3:8.1f} ms", flush=True)
    peak, peak_rank = largest_peak(rt.peak_saved, ctx, mesh.dp_size)
    if prints and len(times) > 1 and not status:
        print(summary(times, peak, peak_rank, plan), flush=True)
    return status, check.failure if check is not None else ""


def quiet_numpy_warning() -> None:
    """torch warns at import when numpy is missing; ppir[torch] does not need numpy."""
    import warnings

    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")


def whole_lines() -> None:
    """Every rank shares the launcher's stdout and stderr: write each line in one piece, so that
    the lines of two ranks never splice (under ``python -u`` / PYTHONUNBUFFERED, ``print``
    would write the text and its newline separately)."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(write_through=False, line_buffering=True)


def main(argv: list[str] | None = None) -> int:
    """One rank, as a process's main: the status of a run refused before it starts (usage,
    plan); a run that started ends the process (:func:`ppir.torch.leave.leave`), whatever
    its outcome, and never returns."""
    from ppir.torch.failures import die_with_parent, stack_on_stop, stop_on_interrupt

    stop_on_interrupt()
    stack_on_stop()
    die_with_parent()
    quiet_numpy_warning()
    whole_lines()
    args = build_parser().parse_args(argv)
    from ppir.torch.errors import not_launched

    if (problem := not_launched()) is not None:  # run by hand: a usage error, not a failure
        print(f"ppir.run: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    from ppir.plan import PlanError, load_plan

    try:
        plan = load_plan(args.plan, verify=not args.no_verify)
    except PlanError as e:
        from ppir.torch.failures import LAUNCHER_ENV, launched, record

        if os.environ.get(LAUNCHER_ENV) == "1" and not os.path.isdir(
            os.path.dirname(os.path.abspath(args.plan))
        ):  # 'ppir launch' ended (stopped while this rank started) and took its plan with it
            return 128 + signal.SIGTERM
        if not (record(int(os.environ.get("RANK", "0")), str(e)) and launched()):
            print(f"ppir.run: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    problem = run_args_problem(args)
    if problem is not None:
        print(f"ppir.run: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    try:
        import torch  # noqa: F401
    except ImportError:
        print(
            "ppir.run: error: the runtime needs PyTorch: pip install 'ppir[torch]'", file=sys.stderr
        )
        return EXIT_USAGE
    from ppir.torch import failures, procgroup

    ctx = None
    try:
        ctx = procgroup.init(args.device, args.dist_backend, args.timeout)
        ctx.channel = failures.FailureChannel.connect(ctx.rank, args.timeout)
        if ctx.channel is not None:
            ctx.channel.start_watchdog()
        from ppir.torch.model import load_model, parse_options
        from ppir.torch.run_options import check_same_options

        dp = procgroup.resolve_dp(ctx.world, plan["ranks"], args.dp)  # as make_mesh does
        check_same_options(ctx, args, dp)  # nodes started alike, before any model code runs
        model = load_model(args.module, parse_options(args.module_opt))
        status, failure = train(ctx, plan, model, args)
    except BaseException as e:  # noqa: BLE001 - every failure must end every rank
        failures.fail(ctx, ctx.rank if ctx is not None else None, e)
    import torch.distributed as dist

    if ctx.channel is not None:
        ctx.channel.stop(wait=False)  # the rank leaves with os._exit: no thread is unwound
    try:
        dist.barrier()  # nobody leaves (rank 0 may host the store) while others still run
    except RuntimeError:
        pass
    if status:
        # every rank reached the same verdict; leave together, before the launcher stops the
        # others for this exit code
        failures.record(ctx.rank, f"rank {ctx.rank}: {failure}")
    from ppir.torch.leave import leave

    leave(status)  # without finalising the interpreter (ppir.torch.leave says why)
