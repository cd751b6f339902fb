"""Printing and re-parsing the IR is the identity; so is the JSON program form."""

from __future__ import annotations

import json

from hypothesis import given, reject
from hypothesis import strategies as st

from ppir.diagnostics import PpirError
from ppir.frontend.loader import load_schedule, load_text
from ppir.ir.printer import format_pps, from_json, to_json
from ppir.passes import LowerComms

BUILTINS = ["gpipe", "1f1b", "interleaved_1f1b", "interleaved_vshape", "looped_bfs"]


@st.composite
def lowered_schedules(draw):
    name = draw(st.sampled_from(BUILTINS))
    P = draw(st.integers(1, 5))
    v = draw(st.integers(1, 3))
    M = draw(st.integers(1, 3 * P))
    params = {"P": P, "M": M} | (
        {"v": v} if name in ("interleaved_1f1b", "interleaved_vshape", "looped_bfs") else {}
    )
    try:
        s = load_schedule(name, params)
    except PpirError:
        reject()  # a require failed for these parameters
    strategy = draw(st.sampled_from(["lockstep", "naive", None]))
    return s if strategy is None else LowerComms(strategy).apply(s)


@given(lowered_schedules())
def test_print_parse_roundtrip(s):
    assert load_text(format_pps(s), path="<roundtrip>") == s


@given(lowered_schedules())
def test_json_roundtrip(s):
    obj = to_json(s)
    assert from_json(json.loads(json.dumps(obj))) == s
    assert obj["format"] == "ppir.program/1"
    assert len(obj["programs"]) == s.ranks


def test_printed_ir_golden(golden):
    for name, params in [
        ("1f1b", {"P": 3, "M": 4}),
        ("interleaved_1f1b", {"P": 2, "M": 4, "v": 2}),
        ("interleaved_vshape", {"P": 2, "M": 2, "v": 2}),
    ]:
        s = LowerComms().apply(load_schedule(name, params))
        golden(f"ir/{name}.pps", format_pps(s))
    naive = LowerComms("naive").apply(load_schedule("1f1b", {"P": 3, "M": 4}))
    golden("ir/1f1b_naive.pps", format_pps(naive))
