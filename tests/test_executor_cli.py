"""``ppir launch`` end to end (multi-process gloo): compile, verify, run, --verify-grads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GPT = str(ROOT / "examples" / "gpt_model.py")
SMALL = [
    "--model-opt",
    "layers=2",
    "--model-opt",
    "d_model=32",
    "--model-opt",
    "seq=8",
    "--model-opt",
    "batch=8",
]


def ppir_launch(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ppir.cli", "launch", *argv],
        capture_output=True,
        text=True,
        timeout=100,
        cwd=ROOT,
    )


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_launch_trains_and_verifies_gradients():
    res = ppir_launch(
        "-n",
        "2",
        "interleaved_vshape",
        "-D",
        "M=4",
        "-D",
        "v=2",
        "--model",
        GPT,
        *SMALL,
        "--steps",
        "4",
        "--verify-grads",
        "--device",
        "cpu",
    )
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "interleaved_vshape: 2 ranks, 4 stages, 4 microbatches" in out
    assert "verify-grads: largest |grad diff|" in out and ": OK" in out
    losses = [float(line.split()[3]) for line in out.splitlines() if line.startswith("step ")]
    assert len(losses) == 4 and losses[-1] < losses[0], out
    assert "mean step time" in out


NONDETERMINISTIC = """
import torch
def build_stage(stage, num_stages):
    return torch.nn.Linear(4, 4)          # no seed: the reference builds other weights
def make_batch(step):
    return torch.ones(4, 4), torch.zeros(4, 4)
def loss_fn(y, t):
    return ((y - t) ** 2).mean()
"""


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_verify_grads_fails_above_tolerance(tmp_path):
    model = tmp_path / "nondet.py"
    model.write_text(NONDETERMINISTIC)
    res = ppir_launch(
        "-n",
        "2",
        "1f1b",
        "-D",
        "M=2",
        "--model",
        str(model),
        "--steps",
        "1",
        "--verify-grads",
        "--device",
        "cpu",
    )
    assert res.returncode == 1, res.stdout + res.stderr
    assert "FAILED" in res.stdout and "largest difference at stage" in res.stdout
