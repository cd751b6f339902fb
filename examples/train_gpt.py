"""Train the small GPT of examples/gpt_model.py with a pipeline schedule on local processes.

    python examples/train_gpt.py                       # 1F1B, 4 processes, 300 steps
    python examples/train_gpt.py --steps 40            # a short run (CPU: well under a minute)
    python examples/train_gpt.py --schedule interleaved_1f1b -v 2 --ranks 2 --steps 100
    python examples/train_gpt.py --verify-grads --steps 5 --module-opt layers=8

It is ``ppir launch`` with the example's model: the schedule is compiled, verified and run by
ppir's runtime (CPU/gloo, or NCCL with one GPU per process when GPUs are present); the rank
holding the last stage prints each step's loss, which falls from about ln(64) = 4.16.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

MODEL = str(Path(__file__).resolve().parent / "gpt_model.py")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--schedule", default="1f1b", help="built-in name or .pps file (default 1f1b)")
    p.add_argument("--ranks", "-n", type=int, default=4, help="pipeline ranks (default 4)")
    p.add_argument("--microbatches", "-M", type=int, default=8, help="default 8")
    p.add_argument("-v", type=int, help="chunks per rank, for interleaved schedules")
    p.add_argument("--steps", type=int, default=300, help="training steps (default 300)")
    p.add_argument(
        "--module-opt",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="gpt_model option: vocab, d_model, heads, layers, seq, batch, lr, seed",
    )
    p.add_argument(
        "--verify-grads", action="store_true", help="check step 0 against single-process training"
    )
    args = p.parse_args(argv)

    from ppir.cli import main as ppir_main

    cmd = [
        "launch",
        "-n",
        str(args.ranks),
        args.schedule,
        "-D",
        f"M={args.microbatches}",
        "--module",
        MODEL,
        "--steps",
        str(args.steps),
    ]
    if args.v:
        cmd += ["-D", f"v={args.v}"]
    for opt in args.module_opt:
        cmd += ["--module-opt", opt]
    if args.verify_grads:
        cmd.append("--verify-grads")
    return ppir_main(cmd)


if __name__ == "__main__":
    sys.exit(main())
