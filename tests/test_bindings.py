"""A name is bound once wherever it is visible (ppir.frontend.bindings): every binder that would
hide a name of its own or an enclosing scope is one ``rebinding`` error at the new binding, with
a note at the hidden one; blocks side by side may reuse a name (goldens: rebinding*.err)."""

from __future__ import annotations

from pathlib import Path

import pytest

import ppir
from ppir.frontend.parser import parse_text

ROOT = Path(__file__).resolve().parent.parent
HEAD = "schedule t(P = 2, M = 2)\nranks P\nmicrobatches M\n"
LOOPS = "  for m in 0 .. M { F(m) }\n  for m in 0 .. M { B(m) }\n"
BODY = HEAD + "program r {\n%s\n" + LOOPS + "}\n"  # the line after 'program' is line 5
GREEDY = HEAD + "stages P\n%s\nprogram r greedy {\n  priority is_w\n}\n"
PATTERN = HEAD + "stages 2 * P\nplacement vshape\nprogram r pattern {\n%s\n}\n"
VHALF = (  # V-Half's building block at P = 2 (docs/language.md)
    "  F(m, 0) at 2 * r + 6 * m\n"
    "  F(m, 1) at 4 - r + 6 * m\n"
    "  I(m, 1) at 8 + 2 * r + 6 * m\n"
    "  I(m, 0) at 13 - r + 6 * m"
)


def _error(text: str) -> ppir.PpirError:
    with pytest.raises(ppir.PpirError) as e:
        parse_text(text, "x.pps")
    return e.value


@pytest.mark.parametrize(
    "text, where, at, hidden, how",
    [
        (BODY % "  let r = 0", "this", (5, 3), (4, 9), "as the rank variable"),
        (BODY % "  for m in 0 .. 1 { for m in 0 .. 1 { } }", "an enclosing", (5, 25), (5, 7),
         "as a loop variable"),
        (BODY % "  for m in 0 .. 1 { let m = 1 }", "this", (5, 21), (5, 7), "as a loop variable"),
        (BODY % "  let P = 1", "an enclosing", (5, 3), (1, 12), "as a schedule parameter"),
        (BODY % "  for M in 0 .. 1 { }", "an enclosing", (5, 7), (1, 19),
         "as a schedule parameter"),
        (BODY % "  def f(r) = r", "an enclosing", (5, 9), (4, 9), "as the rank variable"),
        (BODY % "  def f(a) = a  let f = 1", "this", (5, 17), (5, 3), "by 'def'"),
        (BODY % "  let a = 1  if r == 0 { let a = 2 }", "an enclosing", (5, 26), (5, 3),
         "by 'let'"),
        (BODY % "  if r == 0 { } else if r == 1 { for r in 0 .. 1 { } }", "an enclosing",
         (5, 38), (4, 9), "as the rank variable"),
        (HEAD + "let k = 1\ndef f(k) = k\n", "an enclosing", (5, 7), (4, 1), "by 'let'"),
        # a function runs after its definition: it sees the names bound after it, too
        (HEAD + "def f(k) = k\nlet k = 1\n", "an enclosing", (4, 7), (5, 1), "by 'let'"),
        # a program runs after the whole top level: it sees every top-level name
        (HEAD + "program r { let k = 2 }\nlet k = 1\n", "an enclosing", (4, 13), (5, 1),
         "by 'let'"),
        (HEAD + "let r = 7\nprogram r { }\n", "an enclosing", (5, 9), (4, 1), "by 'let'"),
        (HEAD + "program P greedy { }\n", "an enclosing", (4, 9), (1, 12),
         "as a schedule parameter"),
        (GREEDY % "let mem = 1", "an enclosing", (7, 3), (5, 1), "by 'let'"),
        (PATTERN % ("  let m = 6\n" + VHALF), "an enclosing", (8, 5), (7, 3), "by 'let'"),
    ],
    ids=[
        "let-rank", "loop-in-loop", "let-loop", "let-parameter", "loop-parameter",
        "def-parameter-rank", "let-def", "let-in-if", "loop-in-else-if", "def-parameter-let",
        "def-parameter-later-let", "program-let-later-let", "rank-let", "greedy-rank-parameter",
        "priority-let", "slot-let",
    ],
)  # fmt: skip
def test_a_binding_that_hides_a_visible_name_is_located_with_a_note(text, where, at, hidden, how):
    e = _error(text)
    d = e.diagnostics[0]
    name = d.notes[0].message.split("'")[1]
    assert e.kind == "rebinding" and e.exit_code == 2
    assert d.message.endswith(f"'{name}' is already bound in {where} scope")
    assert (d.span.line, d.span.col) == at
    (note,) = d.notes
    assert (note.span.line, note.span.col) == hidden
    assert note.message.endswith(f" here, {how}")
    assert "name" in d.hints[0]  # every hint says to use another name


def test_the_reported_reproducer_says_rank_variable_first():
    """``let r = 0`` ran every rank as rank 0, and an inner ``for m`` rebound the outer one."""
    text = (ROOT / "tests/golden/errors/rebinding_rank_variable.pps").read_text()
    e = _error(text)
    assert e.message == "'r' is already bound in this scope"
    fixed = text.replace("  let r = 0\n", "")
    e = _error(fixed)
    assert e.message == "'m' is already bound in an enclosing scope"
    assert e.diagnostics[0].span.line == 10 and e.diagnostics[0].notes[0].span.line == 9


def test_the_priority_names_each_ready_op():
    e = _error(GREEDY % "let time = 1")
    assert e.message == (
        "the priority binds 'time' for each ready op, but 'time' is already bound in an "
        "enclosing scope"
    )
    assert e.diagnostics[0].hints == (
        "the priority sees mb, chunk, stage, is_f, is_b, is_w, mem and time as the ready op's: "
        "rename 'time' where the note points",
    )


def test_without_a_priority_the_greedy_names_are_free():
    s = ppir.load_text(
        HEAD + "stages P\nlet mem = 2\nprogram r greedy { memory mem }\n", path="g.pps"
    )
    assert s.ranks == 2


def test_rebinding_is_found_before_anything_runs():
    """Under an ``if`` never taken, and with parameters no one gave."""
    text = "schedule t(P, M)\nranks P\nmicrobatches M\n"
    text += "program r {\n  if r < 0 { for m in 0 .. M { for m in 0 .. M { F(m) } } }\n}\n"
    e = _error(text)
    assert e.kind == "rebinding" and e.diagnostics[0].span.line == 5


def test_blocks_side_by_side_reuse_a_name():
    text = HEAD + (
        "def f(a) = a + 1\n"
        "def g(a) = a\n"
        "program r {\n"
        "  for m in 0 .. M { F(m) }\n"  # sibling loops: the common case in the built-ins
        "  for m in 0 .. M { B(m) }\n"
        "  if r == 0 { let a = 0 } else { let a = 1 }\n"
        "  for i in 0 .. 1 { let b = i }\n"
        "  let b = 2\n"  # the loop's b is gone by now
        "  let i = g(0)\n"
        "  def h(a) = f(a)\n"
        "}\n"
    )
    s = ppir.load_text(text, path="siblings.pps")
    assert [str(a) for a in s.programs[0]] == ["0F0", "0F1", "0B0", "0B1"]


def test_loops_in_turn_reuse_their_variable_in_a_pattern_too():
    s = ppir.load_text(PATTERN % VHALF, path="v.pps")
    assert s.stages == 4


@pytest.mark.parametrize(
    "path",
    sorted((ROOT / "ppir/schedules").glob("*.pps")) + sorted((ROOT / "examples").glob("*.pps")),
    ids=lambda p: p.name,
)
def test_the_built_ins_and_examples_bind_each_name_once(path):
    parse_text(path.read_text(), str(path))


def test_the_first_rebinding_in_the_text_is_reported():
    """The priority's names are bound at its line, before the block's later lets."""
    e = _error(
        GREEDY.replace("  priority is_w\n", "  priority is_w\n  let a = 1\n  let a = 2\n")
        % "let mem = 1"
    )
    assert e.diagnostics[0].span.line == 7 and "'mem'" in e.message
