"""``PipelineRuntime(timeout_s=...)`` bounds the runtime's waits (multi-process gloo): when a
peer stops calling ``step``, the rank waiting on it gets the runtime's CommError, naming the
peer and the instruction, within about ``timeout_s``, not after the process group's timeout.

The test file is its own worker (2 ranks under torch's launcher, process-group timeout 30 s,
runtime timeout 3 s): rank 1 runs one step and then stops; rank 0 runs a second step, and
reports what it caught and how long the step took.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402

RUNTIME_TIMEOUT, GROUP_TIMEOUT = 3, 30


def worker(out: str) -> None:
    from ppir.plan import build_plan
    from ppir.torch import CommError, PipelineRuntime
    from ppir.torch.model import build_stages, split_batch
    from ppir.torch.procgroup import init

    ctx = init(device="cpu", timeout_s=GROUP_TIMEOUT)
    plan = build_plan(harness.program_of("1f1b", {"P": 2, "M": 2}, None))
    model = harness.make_model("mlp", 4)
    stages = build_stages(model, plan["stages_of_rank"][ctx.rank], 2, ctx.device, ctx.rank)
    rt = PipelineRuntime(plan, stages, model.loss_fn, timeout_s=RUNTIME_TIMEOUT)
    for step in range(2 if ctx.rank == 0 else 1):
        xs, ys = split_batch(model, step, 2, ctx.device, ctx.rank)
        t0 = time.monotonic()
        try:
            rt.step_microbatches(xs if rt.has_first_stage else None, ys)
        except CommError as e:
            report = {"step": step, "message": str(e), "peers": e.peers, "timeout": e.timeout}
            Path(out).write_text(json.dumps({**report, "elapsed": time.monotonic() - t0}))
            os._exit(0)
    if ctx.rank == 1:  # stop calling step; stay until rank 0 has reported (or gave up)
        end = time.monotonic() + 2 * GROUP_TIMEOUT
        while not Path(out).exists() and time.monotonic() < end:
            time.sleep(0.1)
    os._exit(0)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_peer_that_stops_is_named_within_the_runtime_timeout(tmp_path):
    from ppir.backends.cuda.launch import start

    out = tmp_path / "caught.json"
    res = start(("-u", __file__, str(out)), 2)
    assert res.ok, res.cause
    got = json.loads(out.read_text())
    assert got["step"] == 1 and got["peers"] == [1] and got["timeout"], got
    assert got["message"].startswith("rank 0, instruction #"), got
    assert f"no answer from rank 1 within the {RUNTIME_TIMEOUT} s timeout" in got["message"], got
    assert RUNTIME_TIMEOUT - 0.5 <= got["elapsed"] < GROUP_TIMEOUT / 2, got


def test_the_runtime_timeout_must_be_positive():
    pytest.importorskip("torch")
    import torch

    from ppir.plan import build_plan
    from ppir.torch import PipelineRuntime, SetupError

    plan = build_plan(harness.program_of("1f1b", {"P": 1, "M": 2}, None))
    with pytest.raises(SetupError, match=r"positive number of seconds, got 0"):
        PipelineRuntime(plan, [torch.nn.Linear(2, 2)], torch.nn.functional.mse_loss, timeout_s=0)


if __name__ == "__main__":
    worker(sys.argv[1])
