"""Failure behaviour of the runtime (multi-process gloo): every rank ends, non-zero, in bounded
time, with the failing rank's message; nothing hangs.

Each case is one 2-rank launch of ``python -m ppir.run`` on a 1F1B plan with a model file that
misbehaves on purpose in the second step.
"""

from __future__ import annotations

import sys
import time

import pytest

MODEL = """
import time, torch, torch.nn as nn
MODE = {mode!r}

class Stage(nn.Module):
    def __init__(self, stage):
        super().__init__()
        self.lin, self.stage, self.calls = nn.Linear(4, 4), stage, 0

    def forward(self, x):
        self.calls += 1
        if self.stage == 1 and self.calls == 6:   # second step, second microbatch
            if MODE == "raise":
                raise ValueError("boom in stage 1")
            if MODE == "hang":
                time.sleep(600)
        y = self.lin(x)
        if MODE == "shape" and self.stage == 0 and self.calls == 6:
            y = torch.cat([y, y[:, :1]], dim=1)
        return y

def build_stage(stage, num_stages):
    torch.manual_seed(stage)
    return Stage(stage)

def make_batch(step):
    g = torch.Generator().manual_seed(step)
    return torch.randn(8, 4, generator=g), torch.randn(8, 4, generator=g)

def loss_fn(y, t):
    return ((y - t) ** 2).mean()
"""


def run_faulty(tmp_path, mode: str, *extra: str):
    from ppir.backends.cuda import build_plan, save_plan
    from ppir.backends.cuda.launcher import launch

    import ppir

    (tmp_path / "model.py").write_text(MODEL.format(mode=mode))
    save_plan(
        build_plan(ppir.lower(ppir.load_schedule("1f1b", {"P": 2, "M": 4}))), tmp_path / "plan.json"
    )
    log = tmp_path / "log.txt"
    start = time.monotonic()
    with open(log, "w") as f:
        res = launch(
            [
                sys.executable,
                "-m",
                "ppir.run",
                str(tmp_path / "plan.json"),
                "--model",
                str(tmp_path / "model.py"),
                "--steps",
                "3",
                "--device",
                "cpu",
                *extra,
            ],
            2,
            deadline_s=60,
            stdout=f,
            stderr=f,
        )
    return res, log.read_text(), time.monotonic() - start


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_rank_raising_mid_step_ends_every_rank(tmp_path):
    res, log, elapsed = run_faulty(tmp_path, "raise")
    assert not res.timed_out and res.codes == [1, 1], (res, log)
    assert res.first_failure == "rank 1: ValueError: boom in stage 1"
    assert "ppir.run: error: rank 1: ValueError: boom in stage 1" in log
    assert "rank 0 stopping: rank 1: ValueError: boom in stage 1" in log
    assert "step    0  loss" in log and "step    1" not in log
    assert elapsed < 45


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_shape_mismatch_names_rank_op_and_shapes(tmp_path):
    res, log, _ = run_faulty(tmp_path, "shape")
    assert not res.timed_out and res.codes == [1, 1], (res, log)
    assert res.first_failure == (
        "rank 0: ShapeMismatch: rank 0, instruction #0 (0F0): the output of stage 0 has shape "
        "(2, 5) float32 but the plan's metadata for boundary 1 says (2, 4) float32"
    )
    assert "rank 1 stopping: rank 0: ShapeMismatch" in log


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_stuck_rank_fails_after_the_timeout(tmp_path):
    res, log, elapsed = run_faulty(tmp_path, "hang", "--timeout", "4")
    assert not res.timed_out and res.codes == [1, 1], (res, log)
    assert res.first_failure.startswith("rank 0: "), res.first_failure
    assert "rank 1 stopping: rank 0: " in log
    assert elapsed < 45
