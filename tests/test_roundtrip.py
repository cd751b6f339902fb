"""Printing and re-parsing the IR is the identity; so is the JSON program form."""

from __future__ import annotations

import json

import pytest
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


@pytest.mark.parametrize("name", ["zb_h1", "interleaved_1f1b", "dualpipev"])
def test_dump_json_reads_back_as_the_same_program(name, cli, tmp_path):
    f = tmp_path / "p.json"
    code, out, _ = cli("dump", name, "-D", "P=4", "-D", "M=8", "--format", "json")
    assert code == 0
    f.write_text(out)
    code, again, _ = cli("dump", str(f), "--format", "json")
    assert code == 0 and json.loads(again)["programs"] == json.loads(out)["programs"]
    a = cli("compile", name, "-D", "P=4", "-D", "M=8", "--format", "json")[1]
    b = cli("compile", str(f), "--format", "json")[1]
    assert json.loads(a)["step_time"] == json.loads(b)["step_time"]


@pytest.mark.parametrize(
    "text, said",
    [
        ('{"format":\n  "ppir.program/1",, }', "p.json:2:20: error: not valid JSON"),
        ('{"format": "x"}', "not a ppir.program/1 program (format: 'x')"),
        ('{"format": "ppir.program/1"}', "malformed ppir.program/1 program: missing key"),
        ('{"format": "ppir.program/1", "programs": [["0Q0"]]}', "not an action: '0Q0'"),
    ],
)
def test_a_bad_json_program_is_one_clear_error(text, said, cli, tmp_path):
    f = tmp_path / "p.json"
    f.write_text(text)
    code, _, err = cli("check", str(f))
    assert code == 2 and said in err and "Traceback" not in err


def test_a_json_program_takes_neither_parameters_nor_a_placement(cli, tmp_path):
    f = tmp_path / "p.json"
    f.write_text(cli("dump", "1f1b", "-D", "P=2", "-D", "M=2", "--format", "json")[1])
    code, _, err = cli("check", str(f), "-D", "P=4")
    assert code == 2 and "unknown parameter 'P': a JSON program takes no -D parameters" in err
    code, _, err = cli("check", str(f), "--placement", "1,0")
    assert code == 2 and "--placement applies to CSV schedules; a JSON program holds" in err
