"""A parameter that no replica's forwards used keeps ``grad`` None through the data-parallel
gradient reduction, as on one process: before, the reduction wrote zeros into it, so AdamW's
weight decay moved it (and its moments) under DP > 1 and not under DP = 1 or single-process
training.  The reducer runs here over a one-process gloo group standing for the data-parallel
group of two replicas (the second replica's contribution is then zero: the used parameter's
gradient comes back halved, the unused one's stays None)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
nn = torch.nn


class Stage(nn.Module):
    def __init__(self):
        super().__init__()
        self.used = nn.Linear(3, 3)
        self.unused = nn.Linear(3, 3)  # a pooler or branch this step does not run

    def forward(self, x):
        return self.used(x)


def test_a_parameter_unused_on_every_replica_keeps_no_gradient(one_rank_group):
    from ppir.torch.reduce import GradReducer

    torch.manual_seed(0)
    stage = Stage()
    reducer = GradReducer(
        [stage], [{"op": "reduce", "chunk": 0}], dp_group=dist.group.WORLD, dp_size=2
    )
    stage(torch.randn(4, 3)).pow(2).sum().backward()
    want = stage.used.weight.grad.clone() / 2
    reducer.post(0)
    reducer.finish()
    assert stage.unused.weight.grad is None and stage.unused.bias.grad is None
    assert torch.equal(stage.used.weight.grad, want)

    before = stage.unused.weight.detach().clone()
    torch.optim.AdamW(stage.parameters(), lr=0.1, weight_decay=0.5).step()
    assert torch.equal(stage.unused.weight, before)  # as single-process training leaves it
