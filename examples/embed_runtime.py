"""Your own training loop, optimizer, data and process groups, with ppir's runtime running a
verified zero-bubble schedule, pipeline x data parallel.  Start it with torchrun::

    torchrun --nproc-per-node 4 examples/embed_runtime.py           # PP=2 x DP=2 on CPU/gloo
    torchrun --nproc-per-node 2 examples/embed_runtime.py --dp 1    # PP=2

Every rank builds the same model (seeded), keeps the stages of its pipeline rank and trains
it; the rank holding the last stage of replica 0 prints the loss, which falls, and every 10
steps the loss of a held-out batch (``rt.evaluate``: forwards only).
"""

from __future__ import annotations

import argparse
import datetime

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh

import ppir
from ppir.torch import PipelineRuntime, split_layers


def batch(step: int, replica: int, replicas: int, size: int = 32):
    """This replica's slice of the global batch: y = sum of the first 4 features."""
    g = torch.Generator().manual_seed(step)
    x = torch.randn(size * replicas, 16, generator=g)
    y = x[:, :4].sum(dim=1, keepdim=True)
    return x.chunk(replicas)[replica], y.chunk(replicas)[replica]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--dp", type=int, default=2)
    p.add_argument("--steps", type=int, default=30)
    args = p.parse_args()
    # A bound on every wait: a rank whose loop does something its peers do not (a step more,
    # a collective elsewhere) fails within a minute with the peer it waited for, not after
    # gloo's default of 30 minutes.
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    dp = args.dp
    pp = dist.get_world_size() // dp
    mesh = init_device_mesh("cpu", (pp, dp), mesh_dim_names=("pp", "dp"))
    pp_rank, dp_rank = mesh["pp"].get_local_rank(), mesh["dp"].get_local_rank()

    compiled = ppir.compile(ppir.load("zb_h1", P=pp, M=4))  # verified, lowered, overlapped
    assert compiled.ok, compiled.report
    program = compiled.program

    torch.manual_seed(0)
    layers = [nn.Sequential(nn.Linear(16, 16), nn.GELU()) for _ in range(4)]
    stages = split_layers(layers, program.stages, last=nn.Linear(16, 1))
    mine = [stages[s] for s in program.stages_of_rank[pp_rank]]

    rt = PipelineRuntime(program, mine, loss_fn=nn.functional.mse_loss, mesh=mesh, timeout_s=60)
    opt = torch.optim.Adam(rt.parameters(), lr=1e-2)
    vx, vy = batch(10_000, dp_rank, dp)  # a held-out batch
    for step in range(args.steps):
        x, y = batch(step, dp_rank, dp)
        opt.zero_grad()
        loss = rt.step(x if rt.has_first_stage else None, y if rt.has_last_stage else None)
        opt.step()
        if loss is not None and dp_rank == 0 and step % 5 == 0:
            print(f"step {step:3d}  loss {loss.item():.4f}", flush=True)
        if step % 10 == 9:  # every rank evaluates: forwards only, no gradients
            val = rt.evaluate(vx if rt.has_first_stage else None, vy if rt.has_last_stage else None)
            if val is not None and dp_rank == 0:
                print(f"eval after step {step:3d}  loss {val.item():.4f}", flush=True)
    dist.barrier()  # nobody closes its connections while a peer still reads from them
    # End without finalising the interpreter: a gloo worker thread that still holds a finished
    # collective's tensors can abort the process at exit (pytorch/pytorch#190489).  leave()
    # waits for threads, runs the atexit handlers and closes open files first.
    from ppir.torch.leave import leave

    leave(0)


if __name__ == "__main__":
    main()
