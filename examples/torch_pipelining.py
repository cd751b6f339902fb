"""ppir's verified program on torch.distributed.pipelining's own runtime (no CSV file):

    torchrun --nproc-per-node 2 examples/torch_pipelining.py [SCHEDULE]     # default zbv

SCHEDULE is a built-in, ``torch:NAME`` or a ``.pps`` file, run with P = the number of processes
and M = 4, or a torch ``.csv`` (or ppir ``.json``) file, which fixes its own P and M.  Every rank
builds the same model, one Linear + tanh block per stage, keeps its stages, and runs one step of
torch's ``_PipelineScheduleRuntime`` loaded by ``ppir.torch.to_torch_schedule``; each rank then
checks its stages' gradients against single-process training on the whole batch.
"""

from __future__ import annotations

import sys

import torch
import torch.distributed as dist
from torch import nn

import ppir
from ppir.torch import to_torch_schedule


def main() -> None:
    name = sys.argv[1] if len(sys.argv) > 1 else "zbv"
    dist.init_process_group("gloo")
    rank, P = dist.get_rank(), dist.get_world_size()
    fixed = name.endswith((".csv", ".json"))  # a file that takes no parameters
    source = ppir.load(name) if fixed else ppir.load(name, P=P, M=4)
    # a torch compute_comms CSV has its communication already: it runs as written
    compiled = ppir.compile(source) if source.is_lowered else ppir.compile(source, overlap=False)
    program = compiled.program
    if program.ranks != P:
        sys.exit(f"{name} runs on {program.ranks} ranks: torchrun --nproc-per-node {program.ranks}")
    M = program.microbatches
    torch.manual_seed(0)
    blocks = [nn.Sequential(nn.Linear(8, 8), nn.Tanh()) for _ in range(program.stages)]
    x, y = torch.randn(4 * M, 8), torch.randn(4 * M, 8)

    mine = list(program.stages_of_rank[rank])
    schedule = to_torch_schedule(program, [blocks[s] for s in mine], M, nn.MSELoss())
    kwargs = {"target": y, "losses": []} if program.stages - 1 in mine else {}
    schedule.step(*((x,) if 0 in mine else ()), **kwargs)

    ref = nn.Sequential(*[nn.Sequential(nn.Linear(8, 8), nn.Tanh()) for _ in blocks])
    ref.load_state_dict(nn.Sequential(*blocks).state_dict())
    nn.MSELoss()(ref(x), y).backward()
    err = max(
        (p.grad - q.grad).abs().max().item()
        for s in mine
        for p, q in zip(blocks[s].parameters(), ref[s].parameters())
    )
    print(f"rank {rank}: {name} on torch's runtime, stages {mine}: largest |grad diff| {err:.1e}")
    assert err < 1e-5
    dist.barrier()
    # End without finalising the interpreter: a gloo worker thread that still holds a finished
    # collective's tensors can abort the process at exit (pytorch/pytorch#190489).  leave()
    # waits for threads, runs the atexit handlers and closes open files first.
    from ppir.torch.leave import leave

    leave(0)


if __name__ == "__main__":
    main()
