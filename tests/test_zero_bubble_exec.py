"""The zero-bubble built-ins run on the executor and give the single-process gradients.

One gloo launch per world size runs every case (ZB-H1, ZB-H2, ZB-V, DualPipeV with its
overlapped steps, V-Half and a synthesised schedule) through the harness
(:func:`harness.run_case`): two training steps, every parameter gradient and the loss
compared with the single-process reference.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402

CASES = {
    2: [
        ("zb_h1", {"M": 3}, "mlp", None),
        ("zb_h2", {"M": 4}, "mlp", None),
        ("zbv", {"M": 3}, "mlp", None),
        ("dualpipev", {"M": 4}, "mlp", None),
        ("v_half", {"M": 4}, "mlp", None),
        ("@synth", {"M": 4, "cap": 1}, "mlp", None),
    ],
    4: [
        ("zb_h1", {"M": 4}, "mlp", None),
        ("zb_h2", {"M": 8}, "mlp", None),
        ("zbv", {"M": 7}, "mlp", None),
        ("dualpipev", {"M": 8}, "mlp", None),
        ("dualpipev", {"M": 9}, "mlp", None),
        ("v_half", {"M": 6}, "mlp", None),
        ("@synth", {"M": 6, "cap": 2}, "mlp", None),
    ],
}


def _materialise(case, P: int, tmp: Path):
    """``@synth`` cases become a synthesised literal .pps file in ``tmp``."""
    name, params, model, tr = case
    if name != "@synth":
        return case
    from ppir.ir.printer import format_pps
    from ppir.synth.search import synthesize

    res = synthesize(P, params["M"], params["cap"])
    path = tmp / f"synth_P{P}_M{params['M']}_cap{params['cap']}.pps"
    path.write_text(format_pps(res.schedule))
    return (str(path), dict(params), model, tr)


def worker(P: int, out: str) -> None:
    tmp = Path(out).parent
    harness.run_cases(P, out, lambda: [_materialise(c, P, tmp) for c in CASES[P]])


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.parametrize("P", [2, 4])
def test_zero_bubble_grads_equal_single_process(P, tmp_path):
    results = harness.launch_cases(__file__, P, tmp_path)
    assert len(results) == len(CASES[P])


if __name__ == "__main__":
    worker(int(sys.argv[1]), sys.argv[2])
