"""Random parameter choices either expand or give a ppir diagnostic; nothing else escapes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ppir.diagnostics import PpirError
from ppir.frontend.loader import load_schedule

BUILTINS = ["gpipe", "1f1b", "interleaved_1f1b", "interleaved_vshape", "looped_bfs"]
NAMES = ["P", "M", "v", "Q", "p"]


@settings(max_examples=300)
@given(
    st.sampled_from(BUILTINS),
    st.dictionaries(st.sampled_from(NAMES), st.integers(-3, 40), max_size=4),
)
def test_random_parameters_expand_or_diagnose(name, params):
    try:
        s = load_schedule(name, params, max_ops=200_000)
    except PpirError as e:
        assert e.diagnostics and e.render()
        assert e.exit_code == 2
        return
    assert s.ranks >= 1 and s.microbatches >= 1
    assert sum(len(p) for p in s.programs) == 2 * s.stages * s.microbatches
