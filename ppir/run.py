"""``python -m ppir.run PLAN --model MODEL ...``: run one rank of a ppir execution plan.

A thin entry point for torchrun (``torchrun --nproc-per-node P -m ppir.run plan.json --model
examples/gpt_model.py``); the runtime belongs to the
``cuda`` backend (found through the ``ppir.backends`` entry points) and needs torch.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from ppir.plugins import get_backend

    return get_backend("cuda").run_rank(argv)


if __name__ == "__main__":
    sys.exit(main())
