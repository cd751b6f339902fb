"""A schedule that is not a built-in, checked the way docs/testing.md describes: 1F1B with K
extra warm-up forwards (eager_1f1b.pps beside this file)."""

from pathlib import Path

from hypothesis import given, settings

import ppir
from ppir.testing import assert_schedule_ok, property_test, shapes

EAGER = Path(__file__).parent / "eager_1f1b.pps"
OVER = {"P": "2..8", "M": "1..4P", "K": "0..4"}

# For every shape: it verifies and no rank holds more than P + K activations.
test_eager_1f1b = property_test(EAGER, over=OVER, max_peak_activations="P + K", examples=20)


@settings(deadline=None, max_examples=20)
@given(shapes(EAGER, **OVER))
def test_rank_0_holds_exactly_its_warm_up_plus_one(params):
    result = assert_schedule_ok(EAGER, max_peak_activations="P + K", **params)
    assert result.peak_activations == min(params["P"] + params["K"], params["M"])


@settings(deadline=None, max_examples=10)
@given(shapes(EAGER, P="2..6", M="P..3P", K=0))
def test_no_extra_warm_up_is_the_built_in_1f1b(params):
    mine = ppir.load(EAGER, **params).programs
    theirs = ppir.load("1f1b", P=params["P"], M=params["M"]).programs
    assert [[str(a) for a in p] for p in mine] == [[str(a) for a in p] for p in theirs]


def test_extra_warm_up_hides_message_latency():
    """With messages costing half a forward, each extra warm-up forward shortens the step until
    the sends are hidden (P=4, M=16: 71, 70, 69, then no further gain)."""
    costs = ppir.make_config({"comm": {"latency": "0.5"}})  # as --comm-latency 0.5
    steps = [
        ppir.compile(ppir.load(EAGER, P=4, M=16, K=k), costs=costs).step_time for k in range(4)
    ]
    assert steps[0] > steps[1] > steps[2] == steps[3]
