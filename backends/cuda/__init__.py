"""The cuda backend: turn a verified, lowered schedule into a per-rank execution plan and run it
with torch.distributed (NCCL on GPUs, gloo on CPU, the same code).

Modules: :mod:`.plan` (the ``ppir.plan/1`` format; no torch), :mod:`.launcher` (local
multi-process launch; no torch), and the runtime, which imports torch: :mod:`.runtime` (the
``ppir.run`` entry), :mod:`.executor` (the plan interpreter), :mod:`.procgroup` (process group,
devices, fail-fast), :mod:`.shapes` (boundary metadata), :mod:`.model` (the user's model module)
and :mod:`.reference` (single-process reference).  Importing this package, building and writing
plans never imports torch.  See docs/executor.md.
"""

from __future__ import annotations

import json
import sys

from ppir.backends.cuda.plan import (
    PLAN_FORMAT,
    PlanError,
    build_plan,
    check_plan,
    load_plan,
    save_plan,
)

__all__ = [
    "BACKEND",
    "PLAN_FORMAT",
    "PlanError",
    "build_plan",
    "check_plan",
    "load_plan",
    "save_plan",
]


class CudaBackend:
    """``ppir compile --backend cuda``: write the plan (``-o PATH``, else JSON on stdout)."""

    name = "cuda"
    help = "per-rank execution plan for ppir's torch.distributed runtime (ppir.run)"

    def add_arguments(self, group) -> None:
        group.add_argument(
            "--plan-compact",
            action="store_true",
            help="cuda: write the plan as one JSON line (default: indented)",
        )

    def run(self, compiled, args) -> int:
        from ppir.diagnostics import EXIT_USAGE

        try:
            plan = build_plan(compiled.program)
        except PlanError as e:
            print(f"ppir: error: {e}", file=sys.stderr)
            return EXIT_USAGE
        indent = None if getattr(args, "plan_compact", False) else 1
        out = getattr(args, "output", None)
        if not out:
            json.dump(plan, sys.stdout, indent=indent)
            sys.stdout.write("\n")
            return 0
        save_plan(plan, out, indent=indent)
        from ppir.backends.cuda.plan import plan_summary

        print(f"wrote {out}: {plan_summary(plan)}")
        print("run it with:")
        print(
            f"  torchrun --nproc-per-node {plan['ranks']} -m ppir.run {out} --model MODEL "
            "--steps 10"
        )
        print(
            "where MODEL is a .py file or module with build_stage, make_batch and loss_fn "
            "(see docs/executor.md); e.g. --model examples/gpt_model.py"
        )
        return 0

    def add_launch_arguments(self, parser) -> None:
        """The runtime options of ``ppir launch`` (the same as ``ppir.run``'s)."""
        from ppir.backends.cuda.runtime import add_run_arguments

        add_run_arguments(parser)

    def launch(self, schedule, args) -> int:
        """``ppir launch``: run the verified, lowered schedule on local processes."""
        from ppir.backends.cuda.launch import launch_schedule

        return launch_schedule(schedule, args)

    def run_rank(self, argv: list[str] | None = None) -> int:
        """``python -m ppir.run``: one rank of a plan (needs torch)."""
        from ppir.backends.cuda.runtime import main

        return main(argv)


BACKEND = CudaBackend()
