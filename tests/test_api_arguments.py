"""Arguments of the wrong type or value given to the Python API (a second new-user trial's
findings): each is an error naming the argument and the value, not an AttributeError, KeyError
or TypeError from deep inside."""

from __future__ import annotations

import pytest

import ppir


@pytest.mark.parametrize("mode", [1, True, None, ["full"]])
def test_a_recompute_mode_of_another_type_is_named(mode):
    """Was "AttributeError: 'int' object has no attribute 'lower'" from did_you_mean."""
    s = ppir.load("1f1b", P=2, M=2)
    for call in (
        lambda: ppir.analyze(s, "llama3-8b", recompute=mode),
        lambda: ppir.analyze(s, recompute=mode),
        lambda: ppir.make_config({"model": {"preset": "llama3-8b", "recompute": mode}}),
    ):
        with pytest.raises(ppir.PpirError) as e:
            call()
        assert e.value.message == f"recompute takes a mode name, got {type(mode).__name__} {mode!r}"
        assert "hint: modes: none, selective, full" in str(e.value)
