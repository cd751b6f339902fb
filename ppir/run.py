"""``python -m ppir.run PLAN --model MODEL ...``: run one rank of a ppir execution plan.

A thin entry point for torchrun (``torchrun --nproc-per-node P -m ppir.run plan.json --model
examples/gpt_model.py``); the runtime lives in :mod:`ppir.backends.cuda.runtime` and needs torch.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from .backends.cuda.runtime import main as run_main

    return run_main(argv)


if __name__ == "__main__":
    sys.exit(main())
