"""Mistakes a user embedding ``PipelineRuntime`` in their own loop makes, and the one-line
errors naming the rank that answer them, raised before anything is posted.  In one process (a
one-rank plan: no process group); fast, needs torch."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import ppir  # noqa: E402
from ppir.plan import build_plan  # noqa: E402
from ppir.torch import PipelineRuntime, RuntimeFailure  # noqa: E402


def runtime(M: int = 4, width: int = 8):
    plan = build_plan(ppir.lower(ppir.load_schedule("1f1b", {"P": 1, "M": M})))
    torch.manual_seed(0)
    stage = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.Tanh())
    return PipelineRuntime(plan, [stage], torch.nn.functional.mse_loss)


@pytest.mark.parametrize("mode", [torch.no_grad, torch.inference_mode])
@pytest.mark.parametrize("call", ["step", "step_microbatches"])
def test_a_step_under_no_grad_is_refused_before_anything_runs(mode, call):
    rt = runtime()
    x, y = torch.randn(8, 8), torch.randn(8, 8)
    args = (x, y) if call == "step" else (list(x.chunk(4)), list(y.chunk(4)))
    with mode(), pytest.raises(RuntimeFailure) as e:
        getattr(rt, call)(*args)
    assert str(e.value).startswith("rank 0: step() trains: it needs autograd enabled; ")
    assert "no forward-only evaluation step" in str(e.value)
    assert rt.executor is None and rt.step_count == 0  # nothing ran, nothing was posted
    assert rt.step(x, y) is not None  # and the runtime still works afterwards
