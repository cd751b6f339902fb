"""Pipeline x data parallel (multi-process gloo): PP=2 x DP=2 on 4 processes equals
single-process training on the global batch, for 1F1B, interleaved 1F1B and zero-bubble
schedules, over several optimizer steps (gradients after every step's reductions, parameters
after every optimizer step, 1e-6).

The world is laid out as a ``torch.distributed.device_mesh`` ``("pp", "dp")``; each stage's
gradients are all-reduced over its DP group by the plan's ``reduce`` instruction, posted after
the stage's last backward and waited before the step returns.  Cases also cover a model whose
head is tied to its embedding (1F1B: the copies on two ranks get the summed gradient; ZB-V:
both on one rank), a boundary carrying a dict of tensors, split backward, overlapped
communication and pure data parallel (PP=1 x DP=4), and gradients accumulated over three
steps, reduced every step or (``rt.no_sync()``) once, and a window that ``zero_grad()``
clears after its first step, the tied copies' gradients from the step before included.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402

PPxDP = {"P": 2, "dp": 2, "steps": 3}
ACCUMULATE = {**PPxDP, "accumulate": True}
CASES = {
    4: [
        ("1f1b", {"M": 4}, "mlp", None, PPxDP),
        ("interleaved_1f1b", {"M": 4, "v": 2}, "mlp", None, PPxDP),
        ("zbv", {"M": 3}, "mlp", None, PPxDP),
        ("zb_h1", {"M": 4}, "mlp", None, PPxDP),
        ("1f1b", {"M": 4}, "gpt", "overlap", PPxDP),
        ("interleaved_vshape", {"M": 4, "v": 2}, "pair", "iw", PPxDP),
        ("1f1b", {"M": 4}, "tied", None, PPxDP),
        ("zbv", {"M": 3}, "tied", None, PPxDP),
        ("1f1b", {"M": 2}, "mlp", None, {"P": 1, "dp": 4, "steps": 2}),
        ("1f1b", {"M": 4}, "tied", None, ACCUMULATE),
        ("1f1b", {"M": 4}, "tied", None, {**ACCUMULATE, "no_sync": True}),
        ("interleaved_1f1b", {"M": 4, "v": 2}, "mlp", "iw", {**ACCUMULATE, "no_sync": True}),
        # synchronised, window of two zeroed after its first step, synchronised
        (
            "1f1b",
            {"M": 4},
            "tied",
            None,
            {**ACCUMULATE, "steps": 4, "no_sync": True, "zero_inside": True},
        ),
    ]
}


def worker(world: int, out: str) -> None:
    harness.run_cases(world, out, lambda: CASES[world])


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_pipeline_x_data_parallel_equals_single_process(tmp_path):
    results = harness.launch_cases(__file__, 4, tmp_path)
    assert [r["case"] for r in results] == [harness.case_name(c) for c in CASES[4]]
    tied = {r["case"]: r["tied"] for r in results if "/tied" in r["case"]}
    assert tied == {
        "1f1b(M=4)/tied/dp2": 1,
        "zbv(M=3)/tied/dp2": 0,
        "1f1b(M=4)/tied/dp2/accumulate": 1,
        "1f1b(M=4)/tied/dp2/accumulate/no_sync": 1,
        "1f1b(M=4)/tied/dp2/accumulate/no_sync/zero_inside": 1,
    }, tied
    # three accumulated steps: three reductions of rank 0's one stage, one under no_sync
    reductions = {r["case"]: r["reductions"] for r in results[-4:]}
    assert reductions == {
        "1f1b(M=4)/tied/dp2/accumulate": 3,
        "1f1b(M=4)/tied/dp2/accumulate/no_sync": 1,
        "interleaved_1f1b(M=4,v=2)/mlp/iw/dp2/accumulate/no_sync": 2,  # its two stages, once
        "1f1b(M=4)/tied/dp2/accumulate/no_sync/zero_inside": 2,  # before and after the window
    }, reductions


if __name__ == "__main__":
    worker(int(sys.argv[1]), sys.argv[2])
