"""Worker of test_evaluation.py (2 ranks, gloo): rank 0 evaluates while rank 1 steps, the
mistake the runtime cannot see until a peer does not answer.  Each rank prints
``ERROR <rank> <message>`` for the CommError it gets: rank 0 within its ``timeout_s`` of 3 s,
rank 1 within 6 s, so that rank 0 gives up first, while rank 1 still holds its connections
(a peer that has left is a lost connection, not a timeout).  A rank leaves only once both have
written ``done.<rank>`` in the folder ``argv[1]``."""

import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn

import ppir
from ppir.torch import CommError, PipelineRuntime
from ppir.torch.leave import leave


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(rank)
    stage = nn.Linear(4, 4)
    rt = PipelineRuntime(ppir.compile(ppir.load("1f1b", P=2, M=2)).program, [stage],
                         lambda y, t: ((y - t) ** 2).mean(), timeout_s=3 + 3 * rank)  # fmt: skip
    x, t = torch.randn(4, 4), torch.randn(4, 4)
    args = (x if rt.has_first_stage else None, t if rt.has_last_stage else None)
    try:
        if rank == 0:
            rt.evaluate(*args)
        else:
            rt.step(*args)
    except CommError as e:
        text = str(e).replace("\n", " ")
        sys.stdout.write(f"ERROR {rank} {text}\n")  # one write: the ranks share stdout
        sys.stdout.flush()
    folder = Path(sys.argv[1])
    (folder / f"done.{rank}").write_text("")
    end = time.monotonic() + 60
    while not all((folder / f"done.{r}").exists() for r in (0, 1)) and time.monotonic() < end:
        time.sleep(0.05)
    leave(0)


if __name__ == "__main__":
    main()
