"""Module buffers across data-parallel replicas (4 gloo processes, PP=2 x DP=2): with
``broadcast_buffers=True`` (the default, as DDP's) each step starts from replica 0's buffers,
and during the step each replica updates them with its own data; with False each replica keeps
its own.  The stages carry a buffer that sums every input it sees, so the expected values
follow from the batches alone: after step k, replica r holds replica 0's value after step k-1
plus the sum of r's own step-k inputs.  BatchNorm's running statistics move the same way."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

STEPS = 3


def batch(g):
    """Whole numbers: their sums are exact in any order, so the test compares with ==."""
    import torch

    return torch.randint(-9, 10, (8, 4), generator=g).float()


def worker(out: str, broadcast: str) -> None:
    import torch
    import torch.distributed as dist
    import torch.nn as nn

    import ppir
    from ppir.plan import build_plan
    from ppir.torch import PipelineRuntime, failures, procgroup
    from ppir.torch.leave import leave

    class Summing(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.register_buffer("seen", torch.zeros(()))
            self.bn = nn.BatchNorm1d(4)

        def forward(self, x):
            self.seen += x.detach().sum()
            return self.bn(self.lin(x))

    ctx = procgroup.init(device="cpu", timeout_s=30)
    ctx.channel = failures.FailureChannel.connect(ctx.rank, 30)
    try:
        mesh = procgroup.make_mesh(2, 2)
        plan = build_plan(ppir.compile(ppir.load("1f1b", P=2, M=2)).program)
        torch.manual_seed(mesh.pp_rank)
        stage = Summing()
        rt = PipelineRuntime(plan, [stage], lambda y, t: ((y - t) ** 2).mean(), mesh=mesh,
                             broadcast_buffers=broadcast == "on", timeout_s=30)  # fmt: skip
        record = []
        for step in range(STEPS):
            g = torch.Generator().manual_seed(100 * step + mesh.dp_rank)  # replicas differ
            x, t = batch(g), torch.randn(8, 4, generator=g)
            rt.step(x if rt.has_first_stage else None, t if rt.has_last_stage else None)
            record.append([stage.seen.item(), stage.bn.running_mean.tolist()])
        every = [None] * dist.get_world_size()
        dist.all_gather_object(every, {"pp": mesh.pp_rank, "dp": mesh.dp_rank, "record": record})
        if ctx.rank == 0:
            Path(out).write_text(json.dumps(every))
        dist.barrier()
    except BaseException as e:  # noqa: BLE001 - end every rank with this message
        failures.fail(ctx, ctx.rank, e)
    leave(0)


def run(tmp_path, broadcast: str) -> tuple[dict, list[list[float]]]:
    """Each (pp, dp) rank's record of the 4-rank run, and :func:`first_stage_sums`."""
    pytest.importorskip("torch")
    from ppir.backends.cuda.launch import start

    out = tmp_path / f"buffers-{broadcast}.json"
    res = start(("-u", __file__, str(out), broadcast), 4)
    assert res.ok, f"ranks failed: {res.cause}"
    got = {(r["pp"], r["dp"]): r["record"] for r in json.loads(out.read_text())}
    return got, first_stage_sums()


def first_stage_sums() -> list[list[float]]:
    """The sum of each replica's step inputs, as stage 0 sees them (its batch)."""
    import torch

    sums = []
    for step in range(STEPS):
        row = []
        for dp in range(2):
            g = torch.Generator().manual_seed(100 * step + dp)
            row.append(batch(g).sum().item())
        sums.append(row)
    return sums


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_each_step_starts_from_replica_0s_buffers(tmp_path):
    got, sums = run(tmp_path, "on")
    before = 0.0  # replica 0's value at the end of the previous step
    for step in range(STEPS):
        for dp in range(2):
            assert got[(0, dp)][step][0] == before + sums[step][dp]
        before = got[(0, 0)][step][0]
    for pp in range(2):  # BatchNorm: replica 1 follows replica 0's statistics, then its own data
        r0, r1 = got[(pp, 0)], got[(pp, 1)]
        assert r0[-1][1] != pytest.approx(r1[-1][1])  # each step's own data moves them apart
        assert r0[0][1] != r0[1][1]


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_without_broadcast_each_replica_keeps_its_own_buffers(tmp_path):
    got, sums = run(tmp_path, "off")
    for dp in range(2):
        total = 0.0
        for step in range(STEPS):
            total += sums[step][dp]
            assert got[(0, dp)][step][0] == total


if __name__ == "__main__":
    worker(sys.argv[1], sys.argv[2])
