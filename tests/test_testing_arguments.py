"""Arguments of the wrong type or value given to ppir.testing (a second new-user trial's
findings): each is an error naming the argument and the value, never a check that passes
silently or a TypeError from inside the standard library."""

from __future__ import annotations

import pytest

import ppir
from ppir.testing import property_test


def test_property_test_of_an_expanded_schedule_says_what_takes_one():
    """Was os.fspath's 'expected str, bytes or os.PathLike object, not Schedule'."""
    s = ppir.load("1f1b", P=2, M=2)
    with pytest.raises(TypeError) as e:
        property_test(s, over={"P": "2..4"})
    said = str(e.value)
    assert said.startswith("property_test takes a .pps path or a built-in name, got Schedule ")
    assert said.endswith(
        "; an expanded Schedule has its parameters fixed: assert_schedule_ok(schedule)"
    )
    assert len(said) < 300
    with pytest.raises(
        TypeError, match="property_test takes a .pps path or a built-in name, got int 5"
    ):
        property_test(5, over={"P": "2..4"})
