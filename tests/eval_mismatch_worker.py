"""Worker of test_evaluation.py (2 ranks, gloo): rank 0 evaluates while rank 1 steps, the
mistake the runtime cannot see until a peer does not answer.  Each rank prints
``ERROR <rank> <message>`` for the CommError it gets (within ``timeout_s`` = 3 s)."""

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
                         lambda y, t: ((y - t) ** 2).mean(), timeout_s=3)  # fmt: skip
    x, t = torch.randn(4, 4), torch.randn(4, 4)
    args = (x if rt.has_first_stage else None, t if rt.has_last_stage else None)
    try:
        if rank == 0:
            rt.evaluate(*args)
        else:
            rt.step(*args)
    except CommError as e:
        print("ERROR", rank, str(e).replace("\n", " "), flush=True)
    leave(0)


if __name__ == "__main__":
    main()
