"""Gradient accumulation and clipping across a pipeline (multi-process gloo), one launch of 2
ranks running the cases in :mod:`harness` against single-process training:

* accumulation: ``rt.step`` called several times before one optimizer step accumulates into
  ``param.grad`` exactly as single-process training does, also for a weight tied across ranks
  (embedding and head), whose copies must not count an earlier step's gradient again when
  they are summed (the harness zeroes the gradients before the first step only);
* clipping: ``rt.clip_grad_norm_`` computes the norm ``torch.nn.utils.clip_grad_norm_``
  computes on the whole model, a weight tied across ranks or twice on one rank (ZB-V) counted
  once, and clips every gradient by the same factor (the harness compares the norms too).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402

CASES = [
    ("1f1b", {"M": 4}, "tied", None, {"accumulate": True}),
    ("interleaved_1f1b", {"M": 4, "v": 2}, "tied", "iw", {"accumulate": True}),
    ("1f1b", {"M": 4}, "tied", None, {"clip": 1e-3}),
    ("zbv", {"M": 4}, "tied", None, {"clip": 1e-3}),
    ("interleaved_1f1b", {"M": 4, "v": 2}, "tied", None, {"clip": 1e-3, "accumulate": True}),
]


def worker(P: int, out: str) -> None:
    harness.run_cases(P, out, lambda: CASES)


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_accumulated_and_clipped_gradients_equal_single_process_with_tied_weights(tmp_path):
    results = harness.launch_cases(__file__, 2, tmp_path)
    assert [r["case"] for r in results] == [harness.case_name(c) for c in CASES]
    tied = [r["tied"] for r in results]
    assert all(tied[:3]) and tied[4], results  # tied across the two ranks
    assert not tied[3], results  # ZB-V: both copies on rank 0, one parameter there


if __name__ == "__main__":
    worker(int(sys.argv[1]), sys.argv[2])
