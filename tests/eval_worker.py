"""Worker of test_evaluation.py (run under ppir's launcher, 2 ranks, gloo): for several
schedules, ``rt.evaluate`` on a batch against the same model's forwards in one process, again
under ``torch.no_grad()``, and after one SGD step.  The rank holding the last stage prints
``RESULT <rank> {schedule: [loss, loss under no_grad, reference, loss after a step]}``.
Dropout is in the model and the modules are put in eval mode, so a forward is deterministic."""

import json

import torch
import torch.distributed as dist
import torch.nn as nn

import ppir
from ppir.torch import PipelineRuntime, split_layers

CASES = [
    ("1f1b", {}),
    ("interleaved_1f1b", {"v": 2}),
    ("zb_h1", {}),
    ("zbv", {}),
    ("dualpipev", {}),  # overlapped F&B steps: their forward halves run
]
M = 4


def model(num_stages: int) -> list:
    torch.manual_seed(0)
    layers = [nn.Sequential(nn.Linear(16, 16), nn.GELU(), nn.Dropout(0.5)) for _ in range(4)]
    return split_layers(layers, num_stages, last=nn.Linear(16, 1))


def batch(seed: int):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(8, 16, generator=g)
    return x, x[:, :4].sum(dim=1, keepdim=True)


def reference(stages: list, x, y) -> float:
    with torch.no_grad():
        losses = []
        for xm, ym in zip(x.chunk(M), y.chunk(M)):
            h = xm
            for s in stages:
                h = s(h)
            losses.append(nn.functional.mse_loss(h, ym))
        return float(torch.stack(losses).mean())


def set_mode(stages: list, train: bool) -> None:
    for m in stages:
        m.train(train)


def main() -> None:
    dist.init_process_group("gloo")
    P, rank = dist.get_world_size(), dist.get_rank()
    out = {}
    x, y = batch(1)
    for name, params in CASES:
        c = ppir.compile(ppir.load(name, P=P, M=M, **params))
        assert c.ok, c.report
        program = c.program
        stages, ref_stages = model(program.stages), model(program.stages)
        mine = [stages[s] for s in program.stages_of_rank[rank]]
        rt = PipelineRuntime(program, mine, loss_fn=nn.functional.mse_loss)
        xs = x if rt.has_first_stage else None
        ys = y if rt.has_last_stage else None
        set_mode(mine, False)
        set_mode(ref_stages, False)
        loss = rt.evaluate(xs, ys)
        with torch.no_grad():
            again = rt.evaluate(xs, ys)
        assert all(p.grad is None for p in rt.parameters()), "evaluate left gradients"
        set_mode(mine, True)
        opt = torch.optim.SGD(rt.parameters(), lr=0.1)
        opt.zero_grad()
        rt.step(xs, ys)
        opt.step()
        set_mode(mine, False)
        after = rt.evaluate(xs, ys)
        if loss is not None:
            out[name] = [float(loss), float(again), reference(ref_stages, x, y), float(after)]
    if out:
        print("RESULT", rank, json.dumps(out), flush=True)
    dist.barrier()
    from ppir.torch.leave import leave

    leave(0)  # not finalising: a gloo worker can abort it (ppir.torch.leave)


if __name__ == "__main__":
    main()
