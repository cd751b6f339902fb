"""Gradient accumulation (multi-process gloo): ``rt.step`` called several times before one
optimizer step accumulates into ``param.grad`` exactly as single-process training does, also
for a weight tied across ranks (embedding and head), whose copies must not count an earlier
step's gradient again when they are summed.

One launch of 2 ranks runs the cases in :mod:`harness`, which zeroes the gradients before the
first step only and compares every gradient after each step with the reference's.
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
]


def worker(P: int, out: str) -> None:
    harness.run_cases(P, out, lambda: CASES)


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_accumulated_steps_equal_single_process_with_tied_weights(tmp_path):
    results = harness.launch_cases(__file__, 2, tmp_path)
    assert [r["case"] for r in results] == [harness.case_name(c) for c in CASES]
    assert all(r["tied"] for r in results), results  # the cases do tie a weight across ranks


if __name__ == "__main__":
    worker(int(sys.argv[1]), sys.argv[2])
