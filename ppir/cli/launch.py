"""ppir launch: compile, verify and run a schedule with ppir's runtime on this node's processes
(torch's elastic agent, as torchrun; several nodes with --nnodes)."""

from __future__ import annotations

import importlib.util
import sys

from ppir.cli.argtypes import integer, output_path, positive_int
from ppir.cli.common import (
    add_compile_arguments,
    add_schedule_arguments,
    compile_from_args,
    parse_defines,
    print_report,
)
from ppir.diagnostics import EXIT_INVALID, EXIT_USAGE, count, error
from ppir.plugins import get_backend

NAME = "launch"
HELP = "compile, verify and train with a schedule on N processes (CPU/gloo unless GPUs)"
DESCRIPTION = """Compile a schedule into a per-rank execution plan, verify it, and run it with
ppir's torch.distributed runtime: NCCL with one GPU per process when GPUs are present, else CPU
with gloo.  -n is the number of processes: the schedule's ranks times --dp data-parallel
replicas (gradients are averaged across replicas after each stage's last backward).  The rank
holding the last stage prints each step's loss and time.  If any rank fails, every rank stops
and the launcher names the failing rank and its cause (exit 1; 2 for a model that breaks the
contract below, such as a missing function or a stage output of the wrong shape).

The model is a .py file or module with build_stage(stage, num_stages), make_batch(step) and
loss_fn(output, target) (see docs/executor.md).  Several nodes: run the same command on every
node with --nnodes N --node-rank K --rdzv-endpoint HOST:PORT (node 0's address).

examples:
  ppir launch -n 4 1f1b -D M=8 --module examples/gpt_model.py --steps 40
  ppir launch -n 2 interleaved_1f1b -D M=4 -D v=2 --module examples/gpt_model.py --verify-grads
  ppir launch -n 4 --dp 2 zbv -D M=4 --module examples/gpt_model.py --verify-grads
  ppir launch -n 4 --nnodes 2 --node-rank 0 --rdzv-endpoint 10.0.0.1:29500 1f1b -D M=8 --module m.py
"""


def add_arguments(p):
    p.add_argument(
        "-n",
        "--nproc",
        type=integer,
        metavar="N",
        help="number of processes on all nodes: the schedule's ranks times --dp (default: the "
        "schedule's ranks); sets -D P=N/dp for schedules with a parameter P when -D P is not "
        "given",
    )
    add_schedule_arguments(p)
    _cuda().add_launch_arguments(p)
    add_compile_arguments(p, model=False)
    p.add_argument(
        "--plan-out", type=output_path, metavar="PATH", help="also keep the plan at PATH"
    )
    nodes = p.add_argument_group("several nodes (torch's elastic rendezvous, as torchrun)")
    nodes.add_argument(
        "--nnodes", type=positive_int, default=1, metavar="N", help="nodes (default 1)"
    )
    nodes.add_argument(
        "--node-rank", type=integer, default=0, metavar="K", help="this node's index, 0..N-1"
    )
    nodes.add_argument(
        "--rdzv-endpoint",
        metavar="HOST:PORT",
        help="node 0's address and a free port, the same on every node (default: a free local "
        "port; needed with --nnodes > 1)",
    )
    nodes.add_argument(
        "--rdzv-backend",
        choices=["static", "c10d"],
        default="static",
        help="static (default: node ranks from --node-rank) or c10d (node ranks assigned "
        "at rendezvous; give every node the same --run-id)",
    )
    nodes.add_argument("--run-id", help="rendezvous id, the same on every node (c10d)")
    nodes.add_argument(
        "--rdzv-timeout",
        type=positive_int,
        default=300,
        metavar="SECONDS",
        help="how long nodes wait for each other at start (default 300)",
    )
    p.add_argument(
        "--verbose",
        action="store_true",
        help="show the elastic agent's own log and torch's C++ log in the launcher",
    )


def _check_args(args) -> None:
    from ppir.torch.errors import SetupError
    from ppir.torch.procgroup import pick_device
    from ppir.torch.run import run_args_problem

    problem = run_args_problem(args)  # the module was checked before torch loaded (run)
    if problem is not None:
        raise error("bad-usage", problem)
    try:  # a device this machine lacks, before any process starts (run() checked for torch)
        pick_device(args.device, 0, args.dist_backend)
    except SetupError as e:
        raise error("bad-usage", str(e)) from None
    n, dp = args.nproc, args.dp or 1
    if n is not None and n < 1:
        raise error("bad-usage", f"-n {n}: the number of processes must be at least 1")
    if n is not None and n % dp:
        raise error(
            "bad-usage",
            f"-n {n} --dp {dp}: the number of processes must be a multiple of the replicas",
        )
    if not 0 <= args.node_rank < args.nnodes:
        raise error(
            "bad-usage", f"--node-rank {args.node_rank} is not a node of --nnodes {args.nnodes}"
        )
    if args.nnodes > 1 and not args.rdzv_endpoint:
        raise error(
            "bad-usage",
            f"--nnodes {args.nnodes} needs --rdzv-endpoint HOST:PORT (node 0's address), the "
            "same on every node",
        )
    if args.rdzv_endpoint and ":" not in args.rdzv_endpoint:
        raise error("bad-usage", f"--rdzv-endpoint {args.rdzv_endpoint}: expected HOST:PORT")


def _compiled(args):
    """The compiled program to run (with its verification report), -n setting P when it can."""
    from ppir.frontend.loader import declared_params  # requires not checked before -n

    _check_args(args)
    dp = args.dp or 1
    if args.nproc is not None and "P" not in parse_defines(args.defines):
        if "P" in declared_params(args.schedule):
            args.defines = [*args.defines, f"P={args.nproc // dp}"]
    c = compile_from_args(args, unverified="ppir launch --no-verify still starts it")
    if c.dp != dp:  # the cost model's dp= asks for replicas that -n / --dp do not start
        raise error(
            "bad-usage",
            f"the model's dp={c.dp} asks for {c.dp} data-parallel replicas: give --dp {c.dp}",
        )
    s = c.program
    if s.forward_only:
        raise error(
            "bad-usage",
            f"{s.name} is an evaluation program (forward_only: no backward): launch trains; "
            "evaluate in your own loop with PipelineRuntime.evaluate (docs/executor.md)",
        )
    total = s.ranks * dp
    if args.nproc is not None and total != args.nproc:
        raise error(
            "rank-mismatch",
            f"-n {args.nproc}: the schedule has {count(s.ranks, 'rank')}"
            + (f", times --dp {dp} = {total} processes" if dp > 1 else ""),
            hints=[
                f"use -n {total}"
                + (
                    ", or set the schedule's rank count with -D"
                    if declared_params(args.schedule)
                    else f" ({args.schedule} is a fixed program: it takes no -D)"
                )
                + (
                    f", or --dp {args.nproc // total * dp} for {args.nproc // total * dp} "
                    "data-parallel replicas"
                    if args.nproc % total == 0 and args.nproc > total
                    else ""
                )
            ],
        )
    if total % args.nnodes:
        raise error(
            "bad-usage",
            f"{total} processes do not split evenly over --nnodes {args.nnodes}",
        )
    return c


def _cuda():
    return get_backend("cuda")


CPP_LOG_ENV = "TORCH_CPP_LOG_LEVEL"


def _import_torch(verbose: bool = False) -> None:
    """Import torch; a Ctrl-C meanwhile ends the launcher at once (one line, exit 130; nothing
    has started yet).  Raised as KeyboardInterrupt, it landed in Python code that torch's C++
    calls, which aborted the launcher ('terminate called after throwing an instance of
    pybind11::error_already_set') or had it die by SIGINT after saying 'ppir: interrupted'.

    Without ``--verbose`` (and unless the user set :data:`CPP_LOG_ENV`) the launcher's torch
    logs nothing from C++: its store client printed each failed connection to an unreachable
    node 0 with a C++ stack, where the launcher reports the rendezvous failure in one line.
    c10 reads the variable once, at import; it is put back at once, so the ranks keep the
    user's setting."""
    import os
    import signal

    def interrupted(signum, frame):
        print("ppir: interrupted", file=sys.stderr, flush=True)
        os._exit(130)

    old = signal.signal(signal.SIGINT, interrupted)
    quiet = not verbose and CPP_LOG_ENV not in os.environ
    if quiet:
        os.environ[CPP_LOG_ENV] = "FATAL"
    try:
        import torch  # noqa: F401
    finally:
        if quiet:
            del os.environ[CPP_LOG_ENV]
        signal.signal(signal.SIGINT, old)


def run(args) -> int:
    if importlib.util.find_spec("torch") is None:
        print("ppir: error: ppir launch needs PyTorch: pip install 'ppir[torch]'", file=sys.stderr)
        return EXIT_USAGE
    from ppir.torch.run import check_module

    check_module(args.module)  # before torch loads: a model file's missing names at once
    _import_torch(args.verbose)
    c = _compiled(args)
    if c.report is not None and not print_report(c.report):
        return EXIT_INVALID
    return _cuda().launch(c, args)
