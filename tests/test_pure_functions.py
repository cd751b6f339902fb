"""Memoized ``def``s: a top-level function that calls only pure builtins and pure functions is
computed once per argument tuple (ppir.frontend.scope.Function).  Expansion must not change:
every built-in expands to the same programs with memoization off, and functions that read
state (``pending_w``), are defined in a program block, or call a function defined later are
computed at each call."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppir import load_schedule, load_text
from ppir.diagnostics import PpirError
from ppir.frontend import interpreter
from ppir.schedules import builtin_names


def _programs(name, params, memo: bool, monkeypatch):
    with monkeypatch.context() as m:
        if not memo:
            m.setattr(interpreter, "pure_calls", lambda *a: False)
        try:
            s = load_schedule(name, params)
        except PpirError as e:
            return e.render()
    return [[(type(it).__name__, str(it)) for it in prog] for prog in s.programs]


@settings(max_examples=120, deadline=None)
@given(
    st.sampled_from(builtin_names()),
    st.integers(1, 6),
    st.integers(1, 14),
    st.sampled_from([1, 2, 3]),
)
def test_builtins_expand_the_same_without_memoization(name, P, M, v):
    mp = pytest.MonkeyPatch()
    params = {"P": P, "M": M, "v": v} if name in ("interleaved_1f1b", "looped_bfs") else {}
    params = params or {"P": P, "M": M}
    assert _programs(name, params, True, mp) == _programs(name, params, False, mp)


HEADER = """schedule t(P = 2, M = 4)
ranks P
stages P
microbatches M
placement looped
"""


def _memo(text: str, name: str):
    """The memo of top-level function ``name`` after expanding ``text`` (None: not pure)."""
    seen = {}
    real = interpreter.Function

    class Spy(real):
        def __init__(self, *args):
            super().__init__(*args)
            seen[self.name] = self

    interpreter.Function = Spy
    try:
        s = load_text(HEADER + text)
    finally:
        interpreter.Function = real
    return s, seen[name].memo


def test_a_pure_function_is_computed_once_per_argument():
    s, memo = _memo(
        "def half(k) = k // 2\n"
        "def twice(k) = 2 * half(k) + min(k, 1)\n"
        "program r { for m in 0 .. M { F(twice(m) // 2) } for m in 0 .. M { B(m) } }\n",
        "twice",
    )
    assert memo == {(0,): 0, (1,): 1, (2,): 3, (3,): 3}
    assert [a.mb for a in s.programs[0][:4]] == [0, 0, 1, 1]


def test_functions_reading_state_or_defined_later_are_not_memoized():
    text = (
        "def waiting() = pending_w()\n"
        "def early(k) = later(k)\n"
        "def later(k) = k\n"
        "program r {\n"
        "  for m in 0 .. M { F(early(m)) }\n"
        "  for m in 0 .. M { I(m) if waiting() > 1 { W(next) } }\n"
        "  for k in 0 .. waiting() { W(next) }\n"
        "}\n"
    )
    s, memo = _memo(text, "waiting")
    assert memo is None
    assert _memo(text, "early")[1] is None  # it calls a function defined after it
    assert _memo(text, "later")[1] == {(m,): m for m in range(4)}
    # pending_w() changes as I and W run: a W follows every I from the second one on, and
    # the last loop runs the one left (a memoized waiting() would have kept its first value)
    kinds = "".join(a.kind.value for a in s.programs[0])
    assert kinds == "FFFF" + "I" + "IW" * 3 + "W"


def test_a_function_in_a_program_block_is_not_memoized():
    text = "program r { def shift(k) = k + r - r\n for m in 0 .. M { F(shift(m)) B(m) } }\n"
    s, memo = _memo(text, "shift")
    assert memo is None
    assert [a.mb for a in s.programs[1] if a.kind.value == "F"] == [0, 1, 2, 3]


def test_a_placement_declared_after_a_call_clears_the_memos():
    # the default looped placement exists as soon as 'ranks' does; a later 'placement' line
    # changes what rank_of() says, and owner(0) must say it too (found in review)
    text = (
        "schedule probe()\n"
        "ranks 2\n"
        "def owner(s) = rank_of(s)\n"
        "let early = owner(0)\n"
        "placement [1, 0]\n"
        'require owner(0) == rank_of(0) : "memoized owner(0) is stale"\n'
        'require early == 0 : "the call before the placement line saw the looped one"\n'
        "microbatches 1\n"
        "program r { F(0) B(0) }\n"
    )
    s = load_text(text)
    assert s.placement == (1, 0)


def test_stages_no_named_placement_fits_yet_leave_no_placement_to_read():
    # 'stages 3' on 2 ranks waits for an explicit placement: until then neither rank_of() nor a
    # memo of a call made before it may answer from the 2-stage looped placement of 'ranks 2'
    text = (
        "schedule probe()\n"
        "ranks 2\n"
        "def owner(s) = rank_of(s)\n"
        "let early = owner(1)\n"
        "stages 3\n"
        "let late = owner(1)\n"
        "placement [0, 1, 1]\n"
        "microbatches 1\n"
        "program r { F(0) B(0) }\n"
    )
    with pytest.raises(PpirError) as e:
        load_text(text)
    assert e.value.kind == "placement-not-ready", e.value.render()
