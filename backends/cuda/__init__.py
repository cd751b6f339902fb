"""The cuda backend: a thin leaf over :mod:`ppir.plan` and :mod:`ppir.torch`.

* ``ppir compile SCHEDULE --backend cuda -o plan.json`` writes the execution plan
  (:func:`ppir.plan.build_plan`; no torch needed) and prints the torchrun command that runs it;
* ``ppir launch`` starts the ranks with torch's elastic agent (:mod:`.launch`);
* the ranks run ``python -m ppir.run`` (:mod:`ppir.torch.run`).

See docs/executor.md.
"""

from __future__ import annotations

import json
import sys

__all__ = ["BACKEND"]


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
        from ppir.plan import PlanError, build_plan, plan_summary, save_plan

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
        save_plan(plan, out, indent=indent)  # a one-line bad-output error when it cannot
        n, dp = plan["ranks"], compiled.dp
        flag = f" --dp {dp}" if dp > 1 else ""
        print(f"wrote {out}: {plan_summary(plan)}")
        if compiled.program.forward_only:  # ppir.run trains: it cannot run this plan
            print(
                "an evaluation plan (forward_only): ppir.run and ppir launch train and refuse "
                f"it; run it in your own loop, PipelineRuntime('{out}', stages, loss_fn)"
                ".evaluate(inputs, targets) on every rank (docs/executor.md)"
            )
            return 0
        if dp > 1:
            print(f"run it with ({n} pipeline ranks x {dp} data-parallel replicas, one node):")
        else:
            print("run it with (one node; add --dp D and D times the processes for data parallel):")
        print(
            f"  torchrun --nproc-per-node {n * dp} -m ppir.run {out} --module MODULE{flag} "
            "--steps 10"
        )
        print("or on N nodes, the same on each (node K of N, node 0's address HOST):")
        per_node = f"{n * dp}/N" if dp > 1 else f"{n}*D/N"
        print(
            f"  torchrun --nnodes N --node-rank K --nproc-per-node {per_node} --master-addr HOST "
            f"--master-port 29500 -m ppir.run {out} --module MODULE{flag}"
        )
        print(
            "where MODULE is a .py file or module with build_stage, make_batch and loss_fn "
            "(see docs/executor.md); e.g. --module examples/gpt_model.py"
        )
        return 0

    def add_launch_arguments(self, parser) -> None:
        """The runtime options of ``ppir launch`` (the same as ``ppir.run``'s)."""
        from ppir.torch.run import add_run_arguments

        add_run_arguments(parser)

    def launch(self, compiled, args) -> int:
        """``ppir launch``: run the compiled program (see :mod:`.launch`)."""
        from ppir.backends.cuda.launch import launch_schedule

        return launch_schedule(compiled.program, args)


BACKEND = CudaBackend()
