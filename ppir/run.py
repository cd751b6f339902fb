"""``python -m ppir.run PLAN --module MODULE ...``: run one rank of a ppir execution plan.

The entry point ``ppir launch`` and torchrun start (``torchrun --nproc-per-node N -m ppir.run
plan.json --module examples/gpt_model.py``); the runtime is :mod:`ppir.torch.run`.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """See :func:`ppir.torch.run.main`: a run that started ends this process."""
    from ppir.torch.run import main as run_main

    return run_main(argv)


if __name__ == "__main__":
    sys.exit(main())
