"""Worked example (docs/testing.md): property-test a schedule for every shape it will run at.

"For all P in 2..16 and M in P..8P, my_schedule.pps verifies and its peak memory is <= P."
"""

from pathlib import Path

import pytest
from hypothesis import given, settings

from ppir.testing import assert_schedule_ok, property_test, shapes

HERE = Path(__file__).parent
MINE = HERE / "my_schedule.pps"
OVER = {"P": "2..16", "M": "P..8P"}

# One line: a pytest test over every drawn (P, M).
test_my_schedule = property_test(MINE, over=OVER, max_peak_activations="P", examples=15)


# The same property spelled out, for when a test needs more than the built-in checks.  A check
# of a large shape can take longer than hypothesis' default 200 ms deadline: turn it off
# (property_test above does so itself).
@settings(deadline=None)
@given(shapes(MINE, P="2..8", M="P..4P"))
def test_my_schedule_by_hand(params):
    result = assert_schedule_ok(MINE, max_peak_activations="P", **params)
    assert result.peak_activations == params["P"]  # 1F1B: rank 0 holds exactly P


# The same property on a known-bad variant fails, with the shrunk parameters in the message.
bad_property = property_test(
    HERE / "bad_schedule.pps", over=OVER, max_peak_activations="P", examples=15
)


def test_the_property_catches_a_known_bad_schedule():
    with pytest.raises(AssertionError, match=r"bad_schedule\(P=2, M=3\) FAILS"):
        bad_property()
