"""The examples of docs/language.md (and of README's "Writing a schedule") do what the page says:
each code block is taken from the page itself and run, and each error message the page quotes
is what ppir prints for a small schedule that makes it.  Editing an example or a message on the
page, or the code behind it, without the other fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ppir import load_schedule, load_text
from ppir.diagnostics import PpirError

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "language.md").read_text()
BLOCKS = re.findall(r"```\n(.*?)```", DOC, re.S)
PROSE = " ".join(DOC.split())  # quoted messages may wrap across lines

V_HEAD = "schedule v(P = 4, M = 8)\nranks P\nstages 2 * P\nmicrobatches M\nplacement vshape\n"


def _block(start: str) -> str:
    [block] = [b for b in BLOCKS if b.lstrip().startswith(start)]
    return block


def _orders(schedule) -> tuple:
    return tuple(tuple(str(a) for a in p) for p in schedule.programs)


def test_the_opening_example_is_the_built_in_1f1b():
    block = _block("# 1F1B")
    builtin = load_schedule("1f1b", {"P": 4, "M": 8})
    assert _orders(load_text(block, path="1f1b.pps")) == _orders(builtin)
    readme = (ROOT / "README.md").read_text().split("## Writing a schedule", 1)[1]
    [example] = re.findall(r"```\n(.*?)```", readme.split("\n## ", 1)[0], re.S)
    assert _orders(load_text(example, path="1f1b.pps")) == _orders(builtin)


def test_the_rebinding_example_prints_what_the_page_shows():
    shown = _block("s.pps:7:3")
    source = "schedule s(P = 2, M = 2)\nranks P\nmicrobatches M\n\n\nprogram r {\n  let r = 0\n}\n"
    with pytest.raises(PpirError) as e:
        load_text(source, path="s.pps")
    assert e.value.render() == shown.rstrip("\n")


def test_the_greedy_example_builds_a_schedule():
    s = load_text(V_HEAD + _block("program r greedy"), path="g.pps")
    assert s.stages == 8 and all(s.programs)


def test_the_pattern_example_is_v_half():
    s = load_text(V_HEAD + _block("program r pattern"), path="v.pps")
    assert _orders(s) == _orders(load_schedule("v_half", {"P": 4, "M": 8}))


HEAD = "schedule d(P = {P}, M = 4)\nranks P\nmicrobatches M\n"


@pytest.mark.parametrize(
    "P,body,quoted",
    [
        (
            1,
            "let x = 4 // (P - 1)\nprogram r { F(0) B(0) }",
            "division by zero: P - 1 is 0 in '//' (with P = 1)",
        ),
        (
            4,
            "program r { F(M - r) }",
            "microbatch 4 is out of range 0..3 (microbatches = 4) on rank 0 (with M = 4, r = 0)",
        ),
        (
            4,
            "ranks P - 4\nprogram r { F(0) }",
            "ranks must be at least 1, got P - 4 = 0 (with P = 4)",
        ),
        (
            2,
            "program r { for m in 0 .. M { F(m) } for m in M .. 0 { B(m) } }",
            "4 .. 0 (with M = 4)",
        ),
        (
            2,
            "program r {\n  for m in 0 .. M { F(m) I(m) }\n  for m in 0 .. M - 1 { W(m) }\n}",
            "stage 0's other backward-weight passes (W) run here (0W2)",
        ),
    ],
)
def test_quoted_messages_are_what_ppir_prints(P, body, quoted, cli, tmp_path):
    assert quoted in PROSE
    path = tmp_path / "d.pps"
    source = HEAD.format(P=P) + body + "\n"
    if body.startswith("ranks"):
        source = source.replace("ranks P\n", "", 1)
    path.write_text(source)
    code, _, err = cli("check", str(path))
    assert code != 0 and quoted in " ".join(err.split()), err
