"""ppir launch: compile, verify and run a schedule on local processes with ppir's runtime."""

from __future__ import annotations

from ppir.cli.common import (
    add_compile_arguments,
    add_schedule_arguments,
    compile_from_args,
    load_from_args,
    print_report,
)
from ppir.diagnostics import EXIT_INVALID, error
from ppir.plugins import get_backend

NAME = "launch"
HELP = "compile, verify and train with a schedule on P local processes (CPU/gloo unless GPUs)"
DESCRIPTION = """Compile a schedule into a per-rank execution plan, verify it, and run it with
ppir's torch.distributed runtime on P local processes: NCCL with one GPU per process when GPUs
are present, else CPU with gloo.  The rank holding the last stage prints each step's loss and
time.  If any rank fails, every rank stops and the first failure is reported (exit 1).

The model is a .py file or module with build_stage(stage, num_stages), make_batch(step) and
loss_fn(output, target) (see docs/executor.md).  For several nodes, write the plan with
'ppir compile --backend cuda -o plan.json' and start 'python -m ppir.run' with torchrun.

examples:
  ppir launch -n 4 1f1b -D M=8 --model examples/gpt_model.py --steps 40
  ppir launch -n 2 interleaved_1f1b -D M=4 -D v=2 --model examples/gpt_model.py --verify-grads
  ppir launch -n 4 gpipe -D M=8 --model examples/gpt_model.py --model-opt layers=12 --steps 5
"""


def add_arguments(p):

    p.add_argument(
        "-n",
        "--nproc",
        type=int,
        metavar="P",
        help="number of processes (default: the schedule's ranks; sets -D P=P for "
        "schedules with a parameter P when -D P is not given)",
    )
    add_schedule_arguments(p)
    _cuda().add_launch_arguments(p)
    add_compile_arguments(p, model=False)
    p.add_argument("--plan-out", metavar="PATH", help="also keep the plan at PATH")
    p.add_argument(
        "--grace",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="after a rank fails, how long the others get before they are killed",
    )


def _schedule(args):
    """The schedule to run and its verification report, with -n setting P when it can."""
    loaded = load_from_args(args)
    if (
        args.nproc is not None
        and args.nproc != loaded.ranks
        and "P" in loaded.param_dict
        and not any(d.split("=")[0].strip() == "P" for d in args.defines)
    ):
        args.defines = [*args.defines, f"P={args.nproc}"]
        loaded = load_from_args(args)
    c = compile_from_args(args, loaded)
    s, report = c.program, c.report
    if args.nproc is not None and s.ranks != args.nproc:
        raise error(
            "rank-mismatch",
            f"-n {args.nproc}: the schedule has {s.ranks} ranks",
            hints=[f"use -n {s.ranks}, or set the schedule's rank count with -D"],
        )
    return s, report


def _cuda():
    return get_backend("cuda")


def run(args) -> int:
    s, report = _schedule(args)
    if report is not None and not print_report(report):
        return EXIT_INVALID
    return _cuda().launch(s, args)
