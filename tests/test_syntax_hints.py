"""Syntax errors a new user met, each pointed where the fix goes with a hint that says it: a
header without its '()', a 'while' loop, three dots for a range (the goldens syntax_*.err hold
the rendered forms)."""

from __future__ import annotations

import pytest

import ppir

BODY = "ranks 2\nmicrobatches 2\nprogram r {\n  %s\n}\n"


def _error(text: str) -> ppir.PpirError:
    with pytest.raises(ppir.PpirError) as e:
        ppir.load_text(text, path="x.pps")
    assert e.value.kind == "syntax-error"
    return e.value


@pytest.mark.parametrize(
    "text",
    [
        "schedule lit2\nranks 2\n",  # was "2:1: unexpected 'ranks'", at the next line
        "schedule lit2   # a comment\n\n# another\nranks 2\n",
        "schedule lit2 P = 2\n",
        "schedule lit2",  # the end of the file
        "schedule lit2\n",
    ],
)
def test_a_header_without_its_parameter_list_is_pointed_at_where_the_list_goes(text):
    e = _error(text)
    assert e.message == "the header 'schedule lit2' lacks its parameter list"
    assert (e.diagnostics[0].span.line, e.diagnostics[0].span.col) == (1, 14)
    assert e.diagnostics[0].hints == (
        "list its parameters in parentheses, '()' when there are none: schedule lit2()",
    )


@pytest.mark.parametrize(
    "line, message, col, hint",
    [
        ("while 1 {\n F(0)\n }", "unexpected '1'", 9,
         "'while' is not a .pps statement: a loop is 'for m in 0 .. M { ... }' (m from 0 to "
         "M - 1)"),
        ("while (1) {\n F(0)\n }", "unexpected '{'", 13, "'while' is not a .pps statement"),
        ("for m in 0 ... 2 { F(m) }", "unexpected '...'", 14,
         "a range is written with two dots, 'for m in 0 .. M' (m from 0 to M - 1)"),
        ("let a = 1.5", "unexpected character '.'", 12,
         "numbers are integers; '.' only appears in a range, 'a .. b'"),
        ("F m", "unexpected 'm'", 5,
         "'F' starts a call here, its arguments in parentheses: F(...)"),
    ],
)  # fmt: skip
def test_statements_written_as_elsewhere_get_a_hint(line, message, col, hint):
    e = _error("schedule x()\n" + BODY % line)
    assert e.message == message and e.diagnostics[0].span.col == col
    assert any(h.startswith(hint) for h in e.diagnostics[0].hints), e.diagnostics[0].hints


@pytest.mark.parametrize(
    "line, word, meant",
    [
        ("stagse 2", "stagse", "stages"),
        ("microbatchs 2", "microbatchs", "microbatches"),
        ("Ranks 2", "Ranks", "ranks"),
        ("placment looped", "placment", "placement"),
        ("placement lopped", "lopped", "looped"),
        ("pipelnes 1", "pipelnes", "pipelines"),
        ("forward_olny", "forward_olny", "forward_only"),
        ('requir 1 >= 1 : "x"', "requir", "require"),
    ],
)
def test_a_misspelt_declaration_keyword_gets_a_did_you_mean(line, word, meant):
    e = _error(f"schedule x()\nranks 2\n{line}\nmicrobatches 2\n")
    assert e.message == f"unexpected '{word}'"
    assert e.diagnostics[0].span.line == 3
    assert e.diagnostics[0].hints[0] == f"did you mean '{meant}'?"


def test_a_name_far_from_every_keyword_gets_no_guess():
    e = _error("schedule x()\nranks 2\nzzz 3\n")
    assert not any("did you mean" in h for h in e.diagnostics[0].hints)
    assert e.diagnostics[0].hints[0].startswith("expected 'def', 'forward_only', ")


@pytest.mark.parametrize(
    "stmt,word",
    [
        ("if r == 0 { F(0) } elif r == 1 { F(1) }", "elif"),  # was: "elif starts a call here,
        ("if r == 0 { F(0) } elif (r == 1) { F(1) }", "elif"),  # its arguments in (...)"
        ("if r == 0 { F(0) }\n  elsif r == 1 { F(1) }", "elsif"),
        ("if r == 0 { F(0) } elseif r == 1 { F(1) }", "elseif"),
    ],
)
def test_elif_is_told_to_be_else_if(stmt, word):
    e = _error(BODY % stmt)
    assert e.diagnostics[0].hints == (
        f"'{word}' is not a .pps keyword: write 'if a {{ ... }} else if b {{ ... }} else "
        "{ ... }'",
    )


@pytest.mark.parametrize(
    "text, col",
    [
        ("schedule x()\n" + BODY % "for m in 0 .. 2 { F(m); B(m) }", 25),
        ("schedule x()\nranks 2; microbatches 2\n", 8),
    ],
)
def test_a_semicolon_between_statements_is_told_they_need_no_separator(text, col):
    e = _error(text)
    assert e.message == "unexpected character ';'" and e.diagnostics[0].span.col == col
    assert e.diagnostics[0].hints == (
        "statements need no separator: write them one after another, on one line or on "
        "separate lines ('F(m)  B(m)')",
    )


def test_a_semicolon_between_literal_actions_is_told_they_are_separated_by_spaces():
    e = _error("rank 0: 0F0; 0B0\n")
    assert e.diagnostics[0].hints == (
        "actions are separated by spaces; ';' appears only inside an overlapped step, "
        "written without spaces: (0F3;3B1)OVERLAP_F_B",
    )
    # the hint is true: without the ';' the line reads, and an overlapped step holds one
    assert ppir.load_text("rank 0: 0F0 0B0\n", path="x.pps").programs[0]
    assert ppir.load_text("rank 0: (0F0;0B0)OVERLAP_F_B\n", path="x.pps").programs[0]


def test_the_misspelt_statement_words_are_the_grammars_statement_keywords():
    """The did-you-mean for a misspelt statement keyword ('fro m in', 'lett') reads a list of
    the words that start a statement; it must be the grammar's, both ways, so that a statement
    the grammar gains is suggested too (and a word it drops is not)."""
    import re
    from pathlib import Path

    from ppir.frontend.syntax_errors import _STATEMENT_WORDS

    text = (Path(__file__).parents[1] / "grammar" / "pps.lark").read_text()
    stmt = re.search(r"^\?stmt:(.*?)^\S", text, re.S | re.M).group(1)
    rules = re.findall(r"\b(\w+_stmt)\b", stmt)
    words = set()
    for rule in rules:
        body = re.search(rf"^{rule}:(.*)$", text, re.M).group(1)
        words.update(re.findall(r'"([a-z_]+)"', body)[:1])  # the keyword that starts it
        words.update(w for w in re.findall(r'"([a-z_]+)"', body) if w == "else")
    assert set(_STATEMENT_WORDS) == words, (rules, words)
