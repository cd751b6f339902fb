"""The step and op caps refuse a nest of loops before running it (ppir.frontend.trips): a loop
repeated by the loops around it counts its trips times theirs on entry.  The bound is a lower
one: a schedule exactly at a cap still expands, however its loops nest, and loops whose later
runs may be shorter (under an 'if', bounds of the loop variable, a 'let' of the body, the rank,
pending_w) are only counted as they run."""

from __future__ import annotations

import pytest

from ppir.diagnostics import PpirError
from ppir.frontend.expand import expand
from ppir.frontend.parser import parse_text

HEAD = "schedule t(P = 2, M = 2)\nranks P\nmicrobatches M\n"
BIG = 10**9


def _expand(body: str, *, max_steps: int = BIG, max_ops: int = BIG, top: str = ""):
    """Expand ``body`` then ``B(0)`` (one op on each rank) as the program of 2 ranks."""
    return expand(parse_text(HEAD + top + "program r {\n" + body + "\nB(0)\n}\n", "t.pps"),
                  max_steps=max_steps, max_ops=max_ops)  # fmt: skip


def test_a_nest_over_the_step_cap_is_refused_on_entry_not_after_20_seconds():
    with pytest.raises(PpirError) as e:
        _expand("for k in 0 .. 100000 {\n  for j in 0 .. 100000 { }\n}", max_steps=100_000_000)
    assert e.value.kind == "runaway-loop" and e.value.diagnostics[0].span.line == 6
    assert e.value.message == (
        "loops would run more than 100,000,000 iterations in total: this loop runs 100,000, "
        "each of the 200,000 times it is sure to be entered"
    )


def test_a_nest_over_the_op_cap_is_refused_on_entry():
    with pytest.raises(PpirError) as e:
        _expand("for k in 0 .. 10000 {\n  for j in 0 .. 1000 { F(0) }\n}", max_ops=5_000_000)
    assert e.value.kind == "op-limit" and e.value.diagnostics[0].span.line == 6
    assert "would produce more than 5,000,000 ops: this loop emits 1 op" in e.value.message


# (body, steps, ops): the totals over both ranks (without the B(0) of each).  The top level
# defines 'twice' (pure) and 'more' (reads pending_w, so computed at each call).
CASES = [
    ("for k in 0 .. 30 { for j in 0 .. 40 { } }", 2 * (30 + 1200), 0),
    ("for k in 0 .. 10 { for j in 0 .. twice(50) { } }", 2 * (10 + 1000), 0),
    ("for a in 0 .. 3 { for b in 0 .. 4 { for c in 0 .. 5 { F(0) } } }", 2 * (3 + 12 + 60), 120),
    ("for k in 0 .. 40 { for j in 0 .. 40 - k { } }", 2 * (40 + 820), 0),
    ("for a in 0 .. 4 { for b in 0 .. 4 - a { for c in 0 .. 5 { F(0) } } }",
     2 * (4 + 10 + 50), 100),
    ("for k in 0 .. 100 { if k == 0 { for j in 0 .. 100 { F(0) } } }", 2 * 200, 200),
    ("for k in 0 .. 100 { let n = 100 * (k == 0)\n for j in 0 .. n { } }", 2 * 200, 0),
    ("for j in 0 .. 100 * (r == 0) { F(0) }", 100, 100),
    ("for k in 0 .. 2 { I(k) }\nfor k in 0 .. 2 { for j in 0 .. 100 * pending_w() { }  W(next) }",
     2 * (2 + 2 + 200 + 100), 8),
    ("for k in 0 .. 2 { I(k) }\nfor k in 0 .. 2 { for j in 0 .. more(100) { }  W(next) }",
     2 * (2 + 2 + 200 + 100), 8),
    ("for k in 0 .. 10 { for j in 0 .. 10 { FB(0, 0, 1, 0) } }", 2 * (10 + 100), 400),
]  # fmt: skip
TOP = "def twice(x) = 2 * x\ndef more(x) = x * pending_w()\n"


@pytest.mark.parametrize("body, steps, ops", CASES)
def test_a_schedule_exactly_at_the_caps_still_expands(body, steps, ops):
    ops += 2  # the B(0) of each rank
    _expand(body, max_steps=steps, max_ops=max(ops, 8), top=TOP)  # 8: 2 x stages x microbatches
    with pytest.raises(PpirError) as e:  # and one under: the totals are the real ones
        _expand(body, max_steps=steps - 1, top=TOP)
    assert e.value.kind == "runaway-loop"
    if ops > 8:
        with pytest.raises(PpirError) as e:
            _expand(body, max_ops=ops - 1, top=TOP)
        assert e.value.kind == "op-limit"


def test_a_repeated_nest_is_refused_before_its_first_trip():
    """With a cap one under the nest's 120 ops, the nest is refused on its first entry."""
    with pytest.raises(PpirError) as e:
        _expand("for a in 0 .. 3 { for b in 0 .. 4 { for c in 0 .. 5 { F(0) } } }", max_ops=119)
    assert e.value.message.startswith("expansion would produce more than 119 ops")
    assert "each of the 24 times it is sure to be entered" in e.value.message  # 3 x 4 x 2 ranks


def test_a_loop_bounded_by_pending_w_is_not_counted_ahead():
    """pending_w() changes as the program runs, so a loop bounded by it may run shorter later:
    counted as it runs, never refused ahead.  (A def named pending_w, which once made the
    builtin look stable here, is refused: tests/test_reserved_names.py.)"""
    drain = "for k in 0 .. 2 { for j in 0 .. 100 * pending_w() { }  W(next) }"
    body = "for k in 0 .. 2 { I(k) }\n" + drain
    steps = 2 * (2 + 2 + 200 + 100)
    _expand(body, max_steps=steps)
    with pytest.raises(PpirError, match="cannot be named 'pending_w'"):
        _expand(body, max_steps=steps, top="def pending_w() = 0\n")


def test_a_def_calling_pending_w_is_not_memoized():
    """A def that calls pending_w() is computed at each call: memoized, it would answer the
    first count ever after."""
    src = (
        "schedule t(P = 1, M = 3)\nranks P\nmicrobatches M\n"
        "def f(x) = pending_w() + x\n"
        "program r {\n  F(0) I(0)\n  for i in 0 .. f(0) { W(next) }\n"
        "  F(1) I(1) F(2) I(2)\n  for i in 0 .. f(0) { W(next) }\n}\n"
    )
    s = expand(parse_text(src, "t.pps"))
    assert [str(a) for a in s.programs[0]][-2:] == ["0W1", "0W2"]  # was 0W1 alone
