"""Gradient clipping across a pipeline (multi-process gloo): ``rt.clip_grad_norm_`` computes the
norm single-process ``torch.nn.utils.clip_grad_norm_`` computes on the whole model, a weight
tied across ranks (embedding and head) or twice on one rank (ZB-V) counted once, and clips
every gradient by the same factor.

One launch of 2 ranks runs the cases in :mod:`harness`, which compares the norm and every
clipped gradient with the reference's."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402

CASES = [
    ("1f1b", {"M": 4}, "tied", None, {"clip": 1e-3}),
    ("zbv", {"M": 4}, "tied", None, {"clip": 1e-3}),
    ("interleaved_1f1b", {"M": 4, "v": 2}, "tied", None, {"clip": 1e-3, "accumulate": True}),
]


def worker(P: int, out: str) -> None:
    harness.run_cases(P, out, lambda: CASES)


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_clipping_uses_the_whole_models_norm_each_parameter_once(tmp_path):
    results = harness.launch_cases(__file__, 2, tmp_path)
    assert [r["case"] for r in results] == [harness.case_name(c) for c in CASES]
    tied = {r["case"].split("(")[0]: r["tied"] for r in results}
    assert tied["1f1b"] and tied["interleaved_1f1b"], results  # tied across the two ranks
    assert not tied["zbv"], results  # both copies on rank 0: one parameter there


if __name__ == "__main__":
    worker(int(sys.argv[1]), sys.argv[2])
