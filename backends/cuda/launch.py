"""``ppir launch`` on the cuda backend: write the verified program's plan and start one local
process per rank running :mod:`.runtime` (the ``ppir.run`` entry)."""

from __future__ import annotations

import os
import sys
import tempfile

from ppir.diagnostics import EXIT_USAGE


def _runtime_argv(args) -> list[str]:
    out = [
        "--model",
        args.model,
        "--steps",
        str(args.steps),
        "--lr",
        repr(args.lr),
        "--device",
        args.device,
        "--timeout",
        repr(args.timeout),
        "--tolerance",
        repr(args.tolerance),
    ]
    for opt in args.model_opt:
        out += ["--model-opt", opt]
    if args.dist_backend:
        out += ["--dist-backend", args.dist_backend]
    if args.verify_grads:
        out.append("--verify-grads")
    if args.dump_plan:
        out += ["--dump-plan", args.dump_plan]
    return out


def launch_schedule(s, args) -> int:
    """Run the verified, lowered schedule ``s`` on ``s.ranks`` local processes."""
    from ppir.backends.cuda.launcher import launch
    from ppir.backends.cuda.plan import PlanError, build_plan, plan_summary, save_plan

    try:
        plan = build_plan(s)
    except PlanError as e:
        print(f"ppir: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    with tempfile.TemporaryDirectory(prefix="ppir-plan-") as tmp:
        path = args.plan_out or os.path.join(tmp, "plan.json")
        save_plan(plan, path)
        print(f"ppir launch: {plan_summary(plan)}; {s.ranks} local processes", flush=True)
        cmd = [sys.executable, "-m", "ppir.run", path, *_runtime_argv(args)]
        result = launch(cmd, s.ranks, grace_s=args.grace)
    if result.ok:
        return 0
    codes = ", ".join(f"rank {r}: {c}" for r, c in enumerate(result.codes))
    print(f"ppir launch: failed ({codes})", file=sys.stderr)
    if result.first_failure:
        print(f"ppir launch: first failure: {result.first_failure}", file=sys.stderr)
    return 1
